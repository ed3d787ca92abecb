//! The registry's explicit recovery (DESIGN.md §6 "Fault model" and "Recovery"), against real
//! servers: after an operator event the registry lost commits, so it grants and hands out
//! nothing until the nodes have reported what they hold, from durable state, and the operator
//! has completed the recovery; after it no Snowflake id and no global number repeats. A registry restored from a snapshot
//! or reloaded from a dump (into another server or the same one) opens a recovery; a forged
//! report of another member of `idgen_registry` names its role, can be skipped, and stops no
//! node's ids.

use std::collections::HashSet;
use std::thread;
use std::time::Duration;

use idgen_cluster_tests::registry::{
    auto_fast, client_pid, direct_hello, draw, draw_segment, failure_text, held_worker, intruder,
    node, recover, registry, repeated, restore, segment_mark, segment_until_failure, snapshot,
    snowflake_until_failure, state_of, status, wait_for_reports, Stopped, DIRECT_CLAIM, DURABLE,
};
use idgen_cluster_tests::{column, sqlstate, twitter, wait_for, Cluster, One, STANDBY_NAME};

fn assert_no_repeats(what: &str, numbers: &[i64]) {
    let mut seen = HashSet::new();
    let repeated: Vec<i64> = numbers
        .iter()
        .filter(|&&n| !seen.insert(n))
        .copied()
        .collect();
    assert!(
        repeated.is_empty(),
        "{what} drawn twice: {:?} (of {})",
        &repeated[..repeated.len().min(10)],
        numbers.len()
    );
}

/// A node takes ranges of global segment `g` after the registry's backup,
/// then restarts (its shared memory is new); the registry is restored from the backup and its
/// operator opens the recovery. The restarted node reports `g`'s mark from its durable record of
/// the ranges it took (`idgen_registry.marks`), so `idgen_registry_recover()` raises `g` above
/// every number it drew, and the other node's numbers of `g` never repeat them. (On 0.8 the
/// restarted node showed nothing, and the other node drew the same numbers after the probation.)
#[test]
fn a_node_restarted_since_it_took_a_range_still_reports_it_in_a_recovery() {
    let reg = registry("rec_s3_reg");
    let a = node(
        &reg,
        "rec_s3_a",
        &["idgen.segment_worker_idle_timeout = '10min'"],
    );
    let b = node(
        &reg,
        "rec_s3_b",
        &["idgen.segment_worker_idle_timeout = '10min'"],
    );
    a.connect("postgres")
        .batch_execute("SELECT segment_create('g', step => 50, scope => 'global')")
        .unwrap();
    let mut numbers = draw_segment(&a, "g", 10);
    numbers.extend(draw_segment(&b, "g", 10));
    let backup = snapshot(&reg, "rec_s3_backup");

    // After the backup: A takes more ranges, then restarts cleanly.
    numbers.extend(draw_segment(&a, "g", 200));
    a.stop("fast");
    a.start_server();

    restore(&reg, &backup);
    let mut r = reg.connect("postgres");
    r.batch_execute("SELECT idgen_registry_begin_recovery('restored from a base backup')")
        .unwrap();
    wait_for_reports(&reg, 2, Duration::from_secs(20));
    let raised = recover(&reg, &[]);
    let drawn_max = *numbers.iter().max().unwrap();
    assert!(
        raised
            .iter()
            .any(|(s, to)| s == "global segment g" && *to >= drawn_max),
        "g was not raised above {drawn_max}, the restarted node's numbers: {raised:?}"
    );
    // B draws on (its cached ranges first, then new ones), and so does A.
    numbers.extend(draw_segment(&b, "g", 200));
    numbers.extend(draw_segment(&a, "g", 100));
    assert_no_repeats("numbers of g", &numbers);
}

