//! idgen's benchmark: its generators against PostgreSQL's own, side by side, in one run
//! (`scripts/bench.sh`; issue 6). Not a pass/fail test: the test suite runs [`Config::quick`]
//! only to keep this code working, and asserts that every cell was measured, never a timing.
//!
//! One server with default durability (fsync and synchronous_commit on) and idgen preloaded.
//! Each round measures every generator once per measurement, A B C A B C ..., so that the
//! machine's drift over the run spreads over all generators alike; a cell is the median over
//! rounds, with min and max. Ratios are taken within a round, then their median is reported.
//!
//! Measurements:
//! * bulk: `SELECT count(g) FROM (SELECT <gen> AS g FROM generate_series(1, N)) t`, in ns per
//!   id; the same over a constant is the floor, over a no-op pgrx function the call floor;
//! * insert: `INSERT ... SELECT` of N rows into a table whose primary key defaults to the
//!   generator: seconds, rows per second, and the primary key's size;
//! * per statement: `pgbench -M prepared` running `SELECT <gen>;`, tps, with `SELECT 1` as the
//!   ceiling;
//! * drift: after the largest bulk statement of `snowflake_nextval()`, how far the last id's
//!   timestamp is ahead of the wall clock.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::process::Command;
use std::time::Instant;

use crate::{pg_bin, Cluster};

/// What a run measures, and how long.
#[derive(Debug, Clone)]
pub struct Config {
    /// Rounds of every measurement (medians over these).
    pub rounds: usize,
    /// Ids per bulk statement, one measurement each.
    pub bulk_sizes: Vec<u64>,
    /// Rows per `INSERT ... SELECT`.
    pub insert_rows: u64,
    /// Most ids drawn from the ticket table in one statement: every `UPDATE` of its one row
    /// within one transaction walks all the row's earlier versions, so a statement costs
    /// O(N²) (10,000 ids take a second, 1,000,000 would take hours).
    pub ticket_cap: u64,
    /// How long each pgbench run is.
    pub pgbench: PgbenchLength,
    /// pgbench client counts, one measurement each.
    pub clients: Vec<u32>,
}

/// The length of a pgbench run.
#[derive(Debug, Clone, Copy)]
pub enum PgbenchLength {
    /// `-T seconds`.
    Seconds(u32),
    /// `-t transactions` per client.
    Transactions(u32),
}

impl Config {
    /// The ids or rows `g` draws where the configuration says `n`: `n`, or the ticket cap.
    pub fn bulk_size_of(&self, g: &Generator, n: u64) -> u64 {
        if g.capped {
            n.min(self.ticket_cap)
        } else {
            n
        }
    }

    /// The distinct bulk sizes `g` is measured at.
    pub fn bulk_sizes_of(&self, g: &Generator) -> Vec<u64> {
        let mut sizes: Vec<u64> = self
            .bulk_sizes
            .iter()
            .map(|&n| self.bulk_size_of(g, n))
            .collect();
        sizes.dedup();
        sizes
    }

    /// The full benchmark of issue 6: 3 rounds, 1M and 10M ids, 1M rows, 10 s pgbench runs at
    /// 1, 2 and 8 clients (about 20 minutes on 2 cores).
    pub fn full() -> Config {
        Config {
            rounds: 3,
            bulk_sizes: vec![1_000_000, 10_000_000],
            insert_rows: 1_000_000,
            ticket_cap: 10_000,
            pgbench: PgbenchLength::Seconds(10),
            clients: vec![1, 2, 8],
        }
    }

    /// Every measurement of [`Config::full`] at a size that takes seconds: for the test suite.
    pub fn quick() -> Config {
        Config {
            rounds: 3,
            bulk_sizes: vec![1_000, 10_000],
            insert_rows: 1_000,
            ticket_cap: 1_000,
            pgbench: PgbenchLength::Transactions(100),
            clients: vec![1, 2, 8],
        }
    }
}

