//! Findings of the adversarial review of issue 28's change (DESIGN.md §6), each reproduced
//! against real servers: a registry restored from a snapshot (worker ids and global ranges), forged regression
//! reports, an incarnation reused by another member of `idgen_registry`, a copy with the same
//! node name, and a registry host name that comes from the environment.

use std::thread;
use std::time::{Duration, Instant};

use idgen_cluster_tests::registry::{
    auto_fast, client_pid, draw_segment, failure_text, held_worker, intruder, node, registry,
    repeated, restore, segment_mark, segment_until_failure, signal, snapshot,
    snowflake_until_failure, state_of, status, Stopped,
};
use idgen_cluster_tests::{column, twitter, wait_for, Cluster, One};
use postgres::Client;

/// Review finding #1. A registry restored from a snapshot in which node A's lease looks
/// expired (taken, then 8 s waited with a 6 s lease), while A's registry client is paused
/// (SIGSTOP): a new node C (auto) is granted a worker id or refused; then A's client goes on
/// and both draw Snowflake ids for 5 s. No id is drawn on both, and if C got A's worker id,
/// every id of C lies above every id of A (C's floor is above A's confirmed fence).
#[test]
fn a_restored_registry_never_lets_another_node_issue_a_live_nodes_ids() {
    let reg = registry("review_lease_reg");
    let lease = [
        "idgen.worker_id = auto",
        "idgen.registry_lease = 6s",
        "idgen.registry_renew_interval = 1s",
    ];
    let a = node(&reg, "review_lease_a", &lease);
    let w = held_worker(&a, Duration::from_secs(20));
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

    let c = node(&reg, "review_lease_c", &lease);
    let c_outcome = {
        let mut cc = c.connect("postgres");
        wait_for(
            "C to hold a worker id or be refused",
            Duration::from_secs(20),
            || match status(&mut cc) {
                (s, Some(cw), _) if s == "held" => Some(Ok(cw)),
                (s, _, e) if s == "refused" => Some(Err(e)),
                _ => None,
            },
        )
    };
    eprintln!("C after the restore: {c_outcome:?} (A holds {w})");
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
    a_ids.extend(a_more);
    let mut all = a_ids.clone();
    all.extend(&c_ids);
    let twice = repeated(&all);
    assert!(
        twice.is_empty(),
        "{} ids drawn on both A and C (worker id {w}; C: {c_outcome:?}): {:?} ...",
        twice.len(),
        &twice[..twice.len().min(10)]
    );
    if c_outcome.as_ref().is_ok_and(|&cw| cw == w) && !c_ids.is_empty() {
        let (a_max, c_min) = (*a_ids.iter().max().unwrap(), *c_ids.iter().min().unwrap());
        assert!(
            c_min > a_max,
            "C was granted A's worker id {w} and issued {c_min} (tick {}), not above A's {a_max} \
             (tick {})",
            twitter::tick_of(c_min),
            twitter::tick_of(a_max)
        );
    }
}

/// Review finding #2. A registry restored from a snapshot taken while node A held its first
/// range of global segment `g`, after node B took the next range: A's next takes (from the
/// restored registry) never hand out B's range again. A draws up to 400 numbers one a
/// statement (stopping at the first refusal), B draws its 99 cached numbers: no number is
/// drawn by both.
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
    let mark = segment_mark(&reg, "g");
    eprintln!("B drew {b_numbers:?}; the registry's mark is {mark}");
    restore(&reg, &snap);
    assert_eq!(segment_mark(&reg, "g"), 100, "the restored registry's mark");

    let (a_more, a_failure) = segment_until_failure(&a, "g", 400);
    eprintln!(
        "A drew {} numbers after the restore, then {a_failure:?}",
        a_more.len()
    );
    a_numbers.extend(a_more);
    b_numbers.extend(draw_segment(&b, "g", 99));
    let mut all = a_numbers.clone();
    all.extend(&b_numbers);
    let twice = repeated(&all);
    assert!(
        twice.is_empty(),
        "{} numbers of g drawn by both A and B (A stopped with {a_failure:?}): {:?} ...",
        twice.len(),
        &twice[..twice.len().min(10)]
    );
}

