//! Pins the per-backend cache of segments (`segment_create(..., cache => n)`) on real servers: a backend's block of numbers is its own, so that with a cache no number is handed
//! out twice and each session's numbers increase, under concurrent sessions, `segment_setval`
//! (which reaches every session's block: later statements draw above its value), evictions from
//! a small shared cache, `segment_drop`, a clean restart and a `kill -9` of the postmaster. The
//! adaptive mode (`cache => 0`) takes one number at a time from a session that draws one per
//! statement, also when that draw waits for a range, so 1,000 such sessions leave at most 1,000
//! numbers unused (a fixed cache of 1,000 leaves about 1,000 per session). `DISCARD SEQUENCES`
//! and `DISCARD ALL` forget blocks and
//! `segment_currval`s as they do a sequence's; `segment_nextvals` and `segment_alter` go through
//! the block; `pg_dump` carries the cache; a bad cache is refused and changes nothing.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering::SeqCst};
use std::thread;
use std::time::{Duration, Instant};

use idgen_cluster_tests::{
    assert_distinct, assert_increasing, column, sqlstate, wait_for, Cluster, One,
};
use postgres::Client;

/// Draws `n` numbers of `name` as `n` `segment_nextval` calls in one statement, in call order.
fn draw(client: &mut Client, name: &str, n: i32) -> Result<Vec<i64>, postgres::Error> {
    let rows = client.query(
        "SELECT g, segment_nextval($1) FROM generate_series(1, $2) g ORDER BY g",
        &[&name, &n],
    )?;
    Ok(rows.iter().map(|r| r.get(1)).collect())
}

/// Draws `n` numbers of `name` with one `segment_nextvals`, in the order it returns them.
fn nextvals(client: &mut Client, name: &str, n: i32) -> Result<Vec<i64>, postgres::Error> {
    let rows = client.query("SELECT segment_nextvals($1, $2)", &[&name, &n])?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

/// One `segment_nextval(name)` in a statement of its own.
fn next(client: &mut Client, name: &str) -> i64 {
    client.one_with("SELECT segment_nextval($1)", &[&name])
}

fn max_id(client: &mut Client, name: &str) -> Result<i64, postgres::Error> {
    Ok(client
        .query_one("SELECT max_id FROM idgen_segment WHERE name = $1", &[&name])?
        .get(0))
}

/// The segment's per-backend cache as `segment_status()` shows it.
fn cache_of(client: &mut Client, name: &str) -> i32 {
    client.one_with(
        "SELECT cache FROM segment_status() WHERE name = $1",
        &[&name],
    )
}

/// Numbers between the lowest and the highest of `numbers` that nobody received.
fn unused(numbers: &[i64]) -> i64 {
    let (min, max) = (numbers.iter().min().unwrap(), numbers.iter().max().unwrap());
    max - min + 1 - numbers.len() as i64
}

/// A connection to `postgres`, waiting up to 90 s for the server to accept one (it may be
/// stopped, crashed or starting up).
fn connect_retrying(cluster: &Cluster) -> Option<Client> {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let client = Client::connect(&cluster.conninfo("postgres"), postgres::NoTls)
            .ok()
            .and_then(|mut c| c.simple_query("SELECT 1").ok().map(|_| c));
        match client {
            Some(c) => return Some(c),
            None if Instant::now() < deadline => thread::sleep(Duration::from_millis(100)),
            None => return None,
        }
    }
}

/// Waits until `counter` reaches `target` or every one of `of` drawing sessions has finished.
fn wait_until(counter: &AtomicUsize, target: usize, finished: &AtomicUsize, of: usize) {
    while counter.load(SeqCst) < target && finished.load(SeqCst) < of {
        thread::sleep(Duration::from_millis(20));
    }
}

/// Draws from segments `prefix`1 to `prefix``count` round and round until none of `names` is
/// in the shared cache any more (evicted: the cache is smaller than the segments); returns the
/// rounds it took. Panics after 60 s.
fn evict(client: &mut Client, prefix: &str, count: i32, names: &[&str]) -> usize {
    let deadline = Instant::now() + Duration::from_secs(60);
    for rounds in 1.. {
        let drawn = client.query(
            "SELECT segment_nextval($1 || g) FROM generate_series(1, $2) g",
            &[&prefix, &count],
        );
        match drawn {
            Ok(_) => {}
            // Every entry of the tiny cache was being refilled at once (the evictor thread
            // loads names too): "Retry", as the hint says.
            Err(e) if e.code().is_some_and(|c| c.code() == "54000") => {
                thread::sleep(Duration::from_millis(50));
            }
            Err(e) => panic!("evicting {names:?}: {e:?}"),
        }
        let cached: Vec<String> = column(client, "SELECT name FROM segment_cache_status()");
        if !cached.iter().any(|n| names.contains(&n.as_str())) {
            return rounds;
        }
        assert!(
            Instant::now() < deadline,
            "{names:?} still in the cache: {cached:?}"
        );
    }
    unreachable!()
}