/// One generator, and how each measurement uses it (`None`: not applicable).
#[derive(Debug, Clone, Copy)]
pub struct Generator {
    /// Its name in the report.
    pub name: &'static str,
    /// The expression of the bulk statement.
    pub bulk: Option<&'static str>,
    /// The primary key column of the insert table (`id <this>`); `None` with `insert_keys`.
    pub column: Option<&'static str>,
    /// The insert supplies the keys itself (`SELECT g, g`): the floor of the insert.
    pub insert_keys: bool,
    /// The pgbench statement.
    pub statement: Option<&'static str>,
    /// Bulk and insert sizes are capped at [`Config::ticket_cap`].
    pub capped: bool,
}

/// `nextval` CACHE 1, the reference of the "÷ nextval CACHE 1" column.
pub const NEXTVAL_CACHE_1: &str = "nextval CACHE 1";
/// The bulk floor (a constant) and the per-statement ceiling (`SELECT 1`).
pub const CONSTANT: &str = "constant (floor / SELECT 1)";
/// The no-op pgrx function.
pub const CALL_FLOOR: &str = "no-op pgrx function";
/// idgen's generators.
pub const SNOWFLAKE: &str = "snowflake_nextval()";
/// idgen's segment generator.
pub const SEGMENT: &str = "segment_nextval('s')";
/// The insert reference of the targets.
pub const BIGSERIAL: &str = "bigserial";
/// `nextval` CACHE 1000.
pub const NEXTVAL_CACHE_1000: &str = "nextval CACHE 1000";

/// The generators, in report order.
pub const GENERATORS: &[Generator] = &[
    Generator {
        name: SNOWFLAKE,
        bulk: Some("snowflake_nextval()"),
        column: Some("bigint PRIMARY KEY DEFAULT snowflake_nextval()"),
        insert_keys: false,
        statement: Some("SELECT snowflake_nextval();"),
        capped: false,
    },
    Generator {
        name: SEGMENT,
        bulk: Some("segment_nextval('s')"),
        column: Some("bigint PRIMARY KEY DEFAULT segment_nextval('s')"),
        insert_keys: false,
        statement: Some("SELECT segment_nextval('s');"),
        capped: false,
    },
    Generator {
        name: NEXTVAL_CACHE_1,
        bulk: Some("nextval('bench_cache_1')"),
        column: Some("bigint PRIMARY KEY DEFAULT nextval('bench_cache_1')"),
        insert_keys: false,
        statement: Some("SELECT nextval('bench_cache_1');"),
        capped: false,
    },
    Generator {
        name: NEXTVAL_CACHE_1000,
        bulk: Some("nextval('bench_cache_1000')"),
        column: Some("bigint PRIMARY KEY DEFAULT nextval('bench_cache_1000')"),
        insert_keys: false,
        statement: Some("SELECT nextval('bench_cache_1000');"),
        capped: false,
    },
    Generator {
        name: BIGSERIAL,
        bulk: Some("nextval('bench_serial_id_seq')"),
        column: Some("bigserial PRIMARY KEY"),
        insert_keys: false,
        statement: Some("SELECT nextval('bench_serial_id_seq');"),
        capped: false,
    },
    Generator {
        name: "gen_random_uuid()",
        bulk: Some("gen_random_uuid()"),
        column: Some("uuid PRIMARY KEY DEFAULT gen_random_uuid()"),
        insert_keys: false,
        statement: Some("SELECT gen_random_uuid();"),
        capped: false,
    },
    Generator {
        name: "ticket table (UPDATE ... RETURNING)",
        bulk: Some("bench_ticket_next()"),
        column: Some("bigint PRIMARY KEY DEFAULT bench_ticket_next()"),
        insert_keys: false,
        statement: Some("UPDATE bench_ticket SET v = v + 1 WHERE id = 1 RETURNING v;"),
        capped: true,
    },
    Generator {
        name: CONSTANT,
        bulk: Some("1::bigint"),
        column: None,
        insert_keys: true,
        statement: Some("SELECT 1;"),
        capped: false,
    },
    Generator {
        name: CALL_FLOOR,
        bulk: Some("bench_call_floor()"),
        column: None,
        insert_keys: false,
        statement: Some("SELECT bench_call_floor();"),
        capped: false,
    },
];

