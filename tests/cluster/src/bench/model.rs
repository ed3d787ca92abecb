//! What a run produces: measurements, samples, the report's rows and targets.

use super::Config;

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
    /// pgbench at `clients` clients in `protocol` (`-M`): transactions per second.
    PerStatement { clients: u32, protocol: Protocol },
    /// Snowflake only: ms the last id of the largest bulk statement is ahead of the clock.
    Drift,
}

/// pgbench's query protocol (`-M`): `simple` parses and plans every statement, as most ORMs'
/// unprepared queries do; `prepared` plans once per session, as a driver's prepared statements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Protocol {
    /// `-M simple`.
    Simple,
    /// `-M prepared`.
    Prepared,
}

impl Protocol {
    /// pgbench's name for it.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Simple => "simple",
            Protocol::Prepared => "prepared",
        }
    }
}

impl Measurement {
    /// The label in the report.
    pub fn label(&self) -> String {
        match self {
            Measurement::Bulk { n } => format!("bulk, {} ids", count(*n)),
            Measurement::InsertSeconds => "insert, time".into(),
            Measurement::InsertRate => "insert, rate".into(),
            Measurement::IndexSize => "insert, primary key size".into(),
            Measurement::PerStatement { clients, protocol } => format!(
                "per statement, {clients} client{}, -M {}",
                if *clients == 1 { "" } else { "s" },
                protocol.name()
            ),
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
    /// The server's `server_version_num`: which generators it has ([`Generator::since`]).
    pub server_version_num: i32,
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
    /// Per statement: median over rounds of tps ÷ the no-op pgrx function's (the real
    /// per-statement floor of any function call: parse, plan, fmgr).
    pub vs_call: Option<f64>,
}

/// A target of the benchmark, checked on a run.
#[derive(Debug, Clone)]
pub struct Target {
    /// What it demands.
    pub what: String,
    /// What the run measured.
    pub measured: String,
    /// Whether the measurement meets it (`None`: not measured).
    pub met: Option<bool>,
}

/// `n` with thousands separators.
pub fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}