/// A node's marks file is its own, not replicated:
/// node A takes ranges of global segment `g` after the registry's backup, with a synchronous
/// standby A2 whose marks file is its base backup's copy; A dies, A2 is promoted, the registry
/// is restored, and the operator opens the recovery and skips A, gone for good. A2 reports `g`'s mark
/// from its catalog (`idgen_segment.max_id`, committed with the standby before any number of a
/// range was used, merged into its marks file when its registry client started), so
/// `idgen_registry_recover()` raises `g` above every number A drew, and neither B nor A2 draws
/// one of them again. (Before, A2 reported its stale marks file: `g` was raised only to what A
/// held at the base backup, and B drew A's numbers again.)
#[test]
fn a_promoted_standby_reports_its_old_primarys_global_marks_from_its_catalog() {
    let reg = registry("rec_fo_reg");
    let settings = ["idgen.segment_worker_idle_timeout = '10min'"];
    let a = node(&reg, "rec_fo_a", &settings);
    let b = node(&reg, "rec_fo_b", &settings);
    a.connect("postgres")
        .batch_execute("SELECT segment_create('g', step => 50, scope => 'global')")
        .unwrap();
    let mut numbers = draw_segment(&a, "g", 10);
    numbers.extend(draw_segment(&b, "g", 10));
    let a2 = Cluster::standby_of(&a, "rec_fo_a2", &[]);
    let mut admin = a.connect("postgres");
    admin
        .batch_execute(&format!(
            "ALTER SYSTEM SET synchronous_standby_names = '{STANDBY_NAME}'"
        ))
        .unwrap();
    admin.batch_execute("SELECT pg_reload_conf()").unwrap();
    wait_for("a synchronous standby", Duration::from_secs(60), || {
        (admin.one_with::<i64>(
            "SELECT count(*) FROM pg_stat_replication WHERE application_name = $1 AND sync_state = 'sync'",
            &[&STANDBY_NAME],
        ) == 1)
            .then_some(())
    });
    let backup = snapshot(&reg, "rec_fo_backup");

    // After the backup: A takes more ranges (each committed with A2 before it is used), then dies.
    let drawn_by_a = draw_segment(&a, "g", 300);
    let a_max = *drawn_by_a.iter().max().unwrap();
    numbers.extend(drawn_by_a);
    drop(admin);
    a.kill_postmaster();
    a2.promote();

    restore(&reg, &backup);
    let mut r = reg.connect("postgres");
    r.batch_execute("SELECT idgen_registry_begin_recovery('restored from a base backup')")
        .unwrap();
    // A2 (a node name of its own: its port) and B report; A is gone for good, and skipped.
    wait_for_reports(&reg, 2, Duration::from_secs(20));
    let gone: Vec<String> = r
        .query(
            "SELECT node_name FROM idgen_registry_recovery WHERE NOT reported",
            &[],
        )
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(
        gone.len(),
        1,
        "only the dead primary has not reported: {gone:?}"
    );
    let raised = recover(&reg, &gone);
    assert!(
        raised
            .iter()
            .any(|(s, to)| s == "global segment g" && *to >= a_max),
        "g was not raised above {a_max}, the last number the promoted standby's old primary drew: {raised:?}"
    );
    numbers.extend(draw_segment(&b, "g", 300));
    numbers.extend(draw_segment(&a2, "g", 100));
    assert_no_repeats("numbers of g", &numbers);
}

/// `DROP EXTENSION idgen` and `CREATE EXTENSION idgen` on the registry while
/// two nodes hold worker ids and ranges of global segment `g`: the new tables look unused, but
/// the live nodes' hellos show a revision above the new registry's, which opens its recovery;
/// nothing is granted or handed out until the nodes reported and the operator completed it, and
/// no Snowflake id and no number of `g` repeats across it. (On 0.8 the empty registry granted a
/// live node's worker id again at once.)
#[test]
fn a_registry_installed_again_under_live_nodes_recovers_and_repeats_nothing() {
    let reg = registry("rec_s5_reg");
    let settings = ["idgen.worker_id = auto"];
    let a = node(&reg, "rec_s5_a", &settings);
    let b = node(&reg, "rec_s5_b", &settings);
    let wa = held_worker(&a, Duration::from_secs(20));
    let wb = held_worker(&b, Duration::from_secs(20));
    assert_ne!(wa, wb);
    a.connect("postgres")
        .batch_execute("SELECT segment_create('g', step => 50, scope => 'global')")
        .unwrap();
    let mut numbers = draw_segment(&a, "g", 120);
    numbers.extend(draw_segment(&b, "g", 120));
    let mut ids = draw(&a, 500);
    ids.extend(draw(&b, 500));

    let mut r = reg.connect("postgres");
    r.batch_execute("DROP EXTENSION idgen; CREATE EXTENSION idgen")
        .unwrap();
    wait_for("the recovery to open", Duration::from_secs(20), || {
        r.one::<Option<String>>("SELECT max(recovery_reason) FROM idgen_registry_server")
            .filter(|reason| reason.contains("had seen revision"))
    });
    wait_for_reports(&reg, 2, Duration::from_secs(20));
    // Recovering: the nodes say so.
    for n in [&a, &b] {
        let mut client = n.connect("postgres");
        wait_for(
            "the node to show the recovery",
            Duration::from_secs(20),
            || {
                let (state, _, error) = status(&mut client);
                (state == "recovering" || error.is_some_and(|e| e.contains("recovering")))
                    .then_some(())
            },
        );
    }
    r.batch_execute("SELECT * FROM idgen_registry_recover()")
        .unwrap();
    // Both nodes hold a worker id again (the new registry had no lease: each claims its own
    // id again) and draw on.
    assert_eq!(held_worker(&a, Duration::from_secs(30)), wa);
    assert_eq!(held_worker(&b, Duration::from_secs(30)), wb);
    numbers.extend(draw_segment(&a, "g", 120));
    numbers.extend(draw_segment(&b, "g", 120));
    ids.extend(draw(&a, 500));
    ids.extend(draw(&b, 500));
    assert_no_repeats("numbers of g", &numbers);
    assert_no_repeats("Snowflake ids", &ids);
}

