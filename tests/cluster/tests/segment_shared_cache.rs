//! Pins the shared segment cache on real servers: the cache is not a limit on segment names
//! (`idgen.segment_cache_size`, least recently used segments leave it), and unused numbers are
//! given back instead of skipped: when a segment leaves the cache (evicted, idle) and at a clean
//! shutdown, with one compare-and-set on its mark; never after a crash, never over a mark someone
//! moved, never at the cost of a duplicate. The per-backend cache is `segment_backend_cache.rs`.

use std::collections::{HashMap, HashSet};
use std::thread;
use std::time::{Duration, Instant};

use idgen_cluster_tests::{column, wait_for, Cluster, One};
use postgres::Client;

fn max_id(client: &mut Client, name: &str) -> i64 {
    client.one_with("SELECT max_id FROM idgen_segment WHERE name = $1", &[&name])
}

fn next(client: &mut Client, name: &str) -> i64 {
    client.one_with("SELECT segment_nextval($1)", &[&name])
}

/// Draws `n` numbers of `name` in one statement.
fn draw(client: &mut Client, name: &str, n: i32) -> Vec<i64> {
    client
        .query(
            "SELECT segment_nextval($1) FROM generate_series(1, $2) g",
            &[&name, &n],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}

fn allocators(client: &mut Client) -> i64 {
    client.one("SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'idgen allocator'")
}

#[test]
fn five_thousand_names_through_a_cache_of_256_all_work_and_repeat_nothing() {
    const NAMES: i32 = 5_000;
    const CLIENTS: usize = 4;
    const ROUNDS: usize = 2;
    const STEP: i64 = 10;
    let cluster = Cluster::with_idgen("cache-5000", 3, &["idgen.segment_cache_size = 256"]);
    let mut admin = cluster.connect("postgres");
    admin
        .batch_execute(&format!(
            "SELECT segment_create('n' || g, step => {STEP}) FROM generate_series(1, {NAMES}) g"
        ))
        .unwrap();
    assert_eq!(
        admin.one::<String>("SHOW idgen.segment_cache_size"),
        "256",
        "the cache is smaller than the names"
    );

    // Each client walks every name round robin, from its own starting point: nearly every
    // draw finds its segment evicted by the others' and loads it again.
    let drawn: Vec<Vec<(String, i64)>> = thread::scope(|s| {
        let handles: Vec<_> = (0..CLIENTS)
            .map(|c| {
                let cluster = &cluster;
                s.spawn(move || {
                    let mut client = cluster.connect("postgres");
                    let offset = c as i32 * NAMES / CLIENTS as i32;
                    let mut got = Vec::new();
                    for _ in 0..ROUNDS {
                        for row in client
                            .query(
                                "SELECT n, segment_nextval(n) FROM (SELECT 'n' || ((g + $1) % $2 + 1) AS n \
                                 FROM generate_series(1, $2) g) names",
                                &[&offset, &NAMES],
                            )
                            .unwrap()
                        {
                            got.push((row.get(0), row.get(1)));
                        }
                    }
                    got
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });

    let mut per_name: HashMap<String, Vec<i64>> = HashMap::new();
    for (name, n) in drawn.into_iter().flatten() {
        per_name.entry(name).or_default().push(n);
    }
    assert_eq!(per_name.len(), NAMES as usize, "every name was drawn from");
    let mut gaps = 0i64;
    for (name, numbers) in &per_name {
        let distinct: HashSet<_> = numbers.iter().collect();
        assert_eq!(
            distinct.len(),
            numbers.len(),
            "segment {name} repeated a number"
        );
        assert_eq!(numbers.len(), CLIENTS * ROUNDS);
        gaps += numbers.iter().max().unwrap() - numbers.len() as i64;
    }
    let draws = (NAMES as usize * CLIENTS * ROUNDS) as i64;
    let cached = admin.one::<i64>("SELECT count(*) FROM segment_cache_status()");
    println!("{draws} draws over {NAMES} names, cache 256: 0 repeated, {gaps} numbers skipped");
    assert!(cached <= 256, "the cache holds at most its size: {cached}");
    // Skipping instead of giving back would leave about STEP - 1 numbers per eviction.
    assert!(
        gaps < draws,
        "evicted segments gave their unused numbers back: {gaps} skipped in {draws} draws"
    );
}

#[test]
fn a_clean_restart_gives_unused_numbers_back_and_a_crash_skips_them() {
    let cluster = Cluster::with_idgen("cache-giveback", 3, &[]);
    let mut client = cluster.connect("postgres");
    client
        .batch_execute("SELECT segment_create('order_no', step => 1000)")
        .unwrap();
    assert_eq!(draw(&mut client, "order_no", 3), [1, 2, 3]);
    assert!(
        max_id(&mut client, "order_no") >= 1000,
        "a whole range is reserved"
    );
    drop(client);

    // A fast shutdown, with a synchronous standby configured that does not exist: the
    // give-back does not wait for it, and the stop finishes within Cluster::STOP_LIMIT.
    cluster.append_settings(&["synchronous_standby_names = 'gone'"]);
    let mut client = cluster.connect("postgres");
    client.batch_execute("SELECT pg_reload_conf()").unwrap();
    drop(client);
    cluster.stop("fast");
    cluster.append_settings(&["synchronous_standby_names = ''"]);
    cluster.start_server();
    let mut client = cluster.connect("postgres");
    assert_eq!(
        max_id(&mut client, "order_no"),
        3,
        "the unused tail was given back"
    );
    assert_eq!(
        next(&mut client, "order_no"),
        4,
        "no gap after a clean restart"
    );
    drop(client);

    // kill -9: nothing is given back; the next number is above the reserved range.
    let reserved = max_id(&mut cluster.connect("postgres"), "order_no");
    cluster.kill_postmaster();
    cluster.start_after_crash();
    let mut client = cluster.connect("postgres");
    let after_crash = next(&mut client, "order_no");
    assert!(
        after_crash > reserved,
        "after a crash the next number ({after_crash}) is above the mark reserved before it ({reserved})"
    );
}

#[test]
fn an_interleaved_server_gives_back_within_its_own_block() {
    let cluster = Cluster::with_idgen(
        "cache-interleaved",
        3,
        &[
            "idgen.segment_node_count = 2",
            "idgen.segment_node_index = 1",
        ],
    );
    let mut client = cluster.connect("postgres");
    client
        .batch_execute("SELECT segment_create('inv', step => 10)")
        .unwrap();
    // Server 1 of 2 owns blocks 1, 3, ...: 11..20, 31..40.
    assert_eq!(draw(&mut client, "inv", 3), [11, 12, 13]);
    drop(client);
    cluster.stop("fast");
    cluster.start_server();
    let mut client = cluster.connect("postgres");
    assert_eq!(
        next(&mut client, "inv"),
        14,
        "the rest of the own block came back"
    );
    let rest = draw(&mut client, "inv", 10);
    assert_eq!(rest, [15, 16, 17, 18, 19, 20, 31, 32, 33, 34]);
}

/// Per-backend blocks are cut from this server's own interleaved blocks: with
/// `cache => 4` and two sessions, every number is in server 1's blocks (11..20, 31..40, ...),
/// none twice, each session's increasing.
#[test]
fn an_interleaved_server_cuts_backend_blocks_from_its_own_blocks() {
    let cluster = Cluster::with_idgen(
        "cache-interleaved-blocks",
        3,
        &[
            "idgen.segment_node_count = 2",
            "idgen.segment_node_index = 1",
        ],
    );
    let mut a = cluster.connect("postgres");
    let mut b = cluster.connect("postgres");
    a.batch_execute("SELECT segment_create('inv', step => 10, cache => 4)")
        .unwrap();
    let mut all = Vec::new();
    let (mut from_a, mut from_b) = (Vec::new(), Vec::new());
    for _ in 0..15 {
        from_a.push(next(&mut a, "inv"));
        from_b.extend(draw(&mut b, "inv", 3));
    }
    for numbers in [&from_a, &from_b] {
        assert!(
            numbers.windows(2).all(|w| w[0] < w[1]),
            "a session's numbers increase: {numbers:?}"
        );
        all.extend(numbers.iter().copied());
    }
    let distinct: std::collections::HashSet<_> = all.iter().collect();
    assert_eq!(distinct.len(), all.len(), "no number twice: {all:?}");
    for n in &all {
        assert_eq!(
            (n - 1).div_euclid(10) % 2,
            1,
            "{n} lies in a block of server 1 of 2: {all:?}"
        );
    }
}

#[test]
fn an_idle_segment_leaves_the_cache_giving_back_and_the_allocator_exits() {
    let cluster = Cluster::with_idgen(
        "cache-idle",
        3,
        &["idgen.segment_worker_idle_timeout = '500ms'"],
    );
    let mut client = cluster.connect("postgres");
    client
        .batch_execute("SELECT segment_create('quiet', step => 100); SELECT segment_create('busy', step => 100)")
        .unwrap();
    assert_eq!(draw(&mut client, "quiet", 2), [1, 2]);
    draw(&mut client, "busy", 1);
    // While 'busy' is drawn from, the allocator stays (it gives the cache back at shutdown);
    // 'quiet' leaves the cache after two idle periods.
    let started = Instant::now();
    wait_for(
        "'quiet' to leave the cache",
        Duration::from_secs(20),
        || {
            draw(&mut client, "busy", 1);
            let cached: Vec<String> =
                column(&mut client, "SELECT name FROM segment_cache_status()");
            (!cached.iter().any(|n| n == "quiet")).then_some(())
        },
    );
    assert_eq!(
        allocators(&mut client),
        1,
        "the allocator stays while 'busy' is in use"
    );
    assert_eq!(
        max_id(&mut client, "quiet"),
        2,
        "'quiet' gave its unused numbers back"
    );
    assert!(started.elapsed() >= Duration::from_millis(500));
    // Left alone, 'busy' leaves too, and then the allocator exits.
    wait_for("the allocator to exit", Duration::from_secs(20), || {
        (allocators(&mut client) == 0).then_some(())
    });
    assert_eq!(
        client.one::<i64>("SELECT count(*) FROM segment_cache_status()"),
        0
    );
    let busy_mark = max_id(&mut client, "busy");
    assert!(
        busy_mark < 100,
        "'busy' gave its range back: mark {busy_mark}"
    );
    assert_eq!(next(&mut client, "quiet"), 3);
    assert_eq!(next(&mut client, "busy"), busy_mark + 1);
}

#[test]
fn a_setval_racing_a_shutdown_is_never_undone_by_a_give_back() {
    let cluster = Cluster::with_idgen("cache-setval", 3, &[]);
    let mut client = cluster.connect("postgres");
    client
        .batch_execute("SELECT segment_create('s', step => 1000)")
        .unwrap();
    drop(client);
    // The setval and the fast shutdown race, started a little apart each round: whichever the
    // allocator runs first, the other must not undo it (the give-back's compare-and-set finds
    // a moved mark and gives nothing back).
    for (round, delay_ms) in [0u64, 1, 3, 8].into_iter().enumerate() {
        let mut client = cluster.connect("postgres");
        let before = draw(&mut client, "s", 5);
        let target = 1_000_000 * (round as i64 + 1);
        let setter = {
            let mut c = cluster.connect("postgres");
            thread::spawn(move || {
                c.query_one("SELECT segment_setval('s', $1)", &[&target])
                    .is_ok()
            })
        };
        thread::sleep(Duration::from_millis(delay_ms));
        cluster.stop("fast");
        let confirmed = setter.join().unwrap();
        cluster.start_server();
        let mut client = cluster.connect("postgres");
        let mark = max_id(&mut client, "s");
        let after = next(&mut client, "s");
        assert!(
            after > *before.iter().max().unwrap(),
            "above every number handed out before"
        );
        if confirmed {
            assert!(
                mark >= target,
                "a confirmed setval survives the shutdown: mark {mark}"
            );
            assert!(after > target);
        }
        println!(
            "delay {delay_ms} ms: setval {}; mark after restart {mark}, next {after}",
            if confirmed { "confirmed" } else { "cut off" }
        );
    }
    // A mark moved behind the cache's back (an operator's UPDATE of the table): the
    // give-back's compare-and-set finds another mark than its refill committed and gives
    // nothing back.
    let mut client = cluster.connect("postgres");
    let before = draw(&mut client, "s", 5);
    client
        .batch_execute("UPDATE idgen_segment SET max_id = 9000000 WHERE name = 's'")
        .unwrap();
    drop(client);
    cluster.stop("fast");
    cluster.start_server();
    let mut client = cluster.connect("postgres");
    assert_eq!(max_id(&mut client, "s"), 9_000_000, "nothing given back");
    assert_eq!(next(&mut client, "s"), 9_000_001);
    assert!(before.iter().all(|&n| n < 9_000_000));
}

#[test]
fn a_locked_row_makes_the_give_back_skip_without_waiting_or_failing() {
    let cluster = Cluster::with_idgen(
        "cache-locked",
        3,
        &["idgen.segment_worker_idle_timeout = '300ms'"],
    );
    let mut client = cluster.connect("postgres");
    client
        .batch_execute("SELECT segment_create('locked', step => 100)")
        .unwrap();
    assert_eq!(draw(&mut client, "locked", 2), [1, 2]);
    // Someone holds the segment's row: the idle give-back's NOWAIT lock fails, and the
    // segment leaves the cache with its numbers skipped, without the allocator waiting.
    let mut holder = cluster.connect("postgres");
    let mut tx = holder.transaction().unwrap();
    tx.batch_execute("SELECT * FROM idgen_segment WHERE name = 'locked' FOR UPDATE")
        .unwrap();
    wait_for(
        "'locked' to leave the cache",
        Duration::from_secs(20),
        || {
            let cached: Vec<String> =
                column(&mut client, "SELECT name FROM segment_cache_status()");
            (!cached.iter().any(|n| n == "locked")).then_some(())
        },
    );
    assert_eq!(
        max_id(&mut client, "locked"),
        100,
        "nothing given back over a locked row"
    );
    tx.rollback().unwrap();
    assert_eq!(
        next(&mut client, "locked"),
        101,
        "the skipped numbers are never handed out"
    );
    let log = cluster.log();
    assert!(
        !log.contains("is not held"),
        "the allocator kept its LWLock consistent:\n{log}"
    );
    assert!(
        log.contains("the unused numbers of segment \"locked\" are skipped"),
        "the skip is logged:\n{log}"
    );
}

/// Watches the allocator for 6 s from now: the moments after `after` at which it waited for a
/// heavyweight lock.
fn allocator_lock_waits_after(client: &mut Client, after: Duration) -> Vec<Duration> {
    let started = Instant::now();
    let mut late = Vec::new();
    while started.elapsed() < Duration::from_secs(6) {
        let waiting: bool = client.one(
            "SELECT count(*) > 0 FROM pg_stat_activity
              WHERE backend_type = 'idgen allocator' AND wait_event_type = 'Lock'",
        );
        if waiting && started.elapsed() > after {
            late.push(started.elapsed());
        }
        thread::sleep(Duration::from_millis(100));
    }
    late
}

/// A session holding idgen_segment's lock never stops the allocator for long: a refill that waits for a row longer than `idgen.segment_wait_timeout` fails its
/// callers with the lock timeout (not retried as if the registry were down, holding the
/// allocator again and again), another segment refills meanwhile, and a give-back never waits
/// for the table's lock at all (it runs with interrupts held off, where no timeout ends a
/// wait).
#[test]
fn a_lock_on_the_catalog_never_stops_the_allocator_for_long() {
    let cluster = Cluster::with_idgen(
        "cache-locked",
        3,
        &[
            "idgen.segment_wait_timeout = '2s'",
            "idgen.segment_worker_idle_timeout = '500ms'",
        ],
    );
    let mut client = cluster.connect("postgres");
    client
        .batch_execute(
            "SELECT segment_create('held', step => 10);
             SELECT segment_create('other', step => 10);",
        )
        .unwrap();
    // This session waits longer than the allocator's lock timeout (the server's setting).
    client
        .batch_execute("SET idgen.segment_wait_timeout = '20s'")
        .unwrap();
    draw(&mut client, "held", 1);
    draw(&mut client, "other", 1);
    let mut holder = cluster.connect("postgres");
    let mut tx = holder.transaction().unwrap();
    tx.batch_execute("SELECT * FROM idgen_segment WHERE name = 'held' FOR UPDATE")
        .unwrap();
    let error = client
        .query(
            "SELECT segment_nextval('held') FROM generate_series(1, 30)",
            &[],
        )
        .unwrap_err();
    let message = error.as_db_error().map(|e| e.message().to_owned());
    assert!(
        message
            .as_deref()
            .is_some_and(|m| m.contains("lock timeout")),
        "the caller learns that the row was locked: {error}"
    );
    // Another segment refills while the row stays locked.
    let others = draw(&mut client, "other", 30);
    assert_eq!(others.len(), 30);
    tx.rollback().unwrap();

    // A give-back while the whole table is locked: the allocator skips it at once instead of
    // waiting, with interrupts held off, for the lock.
    let mut tx = holder.transaction().unwrap();
    tx.batch_execute("LOCK TABLE idgen_segment IN ACCESS EXCLUSIVE MODE")
        .unwrap();
    let late = allocator_lock_waits_after(&mut client, Duration::from_secs(3));
    tx.rollback().unwrap();
    assert!(
        late.is_empty(),
        "the allocator waited for the table's lock past the lock timeout: {late:?}"
    );
    // The give-back was skipped (its numbers are a gap); the segment goes on above them.
    let after = next(&mut client, "other");
    assert!(after > *others.last().unwrap(), "{after} after {others:?}");

    // The same with only the primary key's index locked (`ALTER INDEX ... SET TABLESPACE`
    // locks the index, not the table): the give-back does not wait for it either.
    let location = cluster.dir().join("ts");
    std::fs::create_dir_all(&location).unwrap();
    let chowned = std::process::Command::new("chown")
        .args(["postgres:postgres", location.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(chowned.success());
    client
        .batch_execute(&format!(
            "CREATE TABLESPACE ts LOCATION '{}'",
            location.display()
        ))
        .unwrap();
    let mut tx = holder.transaction().unwrap();
    tx.batch_execute("ALTER INDEX idgen_segment_pkey SET TABLESPACE ts")
        .unwrap();
    let late = allocator_lock_waits_after(&mut client, Duration::from_secs(3));
    tx.rollback().unwrap();
    assert!(
        late.is_empty(),
        "the allocator waited for the index's lock past the lock timeout: {late:?}"
    );
    assert!(next(&mut client, "other") > after);
}
