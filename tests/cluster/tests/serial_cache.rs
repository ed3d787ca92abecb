//! The shared cache of fast-serial counters (`idgen.serial_cache_size`), on a real server:
//!
//! * 600 counters drawn round-robin fit the default cache: each keeps its range, so the
//!   second pass draws number 2 of every counter, not 11;
//! * a counter evicted from a small cache comes back with the step it had (its high-water mark
//!   grows by that step again), not from the floor of 10;
//! * when the cache is full, a counter of an earlier period than another of its serial leaves
//!   it first (yesterday's counter of a daily serial), not the one refilled longest ago;
//! * counters drawn round-robin through a cache smaller than their number stay increasing;
//! * a draw waiting for another backend's refill gives up at its own
//!   `idgen.segment_wait_timeout` (55P03), not when the other backend's refill ends.

use std::thread;
use std::time::{Duration, Instant};

use idgen_cluster_tests::{column, sqlstate, wait_for, Cluster, FakeClock, One};

/// The high-water mark of serial `name`'s counter (`idgen_serials.current_mark`).
fn mark(db: &mut postgres::Client, name: &str) -> i64 {
    db.one_with(
        "SELECT current_mark FROM idgen_serials WHERE name = $1",
        &[&name],
    )
}

#[test]
fn six_hundred_counters_drawn_round_robin_keep_their_ranges() {
    let cluster = Cluster::with_idgen("serial-cache-600", 3, &[]);
    let mut db = cluster.connect("postgres");
    db.batch_execute(
        "DO $$ BEGIN FOR i IN 1..600 LOOP PERFORM serial_create('rr' || i, 'R{seq:06}'); END LOOP; END $$;
         CREATE TABLE rr_out (pass int, i int, t text);",
    )
    .unwrap();
    for pass in 1..=3 {
        db.batch_execute(&format!(
            "INSERT INTO rr_out SELECT {pass}, i, serial_nextval('rr' || i) FROM generate_series(1, 600) i"
        ))
        .unwrap();
    }
    let rows = db
        .query(
            "SELECT pass, t, count(*) FROM rr_out GROUP BY 1, 2 ORDER BY 1, 2",
            &[],
        )
        .unwrap();
    let seen: Vec<(i32, String, i64)> = rows
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    assert_eq!(
        seen,
        vec![
            (1, "R000001".to_owned(), 600),
            (2, "R000002".to_owned(), 600),
            (3, "R000003".to_owned(), 600),
        ],
        "every counter draws 1, 2, 3 (pass, number, counters)"
    );
    // One range of 10 per counter: nothing was evicted and taken again.
    let marks: Vec<i64> = column(
        &mut db,
        "SELECT DISTINCT current_mark FROM idgen_serials WHERE name LIKE 'rr%'",
    );
    assert_eq!(marks, vec![10], "high-water marks after three draws each");
}

#[test]
fn an_evicted_counter_comes_back_with_its_step() {
    let cluster = Cluster::with_idgen("serial-cache-ghost", 3, &["idgen.serial_cache_size = 16"]);
    let mut db = cluster.connect("postgres");
    assert_eq!(db.one::<String>("SHOW idgen.serial_cache_size"), "16");
    db.batch_execute("SELECT serial_create('hot', 'H{seq}')")
        .unwrap();
    // Three refills in quick succession: steps 10, 20 and 40, so the mark is 70.
    let drawn: Vec<String> = column(
        &mut db,
        "SELECT serial_nextval('hot') FROM generate_series(1, 31)",
    );
    assert_eq!(drawn.last().unwrap(), "H31");
    let before = mark(&mut db, "hot");
    assert_eq!(before, 70, "the mark after steps of 10, 20 and 40");
    // Sixteen other counters, each drawn once, fill the cache: the 16th evicts `hot`, refilled
    // longest ago.
    db.batch_execute(
        "DO $$ BEGIN FOR i IN 1..16 LOOP PERFORM serial_create('e' || i, 'E{seq}'); END LOOP; END $$;
         SELECT count(serial_nextval('e' || i)) FROM generate_series(1, 16) i;",
    )
    .unwrap();
    // `hot` comes back: the rest of its range was skipped at the eviction, and its next range
    // is as long as the last one (40, or 20 if more than 20 s went by), not 10.
    let next: String = db.one("SELECT serial_nextval('hot')");
    assert_eq!(next, "H71", "the first number above the evicted range");
    let grown = mark(&mut db, "hot") - before;
    assert!(
        (20..=40).contains(&grown),
        "the mark grew by {grown} at the re-entry: the step of 40 was not kept"
    );
}

/// Sets the server's clock to the real time plus `offset_secs` and waits until the backend of
/// `db` runs on it.
fn move_clock(clock: &FakeClock, db: &mut postgres::Client, offset_secs: f64) {
    clock.set_offset_secs(offset_secs);
    thread::sleep(FakeClock::PICKUP);
    wait_for(
        "the server's clock to move",
        Duration::from_secs(15),
        || {
            let server: f64 = db.one("SELECT extract(epoch FROM clock_timestamp())::float8");
            let real = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs_f64();
            ((server - real - offset_secs).abs() < 60.0).then_some(())
        },
    );
}

