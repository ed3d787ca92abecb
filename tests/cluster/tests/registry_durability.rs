//! The registry's side of the fault model (DESIGN.md §6 "Fault model"), against real servers:
//! a registry grants worker ids and hands out global ranges only while it can show that it
//! keeps the commits it acknowledges (a synchronous standby streaming, or its operator's
//! declaration of a single durable server, with `fsync` and `synchronous_commit` on), and it
//! bounds what a member sends: leases (review finding S8), final reservations (S7), a global
//! segment's start (S11); and a node talks to a registry off its machine only over TLS (S12).

use std::time::Duration;

use idgen_cluster_tests::registry::{
    auto_fast, direct_hello, held_worker, intruder, node, registry, registry_setting, state_of,
    DIRECT_CLAIM, DURABLE,
};
use idgen_cluster_tests::{db_error, sqlstate, wait_for, Cluster, One, STANDBY_NAME};

/// The fleet layout of the direct calls below: epoch 2024-01-01, 10 worker bits, 12 sequence
/// bits, 1 ms ticks.
const EPOCH_MS: i64 = 1_704_067_200_000;

/// A registry with `fsync` but neither a synchronous standby nor the declaration refuses a
/// node's claim and a global segment's range with 55000 and says why; the node's status shows
/// it. A session cannot declare it (the setting is a reload setting), a role whose
/// `synchronous_commit` is `off` is refused even after the operator's declaration, and the
/// declaration, reloaded, lets the waiting node in.
#[test]
fn a_registry_that_cannot_show_it_keeps_commits_grants_and_hands_out_nothing() {
    let reg = Cluster::with_idgen(
        "dur_plain",
        0,
        &["fsync = on", "idgen.registry_max_lease = 2s"],
    );
    let n = node(&reg, "dur_plain_n", &auto_fast(&[]));
    let mut client = n.connect("postgres");
    let (state, worker, error) = wait_for("a refused claim", Duration::from_secs(20), || {
        let s = state_of(&n);
        s.2.is_some().then_some(s)
    });
    assert_ne!(state, "held", "{worker:?}");
    let error = error.unwrap();
    assert!(
        error.contains("cannot show that it keeps the commits it acknowledges"),
        "{error}"
    );

    // A global segment: created (creation hands out nothing), its first range refused.
    client
        .batch_execute("SELECT segment_create('dur_g', scope => 'global')")
        .unwrap();
    let e = db_error(client.query_one("SELECT segment_nextval('dur_g')", &[]));
    assert!(
        e.message().contains("cannot show") || e.detail().unwrap_or("").contains("cannot show"),
        "{e:?}"
    );

    // No session can declare it: the setting is read from the configuration only.
    let mut r = reg.connect("postgres");
    assert_eq!(
        sqlstate(r.batch_execute("SET idgen.registry_single_server = on")),
        "55P02"
    );

    // The operator declares it: the node gets its worker id.
    r.batch_execute("ALTER SYSTEM SET idgen.registry_single_server = on")
        .unwrap();
    r.batch_execute("SELECT pg_reload_conf()").unwrap();
    let w = held_worker(&n, Duration::from_secs(20));
    assert_eq!(
        client.one::<i64>("SELECT segment_nextval('dur_g')"),
        1,
        "worker {w}"
    );

    // A member whose synchronous_commit is off is refused, declaration or not.
    r.batch_execute(
        "CREATE ROLE lazy LOGIN IN ROLE idgen_registry; ALTER ROLE lazy SET synchronous_commit = off",
    )
    .unwrap();
    let mut lazy = reg.connect_as("postgres", "lazy");
    let e = db_error(lazy.query_one(
        DIRECT_CLAIM,
        &[
            &"lazy-node",
            &"inc",
            &"s".repeat(64),
            &"sys",
            &1i32,
            &None::<i32>,
            &EPOCH_MS,
            &10i32,
            &12i32,
            &1i32,
        ],
    ));
    assert_eq!(e.code().code(), "55000", "{e:?}");
    assert!(
        e.detail()
            .unwrap_or("")
            .contains("synchronous_commit is off"),
        "{e:?}"
    );
}

