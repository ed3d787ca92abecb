//! Findings of the second adversarial review of issue 28's change (DESIGN.md §6), adapted to
//! the registry's explicit recovery (issue 37), each reproduced against real servers or
//! directly against the registry's functions: a restarted registry that grants again after its
//! wait, an idle global segment's mark forgotten by a restored registry, a release below ids
//! already issued, an unauthenticated renewal raising a fence, and a lease longer than the
//! registry grants.

use std::thread;
use std::time::{Duration, Instant};

use idgen_cluster_tests::registry::{
    auto_fast, direct_hello, draw_segment, failure_text, held_worker, intruder, node, registry,
    repeated, restore, segment_mark, segment_until_failure, snapshot, state_of, status,
};
use idgen_cluster_tests::{sqlstate, wait_for, Cluster, One};
use postgres::Client;

/// The fleet layout of the direct claims: idgen's default epoch (2024-01-01), 10 worker bits,
/// 12 sequence bits, 1 ms ticks.
const LAYOUT: &str = "1704067200000, 10, 12, 1";

/// A failed statement's SQLSTATE, if the server raised it.
fn code_of(e: &postgres::Error) -> Option<String> {
    e.code().map(|c| c.code().to_owned())
}

/// The registry's recorded server identity (`idgen_registry_server`), if it has one.
fn server_identity(reg: &Cluster) -> Option<String> {
    reg.connect("postgres")
        .query_opt("SELECT server_identity FROM idgen_registry_server", &[])
        .unwrap()
        .map(|r| r.get(0))
}

/// Waits (at most `within`) until the registry listening on `reg`'s port has an open
/// recovery; returns who opened it (`idgen_registry_server.recovery_opened_by`).
fn recovery_opens(reg: &Cluster, within: Duration) -> String {
    let mut r = reg.connect("postgres");
    wait_for("the registry's recovery to open", within, || {
        r.query_one(
            "SELECT recovery_since IS NOT NULL, recovery_opened_by FROM idgen_registry_server",
            &[],
        )
        .ok()
        .filter(|row| row.get::<_, bool>(0))
        .map(|row| row.get::<_, Option<String>>(1).unwrap_or_default())
    })
}

/// Waits (at most `within`) until every node the registry knows has reported in the open
/// recovery (`idgen_registry_recovery.reported`); returns their names.
fn all_reported(reg: &Cluster, within: Duration) -> Vec<String> {
    let mut r = reg.connect("postgres");
    wait_for("every known node to report", within, || {
        let rows = r
            .query(
                "SELECT node_name, reported FROM idgen_registry_recovery ORDER BY node_name",
                &[],
            )
            .unwrap();
        (!rows.is_empty() && rows.iter().all(|row| row.get::<_, bool>(1)))
            .then(|| rows.iter().map(|row| row.get(0)).collect())
    })
}

/// Sleeps until the registry hands out ranges again after its current epoch began (half its
/// longest lease and a second after a start or a recovery).
fn until_ranges_resume(reg: &Cluster) {
    let wait: f64 = reg.connect("postgres").one(
        "SELECT extract(epoch FROM idgen_registry_epoch() \
         + make_interval(secs => (0.5 * idgen_registry_max_lease_ms() + 1000) / 1000.0) \
         - clock_timestamp())::float8",
    );
    if wait > 0.0 {
        thread::sleep(Duration::from_secs_f64(wait + 0.1));
    }
}

/// Review finding #1 (second review). A registry restarted while no lease is being renewed
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

