//! The registry's waits after a new epoch (DESIGN.md §6 "Leases, epochs and the wait"): how
//! long it grants nothing and hands out no range, counted with the longest lease it ever
//! answered, and a whole lease after a recovery whatever epoch follows it; a restarted registry grants again after one longest lease.

use std::thread;
use std::time::{Duration, Instant};

use idgen_cluster_tests::registry::{
    auto_fast, failure_text, held_worker, node, registry, status, DURABLE,
};
use idgen_cluster_tests::{sqlstate, Cluster, One};

/// A registry whose longest lease is `max_lease`.
fn registry_with_max_lease(tag: &str, max_lease: &str) -> Cluster {
    let longest = format!("idgen.registry_max_lease = {max_lease}");
    Cluster::with_idgen(tag, 0, &[DURABLE[0], DURABLE[1], &longest])
}

/// Seconds from the registry's last completed recovery to when the hello of node `probe` says
/// ranges (`ranges_from`) and grants (`grants_from`) resume.
fn waits_after_recovery(reg: &Cluster, probe: &str) -> (f64, f64) {
    let row = reg
        .connect("postgres")
        .query_one(
            "SELECT extract(epoch FROM h.ranges_from - s.recovered_at)::float8, \
                    extract(epoch FROM h.grants_from - s.recovered_at)::float8 \
               FROM idgen_registry_hello($1::text, $1::text, 0, 5432) h, idgen_registry_server s",
            &[&probe],
        )
        .unwrap();
    (row.get(0), row.get(1))
}

/// Opens and completes a recovery, skipping the probe nodes (they hold nothing).
fn recover_now(reg: &Cluster) {
    let mut r = reg.connect("postgres");
    r.batch_execute("SELECT idgen_registry_begin_recovery('a test')")
        .unwrap();
    r.batch_execute(
        "SELECT * FROM idgen_registry_recover(skip_nodes => ARRAY(SELECT node_name FROM idgen_registry_node))",
    )
    .unwrap();
}

/// A restart right after a recovery (allowed without an operator) starts a new epoch, and
/// ranges after a plain epoch wait only half a lease; they must still wait a whole lease after
/// the recovery, since a node the recovery skipped serves its cached ranges up to a lease after
/// its last contact. (Before, the restart cut the ranges' wait to
/// half a lease after the restart: here 6 s after it instead of 11 s after the recovery.)
#[test]
fn a_restart_right_after_a_recovery_keeps_the_ranges_wait_of_the_recovery() {
    let reg = registry_with_max_lease("waits_restart", "10s");
    reg.connect("postgres")
        .query_one(
            "SELECT 1 FROM idgen_registry_hello('probe0', 'probe0', 0, 5432)",
            &[],
        )
        .unwrap();
    recover_now(&reg);
    reg.stop("fast");
    reg.start_server();
    let (ranges, grants) = waits_after_recovery(&reg, "probe1");
    assert!(
        ranges >= 11.0,
        "ranges resume {ranges:.1} s after the recovery, before a whole lease (10 s) and a second"
    );
    assert!(
        grants >= 11.0,
        "grants resume {grants:.1} s after the recovery"
    );
    // And the registry refuses a range now (its check, not only the hello's answer).
    let refused = reg
        .connect("postgres")
        .batch_execute("SELECT idgen_registry_check_open(false)")
        .unwrap_err();
    assert_eq!(
        refused.code().map(|c| c.code()),
        Some("55P03"),
        "{refused:?}"
    );
}

