//! Helpers of the monitoring recipe (`tests/monitoring.rs`): Debian's postgres_exporter and
//! Prometheus started by the test, each on a free port of 127.0.0.1 with its own files in a
//! scratch directory (never the packaged services), and Prometheus's HTTP API read back.
//!
//! The exporter reads the repository's `monitoring/postgres_exporter/queries.yaml` as it is
//! (`--extend.query-path`, `--auto-discover-databases`); Prometheus scrapes it and evaluates
//! every second a copy of `monitoring/prometheus/idgen-alerts.yml` whose `for:` durations are
//! 0s and whose range windows are shorter ([`quick_rules`]): the conditions are the file's,
//! the waits a test's.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::{free_port, wait_for};

/// The exporter's queries, relative to the repository root.
pub const QUERIES: &str = "monitoring/postgres_exporter/queries.yaml";

/// The alerting rules, relative to the repository root.
pub const ALERTS: &str = "monitoring/prometheus/idgen-alerts.yml";

/// Debian's postgres_exporter program (package `prometheus-postgres-exporter`).
pub const EXPORTER: &str = "prometheus-postgres-exporter";

/// Debian's Prometheus (package `prometheus`).
pub const PROMETHEUS: &str = "prometheus";

/// Prometheus's configuration, a template: `{{rules}}` the rule file, `{{exporter}}` the
/// exporter's address.
const PROMETHEUS_YML: &str = include_str!("../../recipes/monitoring/prometheus.yml");

/// Sanity bound for a process to start or an HTTP request to answer (not a performance claim).
const START_BOUND: Duration = Duration::from_secs(60);

/// `path` (relative to the repository root) read, or a panic saying which change brings it.
pub fn repo_file(path: &str) -> String {
    let full = repo_path(path);
    fs::read_to_string(&full).unwrap_or_else(|e| {
        panic!(
            "read {}: {e} (issue 41's monitoring files must be in the tree)",
            full.display()
        )
    })
}

