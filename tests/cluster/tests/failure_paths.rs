//! Pins that the failure paths a DBA can walk into lose no uniqueness and hang nothing, each
//! against real servers:
//!
//! * the allocator obeys a fast shutdown, `pg_terminate_backend` and `pg_cancel_backend` while
//!   its commit waits for a synchronous standby that is gone, and never hands out a range whose
//!   commit that standby did not confirm (a failover to it would hand the range out again);
//! * callers that die (FATAL) while they wait for the allocator give their request slot back;
//! * `CREATE DATABASE ... TEMPLATE` and `ALTER DATABASE ... RENAME` work while the database's
//!   allocator is connected;
//! * a promoted standby with a smaller `idgen.max_drift_ms` than its primary, and one-second
//!   ticks, starts above every id the primary can have issued;
//! * a user's table named `idgen_segment` is not idgen's; a cancelled caller's error carries no
//!   Rust backtrace as its DETAIL.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use idgen_cluster_tests::{column, db_error, Cluster, One, STANDBY_NAME};
use postgres::Client;

/// Polls `probe` every 50 ms until it returns `Some`, for at most `limit`; panics with `what`.
fn wait_for<T>(limit: Duration, what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = probe() {
            return v;
        }
        assert!(Instant::now() < deadline, "gave up after {limit:?}: {what}");
        thread::sleep(Duration::from_millis(50));
    }
}

/// The process id of database `db`'s allocator, if one is connected.
fn allocator_pid(client: &mut Client, db: &str) -> Option<i32> {
    client
        .query_opt(
            "SELECT pid FROM pg_stat_activity WHERE backend_type = 'idgen allocator' AND datname = $1",
            &[&db],
        )
        .unwrap()
        .map(|r| r.get(0))
}

/// The allocator's current wait event, if it is connected.
fn allocator_wait_event(client: &mut Client) -> Option<String> {
    client
        .query_opt(
            "SELECT coalesce(wait_event, '') FROM pg_stat_activity WHERE backend_type = 'idgen allocator'",
            &[],
        )
        .unwrap()
        .map(|r| r.get(0))
}

/// A primary with a synchronous standby, and segment `s` (step 100) created and drawn from.
fn primary_with_sync_standby() -> (Cluster, Cluster) {
    let primary = Cluster::with_idgen("rel-primary", 21, &[]);
    let standby = Cluster::standby_of(&primary, "rel-standby", &[]);
    let mut admin = primary.connect("postgres");
    admin
        .batch_execute(&format!(
            "ALTER SYSTEM SET synchronous_standby_names = '{STANDBY_NAME}'"
        ))
        .unwrap();
    admin.batch_execute("SELECT pg_reload_conf()").unwrap();
    wait_for(
        Duration::from_secs(60),
        "the standby becomes synchronous",
        || {
            let n = admin
                .one::<i64>("SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'");
            (n == 1).then_some(())
        },
    );
    admin
        .batch_execute("SELECT segment_create('s', step => 100)")
        .unwrap();
    (primary, standby)
}

/// Draws from `s` until the allocator has to commit a refill, which waits for the synchronous
/// standby (stopped by the caller before). Returns the numbers drawn; the allocator is then
/// waiting in `SyncRep`.
fn drive_allocator_into_sync_wait(primary: &Cluster) -> Vec<i64> {
    let mut client = primary.connect("postgres");
    client
        .batch_execute("SET idgen.segment_wait_timeout = '200ms'")
        .unwrap();
    let mut drawn = Vec::new();
    for _ in 0..2_000 {
        match client.query_one("SELECT segment_nextval('s')", &[]) {
            Ok(row) => drawn.push(row.get(0)),
            Err(_) => break, // both ranges empty, the refill is stuck
        }
    }
    let mut watch = primary.connect("postgres");
    wait_for(
        Duration::from_secs(10),
        "the allocator waits for the synchronous standby",
        || (allocator_wait_event(&mut watch).as_deref() == Some("SyncRep")).then_some(()),
    );
    drawn
}

