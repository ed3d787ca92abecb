//! The runner: one server with default durability, every measurement in rounds, pgbench, and
//! the machine's facts.

use std::process::Command;
use std::time::Instant;

use super::{
    available, count, Config, Generator, Measurement, PgbenchLength, Protocol, Report, Sample,
    SNOWFLAKE,
};
use crate::{pg_bin, Cluster, One};

/// Starts a server, runs every measurement `config.rounds` times and returns the samples.
/// `progress` gets one line per step. Panics when the server or a statement fails.
pub fn run(config: &Config, mut progress: impl FnMut(&str)) -> Report {
    let cluster = Cluster::start(
        "bench",
        &[
            "shared_preload_libraries = 'idgen'",
            "idgen.worker_id = 1",
            "# Default durability: the test clusters' fsync = off is undone.",
            "fsync = on",
            "synchronous_commit = on",
            "full_page_writes = on",
        ],
    );
    // Committed before the segment is created: the allocator works in transactions of its own.
    cluster.create_db_with_idgen("postgres");
    let mut db = cluster.connect("postgres");
    db.batch_execute(SETUP).expect("benchmark setup");
    let machine = machine(&mut db);
    let max_drift_ms: i64 =
        db.one("SELECT setting::bigint FROM pg_settings WHERE name = 'idgen.max_drift_ms'");
    let server_version_num: i32 = db.one("SELECT current_setting('server_version_num')::int");
    let mut samples = Vec::new();
    for round in 0..config.rounds {
        for (i, &n) in config.bulk_sizes.iter().enumerate() {
            for g in available(server_version_num) {
                let Some(expr) = g.bulk else { continue };
                if config.bulk_sizes[..i]
                    .iter()
                    .any(|&m| config.bulk_size_of(g, m) == config.bulk_size_of(g, n))
                {
                    continue; // a capped size measured already this round
                }
                let n = config.bulk_size_of(g, n);
                progress(&format!(
                    "round {}: bulk {} {}",
                    round + 1,
                    count(n),
                    g.name
                ));
                if g.capped {
                    db.batch_execute("VACUUM bench_ticket").unwrap();
                }
                let sql = format!(
                    "SELECT count(g) FROM (SELECT {expr} AS g FROM generate_series(1, {n})) t"
                );
                let start = Instant::now();
                let drawn: i64 = db.one(&sql);
                let ns = start.elapsed().as_nanos() as f64;
                assert_eq!(drawn as u64, n, "{sql}");
                samples.push(sample(g, Measurement::Bulk { n }, round, n, ns / n as f64));
                if g.name == SNOWFLAKE && Some(&n) == config.bulk_sizes.iter().max() {
                    let ahead_ms: f64 = db.one(DRIFT);
                    samples.push(sample(g, Measurement::Drift, round, n, ahead_ms));
                }
            }
        }
        for g in available(server_version_num) {
            if g.column.is_none() && !g.insert_keys {
                continue;
            }
            progress(&format!("round {}: insert {}", round + 1, g.name));
            let n = config.bulk_size_of(g, config.insert_rows);
            let (column, insert) = match g.column {
                Some(column) => (
                    column,
                    format!("INSERT INTO bench_insert (payload) SELECT g FROM generate_series(1, {n}) g"),
                ),
                None => (
                    "bigint PRIMARY KEY",
                    format!("INSERT INTO bench_insert (id, payload) SELECT g, g FROM generate_series(1, {n}) g"),
                ),
            };
            db.batch_execute(&format!(
                "DROP TABLE IF EXISTS bench_insert; CREATE TABLE bench_insert (id {column}, payload int NOT NULL)"
            ))
            .unwrap();
            if g.capped {
                db.batch_execute("VACUUM bench_ticket").unwrap();
            }
            // Start each insert from a clean checkpoint, so that none pays for another's.
            db.batch_execute("CHECKPOINT").unwrap();
            let start = Instant::now();
            let inserted = db.execute(&insert, &[]).unwrap();
            let secs = start.elapsed().as_secs_f64();
            assert_eq!(inserted, n, "{insert}");
            let bytes: i64 = db.one("SELECT pg_relation_size('bench_insert_pkey')");
            samples.push(sample(g, Measurement::InsertSeconds, round, n, secs));
            samples.push(sample(
                g,
                Measurement::InsertRate,
                round,
                n,
                n as f64 / secs,
            ));
            samples.push(sample(
                g,
                Measurement::IndexSize,
                round,
                n,
                bytes as f64 / 1048576.0,
            ));
        }
        db.batch_execute("DROP TABLE IF EXISTS bench_insert")
            .unwrap();
        for &protocol in &config.protocols {
            for &clients in &config.clients {
                for g in available(server_version_num) {
                    let Some(statement) = g.statement else {
                        continue;
                    };
                    progress(&format!(
                        "round {}: pgbench -M {} {clients} clients {}",
                        round + 1,
                        protocol.name(),
                        g.name
                    ));
                    let tps = pgbench(&cluster, statement, clients, protocol, config.pgbench);
                    let m = Measurement::PerStatement { clients, protocol };
                    samples.push(sample(g, m, round, 1, tps));
                }
            }
        }
    }
    Report {
        config: config.clone(),
        machine,
        samples,
        max_drift_ms,
        server_version_num,
    }
}