/// A registry restored from a base backup taken a few changes before (fewer than the 32 values
/// PostgreSQL logs a sequence ahead, so the restored revision sequence stands above every
/// revision any node was answered): the recovery still opens, because a node's hello is compared
/// with the revision the registry committed as answered to that node, and no number of `g`
/// repeats. (Comparing with the sequence instead let A hand out B's range again, 51 numbers.)
#[test]
fn a_restore_a_few_changes_back_still_opens_the_recovery() {
    let reg = registry("rec_seq_reg");
    let settings = [
        "idgen.segment_worker_idle_timeout = '10min'",
        "idgen.segment_wait_timeout = '5s'",
    ];
    let a = node(&reg, "rec_seq_a", &auto_fast(&settings));
    let b = node(&reg, "rec_seq_b", &settings);
    held_worker(&a, Duration::from_secs(20));
    a.connect("postgres")
        .batch_execute("SELECT segment_create('g', step => 100, scope => 'global')")
        .unwrap();
    let mut numbers = draw_segment(&a, "g", 1);
    wait_for("A's one range", Duration::from_secs(10), || {
        (segment_mark(&reg, "g") == 100).then_some(())
    });
    let backup = snapshot(&reg, "rec_seq_backup");
    numbers.extend(draw_segment(&b, "g", 1));
    restore(&reg, &backup);
    let mut r = reg.connect("postgres");
    wait_for("the recovery to open", Duration::from_secs(20), || {
        r.one::<bool>("SELECT recovery_since IS NOT NULL FROM idgen_registry_server")
            .then_some(())
    });
    wait_for_reports(&reg, 2, Duration::from_secs(20));
    r.batch_execute("SELECT * FROM idgen_registry_recover()")
        .unwrap();
    numbers.extend(draw_segment(&a, "g", 150));
    numbers.extend(draw_segment(&b, "g", 99));
    assert_no_repeats("numbers of g", &numbers);
}

