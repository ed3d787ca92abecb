//! idgen on many cores (`bash scripts/bench.sh --cores`): how the generators scale
//! with sessions and clients that run at once. Not a pass/fail test; on fewer than 8 cores the
//! sessions share few cores and the many-core effects barely show (the report says so).
//!
//! One server (idgen preloaded, `idgen.worker_id = 1`, fsync and full_page_writes on, `jit =
//! off`, `max_connections` for the most clients and sessions); rounds interleave the
//! generators (A B C A B C ...); a cell is the median over rounds, with min and max, and ratios
//! are taken within a round, then their median is reported.
//!
//! * A, draws: PAR sessions at once, each one statement `SELECT count(<gen>) FROM
//!   generate_series(1, N)` on its own connection and thread, released together by a barrier
//!   (connections opened and the statement prepared before it); aggregate ids/s = N × PAR ÷ the
//!   wall time from the release to the last session's result. Generators: one shared segment
//!   with no per-backend cache (the default), one created `cache => 1000`, one `cache => 0`
//!   (adaptive), a segment per session (session i draws `segment_nextval('cores_own_<i>')`, a
//!   constant name as in the shared cases, so that only the sharing differs), `nextval` of a
//!   `CACHE 1000` sequence, `snowflake_nextval()`, and the no-op pgrx function (the floor of any
//!   call).
//! * B, inserts: `pgbench -M prepared` at each client count, `INSERT INTO <t> (v) VALUES (1);`
//!   into a table whose `id bigint PRIMARY KEY` defaults to the generator (`bigserial` for
//!   bigserial), emptied and checkpointed before each run, with `synchronous_commit = off` for
//!   the benchmark's sessions (`ALTER ROLE`, for this part only; the allocator commits its
//!   ranges durably whatever the sessions' setting): tps.
//!
//! `segment_create(..., cache => n)` arrived in 0.7.0; on a build without it the cached
//! segments' cells read "n/a (no cache argument)" and the rest is measured as usual.
//!
//! `idgen-cores-bench [--quick] [--rounds R] [--pars "1 4 16"] [--n N] [--clients "16 64"]
//! [--seconds S] [--out-dir DIR]`; the environment variables ROUNDS, PARS, N, CLIENTS and SECS
//! set the same, and flags win over them. Prints the
//! report and writes it as Markdown and CSV to `<out-dir>/cores.md` and `cores.csv` (default
//! `target/bench` of the project). Exits non-zero when a cell that the server could measure
//! was not measured.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::{Arc, Barrier};
use std::time::Instant;

use idgen_cluster_tests::bench::{count, host, median, pgbench, PgbenchLength, Protocol};
use idgen_cluster_tests::{Cluster, One};

/// Below this many cores the report warns that it shows little.
const FEW_CORES: usize = 8;

/// What a run measures, and how long.
#[derive(Debug, Clone)]
struct Config {
    /// Rounds of every measurement (medians over these).
    rounds: usize,
    /// Sessions drawing at once, one measurement each (part A).
    pars: Vec<usize>,
    /// Ids each session draws in its one statement.
    n: u64,
    /// pgbench client counts of the inserts, one measurement each (part B).
    clients: Vec<u32>,
    /// How long each pgbench run is.
    pgbench: PgbenchLength,
}

impl Config {
    /// The full benchmark: 3 rounds, 1, 4 and 16 sessions of 2,000,000 ids, inserts at 16 and
    /// 64 clients for 10 s each (about 10 minutes on 2 cores).
    fn full() -> Config {
        Config {
            rounds: 3,
            pars: vec![1, 4, 16],
            n: 2_000_000,
            clients: vec![16, 64],
            pgbench: PgbenchLength::Seconds(10),
        }
    }

    /// Every measurement of [`Config::full`] at a size that takes seconds.
    fn quick() -> Config {
        Config {
            rounds: 2,
            pars: vec![1, 4, 16],
            n: 20_000,
            clients: vec![16, 64],
            pgbench: PgbenchLength::Transactions(20),
        }
    }