/// Review finding #2 (second review; S3 of the review of 0.7.0). Node A's global segment `g`
/// left A's cache through idleness (giving nothing back: the registry's mark stays at the end
/// of A's range); then the registry is restored from a snapshot taken before any range of `g`
/// (its mark back to 0). A no longer caches `g`, but it still reports the mark of every global
/// segment it took ranges of since its start: A's hello shows a revision above the restored
/// registry's, the recovery opens, every node reports by itself, and the superuser's
/// `idgen_registry_recover()` raises `g` to at least A's mark. Pinned: afterwards node B's
/// draws of `g` (up to 100) and A's 50 later ones succeed and repeat none of A's first numbers
/// nor each other. (A draws 10 numbers, not 20: the 11th would prefetch A's next range.)
#[test]
fn a_restored_registry_never_hands_out_an_idle_evicted_segments_numbers_again() {
    let reg = registry("review2_evict_reg");
    let a = node(
        &reg,
        "review2_evict_a",
        &[
            "idgen.segment_worker_idle_timeout = '1s'",
            "idgen.segment_wait_timeout = '3s'",
        ],
    );
    let b = node(
        &reg,
        "review2_evict_b",
        &["idgen.segment_wait_timeout = '3s'"],
    );
    a.connect("postgres")
        .batch_execute("SELECT segment_create('g', step => 100, scope => 'global')")
        .unwrap();
    // Both nodes say hello (no worker id: the hello is their contact) before the snapshot, so
    // the restored registry knows them.
    wait_for("both nodes known", Duration::from_secs(10), || {
        (reg.connect("postgres")
            .one::<i64>("SELECT count(*) FROM idgen_registry_node")
            == 2)
            .then_some(())
    });
    assert_eq!(segment_mark(&reg, "g"), 0, "g's mark before any range");
    let snap = snapshot(&reg, "review2_evict_snap");

    let mut numbers = draw_segment(&a, "g", 10);
    assert_eq!(numbers, (1..=10).collect::<Vec<i64>>(), "A's first numbers");
    assert_eq!(
        segment_mark(&reg, "g"),
        100,
        "the registry's mark after A's range"
    );
    wait_for("g to leave A's cache", Duration::from_secs(30), || {
        let cached: i64 = a
            .connect("postgres")
            .one("SELECT count(*) FROM segment_cache_status() WHERE name = 'g'");
        (cached == 0).then_some(())
    });
    assert_eq!(
        segment_mark(&reg, "g"),
        100,
        "a global segment gives nothing back"
    );

    restore(&reg, &snap);
    assert_eq!(segment_mark(&reg, "g"), 0, "the restored registry's mark");
    let opened_by = recovery_opens(&reg, Duration::from_secs(20));
    let reported = all_reported(&reg, Duration::from_secs(20));
    eprintln!("recovery opened by {opened_by}; reported: {reported:?}");
    let raised: Vec<(String, i64, i64)> = reg
        .connect("postgres")
        .query(
            "SELECT subject, raised_from, raised_to FROM idgen_registry_recover()",
            &[],
        )
        .unwrap_or_else(|e| panic!("idgen_registry_recover(): {}", failure_text(&e)))
        .iter()
        .map(|row| (row.get(0), row.get(1), row.get(2)))
        .collect();
    eprintln!("the recovery raised {raised:?}");
    assert!(
        segment_mark(&reg, "g") >= 100,
        "g's mark after the recovery is below A's evicted range's end, 100 ({raised:?})"
    );
    until_ranges_resume(&reg);

    let (b_numbers, b_failure) = segment_until_failure(&b, "g", 100);
    let (a_numbers, a_failure) = segment_until_failure(&a, "g", 50);
    eprintln!(
        "B drew {} numbers then {b_failure:?}; A drew {} then {a_failure:?}",
        b_numbers.len(),
        a_numbers.len()
    );
    assert_eq!(
        (b_failure, a_failure),
        (None, None),
        "draws of g after the recovery failed"
    );
    numbers.extend(&b_numbers);
    numbers.extend(&a_numbers);
    let twice = repeated(&numbers);
    assert!(
        twice.is_empty(),
        "{} numbers of g drawn twice after the restore ({:?} ...): B drew {:?}..{:?}, A drew \
         {:?}..{:?}",
        twice.len(),
        &twice[..twice.len().min(10)],
        b_numbers.first(),
        b_numbers.last(),
        a_numbers.first(),
        a_numbers.last()
    );
}