/// `path` relative to the repository root, as an absolute path.
pub fn repo_path(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

/// One query of `queries.yaml`: its key and its columns with their `usage`.
#[derive(Debug, Clone)]
pub struct ExporterQuery {
    pub key: String,
    pub master: bool,
    /// (column, usage) in file order; usage upper-cased without quotes (`LABEL`, `GAUGE`, ...).
    pub columns: Vec<(String, String)>,
}

impl ExporterQuery {
    /// The Prometheus metric names this query makes: `<key>_<column>` of every column that is
    /// neither a label nor discarded.
    pub fn metric_names(&self) -> Vec<String> {
        self.columns
            .iter()
            .filter(|(_, usage)| usage != "LABEL" && usage != "DISCARD")
            .map(|(col, _)| format!("{}_{col}", self.key))
            .collect()
    }

    /// The columns used as labels.
    pub fn labels(&self) -> Vec<String> {
        self.columns
            .iter()
            .filter(|(_, usage)| usage == "LABEL")
            .map(|(col, _)| col.clone())
            .collect()
    }
}

/// The queries of a postgres_exporter `queries.yaml`, in the block style its documentation
/// uses: top-level keys, each with `query:` (plain, quoted or a `|`/`>` block), optional
/// `master:` and `metrics:`, a list of `- <column>:` maps with a `usage:`. Panics at anything
/// else, so that a file this reader would misread fails loudly instead of testing less.
pub fn parse_queries(yaml: &str) -> Vec<ExporterQuery> {
    fn indent(line: &str) -> usize {
        line.len() - line.trim_start().len()
    }
    fn unquote(s: &str) -> String {
        let s = s.split(" #").next().unwrap().trim();
        s.trim_matches(|c| c == '"' || c == '\'').to_owned()
    }
    fn is_name(s: &str) -> bool {
        !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    }
    let mut out: Vec<ExporterQuery> = Vec::new();
    // Lines indented more than this belong to a block scalar (the SQL of `query: |`).
    let mut block_above: Option<usize> = None;
    let mut in_metrics: Option<usize> = None;
    for (n, raw) in yaml.lines().enumerate() {
        let line = raw.trim_end();
        let trimmed = line.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') || line == "---" {
            continue;
        }
        let ind = indent(line);
        if let Some(b) = block_above {
            if ind > b {
                continue;
            }
            block_above = None;
        }
        let at = || format!("{QUERIES} line {}: {raw:?}", n + 1);
        if ind == 0 {
            let key = trimmed
                .strip_suffix(':')
                .filter(|k| is_name(k))
                .unwrap_or_else(|| panic!("a top-level key expected at {}", at()));
            out.push(ExporterQuery {
                key: key.to_owned(),
                master: false,
                columns: Vec::new(),
            });
            in_metrics = None;
            continue;
        }
        let q = out
            .last_mut()
            .unwrap_or_else(|| panic!("indented line before any key at {}", at()));
        if let Some(m) = in_metrics {
            if ind > m || (ind == m && trimmed.starts_with("- ")) {
                if let Some(item) = trimmed.strip_prefix("- ") {
                    let col = item
                        .trim()
                        .strip_suffix(':')
                        .filter(|c| is_name(c))
                        .unwrap_or_else(|| panic!("`- <column>:` expected at {}", at()));
                    q.columns.push((col.to_owned(), String::new()));
                } else if let Some(usage) = trimmed.strip_prefix("usage:") {
                    let last = q
                        .columns
                        .last_mut()
                        .unwrap_or_else(|| panic!("usage before a column at {}", at()));
                    last.1 = unquote(usage).to_ascii_uppercase();
                } else if let Some((_, rest)) = trimmed.split_once(':') {
                    // description, and any other key of a column: skip its value, block or not.
                    let rest = rest.trim();
                    if rest.starts_with('|') || rest.starts_with('>') {
                        block_above = Some(ind);
                    }
                } else {
                    panic!("unexpected line in metrics at {}", at());
                }
                continue;
            }
            in_metrics = None;
        }
        let (k, rest) = trimmed
            .split_once(':')
            .unwrap_or_else(|| panic!("`key: value` expected at {}", at()));
        let rest = rest.trim();
        match k {
            "metrics" => in_metrics = Some(ind),
            "master" => q.master = unquote(rest) == "true",
            _ => {
                if rest.starts_with('|') || rest.starts_with('>') {
                    block_above = Some(ind);
                }
            }
        }
    }
    for q in &out {
        assert!(
            !q.columns.is_empty(),
            "{QUERIES}: query {} has no metrics",
            q.key
        );
        for (col, usage) in &q.columns {
            assert!(
                !usage.is_empty(),
                "{QUERIES}: column {col} of {} has no usage",
                q.key
            );
        }
    }
    out
}

/// The `- alert: <name>` names of a Prometheus rule file, in order, each once (a warning and a
/// critical rule may share a name).
pub fn alert_names(rules: &str) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for l in rules.lines() {
        let t = l.trim_start().strip_prefix("- ").unwrap_or(l.trim_start());
        if let Some(n) = t.strip_prefix("alert:") {
            let n = n.trim().trim_matches(|c| c == '"' || c == '\'').to_owned();
            if !names.contains(&n) {
                names.push(n);
            }
        }
    }
    names
}

/// How much shorter the range windows of the rule copy are than the file's ([`quick_rules`]).
pub const WINDOW_DIVISOR: u64 = 30;

/// The shortest range window of the rule copy: ten scrapes.
pub const MIN_WINDOW: Duration = Duration::from_secs(10);

/// A copy of the rule file `rules` for a test that cannot wait for production's durations:
/// every `for: <duration>` becomes `for: 0s` (an alert fires at the first evaluation that finds
/// its condition), and every range window `[<duration>]` of an expression is divided by
/// [`WINDOW_DIVISOR`], at least [`MIN_WINDOW`] (`increase(x[15m]) > 0` becomes
/// `increase(x[30s]) > 0`, so that an alert on an event clears within a test). Conditions,
/// thresholds and labels are unchanged. Returns the text, how many `for:` and how many windows
/// were rewritten.
pub fn quick_rules(rules: &str) -> (String, usize, usize) {
    let (mut fors, mut windows) = (0, 0);
    let mut out = String::with_capacity(rules.len());
    for line in rules.lines() {
        let t = line.trim_start();
        if let Some(rest) = t.strip_prefix("for:") {
            let ind = &line[..line.len() - t.len()];
            let comment = rest.find(" #").map(|i| &rest[i..]).unwrap_or("");
            out.push_str(&format!("{ind}for: 0s{comment}"));
            fors += 1;
        } else if t.starts_with('#') {
            out.push_str(line);
        } else {
            let mut rest = line;
            while let Some(open) = rest.find('[') {
                out.push_str(&rest[..open]);
                let after = &rest[open + 1..];
                match after
                    .find(']')
                    .and_then(|close| parse_duration(&after[..close]).map(|d| (close, d)))
                {
                    Some((close, d)) => {
                        let short = (d / WINDOW_DIVISOR as u32).max(MIN_WINDOW);
                        out.push_str(&format!("[{}s]", short.as_secs()));
                        windows += 1;
                        rest = &after[close + 1..];
                    }
                    None => {
                        out.push('[');
                        rest = after;
                    }
                }
            }
            out.push_str(rest);
        }
        out.push('\n');
    }
    (out, fors, windows)
}