/// Review findings #7 and #14. A member of `idgen_registry` forges 50 reports of a regression
/// of global segment `g` (`idgen_registry_segment_take` with a known mark of the bigint
/// maximum): at most one open row for `g` comes of it, naming its reporter
/// (`reported_by = 'intruder'`); a superuser's `idgen_registry_resolve(dismiss => ...)` closes
/// it without raising `g`'s mark (no row returned for `g`, the mark unchanged), and node A,
/// which holds `g`, takes ranges again.
#[test]
fn a_forged_regression_report_names_its_reporter_and_can_be_dismissed() {
    let reg = registry("review_forge_reg");
    let a = node(
        &reg,
        "review_forge_a",
        &["idgen.segment_worker_idle_timeout = '10min'"],
    );
    a.connect("postgres")
        .batch_execute("SELECT segment_create('g', step => 100, scope => 'global')")
        .unwrap();
    let mut drawn = draw_segment(&a, "g", 1);
    let mark = segment_mark(&reg, "g");
    let mut r = reg.connect("postgres");
    let mut intruder = intruder(&reg);
    let mut refusals = Vec::new();
    for _ in 0..50 {
        if let Err(e) = intruder.query(
            "SELECT * FROM idgen_registry_segment_take('g', 1, 'x', repeat('x', 64), 9223372036854775807)",
            &[],
        ) {
            refusals.push(failure_text(&e));
        }
    }
    eprintln!(
        "{} of 50 forged reports refused: {:?}",
        refusals.len(),
        refusals.first()
    );
    let open: i64 = r.one(
        "SELECT count(*) FROM idgen_registry_regression WHERE segment = 'g' AND resolved_at IS NULL",
    );
    assert!(
        open <= 1,
        "{open} open regression rows of g from 50 forged reports of one role"
    );
    if open == 1 {
        let row = r
            .query_one(
                "SELECT id, reported_by::text FROM idgen_registry_regression \
                 WHERE segment = 'g' AND resolved_at IS NULL",
                &[],
            )
            .unwrap_or_else(|e| panic!("the report's reporter: {}", failure_text(&e)));
        let (id, reporter): (i64, Option<String>) = (row.get(0), row.get(1));
        assert_eq!(
            reporter.as_deref(),
            Some("intruder"),
            "the report's reported_by"
        );
        let raised = r
            .query(
                "SELECT segment, raised_from, raised_to FROM idgen_registry_resolve(dismiss => ARRAY[$1::bigint])",
                &[&id],
            )
            .unwrap_or_else(|e| panic!("dismissing the report: {}", failure_text(&e)));
        let raised_g: Vec<(Option<String>, i64, i64)> = raised
            .iter()
            .map(|row| (row.get::<_, Option<String>>(0), row.get(1), row.get(2)))
            .filter(|(s, _, _)| s.as_deref() == Some("g"))
            .collect();
        assert!(raised_g.is_empty(), "the dismissal raised g: {raised_g:?}");
        let still: i64 =
            r.one("SELECT count(*) FROM idgen_registry_regression WHERE resolved_at IS NULL");
        assert_eq!(still, 0, "open regressions after the dismissal");
    }
    assert_eq!(
        segment_mark(&reg, "g"),
        mark,
        "g's mark after the forged reports"
    );
    // Past A's cached range: A takes new ranges.
    let (more, failure) = segment_until_failure(&a, "g", 150);
    assert!(
        failure.is_none(),
        "A's draws of g after the forged report failed after {} numbers: {failure:?}",
        more.len()
    );
    drawn.extend(more);
    assert!(repeated(&drawn).is_empty());
}

/// Review finding #13. A member of `idgen_registry` claims a free worker id under node A's
/// incarnation (with a secret of its own). A's children then restart without the postmaster
/// (`kill -9` of a backend: shared memory is reinitialized, the registry client starts again
/// with the same incarnation and no grant): A's re-claim is not blocked by the intruder's
/// row, and within 20 s A holds a worker id again and issues ids.
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
    let free = w + 5;
    let secret = "0123456789abcdef".repeat(4);
    let claimed = intruder.query(
        "SELECT * FROM idgen_registry_claim('intruder', $1::text, $2::text, $3::text, \
         $4::integer, $5::integer, $6::bigint, $7::integer, $8::integer, $9::integer, \
         2000, 200, 0::double precision, 5432, 0::bigint)",
        &[
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
    eprintln!(
        "the intruder's claim of worker id {free} as A's incarnation: {:?}",
        claimed
            .as_ref()
            .map(|rows| rows.len())
            .map_err(failure_text)
    );

    // Until A's renewals have moved its row past the intruder's in the table (a scan for the
    // incarnation then meets the intruder's row first); at once if the claim was refused.
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

/// Review finding #5. A base-backup copy of node A (`idgen.node_name = 'prod'`: the same
/// node name, system identifier and timeline, another port) is refused while A renews; A's
/// registry client pauses for 1.5 s (over two renewal intervals of 200 ms, under the 2 s
/// lease). The copy does not take A's live lease: 3 s later A holds the same worker id and
/// issues ids, and the copy does not hold A's worker id.
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
        wait_for("the copy to be refused", Duration::from_secs(20), || {
            let (state, cw, e) = status(&mut cc);
            assert!(
                !(state == "held" && cw == Some(w)),
                "the copy took A's worker id while A renewed"
            );
            (state == "refused").then_some(e)
        });
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