/// Another member of `idgen_registry` cannot
/// report for a node (42501: a node name belongs to the role of its first hello), so it cannot
/// replace a real node's report with an empty one; and a forged revision near the bigint
/// maximum, in a hello and in a report the operator does not skip, counts as 2^62: the
/// recovery completes, the revision stays far below the maximum, and node A's client goes on
/// saying hello and renewing, so its ids never stop. (A draft refused revisions above 2^62,
/// and a recovery that raised the revision to 2^62 + 1 made every node's next hello refused.)
#[test]
fn a_member_cannot_report_for_another_node_nor_stop_the_fleet_with_a_revision() {
    let reg = registry("rec_forge_reg");
    let a = node(&reg, "rec_forge_a", &["idgen.worker_id = auto"]);
    let w = held_worker(&a, Duration::from_secs(20));
    let a_name: String = a
        .connect("postgres")
        .one("SELECT node_name FROM idgen_registry_status");
    let mut member = intruder(&reg);
    assert_eq!(
        sqlstate(member.batch_execute(&format!(
            "SELECT * FROM idgen_registry_hello('{a_name}', 'x', 0, 5432)"
        ))),
        "42501"
    );
    // The forger opens a recovery with the largest revision under its own name, and reports it
    // with a mark of a segment.
    member
        .batch_execute(
            "SELECT * FROM idgen_registry_hello('forged', 'forged', 9223372036854775807, 5432)",
        )
        .unwrap();
    let mut r = reg.connect("postgres");
    let opened_by: String = r.one("SELECT recovery_opened_by FROM idgen_registry_server");
    assert!(opened_by.contains("intruder"), "{opened_by}");
    member
        .batch_execute(
            "SELECT idgen_registry_report_marks('forged', 'forged', NULL, NULL, '{g}', \
             '{5}', 9223372036854775807)",
        )
        .unwrap();
    assert_eq!(
        sqlstate(member.batch_execute(&format!(
            "SELECT idgen_registry_report_marks('{a_name}', 'x', NULL, NULL, '{{}}', '{{}}', 0)"
        ))),
        "42501"
    );
    wait_for_reports(&reg, 2, Duration::from_secs(20));
    let reporter: String = r.one(&format!(
        "SELECT reported_by FROM idgen_registry_recovery WHERE node_name = '{a_name}'"
    ));
    assert_eq!(reporter, "postgres");
    // Not skipped.
    r.batch_execute("SELECT * FROM idgen_registry_recover()")
        .unwrap();
    let revision: i64 = r.one("SELECT idgen_registry_revision_now()");
    assert!(revision <= 4_611_686_018_427_387_905, "{revision}");
    // Two leases later A still holds its worker id, its client saw no refusal, and it issues.
    std::thread::sleep(Duration::from_secs(5));
    let (state, worker, error) = status(&mut a.connect("postgres"));
    assert_eq!((state.as_str(), worker), ("held", Some(w)), "{error:?}");
    let ids = draw(&a, 100);
    assert_eq!(ids.len(), 100);
}

/// A node whose first hello came after the registry's backup point
/// (so the restored registry has no row of it) shows the revisions it was answered since; the
/// restored registry never answered it anything, so its hello opens the recovery (it was
/// compared with the registry's sequence, which stood above them, and the node's range was
/// handed out again).
#[test]
fn a_node_unknown_to_the_restored_registry_still_opens_the_recovery() {
    let reg = registry("rec_new_reg");
    let mut su = reg.connect("postgres");
    direct_hello(&mut su, "old-node");
    su.batch_execute("SELECT * FROM idgen_registry_segment_create('g', 1, 10, NULL)")
        .unwrap();
    let backup = snapshot(&reg, "rec_new_backup");
    direct_hello(&mut su, "new-node");
    let revision: i64 = su.one(
        "SELECT revision FROM idgen_registry_segment_take('g', 10, 'new-node', repeat('s', 32))",
    );
    drop(su);
    restore(&reg, &backup);
    let mut su = reg.connect("postgres");
    let recovery: Option<String> = su
        .query_one(
            "SELECT recovery FROM idgen_registry_hello('new-node', 'new-node', $1, 5432)",
            &[&revision],
        )
        .unwrap()
        .get(0);
    assert!(
        recovery.is_some(),
        "a node the restored registry never answered, showing revision {revision}, opened no recovery"
    );
}

/// With ticks of 10 s, a grant right after the registry's wait after
/// a restore starts strictly above the fence of a grant the restore lost (the wait was counted
/// in milliseconds, and a grant could start in the tick the lost holder still used).
#[test]
fn with_coarse_ticks_a_grant_after_the_wait_starts_above_a_lost_grants_fence() {
    let reg = registry("rec_tick_reg");
    let mut su = reg.connect("postgres");
    direct_hello(&mut su, "other");
    let backup = snapshot(&reg, "rec_tick_backup");
    direct_hello(&mut su, "lost");
    let claim = |node: &str| {
        format!(
            "SELECT floor_tick, fence_tick FROM idgen_registry_claim('{node}', '{node}', \
             repeat('s', 32), 'sys', 1, 0, 1704067200000, 10, 12, 10000, 2000, 600, 0, 5432)"
        )
    };
    // Claims wait out the registry's wait after its start, counted in 10 s ticks.
    let granted = |su: &mut postgres::Client, node: &str| {
        wait_for(
            "a grant after the wait",
            Duration::from_secs(60),
            || match su.query_one(&claim(node), &[]) {
                Ok(row) => Some(row),
                Err(e) if e.code().map(|c| c.code()) == Some("55P03") => {
                    std::thread::sleep(Duration::from_millis(200));
                    None
                }
                Err(e) => panic!("the claim: {e}"),
            },
        )
    };
    let lost_fence: i64 = granted(&mut su, "lost").get(1);
    drop(su);
    restore(&reg, &backup);
    let mut su = reg.connect("postgres");
    direct_hello(&mut su, "other");
    let floor: i64 = granted(&mut su, "other").get(0);
    assert!(
        floor > lost_fence,
        "the grant after the restore starts at tick {floor}, not above the lost grant's fence {lost_fence}"
    );
}