/// A registry with a synchronous standby streaming grants without any declaration.
#[test]
fn a_registry_with_a_synchronous_standby_grants() {
    let reg = Cluster::with_idgen(
        "dur_sync",
        0,
        &["fsync = on", "idgen.registry_max_lease = 2s"],
    );
    let _standby = Cluster::standby_of(&reg, "dur_sync_standby", &[]);
    let mut r = reg.connect("postgres");
    r.batch_execute(&format!(
        "ALTER SYSTEM SET synchronous_standby_names = '{STANDBY_NAME}'"
    ))
    .unwrap();
    r.batch_execute("SELECT pg_reload_conf()").unwrap();
    wait_for("a synchronous standby", Duration::from_secs(20), || {
        r.one::<bool>(
            "SELECT EXISTS (SELECT FROM pg_stat_replication WHERE sync_state = 'sync' \
             AND state = 'streaming')",
        )
        .then_some(())
    });
    let n = node(&reg, "dur_sync_n", &auto_fast(&[]));
    held_worker(&n, Duration::from_secs(20));
}

/// S8: a member stores no lease and no renewal interval beyond what the registry grants
/// (`idgen.registry_max_lease` on the registry, 2 s here; before, 2^31 - 1 ms made the next
/// probation last weeks); a node cannot ask for more than 120 s either.
#[test]
fn a_lease_beyond_the_registrys_longest_is_refused() {
    let reg = registry("dur_lease");
    let mut member = intruder(&reg);
    direct_hello(&mut member, "n1");
    let claim = |lease: i32, renew: i32| {
        format!(
            "SELECT * FROM idgen_registry_claim('n1', 'inc1', repeat('a', 64), 'sys', 1, NULL, \
             {EPOCH_MS}, 10, 12, 1, {lease}, {renew}, 0, 5432)"
        )
    };
    for (lease, renew) in [
        (2_147_483_647, 200),
        (2001, 200),
        (2000, 2_147_483_647),
        (2000, 700),
        (99, 10),
    ] {
        assert_eq!(
            sqlstate(member.batch_execute(&claim(lease, renew))),
            "22023",
            "lease {lease} ms, renewals every {renew} ms"
        );
    }
    // Nothing was recorded; the longest lease the registry grants is granted.
    let mut r = reg.connect("postgres");
    assert_eq!(r.one::<i64>("SELECT count(*) FROM idgen_registry_lease"), 0);
    member.batch_execute(&claim(2000, 600)).unwrap();
    let stored: i32 = r.one("SELECT max(lease_ms) FROM idgen_registry_lease");
    assert_eq!(stored, 2000);

    // The node's own setting stops at 120 s.
    let out = Cluster::init("dur_lease_node", &[]);
    out.append_settings(&[
        "shared_preload_libraries = 'idgen'",
        "idgen.worker_id = auto",
        &registry_setting(&reg, "postgres"),
        "idgen.registry_lease = 121s",
    ]);
    let started = out.pg_ctl_start();
    assert!(!started.status.success(), "a 121 s lease was accepted");
    assert!(out.log().contains("idgen.registry_lease"), "{}", out.log());
}

/// S7: a member releases its lease with a final reservation far in the future; the registry
/// keeps the released tick at the lease's fence + 1, so the worker id is not burned for later
/// holders (before, a forged fence or release put it at 2^62 and the next `auto` node failed
/// with 22003), and a real node takes it and issues ids.
#[test]
fn a_release_cannot_burn_a_worker_id_with_a_forged_final_tick() {
    let reg = registry("dur_fence");
    let mut member = intruder(&reg);
    direct_hello(&mut member, "forger");
    let secret = "b".repeat(64);
    let row = member
        .query_one(
            "SELECT * FROM idgen_registry_claim('forger', 'inc1', $1::text, 'sys', 1, 0, \
             1704067200000, 10, 12, 1, 2000, 200, 0, 5432)",
            &[&secret],
        )
        .unwrap();
    let worker: i32 = row.get("worker_id");
    let fence: i64 = row.get("fence_tick");
    let released: bool = member
        .query_one(
            "SELECT idgen_registry_release($1::integer, 'inc1', $2::text, 4611686018427387904)",
            &[&worker, &secret],
        )
        .unwrap()
        .get(0);
    assert!(released);
    let mut r = reg.connect("postgres");
    let kept: i64 = r.one(&format!(
        "SELECT released_tick FROM idgen_registry_lease WHERE worker_id = {worker}"
    ));
    assert!(
        kept <= fence + 1,
        "the forged final tick was kept: {kept} against the lease's fence {fence}"
    );
    let n = node(&reg, "dur_fence_n", &["idgen.worker_id = 0"]);
    assert_eq!(held_worker(&n, Duration::from_secs(20)), worker);
    let id: i64 = n.connect("postgres").one("SELECT snowflake_nextval()");
    assert!(id > 0);
}