    /// Connections the server must allow: the most pgbench clients or drawing sessions, plus
    /// the benchmark's own and PostgreSQL's reserved ones.
    fn max_connections(&self) -> usize {
        let clients = self.clients.iter().copied().max().unwrap_or(0) as usize;
        let pars = self.pars.iter().copied().max().unwrap_or(0);
        clients.max(pars) + 20
    }
}

/// How a generator draws in part A.
#[derive(Debug, Clone, Copy)]
enum Draw {
    /// Every session draws this expression.
    Expr(&'static str),
    /// Session i (1-based) draws `segment_nextval('cores_own_<i>')`.
    OwnSegment,
}

/// One generator, and how each part uses it (`None`: not in that part).
#[derive(Debug)]
struct Generator {
    /// Short name: the CSV's key and the insert table's suffix.
    key: &'static str,
    /// Its name in the report.
    name: &'static str,
    /// Part A.
    draw: Option<Draw>,
    /// Part B: the `id` column of the insert table.
    column: Option<&'static str>,
    /// A segment: compared with the default segment.
    segment: bool,
}

const SEGMENT_DEFAULT: &str = "seg_c1";
const NEXTVAL_CACHE_1000: &str = "seq1000";

const GENERATORS: &[Generator] = &[
    Generator {
        key: SEGMENT_DEFAULT,
        name: "segment_nextval, cache 1 (default)",
        draw: Some(Draw::Expr("segment_nextval('cores_c1')")),
        column: Some("bigint PRIMARY KEY DEFAULT segment_nextval('cores_c1')"),
        segment: true,
    },
    Generator {
        key: "seg_c1000",
        name: "segment_nextval, cache 1000",
        draw: Some(Draw::Expr("segment_nextval('cores_c1000')")),
        column: Some("bigint PRIMARY KEY DEFAULT segment_nextval('cores_c1000')"),
        segment: true,
    },
    Generator {
        key: "seg_auto",
        name: "segment_nextval, cache auto (0)",
        draw: Some(Draw::Expr("segment_nextval('cores_auto')")),
        column: Some("bigint PRIMARY KEY DEFAULT segment_nextval('cores_auto')"),
        segment: true,
    },
    Generator {
        key: "seg_own",
        name: "segment_nextval, a segment per session",
        draw: Some(Draw::OwnSegment),
        column: None,
        segment: true,
    },
    Generator {
        key: NEXTVAL_CACHE_1000,
        name: "nextval CACHE 1000",
        draw: Some(Draw::Expr("nextval('cores_seq1000')")),
        column: Some("bigint PRIMARY KEY DEFAULT nextval('cores_seq1000')"),
        segment: false,
    },
    Generator {
        key: "bigserial",
        name: "bigserial",
        draw: None,
        column: Some("bigserial PRIMARY KEY"),
        segment: false,
    },
    Generator {
        key: "snowflake",
        name: "snowflake_nextval()",
        draw: Some(Draw::Expr("snowflake_nextval()")),
        column: Some("bigint PRIMARY KEY DEFAULT snowflake_nextval()"),
        segment: false,
    },
    Generator {
        key: "call_floor",
        name: "no-op pgrx function (idgen_call_floor)",
        draw: Some(Draw::Expr("idgen_call_floor()")),
        column: None,
        segment: false,
    },
];

/// What one cell measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    /// `par` sessions drawing at once: ids per second, all sessions together.
    Draws { par: usize },
    /// pgbench inserts at `clients` clients: transactions per second.
    Inserts { clients: u32 },
}

impl Part {
    fn label(self, n: u64) -> String {
        match self {
            Part::Draws { par } => format!(
                "{par} session{} × {} ids",
                if par == 1 { "" } else { "s" },
                count(n)
            ),
            Part::Inserts { clients } => format!("insert, {clients} clients"),
        }
    }