/// A Prometheus duration of one unit (`30s`, `15m`, `1h`, `7d`, `1w`), or None.
pub fn parse_duration(s: &str) -> Option<Duration> {
    let digits = s.find(|c: char| !c.is_ascii_digit())?;
    let n: u64 = s[..digits].parse().ok()?;
    let secs = match &s[digits..] {
        "s" => n,
        "m" => n * 60,
        "h" => n * 3600,
        "d" => n * 86400,
        "w" => n * 7 * 86400,
        _ => return None,
    };
    Some(Duration::from_secs(secs))
}

/// A scratch directory under the system temp dir, removed on drop unless
/// `IDGEN_KEEP_CLUSTERS` is set.
pub struct Scratch(PathBuf);

impl Scratch {
    pub fn new(tag: &str) -> Scratch {
        Scratch(crate::unique_dir(&format!("monitoring-{tag}")))
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if std::env::var_os("IDGEN_KEEP_CLUSTERS").is_none() {
            let _ = fs::remove_dir_all(&self.0);
        }
    }
}

/// A process killed (SIGKILL) and reaped when dropped.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A server process started by [`serve`]: its port and log.
struct Served {
    child: Killed,
    port: u16,
    log: PathBuf,
}

impl Served {
    fn log(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// Starts `program` with `args(port)` on a free port of 127.0.0.1, stdout and stderr to
/// `log`, and waits until `ready_path` answers 200; on "address already in use" tries another
/// port. Panics with the log when it exits or does not get ready.
fn serve(
    program: &str,
    log: PathBuf,
    envs: &[(&str, &str)],
    args: &dyn Fn(u16) -> Vec<String>,
    ready_path: &str,
) -> Served {
    let agent = agent();
    for _ in 0..5 {
        let port = free_port();
        let out = fs::File::create(&log).unwrap();
        let child = Command::new(program)
            .args(args(port))
            .envs(envs.iter().copied())
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap_or_else(|e| panic!("run {program}: {e}"));
        let mut served = Served {
            child: Killed(child),
            port,
            log: log.clone(),
        };
        let url = format!("http://127.0.0.1:{port}{ready_path}");
        let up = try_wait(START_BOUND, || {
            if served.child.0.try_wait().unwrap().is_some() {
                return Some(false);
            }
            if TcpStream::connect(("127.0.0.1", port)).is_err() {
                return None;
            }
            match agent.get(&url).call() {
                Ok(r) if r.status() == 200 => Some(true),
                _ => None,
            }
        })
        .unwrap_or_else(|| {
            panic!(
                "{program} did not answer {url} within {START_BOUND:?}:\n{}",
                served.log()
            )
        });
        if up {
            return served;
        }
        if !served.log().contains("address already in use") {
            panic!("{program} exited:\n{}", served.log());
        }
        served.child.0.kill().ok();
    }
    panic!("{program} found no free port");
}

/// An HTTP client for loopback requests: statuses other than 2xx are answers, not errors (the
/// body says why), and nothing waits more than a few seconds.
fn agent() -> ureq::Agent {
    ureq::Agent::new_with_config(
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(10)))
            .build(),
    )
}

