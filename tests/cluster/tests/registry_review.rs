//! Findings of the adversarial review of issue 28's change (DESIGN.md §6), each reproduced
//! against real servers, adapted to the registry's explicit recovery (issue 37): a registry
//! restored from a snapshot (worker ids and global ranges), forged recovery reports of another
//! member of `idgen_registry`, an incarnation reused by another member, a copy with the same
//! node name, and a registry host name that comes from the environment.

use std::thread;
use std::time::{Duration, Instant};

use idgen_cluster_tests::registry::{
    auto_fast, client_pid, direct_hello, draw_segment, failure_text, held_worker, intruder, node,
    registry, repeated, restore, segment_mark, segment_until_failure, signal, snapshot,
    snowflake_until_failure, state_of, status, Stopped, DIRECT_CLAIM, DURABLE,
};
use idgen_cluster_tests::{column, sqlstate, twitter, wait_for, Cluster, One};
use postgres::Client;

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

/// Waits (at most `within`) until every node the registry knows, but those in `skip`, has
/// reported in the open recovery (`idgen_registry_recovery.reported`); returns the nodes that
/// reported.
fn all_reported(reg: &Cluster, skip: &[&str], within: Duration) -> Vec<String> {
    let mut r = reg.connect("postgres");
    let skip: Vec<String> = skip.iter().map(|s| s.to_string()).collect();
    wait_for("every known node to report", within, || {
        let rows = r
            .query(
                "SELECT node_name, reported FROM idgen_registry_recovery \
                 WHERE node_name <> ALL ($1::text[]) ORDER BY node_name",
                &[&skip],
            )
            .unwrap();
        (!rows.is_empty() && rows.iter().all(|row| row.get::<_, bool>(1)))
            .then(|| rows.iter().map(|row| row.get(0)).collect())
    })
}

