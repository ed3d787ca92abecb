//! Growing from 2 to 3 servers sharing segment names, while clients keep drawing (README "Growing from N to M servers"):
//!
//! 1. pick a fence F above every server's high-water marks; on each server set
//!    `idgen.segment_interleave_until = F`, reload, and confirm with
//!    `segment_interleave_ready(F)` (a higher F if a server is past it already);
//! 2. on each server set the new `idgen.segment_node_count`/`segment_node_index` and
//!    `idgen.segment_interleave_from = F` (and reset `until`), reload; start the new server with
//!    the same `from`.
//!
//! Four clients draw from the two old servers throughout, two more from the new one once it is
//! up: no number is handed out twice, and every number above F lies in a block of the new
//! interleave owned by the server that handed it out. Also: changing the node count by a
//! reload without `idgen.segment_interleave_from` is refused (55000), not obeyed.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use idgen_cluster_tests::{db_error, Cluster, One};
use postgres::Client;

const STEP: i64 = 50;

fn server(tag: &str, worker: u32, count: u32, index: u32, extra: &[&str]) -> Cluster {
    let count = format!("idgen.segment_node_count = {count}");
    let index = format!("idgen.segment_node_index = {index}");
    let mut settings = vec![count.as_str(), index.as_str()];
    settings.extend_from_slice(extra);
    let c = Cluster::with_idgen(tag, worker, &settings);
    c.connect("postgres")
        .batch_execute(&format!(
            "SELECT segment_create('order_no', step => {STEP})"
        ))
        .unwrap();
    c
}

fn reload(client: &mut Client, settings: &[(&str, Option<&str>)]) {
    for (name, value) in settings {
        let sql = match value {
            Some(v) => format!("ALTER SYSTEM SET {name} = '{v}'"),
            None => format!("ALTER SYSTEM RESET {name}"),
        };
        client.batch_execute(&sql).unwrap();
    }
    client.batch_execute("SELECT pg_reload_conf()").unwrap();
    thread::sleep(Duration::from_millis(300)); // every process has read it by its next command
}

/// Draws `order_no` on `server` until `stop`, reconnecting after errors; returns the numbers.
fn client_loop(server: &Cluster, stop: &AtomicBool) -> (Vec<i64>, usize) {
    let mut numbers = Vec::new();
    let mut errors = 0;
    let mut client = server.connect("postgres");
    client
        .batch_execute("SET idgen.segment_wait_timeout = '500ms'")
        .unwrap();
    while !stop.load(Ordering::Relaxed) {
        match client.query(
            "SELECT segment_nextval('order_no') FROM generate_series(1, 5)",
            &[],
        ) {
            Ok(rows) => numbers.extend(rows.iter().map(|r| r.get::<_, i64>(0))),
            Err(_) => {
                errors += 1; // e.g. 55000 at the fence before the switch
                thread::sleep(Duration::from_millis(20));
            }
        }
    }
    (numbers, errors)
}