/// A node cut off during a recovery that skipped it must not serve its cached ranges when it
/// comes back: B holds `g`'s first range; the
/// registry's backup; A takes the next range (lost in the restore) and is cut off (its registry
/// client stopped); the operator restores the registry, B reports, and the recovery skips A.
/// B uses up its range and takes A's lost one again. When A's client is back, its first hello
/// shows a recovery that did not use A's report, so A drops its cached ranges before the hello
/// counts as a contact: A's next numbers come from a new range, none of them one B drew.
/// (Before, the hello counted as contact and A went on with its old range: B's numbers again.)
#[test]
fn a_node_skipped_by_a_recovery_drops_its_cached_ranges_when_it_comes_back() {
    let reg = registry("rec_skip_reg");
    let settings = ["idgen.segment_worker_idle_timeout = '10min'"];
    let a = node(&reg, "rec_skip_a", &settings);
    let b = node(&reg, "rec_skip_b", &settings);
    b.connect("postgres")
        .batch_execute("SELECT segment_create('g', step => 1000, scope => 'global')")
        .unwrap();
    let mut numbers = draw_segment(&b, "g", 5);
    let backup = snapshot(&reg, "rec_skip_backup");
    // A's first numbers come from a range the restore loses: skipping A, the operator accepts
    // that B hands those out again (the recovery waits for reports to prevent it); what A must
    // never do is serve that range after the recovery.
    let before_cut = draw_segment(&a, "g", 5);
    assert!(before_cut.iter().all(|&n| n > 1000), "{before_cut:?}");
    let a_client = client_pid(&a).expect("A's registry client");
    let cut_off = Stopped::new(a_client);

    restore(&reg, &backup);
    reg.connect("postgres")
        .batch_execute("SELECT idgen_registry_begin_recovery('restored from a base backup')")
        .unwrap();
    wait_for_reports(&reg, 1, Duration::from_secs(20));
    let gone: Vec<String> = reg
        .connect("postgres")
        .query(
            "SELECT node_name FROM idgen_registry_recovery WHERE NOT reported",
            &[],
        )
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(gone.len(), 1, "only A has not reported: {gone:?}");
    recover(&reg, &gone);
    // B uses up its range and takes the next ones (after the registry's wait): A's lost range.
    let mut b_client = b.connect("postgres");
    wait_for(
        "B's numbers after the recovery",
        Duration::from_secs(30),
        || {
            b_client
                .query(
                    "SELECT segment_nextval('g') FROM generate_series(1, 1500)",
                    &[],
                )
                .ok()
                .map(|rows| numbers.extend(rows.iter().map(|r| r.get::<_, i64>(0))))
        },
    );

    // A comes back.
    drop(cut_off);
    let mut a_db = a.connect("postgres");
    let mut drawn_by_a = Vec::new();
    wait_for(
        "A's numbers after it came back",
        Duration::from_secs(60),
        || {
            // A's own saved revision may open another recovery; complete it once A reported.
            let mut r = reg.connect("postgres");
            let open: i64 = r.one("SELECT count(*) FROM idgen_registry_recovery");
            let reported: i64 =
                r.one("SELECT count(*) FROM idgen_registry_recovery WHERE reported");
            if open > 0 && open == reported {
                let _ = r.batch_execute("SELECT * FROM idgen_registry_recover()");
            }
            match a_db.query(
                "SELECT segment_nextval('g') FROM generate_series(1, 20)",
                &[],
            ) {
                Ok(rows) => {
                    drawn_by_a.extend(rows.iter().map(|r| r.get::<_, i64>(0)));
                    Some(())
                }
                Err(_) => None,
            }
        },
    );
    numbers.extend(drawn_by_a);
    assert_no_repeats("numbers of g", &numbers);
}