/// What one cell measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Measurement {
    /// One statement of `n` ids: ns per id.
    Bulk { n: u64 },
    /// `INSERT ... SELECT` of the configured rows: seconds.
    InsertSeconds,
    /// The same insert: rows per second.
    InsertRate,
    /// The insert table's primary key after the insert: MB.
    IndexSize,
    /// pgbench at `clients` clients: transactions per second.
    PerStatement { clients: u32 },
    /// Snowflake only: ms the last id of the largest bulk statement is ahead of the clock.
    Drift,
}

impl Measurement {
    /// The label in the report.
    pub fn label(&self) -> String {
        match self {
            Measurement::Bulk { n } => format!("bulk, {} ids", count(*n)),
            Measurement::InsertSeconds => "insert, time".into(),
            Measurement::InsertRate => "insert, rate".into(),
            Measurement::IndexSize => "insert, primary key size".into(),
            Measurement::PerStatement { clients: 1 } => "per statement, 1 client".into(),
            Measurement::PerStatement { clients } => format!("per statement, {clients} clients"),
            Measurement::Drift => "drift after the largest bulk".into(),
        }
    }

    /// The unit of its values.
    pub fn unit(&self) -> &'static str {
        match self {
            Measurement::Bulk { .. } => "ns/id",
            Measurement::InsertSeconds => "s",
            Measurement::InsertRate => "rows/s",
            Measurement::IndexSize => "MB",
            Measurement::PerStatement { .. } => "tps",
            Measurement::Drift => "ms",
        }
    }
}

/// One measured value.
#[derive(Debug, Clone)]
pub struct Sample {
    /// [`Generator::name`].
    pub generator: &'static str,
    /// What was measured.
    pub measurement: Measurement,
    /// 0-based round.
    pub round: usize,
    /// Ids or rows the statement really drew (the ticket table's are capped).
    pub n: u64,
    /// In [`Measurement::unit`].
    pub value: f64,
}

/// A run's results.
#[derive(Debug)]
pub struct Report {
    /// What was run.
    pub config: Config,
    /// The machine and server: (name, value).
    pub machine: Vec<(String, String)>,
    /// Every value, in the order measured.
    pub samples: Vec<Sample>,
    /// `idgen.max_drift_ms` of the server, for the drift target.
    pub max_drift_ms: i64,
}

/// One line of the report: a generator's cell of one measurement over all rounds.
#[derive(Debug, Clone)]
pub struct Row {
    /// [`Generator::name`].
    pub generator: &'static str,
    /// What was measured.
    pub measurement: Measurement,
    /// Ids or rows per statement.
    pub n: u64,
    /// Rounds measured.
    pub rounds: usize,
    /// Median, min and max over rounds.
    pub median: f64,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
    /// Median over rounds of this value ÷ `nextval` CACHE 1's in the same round.
    pub vs_nextval: Option<f64>,
    /// Bulk: median over rounds of ns/id above the call floor's; per statement: of tps ÷
    /// `SELECT 1`'s; insert time and rate: ÷ the client-supplied keys'.
    pub vs_floor: Option<f64>,
}