/// One sample of an instant vector.
#[derive(Debug, Clone)]
pub struct Sample {
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

impl Sample {
    /// Label `name`, or "" without it.
    pub fn label(&self, name: &str) -> &str {
        self.labels.get(name).map(String::as_str).unwrap_or("")
    }
}

/// One alert of `/api/v1/alerts` (pending or firing).
#[derive(Debug, Clone)]
pub struct Alert {
    pub name: String,
    pub state: String,
    pub labels: BTreeMap<String, String>,
}

/// One rule of `/api/v1/rules`.
#[derive(Debug, Clone)]
pub struct Rule {
    pub name: String,
    pub kind: String,
    pub health: String,
    pub last_error: String,
}

fn labels_of(v: &Value) -> BTreeMap<String, String> {
    v.as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
                .collect()
        })
        .unwrap_or_default()
}

/// postgres_exporter scraping `dsns`, and Prometheus scraping it and evaluating the quick copy
/// of the alerting rules; both killed and their files removed when dropped.
pub struct Monitoring {
    prometheus: Served,
    exporter: Served,
    agent: ureq::Agent,
    /// The alert names of the rule file.
    pub alert_names: Vec<String>,
    /// The queries of the exporter's file.
    pub queries: Vec<ExporterQuery>,
    // Last, so that the processes are gone before their files.
    dir: Scratch,
}

impl Monitoring {
    /// Starts the exporter and Prometheus, as `monitoring/README.md` sets them up: `dsns` are
    /// libpq URIs, one per server, to a database with the extension; the exporter discovers
    /// the server's databases and reads those named in `databases` (`--include-databases`).
    /// Waits until Prometheus has scraped the exporter and evaluated every rule without error.
    pub fn start(tag: &str, dsns: &[String], databases: &[&str]) -> Monitoring {
        let dir = Scratch::new(tag);
        let queries_path = repo_path(QUERIES);
        let queries = parse_queries(&repo_file(QUERIES));
        let rules_text = repo_file(ALERTS);
        let alert_names = alert_names(&rules_text);
        assert!(!alert_names.is_empty(), "{ALERTS} has no alert");
        let (quick, fors, windows) = quick_rules(&rules_text);
        let rules_copy = dir.path().join("idgen-alerts.yml");
        fs::write(&rules_copy, quick).unwrap();
        println!(
            "{ALERTS}: {} alerts ({}); in the copy {fors} `for:` at 0s, {windows} \
             range windows divided by {WINDOW_DIVISOR}",
            alert_names.len(),
            alert_names.join(", ")
        );

        for dsn in dsns {
            assert!(!dsn.contains(','), "a DSN with a comma: {dsn}");
        }
        let dsn_list = dsns.join(",");
        let queries_arg = format!("--extend.query-path={}", queries_path.display());
        let include_arg = format!("--include-databases={}", databases.join(","));
        let exporter = serve(
            EXPORTER,
            dir.path().join("exporter.log"),
            &[("DATA_SOURCE_NAME", dsn_list.as_str())],
            &|port| {
                vec![
                    format!("--web.listen-address=127.0.0.1:{port}"),
                    queries_arg.clone(),
                    // One DSN per server: the server-wide queries (`master: true`) run in its
                    // database, the per-database ones in every database included.
                    "--auto-discover-databases".into(),
                    include_arg.clone(),
                    // Only idgen's queries (and the exporter's own pg_up and scrape metrics):
                    // a quick scrape every second.
                    "--disable-default-metrics".into(),
                    "--disable-settings-metrics".into(),
                    "--no-collector.database".into(),
                    "--no-collector.bgwriter".into(),
                ]
            },
            "/metrics",
        );

        let config = dir.path().join("prometheus.yml");
        let yml = PROMETHEUS_YML
            .replace("{{rules}}", &rules_copy.display().to_string())
            .replace("{{exporter}}", &format!("127.0.0.1:{}", exporter.port));
        assert!(!yml.contains("{{"), "a placeholder left in:\n{yml}");
        fs::write(&config, yml).unwrap();
        let tsdb = dir.path().join("tsdb");
        let args = |port: u16| {
            vec![
                format!("--config.file={}", config.display()),
                format!("--storage.tsdb.path={}", tsdb.display()),
                format!("--web.listen-address=127.0.0.1:{port}"),
                "--storage.tsdb.retention.time=1h".into(),
            ]
        };
        let prometheus = serve(
            PROMETHEUS,
            dir.path().join("prometheus.log"),
            &[],
            &args,
            "/-/ready",
        );
        let m = Monitoring {
            prometheus,
            exporter,
            agent: agent(),
            alert_names,
            queries,
            dir,
        };
        println!(
            "postgres_exporter on 127.0.0.1:{} ({} DSN{}), Prometheus on 127.0.0.1:{}, files in {}",
            m.exporter.port,
            dsns.len(),
            if dsns.len() == 1 { "" } else { "s" },
            m.prometheus.port,
            m.dir.path().display()
        );
        m.wait_for_query(
            "Prometheus to scrape the exporter",
            "up{job=\"idgen\"} == 1",
            |s| !s.is_empty(),
        );
        m.wait_rules_evaluated();
        m
    }