/// S11: `segment_create(..., scope => 'global', start => N)` of a name the registry has with
/// numbers below N is refused (42P07), instead of handing those numbers out; a start at or
/// below the registry's next number is kept.
#[test]
fn a_global_segment_asked_to_start_above_the_registrys_numbers_is_refused() {
    let reg = registry("dur_start");
    // Any member may declare the name first.
    let mut member = intruder(&reg);
    member
        .batch_execute("SELECT * FROM idgen_registry_segment_create('orders', 1, 100, 'squatted')")
        .unwrap();
    let n = node(&reg, "dur_start_n", &[&DURABLE[1], "idgen.worker_id = 3"]);
    let mut c = n.connect("postgres");
    let e = db_error(
        c.batch_execute("SELECT segment_create('orders', scope => 'global', start => 1000000)"),
    );
    assert_eq!(e.code().code(), "42P07", "{e:?}");
    assert!(e.message().contains("below the start 1000000"), "{e:?}");
    // Nothing was declared on the node either.
    assert!(!c.one::<bool>("SELECT EXISTS (SELECT FROM idgen_segment WHERE name = 'orders')"));
    c.batch_execute("SELECT segment_create('orders', scope => 'global', start => 1)")
        .unwrap();
    assert_eq!(c.one::<i64>("SELECT segment_nextval('orders')"), 1);
}

/// S12: a registry that is not on a loopback address or a Unix socket needs `sslmode=require`
/// or stronger; without it the server does not start, and its log says why (before, the
/// holder secrets crossed the network in clear under libpq's default `prefer`). With TLS
/// required, or on this machine, it starts.
#[test]
fn a_registry_off_this_machine_without_tls_is_refused_at_start() {
    for (registry, starts) in [
        ("host=10.0.0.11 port=5432 dbname=ids user=idgen_node", false),
        (
            "host=registry.example hostaddr=10.0.0.11 sslmode=prefer",
            false,
        ),
        ("host=127.0.0.1,10.0.0.11 sslmode=disable", false),
        ("host=10.0.0.11 port=5432 dbname=ids sslmode=require", true),
        ("host=127.0.0.1 port=5432 dbname=ids", true),
    ] {
        let c = Cluster::init("dur_tls", &[]);
        c.append_settings(&[
            "shared_preload_libraries = 'idgen'",
            "idgen.worker_id = auto",
            &format!("idgen.registry = '{registry}'"),
        ]);
        let out = c.pg_ctl_start();
        assert_eq!(out.status.success(), starts, "{registry}: {}", c.log());
        if !starts {
            assert!(
                c.log().contains("needs sslmode=require or stronger"),
                "{registry}: {}",
                c.log()
            );
        }
    }
}

/// A registry whose configuration commits with `synchronous_commit = remote_write` (a common
/// latency setting) still grants: idgen's session raises it to `on`, which the registry's
/// durability check asks for.
#[test]
fn a_registry_configured_with_remote_write_still_grants() {
    let reg = Cluster::with_idgen(
        "dur_rw",
        0,
        &[
            DURABLE[0],
            DURABLE[1],
            DURABLE[2],
            "synchronous_commit = remote_write",
        ],
    );
    let n = node(&reg, "dur_rw_n", &auto_fast(&[]));
    held_worker(&n, Duration::from_secs(20));
}