    fn kind(self) -> &'static str {
        match self {
            Part::Draws { .. } => "draws",
            Part::Inserts { .. } => "inserts",
        }
    }

    /// Sessions or clients.
    fn width(self) -> usize {
        match self {
            Part::Draws { par } => par,
            Part::Inserts { clients } => clients as usize,
        }
    }

    fn unit(self) -> &'static str {
        match self {
            Part::Draws { .. } => "ids/s",
            Part::Inserts { .. } => "tps",
        }
    }

    /// Whether `g` takes part.
    fn has(self, g: &Generator) -> bool {
        match self {
            Part::Draws { .. } => g.draw.is_some(),
            Part::Inserts { .. } => g.column.is_some(),
        }
    }
}

/// One measured value.
#[derive(Debug)]
struct Sample {
    /// [`Generator::key`].
    generator: &'static str,
    part: Part,
    round: usize,
    /// ids/s or tps.
    value: f64,
}

/// A run's results.
struct Report {
    config: Config,
    machine: Vec<(String, String)>,
    /// The generators this server cannot run, and why.
    unavailable: Vec<(&'static str, String)>,
    samples: Vec<Sample>,
}

/// One line of the report.
struct Row {
    part: Part,
    generator: &'static Generator,
    /// Median, min and max over rounds; `Err`: why there are none.
    cell: Result<(f64, f64, f64, usize), String>,
    /// Median over rounds of the value ÷ `nextval` CACHE 1000's in the same round.
    vs_nextval: Option<f64>,
    /// Segments: median over rounds of the value ÷ the default segment's.
    vs_default: Option<f64>,
}

fn main() {
    let (config, out_dir) = parse_args();
    let start = Instant::now();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    if cores < FEW_CORES {
        eprintln!("{}", few_cores(cores));
    }
    let report = run(&config, |step| {
        eprintln!("[{:>6.1} s] {step}", start.elapsed().as_secs_f64())
    });
    let md = report.markdown(cores);
    println!("{md}");
    std::fs::create_dir_all(&out_dir).expect("create the output directory");
    let dir = out_dir.canonicalize().unwrap();
    std::fs::write(dir.join("cores.md"), &md).unwrap();
    std::fs::write(dir.join("cores.csv"), report.csv()).unwrap();
    eprintln!(
        "wrote {0}/cores.md and {0}/cores.csv in {1:.0} s",
        dir.display(),
        start.elapsed().as_secs_f64()
    );
    let missing = report.missing();
    if !missing.is_empty() {
        eprintln!("not measured:\n  {}", missing.join("\n  "));
        std::process::exit(1);
    }
}

const USAGE: &str = "usage: idgen-cores-bench [--quick] [--rounds R] [--pars \"1 4 16\"] [--n N] \
                     [--clients \"16 64\"] [--seconds S] [--out-dir DIR] \
                     (environment: ROUNDS, PARS, N, CLIENTS, SECS)";

fn usage(what: &str) -> ! {
    eprintln!("{USAGE}\n{what}");
    std::process::exit(2)
}

/// A list of positive whole numbers separated by spaces or commas.
fn list<T: std::str::FromStr + PartialOrd + Default>(s: &str, what: &str) -> Vec<T> {
    let v: Vec<T> = s
        .split([' ', ','])
        .filter(|p| !p.is_empty())
        .map(|p| {
            p.parse()
                .ok()
                .filter(|x| *x > T::default())
                .unwrap_or_else(|| usage(&format!("{what}: not a positive whole number: {p}")))
        })
        .collect();
    if v.is_empty() {
        usage(&format!("{what}: empty"));
    }
    v
}

fn number<T: std::str::FromStr + PartialOrd + Default>(s: &str, what: &str) -> T {
    s.trim()
        .parse()
        .ok()
        .filter(|x| *x > T::default())
        .unwrap_or_else(|| usage(&format!("{what}: not a positive whole number: {s}")))
}

/// The configuration (full or `--quick`, then the environment, then the flags) and the output
/// directory (`--out-dir`, or `target/bench` of the project).
fn parse_args() -> (Config, PathBuf) {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut config = if args.iter().any(|a| a == "--quick") {
        Config::quick()
    } else {
        Config::full()
    };
    let env = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
    if let Some(v) = env("ROUNDS") {
        config.rounds = number(&v, "ROUNDS");
    }
    if let Some(v) = env("PARS") {
        config.pars = list(&v, "PARS");
    }
    if let Some(v) = env("N") {
        config.n = number(&v, "N");
    }
    if let Some(v) = env("CLIENTS") {
        config.clients = list(&v, "CLIENTS");
    }
    if let Some(v) = env("SECS") {
        config.pgbench = PgbenchLength::Seconds(number(&v, "SECS"));
    }
    // At run time: a binary built from another clone into the shared target directory must
    // still write into this one.
    let manifest =
        std::env::var("CARGO_MANIFEST_DIR").expect("run by cargo run (scripts/bench.sh)");
    let mut out_dir = PathBuf::from(manifest).join("../../target/bench");
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let mut value = || {
            args.next()
                .unwrap_or_else(|| usage(&format!("{arg} takes a value")))
        };
        match arg.as_str() {
            "--quick" => {}
            "--out-dir" => out_dir = value().into(),
            "--rounds" => config.rounds = number(&value(), "--rounds"),
            "--pars" => config.pars = list(&value(), "--pars"),
            "--n" => config.n = number(&value(), "--n"),
            "--clients" => config.clients = list(&value(), "--clients"),
            "--seconds" => config.pgbench = PgbenchLength::Seconds(number(&value(), "--seconds")),
            other => usage(&format!("unknown: {other}")),
        }
    }
    (config, out_dir)
}