/// (1a) A fast shutdown finishes while the allocator's commit waits for a synchronous standby
/// that is gone. Before the fix the allocator ignored SIGTERM there and `pg_ctl stop -m fast`
/// hung until its own time-out.
#[test]
fn fast_shutdown_while_the_allocator_waits_for_a_gone_standby() {
    let (primary, standby) = primary_with_sync_standby();
    standby.stop("fast");
    drive_allocator_into_sync_wait(&primary);
    let started = Instant::now();
    primary.stop("fast"); // the harness fails any fast stop over Cluster::STOP_LIMIT
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(10),
        "pg_ctl stop -m fast took {took:?}"
    );
    println!("fast shutdown with the allocator in SyncRep: {took:?}");
}

/// (1b) `pg_terminate_backend` ends the allocator within a second even while its commit waits
/// for a synchronous standby; the next `segment_nextval` starts a new one, and nothing the
/// terminated commit reserved is handed out.
#[test]
fn terminate_ends_the_allocator_and_the_next_call_starts_another() {
    let (primary, standby) = primary_with_sync_standby();
    let mut admin = primary.connect("postgres");
    standby.stop("fast");
    let before = drive_allocator_into_sync_wait(&primary);
    let pid = allocator_pid(&mut admin, "postgres").expect("an allocator");
    admin
        .execute("SELECT pg_terminate_backend($1)", &[&pid])
        .unwrap();
    let started = Instant::now();
    wait_for(Duration::from_secs(5), "the allocator exits", || {
        allocator_pid(&mut admin, "postgres")
            .is_none()
            .then_some(())
    });
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(1),
        "the allocator took {took:?} to exit"
    );
    assert!(
        primary
            .log()
            .contains("the idgen allocator was terminated while committing"),
        "{}",
        primary.log()
    );

    standby.start_server();
    let mut client = primary.connect("postgres");
    let after: Vec<i64> = column(
        &mut client,
        "SELECT segment_nextval('s') FROM generate_series(1, 300)",
    );
    let new_pid = allocator_pid(&mut admin, "postgres").expect("a new allocator");
    assert_ne!(new_pid, pid);
    let max_before = before.iter().max().copied().unwrap_or(0);
    assert!(
        after.iter().all(|n| *n > max_before),
        "numbers after the restart of the allocator repeat earlier ones"
    );
    // The terminated refill committed locally (100 numbers above the last confirmed range);
    // they are skipped, not handed out.
    assert!(
        after[0] > max_before + 100,
        "the first number after the termination, {}, is inside the range whose commit was not confirmed (last before: {max_before})",
        after[0]
    );
    println!(
        "allocator exited {took:?} after pg_terminate_backend; next number {} (last before {max_before})",
        after[0]
    );
}

/// (1c) `pg_cancel_backend` during the allocator's wait for the synchronous standby: PostgreSQL
/// keeps the commit locally with a WARNING. Before the fix the range was then handed out; the
/// standby, promoted after the primary crashed, handed the same numbers out again.
#[test]
fn cancel_during_the_sync_wait_publishes_nothing_a_promoted_standby_lacks() {
    let (primary, standby) = primary_with_sync_standby();
    let mut admin = primary.connect("postgres");
    standby.stop("fast");
    let mut on_primary = drive_allocator_into_sync_wait(&primary);
    let pid = allocator_pid(&mut admin, "postgres").expect("an allocator");
    admin
        .execute("SELECT pg_cancel_backend($1)", &[&pid])
        .unwrap();
    wait_for(Duration::from_secs(10), "the cancel ends the wait", || {
        (allocator_wait_event(&mut admin).as_deref() != Some("SyncRep")
            || primary
                .log()
                .contains("canceling wait for synchronous replication"))
        .then_some(())
    });
    // Callers go on drawing for a while on the old primary: whatever they get must be numbers
    // whose high-water mark the standby has.
    let mut client = primary.connect("postgres");
    client
        .batch_execute("SET idgen.segment_wait_timeout = '200ms'")
        .unwrap();
    let until = Instant::now() + Duration::from_secs(2);
    while Instant::now() < until {
        if let Ok(row) = client.query_one("SELECT segment_nextval('s')", &[]) {
            on_primary.push(row.get(0));
        }
    }
    drop(client);
    primary.stop("immediate");

    standby.start_server();
    standby.promote();
    let mut promoted = standby.connect("postgres");
    let after: Vec<i64> = column(
        &mut promoted,
        "SELECT segment_nextval('s') FROM generate_series(1, 500)",
    );
    let seen: HashSet<i64> = on_primary.iter().copied().collect();
    let repeated: Vec<&i64> = after.iter().filter(|n| seen.contains(n)).collect();
    assert!(
        repeated.is_empty(),
        "{} numbers drawn on the old primary were drawn again after the promotion, e.g. {:?}",
        repeated.len(),
        &repeated[..repeated.len().min(5)]
    );
    assert!(
        primary
            .log()
            .contains("the idgen allocator was cancelled while committing"),
        "{}",
        primary.log()
    );
    println!(
        "cancel during SyncRep: {} numbers on the old primary, {} after the promotion, none repeated",
        on_primary.len(),
        after.len()
    );
}

