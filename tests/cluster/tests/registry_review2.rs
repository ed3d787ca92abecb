//! Findings of the second adversarial review of issue 28's change (DESIGN.md §6), each
//! reproduced against real servers or directly against the registry's functions: a restarted
//! registry that never ends its probation, an idle global segment's mark forgotten by a restored
//! registry, a release below ids already issued, an
//! unauthenticated renewal raising a fence, and a long lease overflowing the registry's
//! arithmetic.

use std::thread;
use std::time::{Duration, Instant};

use idgen_cluster_tests::registry::{
    auto_fast, draw_segment, failure_text, held_worker, intruder, node, registry, repeated,
    restore, segment_mark, segment_until_failure, snapshot, state_of, status, FAST,
};
use idgen_cluster_tests::{column, sqlstate, wait_for, Cluster, One};
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

/// Review finding #1 (second review). A registry restarted while no lease is being renewed
/// (node A stopped cleanly, so nothing renews and nothing reports) starts a probation at the
/// first claim after the restart; that probation must be kept, not rolled back with the
/// refused claim, so that it ends. Pinned: A, started again after the registry's restart, holds
/// a worker id within 90 s (the claims' probation lasts at least 60 s after a restart), and the
/// registry's `server_identity` is no longer the one recorded before the restart.
#[test]
fn a_registry_restarted_while_no_lease_is_renewed_grants_again_after_its_probation() {
    let reg = registry("review2_prob_reg");
    let a = node(&reg, "review2_prob_a", &auto_fast(&[]));
    held_worker(&a, Duration::from_secs(20));
    let before = server_identity(&reg);
    assert!(before.is_some(), "the registry recorded no server identity");
    a.stop("fast");
    reg.stop("fast");
    reg.start_server();
    a.start_server();

    let mut client = a.connect("postgres");
    let started = Instant::now();
    let mut last = status(&mut client);
    while started.elapsed() < Duration::from_secs(90) {
        last = status(&mut client);
        if last.0 == "held" && last.1.is_some() {
            break;
        }
        thread::sleep(Duration::from_millis(200));
    }
    let after = server_identity(&reg);
    let probation: Option<String> = reg
        .connect("postgres")
        .query_opt("SELECT claims_until::text FROM idgen_registry_server", &[])
        .unwrap()
        .map(|r| r.get(0));
    assert_eq!(
        last.0,
        "held",
        "A {:?} after the registry's restart, waited {:?}: worker {:?}, last error {:?} \
         (registry identity {after:?}, was {before:?}; probation until {probation:?})",
        last.0,
        started.elapsed(),
        last.1,
        last.2
    );
    assert_ne!(
        after, before,
        "the registry's server_identity did not change at its restart"
    );
    a.connect("postgres")
        .query_one("SELECT snowflake_nextval()", &[])
        .unwrap_or_else(|e| panic!("A's id after the grant: {}", failure_text(&e)));
}

/// Review finding #2 (second review). Node A's global segment `g` left A's cache through
/// idleness (giving nothing back: the registry's mark stays at the end of A's range); then the
/// registry is restored from a snapshot taken before any range of `g` (its mark back
/// to 0). A no longer caches `g`, but the numbers it drew must still be shown to (or kept from)
/// the restored registry. Pinned: after the registry's probation, node B's draws of `g` (up to
/// 100, stopping at a refusal) and A's 50 later ones repeat none of A's first numbers nor each
/// other. (A draws 10 numbers, not 20: the 11th would prefetch A's next range.)
#[test]
fn an_idle_evicted_global_segment_still_has_its_mark_checked_after_a_registry_restore() {
    let reg = registry("review2_evict_reg");
    let a = node(
        &reg,
        "review2_evict_a",
        &[
            FAST[0],
            FAST[1],
            "idgen.segment_worker_idle_timeout = '1s'",
            "idgen.segment_wait_timeout = '3s'",
        ],
    );
    let b = node(
        &reg,
        "review2_evict_b",
        &[FAST[0], FAST[1], "idgen.segment_wait_timeout = '3s'"],
    );
    a.connect("postgres")
        .batch_execute("SELECT segment_create('g', step => 100, scope => 'global')")
        .unwrap();
    // Both nodes report (no worker id: idgen_registry_report) at least once before the snapshot.
    thread::sleep(Duration::from_secs(1));
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

    let identity = server_identity(&reg);
    restore(&reg, &snap);
    assert_eq!(segment_mark(&reg, "g"), 0, "the restored registry's mark");
    // The restored registry is a new server: its probation starts at the first call (the
    // nodes' reports) and lasts about 20 s.
    let mut r = reg.connect("postgres");
    let waited = Instant::now();
    while waited.elapsed() < Duration::from_secs(60) {
        let row = r
            .query_opt(
                "SELECT server_identity, ranges_until <= clock_timestamp() FROM idgen_registry_server",
                &[],
            )
            .unwrap();
        if let Some(row) = row {
            let (id, over): (String, bool) = (row.get(0), row.get(1));
            if Some(&id) != identity.as_ref() && over {
                break;
            }
        }
        thread::sleep(Duration::from_millis(200));
    }
    eprintln!("waited {:?} for the probation", waited.elapsed());

    let (b_numbers, b_failure) = segment_until_failure(&b, "g", 100);
    let (a_numbers, a_failure) = segment_until_failure(&a, "g", 50);
    let regressions: i64 = r.one("SELECT count(*) FROM idgen_registry_regression");
    eprintln!(
        "B drew {} numbers then {b_failure:?}; A drew {} then {a_failure:?}; {regressions} regression rows",
        b_numbers.len(),
        a_numbers.len()
    );
    numbers.extend(&b_numbers);
    numbers.extend(&a_numbers);
    let twice = repeated(&numbers);
    assert!(
        twice.is_empty(),
        "{} numbers of g drawn twice after the restore ({:?} ...): B drew {:?}..{:?} then \
         {b_failure:?}, A drew {:?}..{:?} then {a_failure:?}; {regressions} regression rows",
        twice.len(),
        &twice[..twice.len().min(10)],
        b_numbers.first(),
        b_numbers.last(),
        a_numbers.first(),
        a_numbers.last()
    );
}

