//! Pins the limits of the segment allocators and their request queue on real servers: a call
//! told it failed has no effect later, even when no allocator could be started; a burst of
//! first draws waits instead of failing; a failed or rolled-back drop keeps the cached ranges;
//! give-back runs in a busy database; the allocator's lock waits stay bounded; and one
//! database's waiters never fill the queue for the others.

use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use idgen_cluster_tests::{sqlstate, wait_for, Cluster, One};
use postgres::Client;

fn max_id(client: &mut Client, name: &str) -> i64 {
    client.one_with("SELECT max_id FROM idgen_segment WHERE name = $1", &[&name])
}

fn next(client: &mut Client, name: &str) -> i64 {
    client.one_with("SELECT segment_nextval($1)", &[&name])
}

/// Sessions of database `db` sleeping on idgen's condition variable (waiting for an allocator).
fn waiting(client: &mut Client, db: &str) -> i64 {
    client.one_with(
        "SELECT count(*) FROM pg_stat_activity \
         WHERE datname = $1 AND backend_type = 'client backend' AND wait_event_type = 'Extension'",
        &[&db],
    )
}

/// Waits until the allocator of `db` waits for a heavyweight lock.
fn wait_for_allocator_lock_wait(client: &mut Client, db: &str) {
    wait_for(
        "the allocator to wait for a lock",
        Duration::from_secs(10),
        || {
            let n: i64 = client.one_with(
                "SELECT count(*) FROM pg_stat_activity a JOIN pg_locks l USING (pid) \
             WHERE a.backend_type = 'idgen allocator' AND a.datname = $1 AND NOT l.granted",
                &[&db],
            );
            (n > 0).then_some(())
        },
    );
}

fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .expect("kill");
    assert!(ok.success(), "kill {sig} {pid}");
}

/// A postmaster stopped with SIGSTOP (it starts and reaps no process), continued when this
/// is dropped, even by a failing assertion (a stopped postmaster would not stop either).
struct StoppedPostmaster(u32);

impl StoppedPostmaster {
    fn new(pid: u32) -> Self {
        signal(pid, "-STOP");
        StoppedPostmaster(pid)
    }
}

impl Drop for StoppedPostmaster {
    fn drop(&mut self) {
        signal(self.0, "-CONT");
    }
}

/// The static background workers of a running server (each takes one of
/// `max_worker_processes`).
fn static_workers(client: &mut Client) -> i64 {
    client.one(
        "SELECT count(*) FROM pg_stat_activity WHERE backend_type NOT IN \
         ('client backend', 'autovacuum launcher', 'autovacuum worker', 'background writer', \
          'checkpointer', 'walwriter', 'startup', 'archiver', 'walsender', 'walreceiver', \
          'idgen allocator', 'idgen registry allocator')",
    )
}