#[test]
fn a_counter_of_a_past_period_leaves_a_full_cache_first() {
    let mut cluster = Cluster::init(
        "serial-cache-period",
        &[
            "shared_preload_libraries = 'idgen'",
            "idgen.worker_id = 3",
            "idgen.serial_cache_size = 16",
        ],
    );
    let clock = cluster.fake_clock();
    cluster.start_server();
    cluster.create_db_with_idgen("postgres");
    let mut db = cluster.connect("postgres");
    db.batch_execute(
        "SELECT serial_create('old', 'O{seq}');
         SELECT serial_create('daily', 'D{YYYY}{MM}{DD}-{seq}', reset => 'day', time_zone => 'UTC');
         DO $$ BEGIN FOR i IN 1..14 LOOP PERFORM serial_create('x' || i, 'X{seq}'); END LOOP; END $$;",
    )
    .unwrap();
    // The middle of a UTC day, far from its midnights.
    let noon: f64 = db.one(
        "SELECT extract(epoch FROM
                (date_trunc('day', now() AT TIME ZONE 'UTC' - interval '12 hours') + interval '1 day 12 hours')
                - (now() AT TIME ZONE 'UTC'))::float8",
    );
    move_clock(&clock, &mut db, noon);
    // `old` is refilled first, then today's counter of `daily`, then 14 more: the cache is full.
    assert_eq!(db.one::<String>("SELECT serial_nextval('old')"), "O1");
    let today: String = db.one("SELECT serial_nextval('daily')");
    assert!(today.ends_with("-1"), "{today}");
    db.batch_execute("SELECT count(serial_nextval('x' || i)) FROM generate_series(1, 14) i")
        .unwrap();
    // The next day's counter of `daily` takes the slot of yesterday's, not that of `old`.
    move_clock(&clock, &mut db, noon + 86_400.0);
    let tomorrow: String = db.one("SELECT serial_nextval('daily')");
    assert!(tomorrow.ends_with("-1") && tomorrow != today, "{tomorrow}");
    let next: String = db.one("SELECT serial_nextval('old')");
    assert_eq!(
        next, "O2",
        "`old` left the cache (its range skipped) instead of yesterday's counter"
    );
}

#[test]
fn counters_drawn_round_robin_through_a_small_cache_keep_increasing() {
    let cluster = Cluster::with_idgen("serial-cache-churn", 3, &["idgen.serial_cache_size = 16"]);
    let mut db = cluster.connect("postgres");
    db.batch_execute(
        "DO $$ BEGIN FOR i IN 1..40 LOOP PERFORM serial_create('c' || i, '{seq}'); END LOOP; END $$;
         CREATE TABLE c_out (pass int, i int, n bigint);",
    )
    .unwrap();
    for pass in 1..=5 {
        db.batch_execute(&format!(
            "INSERT INTO c_out SELECT {pass}, i, serial_nextval('c' || i)::bigint FROM generate_series(1, 40) i"
        ))
        .unwrap();
    }
    let bad: i64 = db.one(
        "SELECT count(*) FROM (SELECT n <= lag(n) OVER (PARTITION BY i ORDER BY pass) AS down
           FROM c_out) x WHERE down",
    );
    assert_eq!(bad, 0, "a counter went down or repeated");
    let count: i64 = db.one("SELECT count(DISTINCT (i, n)) FROM c_out");
    assert_eq!(count, 200);
}

#[test]
fn a_draw_waiting_for_another_refill_gives_up_at_its_own_timeout() {
    let cluster = Cluster::with_idgen("serial-cache-wait", 3, &[]);
    let mut admin = cluster.connect("postgres");
    admin
        .batch_execute("SELECT serial_create('f', 'F{seq}')")
        .unwrap();
    // S0 blocks every write of the counters: the allocator's refill waits for its lock (up to
    // the allocator's lock timeout, 10 s).
    let mut s0 = cluster.connect("postgres");
    s0.batch_execute("BEGIN; LOCK TABLE idgen_serial_counter IN SHARE MODE")
        .unwrap();
    let mut r = cluster.connect("postgres");
    let r_pid: i32 = r.one("SELECT pg_backend_pid()");
    let started = Instant::now();
    let refiller = thread::spawn(move || {
        r.batch_execute("SET idgen.segment_wait_timeout = 0")
            .unwrap();
        let result = r.query_one("SELECT serial_nextval('f')", &[]).map(|_| ());
        (result, started.elapsed())
    });
    wait_for("R waiting for its refill", Duration::from_secs(10), || {
        let event: Option<String> = admin
            .query_one(
                "SELECT wait_event FROM pg_stat_activity WHERE pid = $1",
                &[&r_pid],
            )
            .ok()
            .and_then(|row| row.get(0));
        (event.as_deref() == Some("Extension")).then_some(())
    });
    let mut w = cluster.connect("postgres");
    w.batch_execute("SET idgen.segment_wait_timeout = '1s'")
        .unwrap();
    let t = Instant::now();
    let result = w.query_one("SELECT serial_nextval('f')", &[]);
    let waited = t.elapsed();
    let r_still_waiting = !refiller.is_finished();
    assert_eq!(sqlstate(result), "55P03");
    assert!(
        waited < Duration::from_secs(5) && r_still_waiting,
        "W (1 s) gave up after {waited:?}, R still waiting: {r_still_waiting}"
    );
    s0.batch_execute("ROLLBACK").unwrap();
    let (_, r_waited) = refiller.join().unwrap();
    assert!(
        r_waited > waited,
        "R ({r_waited:?}) ended before W ({waited:?})"
    );
    // The counter is usable afterwards.
    let n: String = w.one("SELECT serial_nextval('f')");
    assert!(n.starts_with('F'), "{n}");
}