fn few_cores(cores: usize) -> String {
    format!(
        "**Only {cores} core{} here (nproc < {FEW_CORES}): the sessions and clients take turns on \
         them, so this run shows little of what many cores do (contention on one shared segment, \
         what a per-backend cache saves); run it on 8 or more cores to see that.**",
        if cores == 1 { "" } else { "s" }
    )
}

/// Starts a server, runs every measurement `config.rounds` times and returns the samples.
/// `progress` gets one line per step. Panics when the server or a statement fails.
fn run(config: &Config, mut progress: impl FnMut(&str)) -> Report {
    let max_connections = format!("max_connections = {}", config.max_connections());
    let cluster = Cluster::start(
        "cores-bench",
        &[
            "shared_preload_libraries = 'idgen'",
            "idgen.worker_id = 1",
            // The harness turns fsync off for tests; a benchmark keeps default durability.
            "fsync = on",
            "synchronous_commit = on",
            "full_page_writes = on",
            &max_connections,
            // A statement of millions of ids costs enough to be JIT-compiled: not measured here.
            "jit = off",
        ],
    );
    // Committed before the segments are created: the allocator works in transactions of its own.
    cluster.create_db_with_idgen("postgres");
    let mut db = cluster.connect("postgres");
    let unavailable = setup(&mut db, config);
    for (key, why) in &unavailable {
        progress(&format!("{}: n/a ({why})", generator(key).name));
    }
    let usable = |g: &Generator| !unavailable.iter().any(|(k, _)| *k == g.key);
    let machine = machine(&mut db, config);
    let mut samples = Vec::new();
    for round in 0..config.rounds {
        for &par in &config.pars {
            let part = Part::Draws { par };
            for g in GENERATORS.iter().filter(|g| part.has(g) && usable(g)) {
                progress(&format!(
                    "round {}: {} {}",
                    round + 1,
                    part.label(config.n),
                    g.name
                ));
                let value = draws(&cluster, g.draw.unwrap(), par, config.n);
                samples.push(Sample {
                    generator: g.key,
                    part,
                    round,
                    value,
                });
            }
        }
        db.batch_execute("ALTER ROLE postgres SET synchronous_commit = off")
            .unwrap();
        for &clients in &config.clients {
            let part = Part::Inserts { clients };
            for g in GENERATORS.iter().filter(|g| part.has(g) && usable(g)) {
                progress(&format!(
                    "round {}: {} {}",
                    round + 1,
                    part.label(config.n),
                    g.name
                ));
                // Each run from an empty table and a clean checkpoint: none pays for another's.
                db.batch_execute(&format!("TRUNCATE cores_t_{}; CHECKPOINT", g.key))
                    .unwrap();
                let insert = format!("INSERT INTO cores_t_{} (v) VALUES (1);", g.key);
                let value = pgbench(
                    &cluster,
                    &insert,
                    clients,
                    Protocol::Prepared,
                    config.pgbench,
                );
                samples.push(Sample {
                    generator: g.key,
                    part,
                    round,
                    value,
                });
            }
        }
        db.batch_execute("ALTER ROLE postgres RESET synchronous_commit")
            .unwrap();
    }
    Report {
        config: config.clone(),
        machine,
        unavailable,
        samples,
    }
}

