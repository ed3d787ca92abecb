//! What a business serial number costs (`bash scripts/bench.sh --serials`, README "Serial
//! numbers"): `serial_nextval` in fast and gapless mode against `segment_nextval` and
//! `nextval`, per number in bulk, and per single-row INSERT transaction (pgbench, 1 and 4
//! clients, each committing), where gapless serials go one writer at a time, and per SELECT
//! statement (8 clients, simple and prepared protocol); then 2,000 fast counters drawn
//! round-robin by 8 clients, the numbers consumed but not drawn (marks less draws: skipped at
//! an eviction, or still cached) and the time per draw, which show whether the counters fit the shared cache (`idgen.serial_cache_size`).
//! Default durability (fsync and synchronous_commit on). Prints Markdown tables; not a
//! pass/fail test.
//!
//! `--round-robin` runs only the round-robin measurement; `--quick` makes every measurement
//! tiny (pgbench runs of 1 s, one pass of the round-robin).

use std::time::Instant;

use idgen_cluster_tests::bench::{pgbench, PgbenchLength, Protocol};
use idgen_cluster_tests::{Cluster, One};

/// Numbers per bulk statement; gapless ones fewer: each increment of the one counter row in a
/// single transaction walks the row's earlier versions, so a statement costs O(N²).
const BULK: i64 = 100_000;
const BULK_GAPLESS: i64 = 2_000;

/// Fast counters of the round-robin measurement, and the clients that draw them.
const COUNTERS: i64 = 2_000;
const CLIENTS: i64 = 8;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    let round_robin_only = args.iter().any(|a| a == "--round-robin");
    if let Some(a) = args
        .iter()
        .find(|a| !matches!(a.as_str(), "--quick" | "--round-robin"))
    {
        panic!("unknown argument {a}: idgen-serial-bench [--quick] [--round-robin]");
    }
    let cluster = Cluster::start(
        "serial-bench",
        &[
            "shared_preload_libraries = 'idgen'",
            "idgen.worker_id = 1",
            // The harness turns fsync off for tests; a benchmark keeps default durability.
            "fsync = on",
            "synchronous_commit = on",
        ],
    );
    cluster.create_db_with_idgen("postgres");
    let mut db = cluster.connect("postgres");
    if !round_robin_only {
        generators(&cluster, &mut db, quick);
    }
    round_robin(&cluster, &mut db, if quick { 1 } else { 3 });
}

/// The first table: each generator in bulk, by INSERT and by SELECT.
fn generators(cluster: &Cluster, db: &mut postgres::Client, quick: bool) {
    let seconds = if quick { 1 } else { 10 };
    let scale = if quick { 100 } else { 1 };
    db.batch_execute(
        "SELECT serial_create('fast', 'INV-{YYYY}{MM}{DD}-{seq:08}', reset => 'day');
         SELECT serial_create('gapless', 'INV-{YYYY}{MM}{DD}-{seq:08}', reset => 'day', gapless => true);
         SELECT segment_create('seg');
         CREATE SEQUENCE seq;
         CREATE TABLE t_fast (no text PRIMARY KEY DEFAULT serial_nextval('fast'));
         CREATE TABLE t_gapless (no text PRIMARY KEY DEFAULT serial_nextval('gapless'));
         CREATE TABLE t_segment (no bigint PRIMARY KEY DEFAULT segment_nextval('seg'));
         CREATE TABLE t_nextval (no bigint PRIMARY KEY DEFAULT nextval('seq'));",
    )
    .unwrap();
    let bulk = |db: &mut postgres::Client, expr: &str, n: i64| -> f64 {
        let sql = format!("SELECT count({expr}) FROM generate_series(1, {n})");
        let _: i64 = db.one(&sql); // warm up: the first draws create the counter
        (0..3)
            .map(|_| {
                let t = Instant::now();
                let counted: i64 = db.one(&sql);
                assert_eq!(counted, n);
                t.elapsed().as_secs_f64() * 1e6 / n as f64
            })
            .fold(f64::INFINITY, f64::min)
    };
    let rows = [
        (
            "serial_nextval, fast",
            "serial_nextval('fast')",
            "t_fast",
            BULK / scale,
        ),
        (
            "serial_nextval, gapless",
            "serial_nextval('gapless')",
            "t_gapless",
            BULK_GAPLESS / scale,
        ),
        (
            "segment_nextval",
            "segment_nextval('seg')",
            "t_segment",
            BULK / scale,
        ),
        ("nextval", "nextval('seq')", "t_nextval", BULK / scale),
    ];
    println!("| generator | bulk µs/number | INSERT tps, 1 client | INSERT tps, 4 clients | SELECT tps, 8 clients, simple | SELECT tps, 8 clients, prepared |");
    println!("|---|---|---|---|---|---|");
    for (name, expr, table, n) in rows {
        eprintln!("{name}");
        let us = bulk(db, expr, n);
        let insert = format!("INSERT INTO {table} DEFAULT VALUES;");
        let one = pgbench(
            cluster,
            &insert,
            1,
            Protocol::Prepared,
            PgbenchLength::Seconds(seconds),
        );
        let four = pgbench(
            cluster,
            &insert,
            4,
            Protocol::Prepared,
            PgbenchLength::Seconds(seconds),
        );
        // Per statement, without a table: what the call itself costs under 8 clients.
        let select = format!("SELECT {expr};");
        let [simple, prepared] = [Protocol::Simple, Protocol::Prepared]
            .map(|p| pgbench(cluster, &select, 8, p, PgbenchLength::Seconds(seconds)));
        println!("| {name} | {us:.2} | {one:.0} | {four:.0} | {simple:.0} | {prepared:.0} |");
    }
}