/// A direct claim of the registry (superuser), with the fleet layout [`LAYOUT`]: returns the
/// worker id, floor and fence, or the error. Say [`direct_hello`] first.
#[allow(clippy::too_many_arguments)]
fn claim(
    r: &mut Client,
    node: &str,
    incarnation: &str,
    secret: &str,
    system: &str,
    timeline: i32,
    worker: Option<i32>,
    lease_ms: i32,
    renew_ms: i32,
) -> Result<(i32, i64, i64, Option<String>), postgres::Error> {
    r.query_one(
        &format!(
            "SELECT worker_id, floor_tick, fence_tick, previous_holder FROM idgen_registry_claim(\
             $1::text, $2::text, $3::text, $4::text, $5::integer, $6::integer, {LAYOUT}, \
             $7::integer, $8::integer, 0::double precision, 5432)"
        ),
        &[
            &node,
            &incarnation,
            &secret,
            &system,
            &timeline,
            &worker,
            &lease_ms,
            &renew_ms,
        ],
    )
    .map(|row| (row.get(0), row.get(1), row.get(2), row.get(3)))
}

/// Review finding #5 (second review). A holder releases its worker id with a final
/// reservation ahead of the clock (it reserved ticks up to its fence, the furthest the registry
/// allowed it: a holder's ids are never past its fence) and with one far past its fence (a
/// lie, or a bug). Pinned: the registry records the first as it is and caps the second at the
/// fence plus one, never lower than the ticks the holder may have used: the next holder of the
/// worker id (another server) is refused (55P03) until the registry's clock has passed the
/// released reservation, and then starts above every tick the released holder may have used
/// (its floor above the holder's fence). The renewal of 0.8.0 (with a known fence and
/// attested standbys) is gone (42883).
#[test]
fn the_next_holder_of_a_released_worker_id_starts_above_the_released_reservation() {
    let reg = registry("review2_release_reg");
    let mut r = reg.connect("postgres");
    direct_hello(&mut r, "p");
    let (p_secret, q_secret, x_secret) = ("a1".repeat(32), "b2".repeat(32), "c3".repeat(32));
    assert_eq!(
        sqlstate(r.query(
            "SELECT * FROM idgen_registry_renew(5, 'inc-p', $1::text, 2000, 200, \
             0::double precision, 0::bigint, '{s}'::text[])",
            &[&p_secret],
        )),
        "42883",
        "the renewal with a known fence and attested standbys"
    );
    for (holder, secret, final_past_fence) in [("p", &p_secret, 1_i64), ("q", &q_secret, 1_000_000)]
    {
        let incarnation = format!("inc-{holder}");
        let (w, _, fence, _) = claim_when_free(&mut r, holder, &incarnation, secret, "sys", 5);
        assert_eq!(w, 5);
        let renewed: i64 = r
            .query_one(
                "SELECT fence_tick FROM idgen_registry_renew(5, $1::text, $2::text, 2000, 200, \
                 0::double precision)",
                &[&incarnation, secret],
            )
            .unwrap_or_else(|e| panic!("{holder}'s renewal: {}", failure_text(&e)))
            .get(0);
        assert!(
            renewed >= fence,
            "{holder}'s fence moved back: {fence} -> {renewed}"
        );
        let final_tick = renewed + final_past_fence;
        let released: bool = r
            .query_one(
                "SELECT idgen_registry_release(5, $1::text, $2::text, $3::bigint)",
                &[&incarnation, secret, &final_tick],
            )
            .unwrap_or_else(|e| panic!("{holder}'s release: {}", failure_text(&e)))
            .get(0);
        assert!(released, "{holder}'s release");
        let released_tick: Option<i64> =
            r.one("SELECT released_tick FROM idgen_registry_lease WHERE worker_id = 5");
        assert_eq!(
            released_tick,
            Some(renewed + 1),
            "{holder}'s release at final tick {final_tick} (fence {renewed})"
        );

        // x: another server, at once: the released reservation is ahead of the clock.
        let x_incarnation = format!("inc-x-after-{holder}");
        let first = claim(
            &mut r,
            "x",
            &x_incarnation,
            &x_secret,
            "sys-other",
            1,
            Some(5),
            2000,
            200,
        );
        assert_eq!(
            first.as_ref().err().and_then(code_of).as_deref(),
            Some("55P03"),
            "x's claim of worker id 5 right after {holder}'s release up to tick {renewed}: {:?}",
            first.map_err(|e| failure_text(&e))
        );
        let (xw, x_floor, _, x_prev) =
            claim_when_free(&mut r, "x", &x_incarnation, &x_secret, "sys-other", 5);
        assert_eq!(xw, 5);
        assert!(
            x_floor > renewed,
            "x's floor {x_floor} (after {x_prev:?}) is not above tick {renewed}, the fence of \
             {holder}, which released at final tick {final_tick}"
        );
        // x gives the id back for the next round, at its floor (it issued nothing).
        let released: bool = r
            .query_one(
                "SELECT idgen_registry_release(5, $1::text, $2::text, $3::bigint)",
                &[&x_incarnation, &x_secret, &x_floor],
            )
            .unwrap_or_else(|e| panic!("x's release: {}", failure_text(&e)))
            .get(0);
        assert!(released, "x's release");
    }
}