fn generator(key: &str) -> &'static Generator {
    GENERATORS.iter().find(|g| g.key == key).unwrap()
}

/// Creates the segments, sequence, floor function and insert tables; returns the generators
/// this server cannot run, with why.
fn setup(db: &mut postgres::Client, config: &Config) -> Vec<(&'static str, String)> {
    let mut unavailable = Vec::new();
    db.batch_execute("SELECT segment_create('cores_c1'); CREATE SEQUENCE cores_seq1000 CACHE 1000")
        .unwrap();
    let most = config.pars.iter().copied().max().unwrap_or(0);
    for i in 1..=most {
        db.batch_execute(&format!("SELECT segment_create('cores_own_{i}')"))
            .unwrap();
    }
    // The cached segments: `cache => n` is newer than some builds this may run on.
    for (name, cache) in [("cores_c1000", 1000), ("cores_auto", 0)] {
        let sql = format!("SELECT segment_create('{name}', cache => {cache})");
        if let Err(e) = db.batch_execute(&sql) {
            let why = match e.code().map(|c| c.code()) {
                Some("42883") => "no cache argument".to_owned(),
                _ => format!("{sql}: {}", message(&e)),
            };
            let key = if cache == 0 { "seg_auto" } else { "seg_c1000" };
            unavailable.push((key, why));
        }
    }
    // The no-op pgrx function, not part of the extension's SQL: declared here when missing.
    let declared: bool = db.one("SELECT to_regprocedure('idgen_call_floor()') IS NOT NULL");
    if !declared {
        if let Err(e) = db.batch_execute(
            "CREATE FUNCTION idgen_call_floor() RETURNS bigint LANGUAGE c VOLATILE \
             AS '$libdir/idgen', 'idgen_call_floor_wrapper'",
        ) {
            let why = format!("no idgen_call_floor in this build: {}", message(&e));
            unavailable.push(("call_floor", why));
        }
    }
    for g in GENERATORS {
        let Some(column) = g.column else { continue };
        if unavailable.iter().any(|(k, _)| *k == g.key) {
            continue;
        }
        db.batch_execute(&format!(
            "CREATE TABLE cores_t_{} (id {column}, v int NOT NULL)",
            g.key
        ))
        .unwrap();
    }
    unavailable
}

/// A failed statement's SQLSTATE and message.
fn message(e: &postgres::Error) -> String {
    e.as_db_error().map_or_else(
        || e.to_string(),
        |d| format!("{} {}", d.code().code(), d.message()),
    )
}

/// `par` sessions, each drawing `n` ids in one statement, released together: ids per second
/// over all of them (the wall time from the release to the last result).
fn draws(cluster: &Cluster, draw: Draw, par: usize, n: u64) -> f64 {
    let barrier = Arc::new(Barrier::new(par + 1));
    let sessions: Vec<_> = (1..=par)
        .map(|i| {
            let expr = match draw {
                Draw::Expr(e) => e.to_owned(),
                Draw::OwnSegment => format!("segment_nextval('cores_own_{i}')"),
            };
            let sql = format!("SELECT count({expr}) FROM generate_series(1, {n})");
            let mut client = cluster.connect("postgres");
            let statement = client
                .prepare(&sql)
                .unwrap_or_else(|e| panic!("{sql}: {e}"));
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                barrier.wait();
                let drawn: i64 = client
                    .query_one(&statement, &[])
                    .unwrap_or_else(|e| panic!("{sql}: {e}"))
                    .get(0);
                let done = Instant::now();
                assert_eq!(drawn as u64, n, "{sql}");
                done
            })
        })
        .collect();
    barrier.wait();
    let start = Instant::now();
    let last = sessions
        .into_iter()
        .map(|s| s.join().expect("a drawing session failed"))
        .max()
        .unwrap();
    (n * par as u64) as f64 / last.duration_since(start).as_secs_f64()
}