#[test]
fn a_call_that_failed_for_want_of_an_allocator_has_no_effect_later() {
    let cluster = Cluster::with_idgen("limits-restart", 3, &["idgen.segment_wait_timeout = '60s'"]);
    // One worker slot for allocators, which the allocator of `postgres` takes: the fewest
    // slots with which one starts (not every static worker shows in pg_stat_activity).
    let mut slots = static_workers(&mut cluster.connect("postgres"));
    let mut admin = loop {
        slots += 1;
        assert!(slots < 20, "no allocator starts");
        cluster.stop("fast");
        cluster.append_settings(&[&format!("max_worker_processes = {slots}")]);
        cluster.start_server();
        let mut admin = cluster.connect("postgres");
        match admin.batch_execute("SELECT segment_create('blocker')") {
            Ok(()) => break admin,
            Err(e) => assert_eq!(sqlstate::<()>(Err(e)), "53400"),
        }
    };
    admin
        .batch_execute(
            "SELECT segment_create('x'); SELECT segment_create('y', step => 10); \
             SELECT segment_nextval('x'); SELECT segment_nextval('y'); \
             SELECT segment_setval('y', 50)",
        )
        .unwrap();
    let x_before = max_id(&mut admin, "x");
    let mut drawer = cluster.connect("postgres");
    let mut locker = cluster.connect("postgres");
    locker
        .batch_execute("BEGIN; LOCK TABLE idgen_segment IN SHARE MODE")
        .unwrap();

    thread::scope(|s| {
        // Runs in the allocator, which waits for the lock.
        let running = s.spawn(|| {
            cluster
                .connect("postgres")
                .query_one("SELECT segment_setval('blocker', 500)", &[])
        });
        wait_for_allocator_lock_wait(&mut admin, "postgres");
        // Queued behind it. Its session stays: a request is withdrawn when its session ends.
        let queued = s.spawn(|| {
            let mut c = cluster.connect("postgres");
            let r = c.query_one("SELECT segment_setval('x', 100000)", &[]);
            (c, r)
        });
        wait_for("the queued call to wait", Duration::from_secs(10), || {
            (waiting(&mut admin, "postgres") >= 2).then_some(())
        });
        // The postmaster cannot free the allocator's worker slot while stopped: the queued
        // caller's attempt to start another allocator fails, deterministically.
        let stopped = StoppedPostmaster::new(cluster.postmaster_pid());
        admin
            .batch_execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                 WHERE backend_type = 'idgen allocator' AND datname = current_database()",
            )
            .unwrap();
        let (_queued_session, queued) = queued.join().unwrap();
        // A draw that needs a refill cannot get an allocator either.
        let drawn = drawer.query_one("SELECT segment_nextval('y')", &[]);
        let pending: bool =
            admin.one("SELECT refill_pending FROM segment_cache_status() WHERE name = 'y'");
        drop(stopped);
        let _ = running.join().unwrap();
        locker.batch_execute("COMMIT").unwrap();
        assert_eq!(
            sqlstate(queued),
            "53400",
            "the queued call has no allocator"
        );
        assert_eq!(sqlstate(drawn), "53400", "the draw has no allocator");

        // The next allocator of the database serves the oldest requests first: a request left
        // in the queue would run now. Its start may fail while the postmaster, just continued,
        // has not yet freed the terminated allocator's worker slot (53400): try again.
        wait_for(
            "an allocator again",
            Duration::from_secs(20),
            || match admin.query_one("SELECT segment_nextval('blocker')", &[]) {
                Ok(_) => Some(()),
                Err(e) => {
                    let state = sqlstate::<()>(Err(e));
                    assert_eq!(
                        state, "53400",
                        "segment_nextval('blocker') after the 53400s"
                    );
                    None
                }
            },
        );
        let x_after = max_id(&mut admin, "x");
        println!("after the 53400s: y refill_pending {pending}, x max_id {x_before} -> {x_after}");
        assert!(
            !pending && x_after == x_before,
            "a call reported failed left work behind: y's refill still wanted: {pending}; \
             x's max_id {x_before} -> {x_after} (segment_setval('x', 100000) took effect)"
        );
    });
}

#[test]
fn a_burst_of_first_draws_of_more_names_than_the_cache_holds_all_get_numbers() {
    const NAMES: i32 = 20;
    let cluster = Cluster::with_idgen(
        "limits-burst",
        3,
        &[
            "idgen.segment_cache_size = 16",
            "idgen.segment_wait_timeout = '30s'",
        ],
    );
    let mut admin = cluster.connect("postgres");
    admin
        .batch_execute(&format!(
            "SELECT segment_create('blocker'); \
             SELECT segment_create('n' || g) FROM generate_series(1, {NAMES}) g"
        ))
        .unwrap();
    let mut locker = cluster.connect("postgres");
    locker
        .batch_execute("BEGIN; LOCK TABLE idgen_segment IN SHARE MODE")
        .unwrap();
    let results: Vec<Result<i64, String>> = thread::scope(|s| {
        let blocked = s.spawn(|| {
            cluster
                .connect("postgres")
                .query_one("SELECT segment_setval('blocker', 10)", &[])
                .map(|_| ())
        });
        wait_for_allocator_lock_wait(&mut admin, "postgres");
        let clients: Vec<_> = (0..NAMES).map(|_| cluster.connect("postgres")).collect();
        let draws: Vec<_> = clients
            .into_iter()
            .enumerate()
            .map(|(i, mut c)| {
                s.spawn(move || {
                    c.query_one("SELECT segment_nextval($1)", &[&format!("n{}", i + 1)])
                        .map(|r| r.get::<_, i64>(0))
                        .map_err(|e| sqlstate::<()>(Err(e)))
                })
            })
            .collect();
        wait_for("every first draw to queue", Duration::from_secs(10), || {
            (waiting(&mut admin, "postgres") > NAMES as i64).then_some(())
        });
        locker.batch_execute("COMMIT").unwrap();
        blocked.join().unwrap().unwrap();
        draws.into_iter().map(|h| h.join().unwrap()).collect()
    });
    println!("{results:?}");
    assert!(
        results.iter().all(|r| r == &Ok(1)),
        "every first draw gets 1: {results:?}"
    );
}

