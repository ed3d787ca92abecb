//! The registry's scale check (`bash scripts/bench.sh --registry`, README "Many servers with a
//! registry"): what one registry server costs per lease renewal and per global-segment range,
//! and so how many nodes it serves. Starts its own registry (fsync and synchronous_commit on),
//! fills it with 1,024 leases (every worker id of the default layout, as 1,024 nodes would),
//! then renews them from 8 connections for 10 s, and takes ranges of one global segment from 8
//! connections for 10 s. Prints a Markdown table; not a pass/fail test.

use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use idgen_cluster_tests::{Cluster, One};

const HOLDERS: i32 = 1024;
const CONNECTIONS: usize = 8;
const RUN: Duration = Duration::from_secs(10);
/// The default `idgen.registry_renew_interval`, in seconds.
const RENEW_INTERVAL_S: f64 = 10.0;

/// Latency percentiles (µs) and the rate (per second) of calls made for `RUN` by
/// `CONNECTIONS` clients, each running `call(client, connection index, iteration)`.
fn measure(
    registry: &Cluster,
    call: impl Fn(&mut postgres::Client, usize, usize) + Sync,
) -> (f64, f64, f64, f64) {
    let stop = AtomicBool::new(false);
    let started = Instant::now();
    let mut latencies: Vec<u128> = thread::scope(|s| {
        let handles: Vec<_> = (0..CONNECTIONS)
            .map(|c| {
                let (stop, call) = (&stop, &call);
                s.spawn(move || {
                    let mut client = registry.connect("postgres");
                    let mut own = Vec::new();
                    let mut i = 0;
                    while !stop.load(Ordering::Relaxed) {
                        let t = Instant::now();
                        call(&mut client, c, i);
                        own.push(t.elapsed().as_micros());
                        i += 1;
                    }
                    own
                })
            })
            .collect();
        thread::sleep(RUN);
        stop.store(true, Ordering::Relaxed);
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    let elapsed = started.elapsed().as_secs_f64();
    latencies.sort_unstable();
    let pct = |p: f64| latencies[((latencies.len() - 1) as f64 * p) as usize] as f64;
    (
        latencies.len() as f64 / elapsed,
        pct(0.5),
        pct(0.99),
        pct(0.999),
    )
}

fn main() {
    let registry = Cluster::start(
        "registry-bench",
        &[
            "shared_preload_libraries = 'idgen'",
            "idgen.worker_id = 0",
            // The harness turns fsync off for tests; a registry commits durably.
            "fsync = on",
            "synchronous_commit = on",
            // One server: no synchronous standby to show its durability with.
            "idgen.registry_single_server = on",
            // The leases below; the registry grants nothing for this long after its start.
            "idgen.registry_max_lease = 20s",
        ],
    );
    registry.create_db_with_idgen("postgres");
    let mut admin = registry.connect("postgres");
    // Each node's hello (which records the registry's identity and the node), then the wait
    // after the registry's start.
    for i in 0..HOLDERS {
        admin
            .batch_execute(&format!(
                "SELECT * FROM idgen_registry_hello('node{i}', 'inc{i}', 0, 5432)"
            ))
            .unwrap();
    }
    // The incarnation the takes below come from.
    admin
        .batch_execute("SELECT * FROM idgen_registry_hello('bench', 'bench', 0, 5432)")
        .unwrap();
    let wait: f64 = admin.one(
        "SELECT extract(epoch FROM grants_from - clock_timestamp())::float8 \
         FROM idgen_registry_hello('node0', 'inc0', 0, 5432)",
    );
    std::thread::sleep(std::time::Duration::from_secs_f64(wait.max(0.0) + 0.1));

    let t = Instant::now();
    for i in 0..HOLDERS {
        admin
            .batch_execute(&format!(
                "SELECT * FROM idgen_registry_claim('node{i}', 'inc{i}', repeat('s', 32), 'bench', \
                 1, NULL, 1704067200000, 10, 12, 1, 20000, 6000, 0, 5432)"
            ))
            .unwrap();
    }
    let claim_us = t.elapsed().as_micros() as f64 / f64::from(HOLDERS);
    let held: i64 = admin.one("SELECT count(*) FROM idgen_registry_workers WHERE state = 'held'");
    assert_eq!(held, i64::from(HOLDERS));

    let per_connection = HOLDERS as usize / CONNECTIONS;
    let renew = measure(&registry, |client, c, i| {
        let worker = (c * per_connection + i % per_connection) as i32;
        client
            .query_one(
                "SELECT fence_tick FROM idgen_registry_renew($1, $2, repeat('s', 32), 20000, \
                 6000, 0.5)",
                &[&worker, &format!("inc{worker}")],
            )
            .unwrap();
    });

    admin
        .batch_execute("SELECT * FROM idgen_registry_segment_create('orders', 1, 1000, NULL)")
        .unwrap();
    let take = measure(&registry, |client, _, _| {
        client
            .query_one(
                "SELECT last_id FROM idgen_registry_segment_take('orders', 1000, 'bench', \
                 repeat('s', 32))",
                &[],
            )
            .unwrap();
    });

    let nodes_served = renew.0 * RENEW_INTERVAL_S;
    println!("| registry call ({CONNECTIONS} connections, {} s, fsync on) | calls/s | p50 µs | p99 µs | p99.9 µs |", RUN.as_secs());
    println!("|---|---|---|---|---|");
    println!(
        "| lease renewal (1,024 leases) | {:.0} | {:.0} | {:.0} | {:.0} |",
        renew.0, renew.1, renew.2, renew.3
    );
    println!(
        "| global segment range (one segment) | {:.0} | {:.0} | {:.0} | {:.0} |",
        take.0, take.1, take.2, take.3
    );
    println!();
    println!("claim: {claim_us:.0} µs each (1,024 claims, one connection)");
    println!(
        "renewals at the default interval ({RENEW_INTERVAL_S} s): this registry renews {:.0} leases per interval, {:.0}x the 1,024 worker ids of the default layout",
        nodes_served,
        nodes_served / f64::from(HOLDERS)
    );
}