/// Cores, memory, CPU, PostgreSQL and idgen versions, and the settings that matter here.
fn machine(db: &mut postgres::Client, config: &Config) -> Vec<(String, String)> {
    let mut rows = host();
    rows.extend([
        ("PostgreSQL".to_owned(), db.one("SELECT version()")),
        (
            "idgen".to_owned(),
            db.one("SELECT extversion FROM pg_extension WHERE extname = 'idgen'"),
        ),
    ]);
    let settings = db
        .query(
            "SELECT name, setting || coalesce(' ' || unit, '') FROM pg_settings WHERE name IN \
             ('fsync', 'synchronous_commit', 'full_page_writes', 'shared_buffers', \
              'max_connections', 'max_wal_size', 'jit', 'idgen.segment_refill_interval') \
             ORDER BY name",
            &[],
        )
        .unwrap();
    for r in settings {
        rows.push((r.get(0), r.get(1)));
    }
    rows.push((
        "synchronous_commit of the insert sessions".into(),
        "off (ALTER ROLE, part B only)".into(),
    ));
    let length = match config.pgbench {
        PgbenchLength::Seconds(s) => format!("-T {s}"),
        PgbenchLength::Transactions(t) => format!("-t {t}"),
    };
    rows.push((
        "pgbench".into(),
        format!("-M prepared {length}, -j = clients"),
    ));
    rows
}

impl Report {
    fn value(&self, generator: &str, part: Part, round: usize) -> Option<f64> {
        self.samples
            .iter()
            .find(|s| s.generator == generator && s.part == part && s.round == round)
            .map(|s| s.value)
    }

    /// Median over rounds of `generator`'s value ÷ `reference`'s in the same round.
    fn versus(&self, generator: &str, part: Part, reference: &str) -> Option<f64> {
        let mut per_round: Vec<f64> = (0..self.config.rounds)
            .filter_map(|r| Some(self.value(generator, part, r)? / self.value(reference, part, r)?))
            .collect();
        (!per_round.is_empty()).then(|| median(&mut per_round))
    }

    fn parts(&self) -> Vec<Part> {
        let draws = self.config.pars.iter().map(|&par| Part::Draws { par });
        let inserts = self
            .config
            .clients
            .iter()
            .map(|&clients| Part::Inserts { clients });
        draws.chain(inserts).collect()
    }

    fn rows(&self) -> Vec<Row> {
        let mut rows = Vec::new();
        for part in self.parts() {
            for g in GENERATORS.iter().filter(|g| part.has(g)) {
                let cell = match self.unavailable.iter().find(|(k, _)| *k == g.key) {
                    Some((_, why)) => Err(why.clone()),
                    None => {
                        let mut values: Vec<f64> = self
                            .samples
                            .iter()
                            .filter(|s| s.generator == g.key && s.part == part)
                            .map(|s| s.value)
                            .collect();
                        if values.is_empty() {
                            Err("not measured".to_owned())
                        } else {
                            let min = values.iter().copied().fold(f64::MAX, f64::min);
                            let max = values.iter().copied().fold(f64::MIN, f64::max);
                            Ok((median(&mut values), min, max, values.len()))
                        }
                    }
                };
                rows.push(Row {
                    part,
                    generator: g,
                    vs_nextval: self.versus(g.key, part, NEXTVAL_CACHE_1000),
                    vs_default: g
                        .segment
                        .then(|| self.versus(g.key, part, SEGMENT_DEFAULT))
                        .flatten(),
                    cell,
                });
            }
        }
        rows
    }

    /// The cells a generator this server has lacks a round of.
    fn missing(&self) -> Vec<String> {
        self.rows()
            .iter()
            .filter(|r| !self.unavailable.iter().any(|(k, _)| *k == r.generator.key))
            .filter(|r| !matches!(r.cell, Ok((_, _, _, n)) if n == self.config.rounds))
            .map(|r| format!("{} / {}", r.generator.name, r.part.label(self.config.n)))
            .collect()
    }