const SETUP: &str = "
SELECT segment_create('s');
CREATE SEQUENCE bench_cache_1 CACHE 1;
CREATE SEQUENCE bench_cache_1000 CACHE 1000;
CREATE TABLE bench_serial (id bigserial);
CREATE TABLE bench_ticket (id int PRIMARY KEY, v bigint NOT NULL);
INSERT INTO bench_ticket VALUES (1, 0);
CREATE FUNCTION bench_ticket_next() RETURNS bigint LANGUAGE sql VOLATILE
    AS $$ UPDATE bench_ticket SET v = v + 1 WHERE id = 1 RETURNING v $$;
CREATE FUNCTION bench_call_floor() RETURNS bigint LANGUAGE c VOLATILE
    AS '$libdir/idgen', 'idgen_call_floor_wrapper';
";

/// Ms the session's last Snowflake id is ahead of the wall clock (negative: behind).
const DRIFT: &str = "SELECT ((extract(epoch FROM snowflake_timestamp(snowflake_currval())) \
                     - extract(epoch FROM clock_timestamp())) * 1000)::float8";

fn sample(g: &Generator, measurement: Measurement, round: usize, n: u64, value: f64) -> Sample {
    Sample {
        generator: g.name,
        measurement,
        round,
        n,
        value,
    }
}

/// Runs pgbench with `statement` as its script in `protocol`; returns its tps.
pub fn pgbench(
    cluster: &Cluster,
    statement: &str,
    clients: u32,
    protocol: Protocol,
    length: PgbenchLength,
) -> f64 {
    let script = cluster.dir().join("bench.sql");
    std::fs::write(&script, format!("{statement}\n")).unwrap();
    let mut cmd = Command::new(format!("{}/pgbench", pg_bin()));
    cmd.args([
        "-h",
        "127.0.0.1",
        "-U",
        "postgres",
        "-n",
        "-M",
        protocol.name(),
    ])
    .args(["-p", &cluster.port().to_string()])
    .args(["-c", &clients.to_string(), "-j", &clients.to_string()])
    .args(["-f", script.to_str().unwrap()]);
    match length {
        PgbenchLength::Seconds(s) => cmd.args(["-T", &s.to_string()]),
        PgbenchLength::Transactions(t) => cmd.args(["-t", &t.to_string()]),
    };
    cmd.arg("postgres");
    let out = cmd.output().expect("run pgbench");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "pgbench {statement}: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .find_map(|l| {
            let rest = l.strip_prefix("tps = ")?;
            rest.split_whitespace().next()?.parse().ok()
        })
        .unwrap_or_else(|| panic!("no tps in pgbench's output:\n{stdout}"))
}

/// Cores, memory, CPU, PostgreSQL version and the settings that matter here.
fn machine(db: &mut postgres::Client) -> Vec<(String, String)> {
    let mut rows = host();
    let version: String = db.one("SELECT version()");
    rows.push(("PostgreSQL".into(), version));
    let settings = db
        .query(
            "SELECT name, setting || coalesce(' ' || unit, '') FROM pg_settings WHERE name IN \
             ('fsync', 'synchronous_commit', 'full_page_writes', 'wal_level', 'shared_buffers', \
              'work_mem', 'max_wal_size', 'idgen.max_drift_ms', 'idgen.sequence_bits', \
              'idgen.segment_refill_interval') ORDER BY name",
            &[],
        )
        .unwrap();
    for r in settings {
        rows.push((r.get(0), r.get(1)));
    }
    rows
}

/// This machine's cores, CPU model and memory, as rows of a report's machine table.
pub fn host() -> Vec<(String, String)> {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|s| s.trim_start_matches([' ', '\t', ':']).to_owned())
        .unwrap_or_else(|| "unknown".into());
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem_gib = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|s| s.trim().trim_end_matches(" kB").parse::<f64>().ok())
        .map(|kb| format!("{:.1} GiB", kb / 1048576.0))
        .unwrap_or_else(|| "unknown".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    vec![
        ("CPU".to_owned(), format!("{cores} cores, {cpu}")),
        ("memory".to_owned(), mem_gib),
    ]
}
