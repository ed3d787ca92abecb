//! What a business serial number costs (`bash scripts/bench.sh --serials`, README "Serial
//! numbers"): `serial_nextval` in fast and gapless mode against `segment_nextval` and
//! `nextval`, per number in bulk, and per single-row INSERT transaction (pgbench, 1 and 4
//! clients, each committing), where gapless serials go one writer at a time, and per SELECT
//! statement (8 clients, simple and prepared protocol). Default durability
//! (fsync and synchronous_commit on). Prints a Markdown table; not a pass/fail test.

use std::time::Instant;

use idgen_cluster_tests::bench::{pgbench, PgbenchLength, Protocol};
use idgen_cluster_tests::{Cluster, One};

/// Numbers per bulk statement; gapless ones fewer: each increment of the one counter row in a
/// single transaction walks the row's earlier versions, so a statement costs O(N²).
const BULK: i64 = 100_000;
const BULK_GAPLESS: i64 = 2_000;

fn main() {
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
            BULK,
        ),
        (
            "serial_nextval, gapless",
            "serial_nextval('gapless')",
            "t_gapless",
            BULK_GAPLESS,
        ),
        (
            "segment_nextval",
            "segment_nextval('seg')",
            "t_segment",
            BULK,
        ),
        ("nextval", "nextval('seq')", "t_nextval", BULK),
    ];
    println!("| generator | bulk µs/number | INSERT tps, 1 client | INSERT tps, 4 clients | SELECT tps, 8 clients, simple | SELECT tps, 8 clients, prepared |");
    println!("|---|---|---|---|---|---|");
    for (name, expr, table, n) in rows {
        eprintln!("{name}");
        let us = bulk(&mut db, expr, n);
        let insert = format!("INSERT INTO {table} DEFAULT VALUES;");
        let one = pgbench(
            &cluster,
            &insert,
            1,
            Protocol::Prepared,
            PgbenchLength::Seconds(10),
        );
        let four = pgbench(
            &cluster,
            &insert,
            4,
            Protocol::Prepared,
            PgbenchLength::Seconds(10),
        );
        // Per statement, without a table: what the call itself costs under 8 clients.
        let select = format!("SELECT {expr};");
        let [simple, prepared] = [Protocol::Simple, Protocol::Prepared]
            .map(|p| pgbench(&cluster, &select, 8, p, PgbenchLength::Seconds(10)));
        println!("| {name} | {us:.2} | {one:.0} | {four:.0} | {simple:.0} | {prepared:.0} |");
    }
}