#[test]
fn growing_from_two_to_three_servers_under_traffic_repeats_nothing() {
    let a = server("grow-a", 1, 2, 0, &[]);
    let b = server("grow-b", 2, 2, 1, &[]);
    let stop_old = AtomicBool::new(false);
    let stop_new = AtomicBool::new(false);
    let mut fence = 0;
    let mut c_slot: Option<Cluster> = None;

    let drawn: Vec<(&str, Vec<i64>, usize)> = thread::scope(|s| {
        let mut handles = Vec::new();
        for (name, srv) in [("a", &a), ("a", &a), ("b", &b), ("b", &b)] {
            let stop = &stop_old;
            handles.push((name, s.spawn(move || client_loop(srv, stop))));
        }
        thread::sleep(Duration::from_millis(800));

        // Step 1: the fence, set and confirmed on every old server.
        let (mut ca, mut cb) = (a.connect("postgres"), b.connect("postgres"));
        let highest = |c: &mut Client| c.one::<i64>("SELECT max(max_id) FROM idgen_segment");
        fence = highest(&mut ca).max(highest(&mut cb)) + 40 * STEP;
        let mut attempts = 0;
        loop {
            attempts += 1;
            let value = fence.to_string();
            let mut ready = true;
            for c in [&mut ca, &mut cb] {
                reload(c, &[("idgen.segment_interleave_until", Some(&value))]);
            }
            for c in [&mut ca, &mut cb] {
                if let Err(e) = c.query_one("SELECT segment_interleave_ready($1)", &[&fence]) {
                    let e = e.as_db_error().expect("a server error").clone();
                    assert_eq!(e.code().code(), "55000", "{e:?}");
                    ready = false;
                }
            }
            if ready {
                break;
            }
            assert!(attempts < 5, "no fence held after {attempts} attempts");
            fence = highest(&mut ca).max(highest(&mut cb)) + 40 * STEP;
        }
        thread::sleep(Duration::from_millis(500));

        // Step 2: the new interleave above the fence, on each old server and the new one.
        let value = fence.to_string();
        for (c, index) in [(&mut ca, "0"), (&mut cb, "1")] {
            reload(
                c,
                &[
                    ("idgen.segment_node_count", Some("3")),
                    ("idgen.segment_node_index", Some(index)),
                    ("idgen.segment_interleave_from", Some(&value)),
                    ("idgen.segment_interleave_until", None),
                ],
            );
        }
        let from = format!("idgen.segment_interleave_from = '{fence}'");
        let c = c_slot.insert(server("grow-c", 3, 3, 2, &[&from]));
        let c: &Cluster = c;
        for _ in 0..2 {
            let stop = &stop_new;
            handles.push(("c", s.spawn(move || client_loop(c, stop))));
        }
        thread::sleep(Duration::from_millis(1500));
        stop_old.store(true, Ordering::Relaxed);
        stop_new.store(true, Ordering::Relaxed);
        handles
            .into_iter()
            .map(|(name, h)| {
                let (numbers, errors) = h.join().unwrap();
                (name, numbers, errors)
            })
            .collect()
    });

    let mut owner: HashMap<i64, &str> = HashMap::new();
    let mut per_server: HashMap<&str, (usize, usize, usize)> = HashMap::new();
    for (name, numbers, errors) in &drawn {
        assert!(
            numbers.windows(2).all(|w| w[0] < w[1]),
            "a client of {name} went backwards"
        );
        for &n in numbers {
            if let Some(other) = owner.insert(n, name) {
                panic!("{n} was handed out by {other} and by {name}");
            }
            let e = per_server.entry(name).or_default();
            if n > fence {
                let index = match *name {
                    "a" => 0,
                    "b" => 1,
                    _ => 2,
                };
                assert_eq!(
                    (n - 1).div_euclid(STEP).rem_euclid(3),
                    index,
                    "{n} from {name} is not in its block of the new interleave"
                );
                e.1 += 1;
            } else {
                e.0 += 1;
            }
        }
        per_server.entry(name).or_default().2 += errors;
    }
    for name in ["a", "b", "c"] {
        let (below, above, _) = per_server.get(name).copied().unwrap_or_default();
        assert!(above > 0, "{name} handed out nothing above the fence");
        if name != "c" {
            assert!(below > 0, "{name} handed out nothing below the fence");
        }
    }
    println!(
        "grew 2 -> 3 servers under traffic: fence {fence}; {} numbers, none repeated; per server (below fence, above, client errors): {per_server:?}",
        owner.len()
    );
    drop(c_slot);
}

/// A new node count by a reload alone, without `idgen.segment_interleave_from`, is refused at
/// the next refill (55000), and the old count restored works again.
#[test]
fn a_new_node_count_without_a_fence_is_refused() {
    let a = server("grow-nofence", 4, 2, 0, &[]);
    let mut c = a.connect("postgres");
    c.batch_execute("SET idgen.segment_wait_timeout = '2s'")
        .unwrap();
    let drain = format!(
        "SELECT max(segment_nextval('order_no')) FROM generate_series(1, {})",
        3 * STEP
    );
    c.one::<i64>(&drain);
    reload(&mut c, &[("idgen.segment_node_count", Some("3"))]);
    let started = Instant::now();
    let err = loop {
        match c.query_one(&drain, &[]) {
            Ok(_) => assert!(
                started.elapsed() < Duration::from_secs(10),
                "still drawing with the new count"
            ),
            Err(e) => break db_error::<()>(Err(e)),
        }
    };
    assert_eq!(err.code().code(), "55000", "{err:?}");
    assert!(
        err.message().contains("idgen.segment_interleave_from"),
        "{err:?}"
    );
    reload(&mut c, &[("idgen.segment_node_count", None)]);
    let n = c.one::<i64>(&drain);
    assert_eq!(
        (n - 1).div_euclid(STEP).rem_euclid(2),
        0,
        "{n} is not server 0's"
    );
}