/// The second table: [`COUNTERS`] fast counters, each drawn once to create it, then `passes`
/// passes in which each of [`CLIENTS`] clients draws every counter once, in turn, from its own
/// offset (one statement per client). Skipped: the numbers the counters' high-water marks
/// moved past (`idgen_serial_counter`) less the numbers drawn; µs per draw: the measured
/// passes' wall time over the draws of one client.
fn round_robin(cluster: &Cluster, db: &mut postgres::Client, passes: i64) {
    eprintln!("{COUNTERS} counters round-robin, {CLIENTS} clients, {passes} passes");
    db.batch_execute(&format!(
        "DO $$ BEGIN FOR i IN 1..{COUNTERS} LOOP
             PERFORM serial_create('rr' || i, 'R{{seq:08}}');
         END LOOP; END $$;
         SELECT count(serial_nextval('rr' || i)) FROM generate_series(1, {COUNTERS}) i;"
    ))
    .unwrap();
    let cache = db
        .query_one("SHOW idgen.serial_cache_size", &[])
        .map(|r| r.get::<_, String>(0))
        .unwrap_or_else(|_| "512 (fixed)".into());
    let draws = COUNTERS * passes;
    let start = Instant::now();
    let clients: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let mut client = cluster.connect("postgres");
            std::thread::spawn(move || {
                let sql = format!(
                    "SELECT count(serial_nextval('rr' || ((i + {offset}) % {COUNTERS} + 1)))
                       FROM generate_series(0, {draws} - 1) i",
                    offset = c * COUNTERS / CLIENTS,
                );
                let counted: i64 = client.one(&sql);
                assert_eq!(counted, draws);
            })
        })
        .collect();
    for c in clients {
        c.join().unwrap();
    }
    let us = start.elapsed().as_secs_f64() * 1e6 / draws as f64;
    let drawn = COUNTERS + CLIENTS * draws;
    let consumed: i64 = db.one(
        "SELECT sum(c.value)::bigint FROM idgen_serial_counter c
           JOIN idgen_serial s ON s.id = c.serial WHERE s.name LIKE 'rr%'",
    );
    println!();
    println!("| fast counters, round-robin | clients | idgen.serial_cache_size | drawn | consumed (marks) | consumed − drawn (skipped or still cached) | per draw | µs per draw, per client |");
    println!("|---|---|---|---|---|---|---|---|");
    println!(
        "| {COUNTERS} | {CLIENTS} | {cache} | {drawn} | {consumed} | {} | {:.2} | {us:.1} |",
        consumed - drawn,
        (consumed - drawn) as f64 / drawn as f64
    );
}