/// A counter drawn now and then, evicted between its draws, does not take the whole step a
/// burst grew it to at every return: its step halves at each stay it leaves unused, down to
/// the floor. Each round draws 16 counters never drawn before, which evict `hot` (refilled
/// longest ago), then `hot` once. On the code before this test each of the 30 returns took a
/// step of 49 or 99 (up to 1 % of `{seq:04}`), and the mark grew by 1,470 for 30 numbers.
#[test]
fn a_counter_evicted_between_rare_draws_does_not_skip_its_burst_step_each_time() {
    let cluster = Cluster::with_idgen("serial-cache-decay", 3, &["idgen.serial_cache_size = 16"]);
    let mut db = cluster.connect("postgres");
    db.batch_execute(
        "SELECT serial_create('hot', 'H{seq:04}');
         SELECT count(serial_nextval('hot')) FROM generate_series(1, 2000);
         DO $$ BEGIN FOR i IN 1..480 LOOP PERFORM serial_create('c' || i, 'C{seq}'); END LOOP; END $$;",
    )
    .unwrap();
    let before = mark(&mut db, "hot");
    for round in 0..30 {
        db.batch_execute(&format!(
            "SELECT count(serial_nextval('c' || i)) FROM generate_series({}, {}) i;
             SELECT serial_nextval('hot');",
            16 * round + 1,
            16 * round + 16
        ))
        .unwrap();
    }
    let grown = mark(&mut db, "hot") - before;
    assert!(
        grown < 700,
        "hot's mark grew by {grown} for 30 draws, each evicted in between"
    );
}

/// The wait for another backend's refill and the refill this draw then makes itself share one
/// timeout: W (2 s) waits for R's refill, R is cancelled after 1.5 s while the allocator is
/// still blocked, and W, now the refiller, gives up at its deadline, naming the serial. On the
/// code before this test W's refill started a timeout of its own and W gave up after 3.5 s,
/// naming segment "" (the counter's job).
#[test]
fn a_draw_that_becomes_the_refiller_keeps_its_deadline() {
    let cluster = Cluster::with_idgen("serial-cache-refiller", 3, &[]);
    let mut admin = cluster.connect("postgres");
    admin
        .batch_execute("SELECT serial_create('f', 'F{seq}')")
        .unwrap();
    let mut s0 = cluster.connect("postgres");
    s0.batch_execute("BEGIN; LOCK TABLE idgen_serial_counter IN SHARE MODE")
        .unwrap();
    let mut r = cluster.connect("postgres");
    let r_pid: i32 = r.one("SELECT pg_backend_pid()");
    let refiller = thread::spawn(move || {
        r.batch_execute("SET idgen.segment_wait_timeout = 0")
            .unwrap();
        sqlstate(r.query_one("SELECT serial_nextval('f')", &[]))
    });
    wait_for("R waiting for its refill", Duration::from_secs(10), || {
        let event: Option<String> = admin
            .query_one(
                "SELECT wait_event FROM pg_stat_activity WHERE pid = $1",
                &[&r_pid],
            )
            .ok()
            .and_then(|row| row.get(0));
        (event.as_deref() == Some("Extension")).then_some(())
    });
    let waiter = {
        let mut w = cluster.connect("postgres");
        thread::spawn(move || {
            w.batch_execute("SET idgen.segment_wait_timeout = '2s'")
                .unwrap();
            let t = Instant::now();
            let result = w.query_one("SELECT serial_nextval('f')", &[]);
            (
                t.elapsed(),
                result.map(|_| ()).map_err(|e| e.as_db_error().cloned()),
            )
        })
    };
    thread::sleep(Duration::from_millis(1500));
    admin
        .execute("SELECT pg_cancel_backend($1)", &[&r_pid])
        .unwrap();
    let (waited, result) = waiter.join().unwrap();
    assert_eq!(refiller.join().unwrap(), "57014");
    let e = result
        .expect_err("W got a number while the counters were locked")
        .unwrap();
    assert_eq!(e.code().code(), "55P03", "{e:?}");
    assert!(
        waited < Duration::from_millis(2900),
        "W (2 s) gave up after {waited:?}"
    );
    assert!(e.message().contains("serial \"f\""), "{e:?}");
    s0.batch_execute("ROLLBACK").unwrap();
}