/// (2) Callers that die by FATAL (`pg_terminate_backend`) while they wait for the allocator
/// give their request back. Before the fix each death leaked a slot of the request queue (64):
/// after that, every admin call and uncached load failed with 53400 until a restart.
#[test]
fn callers_terminated_while_waiting_leak_no_request() {
    let server = Cluster::with_idgen("rel-waiters", 22, &[]);
    let mut admin = server.connect("postgres");
    admin
        .batch_execute(
            "SELECT segment_create('busy', step => 10); SELECT segment_create('later', step => 10)",
        )
        .unwrap();
    // Hold the row the allocator must update: its refill of 'busy' blocks, and every request
    // behind it stays queued.
    let mut holder = server.connect("postgres");
    holder
        .batch_execute("BEGIN; SELECT * FROM idgen_segment WHERE name = 'busy' FOR UPDATE")
        .unwrap();
    let mut first = server.connect("postgres");
    first
        .batch_execute("SET idgen.segment_wait_timeout = '300ms'")
        .unwrap();
    let _ = first.query(
        "SELECT segment_nextval('busy') FROM generate_series(1, 30)",
        &[],
    );
    wait_for(
        Duration::from_secs(10),
        "the allocator blocks on the row",
        || {
            (allocator_wait_event(&mut admin).as_deref() == Some("transactionid")
                || allocator_wait_event(&mut admin).as_deref() == Some("tuple"))
            .then_some(())
        },
    );

    const ROUNDS: usize = 10;
    const PER_ROUND: usize = 20;
    let mut refused = Vec::new();
    for round in 0..ROUNDS {
        let outcomes: Vec<String> = thread::scope(|s| {
            let handles: Vec<_> = (0..PER_ROUND)
                .map(|i| {
                    let server = &server;
                    s.spawn(move || {
                        let mut c = Client::connect(
                            &server
                                .conninfo("postgres")
                                .replace("application_name=idgen-tests", "application_name=waiter"),
                            postgres::NoTls,
                        )
                        .unwrap();
                        c.batch_execute("SET idgen.segment_wait_timeout = 0")
                            .unwrap();
                        let sql = if i % 2 == 0 {
                            format!("SELECT segment_nextval('ghost_{round}_{i}')")
                        } else {
                            format!("SELECT segment_create('made_{round}_{i}')")
                        };
                        match c.batch_execute(&sql) {
                            Ok(()) => "returned".to_owned(),
                            Err(e) => e
                                .code()
                                .map_or("closed".to_owned(), |c| c.code().to_owned()),
                        }
                    })
                })
                .collect();
            // Every waiter is waiting (or was refused at once), then all are terminated.
            let deadline = Instant::now() + Duration::from_secs(20);
            while Instant::now() < deadline {
                let waiting = admin.one::<i64>("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'waiter' AND wait_event_type = 'Extension'");
                let finished = handles.iter().filter(|h| h.is_finished()).count() as i64;
                if waiting + finished >= PER_ROUND as i64 {
                    break;
                }
                thread::sleep(Duration::from_millis(20));
            }
            admin
                .batch_execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'waiter'",
                )
                .unwrap();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        refused.extend(
            outcomes
                .into_iter()
                .filter(|o| o != "57P01" && o != "closed"),
        );
    }
    assert!(
        refused.is_empty(),
        "waiters were refused instead of waiting: {refused:?}"
    );

    holder.batch_execute("COMMIT").unwrap();
    // Every admin call and an uncached load work.
    admin
        .batch_execute(
            "SELECT segment_create('fresh', step => 5);
             SELECT segment_alter('fresh', step => 7);
             SELECT segment_setval('fresh', 1000);
             SELECT segment_drop('fresh')",
        )
        .unwrap();
    let n = admin.one::<i64>("SELECT segment_nextval('later')");
    assert_eq!(n, 1, "an uncached segment's first number");
    println!(
        "{} callers terminated while waiting; admin calls and an uncached load still work",
        ROUNDS * PER_ROUND
    );
}

/// (3) `CREATE DATABASE ... TEMPLATE x` and `ALTER DATABASE x RENAME` while x's allocator is
/// connected: the allocator leaves when asked, so neither fails with 55006 nor makes the user
/// wait for `idgen.segment_worker_idle_timeout`.
#[test]
fn database_commands_work_while_the_allocator_is_connected() {
    let server = Cluster::with_idgen("rel-dbcmds", 23, &[]);
    server.create_db_with_idgen("src");
    let mut admin = server.connect("postgres");
    // Draws past a range, so that the allocator is at work (and connected) afterwards.
    let draw_in = |db: &str| -> i64 {
        let mut c = server.connect(db);
        c.batch_execute("SELECT segment_create('n', step => 10) WHERE NOT EXISTS (SELECT FROM idgen_segment WHERE name = 'n')")
            .unwrap();
        c.one::<i64>("SELECT max(segment_nextval('n')) FROM generate_series(1, 25)")
    };
    let first = draw_in("src");
    let connected = |admin: &mut Client| {
        wait_for(
            Duration::from_secs(10),
            "an allocator connected to src",
            || allocator_pid(admin, "src"),
        )
    };
    let pid = connected(&mut admin);

    // A role that may not rename the database fails its permission check and evicts nothing.
    admin.batch_execute("CREATE ROLE intruder LOGIN").unwrap();
    let mut intruder = server.connect_as("postgres", "intruder");
    let err = db_error(intruder.batch_execute("ALTER DATABASE src RENAME TO stolen"));
    assert_eq!(err.code().code(), "42501", "{err:?}");
    assert_eq!(
        allocator_pid(&mut admin, "src"),
        Some(pid),
        "a failed command evicted the allocator"
    );

    let started = Instant::now();
    admin
        .batch_execute("CREATE DATABASE copy TEMPLATE src")
        .unwrap();
    let took_template = started.elapsed();
    assert!(
        took_template < Duration::from_secs(5),
        "CREATE DATABASE ... TEMPLATE took {took_template:?}"
    );

    let second = draw_in("src");
    assert!(second > first);
    connected(&mut admin);
    let started = Instant::now();
    admin
        .batch_execute("ALTER DATABASE src RENAME TO renamed")
        .unwrap();
    let took_rename = started.elapsed();
    assert!(
        took_rename < Duration::from_secs(5),
        "ALTER DATABASE ... RENAME took {took_rename:?}"
    );

    // Both databases go on: the renamed one above its old numbers, the copy from its own mark.
    let third = draw_in("renamed");
    assert!(third > second, "{third} after {second}");
    let copied = draw_in("copy");
    assert!(copied > first);
    println!(
        "with the allocator connected: CREATE DATABASE ... TEMPLATE took {took_template:?}, ALTER DATABASE ... RENAME {took_rename:?}"
    );
}

/// (5) One-second ticks, a primary allowed 5 s of drift and pushed to it, a standby whose own
/// `idgen.max_drift_ms` is 0: after the primary crashes and the standby (same worker id) is
/// promoted, no id repeats. Before the fix the promoted server started from its own drift
/// bound, rounded down to a tick, inside the primary's last ticks.
#[test]
fn promotion_with_second_ticks_and_a_smaller_drift_bound_repeats_nothing() {
    let settings = [
        "idgen.time_unit_ms = 1000",
        "idgen.max_drift_ms = 5000",
        "idgen.max_wait_ms = 20000",
    ];
    let primary = Cluster::with_idgen("rel-second-ticks", 24, &settings);
    let mut client = primary.connect("postgres");
    // One id before the base backup: the standby gets the primary's reservation file.
    client.one::<i64>("SELECT snowflake_nextval()");
    let standby = Cluster::standby_of(
        &primary,
        "rel-second-ticks-standby",
        &["idgen.max_drift_ms = 0"],
    );

    let mut before: Vec<i64> = Vec::new();
    let mut drift = 0;
    for _ in 0..6 {
        before.extend(column::<i64>(
            &mut client,
            "SELECT snowflake_nextvals(4096)",
        ));
        drift = client.one::<i64>("SELECT drift_ms FROM snowflake_status()");
    }
    assert!(drift >= 4000, "the primary ran only {drift} ms ahead");
    primary.stop("immediate");
    standby.promote();

    let mut promoted = standby.connect("postgres");
    let mut after: Vec<i64> = Vec::new();
    for _ in 0..3 {
        after.extend(column::<i64>(
            &mut promoted,
            "SELECT snowflake_nextvals(4096)",
        ));
    }
    let seen: HashSet<i64> = before.iter().copied().collect();
    let repeated = after.iter().filter(|id| seen.contains(id)).count();
    assert_eq!(repeated, 0, "{repeated} ids repeated after the promotion");
    assert!(after.iter().min() > before.iter().max());
    println!(
        "second ticks: the primary ran {drift} ms ahead; {} ids before, {} after the promotion, none repeated",
        before.len(),
        after.len()
    );
}

/// (9) A user's table named `idgen_segment` (here a temporary one) is not idgen's: dropping it
/// keeps the cached ranges. Before the fix any relation of that name emptied the cache.
#[test]
fn dropping_a_users_table_named_idgen_segment_keeps_the_cache() {
    let server = Cluster::with_idgen("rel-tempname", 25, &[]);
    let mut client = server.connect("postgres");
    client
        .batch_execute("SELECT segment_create('kept', step => 1000)")
        .unwrap();
    let first = client.one::<i64>("SELECT segment_nextval('kept')");
    let cached = |c: &mut Client| {
        c.one::<i64>("SELECT count(*) FROM segment_status() WHERE current_first IS NOT NULL")
    };
    assert_eq!(cached(&mut client), 1);
    client
        .batch_execute("CREATE TEMP TABLE idgen_segment (x int); DROP TABLE pg_temp.idgen_segment")
        .unwrap();
    assert_eq!(cached(&mut client), 1, "the cache was emptied");
    let next = client.one::<i64>("SELECT segment_nextval('kept')");
    assert_eq!(next, first + 1, "the cached range was dropped");
}

/// (9) A caller cancelled while it waits for a refill gets PostgreSQL's cancel error as it is:
/// no DETAIL line. Before the fix pgrx appended a Rust backtrace (or nothing but a line break)
/// to the DETAIL of every error re-raised through Rust when the server's environment had
/// `RUST_BACKTRACE` set, as this server's has.
#[test]
fn a_cancelled_waiter_gets_no_backtrace_detail() {
    let mut server = Cluster::init(
        "rel-cancel",
        &["shared_preload_libraries = 'idgen'", "idgen.worker_id = 26"],
    );
    server.set_env("RUST_BACKTRACE", "1");
    server.start_server();
    server.create_db_with_idgen("postgres");
    let mut admin = server.connect("postgres");
    admin
        .batch_execute("SELECT segment_create('slow', step => 10)")
        .unwrap();
    let mut holder = server.connect("postgres");
    holder
        .batch_execute("BEGIN; SELECT * FROM idgen_segment WHERE name = 'slow' FOR UPDATE")
        .unwrap();
    let cancelled = AtomicBool::new(false);
    let err = thread::scope(|s| {
        let h = s.spawn(|| {
            let mut c = server.connect("postgres");
            c.batch_execute("SET idgen.segment_wait_timeout = 0")
                .unwrap();
            c.query(
                "SELECT segment_nextval('slow') FROM generate_series(1, 100)",
                &[],
            )
        });
        wait_for(Duration::from_secs(10), "the caller waits", || {
            let n = admin.one::<i64>("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'idgen-tests' AND wait_event_type = 'Extension'");
            (n >= 1).then_some(())
        });
        admin
            .batch_execute(
                "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = 'idgen-tests' AND wait_event_type = 'Extension'",
            )
            .unwrap();
        cancelled.store(true, Ordering::SeqCst);
        db_error(h.join().unwrap())
    });
    holder.batch_execute("ROLLBACK").unwrap();
    assert_eq!(err.code().code(), "57014", "{err:?}");
    assert_eq!(err.detail(), None, "{err:?}");
    // idgen's own errors too: an unknown segment has its message and hint, no stack frames.
    let mut client = server.connect("postgres");
    let err = db_error(client.query_one("SELECT segment_nextval('no_such_segment')", &[]));
    assert_eq!(err.code().code(), "42704", "{err:?}");
    assert!(
        !err.detail().unwrap_or("").contains("rust_begin_unwind")
            && !err.detail().unwrap_or("").contains("pgrx"),
        "{err:?}"
    );
}

/// Both generators refuse in a read-only transaction (25006), as `nextval()` does, and change
/// nothing: pg_auto_failover fences a primary by making its transactions read-only, and a
/// server kept read-only must not hand out ids. Before the fix both generated there.
#[test]
fn read_only_transactions_draw_nothing() {
    let server = Cluster::with_idgen("rel-readonly", 27, &[]);
    let mut client = server.connect("postgres");
    client
        .batch_execute("SELECT segment_create('ro', step => 10); SELECT segment_nextval('ro'); SELECT snowflake_nextval()")
        .unwrap();
    let last = || {
        let mut c = server.connect("postgres");
        c.one::<i64>("SELECT last_id FROM snowflake_status()")
    };
    let before = last();
    for (setup, sql) in [
        ("BEGIN READ ONLY", "SELECT snowflake_nextval()"),
        ("BEGIN READ ONLY", "SELECT snowflake_nextvals(10)"),
        ("BEGIN READ ONLY", "SELECT segment_nextval('ro')"),
        (
            "SET default_transaction_read_only = on",
            "SELECT * FROM segment_nextvals('ro', 5)",
        ),
        // Moving a mark is refused too, as setval() is.
        ("BEGIN READ ONLY", "SELECT segment_setval('ro', 1000)"),
        ("BEGIN READ ONLY", "SELECT segment_create('ro2')"),
    ] {
        client.batch_execute(setup).unwrap();
        let err = db_error(client.query(sql, &[]));
        assert_eq!(err.code().code(), "25006", "{sql}: {err:?}");
        assert!(err.message().contains("read-only transaction"), "{err:?}");
        client
            .batch_execute("ROLLBACK; RESET default_transaction_read_only")
            .unwrap();
    }
    assert_eq!(
        last(),
        before,
        "a read-only transaction moved the generator"
    );
    // currval stays readable, as PostgreSQL's.
    client.batch_execute("BEGIN READ ONLY").unwrap();
    assert_eq!(client.one::<i64>("SELECT segment_currval('ro')"), 1);
    client.batch_execute("COMMIT").unwrap();
    assert_eq!(client.one::<i64>("SELECT segment_nextval('ro')"), 2);
}