/// The catalogs' merge runs as a superuser in every database: a database owner must not be able
/// to make it run their code. The owner of a database with idgen
/// plants `public.-(bigint, integer)` calling a function that makes them a superuser, and puts
/// `public` first in the database's `search_path`; the node restarts (the registry client starts
/// the merge). The merge raises the database's global mark into the (removed) marks file, and
/// the owner is still no superuser. (Before, the merge's query used an unqualified `-` under the
/// database's stored `search_path`, and the owner became a superuser.)
#[test]
fn a_database_owner_cannot_run_code_in_the_catalogs_merge() {
    let reg = registry("rec_owner_reg");
    let a = node(&reg, "rec_owner_a", &[]);
    let mut su = a.connect("postgres");
    for sql in [
        "CREATE ROLE alice LOGIN",
        "CREATE DATABASE alicedb OWNER alice",
        "ALTER DATABASE alicedb SET search_path = public, pg_catalog",
    ] {
        su.batch_execute(sql).unwrap();
    }
    let mut su_db = a.connect("alicedb");
    for sql in [
        "CREATE EXTENSION idgen",
        "SELECT segment_create('g', step => 10, scope => 'global')",
        "SELECT segment_nextval('g')",
    ] {
        su_db.batch_execute(sql).unwrap();
    }
    drop(su_db);
    let mut alice = a.connect_as("alicedb", "alice");
    alice
        .batch_execute(
            "CREATE FUNCTION public.grab(a bigint, b integer) RETURNS bigint LANGUAGE plpgsql AS $$ \
             BEGIN EXECUTE 'ALTER ROLE alice SUPERUSER'; RETURN a OPERATOR(pg_catalog.-) b; END $$; \
             CREATE OPERATOR public.- (FUNCTION = public.grab, LEFTARG = bigint, RIGHTARG = integer)",
        )
        .unwrap();
    drop(alice);
    drop(su);
    a.stop("fast");
    std::fs::remove_file(a.data().join("idgen_registry.marks")).unwrap();
    a.start_server();
    wait_for("the catalogs' merge", Duration::from_secs(30), || {
        a.log().contains("global marks of database").then_some(())
    });
    let superuser: bool = a
        .connect("postgres")
        .one("SELECT rolsuper FROM pg_roles WHERE rolname = 'alice'");
    assert!(
        !superuser,
        "the catalogs' merge ran the database owner's operator as a superuser"
    );
}

/// The catalogs' merge reads every database, also one whose owner refuses connections
/// (a database skipped silently leaves its global marks out of a
/// promoted standby's report). A database with a drawn global segment is closed to connections;
/// the node restarts without its marks file, and the merge still raises that database's mark in
/// it. (Before, the merge listed only databases that allow connections.)
#[test]
fn the_catalogs_merge_reads_a_database_closed_to_connections() {
    let reg = registry("rec_closed_reg");
    let a = node(&reg, "rec_closed_a", &[]);
    let mut su = a.connect("postgres");
    su.batch_execute("CREATE DATABASE closed").unwrap();
    let mut db = a.connect("closed");
    for sql in [
        "CREATE EXTENSION idgen",
        "SELECT segment_create('g', step => 10, scope => 'global')",
        "SELECT segment_nextval('g')",
    ] {
        db.batch_execute(sql).unwrap();
    }
    drop(db);
    su.batch_execute("ALTER DATABASE closed ALLOW_CONNECTIONS false")
        .unwrap();
    let oid: i64 = su.one("SELECT oid::int8 FROM pg_database WHERE datname = 'closed'");
    drop(su);
    a.stop("fast");
    std::fs::remove_file(a.data().join("idgen_registry.marks")).unwrap();
    a.start_server();
    let line = format!("global marks of database {oid} raised");
    wait_for(
        "the closed database's marks merged",
        Duration::from_secs(30),
        || a.log().contains(&line).then_some(()),
    );
}

