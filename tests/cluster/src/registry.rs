//! Helpers of the registry tests (`tests/registry*.rs`): a registry server, nodes of it, and
//! what a node's `idgen_registry_status` says.

use std::collections::HashMap;
use std::process::Command;
use std::time::{Duration, Instant};

use postgres::Client;

use crate::{column, db_error, wait_for, Cluster, One};

/// Renewal interval and lease of most tests: quick, with ten renewals per lease.
pub const FAST: [&str; 2] = [
    "idgen.registry_renew_interval = 200ms",
    "idgen.registry_lease = 2s",
];

/// What a registry needs to grant and hand out without a synchronous standby: `fsync` (test
/// servers run without it) and its operator's declaration of a single durable server; and a
/// longest lease of 2 s (the [`FAST`] nodes' lease), so that its wait after each start, one
/// longest lease, stays short.
pub const DURABLE: [&str; 3] = [
    "fsync = on",
    "idgen.registry_single_server = on",
    "idgen.registry_max_lease = 2s",
];

/// A registry: a server with idgen in its `postgres` database, declared a single durable
/// server ([`DURABLE`]).
pub fn registry(tag: &str) -> Cluster {
    Cluster::with_idgen(tag, 0, &DURABLE)
}

/// `idgen.registry = '...'` pointing at `registry`'s `postgres` database as `user`.
pub fn registry_setting(registry: &Cluster, user: &str) -> String {
    format!(
        "idgen.registry = 'host=127.0.0.1 port={} dbname=postgres user={user}'",
        registry.port()
    )
}

/// A started node of `registry` with [`FAST`] renewals and `settings` (the worker id among
/// them, and any other lease) and idgen created.
pub fn node(registry: &Cluster, tag: &str, settings: &[&str]) -> Cluster {
    let setting = registry_setting(registry, "postgres");
    let mut all = vec!["shared_preload_libraries = 'idgen'", setting.as_str()];
    all.extend_from_slice(&FAST);
    all.extend_from_slice(settings);
    let c = Cluster::start(tag, &all);
    c.create_db_with_idgen("postgres");
    c
}

/// The node's registry client state, worker id and last error.
pub fn status(client: &mut Client) -> (String, Option<i32>, Option<String>) {
    let row = client
        .query_one(
            "SELECT state, worker_id, last_error FROM idgen_registry_status",
            &[],
        )
        .unwrap();
    (row.get(0), row.get(1), row.get(2))
}

/// Waits until the node holds a lease; returns its worker id.
pub fn held_worker(node: &Cluster, within: Duration) -> i32 {
    let mut client = node.connect("postgres");
    wait_for("a held lease", within, || match status(&mut client) {
        (state, Some(w), _) if state == "held" => Some(w),
        _ => None,
    })
}

/// Waits until the node's claim is refused; returns the error `snowflake_nextval()` raises.
pub fn refused(node: &Cluster) -> postgres::error::DbError {
    let mut client = node.connect("postgres");
    wait_for("a refused claim", Duration::from_secs(20), || {
        (status(&mut client).0 == "refused").then_some(())
    });
    db_error(client.query_one("SELECT snowflake_nextval()", &[]))
}

/// `n` ids from the node.
pub fn draw(node: &Cluster, n: i32) -> Vec<i64> {
    column(
        &mut node.connect("postgres"),
        &format!("SELECT snowflake_nextval() FROM generate_series(1, {n})"),
    )
}

/// Nothing was issued since the server started.
pub fn nothing_issued(node: &Cluster) -> bool {
    node.connect("postgres")
        .one::<bool>("SELECT last_id IS NULL FROM snowflake_status()")
}

/// Settings of a node with `idgen.worker_id = auto` and the quick lease of [`FAST`], `extra`
/// appended.
pub fn auto_fast<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut s = vec!["idgen.worker_id = auto"];
    s.extend(FAST);
    s.extend_from_slice(extra);
    s
}

/// A node's state, worker id and last error ([`status`] on a new connection).
pub fn state_of(node: &Cluster) -> (String, Option<i32>, Option<String>) {
    status(&mut node.connect("postgres"))
}

/// `n` numbers of segment `name` drawn on `node` in one statement, in order.
pub fn draw_segment(node: &Cluster, name: &str, n: i32) -> Vec<i64> {
    column(
        &mut node.connect("postgres"),
        &format!("SELECT segment_nextval('{name}') FROM generate_series(1, {n})"),
    )
}