    /// GET `path` (with `query` parameters) from Prometheus; the JSON `data`, or a panic with
    /// Prometheus's error.
    fn api(&self, path: &str, params: &[(&str, &str)]) -> Value {
        let url = format!("http://127.0.0.1:{}{path}", self.prometheus.port);
        let mut req = self.agent.get(&url);
        for (k, v) in params {
            req = req.query(*k, *v);
        }
        let mut resp = req
            .call()
            .unwrap_or_else(|e| panic!("GET {url}: {e}\n{}", self.prometheus.log()));
        let status = resp.status();
        let body = resp.body_mut().read_to_string().unwrap();
        let json: Value = serde_json::from_str(&body)
            .unwrap_or_else(|e| panic!("GET {url} {params:?}: {status}, not JSON ({e}): {body}"));
        if json["status"] != "success" {
            panic!("GET {url} {params:?}: {status}: {body}");
        }
        json["data"].clone()
    }

    /// The instant vector `expr` evaluates to now.
    pub fn query(&self, expr: &str) -> Vec<Sample> {
        let data = self.api("/api/v1/query", &[("query", expr)]);
        assert_eq!(
            data["resultType"], "vector",
            "{expr}: not an instant vector"
        );
        data["result"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| Sample {
                labels: labels_of(&r["metric"]),
                value: r["value"][1]
                    .as_str()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(f64::NAN),
            })
            .collect()
    }