/// No database owner can keep a node from reporting in a recovery: a database whose stored settings make every transaction
/// SERIALIZABLE READ ONLY DEFERRABLE waits for a safe snapshot while a serializable transaction
/// stays open there, and a background worker's statements have no `statement_timeout`. The
/// merge sets its own isolation and gives each database a deadline. Here the merge at the
/// node's start fails (another database's table cannot be read), the trap is set and a
/// transaction held open in it, the other database is repaired, and a recovery opens: the
/// merge tried again reads both, and the node reports within a minute. (Before, the merge
/// waited for ever and the node never reported.)
#[test]
fn a_database_owner_cannot_keep_the_node_from_reporting() {
    let reg = registry("rec_trap_reg");
    let a = node(&reg, "rec_trap_a", &[]);
    let mut su = a.connect("postgres");
    for sql in [
        "CREATE DATABASE trap",
        "ALTER DATABASE trap SET default_transaction_isolation = 'serializable'",
        "ALTER DATABASE trap SET default_transaction_deferrable = on",
        "CREATE DATABASE broken",
    ] {
        su.batch_execute(sql).unwrap();
    }
    drop(su);
    a.connect("trap")
        .batch_execute("CREATE EXTENSION idgen")
        .unwrap();
    let mut broken = a.connect("broken");
    broken.batch_execute("CREATE EXTENSION idgen").unwrap();
    broken
        .batch_execute("ALTER TABLE idgen_segment RENAME COLUMN max_id TO max_id_away")
        .unwrap();
    drop(broken);
    a.stop("fast");
    a.start_server();
    wait_for(
        "the failed merge at the start",
        Duration::from_secs(30),
        || {
            a.log()
                .contains("could not be merged into the marks file")
                .then_some(())
        },
    );
    let mut held = a.connect("trap");
    held.batch_execute("BEGIN ISOLATION LEVEL SERIALIZABLE; SELECT 1")
        .unwrap();
    a.connect("broken")
        .batch_execute("ALTER TABLE idgen_segment RENAME COLUMN max_id_away TO max_id")
        .unwrap();
    reg.connect("postgres")
        .batch_execute("SELECT idgen_registry_begin_recovery('a test')")
        .unwrap();
    wait_for_reports(&reg, 1, Duration::from_secs(60));
    held.batch_execute("COMMIT").unwrap();
}