/// Draws numbers of segment `name` on `node`, one a statement, at most `max`, until one fails;
/// returns the numbers and the failure ([`failure_text`]).
pub fn segment_until_failure(node: &Cluster, name: &str, max: usize) -> (Vec<i64>, Option<String>) {
    let mut client = node.connect("postgres");
    let sql = format!("SELECT segment_nextval('{name}')");
    let mut numbers = Vec::new();
    for _ in 0..max {
        match client.query_one(&sql, &[]) {
            Ok(row) => numbers.push(row.get::<_, i64>(0)),
            Err(e) => return (numbers, Some(failure_text(&e))),
        }
    }
    (numbers, None)
}

/// Draws Snowflake ids on `node` (100 a statement, `pause` between statements) until a draw
/// fails or `limit` passes; returns the ids and the failure as `describe` writes it (None if
/// none failed within `limit`).
pub fn snowflake_until_failure(
    node: &Cluster,
    limit: Duration,
    pause: Duration,
    describe: fn(&postgres::Error) -> String,
) -> (Vec<i64>, Option<String>) {
    let mut client = node.connect("postgres");
    let deadline = Instant::now() + limit;
    let mut ids = Vec::new();
    while Instant::now() < deadline {
        match client.query(
            "SELECT snowflake_nextval() FROM generate_series(1, 100)",
            &[],
        ) {
            Ok(rows) => ids.extend(rows.iter().map(|r| r.get::<_, i64>(0))),
            Err(e) => return (ids, Some(describe(&e))),
        }
        std::thread::sleep(pause);
    }
    (ids, None)
}

/// The registry's mark (`max_id`) of global segment `name`, on whatever server listens on
/// `reg`'s port (after [`restore`], the restored registry).
pub fn segment_mark(reg: &Cluster, name: &str) -> i64 {
    reg.connect("postgres").one(&format!(
        "SELECT max_id FROM idgen_registry_segment WHERE name = '{name}'"
    ))
}

/// Every number present more than once in `numbers`, ascending.
pub fn repeated(numbers: &[i64]) -> Vec<i64> {
    let mut seen: HashMap<i64, usize> = HashMap::new();
    for &n in numbers {
        *seen.entry(n).or_default() += 1;
    }
    let mut twice: Vec<i64> = seen
        .into_iter()
        .filter(|&(_, times)| times > 1)
        .map(|(n, _)| n)
        .collect();
    twice.sort();
    twice
}

/// A failed statement's SQLSTATE, message and detail (`SQLSTATE: message (detail ...)`), or
/// the client's error text when the server raised none.
pub fn failure_text(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(d) => format!(
            "{}: {} (detail {:?})",
            d.code().code(),
            d.message(),
            d.detail()
        ),
        None => e.to_string(),
    }
}

/// A snapshot of the registry: a base backup of the running server `reg`, not started.
pub fn snapshot(reg: &Cluster, tag: &str) -> Cluster {
    Cluster::clone_of(reg, tag, &[])
}

/// Replaces the registry by `snapshot` ([`snapshot`]), on the registry's port: `reg` is
/// stopped and the snapshot started, so that `reg.connect` then reaches the restored registry.
pub fn restore(reg: &Cluster, snapshot: &Cluster) {
    reg.stop("fast");
    snapshot.append_settings(&[&format!("port = {}", reg.port())]);
    snapshot.start_server();
}

/// Creates the role `intruder` (LOGIN, a member of `idgen_registry`) on the registry and
/// returns a connection to its `postgres` database as that role: a second member of
/// `idgen_registry` that knows nothing of the nodes' secrets.
pub fn intruder(reg: &Cluster) -> Client {
    reg.connect("postgres")
        .batch_execute("CREATE ROLE intruder LOGIN IN ROLE idgen_registry")
        .unwrap();
    reg.connect_as("postgres", "intruder")
}

/// A direct call of `idgen_registry_claim` with a 2 s lease and a 200 ms renewal interval.
/// Parameters: `$1` node name, `$2` incarnation, `$3` secret, `$4` system identifier (all
/// text), `$5` timeline, `$6` worker id (integer, NULL for any), `$7` the layout's epoch
/// (bigint, Unix ms), `$8` worker bits, `$9` sequence bits, `$10` tick length in ms (integer).
/// Call [`direct_hello`] first, as a node's client does.
pub const DIRECT_CLAIM: &str = "SELECT * FROM idgen_registry_claim($1::text, $2::text, \
    $3::text, $4::text, $5::integer, $6::integer, $7::bigint, $8::integer, $9::integer, \
    $10::integer, 2000, 200, 0::double precision, 5432)";