/// A direct claim of the registry (superuser), with the fleet layout [`LAYOUT`]: returns the
/// worker id, floor and fence, or the error.
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
             $7::integer, $8::integer, 0::double precision, 5432, 0::bigint)"
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

/// Review finding #5 (second review). A holder that was succeeded by promotion releases its
/// lease with a final reservation above the registry's cap: it has issued ids up to there
/// (its floor was already far ahead of the clock). Pinned: the next holder of the worker id
/// (another server) starts above every tick the released holder may have used: its floor is
/// above F + 3, F being the released holder's floor and F + 4 its final tick.
#[test]
fn a_release_never_records_a_tick_below_ids_already_issued() {
    let reg = registry("review2_release_reg");
    let mut r = reg.connect("postgres");
    let (p_secret, s_secret, x_secret) = ("a1".repeat(32), "b2".repeat(32), "c3".repeat(32));
    let (w, _, p_fence, _) = claim(
        &mut r,
        "p",
        "inc-p",
        &p_secret,
        "sys",
        1,
        Some(5),
        120_000,
        10_000,
    )
    .unwrap_or_else(|e| panic!("p's claim: {}", failure_text(&e)));
    assert_eq!(w, 5);
    let renewed = r
        .query_one(
            "SELECT fence_tick, regression FROM idgen_registry_renew(5, 'inc-p', $1::text, \
             120000, 10000, 0::double precision, $2::bigint, '{s}'::text[])",
            &[&p_secret, &p_fence],
        )
        .unwrap_or_else(|e| panic!("p's renewal: {}", failure_text(&e)));
    let regression: Option<String> = renewed.get(1);
    assert_eq!(regression, None, "p's renewal");

    // s: p's attested standby, promoted (same system, a later timeline).
    let (sw, f, s_fence, prev) = claim(
        &mut r,
        "s",
        "inc-s",
        &s_secret,
        "sys",
        2,
        Some(5),
        10_000,
        1_000,
    )
    .unwrap_or_else(|e| panic!("s's claim: {}", failure_text(&e)));
    assert_eq!(sw, 5);
    eprintln!("s succeeded {prev:?}: floor {f}, fence {s_fence} (p's fence {p_fence})");
    let released: bool = r
        .query_one(
            "SELECT idgen_registry_release(5, 'inc-s', $1::text, $2::bigint)",
            &[&s_secret, &(f + 4)],
        )
        .unwrap_or_else(|e| panic!("s's release: {}", failure_text(&e)))
        .get(0);
    assert!(released, "s's release");
    let (released_tick, fence_after): (Option<i64>, i64) = {
        let row = r
            .query_one(
                "SELECT released_tick, fence_tick FROM idgen_registry_lease WHERE worker_id = 5",
                &[],
            )
            .unwrap();
        (row.get(0), row.get(1))
    };

    // x: another server, after s's release.
    let deadline = Instant::now() + Duration::from_secs(90);
    let (xw, x_floor, _, x_prev) = loop {
        match claim(
            &mut r,
            "x",
            "inc-x",
            &x_secret,
            "sys-other",
            1,
            Some(5),
            10_000,
            1_000,
        ) {
            Ok(v) => break v,
            Err(e) if code_of(&e).as_deref() == Some("55P03") && Instant::now() < deadline => {
                thread::sleep(Duration::from_millis(500));
            }
            Err(e) => panic!("x's claim: {}", failure_text(&e)),
        }
    };
    assert_eq!(xw, 5);
    assert!(
        x_floor > f + 3,
        "x's floor {x_floor} (after {x_prev:?}) is not above tick {} that s (floor {f}, released \
         at final tick {}) may have used; the registry recorded released_tick {released_tick:?}, \
         fence {fence_after}",
        f + 3,
        f + 4
    );
}