/// A node reports in a recovery only once a merge read every database's catalog: a report without a promoted node's catalog marks lets its old
/// primary's ranges be handed out again. A database's `idgen_segment` cannot be read when the
/// node starts (a column renamed by a superuser here; a lock or a worker slot short in life), so
/// the merge at the start fails, and a recovery opens: the node does not report; once the table
/// is back, the next merge (30 s after the failed one) reads it, and the node reports. (Before,
/// the node reported at once with the marks file alone, a WARNING in its log.)
#[test]
fn a_node_reports_only_after_a_merge_that_read_every_database() {
    let reg = registry("rec_broken_reg");
    let a = node(&reg, "rec_broken_a", &[]);
    a.connect("postgres")
        .batch_execute("CREATE DATABASE broken")
        .unwrap();
    let mut db = a.connect("broken");
    db.batch_execute("CREATE EXTENSION idgen").unwrap();
    db.batch_execute("ALTER TABLE idgen_segment RENAME COLUMN max_id TO max_id_away")
        .unwrap();
    drop(db);
    a.stop("fast");
    a.start_server();
    wait_for("the failed merge", Duration::from_secs(30), || {
        a.log()
            .contains("could not be merged into the marks file")
            .then_some(())
    });
    reg.connect("postgres")
        .batch_execute("SELECT idgen_registry_begin_recovery('a test')")
        .unwrap();
    std::thread::sleep(Duration::from_secs(3));
    let reported: i64 = reg
        .connect("postgres")
        .one("SELECT count(*) FROM idgen_registry_recovery WHERE reported");
    assert_eq!(
        reported, 0,
        "the node reported without its broken database's marks"
    );
    a.connect("broken")
        .batch_execute("ALTER TABLE idgen_segment RENAME COLUMN max_id_away TO max_id")
        .unwrap();
    wait_for_reports(&reg, 1, Duration::from_secs(60));
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
fn try_recover(reg: &Cluster, skip: &[&str]) -> Result<Vec<(String, i64, i64)>, postgres::Error> {
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

/// A registry restored from a snapshot in which node A's lease looks
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

/// A registry restored from a snapshot taken while node A held its
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
    let raised = try_recover(&reg, &[])
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

/// Node A's global segment `g`
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
    let reported = all_reported(&reg, &[], Duration::from_secs(20));
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

/// `pg_dump` of a used registry database (a lease granted) restored into another database
/// of the same running server: the restored `idgen_registry_server` row names this very server
/// (install token and system identifier), but the restore is a rewind all the same. The install
/// token, made at `CREATE EXTENSION` and not dumped, makes the restored copy another server: its
/// first hello opens a recovery (`recovery_since` set, the hello answers it, opened by the
/// registry itself), and a claim there is refused while it is open (55000). The original
/// database is the same server as before: its hello opens nothing and it grants.
#[test]
fn a_dump_reloaded_into_the_same_server_opens_a_recovery() {
    let reg = registry("reg_dump");
    let mut r = reg.connect("postgres");
    // Use it: the server row (a hello) and a lease (so there is something to lose).
    direct_hello(&mut r, "n1");
    let layout: [&(dyn postgres::types::ToSql + Sync); 10] = [
        &"n1",
        &"inc1",
        &"a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1",
        &"sys",
        &1_i32,
        &None::<i32>,
        &1_704_067_200_000_i64,
        &10_i32,
        &12_i32,
        &1_i32,
    ];
    r.query(DIRECT_CLAIM, &layout)
        .unwrap_or_else(|e| panic!("the claim: {}", failure_text(&e)));
    let identity: String = r.one("SELECT server_identity FROM idgen_registry_server");
    let dump = reg.dir().join("registry.dump");
    let out = reg
        .program("pg_dump")
        .args(["-Fc", "-f", dump.to_str().unwrap()])
        .arg(reg.conninfo("postgres"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    r.batch_execute("CREATE DATABASE restored").unwrap();
    // (pg_restore may report ignored errors about objects that exist already, public say.)
    let out = reg
        .program("pg_restore")
        .args(["-d", &reg.conninfo("restored"), dump.to_str().unwrap()])
        .output()
        .unwrap();
    eprintln!("pg_restore: {out:?}");

    let mut restored = reg.connect("restored");
    let (copied, open_before): (String, bool) = {
        let row = restored
            .query_one(
                "SELECT server_identity, recovery_since IS NOT NULL FROM idgen_registry_server",
                &[],
            )
            .unwrap();
        (row.get(0), row.get(1))
    };
    assert_eq!(copied, identity, "the dump carries the server row");
    assert!(!open_before, "the dump carried an open recovery");
    let leases: i64 = restored.one("SELECT count(*) FROM idgen_registry_lease");
    assert_eq!(leases, 1, "the dump carries the lease");

    let recovery: Option<String> =
        restored.one("SELECT recovery FROM idgen_registry_hello('n2', 'inc2', 0, 5432)");
    assert!(
        recovery.is_some(),
        "the first hello of the reloaded registry answered no recovery"
    );
    let row = restored
        .query_one(
            "SELECT server_identity, recovery_since IS NOT NULL, recovery_opened_by \
             FROM idgen_registry_server",
            &[],
        )
        .unwrap();
    let (now, open, opened_by): (String, bool, Option<String>) =
        (row.get(0), row.get(1), row.get(2));
    assert_ne!(now, identity, "the reloaded registry's identity");
    assert!(
        open,
        "the reloaded registry opened no recovery at its first hello"
    );
    assert_eq!(opened_by.as_deref(), Some("the registry"));
    let other: [&(dyn postgres::types::ToSql + Sync); 10] = [
        &"n2",
        &"inc2",
        &"b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2",
        &"sys",
        &1_i32,
        &None::<i32>,
        &1_704_067_200_000_i64,
        &10_i32,
        &12_i32,
        &1_i32,
    ];
    assert_eq!(
        sqlstate(restored.query(DIRECT_CLAIM, &other)),
        "55000",
        "a claim on the reloaded registry while its recovery is open"
    );

    // The original database is the same server as before: no recovery there, and it grants.
    let original: Option<String> =
        r.one("SELECT recovery FROM idgen_registry_hello('n2', 'inc2', 0, 5432)");
    assert_eq!(original, None, "the original registry opened a recovery");
    let granted = r
        .query(DIRECT_CLAIM, &other)
        .unwrap_or_else(|e| panic!("a claim on the original registry: {}", failure_text(&e)));
    assert_eq!(granted.len(), 1);
}

/// The forged hello's revision and the forged report's mark of `g`: the largest revision the
/// registry believes (2^62; one above counts as 2^62).
const FORGED: i64 = 4_611_686_018_427_387_904;

/// Another member of `idgen_registry` (role `intruder`,
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
        sqlstate(try_recover(&reg, &["forged"])),
        "55000",
        "the recovery completed while node silent had not reported"
    );
    let raised = try_recover(&reg, &["forged", "silent"])
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

/// A forged report cannot make every renewal fail. Another member of
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
    let raised = try_recover(&reg, &["forged"])
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