#[test]
fn a_failed_drop_database_or_a_rolled_back_drop_extension_keeps_the_cached_ranges() {
    let cluster = Cluster::with_idgen("limits-drop", 3, &[]);
    cluster.create_db_with_idgen("x");
    let mut a = cluster.connect("x");
    a.batch_execute("SELECT segment_create('s', step => 1000)")
        .unwrap();
    assert_eq!(next(&mut a, "s"), 1);
    assert_eq!(next(&mut a, "s"), 2);
    let mut b = cluster.connect("postgres");
    // Fails: `a` is connected (after PostgreSQL's 5 s wait for it to leave).
    assert_eq!(sqlstate(b.batch_execute("DROP DATABASE x")), "55006");
    let after_drop_database = next(&mut a, "s");
    a.batch_execute("BEGIN; DROP EXTENSION idgen; ROLLBACK")
        .unwrap();
    let after_rollback = next(&mut a, "s");
    assert_eq!(
        (after_drop_database, after_rollback),
        (3, 4),
        "a drop that did not commit leaves the cached range in use"
    );
    // A drop that commits still forgets the ranges: the re-created segment starts over.
    for sql in [
        "DROP EXTENSION idgen",
        "CREATE EXTENSION idgen",
        "SELECT segment_create('s', step => 1000)",
    ] {
        a.batch_execute(sql).unwrap();
    }
    assert_eq!(next(&mut a, "s"), 1);
}

#[test]
fn idle_segments_are_given_back_while_others_are_busy() {
    let cluster = Cluster::with_idgen(
        "limits-idle",
        3,
        &[
            "idgen.segment_worker_idle_timeout = '2s'",
            "idgen.segment_max_step = 10",
        ],
    );
    let mut admin = cluster.connect("postgres");
    admin
        .batch_execute(
            "SELECT segment_create('cold', step => 1000); SELECT segment_create('hot', step => 10)",
        )
        .unwrap();
    assert_eq!(next(&mut admin, "cold"), 1);
    assert_eq!(max_id(&mut admin, "cold"), 1000);
    let stop = std::sync::atomic::AtomicBool::new(false);
    let given_back = thread::scope(|s| {
        s.spawn(|| {
            // 20 draws a second, a refill every half second: the allocator is never idle.
            let mut hot = cluster.connect("postgres");
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                next(&mut hot, "hot");
                thread::sleep(Duration::from_millis(50));
            }
        });
        // Two idle periods: the first clears cold's referenced bit, the second takes it out.
        let started = Instant::now();
        let mut given_back = false;
        while started.elapsed() < Duration::from_secs(8) {
            if max_id(&mut admin, "cold") == 1 {
                given_back = true;
                break;
            }
            thread::sleep(Duration::from_millis(200));
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        given_back
    });
    let refills: i64 = admin.one("SELECT max_id FROM idgen_segment WHERE name = 'hot'");
    assert!(
        refills > 40,
        "hot was refilled throughout: max_id {refills}"
    );
    assert!(
        given_back,
        "cold was not given back within 8 s (idle timeout 2 s): max_id {}",
        max_id(&mut admin, "cold")
    );
}

#[test]
fn a_server_wide_wait_timeout_of_zero_still_bounds_the_allocators_lock_waits() {
    let cluster = Cluster::with_idgen("limits-lock", 3, &["idgen.segment_wait_timeout = 0"]);
    let mut admin = cluster.connect("postgres");
    admin.batch_execute("SELECT segment_create('x')").unwrap();
    // The caller holds a lock the allocator's unit needs, and waits for that unit: only the
    // allocator's own lock timeout ends it.
    admin
        .batch_execute(
            "SET statement_timeout = '25s'; BEGIN; LOCK TABLE idgen_segment IN SHARE MODE",
        )
        .unwrap();
    let started = Instant::now();
    let outcome = admin.query_one("SELECT segment_setval('x', 10)", &[]);
    println!("segment_setval ended after {:?}", started.elapsed());
    assert_eq!(sqlstate(outcome), "55P03");
}