/// One statement's numbers in the acceptance test, with what was known when it started.
struct Batch {
    /// Index into the segments drawn from.
    segment: usize,
    /// Which connection of its session (a new one after each error) drew it.
    life: usize,
    /// The disruption counter before the statement was sent and after its result came back
    /// (odd: a restart under way; changed: one happened meanwhile).
    epochs: (usize, usize),
    /// The highest value of a `segment_setval` of this segment confirmed before it was sent.
    floor: i64,
    numbers: Vec<i64>,
}

/// 8 sessions draw 200,000 numbers each, in statements of
/// 2,000 numbers alternating between a segment with `cache => 1000` and one with `cache => 0`
/// and between `segment_nextval` and `segment_nextvals`, while another session moves both
/// segments forward with `segment_setval` six times and a third draws from 24 other segments
/// through a shared cache of 16 (the GUC's minimum), evicting all the time; at a sixth and at
/// five sixths of the way the sessions pause, holding their blocks, until 'c' and 'z' are
/// evicted too; at a third the server is stopped (fast) and started, at two thirds its
/// postmaster is killed with `kill -9` and it is started again; sessions reconnect and go on.
///
/// No number twice in a segment over everything; each connection's numbers of a segment
/// increase; every statement sent after a `segment_setval(v)` returned draws above v, in every
/// session; every statement after a restart draws above every statement before it; a fresh
/// session after all that draws above everything.
#[test]
fn cached_segment_under_setval_eviction_and_restarts_never_repeats() {
    const SESSIONS: usize = 8;
    const PER_SESSION: usize = 200_000;
    const BATCH: i32 = 2_000;
    const BATCHES: usize = PER_SESSION / BATCH as usize;
    const TOTAL: usize = SESSIONS * BATCHES;
    const SETVALS: usize = 6;
    const OTHERS: i32 = 24;
    const SEGMENTS: [&str; 2] = ["c", "z"];
    let cluster = Cluster::with_idgen("block-acceptance", 3, &["idgen.segment_cache_size = 16"]);
    let mut admin = cluster.connect("postgres");
    admin
        .batch_execute(&format!(
            "SELECT segment_create('c', cache => 1000);
             SELECT segment_create('z', cache => 0);
             SELECT segment_create('e' || g, step => 10) FROM generate_series(1, {OTHERS}) g"
        ))
        .unwrap();
    assert_eq!(admin.one::<String>("SHOW idgen.segment_cache_size"), "16");
    assert_eq!(cache_of(&mut admin, "c"), 1000);
    assert_eq!(cache_of(&mut admin, "z"), 0);
    drop(admin);

    let progress = AtomicUsize::new(0);
    let finished = AtomicUsize::new(0);
    let epoch = AtomicUsize::new(0);
    let floors = [AtomicI64::new(i64::MIN), AtomicI64::new(i64::MIN)];
    let done = AtomicBool::new(false);
    let pause = AtomicBool::new(false);
    let paused = AtomicUsize::new(0);

    type Session = (Vec<Batch>, Vec<String>, usize);
    let (sessions, confirmed, evictions): (
        Vec<Session>,
        Vec<(usize, i64)>,
        (usize, usize, Vec<usize>),
    ) = thread::scope(|s| {
        let (cluster, progress, finished, epoch, floors, done, pause, paused) = (
            &cluster, &progress, &finished, &epoch, &floors, &done, &pause, &paused,
        );
        let drawers: Vec<_> = (0..SESSIONS)
            .map(|i| {
                s.spawn(move || {
                    let mut batches = Vec::with_capacity(BATCHES);
                    let mut unexpected = Vec::new();
                    let mut excused = 0;
                    let mut life = 0;
                    let mut client = connect_retrying(cluster);
                    let mut b = 0;
                    while b < BATCHES {
                        if pause.load(SeqCst) {
                            // Idle, holding its blocks, while 'c' and 'z' are evicted.
                            paused.fetch_add(1, SeqCst);
                            while pause.load(SeqCst) {
                                thread::sleep(Duration::from_millis(10));
                            }
                            paused.fetch_sub(1, SeqCst);
                        }
                        let Some(c) = client.as_mut() else {
                            unexpected.push(format!("session {i}: no connection in 90 s"));
                            break;
                        };
                        let segment = (b + i) % 2;
                        let name = SEGMENTS[segment];
                        let start = epoch.load(SeqCst);
                        let floor = floors[segment].load(SeqCst);
                        let result = if (b / 2 + i) % 2 == 0 {
                            draw(c, name, BATCH)
                        } else {
                            nextvals(c, name, BATCH)
                        };
                        let end = epoch.load(SeqCst);
                        match result {
                            Ok(numbers) => {
                                if numbers.len() != BATCH as usize {
                                    unexpected.push(format!(
                                        "session {i}: {} numbers of {name} for {BATCH}",
                                        numbers.len()
                                    ));
                                }
                                batches.push(Batch {
                                    segment,
                                    life,
                                    epochs: (start, end),
                                    floor,
                                    numbers,
                                });
                                b += 1;
                                progress.fetch_add(1, SeqCst);
                            }
                            Err(e) => {
                                // A lost connection is what a restart does; any other
                                // error only while one is under way (a backend left
                                // behind by the killed postmaster, say).
                                let lost = c.is_closed()
                                    || e.code().is_none_or(|code| {
                                        let code = code.code();
                                        code.starts_with("08") || code.starts_with("57P")
                                    });
                                if lost || start != end || start % 2 == 1 {
                                    excused += 1;
                                } else {
                                    unexpected.push(format!("session {i}, {name}: {e}"));
                                }
                                client = connect_retrying(cluster);
                                life += 1;
                            }
                        }
                    }
                    finished.fetch_add(1, SeqCst);
                    (batches, unexpected, excused)
                })
            })
            .collect();

        // segment_setval forward, alternating between the segments, spread over the run.
        let setter = s.spawn(move || {
            let mut confirmed = Vec::new();
            let mut client = connect_retrying(cluster).expect("the setter's connection");
            for k in 0..SETVALS {
                wait_until(
                    progress,
                    (k + 1) * TOTAL / (SETVALS + 1),
                    finished,
                    SESSIONS,
                );
                let segment = k % 2;
                let name = SEGMENTS[segment];
                let deadline = Instant::now() + Duration::from_secs(120);
                while Instant::now() < deadline {
                    let attempt = max_id(&mut client, name).and_then(|mark| {
                        let v = mark + 5_000;
                        client
                            .query_one("SELECT segment_setval($1, $2)", &[&name, &v])
                            .map(|r| (v, r.get::<_, i64>(0)))
                    });
                    match attempt {
                        Ok((v, returned)) => {
                            assert_eq!(returned, v, "segment_setval returns its value");
                            floors[segment].fetch_max(v, SeqCst);
                            confirmed.push((segment, v));
                            break;
                        }
                        // A refill moved the mark past v meanwhile: read it again.
                        Err(e) if e.code().is_some_and(|c| c.code() == "22003") => {}
                        Err(_) => {
                            thread::sleep(Duration::from_millis(100));
                            if client.is_closed() {
                                client = connect_retrying(cluster)
                                    .expect("the setter's connection after a restart");
                            }
                        }
                    }
                }
            }
            confirmed
        });

        // Draws from 24 other segments through a cache of 16 until the sessions are done:
        // segments leave the cache all the time, 'c' and 'z' among them now and then.
        let evictor = s.spawn(move || {
            let mut client = connect_retrying(cluster).expect("the evictor's connection");
            let (mut rounds, mut hot_out) = (0, 0);
            while !done.load(SeqCst) {
                let round = client
                    .query_one(
                        "SELECT count(segment_nextval('e' || g)) FROM generate_series(1, $1) g",
                        &[&OTHERS],
                    )
                    .and_then(|_| {
                        client.query_one(
                            "SELECT count(*) FROM segment_cache_status() WHERE name IN ('c', 'z')",
                            &[],
                        )
                    });
                match round {
                    Ok(r) => {
                        rounds += 1;
                        if r.get::<_, i64>(0) < 2 {
                            hot_out += 1;
                        }
                    }
                    Err(_) if client.is_closed() => {
                        if let Some(c) = connect_retrying(cluster) {
                            client = c;
                        }
                    }
                    Err(_) => {}
                }
                thread::sleep(Duration::from_millis(10));
            }
            (rounds, hot_out)
        });

        // However this thread ends (a failed assertion included), the evictor stops and paused
        // sessions go on, so that the scope's join ends and the failure is reported.
        struct Release<'a>(&'a AtomicBool, &'a AtomicBool);
        impl Drop for Release<'_> {
            fn drop(&mut self) {
                self.0.store(true, SeqCst);
                self.1.store(false, SeqCst);
            }
        }
        let _release = Release(done, pause);

        // While the sessions are busy the hot segments stay in the cache: at a sixth and
        // at five sixths they pause, holding their blocks, until the other segments have
        // pushed 'c' and 'z' out.
        let forced_eviction = || {
            pause.store(true, SeqCst);
            while paused.load(SeqCst) + finished.load(SeqCst) < SESSIONS {
                thread::sleep(Duration::from_millis(10));
            }
            let mut client = cluster.connect("postgres");
            let rounds = evict(&mut client, "e", OTHERS, &["c", "z"]);
            pause.store(false, SeqCst);
            rounds
        };
        // A clean restart at a third, a crash at two thirds.
        wait_until(progress, TOTAL / 6, finished, SESSIONS);
        let mut forced = vec![forced_eviction()];
        wait_until(progress, TOTAL / 3, finished, SESSIONS);
        epoch.fetch_add(1, SeqCst);
        cluster.stop("fast");
        cluster.start_server();
        epoch.fetch_add(1, SeqCst);
        wait_until(progress, 2 * TOTAL / 3, finished, SESSIONS);
        epoch.fetch_add(1, SeqCst);
        cluster.kill_postmaster();
        cluster.start_after_crash();
        epoch.fetch_add(1, SeqCst);
        wait_until(progress, 5 * TOTAL / 6, finished, SESSIONS);
        forced.push(forced_eviction());

        let sessions = drawers.into_iter().map(|h| h.join().unwrap()).collect();
        done.store(true, SeqCst);
        let evictor = evictor.join().unwrap();
        (
            sessions,
            setter.join().unwrap(),
            (evictor.0, evictor.1, forced),
        )
    });

    let unexpected: Vec<&String> = sessions.iter().flat_map(|(_, u, _)| u).collect();
    assert!(unexpected.is_empty(), "unexpected errors: {unexpected:#?}");
    let excused: usize = sessions.iter().map(|(_, _, e)| e).sum();
    let reconnects = sessions
        .iter()
        .map(|(b, _, _)| b.last().map_or(0, |b| b.life))
        .sum::<usize>();
    assert_eq!(epoch.load(SeqCst), 4, "both restarts happened");
    assert_eq!(
        confirmed.len(),
        SETVALS,
        "every segment_setval went through"
    );

    let mut highest = [i64::MIN; 2];
    for (segment, name) in SEGMENTS.iter().enumerate() {
        let batches = || {
            sessions
                .iter()
                .enumerate()
                .flat_map(|(i, (b, _, _))| b.iter().map(move |b| (i, b)))
                .filter(move |(_, b)| b.segment == segment)
        };
        let count = batches().map(|(_, b)| b.numbers.len()).sum::<usize>();
        assert_eq!(
            count,
            TOTAL / 2 * BATCH as usize,
            "every draw of {name} came back"
        );
        let distinct = assert_distinct(name, batches().flat_map(|(_, b)| &b.numbers));
        assert_eq!(distinct, count);

        // Each connection's numbers increase.
        for (i, (session, _, _)) in sessions.iter().enumerate() {
            let lives = session.last().map_or(0, |b| b.life + 1);
            for life in 0..lives {
                let numbers: Vec<i64> = session
                    .iter()
                    .filter(|b| b.segment == segment && b.life == life)
                    .flat_map(|b| b.numbers.iter().copied())
                    .collect();
                assert_increasing(&format!("{name}, session {i}, connection {life}"), &numbers);
            }
        }

        // A confirmed segment_setval reaches every session's block.
        for (i, b) in batches() {
            if let Some(&low) = b.numbers.iter().min() {
                assert!(
                    low > b.floor,
                    "{name}, session {i}: {low} drawn by a statement sent after segment_setval({}) returned",
                    b.floor
                );
            }
        }

        // Statements wholly between two restarts: every one after a restart draws above
        // every one before it.
        let eras: Vec<(i64, i64)> = (0..3)
            .map(|era| {
                let numbers: Vec<i64> = batches()
                    .filter(|(_, b)| b.epochs == (2 * era, 2 * era))
                    .flat_map(|(_, b)| b.numbers.iter().copied())
                    .collect();
                assert!(!numbers.is_empty(), "{name}: nothing drawn in era {era}");
                (
                    *numbers.iter().min().unwrap(),
                    *numbers.iter().max().unwrap(),
                )
            })
            .collect();
        for w in eras.windows(2) {
            assert!(
                w[1].0 > w[0].1,
                "{name}: {} drawn after a restart, {} before it",
                w[1].0,
                w[0].1
            );
        }
        highest[segment] = batches()
            .flat_map(|(_, b)| b.numbers.iter().copied())
            .max()
            .unwrap();
        println!(
            "{name}: {count} numbers, 0 repeated, {} unused, eras {eras:?}",
            unused(
                &batches()
                    .flat_map(|(_, b)| b.numbers.iter().copied())
                    .collect::<Vec<_>>()
            )
        );
    }

    // Every block ended with its session: a new one draws above everything, and the marks
    // cover everything.
    let mut client = cluster.connect("postgres");
    for (segment, name) in SEGMENTS.iter().enumerate() {
        let after = next(&mut client, name);
        assert!(
            after > highest[segment],
            "{name}: {after} after everything, up to {}",
            highest[segment]
        );
        assert!(max_id(&mut client, name).unwrap() >= after);
    }
    println!(
        "setvals {confirmed:?}; {excused} errors at restarts, {reconnects} reconnections; \
         evictor: {} rounds, 'c' or 'z' out of the cache after {} of them; \
         forced evictions of both with the sessions idle took {:?} rounds",
        evictions.0, evictions.1, evictions.2
    );
}