/// Review finding #7 (second review). A member of `idgen_registry` (not the holder, no secret)
/// calls `idgen_registry_renew` of node A's worker id with a made-up incarnation and a known
/// fence of 9e18; a superuser then runs `idgen_registry_resolve()`. Pinned: A's lease's fence
/// stays below 9000000000000000000 (an unauthenticated report raises nothing), and A holds its
/// lease and issues ids.
#[test]
fn an_unauthenticated_renewal_cannot_raise_another_nodes_fence() {
    let reg = registry("review2_fence_reg");
    let a = node(&reg, "review2_fence_a", &auto_fast(&[]));
    let w = held_worker(&a, Duration::from_secs(20));
    let mut r = reg.connect("postgres");
    let mut intruder = intruder(&reg);
    let forged = intruder.query(
        "SELECT * FROM idgen_registry_renew($1::integer, 'whatever', repeat('ab', 32), 2000, 200, \
         0::double precision, 9000000000000000000::bigint)",
        &[&w],
    );
    eprintln!(
        "the intruder's renewal: {:?}",
        forged.as_ref().map(|rows| rows.len()).map_err(failure_text)
    );
    let resolved = r
        .query(
            "SELECT worker_id, segment, raised_from, raised_to FROM idgen_registry_resolve()",
            &[],
        )
        .unwrap_or_else(|e| panic!("resolve: {}", failure_text(&e)));
    let raised: Vec<(Option<i32>, i64, i64)> = resolved
        .iter()
        .map(|row| (row.get(0), row.get(2), row.get(3)))
        .collect();
    eprintln!("resolve raised {raised:?}");
    held_worker(&a, Duration::from_secs(10));
    thread::sleep(Duration::from_millis(500));
    let fence: i64 = r.one_with(
        "SELECT fence_tick FROM idgen_registry_lease WHERE worker_id = $1",
        &[&w],
    );
    assert!(
        fence < 9_000_000_000_000_000_000,
        "A's fence was raised to {fence} by an unauthenticated renewal (resolve raised {raised:?})"
    );
    let (state, held, error) = state_of(&a);
    assert_eq!(
        (state.as_str(), held),
        ("held", Some(w)),
        "A after the forged renewal: {error:?}"
    );
    a.connect("postgres")
        .query_one("SELECT snowflake_nextval()", &[])
        .unwrap_or_else(|e| panic!("A's id: {}", failure_text(&e)));
}

/// Review finding #10 (second review, integer overflow). A lease of 2000000000 ms (about 23
/// days, within `integer`) is refused (22023: the registry grants at most 120 s); the longest
/// lease it grants is computed in bigint: its claim, renewal and release succeed.
#[test]
fn a_long_lease_does_not_overflow_the_registry_arithmetic() {
    let reg = registry("review2_long_reg");
    let mut r = reg.connect("postgres");
    let secret = "d4".repeat(32);
    let refused = claim(
        &mut r,
        "long",
        "inc-long",
        &secret,
        "sys",
        1,
        None,
        2_000_000_000,
        10_000,
    );
    assert_eq!(sqlstate(refused), "22023");
    let (w, floor, fence, _) = claim(
        &mut r, "long", "inc-long", &secret, "sys", 1, None, 120_000, 10_000,
    )
    .unwrap_or_else(|e| panic!("a claim with a 120000 ms lease: {}", failure_text(&e)));
    assert!(fence >= floor, "floor {floor}, fence {fence}");
    let renewed = r
        .query_one(
            "SELECT fence_tick, regression FROM idgen_registry_renew($1::integer, 'inc-long', \
             $2::text, 120000, 10000, 0::double precision, $3::bigint)",
            &[&w, &secret, &fence],
        )
        .unwrap_or_else(|e| panic!("the renewal of a 120000 ms lease: {}", failure_text(&e)));
    let regression: Option<String> = renewed.get(1);
    assert_eq!(regression, None);
    let released: bool = r
        .query_one(
            "SELECT idgen_registry_release($1::integer, 'inc-long', $2::text, $3::bigint)",
            &[&w, &secret, &(floor + 10)],
        )
        .unwrap_or_else(|e| panic!("the release of a 120000 ms lease: {}", failure_text(&e)))
        .get(0);
    assert!(released);
}