    /// The pending and firing alerts.
    pub fn alerts(&self) -> Vec<Alert> {
        self.api("/api/v1/alerts", &[])["alerts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| {
                let labels = labels_of(&a["labels"]);
                Alert {
                    name: labels.get("alertname").cloned().unwrap_or_default(),
                    state: a["state"].as_str().unwrap_or_default().to_owned(),
                    labels,
                }
            })
            .collect()
    }

    /// Every rule Prometheus loaded.
    pub fn rules(&self) -> Vec<Rule> {
        let data = self.api("/api/v1/rules", &[]);
        let mut out = Vec::new();
        for g in data["groups"].as_array().unwrap() {
            for r in g["rules"].as_array().unwrap() {
                out.push(Rule {
                    name: r["name"].as_str().unwrap_or_default().to_owned(),
                    kind: r["type"].as_str().unwrap_or_default().to_owned(),
                    health: r["health"].as_str().unwrap_or_default().to_owned(),
                    last_error: r["lastError"].as_str().unwrap_or_default().to_owned(),
                });
            }
        }
        out
    }

    /// Waits until every rule has been evaluated, and panics if one failed (a bad expression,
    /// a many-to-many match, ...). Every alert of the file must be loaded.
    pub fn wait_rules_evaluated(&self) {
        let rules = wait_for("every rule evaluated", START_BOUND, || {
            let rules = self.rules();
            rules.iter().all(|r| r.health != "unknown").then_some(rules)
        });
        let bad: Vec<_> = rules.iter().filter(|r| r.health != "ok").collect();
        assert!(bad.is_empty(), "rules failing: {bad:#?}");
        for name in &self.alert_names {
            assert!(
                rules
                    .iter()
                    .any(|r| r.kind == "alerting" && &r.name == name),
                "alert {name} of {ALERTS} not loaded: {rules:#?}"
            );
        }
    }

    /// Polls `expr` until `ok` accepts its samples; returns them. Panics after a bound with
    /// the last samples and what the exporter serves.
    pub fn wait_for_query(
        &self,
        what: &str,
        expr: &str,
        ok: impl Fn(&[Sample]) -> bool,
    ) -> Vec<Sample> {
        let mut last = Vec::new();
        let found = try_wait(START_BOUND, || {
            last = self.query(expr);
            ok(&last).then(|| last.clone())
        });
        found.unwrap_or_else(|| {
            panic!(
                "timed out waiting for {what}: `{expr}` is {last:#?}\n{}",
                self.diagnostics()
            )
        })
    }

    /// Waits until every metric of `names` has a series; panics after a bound with those that
    /// have none and the exporter's query errors (a column the views do not have, say).
    pub fn wait_for_metrics(&self, names: &BTreeSet<String>) {
        let mut missing = names.clone();
        let found = try_wait(START_BOUND, || {
            let have: BTreeSet<String> = self
                .query("count by (__name__) ({__name__=~\".+\"})")
                .iter()
                .map(|s| s.label("__name__").to_owned())
                .collect();
            missing = names.difference(&have).cloned().collect();
            missing.is_empty().then_some(())
        });
        if found.is_none() {
            let log = self.exporter.log();
            let errors: BTreeSet<&str> = log
                .lines()
                .filter_map(|l| l.split_once("err=").map(|(_, e)| e))
                .collect();
            panic!(
                "no series of {missing:?} after {START_BOUND:?}; the exporter's errors: \
                 {errors:#?}\n{}",
                self.diagnostics()
            );
        }
    }

    /// The alerts named `name` whose labels include `labels`.
    pub fn alerts_named(&self, name: &str, labels: &[(&str, &str)]) -> Vec<Alert> {
        self.alerts()
            .into_iter()
            .filter(|a| {
                a.name == name
                    && labels
                        .iter()
                        .all(|(k, v)| a.labels.get(*k).map(String::as_str) == Some(*v))
            })
            .collect()
    }

    /// Waits (at most `within`) until alert `name` with `labels` fires; returns it.
    pub fn wait_firing(&self, name: &str, labels: &[(&str, &str)], within: Duration) -> Alert {
        self.assert_known(name);
        try_wait(within, || {
            self.alerts_named(name, labels)
                .into_iter()
                .find(|a| a.state == "firing")
        })
        .unwrap_or_else(|| {
            panic!(
                "alert {name} {labels:?} not firing within {within:?}; alerts: {:#?}\n{}",
                self.alerts(),
                self.diagnostics()
            )
        })
    }

    /// Waits (at most `within`) until alert `name` with `labels` has fired at some evaluation
    /// since `since` (Prometheus's `ALERTS` series): for a condition that may already have
    /// passed when the test looks (a lease alert that gives way to the fenced one).
    pub fn wait_fired(
        &self,
        name: &str,
        labels: &[(&str, &str)],
        since: std::time::Instant,
        within: Duration,
    ) -> Sample {
        self.assert_known(name);
        let mut selector = format!("alertname=\"{name}\",alertstate=\"firing\"");
        for (k, v) in labels {
            selector.push_str(&format!(",{k}=\"{v}\""));
        }
        try_wait(within, || {
            let secs = since.elapsed().as_secs() + 1;
            self.query(&format!("max_over_time(ALERTS{{{selector}}}[{secs}s])"))
                .into_iter()
                .next()
        })
        .unwrap_or_else(|| {
            panic!(
                "alert {name} {labels:?} did not fire within {within:?}; alerts: {:#?}\n{}",
                self.alerts(),
                self.diagnostics()
            )
        })
    }

    /// Waits (at most `within`) until no alert `name` with `labels` is pending or firing.
    pub fn wait_cleared(&self, name: &str, labels: &[(&str, &str)], within: Duration) {
        self.assert_known(name);
        try_wait(within, || {
            self.alerts_named(name, labels).is_empty().then_some(())
        })
        .unwrap_or_else(|| {
            panic!(
                "alert {name} {labels:?} still active after {within:?}: {:#?}\n{}",
                self.alerts_named(name, labels),
                self.diagnostics()
            )
        })
    }

    fn assert_known(&self, name: &str) {
        assert!(
            self.alert_names.iter().any(|n| n == name),
            "no alert {name} in {ALERTS} (it has {:?})",
            self.alert_names
        );
    }

    /// What the exporter serves now (its text format).
    pub fn exporter_metrics(&self) -> String {
        let url = format!("http://127.0.0.1:{}/metrics", self.exporter.port);
        match self.agent.get(&url).call() {
            Ok(mut r) => r.body_mut().read_to_string().unwrap_or_default(),
            Err(e) => format!("GET {url}: {e}"),
        }
    }

    /// The exporter's idgen and pg_up lines, the tails of both logs, and the scrape target's
    /// state: what a failed wait prints.
    pub fn diagnostics(&self) -> String {
        let text = self.exporter_metrics();
        let served: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("idgen_") || l.starts_with("pg_up") || l.contains("error"))
            .collect();
        let tail = |s: String| -> String {
            let lines: Vec<&str> = s.lines().collect();
            lines[lines.len().saturating_sub(30)..].join("\n")
        };
        let targets = self.api("/api/v1/targets", &[]);
        format!(
            "--- exporter serves:\n{}\n--- targets: {}\n--- exporter log:\n{}\n--- Prometheus log:\n{}",
            served.join("\n"),
            targets["activeTargets"],
            tail(self.exporter.log()),
            tail(self.prometheus.log())
        )
    }

    /// Prometheus's port on 127.0.0.1.
    pub fn prometheus_port(&self) -> u16 {
        self.prometheus.port
    }
}