/// A target of issue 6, checked on a run.
#[derive(Debug, Clone)]
pub struct Target {
    /// What it demands.
    pub what: String,
    /// What the run measured.
    pub measured: String,
    /// Whether the measurement meets it (`None`: not measured).
    pub met: Option<bool>,
}

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
    let max_drift_ms: i64 = db
        .query_one(
            "SELECT setting::bigint FROM pg_settings WHERE name = 'idgen.max_drift_ms'",
            &[],
        )
        .unwrap()
        .get(0);
    let mut samples = Vec::new();
    for round in 0..config.rounds {
        for (i, &n) in config.bulk_sizes.iter().enumerate() {
            for g in GENERATORS {
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
                let drawn: i64 = db.query_one(&sql, &[]).unwrap().get(0);
                let ns = start.elapsed().as_nanos() as f64;
                assert_eq!(drawn as u64, n, "{sql}");
                samples.push(sample(g, Measurement::Bulk { n }, round, n, ns / n as f64));
                if g.name == SNOWFLAKE && Some(&n) == config.bulk_sizes.iter().max() {
                    let ahead_ms: f64 = db.query_one(DRIFT, &[]).unwrap().get(0);
                    samples.push(sample(g, Measurement::Drift, round, n, ahead_ms));
                }
            }
        }
        for g in GENERATORS {
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
            let bytes: i64 = db
                .query_one("SELECT pg_relation_size('bench_insert_pkey')", &[])
                .unwrap()
                .get(0);
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
        for &clients in &config.clients {
            for g in GENERATORS {
                let Some(statement) = g.statement else {
                    continue;
                };
                progress(&format!(
                    "round {}: pgbench {clients} clients {}",
                    round + 1,
                    g.name
                ));
                let tps = pgbench(&cluster, statement, clients, config.pgbench);
                let m = Measurement::PerStatement { clients };
                samples.push(sample(g, m, round, 1, tps));
            }
        }
    }
    Report {
        config: config.clone(),
        machine,
        samples,
        max_drift_ms,
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

/// Runs pgbench with `statement` as its script; returns its tps.
fn pgbench(cluster: &Cluster, statement: &str, clients: u32, length: PgbenchLength) -> f64 {
    let script = cluster.dir().join("bench.sql");
    std::fs::write(&script, format!("{statement}\n")).unwrap();
    let mut cmd = Command::new(format!("{}/pgbench", pg_bin()));
    cmd.args(["-h", "127.0.0.1", "-U", "postgres", "-n", "-M", "prepared"])
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
    let mut rows = vec![
        ("CPU".to_owned(), format!("{cores} cores, {cpu}")),
        ("memory".to_owned(), mem_gib),
    ];
    let version: String = db.query_one("SELECT version()", &[]).unwrap().get(0);
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

/// `n` with thousands separators.
fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len() % 2 == 1 {
        values[mid]
    } else {
        (values[mid - 1] + values[mid]) / 2.0
    }
}

impl Report {
    /// The value of `generator`'s `measurement` in `round`.
    fn value(&self, generator: &str, measurement: Measurement, round: usize) -> Option<f64> {
        self.samples
            .iter()
            .find(|s| s.generator == generator && s.measurement == measurement && s.round == round)
            .map(|s| s.value)
    }

    /// Median over rounds of `f(this round's value, reference's value in that round)`.
    fn versus(
        &self,
        generator: &str,
        measurement: Measurement,
        reference: &str,
        reference_measurement: Measurement,
        f: impl Fn(f64, f64) -> f64,
    ) -> Option<f64> {
        let mut per_round: Vec<f64> = (0..self.config.rounds)
            .filter_map(|r| {
                Some(f(
                    self.value(generator, measurement, r)?,
                    self.value(reference, reference_measurement, r)?,
                ))
            })
            .collect();
        (!per_round.is_empty()).then(|| median(&mut per_round))
    }

    /// The measurements the configuration asks of `g`.
    fn expected(&self, g: &Generator) -> Vec<Measurement> {
        let mut m = Vec::new();
        if g.bulk.is_some() {
            m.extend(
                self.config
                    .bulk_sizes_of(g)
                    .into_iter()
                    .map(|n| Measurement::Bulk { n }),
            );
        }
        if g.name == SNOWFLAKE {
            m.push(Measurement::Drift);
        }
        if g.column.is_some() || g.insert_keys {
            m.extend([
                Measurement::InsertSeconds,
                Measurement::InsertRate,
                Measurement::IndexSize,
            ]);
        }
        if g.statement.is_some() {
            m.extend(
                self.config
                    .clients
                    .iter()
                    .map(|&clients| Measurement::PerStatement { clients }),
            );
        }
        m
    }

    /// Cells (generator, measurement) without a value in every round: empty after a complete
    /// run.
    pub fn missing(&self) -> Vec<String> {
        let mut missing = Vec::new();
        for g in GENERATORS {
            for m in self.expected(g) {
                let rounds = self
                    .samples
                    .iter()
                    .filter(|s| s.generator == g.name && s.measurement == m)
                    .count();
                if rounds != self.config.rounds {
                    missing.push(format!(
                        "{} / {}: {rounds} of {} rounds",
                        g.name,
                        m.label(),
                        self.config.rounds
                    ));
                }
            }
        }
        missing
    }

    /// The rows of the report: per measurement, every generator that has it.
    pub fn rows(&self) -> Vec<Row> {
        let mut cells: BTreeMap<(Measurement, usize), Vec<&Sample>> = BTreeMap::new();
        for s in &self.samples {
            let index = GENERATORS
                .iter()
                .position(|g| g.name == s.generator)
                .unwrap();
            cells.entry((s.measurement, index)).or_default().push(s);
        }
        let mut rows = Vec::new();
        for ((m, index), samples) in cells {
            let g = &GENERATORS[index];
            let mut values: Vec<f64> = samples.iter().map(|s| s.value).collect();
            let (min, max) = values
                .iter()
                .fold((f64::MAX, f64::MIN), |(lo, hi), &v| (lo.min(v), hi.max(v)));
            let ratio = |a: f64, b: f64| a / b;
            // A capped generator's sizes differ from the others': only its tps compare.
            let vs_nextval = match m {
                Measurement::Drift => None,
                Measurement::PerStatement { .. } => {
                    self.versus(g.name, m, NEXTVAL_CACHE_1, m, ratio)
                }
                _ if g.capped => None,
                _ => self.versus(g.name, m, NEXTVAL_CACHE_1, m, ratio),
            };
            let vs_floor = match m {
                Measurement::Bulk { .. } if g.capped => None,
                Measurement::Bulk { .. } => self.versus(g.name, m, CALL_FLOOR, m, |a, b| a - b),
                Measurement::PerStatement { .. } => self.versus(g.name, m, CONSTANT, m, ratio),
                Measurement::InsertSeconds | Measurement::InsertRate if !g.capped => {
                    self.versus(g.name, m, CONSTANT, m, ratio)
                }
                _ => None,
            };
            rows.push(Row {
                generator: g.name,
                measurement: m,
                n: samples[0].n,
                rounds: samples.len(),
                median: median(&mut values),
                min,
                max,
                vs_nextval,
                vs_floor,
            });
        }
        rows
    }

    /// The targets of issue 6 on this run.
    pub fn targets(&self) -> Vec<Target> {
        let mut targets = Vec::new();
        let ratio = |a: f64, b: f64| a / b;
        for g in [SNOWFLAKE, SEGMENT] {
            for &clients in &self.config.clients {
                let m = Measurement::PerStatement { clients };
                let r = self.versus(g, m, CONSTANT, m, ratio);
                targets.push(Target {
                    what: format!("{g}: {} ≥ 0.97 × SELECT 1", m.label()),
                    measured: r.map_or("-".into(), |r| format!("{r:.3} ×")),
                    met: r.map(|r| r >= 0.97),
                });
            }
        }
        for &n in &self.config.bulk_sizes {
            let m = Measurement::Bulk { n };
            for (g, within) in [(SNOWFLAKE, 40.0), (SEGMENT, 60.0)] {
                let d = self.versus(g, m, CALL_FLOOR, m, |a, b| a - b);
                targets.push(Target {
                    what: format!(
                        "{g}: bulk {} within {within} ns/id of the no-op pgrx function",
                        count(n)
                    ),
                    measured: d.map_or("-".into(), |d| format!("{d:+.1} ns/id")),
                    met: d.map(|d| d <= within),
                });
                let r = self.versus(g, m, NEXTVAL_CACHE_1000, m, ratio);
                targets.push(Target {
                    what: format!(
                        "{g}: bulk {} faster per id than nextval CACHE 1000",
                        count(n)
                    ),
                    measured: r.map_or("-".into(), |r| format!("{r:.3} × its time")),
                    met: r.map(|r| r < 1.0),
                });
            }
        }
        for g in [SNOWFLAKE, SEGMENT] {
            let m = Measurement::InsertSeconds;
            let r = self.versus(g, m, BIGSERIAL, m, ratio);
            targets.push(Target {
                what: format!("{g}: insert time within 5% of bigserial's"),
                measured: r.map_or("-".into(), |r| format!("{r:.3} × bigserial")),
                met: r.map(|r| r <= 1.05),
            });
            let m = Measurement::IndexSize;
            let r = self.versus(g, m, BIGSERIAL, m, ratio);
            targets.push(Target {
                what: format!("{g}: primary key no larger than bigserial's"),
                measured: r.map_or("-".into(), |r| format!("{r:.3} × bigserial")),
                met: r.map(|r| r <= 1.0),
            });
        }
        let drift: Vec<f64> = self
            .samples
            .iter()
            .filter(|s| s.measurement == Measurement::Drift)
            .map(|s| s.value)
            .collect();
        let worst = drift.iter().copied().reduce(f64::max);
        targets.push(Target {
            what: format!(
                "snowflake drift after the largest bulk ≤ idgen.max_drift_ms ({} ms)",
                self.max_drift_ms
            ),
            measured: worst.map_or("-".into(), |w| format!("{w:.0} ms at most")),
            met: worst.map(|w| self.max_drift_ms < 0 || w <= self.max_drift_ms as f64),
        });
        targets
    }

    /// The report as Markdown: the machine, one table of every cell, the targets.
    pub fn markdown(&self) -> String {
        let mut md = String::new();
        let length = match self.config.pgbench {
            PgbenchLength::Seconds(s) => format!("-T {s}"),
            PgbenchLength::Transactions(t) => format!("-t {t}"),
        };
        writeln!(
            md,
            "{} rounds, interleaved; medians (min–max). pgbench -M prepared {length}.\n",
            self.config.rounds
        )
        .unwrap();
        writeln!(md, "| machine | |\n|---|---|").unwrap();
        for (k, v) in &self.machine {
            writeln!(md, "| {k} | {v} |").unwrap();
        }
        writeln!(
            md,
            "\n| measurement | generator | n | median | min–max | ÷ nextval CACHE 1 | vs floor / ceiling |\n|---|---|--:|--:|--:|--:|--:|"
        )
        .unwrap();
        for r in self.rows() {
            let unit = r.measurement.unit();
            let vs_floor = match (r.measurement, r.vs_floor) {
                (_, None) => "".to_owned(),
                (Measurement::Bulk { .. }, Some(d)) => format!("{d:+.1} ns"),
                (_, Some(x)) => format!("{x:.3} ×"),
            };
            writeln!(
                md,
                "| {} | {} | {} | {} {unit} | {}–{} | {} | {vs_floor} |",
                r.measurement.label(),
                r.generator,
                match r.measurement {
                    Measurement::PerStatement { .. } => String::new(),
                    _ => count(r.n),
                },
                fmt(r.median),
                fmt(r.min),
                fmt(r.max),
                r.vs_nextval.map_or("".into(), |x| format!("{x:.3}")),
            )
            .unwrap();
        }
        writeln!(
            md,
            "\nvs floor / ceiling: bulk, ns/id above the no-op pgrx function; per statement, tps ÷ `SELECT 1`'s; insert time and rate, ÷ those of an insert that supplies its own keys. Ratios are taken within a round. The ticket table's bulk and insert draw at most {} ids: each `UPDATE` of its row in one transaction walks the row's earlier versions, O(N²).\n",
            count(self.config.ticket_cap)
        )
        .unwrap();
        writeln!(md, "| target | measured | met |\n|---|--:|---|").unwrap();
        for t in self.targets() {
            let met = match t.met {
                Some(true) => "yes",
                Some(false) => "**no**",
                None => "not measured",
            };
            writeln!(md, "| {} | {} | {met} |", t.what, t.measured).unwrap();
        }
        md
    }

    /// The rows as CSV, one line per cell, with a header line.
    pub fn csv(&self) -> String {
        let mut csv = String::from(
            "measurement,generator,unit,n,rounds,median,min,max,vs_nextval_cache_1,vs_floor_or_ceiling\n",
        );
        let opt = |x: Option<f64>| x.map_or(String::new(), |x| format!("{x:.4}"));
        for r in self.rows() {
            writeln!(
                csv,
                "\"{}\",\"{}\",{},{},{},{:.4},{:.4},{:.4},{},{}",
                r.measurement.label(),
                r.generator.replace('"', "\"\""),
                r.measurement.unit(),
                r.n,
                r.rounds,
                r.median,
                r.min,
                r.max,
                opt(r.vs_nextval),
                opt(r.vs_floor)
            )
            .unwrap();
        }
        csv
    }
}

/// A value with precision to suit its size.
fn fmt(v: f64) -> String {
    let a = v.abs();
    if a >= 100_000.0 {
        count(v.round() as u64)
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}