/// A direct `idgen_registry_hello` as node `node` (incarnation `node`, no revision seen), as a
/// node's client sends before each claim: it records the registry's identity. Then waits
/// until the registry grants (its wait after a start, a longest lease). Returns the hello's
/// recovery column.
pub fn direct_hello(client: &mut Client, node: &str) -> Option<String> {
    let row = client
        .query_one(
            "SELECT recovery, extract(epoch FROM grants_from - clock_timestamp())::float8 \
             FROM idgen_registry_hello($1::text, $1::text, 0, 5432)",
            &[&node],
        )
        .unwrap_or_else(|e| panic!("idgen_registry_hello: {}", failure_text(&e)));
    let wait: f64 = row.get(1);
    if wait > 0.0 {
        std::thread::sleep(Duration::from_secs_f64(wait + 0.05));
    }
    row.get(0)
}

/// The registry client's process id on `node`, if one runs: a child of the postmaster whose
/// title is `postgres: idgen registry client`. (It is not in `pg_stat_activity`: it never
/// connects to a database, so it has no entry there nor in the proc array.) Panics if two run.
pub fn client_pid(node: &Cluster) -> Option<i32> {
    let postmaster = node.postmaster_pid().to_string();
    let mut found = None;
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let (Ok(stat), Ok(cmdline)) = (
            std::fs::read_to_string(entry.path().join("stat")),
            std::fs::read(entry.path().join("cmdline")),
        ) else {
            continue;
        };
        // The parent's pid is the 2nd field after the parenthesized command name.
        let parent = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1).map(str::to_owned));
        if parent.as_deref() == Some(postmaster.as_str())
            && String::from_utf8_lossy(&cmdline).contains("idgen registry client")
        {
            assert!(found.is_none(), "two registry clients");
            found = Some(pid);
        }
    }
    found
}

/// `kill <sig> <pid>` (`sig` as kill takes it: `-TERM`, `-STOP`, `-9`, ...); panics if kill
/// fails.
pub fn signal(pid: i32, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap();
    assert!(ok.success(), "kill {sig} {pid}");
}

/// A process (a registry client, from [`client_pid`]) stopped with SIGSTOP; continued
/// (SIGCONT) when dropped, also on a panic, so that the server can be stopped.
pub struct Stopped(i32);

impl Stopped {
    /// Stops process `pid` until the value is dropped.
    pub fn new(pid: i32) -> Self {
        signal(pid, "-STOP");
        Stopped(pid)
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-CONT", &self.0.to_string()])
            .status();
    }
}

/// Waits until `worker`'s lease, ended by its holder's shutdown, leaves the id free for an
/// `auto` node: the registry's clock has passed the final reservation (`released_tick`) of the
/// released lease (no grant starts above the registry's clock, nor below a tick its last
/// holder reserved); or, when the holder could not release it (a shutdown never reconnects, so
/// a renewal that had just lost the connection leaves the lease to expire), the lease has
/// expired and the clock has passed its fence.
pub fn wait_until_released_id_is_free(reg: &Cluster, worker: i32) {
    let mut r = reg.connect("postgres");
    wait_for(
        "the registry's clock to pass the ended lease's final tick",
        Duration::from_secs(20),
        || {
            r.one_with::<bool>(
                "SELECT coalesce(CASE WHEN released_tick IS NOT NULL \
                   THEN clock_timestamp() >= to_timestamp((epoch_unix_ms \
                        + released_tick * time_unit_ms) / 1000.0) \
                   ELSE clock_timestamp() >= greatest(expires_at, fenced_until) END, false) \
                 FROM idgen_registry_workers WHERE worker_id = $1",
                &[&worker],
            )
            .then_some(())
        },
    );
}

/// Waits (at most `within`) until `nodes` known nodes have reported in the registry's open
/// recovery.
pub fn wait_for_reports(reg: &Cluster, nodes: i64, within: Duration) {
    let mut r = reg.connect("postgres");
    wait_for("the nodes' reports", within, || {
        (r.one::<i64>("SELECT count(*) FROM idgen_registry_recovery WHERE reported") == nodes)
            .then_some(())
    });
}

/// Completes the registry's open recovery as its superuser, skipping `skip` (node names);
/// returns what it raised, as (subject, raised to).
pub fn recover(reg: &Cluster, skip: &[String]) -> Vec<(String, i64)> {
    reg.connect("postgres")
        .query(
            "SELECT subject, raised_to FROM idgen_registry_recover(skip_nodes => $1)",
            &[&skip],
        )
        .unwrap_or_else(|e| panic!("idgen_registry_recover(): {e}"))
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect()
}
