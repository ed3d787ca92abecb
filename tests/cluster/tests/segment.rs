//! Pins the segment guarantees on real servers: numbers are never handed out twice, whatever the
//! callers do (concurrency, ROLLBACK), whatever happens to the server (immediate stop, `kill -9`
//! of the allocator worker), and across `pg_dump`/`pg_restore`; each connection's numbers
//! increase; the double buffer and the dynamic step work ahead of need; databases are
//! independent. Who may change segments is pinned in `privileges.rs`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use idgen_cluster_tests::{
    as_postgres, assert_distinct, assert_increasing, column, sqlstate, Cluster, One,
};
use postgres::Client;

const PRELOAD: &str = "shared_preload_libraries = 'idgen'";

/// Draws `n` numbers of `name` as `n` separate `segment_nextval` calls in one statement, in
/// call order.
fn draw(client: &mut Client, name: &str, n: i32) -> Result<Vec<i64>, postgres::Error> {
    let rows = client.query(
        "SELECT g, segment_nextval($1) FROM generate_series(1, $2) g ORDER BY g",
        &[&name, &n],
    )?;
    Ok(rows.iter().map(|r| r.get(1)).collect())
}

fn max_id(client: &mut Client, name: &str) -> i64 {
    client.one_with("SELECT max_id FROM idgen_segment WHERE name = $1", &[&name])
}