#[test]
fn a_database_with_many_waiters_does_not_fill_the_queue_for_another() {
    const WAITERS: i32 = 64;
    let cluster = Cluster::with_idgen(
        "limits-queue",
        3,
        &[
            "max_connections = 100",
            "idgen.segment_wait_timeout = '30s'",
        ],
    );
    cluster.create_db_with_idgen("d2");
    let mut d2 = cluster.connect("d2");
    d2.batch_execute("SELECT segment_create('any')").unwrap();
    let mut admin = cluster.connect("postgres");
    admin
        .batch_execute(&format!(
            "SELECT segment_create('s' || g) FROM generate_series(1, {WAITERS}) g"
        ))
        .unwrap();
    let mut locker = cluster.connect("postgres");
    locker
        .batch_execute("BEGIN; LOCK TABLE idgen_segment IN SHARE MODE")
        .unwrap();
    let clients: Vec<_> = (0..WAITERS).map(|_| cluster.connect("postgres")).collect();
    let (drawn, calls) = thread::scope(|s| {
        let calls: Vec<_> = clients
            .into_iter()
            .enumerate()
            .map(|(i, mut c)| {
                s.spawn(move || {
                    c.query_one("SELECT segment_setval($1, 10)", &[&format!("s{}", i + 1)])
                        .map(|_| ())
                })
            })
            .collect();
        wait_for("every call to queue", Duration::from_secs(10), || {
            (waiting(&mut admin, "postgres") >= WAITERS as i64).then_some(())
        });
        let drawn = d2.query_one("SELECT segment_nextval('any')", &[]);
        // Let the calls finish before anything is asserted.
        locker.batch_execute("ROLLBACK").unwrap();
        let calls: Vec<_> = calls.into_iter().map(|h| h.join().unwrap()).collect();
        (drawn, calls)
    });
    let drawn = drawn.map(|r| r.get::<_, i64>(0));
    assert!(
        matches!(drawn, Ok(1)),
        "a first draw in d2 while d1 has {WAITERS} waiters: {drawn:?}"
    );
    assert!(calls.iter().all(|c| c.is_ok()), "{calls:?}");
}

/// A session's first call of a name waits one `idgen.segment_wait_timeout` in all: the load of
/// the name and the wait for its first range share it. The load waits 2.5 s behind an
/// `ACCESS EXCLUSIVE` lock on `idgen_segment`, then the first refill waits behind a `SHARE`
/// lock taken as the first is released. On the code before this test the draw started a
/// timeout of its own after the load, and the call failed after about 5.5 s, not 3.
#[test]
fn a_first_call_waits_one_timeout_for_its_load_and_its_range() {
    let cluster = Cluster::with_idgen(
        "limits-first-call",
        3,
        &["idgen.segment_wait_timeout = '3s'"],
    );
    let mut admin = cluster.connect("postgres");
    admin
        .batch_execute("SELECT segment_create('first', step => 10)")
        .unwrap();
    let mut exclusive = cluster.connect("postgres");
    exclusive
        .batch_execute("BEGIN; LOCK TABLE idgen_segment IN ACCESS EXCLUSIVE MODE")
        .unwrap();
    let caller = {
        let mut c = cluster.connect("postgres");
        thread::spawn(move || {
            let started = Instant::now();
            let r = c.query_one("SELECT segment_nextval('first')", &[]);
            (started.elapsed(), sqlstate(r))
        })
    };
    wait_for_allocator_lock_wait(&mut admin, "postgres");
    // Queued behind the exclusive lock, after the allocator's load: granted with it.
    let share = {
        let mut c = cluster.connect("postgres");
        thread::spawn(move || {
            c.batch_execute("BEGIN; LOCK TABLE idgen_segment IN SHARE MODE")
                .unwrap();
            thread::sleep(Duration::from_secs(4));
            c.batch_execute("COMMIT").unwrap();
        })
    };
    wait_for("the SHARE lock to queue", Duration::from_secs(10), || {
        let n: i64 = admin.one(
            "SELECT count(*) FROM pg_locks WHERE mode = 'ShareLock' AND NOT granted
               AND relation = 'idgen_segment'::regclass",
        );
        (n == 1).then_some(())
    });
    thread::sleep(Duration::from_millis(2500));
    exclusive.batch_execute("COMMIT").unwrap();
    let (took, code) = caller.join().unwrap();
    assert_eq!(code, "55P03", "after {took:?}");
    assert!(
        took < Duration::from_millis(4500),
        "the first call gave up after {took:?}: one timeout of 3 s for its load and its range"
    );
    share.join().unwrap();
}