/// Lowering `idgen.registry_max_lease` (a reload) does not shorten the waits after an epoch
/// below the longest lease the registry answered: a node may still hold a lease that long.
/// (Before, the waits counted with the new, shorter setting.)
#[test]
fn lowering_the_longest_lease_does_not_shorten_the_waits() {
    let reg = registry_with_max_lease("waits_lowered", "10s");
    // A hello answers the 10 s longest lease (and the registry records it).
    let answered: i64 = reg
        .connect("postgres")
        .one("SELECT max_lease_ms FROM idgen_registry_hello('probe0', 'probe0', 0, 5432)");
    assert_eq!(answered, 10_000);
    reg.append_settings(&["idgen.registry_max_lease = 2s"]);
    reg.connect("postgres")
        .batch_execute("SELECT pg_reload_conf()")
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let now: i64 = reg
        .connect("postgres")
        .one("SELECT idgen_registry_max_lease_ms()");
    assert_eq!(now, 2_000, "the reload took effect");
    recover_now(&reg);
    let (ranges, grants) = waits_after_recovery(&reg, "probe1");
    assert!(
        grants >= 11.0 && ranges >= 11.0,
        "after the reload the waits are {grants:.1} s (grants) and {ranges:.1} s (ranges), below the 10 s lease answered before"
    );
}

/// The registry's recorded server identity (`idgen_registry_server`), if it has one.
fn server_identity(reg: &Cluster) -> Option<String> {
    reg.connect("postgres")
        .query_opt("SELECT server_identity FROM idgen_registry_server", &[])
        .unwrap()
        .map(|r| r.get(0))
}

/// A registry restarted while no lease is being renewed
/// (node A stopped cleanly, so nothing renews) withholds grants for its wait after a start,
/// one longest lease (`idgen.registry_max_lease`) and a second, and then grants again: a wait
/// derived from its postmaster's start, which no refused claim can roll back or prolong.
/// Pinned: A, started again after the registry's restart, holds a worker id within 30 s; its
/// grant was made no earlier than the registry's start plus that wait; a restart is the same
/// server (its `server_identity` unchanged, no recovery opened); A issues ids. The removed
/// probation (`idgen_registry_probation()`) is gone (42883).
#[test]
fn a_restarted_registry_grants_again_after_one_longest_lease() {
    let reg = registry("review2_prob_reg");
    let a = node(&reg, "review2_prob_a", &auto_fast(&[]));
    held_worker(&a, Duration::from_secs(20));
    let before = server_identity(&reg);
    assert!(before.is_some(), "the registry recorded no server identity");
    assert_eq!(
        sqlstate(
            reg.connect("postgres")
                .query("SELECT * FROM idgen_registry_probation()", &[])
        ),
        "42883",
        "idgen_registry_probation() is gone"
    );
    a.stop("fast");
    reg.stop("fast");
    reg.start_server();
    a.start_server();

    let mut client = a.connect("postgres");
    let started = Instant::now();
    let mut last = status(&mut client);
    while started.elapsed() < Duration::from_secs(30) {
        last = status(&mut client);
        if last.0 == "held" && last.1.is_some() {
            break;
        }
        thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(
        last.0,
        "held",
        "A {:?} after the registry's restart, waited {:?}: worker {:?}, last error {:?}",
        last.0,
        started.elapsed(),
        last.1,
        last.2
    );
    let w = last.1.unwrap();
    let mut r = reg.connect("postgres");
    let row = r
        .query_one(
            "SELECT l.claimed_at >= pg_postmaster_start_time() \
                    + make_interval(secs => (idgen_registry_max_lease_ms() + 1000) / 1000.0), \
                    l.claimed_at::text, pg_postmaster_start_time()::text, \
                    s.server_identity, s.recovery_since IS NULL \
             FROM idgen_registry_lease l, idgen_registry_server s WHERE l.worker_id = $1",
            &[&w],
        )
        .unwrap_or_else(|e| panic!("A's lease: {}", failure_text(&e)));
    let (waited, claimed_at, start): (bool, String, String) = (row.get(0), row.get(1), row.get(2));
    assert!(
        waited,
        "A was granted worker id {w} at {claimed_at}, within a longest lease of the registry's \
         start at {start}"
    );
    let (after, no_recovery): (Option<String>, bool) = (row.get(3), row.get(4));
    assert_eq!(
        after, before,
        "the registry's server_identity after a restart"
    );
    assert!(no_recovery, "a restart of the registry opened a recovery");
    a.connect("postgres")
        .query_one("SELECT snowflake_nextval()", &[])
        .unwrap_or_else(|e| panic!("A's id after the grant: {}", failure_text(&e)));
}