/// Completes the open recovery as the superuser (`idgen_registry_recover(skip_nodes)`);
/// returns what it raised (subject, from, to).
fn recover(reg: &Cluster, skip: &[&str]) -> Result<Vec<(String, i64, i64)>, postgres::Error> {
    let skip: Vec<String> = skip.iter().map(|s| s.to_string()).collect();
    reg.connect("postgres")
        .query(
            "SELECT subject, raised_from, raised_to FROM idgen_registry_recover($1::text[])",
            &[&skip],
        )
        .map(|rows| {
            rows.iter()
                .map(|row| (row.get(0), row.get(1), row.get(2)))
                .collect()
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

/// Review finding #1 (S6). A registry restored from a snapshot in which node A's lease looks
/// expired (taken, then 8 s waited with a 6 s lease; the registry grants leases up to 6 s),
/// while A's registry client is paused (SIGSTOP): a new node C asks for A's very worker id
/// (`idgen.worker_id` fixed to it) and is granted it once the restored registry's wait after
/// its start (its longest lease and a second) has passed; then A's client goes on and both draw
/// Snowflake ids for 5 s. No id is drawn on both, and every id of C lies above every id of A:
/// the wait outlasts every fence the lost renewals gave A, so C's floor (the registry's clock)
/// is above A's last confirmed tick.
#[test]
fn a_restored_registry_never_lets_another_node_issue_a_live_nodes_ids() {
    let reg = Cluster::with_idgen(
        "review_lease_reg",
        0,
        &[DURABLE[0], DURABLE[1], "idgen.registry_max_lease = 6s"],
    );
    let lease = [
        "idgen.worker_id = auto",
        "idgen.registry_lease = 6s",
        "idgen.registry_renew_interval = 1s",
    ];
    let a = node(&reg, "review_lease_a", &lease);
    let w = held_worker(&a, Duration::from_secs(30));
    let mut a_ids = column::<i64>(
        &mut a.connect("postgres"),
        "SELECT snowflake_nextval() FROM generate_series(1, 100)",
    );
    let snap = snapshot(&reg, "review_lease_snap");
    // Longer than the lease: in the snapshot, A's lease has expired by the restore.
    thread::sleep(Duration::from_secs(8));
    a_ids.extend(column::<i64>(
        &mut a.connect("postgres"),
        "SELECT snowflake_nextval() FROM generate_series(1, 100)",
    ));
    let a_client = client_pid(&a).expect("A's registry client");
    let paused = Stopped::new(a_client);
    restore(&reg, &snap);

    let wanted = format!("idgen.worker_id = {w}");
    let c = node(&reg, "review_lease_c", &[&wanted, lease[1], lease[2]]);
    let c_outcome = {
        let mut cc = c.connect("postgres");
        // Refused (55P03) during the restored registry's wait after its start: 7 s.
        wait_for(
            "C to hold a worker id",
            Duration::from_secs(30),
            || match status(&mut cc) {
                (s, Some(cw), _) if s == "held" => Some(cw),
                _ => None,
            },
        )
    };
    eprintln!("C after the restore holds {c_outcome} (A holds {w})");
    assert_eq!(c_outcome, w, "C asked for A's worker id {w}");
    drop(paused);

    let ((a_more, a_failure), (c_ids, c_failure)) = thread::scope(|s| {
        let on_a = s.spawn(|| {
            snowflake_until_failure(
                &a,
                Duration::from_secs(5),
                Duration::from_millis(2),
                failure_text,
            )
        });
        let on_c = s.spawn(|| {
            snowflake_until_failure(
                &c,
                Duration::from_secs(5),
                Duration::from_millis(2),
                failure_text,
            )
        });
        (on_a.join().unwrap(), on_c.join().unwrap())
    });
    eprintln!(
        "A: {} ids then {a_failure:?}; C: {} ids then {c_failure:?}",
        a_more.len(),
        c_ids.len()
    );
    assert!(!c_ids.is_empty(), "C issued no id: {c_failure:?}");
    a_ids.extend(a_more);
    let mut all = a_ids.clone();
    all.extend(&c_ids);
    let twice = repeated(&all);
    assert!(
        twice.is_empty(),
        "{} ids drawn on both A and C (worker id {w}): {:?} ...",
        twice.len(),
        &twice[..twice.len().min(10)]
    );
    let (a_max, c_min) = (*a_ids.iter().max().unwrap(), *c_ids.iter().min().unwrap());
    assert!(
        c_min > a_max,
        "C was granted A's worker id {w} and issued {c_min} (tick {}), not above A's {a_max} \
         (tick {})",
        twitter::tick_of(c_min),
        twitter::tick_of(a_max)
    );
}

/// Review finding #2 (S3). A registry restored from a snapshot taken while node A held its
/// first range of global segment `g` (1..100), after node B took the next range (101..200):
/// B's hello shows the restored registry a revision above its own, so the registry opens a
/// recovery; while it is open no range is handed out; A and B report their marks by themselves,
/// and once the superuser completes it (`idgen_registry_recover()`), `g`'s mark is at least
/// the end of B's range. Then A draws up to 400 numbers one a statement (stopping at the first
/// refusal) and B its 99 cached ones: no number is drawn twice.
#[test]
fn a_restored_registry_never_hands_out_another_nodes_cached_range_again() {
    let reg = registry("review_range_reg");
    let settings = [
        "idgen.segment_wait_timeout = '3s'",
        "idgen.segment_worker_idle_timeout = '10min'",
    ];
    let a = node(&reg, "review_range_a", &settings);
    let b = node(&reg, "review_range_b", &settings);
    a.connect("postgres")
        .batch_execute("SELECT segment_create('g', step => 100, scope => 'global')")
        .unwrap();
    let mut a_numbers = draw_segment(&a, "g", 1);
    assert_eq!(a_numbers, [1]);
    // A holds 1..100 and nothing more (no prefetch pending).
    wait_for("A's range of g to settle", Duration::from_secs(10), || {
        let next: Option<i64> = a
            .connect("postgres")
            .one("SELECT next_first FROM segment_status() WHERE name = 'g'");
        (next.is_none() && segment_mark(&reg, "g") == 100).then_some(())
    });
    let snap = snapshot(&reg, "review_range_snap");
    let mut b_numbers = draw_segment(&b, "g", 1);
    let b_end = segment_mark(&reg, "g");
    eprintln!("B drew {b_numbers:?}; the registry's mark is {b_end}");
    restore(&reg, &snap);
    assert_eq!(segment_mark(&reg, "g"), 100, "the restored registry's mark");

    let opened_by = recovery_opens(&reg, Duration::from_secs(20));
    eprintln!("recovery opened by {opened_by}");
    // While it is open, A's next range is refused (55000): its cache ends at 100.
    let (during, refusal) = segment_until_failure(&a, "g", 200);
    assert!(
        during.iter().all(|&n| n <= 100),
        "A drew {:?} beyond its cached range during the recovery",
        during.iter().filter(|&&n| n > 100).collect::<Vec<_>>()
    );
    let refusal = refusal.expect("A drew 200 numbers from a 100-number range");
    assert!(
        refusal.starts_with("55000"),
        "A's refusal during the recovery: {refusal}"
    );
    a_numbers.extend(during);
    let reported = all_reported(&reg, &[], Duration::from_secs(20));
    eprintln!("reported: {reported:?}");
    let raised = recover(&reg, &[])
        .unwrap_or_else(|e| panic!("idgen_registry_recover(): {}", failure_text(&e)));
    eprintln!("the recovery raised {raised:?}");
    assert!(
        segment_mark(&reg, "g") >= b_end,
        "g's mark after the recovery is below {b_end}, the end of B's range ({raised:?})"
    );
    until_ranges_resume(&reg);

    let (a_more, a_failure) = segment_until_failure(&a, "g", 400);
    eprintln!(
        "A drew {} numbers after the recovery, then {a_failure:?}",
        a_more.len()
    );
    assert!(
        a_failure.is_none(),
        "A's draws after the recovery failed after {} numbers: {a_failure:?}",
        a_more.len()
    );
    a_numbers.extend(a_more);
    b_numbers.extend(draw_segment(&b, "g", 99));
    let mut all = a_numbers.clone();
    all.extend(&b_numbers);
    let twice = repeated(&all);
    assert!(
        twice.is_empty(),
        "{} numbers of g drawn by both A and B: {:?} ...",
        twice.len(),
        &twice[..twice.len().min(10)]
    );
}

/// The forged hello's revision and the forged report's mark of `g`: the largest revision the
/// registry believes (2^62; one above counts as 2^62).
const FORGED: i64 = 4_611_686_018_427_387_904;

/// Review findings #7 and #14 (S9). Another member of `idgen_registry` (role `intruder`,
/// without any node's secret) forges a recovery: a hello as node `forged` showing a revision
/// far above the registry's opens one, a report as `forged` claims a mark of global segment `g`
/// of 9e18, and a hello as node `silent` adds a known node that never reports.
/// Node A (worker id auto, holding a range of `g`) keeps issuing Snowflake ids through the
/// recovery, 5 s (over two 2 s leases: renewals go on while a recovery is open); the recovery
/// names the role that opened it, `idgen_registry_recovery` lists `forged` and `silent` with
/// their role `intruder` and the forged report with `reported_by = intruder`; A reports by
/// itself. The superuser's `idgen_registry_recover()` refuses (55000) while `silent` has not
/// reported; skipping both forged nodes it completes without raising `g` to the forged mark,
/// A's ids go on, and A takes ranges of `g` again. The removed
/// `idgen_registry_resolve` (the dismiss list of regression reports) is gone (42883).
#[test]
fn a_forged_recovery_report_stops_no_ids_names_its_role_and_can_be_skipped() {
    let reg = registry("review_forge_reg");
    let a = node(
        &reg,
        "review_forge_a",
        &auto_fast(&["idgen.segment_worker_idle_timeout = '10min'"]),
    );
    let w = held_worker(&a, Duration::from_secs(20));
    a.connect("postgres")
        .batch_execute("SELECT segment_create('g', step => 100, scope => 'global')")
        .unwrap();
    let mut drawn = draw_segment(&a, "g", 1);
    let mark = segment_mark(&reg, "g");
    let mut r = reg.connect("postgres");
    assert_eq!(
        sqlstate(r.query(
            "SELECT * FROM idgen_registry_resolve(dismiss => ARRAY[1::bigint])",
            &[]
        )),
        "42883",
        "idgen_registry_resolve(dismiss) is gone"
    );

    let mut intruder = intruder(&reg);
    for node in ["forged", "silent"] {
        intruder
            .query(
                "SELECT * FROM idgen_registry_hello($1::text, $1::text, $2::bigint, 5432)",
                &[&node, &FORGED],
            )
            .unwrap_or_else(|e| panic!("the intruder's hello as {node}: {}", failure_text(&e)));
    }
    let recorded: bool = intruder
        .query_one(
            "SELECT idgen_registry_report_marks('forged', 'forged', NULL, NULL, ARRAY['g'], \
             ARRAY[$1::bigint], 0)",
            &[&FORGED],
        )
        .unwrap_or_else(|e| panic!("the intruder's report: {}", failure_text(&e)))
        .get(0);
    assert!(recorded, "the forged report found no open recovery");
    let opened_by = recovery_opens(&reg, Duration::from_secs(5));
    assert!(
        opened_by.contains("intruder"),
        "the recovery's opener does not name the intruder's role: {opened_by:?}"
    );

    // The fleet's Snowflake ids go on through the recovery: over two leases.
    let (ids, failure) = snowflake_until_failure(
        &a,
        Duration::from_secs(5),
        Duration::from_millis(20),
        failure_text,
    );
    assert!(
        failure.is_none(),
        "A's Snowflake ids stopped during the forged recovery after {} ids: {failure:?}",
        ids.len()
    );
    let (state, held, error) = state_of(&a);
    assert_eq!(held, Some(w), "A during the recovery: {state} {error:?}");

    let reported = all_reported(&reg, &["forged", "silent"], Duration::from_secs(20));
    eprintln!("reported on their own: {reported:?}");
    let rows = r
        .query(
            "SELECT node_name, role, reported, reported_by FROM idgen_registry_recovery \
             WHERE node_name IN ('forged', 'silent') ORDER BY node_name",
            &[],
        )
        .unwrap();
    let listed: Vec<(String, String, bool, Option<String>)> = rows
        .iter()
        .map(|row| (row.get(0), row.get(1), row.get(2), row.get(3)))
        .collect();
    assert_eq!(
        listed,
        [
            (
                "forged".to_owned(),
                "intruder".to_owned(),
                true,
                Some("intruder".to_owned())
            ),
            ("silent".to_owned(), "intruder".to_owned(), false, None),
        ],
        "the forged nodes in idgen_registry_recovery"
    );
    let a_role: Vec<String> = column(
        &mut r,
        "SELECT reported_by FROM idgen_registry_recovery \
         WHERE node_name NOT IN ('forged', 'silent') AND reported",
    );
    assert!(
        !a_role.is_empty() && a_role.iter().all(|role| role == "postgres"),
        "A's report is not by its own role: {a_role:?}"
    );

    assert_eq!(
        sqlstate(recover(&reg, &["forged"])),
        "55000",
        "the recovery completed while node silent had not reported"
    );
    let raised = recover(&reg, &["forged", "silent"])
        .unwrap_or_else(|e| panic!("idgen_registry_recover(skip): {}", failure_text(&e)));
    eprintln!("the recovery raised {raised:?}");
    assert_eq!(
        segment_mark(&reg, "g"),
        mark,
        "g's mark after the recovery skipping the forged report ({raised:?})"
    );
    // A goes on after the recovery: ids, and ranges past its cached one.
    let (ids, failure) = snowflake_until_failure(
        &a,
        Duration::from_secs(3),
        Duration::from_millis(20),
        failure_text,
    );
    assert!(
        failure.is_none(),
        "A's Snowflake ids stopped after the recovery after {} ids: {failure:?}",
        ids.len()
    );
    until_ranges_resume(&reg);
    let (more, failure) = segment_until_failure(&a, "g", 150);
    assert!(
        failure.is_none(),
        "A's draws of g after the recovery failed after {} numbers: {failure:?}",
        more.len()
    );
    drawn.extend(more);
    assert!(repeated(&drawn).is_empty());
}

/// Review finding #14 (S9: a forged report makes every renewal fail). Another member of
/// `idgen_registry` opens a recovery (a hello as node `forged` showing a revision far above the
/// registry's) and reports as `forged` a revision near the bigint maximum (counted as 2^62);
/// node A reports
/// by itself. The superuser completes the recovery skipping `forged`, whose report is then not
/// used: the registry's revision is not raised to the forged one, so the changes that take the
/// next revision (every renewal) go on, and A's Snowflake ids go on for 5 s after the recovery
/// (over two 2 s leases). (Were the forged revision used, the revision sequence would stand at
/// its maximum and every renewal fail: the fleet's ids would stop within a lease.)
#[test]
fn a_skipped_forged_report_cannot_stop_the_fleets_ids_with_its_revision() {
    let reg = registry("review_forge_rev_reg");
    let a = node(&reg, "review_forge_rev_a", &auto_fast(&[]));
    let w = held_worker(&a, Duration::from_secs(20));
    let mut intruder = intruder(&reg);
    intruder
        .query(
            "SELECT * FROM idgen_registry_hello('forged', 'forged', $1::bigint, 5432)",
            &[&FORGED],
        )
        .unwrap_or_else(|e| panic!("the intruder's hello: {}", failure_text(&e)));
    let recorded: bool = intruder
        .query_one(
            "SELECT idgen_registry_report_marks('forged', 'forged', NULL, NULL, '{}', '{}', \
             $1::bigint)",
            &[&(i64::MAX - 1)],
        )
        .unwrap_or_else(|e| panic!("the intruder's report: {}", failure_text(&e)))
        .get(0);
    assert!(recorded, "the forged report found no open recovery");
    recovery_opens(&reg, Duration::from_secs(5));
    all_reported(&reg, &["forged"], Duration::from_secs(20));
    let raised = recover(&reg, &["forged"])
        .unwrap_or_else(|e| panic!("idgen_registry_recover(skip): {}", failure_text(&e)));
    let (ids, failure) = snowflake_until_failure(
        &a,
        Duration::from_secs(5),
        Duration::from_millis(20),
        failure_text,
    );
    let revision: i64 = reg
        .connect("postgres")
        .one("SELECT last_value FROM idgen_registry_revision");
    assert!(
        failure.is_none(),
        "A's Snowflake ids (worker id {w}) stopped after {} ids once the recovery skipping the \
         forged report completed: {failure:?}; the recovery raised {raised:?}, the revision is \
         {revision}",
        ids.len()
    );
    assert_eq!(state_of(&a).1, Some(w));
}

/// Review finding #13. A member of `idgen_registry` claims a free worker id under node A's
/// incarnation (with a secret of its own). A's children then restart without the postmaster
/// (`kill -9` of a backend: shared memory is reinitialized, the registry client starts again
/// with the same incarnation and no grant): A's re-claim is not blocked by the intruder's
/// row, and within 20 s A holds a worker id again and issues ids with it. (The intruder says
/// its hello first, as a node does, and is granted the id: incarnations are names, not
/// credentials.)
#[test]
fn a_member_reusing_a_nodes_incarnation_does_not_block_its_reclaim() {
    let reg = registry("review_incarn_reg");
    let a = node(&reg, "review_incarn_a", &auto_fast(&[]));
    let w = held_worker(&a, Duration::from_secs(20));
    let mut r = reg.connect("postgres");
    let row = r
        .query_one(
            "SELECT l.incarnation, l.system_identifier, l.timeline, f.epoch_unix_ms, f.worker_bits, \
             f.sequence_bits, f.time_unit_ms FROM idgen_registry_lease l, idgen_registry_fleet f \
             WHERE l.worker_id = $1",
            &[&w],
        )
        .unwrap();
    let (incarnation, system, timeline): (String, String, i32) =
        (row.get(0), row.get(1), row.get(2));
    let (epoch, worker_bits, sequence_bits, tick_ms): (i64, i32, i32, i32) =
        (row.get(3), row.get(4), row.get(5), row.get(6));
    let mut intruder = intruder(&reg);
    direct_hello(&mut intruder, "intruder");
    let free = w + 5;
    let secret = "0123456789abcdef".repeat(4);
    let claimed = intruder.query(
        DIRECT_CLAIM,
        &[
            &"intruder",
            &incarnation,
            &secret,
            &system,
            &timeline,
            &free,
            &epoch,
            &worker_bits,
            &sequence_bits,
            &tick_ms,
        ],
    );
    let claimed = claimed.map(|rows| rows.len()).map_err(|e| failure_text(&e));
    assert_eq!(
        claimed,
        Ok(1),
        "the intruder's claim of the free worker id {free} as A's incarnation"
    );

    // Until A's renewals have moved its row past the intruder's in the table (a scan for the
    // incarnation then meets the intruder's row first).
    wait_for(
        "A's lease row after the intruder's",
        Duration::from_secs(10),
        || {
            r.one_with::<bool>(
                "SELECT coalesce((SELECT ctid FROM idgen_registry_lease WHERE worker_id = $1) \
             > (SELECT ctid FROM idgen_registry_lease WHERE worker_id = $2), true)",
                &[&w, &free],
            )
            .then_some(())
        },
    );

    // A crash of one backend: the postmaster restarts every child with the same incarnation.
    let mut busy = a.connect("postgres");
    let victim: i32 = busy.one("SELECT pg_backend_pid()");
    signal(victim, "-9");
    drop(busy);
    let mut ac = wait_for(
        "A to accept connections again",
        Duration::from_secs(30),
        || {
            Client::connect(&a.conninfo("postgres"), postgres::NoTls)
                .ok()
                .filter(|_| a.log().contains("all server processes terminated"))
        },
    );
    let outcome = {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let s = status(&mut ac);
            if s.0 == "held" || Instant::now() > deadline {
                break s;
            }
            thread::sleep(Duration::from_millis(100));
        }
    };
    assert_eq!(
        outcome.0, "held",
        "A after its children restarted (it held {w}): {outcome:?}"
    );
    let id = ac
        .query_one("SELECT snowflake_nextval()", &[])
        .unwrap_or_else(|e| panic!("A's id after the restart: {}", failure_text(&e)));
    let id: i64 = id.get(0);
    assert_eq!(Some(twitter::worker_of(id) as i32), outcome.1);
}

/// Review finding #5. A base-backup copy of node A (`idgen.node_name = 'prod'`, worker id
/// auto: the same node name, system identifier and timeline, another port) never holds A's
/// worker id while A renews: it is granted another free id at once (or refused). Then A's
/// registry client pauses for 1.5 s (over two renewal intervals of 200 ms, under the 2 s
/// lease). The copy does not take A's live lease: 3 s later A holds the same worker id and
/// issues ids with it, and the copy does not hold A's worker id.
#[test]
fn a_copy_with_the_same_node_name_does_not_take_a_live_lease_when_the_original_pauses() {
    let reg = registry("review_copy_reg");
    let a = node(
        &reg,
        "review_copy_a",
        &auto_fast(&["idgen.node_name = 'prod'"]),
    );
    let w = held_worker(&a, Duration::from_secs(20));
    let copy = Cluster::clone_of(&a, "review_copy_b", &[]);
    copy.start_server();
    {
        let mut cc = copy.connect("postgres");
        let outcome = wait_for(
            "the copy to hold a worker id or be refused",
            Duration::from_secs(20),
            || {
                let (state, cw, e) = status(&mut cc);
                assert!(
                    !(state == "held" && cw == Some(w)),
                    "the copy took A's worker id while A renewed"
                );
                (state == "held" || state == "refused").then_some((state, cw, e))
            },
        );
        eprintln!("the copy while A renews: {outcome:?}");
    }
    let client = client_pid(&a).expect("A's registry client");
    {
        let _paused = Stopped::new(client);
        thread::sleep(Duration::from_millis(1500));
    }
    thread::sleep(Duration::from_secs(3));
    let (state, held, error) = state_of(&a);
    let copy_state = state_of(&copy);
    eprintln!("A: {state} {held:?} {error:?}; the copy: {copy_state:?}");
    assert_eq!(
        (state.as_str(), held),
        ("held", Some(w)),
        "A after a 1.5 s pause of its client: {error:?} (the copy: {copy_state:?})"
    );
    assert_ne!(
        (copy_state.0.as_str(), copy_state.1),
        ("held", Some(w)),
        "the copy holds A's worker id"
    );
    let id: i64 = a
        .connect("postgres")
        .query_one("SELECT snowflake_nextval()", &[])
        .unwrap_or_else(|e| panic!("A's id: {}", failure_text(&e)))
        .get(0);
    assert_eq!(twitter::worker_of(id), i64::from(w));
}

/// Review finding #10. `idgen.registry` names no host, and the server's environment has
/// `PGHOST=registry.invalid` (libpq takes the host from there, which needs a name lookup the
/// client cannot interrupt): the server refuses to start, and its log says to use `hostaddr`.
#[test]
fn a_host_name_from_the_environment_is_refused_too() {
    let reg = registry("review_env_reg");
    let setting = format!(
        "idgen.registry = 'port={} dbname=postgres user=postgres'",
        reg.port()
    );
    let mut n = Cluster::init(
        "review_env",
        &[
            "shared_preload_libraries = 'idgen'",
            "idgen.worker_id = auto",
            &setting,
        ],
    );
    n.set_env("PGHOST", "registry.invalid");
    let out = n.pg_ctl_start();
    let log = n.log();
    if out.status.success() {
        // What the running server's processes were given (the environment reaches them).
        let pid = n.postmaster_pid();
        let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        let has = String::from_utf8_lossy(&environ).contains("PGHOST=registry.invalid");
        panic!(
            "started with PGHOST=registry.invalid in its environment (seen by the postmaster: \
             {has}) and a registry without host or hostaddr:\n{log}"
        );
    }
    assert!(
        log.contains("idgen.registry") && log.contains("hostaddr"),
        "the log does not say to give hostaddr:\n{log}"
    );
}