/// Polls `check` every 250 ms until it returns `Some`, for at most `within`.
fn try_wait<T>(within: Duration, mut check: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = std::time::Instant::now() + within;
    loop {
        if let Some(v) = check() {
            return Some(v);
        }
        if std::time::Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// A libpq URI for database `db` of `cluster`, as postgres_exporter takes it.
pub fn dsn(cluster: &crate::Cluster, db: &str) -> String {
    // The exporter's role as monitoring/README.md sets it up: in pg_monitor, with pg_catalog
    // alone on its search_path (the queries name idgen's views with their schema).
    cluster
        .connect("postgres")
        .batch_execute(
            "DO $$ BEGIN
               IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'prometheus') THEN
                 CREATE ROLE prometheus LOGIN;
               END IF;
             END $$;
             GRANT pg_monitor TO prometheus;
             ALTER ROLE prometheus SET search_path = pg_catalog;",
        )
        .expect("create the exporter's role");
    format!(
        "postgresql://prometheus@127.0.0.1:{}/{db}?sslmode=disable",
        cluster.port()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_block_style() {
        let yaml = r#"
# comment
pg_a:
  query: |
    SELECT 1 AS x,
      'y: z' AS l
  master: true
  metrics:
    - l:
        usage: "LABEL"
        description: "a label"
    - x:
        usage: GAUGE
        description: >
          folded
          - not_a_column:
pg_b:
  query: "SELECT 2 AS c"
  metrics:
    - c:
        usage: 'COUNTER'
        description: "c"
"#;
        let q = parse_queries(yaml);
        assert_eq!(q.len(), 2);
        assert!(q[0].master && !q[1].master);
        assert_eq!(q[0].metric_names(), ["pg_a_x"]);
        assert_eq!(q[0].labels(), ["l"]);
        assert_eq!(q[1].metric_names(), ["pg_b_c"]);
    }

    #[test]
    fn rewrites_every_for_and_window() {
        let rules = "groups:\n- name: g\n  rules:\n  # [15m] in a comment\n  - alert: A\n    expr: increase(x[15m]) > 0\n    for: 10m # long\n    labels:\n      severity: page\n  - alert: 'B'\n    expr: >-\n      y < max_over_time(y[1h]) and z[1m] and w{a=\"[b]\"}\n    for: 1h\n";
        let (quick, fors, windows) = quick_rules(rules);
        assert_eq!((fors, windows), (2, 3));
        assert!(quick.contains("    for: 0s # long\n") && quick.contains("    for: 0s\n"));
        assert!(quick.contains("increase(x[30s]) > 0"), "{quick}");
        assert!(
            quick.contains("max_over_time(y[120s]) and z[10s] and w{a=\"[b]\"}"),
            "{quick}"
        );
        assert!(quick.contains("# [15m] in a comment"));
        assert_eq!(alert_names(rules), ["A", "B"]);
    }
}