/// [`claim`] of worker id `worker` with a 2 s lease, tried again while the registry answers
/// 55P03 (the id's last holder's ticks are ahead of the clock), for at most 20 s.
fn claim_when_free(
    r: &mut Client,
    node: &str,
    incarnation: &str,
    secret: &str,
    system: &str,
    worker: i32,
) -> (i32, i64, i64, Option<String>) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match claim(
            r,
            node,
            incarnation,
            secret,
            system,
            1,
            Some(worker),
            2000,
            200,
        ) {
            Ok(v) => break v,
            Err(e) if code_of(&e).as_deref() == Some("55P03") && Instant::now() < deadline => {
                thread::sleep(Duration::from_millis(100));
            }
            Err(e) => panic!("{node}'s claim: {}", failure_text(&e)),
        }
    }
}

/// Review finding #7 (second review; S7 of the review of 0.7.0). A member of
/// `idgen_registry` (not the holder, no secret) calls `idgen_registry_renew` of node A's worker
/// id: with a made-up incarnation it is refused (55006, not this incarnation's lease), with A's
/// incarnation (a name, not a credential) and a secret of its own (42501); the renewal of 0.8.0
/// that took a known fence from the caller is gone (42883). Pinned: A's fence stays within a
/// longest lease of the registry's clock (a renewal moves it to the clock plus the holder's
/// lease, nothing the caller names), and A holds its lease and issues ids with it.
#[test]
fn an_unauthenticated_renewal_cannot_raise_another_nodes_fence() {
    let reg = registry("review2_fence_reg");
    let a = node(&reg, "review2_fence_a", &auto_fast(&[]));
    let w = held_worker(&a, Duration::from_secs(20));
    let mut r = reg.connect("postgres");
    let incarnation: String = r.one_with(
        "SELECT incarnation FROM idgen_registry_lease WHERE worker_id = $1",
        &[&w],
    );
    let mut intruder = intruder(&reg);
    let renew = "SELECT * FROM idgen_registry_renew($1::integer, $2::text, repeat('ab', 32), \
                 2000, 200, 0::double precision)";
    assert_eq!(
        sqlstate(intruder.query(renew, &[&w, &"whatever"])),
        "55006",
        "a renewal of A's worker id under a made-up incarnation"
    );
    assert_eq!(
        sqlstate(intruder.query(renew, &[&w, &incarnation])),
        "42501",
        "a renewal of A's worker id under A's incarnation without A's secret"
    );
    assert_eq!(
        sqlstate(intruder.query(
            "SELECT * FROM idgen_registry_renew($1::integer, 'whatever', repeat('ab', 32), 2000, \
             200, 0::double precision, 9000000000000000000::bigint)",
            &[&w],
        )),
        "42883",
        "the renewal with a known fence"
    );
    held_worker(&a, Duration::from_secs(10));
    thread::sleep(Duration::from_millis(500));
    let row = r
        .query_one(
            "SELECT l.fence_tick, \
                    (floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint - f.epoch_unix_ms) \
                    / f.time_unit_ms + ceil(idgen_registry_max_lease_ms()::numeric / f.time_unit_ms)::bigint \
             FROM idgen_registry_lease l, idgen_registry_fleet f WHERE l.worker_id = $1",
            &[&w],
        )
        .unwrap_or_else(|e| panic!("A's fence: {}", failure_text(&e)));
    let (fence, bound): (i64, i64) = (row.get(0), row.get(1));
    assert!(
        fence <= bound,
        "A's fence {fence} is beyond the registry's clock plus a longest lease, tick {bound}"
    );
    let (state, held, error) = state_of(&a);
    assert_eq!(
        (state.as_str(), held),
        ("held", Some(w)),
        "A after the forged renewals: {error:?}"
    );
    a.connect("postgres")
        .query_one("SELECT snowflake_nextval()", &[])
        .unwrap_or_else(|e| panic!("A's id: {}", failure_text(&e)));
}