/// 1,000 sessions, each drawing one number of a segment with `cache => 0` and leaving: the
/// adaptive mode takes one number for a statement's first draw, so the sessions leave at most
/// 1,000 numbers unused (the bound this cache promises). The same with `cache => 1000` for 20 sessions
/// leaves 999 per session unused, so the bound is one the test can see broken.
#[test]
fn adaptive_cache_one_number_per_session_loses_at_most_one_each() {
    const SESSIONS: usize = 1_000;
    const THREADS: usize = 4;
    let cluster = Cluster::with_idgen("block-adaptive", 3, &[]);
    let mut admin = cluster.connect("postgres");
    admin
        .batch_execute(
            "SELECT segment_create('a', cache => 0);
             SELECT segment_create('k', step => 1000, cache => 1000)",
        )
        .unwrap();
    let one_each = |name: &'static str, sessions: usize| -> Vec<i64> {
        thread::scope(|s| {
            let handles: Vec<_> = (0..THREADS)
                .map(|t| {
                    let cluster = &cluster;
                    s.spawn(move || {
                        (t..sessions)
                            .step_by(THREADS)
                            .map(|_| next(&mut cluster.connect("postgres"), name))
                            .collect::<Vec<i64>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().unwrap())
                .collect()
        })
    };

    let adaptive = one_each("a", SESSIONS);
    assert_eq!(assert_distinct("a", &adaptive), SESSIONS);
    let lost = unused(&adaptive);
    println!("cache => 0: {SESSIONS} sessions, one number each: {lost} numbers unused");
    assert!(
        lost <= SESSIONS as i64,
        "{SESSIONS} sessions of one number each left {lost} numbers unused"
    );

    let fixed = one_each("k", 20);
    assert_eq!(assert_distinct("k", &fixed), 20);
    let lost = unused(&fixed);
    println!("cache => 1000: 20 sessions, one number each: {lost} numbers unused");
    assert!(
        lost >= 19 * 999,
        "each session of a cache of 1000 takes a block of 1000: only {lost} unused"
    );
}

/// The adaptive mode takes one number for a statement's first draw also when that draw has to
/// wait for a range (both cached ranges empty, the refill held up by a lock on the segment's
/// row): the session that waited holds no block, so the next session's number follows its own.
#[test]
fn adaptive_first_draw_that_waits_takes_one_number() {
    let cluster = Cluster::with_idgen("block-adaptive-wait", 3, &[]);
    let mut a = cluster.connect("postgres");
    a.batch_execute("SELECT segment_create('w', step => 10, cache => 0)")
        .unwrap();
    assert_eq!(next(&mut a, "w"), 1);
    // Whatever A holds of a block is dropped: from here on A draws from the shared ranges.
    a.batch_execute("DISCARD SEQUENCES").unwrap();
    // The numbers left in the current range and in the next one, if fetched ahead.
    let left = wait_for("the range fetched ahead", Duration::from_secs(10), || {
        let r = a
            .query_one(
                "SELECT current_last - current_first + 1 - current_used, \
                        next_last - next_first + 1, refill_pending \
                   FROM segment_status() WHERE name = 'w'",
                &[],
            )
            .unwrap();
        let (current, next, pending): (Option<i64>, Option<i64>, bool) =
            (r.get(0), r.get(1), r.get(2));
        // A draw of one number takes no block, and one number of a range of 10 does not
        // reach its prefetch point: the next range may not have been asked for.
        match (current, next, pending) {
            (Some(current), next, false) => Some(current + next.unwrap_or(0)),
            _ => None,
        }
    });
    let mut holder = cluster.connect("postgres");
    let mut tx = holder.transaction().unwrap();
    tx.batch_execute("SELECT * FROM idgen_segment WHERE name = 'w' FOR UPDATE")
        .unwrap();
    let drained = nextvals(&mut a, "w", left as i32).unwrap();
    assert_eq!(drained.len() as i64, left);
    // Both ranges are empty and the refill waits for the lock: B's draw waits for it.
    let mut b = cluster.connect("postgres");
    let waiting = thread::spawn(move || next(&mut b, "w"));
    thread::sleep(Duration::from_millis(500));
    assert!(
        !waiting.is_finished(),
        "B's draw did not wait: the ranges were not drained"
    );
    tx.rollback().unwrap();
    let b_number = waiting.join().unwrap();
    assert!(b_number > *drained.last().unwrap());
    let c_number = next(&mut cluster.connect("postgres"), "w");
    assert_eq!(
        c_number,
        b_number + 1,
        "B drew {b_number} after waiting and took more than that one number"
    );
}

/// `DISCARD SEQUENCES` and `DISCARD ALL` forget the session's block (its numbers are skipped)
/// and its `segment_currval`s, as they forget a sequence's cached values and `currval`;
/// `DISCARD TEMP` keeps both.
#[test]
fn discard_forgets_blocks_and_currval() {
    let cluster = Cluster::with_idgen("block-discard", 3, &[]);
    let mut client = cluster.connect("postgres");
    client
        .batch_execute("SELECT segment_create('d', step => 1000, cache => 100)")
        .unwrap();
    // The session's block is [block, block + 99]; it has handed out `last`.
    let mut block = next(&mut client, "d");
    assert_eq!(next(&mut client, "d"), block + 1, "the block's next number");
    for discard in ["DISCARD SEQUENCES", "DISCARD ALL"] {
        client.batch_execute(discard).unwrap();
        assert_eq!(
            sqlstate(client.query_one("SELECT segment_currval('d')", &[])),
            "55000",
            "segment_currval after {discard}"
        );
        let after = next(&mut client, "d");
        assert!(
            after > block + 99,
            "{after} after {discard}: the block from {block} was handed out on"
        );
        assert_eq!(client.one::<i64>("SELECT segment_currval('d')"), after);
        block = after;
    }
    let last = block;
    client.batch_execute("DISCARD TEMP").unwrap();
    assert_eq!(client.one::<i64>("SELECT segment_currval('d')"), last);
    assert_eq!(
        next(&mut client, "d"),
        last + 1,
        "DISCARD TEMP keeps the block"
    );
}

/// Session A holds a block of a segment with `cache => 1000`; session B's
/// `segment_setval(v)` drops it: A's next number is v + 1, as anyone's. The same for a block
/// of the adaptive mode left over from A's earlier statement.
#[test]
fn setval_reaches_other_sessions_blocks() {
    let cluster = Cluster::with_idgen("block-setval", 3, &[]);
    let mut a = cluster.connect("postgres");
    let mut b = cluster.connect("postgres");
    a.batch_execute(
        "SELECT segment_create('s', step => 1000, cache => 1000);
         SELECT segment_create('t', step => 1000, cache => 0)",
    )
    .unwrap();
    let held = next(&mut a, "s");
    assert_eq!(next(&mut a, "s"), held + 1, "A hands out its own block");
    let mut v = max_id(&mut b, "s").unwrap() + 10;
    assert_eq!(
        b.one_with::<i64>("SELECT segment_setval('s', $1)", &[&v]),
        v
    );
    let after = next(&mut a, "s");
    assert!(after > v, "A drew {after} after segment_setval('s', {v})");
    assert_eq!(after, v + 1);
    assert!(next(&mut b, "s") > after);

    // The adaptive mode: a statement of 4 draws takes blocks of 1, 2 and 4 numbers.
    assert_eq!(draw(&mut a, "t", 4).unwrap(), [1, 2, 3, 4]);
    let held = next(&mut a, "t");
    v = max_id(&mut b, "t").unwrap() + 10;
    assert_eq!(
        b.one_with::<i64>("SELECT segment_setval('t', $1)", &[&v]),
        v
    );
    let after = next(&mut a, "t");
    println!("adaptive: {held} before segment_setval('t', {v}), {after} after");
    assert!(after > v, "A drew {after} after segment_setval('t', {v})");
}

/// Eviction from the shared cache and `segment_drop` drop the blocks of that segment that
/// sessions hold: after an eviction (the unused numbers given back down to the blocks' ends,
/// never into them) every session draws above every block; after a drop and a re-create the
/// new segment's numbers are not handed out twice because of an old block.
#[test]
fn eviction_and_drop_drop_the_blocks() {
    const OTHERS: i32 = 24;
    let cluster = Cluster::with_idgen("block-evict", 3, &["idgen.segment_cache_size = 16"]);
    let mut admin = cluster.connect("postgres");
    admin
        .batch_execute(&format!(
            "SELECT segment_create('b', step => 1000000, cache => 1000);
             SELECT segment_create('o' || g, step => 10) FROM generate_series(1, {OTHERS}) g"
        ))
        .unwrap();
    let mut a = cluster.connect("postgres");
    let mut b = cluster.connect("postgres");
    assert_eq!(next(&mut a, "b"), 1, "A's block is 1 to 1000");
    assert_eq!(next(&mut b, "b"), 1001, "B's block is 1001 to 2000");
    evict(&mut admin, "o", OTHERS, &["b"]);
    let mark = max_id(&mut admin, "b").unwrap();
    assert!(
        mark >= 2000,
        "the eviction gave back into the blocks: mark {mark}"
    );
    let c = next(&mut cluster.connect("postgres"), "b");
    let after_a = next(&mut a, "b");
    let after_b = next(&mut b, "b");
    println!("after the eviction: mark {mark}, a new session {c}, A {after_a}, B {after_b}");
    for (who, n) in [("a new session", c), ("A", after_a), ("B", after_b)] {
        assert!(
            n > 2000,
            "{who} drew {n} after the eviction, within a block"
        );
    }
    assert_eq!(assert_distinct("b", &[c, after_a, after_b]), 3);

    // Dropped and created again from 1: A's block of the old segment is gone.
    let held = next(&mut a, "b");
    assert_eq!(next(&mut a, "b"), held + 1, "A holds a block again");
    admin
        .batch_execute(
            "SELECT segment_drop('b'); SELECT segment_create('b', step => 1000, cache => 1000)",
        )
        .unwrap();
    assert_eq!(
        next(&mut b, "b"),
        1,
        "B's block of the new 'b' is 1 to 1000"
    );
    let a_new = next(&mut a, "b");
    assert!(
        a_new > 1000,
        "A drew {a_new} of the new 'b': from a block of the dropped one or into B's"
    );
}

/// `segment_alter(cache => n)` applies to the next block each session takes; `segment_nextvals`
/// hands out the session's block first, then takes from the shared range.
#[test]
fn alter_and_nextvals_go_through_the_block() {
    let cluster = Cluster::with_idgen("block-alter", 3, &[]);
    let mut a = cluster.connect("postgres");
    let mut b = cluster.connect("postgres");
    a.batch_execute("SELECT segment_create('n', step => 1000)")
        .unwrap();
    assert_eq!(cache_of(&mut a, "n"), 1, "no cache by default");
    assert_eq!(next(&mut a, "n"), 1);
    assert_eq!(next(&mut b, "n"), 2, "without a cache sessions take turns");
    a.batch_execute("SELECT segment_alter('n', cache => 100)")
        .unwrap();
    assert_eq!(cache_of(&mut a, "n"), 100);
    assert_eq!(next(&mut a, "n"), 3, "A's block is 3 to 102");
    assert_eq!(next(&mut b, "n"), 103, "B's block is 103 to 202");
    assert_eq!(nextvals(&mut a, "n", 5).unwrap(), [4, 5, 6, 7, 8]);
    let more = nextvals(&mut a, "n", 200).unwrap();
    assert_eq!(more.len(), 200);
    assert_eq!(
        more[..94],
        (9..=102).collect::<Vec<i64>>()[..],
        "the block first"
    );
    assert_increasing("segment_nextvals", &more);
    assert!(more[94] > 202, "then after B's block: {}", more[94]);
    assert_eq!(a.one::<i64>("SELECT segment_currval('n')"), more[199]);
    // Back to no cache: the blocks held are handed out, then sessions take turns again.
    a.batch_execute("SELECT segment_alter('n', cache => 1)")
        .unwrap();
    let b_next = next(&mut b, "n");
    assert_eq!(b_next, 104, "B's block is still B's");
    let mut all = more.clone();
    all.push(b_next);
    assert_eq!(assert_distinct("n", &all), 201);
}

/// The cache is a column of `idgen_segment`, so `pg_dump` carries it: restored into another
/// database, `segment_status()` shows it and it is in force (two sessions drawing one number
/// each are a block apart with 1000, one apart with 0).
#[test]
fn pg_dump_carries_cache() {
    let cluster = Cluster::with_idgen("block-dump", 3, &[]);
    let mut client = cluster.connect("postgres");
    client
        .batch_execute(
            "SELECT segment_create('thousand', cache => 1000);
             SELECT segment_create('auto', cache => 0);
             SELECT segment_create('plain', step => 10)",
        )
        .unwrap();
    next(&mut client, "thousand");
    let dump = cluster.dir().join("cache.dump");
    let out = cluster
        .program("pg_dump")
        .args(["-Fc", "-f", dump.to_str().unwrap()])
        .arg(cluster.conninfo("postgres"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "pg_dump: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    client.batch_execute("CREATE DATABASE restored").unwrap();
    let out = cluster
        .program("pg_restore")
        .args(["--exit-on-error", "-d", &cluster.conninfo("restored")])
        .arg(dump.to_str().unwrap())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "pg_restore: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut restored = cluster.connect("restored");
    let caches: Vec<(String, i32)> = restored
        .query(
            "SELECT name, cache FROM segment_status() ORDER BY name",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(
        caches,
        [
            ("auto".to_owned(), 0),
            ("plain".to_owned(), 1),
            ("thousand".to_owned(), 1000)
        ]
    );
    let mut other = cluster.connect("restored");
    let x = next(&mut restored, "thousand");
    let y = next(&mut other, "thousand");
    assert!(y >= x + 1000, "cache 1000 after the restore: {x}, then {y}");
    let x = next(&mut restored, "auto");
    let y = next(&mut other, "auto");
    assert_eq!(y, x + 1, "cache 0 after the restore: one number at a time");
}

/// A cache outside 0 to 1,000,000 is 22023, a NULL one 22004; neither creates nor changes
/// anything. The bounds themselves are accepted; `segment_alter` with a NULL cache (or none)
/// keeps it.
#[test]
fn bad_cache_is_refused_and_changes_nothing() {
    let cluster = Cluster::with_idgen("block-bad", 3, &[]);
    let mut client = cluster.connect("postgres");
    for (cache, code) in [("-1", "22023"), ("1000001", "22023"), ("NULL", "22004")] {
        let sql = format!("SELECT segment_create('bad', cache => {cache})");
        assert_eq!(sqlstate(client.batch_execute(&sql)), code, "{sql}");
        assert_eq!(
            client.one::<i64>("SELECT count(*) FROM idgen_segment WHERE name = 'bad'"),
            0,
            "{sql} created nothing"
        );
    }
    client
        .batch_execute(
            "SELECT segment_create('low', cache => 0);
             SELECT segment_create('high', cache => 1000000);
             SELECT segment_create('g', cache => 50)",
        )
        .unwrap();
    assert_eq!(cache_of(&mut client, "low"), 0);
    assert_eq!(cache_of(&mut client, "high"), 1_000_000);
    for cache in ["-5", "1000001"] {
        let sql = format!("SELECT segment_alter('g', cache => {cache})");
        assert_eq!(sqlstate(client.batch_execute(&sql)), "22023", "{sql}");
        assert_eq!(cache_of(&mut client, "g"), 50, "{sql} changed nothing");
    }
    client
        .batch_execute(
            "SELECT segment_alter('g', step => 20);
             SELECT segment_alter('g', description => 'kept', cache => NULL)",
        )
        .unwrap();
    assert_eq!(cache_of(&mut client, "g"), 50, "NULL keeps the cache");
    assert_eq!(
        sqlstate(client.batch_execute("SELECT segment_alter('nope', cache => 5)")),
        "42704"
    );
}
