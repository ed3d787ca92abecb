//! What `segment_nextval` costs as the number of segment names grows (`bash scripts/bench.sh
//! --names`, README "Segments"): 1, 1,000, 10,000 and 100,000 names drawn round robin, with
//! the shared cache sized to hold them all (`idgen.segment_cache_size = 131072`), and 10,000
//! names through the default cache of 1,024 entries, where nearly every draw evicts a segment
//! (giving its unused numbers back) and loads another. Default durability (fsync and
//! synchronous_commit on). Prints a Markdown table; not a pass/fail test.
//!
//! The names are inserted into `idgen_segment` directly (superuser; safe for new rows, which no
//! cache holds yet), so that setting up 100,000 of them takes seconds, not one allocator
//! transaction each.

use std::time::Instant;

use idgen_cluster_tests::bench::count;
use idgen_cluster_tests::{Cluster, One};

/// Names of the largest case.
const MOST_NAMES: i64 = 100_000;
/// Draws of each steady-state measurement (at least 10 per name).
const DRAWS: i64 = 1_000_000;
/// Best of this many runs of each steady-state measurement.
const RUNS: usize = 3;

/// One row of the report.
struct Row {
    names: i64,
    cache: i64,
    first_us: f64,
    ns_per_id: f64,
    floor_ns: f64,
}

fn server(tag: &str, cache: i64) -> Cluster {
    let cache_line = format!("idgen.segment_cache_size = {cache}");
    let cluster = Cluster::start(
        tag,
        &[
            "shared_preload_libraries = 'idgen'",
            "idgen.worker_id = 1",
            // The harness turns fsync off for tests; a benchmark keeps default durability.
            "fsync = on",
            "synchronous_commit = on",
            &cache_line,
        ],
    );
    cluster.create_db_with_idgen("postgres");
    let mut db = cluster.connect("postgres");
    db.batch_execute(&format!(
        "INSERT INTO idgen_segment (name, max_id, step) \
         SELECT 'n' || g, 0, 1000 FROM generate_series(1, {MOST_NAMES}) g"
    ))
    .unwrap();
    cluster
}

/// Seconds of the best of `RUNS` runs of `sql` (which returns a count, checked to be `n`).
fn best_of(db: &mut postgres::Client, sql: &str, n: i64) -> f64 {
    (0..RUNS)
        .map(|_| {
            let t = Instant::now();
            let counted: i64 = db.one(sql);
            assert_eq!(counted, n, "{sql}");
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

/// `n` draws round robin over names `n1..n<names>`: the statement, and its floor (the same
/// names built without drawing).
fn round_robin(names: i64, n: i64) -> (String, String) {
    let name = format!("'n' || (g % {names} + 1)");
    (
        format!("SELECT count(segment_nextval({name})) FROM generate_series(1, {n}) g"),
        format!("SELECT count({name}) FROM generate_series(1, {n}) g"),
    )
}

fn measure(db: &mut postgres::Client, names: i64, cache: i64, draws: i64) -> Row {
    // First use of each name: a load and a refill by the allocator, committed.
    let (first, _) = round_robin(names, names);
    let t = Instant::now();
    let counted: i64 = db.one(&first);
    assert_eq!(counted, names);
    let first_us = t.elapsed().as_secs_f64() * 1e6 / names as f64;
    let (sql, floor) = round_robin(names, draws);
    let secs = best_of(db, &sql, draws);
    let floor_secs = best_of(db, &floor, draws);
    Row {
        names,
        cache,
        first_us,
        ns_per_id: secs * 1e9 / draws as f64,
        floor_ns: floor_secs * 1e9 / draws as f64,
    }
}

fn main() {
    let mut rows = Vec::new();
    let large = server("names-bench", 131_072);
    let mut db = large.connect("postgres");
    let constant = {
        db.one::<i64>("SELECT segment_nextval('n1')");
        let sql = format!("SELECT count(segment_nextval('n1')) FROM generate_series(1, {DRAWS}) g");
        best_of(&mut db, &sql, DRAWS) * 1e9 / DRAWS as f64
    };
    for names in [1, 1_000, 10_000, MOST_NAMES] {
        eprintln!("{names} names, cache 131072");
        rows.push(measure(&mut db, names, 131_072, DRAWS));
    }
    drop(db);
    drop(large);

    let small = server("names-bench-small", 1024);
    let mut db = small.connect("postgres");
    eprintln!("10000 names, cache 1024");
    // Every draw misses: a handful of rounds is enough to measure, and each costs transactions.
    rows.push(measure(&mut db, 10_000, 1024, 10_000));
    let given_back: i64 = db.one(
        "SELECT count(*) FROM idgen_segment WHERE name LIKE 'n%' AND max_id > 0 AND max_id < 1000",
    );

    println!(
        "| names drawn round robin | cache entries | first draw of a name (µs) | ns/id | floor: building the name (ns) |"
    );
    println!("|---|---|---|---|---|");
    println!("| 1, a constant argument (the call site keeps the segment) | 131,072 | | {constant:.1} | |");
    for r in &rows {
        println!(
            "| {} | {} | {:.0} | {:.1} | {:.1} |",
            count(r.names as u64),
            count(r.cache as u64),
            r.first_us,
            r.ns_per_id,
            r.floor_ns
        );
    }
    println!();
    println!(
        "{given_back} of the 10,000 segments drawn through the 1,024-entry cache hold a mark below their first range's end: their unused numbers were given back at eviction"
    );
}