#[test]
fn eight_connections_draw_distinct_increasing_numbers() {
    const CONNECTIONS: usize = 8;
    const PER_CONNECTION: usize = 100_000;
    const BATCH: i32 = 1000;
    let cluster = Cluster::with_idgen("seg-concurrency", 3, &[]);
    cluster
        .connect("postgres")
        .batch_execute("SELECT segment_create('s', step => 100)")
        .unwrap();

    let per_connection: Vec<Vec<i64>> = thread::scope(|s| {
        let handles: Vec<_> = (0..CONNECTIONS)
            .map(|i| {
                let cluster = &cluster;
                s.spawn(move || {
                    let mut client = cluster.connect("postgres");
                    let mut got = Vec::with_capacity(PER_CONNECTION);
                    for round in 0..PER_CONNECTION / BATCH as usize {
                        if (round + i) % 2 == 0 {
                            got.extend(draw(&mut client, "s", BATCH).unwrap());
                        } else {
                            let rows = client
                                .query("SELECT segment_nextvals('s', $1)", &[&BATCH])
                                .unwrap();
                            got.extend(rows.iter().map(|r| r.get::<_, i64>(0)));
                        }
                    }
                    let last = client.one::<i64>("SELECT segment_currval('s')");
                    assert_eq!(
                        Some(&last),
                        got.last(),
                        "segment_currval is the last number"
                    );
                    got
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });

    for (i, numbers) in per_connection.iter().enumerate() {
        assert_eq!(numbers.len(), PER_CONNECTION);
        assert_increasing(&format!("connection {i}"), numbers);
    }
    let distinct = assert_distinct("eight connections", per_connection.iter().flatten());
    assert_eq!(distinct, CONNECTIONS * PER_CONNECTION);
    let highest = per_connection.iter().flatten().max().copied().unwrap();
    let mut client = cluster.connect("postgres");
    assert!(max_id(&mut client, "s") >= highest);
    // One table write buys a range: far fewer refills than numbers.
    let refills = client.one::<i64>("SELECT refills FROM segment_status() WHERE name = 's'");
    assert!(
        refills >= 1 && refills <= (CONNECTIONS * PER_CONNECTION / 100) as i64,
        "{refills} refills"
    );
}

#[test]
fn rolled_back_draws_are_never_handed_out_again() {
    let cluster = Cluster::with_idgen("seg-rollback", 3, &[]);
    let mut admin = cluster.connect("postgres");
    // A small step: most transactions below cause refills, which must survive their ROLLBACK.
    admin
        .batch_execute(
            "SELECT segment_create('r', step => 7); CREATE TABLE kept (n bigint PRIMARY KEY)",
        )
        .unwrap();

    let per_session: Vec<Vec<i64>> = thread::scope(|s| {
        let handles: Vec<_> = (0..6)
            .map(|i| {
                let cluster = &cluster;
                s.spawn(move || {
                    let mut client = cluster.connect("postgres");
                    let mut got = Vec::new();
                    for round in 0..300 {
                        let mut tx = client.transaction().unwrap();
                        let rows = tx
                            .query(
                                "INSERT INTO kept SELECT segment_nextval('r') FROM generate_series(1, 5) RETURNING n",
                                &[],
                            )
                            .unwrap();
                        let mut mine: Vec<i64> = rows.iter().map(|r| r.get(0)).collect();
                        mine.sort();
                        got.extend(mine);
                        // Sessions 0-2 roll back every other transaction, 3-5 always commit.
                        if i < 3 && round % 2 == 0 {
                            tx.rollback().unwrap();
                        } else {
                            tx.commit().unwrap();
                        }
                    }
                    got
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });

    for (i, numbers) in per_session.iter().enumerate() {
        assert_increasing(&format!("session {i}"), numbers);
    }
    assert_eq!(
        assert_distinct("six sessions", per_session.iter().flatten()),
        6 * 300 * 5
    );
    // After all that, new numbers are above everything handed out, committed or not.
    let highest = per_session.iter().flatten().max().copied().unwrap();
    let next = draw(&mut admin, "r", 1).unwrap()[0];
    assert!(next > highest, "{next} after {highest}");
    assert!(max_id(&mut admin, "r") >= next);
}

/// Draws from 8 connections until `stop` is set or the server goes away; returns what each
/// connection received.
fn draw_until_stopped(cluster: &Cluster, name: &str, stop: &AtomicBool) -> Vec<i64> {
    thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|_| {
                s.spawn(move || {
                    let mut client = cluster.connect("postgres");
                    let mut got = Vec::new();
                    while !stop.load(Ordering::SeqCst) {
                        match draw(&mut client, name, 50) {
                            Ok(v) => got.extend(v),
                            Err(_) => break,
                        }
                    }
                    got
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    })
}

/// After an abrupt end of the server (or of its allocator), the numbers drawn before it and
/// after the restart: all distinct, every later one above every earlier one, and the stored
/// high-water mark at or above all of them.
fn assert_survives(cluster: &Cluster, name: &str, disaster: impl FnOnce() + Send) {
    let stop = AtomicBool::new(false);
    let before = thread::scope(|s| {
        let drawing = s.spawn(|| draw_until_stopped(cluster, name, &stop));
        thread::sleep(Duration::from_millis(1500));
        disaster();
        thread::sleep(Duration::from_millis(200));
        stop.store(true, Ordering::SeqCst);
        drawing.join().unwrap()
    });
    assert!(
        before.len() > 1000,
        "only {} numbers were drawn before",
        before.len()
    );

    // The server is up again (restarted by the caller or by the postmaster's crash recovery).
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut client = loop {
        let client = postgres::Client::connect(&cluster.conninfo("postgres"), postgres::NoTls)
            .ok()
            .and_then(|mut c| c.simple_query("SELECT 1").ok().map(|_| c));
        match client {
            Some(c) => break c,
            None if Instant::now() < deadline => thread::sleep(Duration::from_millis(200)),
            None => panic!("server did not come back:\n{}", cluster.log()),
        }
    };
    let stored = max_id(&mut client, name);
    let stop = AtomicBool::new(false);
    let after = thread::scope(|s| {
        let drawing = s.spawn(|| draw_until_stopped(cluster, name, &stop));
        thread::sleep(Duration::from_millis(500));
        stop.store(true, Ordering::SeqCst);
        drawing.join().unwrap()
    });
    assert!(!after.is_empty());
    let highest_before = *before.iter().max().unwrap();
    let lowest_after = *after.iter().min().unwrap();
    assert!(
        lowest_after > highest_before,
        "{lowest_after} drawn after the restart is not above {highest_before} drawn before"
    );
    assert!(
        stored >= highest_before,
        "max_id {stored} below handed-out {highest_before}"
    );
    assert!(max_id(&mut client, name) >= *after.iter().max().unwrap());
    assert_distinct("before and after", before.iter().chain(after.iter()));
}

#[test]
fn immediate_stop_never_leads_to_a_repeated_number() {
    let cluster = Cluster::with_idgen("seg-crash", 3, &[]);
    cluster
        .connect("postgres")
        .batch_execute("SELECT segment_create('c', step => 50)")
        .unwrap();
    assert_survives(&cluster, "c", || {
        cluster.stop("immediate");
        let out = cluster.pg_ctl_start();
        assert!(out.status.success(), "restart failed:\n{}", cluster.log());
    });
}

#[test]
fn kill_9_of_the_allocator_never_leads_to_a_repeated_number() {
    let cluster = Cluster::with_idgen("seg-kill", 3, &[]);
    let mut admin = cluster.connect("postgres");
    admin
        .batch_execute("SELECT segment_create('k', step => 50)")
        .unwrap();
    draw(&mut admin, "k", 1).unwrap();
    let pid: i32 =
        admin.one("SELECT pid FROM pg_stat_activity WHERE backend_type = 'idgen allocator'");
    drop(admin);
    assert_survives(&cluster, "k", || {
        let status = std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    });
    assert!(
        cluster.log().contains("terminated by signal 9"),
        "{}",
        cluster.log()
    );
}

/// Dump and restore: `pg_dump -Fc` of a database using both generators, as column
/// defaults, restored with `pg_restore` into a fresh server that has no worker id yet. Every
/// high-water mark arrives as it was; the restored table's defaults work once the new server has
/// its own worker id; new Snowflake ids and segment numbers are above every restored one.
#[test]
fn pg_dump_carries_the_high_water_marks() {
    let source = Cluster::with_idgen("seg-dump-src", 3, &[]);
    let mut client = source.connect("postgres");
    client
        .batch_execute(
            "SELECT segment_create('a', step => 10);
             SELECT segment_create('b', start => 1000000, step => 500, description => 'bee');
             CREATE TABLE orders (
                 id bigint PRIMARY KEY DEFAULT snowflake_nextval(),
                 order_no bigint NOT NULL UNIQUE DEFAULT segment_nextval('a'),
                 note text);
             INSERT INTO orders (note) SELECT 'before dump' FROM generate_series(1, 2345);",
        )
        .unwrap();
    let drawn_b = draw(&mut client, "b", 777).unwrap();
    let marks = |c: &mut Client| -> Vec<(String, i64, i32, Option<String>)> {
        c.query(
            "SELECT name, max_id, step, description FROM idgen_segment ORDER BY name",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
        .collect()
    };
    // Nothing is drawn between here and the dump, so no refill moves a mark meanwhile.
    while client
        .query_one("SELECT bool_or(refill_pending) FROM segment_status()", &[])
        .unwrap()
        .get::<_, Option<bool>>(0)
        .unwrap_or(false)
    {
        thread::sleep(Duration::from_millis(50));
    }
    let marks_at_dump = marks(&mut client);
    let dump = source.dir().join("idgen.dump");
    let out = as_postgres("pg_dump")
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            &source.port().to_string(),
            "-U",
            "postgres",
            "-Fc",
        ])
        .args(["-f", dump.to_str().unwrap(), "postgres"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "pg_dump: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Rows inserted after the dump come from ranges the dump already covers.
    client
        .batch_execute("INSERT INTO orders (note) SELECT 'after dump' FROM generate_series(1, 3)")
        .unwrap();
    let (source_max_id, source_max_no): (i64, i64) = {
        let r = client
            .query_one("SELECT max(id), max(order_no) FROM orders", &[])
            .unwrap();
        (r.get(0), r.get(1))
    };

    // A fresh server, not yet given a worker id.
    let target = Cluster::start("seg-dump-dst", &[PRELOAD]);
    target
        .connect("postgres")
        .batch_execute("CREATE DATABASE restored")
        .unwrap();
    let out = as_postgres("pg_restore")
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            &target.port().to_string(),
            "-U",
            "postgres",
        ])
        .args(["-d", "restored", "--exit-on-error", dump.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "pg_restore: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut restored = target.connect("restored");
    assert_eq!(marks(&mut restored), marks_at_dump);
    assert_eq!(restored.one::<i64>("SELECT count(*) FROM orders"), 2345);
    // Segments work at once; Snowflake ids wait for this server's own worker id.
    let b = draw(&mut restored, "b", 100).unwrap();
    assert!(b[0] > *drawn_b.iter().max().unwrap());
    assert_eq!(
        sqlstate(restored.batch_execute("INSERT INTO orders (note) VALUES ('no worker id')")),
        "55000"
    );
    restored
        .batch_execute("ALTER SYSTEM SET idgen.worker_id = 4")
        .unwrap();
    drop(restored);
    target.stop("fast");
    target.start_server();
    let mut restored = target.connect("restored");
    restored
        .batch_execute("INSERT INTO orders (note) SELECT 'restored' FROM generate_series(1, 100)")
        .unwrap();
    let r = restored
        .query_one(
            "SELECT min(o.id), min(o.order_no), count(*), bool_and(d.worker_id = 4)
               FROM orders o, snowflake_decode(o.id) d WHERE o.note = 'restored'",
            &[],
        )
        .unwrap();
    let (min_id, min_no, n, worker_4): (i64, i64, i64, bool) =
        (r.get(0), r.get(1), r.get(2), r.get(3));
    assert_eq!(n, 100);
    assert!(worker_4);
    assert!(min_id > source_max_id, "{min_id} <= {source_max_id}");
    assert!(min_no > source_max_no, "{min_no} <= {source_max_no}");
}

#[test]
fn double_buffer_fetches_ahead_and_the_step_grows() {
    let cluster = Cluster::with_idgen("seg-buffer", 3, &[]);
    let mut client = cluster.connect("postgres");
    client
        .batch_execute("SELECT segment_create('d', step => 100)")
        .unwrap();
    // Ranges used up within idgen.segment_refill_interval (15 min): each refill doubles.
    let n = 200_000;
    let total: i64 = client.one::<i64>(&format!(
        "SELECT count(DISTINCT segment_nextval('d')) FROM generate_series(1, {n})"
    ));
    assert_eq!(total, n);
    let row = client
        .query_one(
            "SELECT cached_step, refills, current_first, current_last, current_used FROM segment_status() WHERE name = 'd'",
            &[],
        )
        .unwrap();
    let (cached_step, refills): (i64, i64) = (row.get(0), row.get(1));
    assert!(
        cached_step >= 100 * 2_i64.pow(8),
        "step stayed at {cached_step}"
    );
    assert!(refills <= n / 100, "{refills} refills for {n} numbers");

    // Draw just past 10% of the current range: the next range arrives while the current one
    // still has numbers (a refill ahead of need).
    let (first, last, used): (i64, i64, i64) = (row.get(2), row.get(3), row.get(4));
    let len = last - first + 1;
    let more = (len / 10 + 1 - used).max(1);
    draw(&mut client, "d", more as i32).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let row = client
            .query_one(
                "SELECT next_first, current_last - current_first + 1 - current_used FROM segment_status() WHERE name = 'd'",
                &[],
            )
            .unwrap();
        let (next_first, left): (Option<i64>, i64) = (row.get(0), row.get(1));
        if let Some(next_first) = next_first {
            assert!(
                left > 0,
                "the next range arrived only when the current one was empty"
            );
            assert!(next_first > last);
            break;
        }
        assert!(Instant::now() < deadline, "no range was fetched ahead");
        thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_same_name_in_two_databases_is_two_segments() {
    let cluster = Cluster::with_idgen("seg-two-db", 3, &[]);
    cluster.create_db_with_idgen("other");
    let mut one = cluster.connect("postgres");
    let mut two = cluster.connect("other");
    one.batch_execute("SELECT segment_create('n', step => 10)")
        .unwrap();
    two.batch_execute("SELECT segment_create('n', start => 500, step => 10)")
        .unwrap();
    assert_eq!(draw(&mut one, "n", 3).unwrap(), [1, 2, 3]);
    assert_eq!(draw(&mut two, "n", 3).unwrap(), [500, 501, 502]);
    one.batch_execute("SELECT segment_setval('n', 100)")
        .unwrap();
    assert_eq!(draw(&mut one, "n", 1).unwrap(), [101]);
    assert_eq!(draw(&mut two, "n", 1).unwrap(), [503]);
    one.batch_execute("SELECT segment_drop('n')").unwrap();
    assert_eq!(sqlstate(draw(&mut one, "n", 1)), "42704");
    assert_eq!(draw(&mut two, "n", 1).unwrap(), [504]);
    // One allocator per database that uses segments.
    let workers: Vec<String> = column(
        &mut one,
        "SELECT datname FROM pg_stat_activity WHERE backend_type = 'idgen allocator' ORDER BY 1",
    );
    assert_eq!(workers, ["other", "postgres"]);
    // The allocator of a database being dropped leaves, so that DROP DATABASE goes through.
    drop(two);
    one.batch_execute("DROP DATABASE other").unwrap();
}

#[test]
fn a_caller_waits_at_most_the_wait_timeout_and_can_be_cancelled() {
    let cluster = Cluster::with_idgen("seg-wait", 3, &["idgen.segment_worker_idle_timeout = '1s'"]);
    let mut admin = cluster.connect("postgres");
    admin
        .batch_execute("SELECT segment_create('w', step => 1)")
        .unwrap();
    let mut caller = cluster.connect("postgres");
    assert_eq!(draw(&mut caller, "w", 1).unwrap(), [1]);
    // Hold the row lock: the allocator's next refill blocks behind it.
    let mut tx = admin.transaction().unwrap();
    tx.batch_execute("SELECT * FROM idgen_segment WHERE name = 'w' FOR UPDATE")
        .unwrap();
    caller
        .batch_execute("SET idgen.segment_wait_timeout = '300ms'")
        .unwrap();
    let started = Instant::now();
    // Both ranges of a step-1 segment run dry at once; the caller gives up after the timeout.
    let mut timed_out = None;
    for _ in 0..5 {
        if let Err(e) = draw(&mut caller, "w", 1) {
            timed_out = Some(e);
            break;
        }
    }
    let e = timed_out.expect("a draw waited for the locked refill");
    assert_eq!(e.code().map(|c| c.code()), Some("55P03"), "{e}");
    assert!(started.elapsed() >= Duration::from_millis(300));

    // With no timeout the wait lasts until cancelled.
    caller
        .batch_execute("SET idgen.segment_wait_timeout = 0")
        .unwrap();
    let cancel = caller.cancel_token();
    let waiting = thread::spawn(move || {
        let r = draw(&mut caller, "w", 1).map(|_| ());
        (r, caller)
    });
    thread::sleep(Duration::from_millis(500));
    cancel.cancel_query(postgres::NoTls).unwrap();
    let (r, mut caller) = waiting.join().unwrap();
    assert_eq!(sqlstate(r), "57014");

    // Released, the allocator goes on and the same sessions draw again, above everything.
    tx.rollback().unwrap();
    let next = draw(&mut caller, "w", 1).unwrap()[0];
    assert!(next > 1);
    // The allocator exits once idle and comes back on demand.
    let deadline = Instant::now() + Duration::from_secs(10);
    while admin
        .one::<i64>("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'idgen allocator'")
        > 0
    {
        assert!(
            Instant::now() < deadline,
            "the allocator did not exit when idle"
        );
        thread::sleep(Duration::from_millis(100));
    }
    let later = draw(&mut caller, "w", 3).unwrap();
    assert!(later[0] > next);
}

#[test]
fn without_a_worker_slot_the_error_says_what_to_raise() {
    // idgen's reservation keeper (registered first) takes the only background worker slot.
    let cluster = Cluster::with_idgen("seg-no-slot", 3, &["max_worker_processes = 1"]);
    let mut client = cluster.connect("postgres");
    let e = idgen_cluster_tests::db_error(client.batch_execute("SELECT segment_create('x')"));
    assert_eq!(e.code().code(), "53400");
    assert!(
        e.hint().unwrap_or("").contains("max_worker_processes"),
        "{e:?}"
    );
    assert_eq!(client.one::<i64>("SELECT count(*) FROM idgen_segment"), 0);
}

#[test]
fn a_standby_refuses_to_hand_out_numbers() {
    let cluster = Cluster::with_idgen("seg-standby", 3, &[]);
    let mut client = cluster.connect("postgres");
    client.batch_execute("SELECT segment_create('s')").unwrap();
    assert_eq!(draw(&mut client, "s", 1).unwrap(), [1]);
    drop(client);
    cluster.stop("fast");
    // standby.signal without a primary: the server stays in recovery, open read-only.
    std::fs::write(cluster.data().join("standby.signal"), "").unwrap();
    let out = cluster.pg_ctl_start();
    assert!(
        out.status.success(),
        "standby did not start:\n{}",
        cluster.log()
    );
    let mut standby = cluster.connect("postgres");
    let in_recovery: bool = standby.one("SELECT pg_is_in_recovery()");
    assert!(in_recovery);
    // The clean stop gave the unused numbers back: the mark is the number drawn.
    assert_eq!(max_id(&mut standby, "s"), 1);
    for sql in [
        "SELECT segment_nextval('s')",
        "SELECT segment_nextvals('s', 10)",
        "SELECT segment_create('t')",
        "SELECT segment_setval('s', 100)",
        "SELECT snowflake_nextval()",
    ] {
        let e = idgen_cluster_tests::db_error(standby.batch_execute(sql));
        assert_eq!(e.code().code(), "25006", "{sql}: {e:?}");
        assert!(e.hint().is_some(), "{sql}: no hint");
    }
    assert_eq!(max_id(&mut standby, "s"), 1, "the standby changed nothing");
}

/// The allocator works in transactions of its own: a `segment_create` in the transaction that
/// creates the extension cannot be served, and the error says to commit first (not "does not
/// exist"). After the commit the same call works.
#[test]
fn segment_create_in_the_creating_transaction_says_to_commit_first() {
    let cluster = Cluster::start("uncommitted", &[PRELOAD]);
    let mut client = cluster.connect("postgres");
    let mut tx = client.transaction().unwrap();
    tx.batch_execute("CREATE EXTENSION idgen").unwrap();
    let err = idgen_cluster_tests::db_error(tx.batch_execute("SELECT segment_create('x')"));
    assert_eq!(err.code().code(), "55000", "{err:?}");
    assert!(
        err.hint()
            .unwrap_or("")
            .contains("Commit CREATE EXTENSION idgen first"),
        "{err:?}"
    );
    drop(tx); // rolled back
    client.batch_execute("CREATE EXTENSION idgen").unwrap();
    client.batch_execute("SELECT segment_create('x')").unwrap();
    assert_eq!(client.one::<i64>("SELECT segment_nextval('x')"), 1);
}