/// Review finding #10 (second review, integer overflow; S8 of the review of 0.7.0). The
/// registry grants leases of 100 ms up to its `idgen.registry_max_lease` (2 s here), renewed
/// at most a third of the lease apart, and refuses anything else before any arithmetic with
/// it (22023): a claim with a lease of 2000000000 ms (about 23 days, within `integer`) or one
/// millisecond above the longest, a renewal asking for a longer lease, or renewals further
/// apart than a third of the lease. A lease of exactly the longest is granted, renewed and
/// released, its fence within that lease of its floor.
#[test]
fn a_lease_longer_than_the_registry_max_lease_is_refused() {
    let reg = registry("review2_long_reg");
    let mut r = reg.connect("postgres");
    direct_hello(&mut r, "long");
    let longest: i64 =
        r.one("SELECT setting::bigint FROM pg_settings WHERE name = 'idgen.registry_max_lease'");
    let longest = i32::try_from(longest).unwrap();
    let secret = "d4".repeat(32);
    for (lease, renew) in [(2_000_000_000, 10_000), (longest + 1, 200), (99, 33)] {
        let refused = claim(
            &mut r, "long", "inc-long", &secret, "sys", 1, None, lease, renew,
        );
        assert_eq!(
            sqlstate(refused),
            "22023",
            "a claim of a {lease} ms lease (longest {longest} ms)"
        );
    }
    let refused = claim(
        &mut r,
        "long",
        "inc-long",
        &secret,
        "sys",
        1,
        None,
        longest,
        (longest + 2) / 3 + 1,
    );
    assert_eq!(
        sqlstate(refused),
        "22023",
        "renewals further apart than a third of the lease"
    );
    let none: i64 = r.one("SELECT count(*) FROM idgen_registry_lease");
    assert_eq!(none, 0, "a refused claim left a lease");

    let (w, floor, fence, _) = claim(
        &mut r,
        "long",
        "inc-long",
        &secret,
        "sys",
        1,
        None,
        longest,
        longest / 3,
    )
    .unwrap_or_else(|e| panic!("a claim with a {longest} ms lease: {}", failure_text(&e)));
    assert!(
        fence >= floor && fence <= floor + i64::from(longest),
        "floor {floor}, fence {fence} of a {longest} ms lease (1 ms ticks)"
    );
    let renew = "SELECT fence_tick FROM idgen_registry_renew($1::integer, 'inc-long', $2::text, \
                 $3::integer, $4::integer, 0::double precision)";
    for (lease, every) in [
        (2_000_000_000, 10_000),
        (longest + 1, 200),
        (longest, longest),
    ] {
        assert_eq!(
            sqlstate(r.query(renew, &[&w, &secret, &lease, &every])),
            "22023",
            "a renewal of a {lease} ms lease, every {every} ms (longest {longest} ms)"
        );
    }
    let renewed: i64 = r
        .query_one(renew, &[&w, &secret, &longest, &(longest / 3)])
        .unwrap_or_else(|e| panic!("the renewal of a {longest} ms lease: {}", failure_text(&e)))
        .get(0);
    assert!(
        renewed >= fence,
        "the renewal moved the fence back: {fence} -> {renewed}"
    );
    let released: bool = r
        .query_one(
            "SELECT idgen_registry_release($1::integer, 'inc-long', $2::text, $3::bigint)",
            &[&w, &secret, &(floor + 10)],
        )
        .unwrap_or_else(|e| panic!("the release of a {longest} ms lease: {}", failure_text(&e)))
        .get(0);
    assert!(released);
}
