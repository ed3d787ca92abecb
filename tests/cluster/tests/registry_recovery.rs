//! The registry's explicit recovery (DESIGN.md §6 "Fault model" and "Recovery"), against real
//! servers: after an operator event the registry lost commits, so it grants and hands out
//! nothing until the nodes have reported what they hold, from durable state, and the operator
//! has completed the recovery; after it no Snowflake id and no global number repeats.

use std::collections::HashSet;
use std::time::Duration;

use idgen_cluster_tests::registry::{
    auto_fast, client_pid, direct_hello, draw, draw_segment, held_worker, intruder, node, recover,
    registry, restore, segment_mark, snapshot, status, wait_for_reports, Stopped,
};
use idgen_cluster_tests::{sqlstate, wait_for, Cluster, One, STANDBY_NAME};

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

/// Review finding S3: a node takes ranges of global segment `g` after the registry's backup,
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

/// A node's marks file is its own, not replicated (adversarial review of the recovery, HIGH):
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

/// Review finding S5: `DROP EXTENSION idgen` and `CREATE EXTENSION idgen` on the registry while
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
/// repeats. (Found by the review of this change: comparing with the sequence let A hand out
/// B's range again, 51 numbers.)
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

/// Review finding S9 and the reviews of this change: another member of `idgen_registry` cannot
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

/// The review of this change: a node whose first hello came after the registry's backup point
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

/// The review of this change: with ticks of 10 s, a grant right after the registry's wait after
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
/// comes back (adversarial review of the contact rule, HIGH): B holds `g`'s first range; the
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
/// to make it run their code (adversarial review, HIGH). The owner of a database with idgen
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
/// (adversarial review, MEDIUM: a database skipped silently leaves its global marks out of a
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

/// No database owner can keep a node from reporting in a recovery (adversarial review of the
/// catalogs' merge, HIGH): a database whose stored settings make every transaction
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

/// A node reports in a recovery only once a merge read every database's catalog (third
/// adversarial review, HIGH): a report without a promoted node's catalog marks lets its old
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