    fn markdown(&self, cores: usize) -> String {
        let mut md = String::new();
        let c = &self.config;
        let length = match c.pgbench {
            PgbenchLength::Seconds(s) => format!("-T {s}"),
            PgbenchLength::Transactions(t) => format!("-t {t}"),
        };
        writeln!(
            md,
            "idgen on many cores: {} rounds, interleaved; medians (min–max). Draws: PAR sessions \
             at once, each `SELECT count(<gen>) FROM generate_series(1, {})`, aggregate ids/s = \
             N × PAR ÷ wall. Inserts: `pgbench -M prepared {length}`, one single-row INSERT per \
             transaction keyed by the column default, synchronous_commit off.\n",
            c.rounds,
            count(c.n)
        )
        .unwrap();
        if cores < FEW_CORES {
            writeln!(md, "{}\n", few_cores(cores)).unwrap();
        }
        writeln!(md, "| machine | |\n|---|---|").unwrap();
        for (k, v) in &self.machine {
            writeln!(md, "| {k} | {v} |").unwrap();
        }
        writeln!(
            md,
            "\n| measurement | generator | median | min–max | ÷ nextval CACHE 1000 | ÷ segment cache 1 |\n|---|---|--:|--:|--:|--:|"
        )
        .unwrap();
        let ratio = |x: Option<f64>| x.map_or(String::new(), |x| format!("{x:.3}"));
        for r in self.rows() {
            let (median, range) = match &r.cell {
                Ok((median, min, max, _)) => (
                    show(r.part, *median, true),
                    format!(
                        "{}–{}",
                        show(r.part, *min, false),
                        show(r.part, *max, false)
                    ),
                ),
                Err(why) => (format!("n/a ({why})"), String::new()),
            };
            writeln!(
                md,
                "| {} | {} | {median} | {range} | {} | {} |",
                r.part.label(c.n),
                r.generator.name,
                ratio(r.vs_nextval),
                ratio(r.vs_default)
            )
            .unwrap();
        }
        writeln!(
            md,
            "\nRatios are taken within a round (the same run), then their median is shown: \
             above 1, more ids or transactions per second than the reference. A segment per \
             session: session i draws `segment_nextval('cores_own_<i>')`. The no-op pgrx \
             function is the floor of any function call."
        )
        .unwrap();
        md
    }

    fn csv(&self) -> String {
        let mut csv = String::from(
            "part,sessions_or_clients,n,generator,name,unit,rounds,median,min,max,vs_nextval_cache_1000,vs_segment_cache_1,note\n",
        );
        let opt = |x: Option<f64>| x.map_or(String::new(), |x| format!("{x:.4}"));
        for r in self.rows() {
            let n = match r.part {
                Part::Draws { .. } => self.config.n.to_string(),
                Part::Inserts { .. } => String::new(),
            };
            let (values, note) = match &r.cell {
                Ok((median, min, max, rounds)) => {
                    (format!("{rounds},{median:.1},{min:.1},{max:.1}"), "")
                }
                Err(why) => (",,,".to_owned(), why.as_str()),
            };
            writeln!(
                csv,
                "{},{},{n},{},\"{}\",{},{values},{},{},\"{}\"",
                r.part.kind(),
                r.part.width(),
                r.generator.key,
                r.generator.name,
                r.part.unit(),
                opt(r.vs_nextval),
                opt(r.vs_default),
                note.replace('"', "\"\"")
            )
            .unwrap();
        }
        csv
    }
}

/// A value in the report: millions of ids per second, or whole tps with separators.
fn show(part: Part, v: f64, unit: bool) -> String {
    match part {
        Part::Draws { .. } => {
            let m = v / 1e6;
            let s = if m >= 10.0 {
                format!("{m:.1}")
            } else {
                format!("{m:.2}")
            };
            if unit {
                format!("{s} M ids/s")
            } else {
                s
            }
        }
        Part::Inserts { .. } => {
            let s = count(v.round() as u64);
            if unit {
                format!("{s} tps")
            } else {
                s
            }
        }
    }
}
