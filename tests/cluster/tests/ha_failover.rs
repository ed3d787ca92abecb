//! End-to-end failover under a real HA manager: pg_auto_failover from
//! Debian (`postgresql-15-auto-failover`, `pg-auto-failover-cli`) runs a monitor and two data
//! nodes on 127.0.0.1, with the synchronous replication it sets up itself. idgen is preloaded
//! on both nodes with the same worker id (a failover pair shares its postgresql.conf), and four
//! segments exist.
//!
//! Eight clients draw both generators through one multi-host URI with
//! `target_session_attrs=read-write`, reconnecting whenever their server goes away and every
//! 2 s (a pool's connection lifetime), while the test crashes the primary's machine at a random
//! moment three times: `kill -9` of its postmaster, then of its `pg_autoctl` keeper (killing the
//! postmaster alone is not a failover: the keeper restarts it within a second). The monitor
//! has pg_autoctl promote the secondary; then the old primary's keeper starts again (the
//! machine is back) and rejoins as secondary (`pg_rewind`). An id counts as drawn once its
//! statement returned it. With pg_auto_failover's default timeouts a machine crash takes about
//! 50 s to fail over (20 s to give up on the node, 30 s `primary_demote_timeout`), so the load
//! runs about three minutes to fit three failovers, not 60 s; the whole test about
//! 3.5 minutes.
//!
//! Asserted: no Snowflake id and no segment number (per name) was returned twice; every id
//! drawn on a later timeline is above every id drawn on an earlier one; each failover made the
//! other node the primary; the clients drew from both generators on the new primary after every
//! failover, within a generous bound; the old primary came back as secondary. The time the
//! generators were unavailable is printed (`--nocapture`), not asserted.
//!
//! pg_auto_failover promotes the secondary first read-only (`stop_replication`,
//! `default_transaction_read_only = on`, invisible to `target_session_attrs=read-write`) and
//! makes it writable only once the old primary is known to be demoted (`primary_demote_timeout`,
//! 30 s). Each time, a direct connection probes both generators on the fenced node: both must
//! refuse while its transactions are read-only (25006, as `nextval()`), so the fence holds for
//! idgen's ids as it does for writes.
//!
//! When pg_auto_failover is not installed and cannot be installed, the test says so ("skipped:")
//! and passes.

use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use idgen_cluster_tests::{db_error, pg_bin, twitter, One};

const CLIENTS: usize = 8;
const FAILOVERS: usize = 3;
/// The load runs at least this long, and longer if the three failovers need it.
const LOAD: Duration = Duration::from_secs(60);
/// The load goes on at least this long after the last promotion.
const AFTER_LAST: Duration = Duration::from_secs(8);
/// A kill comes this long (a random time in the range, ms) after the pair is healthy again.
const KILL_DELAY_MS: (u64, u64) = (1_500, 7_000);
/// A client reconnects after this long on one connection (a pool's maximum lifetime), and
/// whenever its connection breaks.
const LIFETIME: Duration = Duration::from_secs(2);
/// Sanity bound for every wait on pg_auto_failover (not a performance claim).
const BOUND: Duration = Duration::from_secs(120);
const NAMES: [&str; 4] = ["ha_orders", "ha_invoices", "ha_payments", "ha_tickets"];
const WORKER_ID: i64 = 29;
const NODES: [&str; 2] = ["node1", "node2"];
const PACKAGES: [&str; 2] = ["postgresql-15-auto-failover", "pg-auto-failover-cli"];

const SNOWFLAKE: &str = "SELECT snowflake_nextval() FROM generate_series(1, 5)";
const SEGMENT: &str = "SELECT segment_nextval($1) FROM generate_series(1, 5)";
/// The server a read-write session landed on, and the timeline it writes WAL on.
const WHERE_AM_I: &str = "SELECT inet_server_port(), \
     ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int";

extern "C" {
    fn kill(pid: i32, sig: i32) -> i32;
    fn geteuid() -> u32;
}
const SIGQUIT: i32 = 3;
const SIGKILL: i32 = 9;
const SIGTERM: i32 = 15;

/// A small time-seeded PRNG (xorshift64*); `IDGEN_HA_SEED` repeats a run's kill moments.
struct Rng(u64);

impl Rng {
    fn seeded() -> (Rng, u64) {
        let seed = std::env::var("IDGEN_HA_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                let t = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
                (t.as_nanos() as u64) ^ ((std::process::id() as u64) << 32)
            });
        (Rng(seed | 1), seed)
    }

    fn between(&mut self, lo: u64, hi: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        lo + self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % (hi - lo)
    }
}

/// Whether pg_autoctl and the monitor's extension are there for the PostgreSQL under test.
fn missing_packages() -> Option<String> {
    let autoctl = Command::new("pg_autoctl").arg("--version").output();
    if !autoctl.map(|o| o.status.success()).unwrap_or(false) {
        return Some("pg_autoctl is not on PATH".into());
    }
    let out = Command::new(format!("{}/pg_config", pg_bin()))
        .arg("--pkglibdir")
        .output()
        .expect("pg_config");
    let libdir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    let lib = libdir.join("pgautofailover.so");
    (!lib.exists()).then(|| format!("{} is missing", lib.display()))
}

/// Installs pg_auto_failover with apt when it is missing and we are root; the reason it is
/// still missing otherwise.
fn ensure_packages() -> Result<(), String> {
    let Some(why) = missing_packages() else {
        return Ok(());
    };
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { geteuid() } != 0 {
        return Err(format!("{why}, and installing {PACKAGES:?} needs root"));
    }
    let install = || {
        Command::new("apt-get")
            .args(["install", "-y", "-q"])
            .args(PACKAGES)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false)
    };
    if !install() {
        let _ = Command::new("apt-get").args(["update", "-q"]).output();
        if !install() {
            return Err(format!("{why}, and apt-get install {PACKAGES:?} failed"));
        }
    }
    match missing_packages() {
        None => Ok(()),
        Some(why) => Err(format!("{why} after installing {PACKAGES:?}")),
    }
}

/// uid and gid of `postgres` when we are root (PostgreSQL refuses to run as root).
fn postgres_owner() -> Option<(u32, u32)> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { geteuid() } != 0 {
        return None;
    }
    let passwd = fs::read_to_string("/etc/passwd").expect("/etc/passwd");
    let line = passwd
        .lines()
        .find(|l| l.starts_with("postgres:"))
        .expect("a postgres user");
    let f: Vec<&str> = line.split(':').collect();
    Some((f[2].parse().unwrap(), f[3].parse().unwrap()))
}

/// `n` distinct free ports on 127.0.0.1.
fn free_ports<const N: usize>() -> [u16; N] {
    let listeners: Vec<TcpListener> = (0..N)
        .map(|_| TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0"))
        .collect();
    std::array::from_fn(|i| listeners[i].local_addr().unwrap().port())
}

/// One row of `pgautofailover.node` on the monitor.
#[derive(Debug, Clone)]
struct NodeState {
    port: u16,
    reported: String,
    goal: String,
    tli: i32,
    health: i32,
}

/// A pg_auto_failover formation: a monitor and two data nodes, each run by a `pg_autoctl run`
/// of its own. Drop stops them all (and kills what does not stop) and removes the directory.
struct Formation {
    dir: PathBuf,
    owner: Option<(u32, u32)>,
    monitor_port: u16,
    ports: [u16; 2],
    /// The `pg_autoctl run` processes: (pgdata name, process).
    runs: Vec<(String, Child)>,
}

impl Formation {
    fn new() -> Formation {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let dir = std::env::temp_dir().join(format!("idgen-ha-{}-{nanos}", std::process::id()));
        let owner = postgres_owner();
        // pg_autoctl's keepers reach their servers through the packaged socket directory,
        // which tmpfiles creates at boot; a container that never booted may lack it.
        let sockets = PathBuf::from("/var/run/postgresql");
        if let (Some((uid, gid)), false) = (owner, sockets.exists()) {
            fs::create_dir_all(&sockets).expect("create /var/run/postgresql");
            std::os::unix::fs::chown(&sockets, Some(uid), Some(gid)).expect("chown sockets");
        }
        for sub in ["", "config", "share", "run"] {
            let d = dir.join(sub);
            fs::create_dir_all(&d).expect("create formation dir");
            if let Some((uid, gid)) = owner {
                std::os::unix::fs::chown(&d, Some(uid), Some(gid)).expect("chown to postgres");
            }
        }
        let [monitor_port, p1, p2] = free_ports::<3>();
        Formation {
            dir,
            owner,
            monitor_port,
            ports: [p1, p2],
            runs: Vec::new(),
        }
    }

    fn pgdata(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// `pg_autoctl`, as postgres, with its configuration and state under our directory.
    fn autoctl(&self) -> Command {
        let mut c = Command::new("pg_autoctl");
        c.env_clear()
            .env("PATH", format!("{}:/usr/bin:/bin", pg_bin()))
            .env("PG_CONFIG", format!("{}/pg_config", pg_bin()))
            .env("LC_ALL", "C.UTF-8")
            .env("HOME", &self.dir)
            .env("XDG_CONFIG_HOME", self.dir.join("config"))
            .env("XDG_DATA_HOME", self.dir.join("share"))
            .env("XDG_RUNTIME_DIR", self.dir.join("run"))
            .current_dir(&self.dir)
            .stdin(Stdio::null());
        if let Some((uid, gid)) = self.owner {
            c.uid(uid).gid(gid);
        }
        c
    }

    /// Runs a `pg_autoctl create ...` to completion; panics with its output if it fails.
    fn create(&self, args: &[String]) {
        let out = self
            .autoctl()
            .arg("create")
            .args(args)
            .output()
            .expect("run pg_autoctl");
        assert!(
            out.status.success(),
            "pg_autoctl create {args:?} failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn common_args(&self, name: &str, port: u16) -> Vec<String> {
        [
            "--pgdata",
            self.pgdata(name).to_str().unwrap(),
            "--pgport",
            &port.to_string(),
            "--pgctl",
            &format!("{}/pg_ctl", pg_bin()),
            "--hostname",
            "127.0.0.1",
            "--listen",
            "127.0.0.1",
            "--auth",
            "trust",
            "--no-ssl",
        ]
        .map(String::from)
        .to_vec()
    }

    fn create_monitor(&self) {
        let mut args = vec!["monitor".to_owned()];
        args.extend(self.common_args("monitor", self.monitor_port));
        self.create(&args);
    }

    fn create_node(&self, i: usize) {
        let mut args = vec!["postgres".to_owned()];
        args.extend(self.common_args(NODES[i], self.ports[i]));
        args.extend(
            [
                "--name",
                NODES[i],
                "--monitor",
                &format!(
                    "postgres://autoctl_node@127.0.0.1:{}/pg_auto_failover?sslmode=disable",
                    self.monitor_port
                ),
            ]
            .map(String::from),
        );
        self.create(&args);
    }

    /// Appends lines to a node's postgresql.conf; they win over the file pg_autoctl includes
    /// at its top (`postgresql-auto-failover.conf`).
    fn append_conf(&self, name: &str, lines: &[&str]) {
        let path = self.pgdata(name).join("postgresql.conf");
        let mut conf = fs::read_to_string(&path).expect("postgresql.conf");
        conf.push_str("\n# idgen ha_failover test\n");
        for l in lines {
            conf.push_str(l);
            conf.push('\n');
        }
        fs::write(&path, conf).expect("write postgresql.conf");
    }

    /// Starts `pg_autoctl run` for `name` in a process group of its own, logging to a file.
    fn run(&mut self, name: &str) {
        let log = fs::File::create(self.dir.join(format!("{name}.log"))).expect("keeper log");
        let child = self
            .autoctl()
            .args(["run", "--pgdata", self.pgdata(name).to_str().unwrap()])
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .process_group(0)
            .spawn()
            .expect("spawn pg_autoctl run");
        self.runs.push((name.to_owned(), child));
    }

    /// The last lines of every `pg_autoctl run` log, for failure messages.
    fn logs(&self) -> String {
        let mut s = String::new();
        for (name, _) in &self.runs {
            let log = fs::read_to_string(self.dir.join(format!("{name}.log"))).unwrap_or_default();
            let lines: Vec<&str> = log.lines().collect();
            s.push_str(&format!("--- pg_autoctl run {name} (last 40 lines)\n"));
            for l in &lines[lines.len().saturating_sub(40)..] {
                s.push_str(l);
                s.push('\n');
            }
        }
        s
    }

    fn conninfo(&self, port: u16, db: &str) -> String {
        format!("host=127.0.0.1 port={port} user=postgres dbname={db} connect_timeout=5")
    }

    /// A connection to `port`, retried until `BOUND` passes.
    fn connect(&self, port: u16, db: &str) -> postgres::Client {
        let deadline = Instant::now() + BOUND;
        loop {
            match postgres::Client::connect(&self.conninfo(port, db), postgres::NoTls) {
                Ok(c) => return c,
                Err(e) if Instant::now() > deadline => {
                    panic!("connect to {port}/{db}: {e}\n{}", self.logs())
                }
                Err(_) => thread::sleep(Duration::from_millis(200)),
            }
        }
    }

    /// The nodes as the monitor sees them, in node id order; reconnects `mon` if needed.
    fn nodes(&self, mon: &mut postgres::Client) -> Vec<NodeState> {
        let sql = "SELECT nodeport::int4, reportedstate::text, goalstate::text, \
                   reportedtli::int4, health::int4 FROM pgautofailover.node ORDER BY nodeid";
        let rows = match mon.query(sql, &[]) {
            Ok(rows) => rows,
            Err(_) => {
                *mon = self.connect(self.monitor_port, "pg_auto_failover");
                mon.query(sql, &[]).expect("read pgautofailover.node")
            }
        };
        rows.iter()
            .map(|r| NodeState {
                port: r.get::<_, i32>(0) as u16,
                reported: r.get(1),
                goal: r.get(2),
                tli: r.get(3),
                health: r.get(4),
            })
            .collect()
    }

    fn index_of(&self, port: u16) -> usize {
        self.ports
            .iter()
            .position(|p| *p == port)
            .expect("a node port")
    }

    /// Waits until one node is primary and the other secondary (reported and assigned, both
    /// healthy) and the primary has a synchronous standby. Returns the primary's index and
    /// timeline.
    fn wait_healthy(&self, mon: &mut postgres::Client) -> (usize, i32) {
        let deadline = Instant::now() + BOUND;
        loop {
            let nodes = self.nodes(mon);
            let role = |s: &str| {
                nodes
                    .iter()
                    .find(|n| n.reported == s && n.goal == s && n.health == 1)
                    .cloned()
            };
            if let (2, Some(p), Some(_)) = (nodes.len(), role("primary"), role("secondary")) {
                let primary = self.index_of(p.port);
                let sync =
                    postgres::Client::connect(&self.conninfo(p.port, "postgres"), postgres::NoTls)
                        .and_then(|mut c| {
                            c.query_one(
                                "SELECT count(*) FROM pg_stat_replication \
                         WHERE sync_state IN ('sync', 'quorum')",
                                &[],
                            )
                        })
                        .map(|r| r.get::<_, i64>(0))
                        .unwrap_or(0);
                if sync == 1 {
                    return (primary, p.tli);
                }
            }
            assert!(
                Instant::now() < deadline,
                "the formation did not become primary + synchronous secondary within {BOUND:?}: \
                 {nodes:?}\n{}",
                self.logs()
            );
            thread::sleep(Duration::from_millis(100));
        }
    }

    /// The postmaster pid from a node's `postmaster.pid`, if it has one.
    fn postmaster_pid(&self, name: &str) -> Option<i32> {
        let pid = fs::read_to_string(self.pgdata(name).join("postmaster.pid")).ok()?;
        pid.lines().next()?.trim().parse().ok()
    }

    /// The node's machine dies: `kill -9` of its postmaster, then of its `pg_autoctl run`
    /// process group (keeper services, and the server processes that are left). Returns the
    /// postmaster's pid.
    ///
    /// Killing the postmaster alone is not a failover: the keeper's postgres service is its
    /// parent and restarts it within a second, usually before the monitor's health checks
    /// give up on it.
    fn crash(&mut self, name: &str) -> i32 {
        let pid = self
            .postmaster_pid(name)
            .unwrap_or_else(|| panic!("{name} has no postmaster.pid"));
        // SAFETY: kill(2) of the postmaster of a server this test started.
        assert_eq!(unsafe { kill(pid, SIGKILL) }, 0, "kill -9 {pid}");
        let i = self
            .runs
            .iter()
            .position(|(n, _)| n == name)
            .expect("a keeper for the node");
        let (_, mut keeper) = self.runs.remove(i);
        // SAFETY: kill(2) of the process group we gave the keeper.
        unsafe { kill(-(keeper.id() as i32), SIGKILL) };
        let _ = keeper.wait();
        pid
    }
}

impl Drop for Formation {
    fn drop(&mut self) {
        // The data nodes first (their keepers talk to the monitor), then the monitor.
        let mut order: Vec<usize> = (0..self.runs.len()).collect();
        order.sort_by_key(|i| self.runs[*i].0 == "monitor");
        for phase in [false, true] {
            let batch: Vec<usize> = order
                .iter()
                .copied()
                .filter(|i| (self.runs[*i].0 == "monitor") == phase)
                .collect();
            for i in &batch {
                // SAFETY: plain kill(2) of a process we started.
                unsafe { kill(self.runs[*i].1.id() as i32, SIGTERM) };
            }
            let deadline = Instant::now() + Duration::from_secs(20);
            for i in &batch {
                let child = &mut self.runs[*i].1;
                while Instant::now() < deadline && matches!(child.try_wait(), Ok(None)) {
                    thread::sleep(Duration::from_millis(100));
                }
                if matches!(child.try_wait(), Ok(None)) {
                    // SAFETY: kill(2) of the process group we gave the child.
                    unsafe { kill(-(child.id() as i32), SIGKILL) };
                    let _ = child.wait();
                }
            }
        }
        // A server still up (its keeper did not stop it): immediate shutdown, then kill -9.
        // Only a live postmaster of this data directory: a crashed node leaves a stale
        // postmaster.pid whose number may belong to another process by now.
        for name in ["monitor", NODES[0], NODES[1]] {
            let data = self.pgdata(name);
            let ours = |pid: i32| {
                fs::read(format!("/proc/{pid}/cmdline"))
                    .map(|c| String::from_utf8_lossy(&c).contains(data.to_str().unwrap()))
                    .unwrap_or(false)
            };
            let Some(pid) = self.postmaster_pid(name).filter(|p| ours(*p)) else {
                continue;
            };
            // SAFETY: kill(2) of the postmaster of this formation's data directory.
            unsafe { kill(pid, SIGQUIT) };
            let deadline = Instant::now() + Duration::from_secs(10);
            while ours(pid) && Instant::now() < deadline {
                thread::sleep(Duration::from_millis(100));
            }
            if ours(pid) {
                // SAFETY: as above.
                unsafe { kill(pid, SIGKILL) };
            }
        }
        if std::env::var_os("IDGEN_KEEP_CLUSTERS").is_none() {
            let _ = fs::remove_dir_all(&self.dir);
        } else {
            eprintln!("kept {}", self.dir.display());
        }
    }
}

/// What one connection of a client saw. Times are since the start of the load.
struct Session {
    port: u16,
    tli: i32,
    connected: Duration,
    /// First and last successful draw: [snowflake, segment].
    first: [Option<Duration>; 2],
    last: [Option<Duration>; 2],
    snowflake: Vec<i64>,
    /// Per name, in `NAMES` order.
    segment: [Vec<i64>; 4],
}

#[derive(Default)]
struct ClientStats {
    connects: u64,
    connect_failures: u64,
    statement_errors: u64,
    /// Distinct error messages (shortened) and how often they came.
    errors: BTreeMap<String, u64>,
}

impl ClientStats {
    fn note(&mut self, e: &postgres::Error) {
        let text = match e.as_db_error() {
            Some(db) => format!("{}: {}", db.code().code(), db.message()),
            None => e.to_string(),
        };
        let short: String = text.chars().take(90).collect();
        if self.errors.len() < 12 || self.errors.contains_key(&short) {
            *self.errors.entry(short).or_default() += 1;
        }
    }
}

/// One client: connects through the multi-host URI, draws until its connection breaks, then
/// reconnects; until `stop`.
fn client(k: usize, uri: &str, t0: Instant, stop: &AtomicBool) -> (Vec<Session>, ClientStats) {
    let mut sessions = Vec::new();
    let mut stats = ClientStats::default();
    let mut i = k; // spreads the clients over the names
    while !stop.load(Ordering::Relaxed) {
        let mut c = match postgres::Client::connect(uri, postgres::NoTls) {
            Ok(c) => c,
            Err(e) => {
                stats.connect_failures += 1;
                stats.note(&e);
                thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        stats.connects += 1;
        let connected = t0.elapsed();
        let (port, tli) = match c.query_one(WHERE_AM_I, &[]) {
            Ok(r) => (r.get::<_, i32>(0) as u16, r.get::<_, i32>(1)),
            Err(e) => {
                stats.statement_errors += 1;
                stats.note(&e);
                continue;
            }
        };
        let mut s = Session {
            port,
            tli,
            connected,
            first: [None; 2],
            last: [None; 2],
            snowflake: Vec::new(),
            segment: Default::default(),
        };
        while !stop.load(Ordering::Relaxed) && t0.elapsed() < connected + LIFETIME {
            i += 1;
            let (g, name) = (i % 2, (i / 2) % NAMES.len());
            let result = if g == 0 {
                c.query(SNOWFLAKE, &[])
            } else {
                c.query(SEGMENT, &[&NAMES[name]])
            };
            match result {
                Ok(rows) => {
                    let at = t0.elapsed();
                    s.first[g].get_or_insert(at);
                    s.last[g] = Some(at);
                    let out = if g == 0 {
                        &mut s.snowflake
                    } else {
                        &mut s.segment[name]
                    };
                    out.extend(rows.iter().map(|r| r.get::<_, i64>(0)));
                }
                Err(e) => {
                    stats.statement_errors += 1;
                    stats.note(&e);
                    break;
                }
            }
        }
        sessions.push(s);
    }
    (sessions, stats)
}

/// A direct connection to a node that pg_auto_failover promoted but keeps read-only (state
/// `stop_replication`, `default_transaction_read_only = on`) until it knows the old primary is
/// demoted: both generators must refuse there (25006); what it draws, if anything, joins the
/// duplicate checks.
fn probe_fenced(f: &Formation, port: u16, t0: Instant, probes: &mut Vec<Session>) -> String {
    let conninfo = format!(
        "{} options='-c statement_timeout=5s'",
        f.conninfo(port, "postgres")
    );
    let mut c = match postgres::Client::connect(&conninfo, postgres::NoTls) {
        Ok(c) => c,
        Err(e) => return format!("no connection: {e}"),
    };
    let (port, tli) = match c.query_one(WHERE_AM_I, &[]) {
        Ok(r) => (r.get::<_, i32>(0) as u16, r.get::<_, i32>(1)),
        Err(e) => return format!("{e}"),
    };
    let read_only: String = c
        .query_one("SHOW transaction_read_only", &[])
        .map(|r| r.get(0))
        .unwrap_or_else(|e| e.to_string());
    let mut s = Session {
        port,
        tli,
        connected: t0.elapsed(),
        first: [None; 2],
        last: [None; 2],
        snowflake: Vec::new(),
        segment: Default::default(),
    };
    let mut outcome = |sql: &str, out: &mut Vec<i64>| match c.query_one(sql, &[]) {
        Ok(r) => {
            out.push(r.get(0));
            format!("returned {}", r.get::<_, i64>(0))
        }
        Err(e) => match e.as_db_error() {
            Some(db) => format!("failed with {}: {}", db.code().code(), db.message()),
            None => format!("failed: {e}"),
        },
    };
    let snowflake = outcome("SELECT snowflake_nextval()", &mut s.snowflake);
    let segment = outcome(
        &format!("SELECT segment_nextval('{}')", NAMES[0]),
        &mut s.segment[0],
    );
    // The fence holds for idgen too: neither generator hands out ids while transactions are
    // read-only (25006, as nextval()).
    if read_only == "on" {
        for (what, got) in [
            ("snowflake_nextval()", &snowflake),
            ("segment_nextval()", &segment),
        ] {
            assert!(
                got.starts_with("failed with 25006"),
                "{what} on the fenced node (transaction_read_only = on): {got}"
            );
        }
    }
    probes.push(s);
    format!(
        "transaction_read_only = {read_only}, timeline {tli}: snowflake_nextval() {snowflake}, \
         segment_nextval() {segment}"
    )
}

/// Sets the flag when dropped: a panicking orchestrator still stops the clients.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// One failover as the orchestrator drove and saw it. Times are since the start of the load.
struct Failover {
    killed: usize,
    pid: i32,
    tli_before: i32,
    killed_at: Duration,
    /// The other node reported `stop_replication`: promoted, but read-only
    /// (`default_transaction_read_only`) until the old primary is known to be demoted.
    fenced_at: Option<Duration>,
    /// What a client that ignores the fence (a direct connection, no
    /// `target_session_attrs`) got from the generators then.
    fence_probe: Option<String>,
    /// The other node reported `wait_primary` or `primary` (it is writable).
    promoted_at: Duration,
    promoted: usize,
    /// The killed node is a healthy synchronous secondary again.
    rejoined_at: Option<Duration>,
}

fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

/// Values drawn more than once, with who drew each of them.
fn duplicates(label: &str, sessions: &[Session], pick: impl Fn(&Session) -> &[i64]) -> Vec<String> {
    let mut all: Vec<i64> = sessions
        .iter()
        .flat_map(|s| pick(s).iter().copied())
        .collect();
    all.sort_unstable();
    let dup: HashSet<i64> = all
        .windows(2)
        .filter(|w| w[0] == w[1])
        .map(|w| w[0])
        .collect();
    let mut report = Vec::new();
    for v in dup.iter().take(10) {
        let who: Vec<String> = sessions
            .iter()
            .filter(|s| pick(s).contains(v))
            .map(|s| {
                format!(
                    "port {} timeline {} connected at {}",
                    s.port,
                    s.tli,
                    secs(s.connected)
                )
            })
            .collect();
        report.push(format!("{label} {v} drawn by: {}", who.join("; ")));
    }
    if dup.len() > 10 {
        report.push(format!("{label}: {} duplicated values in all", dup.len()));
    }
    report
}

/// Every value drawn on a later timeline must be above every value drawn on an earlier one.
fn timeline_order(
    label: &str,
    sessions: &[Session],
    pick: impl Fn(&Session) -> &[i64],
) -> (String, Vec<String>) {
    let mut by_tli: BTreeMap<i32, (i64, i64, usize)> = BTreeMap::new();
    for s in sessions {
        for v in pick(s) {
            let e = by_tli.entry(s.tli).or_insert((i64::MAX, i64::MIN, 0));
            e.0 = e.0.min(*v);
            e.1 = e.1.max(*v);
            e.2 += 1;
        }
    }
    let ranges: Vec<(i32, (i64, i64, usize))> = by_tli.into_iter().collect();
    let summary = ranges
        .iter()
        .map(|(t, (lo, hi, n))| format!("TL{t}: {n} in {lo}..={hi}"))
        .collect::<Vec<_>>()
        .join(", ");
    let problems = ranges
        .windows(2)
        .filter(|w| w[1].1 .0 <= w[0].1 .1)
        .map(|w| {
            format!(
                "{label}: timeline {} drew {} but timeline {} had already drawn up to {}",
                w[1].0, w[1].1 .0, w[0].0, w[0].1 .1
            )
        })
        .collect();
    (summary, problems)
}

#[test]
fn failovers_under_pg_auto_failover_repeat_no_id() {
    if let Err(why) = ensure_packages() {
        println!("skipped: pg_auto_failover is not available ({why})");
        return;
    }
    let started = Instant::now();
    let (mut rng, seed) = Rng::seeded();
    let mut f = Formation::new();

    // The monitor, with a sane shared_buffers (pg_autoctl sizes it from the machine's RAM).
    f.create_monitor();
    f.append_conf("monitor", &["shared_buffers = '128MB'"]);
    f.run("monitor");
    let mut mon = f.connect(f.monitor_port, "pg_auto_failover");

    // node1: created, then idgen added to what pg_autoctl preloads, then run.
    let worker = format!("idgen.worker_id = {WORKER_ID}");
    let node_conf = [
        "shared_preload_libraries = 'pg_stat_statements,idgen'",
        worker.as_str(),
        "shared_buffers = '128MB'",
        "wal_keep_size = '512MB'",
    ];
    f.create_node(0);
    let generated = fs::read_to_string(f.pgdata(NODES[0]).join("postgresql-auto-failover.conf"))
        .expect("postgresql-auto-failover.conf");
    assert!(
        generated.contains("shared_preload_libraries = pg_stat_statements"),
        "pg_autoctl preloads something else now; keep it in node_conf:\n{generated}"
    );
    f.append_conf(NODES[0], &node_conf);
    f.run(NODES[0]);
    let deadline = Instant::now() + BOUND;
    while !f
        .nodes(&mut mon)
        .iter()
        .any(|n| n.reported == "single" && n.goal == "single")
    {
        assert!(
            Instant::now() < deadline,
            "node1 never became single\n{}",
            f.logs()
        );
        thread::sleep(Duration::from_millis(200));
    }
    let mut admin = f.connect(f.ports[0], "postgres");
    admin.batch_execute("CREATE EXTENSION idgen").unwrap();
    for name in NAMES {
        admin
            .execute("SELECT segment_create($1, step => 1000)", &[&name])
            .unwrap();
    }
    drop(admin);

    // node2: pg_basebackup of node1, postgresql.conf (idgen settings included) and all.
    f.create_node(1);
    f.run(NODES[1]);
    let (primary, _) = f.wait_healthy(&mut mon);
    assert_eq!(primary, 0, "node1 should be the first primary");

    // Both preload idgen with the same worker id; the secondary refuses to generate.
    for port in f.ports {
        let mut c = f.connect(port, "postgres");
        let libs: String = c.one("SHOW shared_preload_libraries");
        assert!(libs.contains("idgen"), "port {port} preloads {libs}");
        let w: String = c.one("SHOW idgen.worker_id");
        assert_eq!(w, WORKER_ID.to_string(), "port {port}");
    }
    let mut standby = f.connect(f.ports[1], "postgres");
    for sql in [
        "SELECT snowflake_nextval()",
        "SELECT segment_nextval('ha_orders')",
    ] {
        let err = db_error(standby.query_one(sql, &[]));
        assert_eq!(
            err.code().code(),
            "25006",
            "{sql} on the secondary: {err:?}"
        );
    }
    drop(standby);
    let setup = started.elapsed();

    let uri = format!(
        "postgresql://postgres@127.0.0.1:{},127.0.0.1:{}/postgres?target_session_attrs=read-write\
         &connect_timeout=3&application_name=idgen-ha&options=-c%20statement_timeout%3D20s",
        f.ports[0], f.ports[1]
    );
    let stop = AtomicBool::new(false);
    let t0 = Instant::now();
    let (failovers, results, probes, load) = thread::scope(|s| {
        let handles: Vec<_> = (0..CLIENTS)
            .map(|k| {
                let (uri, stop) = (&uri, &stop);
                s.spawn(move || client(k, uri, t0, stop))
            })
            .collect();
        let _stop = StopOnDrop(&stop);
        let mut failovers: Vec<Failover> = Vec::new();
        let mut probes: Vec<Session> = Vec::new();
        for _ in 0..FAILOVERS {
            let (primary, tli) = f.wait_healthy(&mut mon);
            if let Some(last) = failovers.last_mut() {
                assert_eq!(
                    primary, last.promoted,
                    "the promoted node is not the primary"
                );
                last.rejoined_at = Some(t0.elapsed());
            }
            thread::sleep(Duration::from_millis(
                rng.between(KILL_DELAY_MS.0, KILL_DELAY_MS.1),
            ));
            let pid = f.crash(NODES[primary]);
            let killed_at = t0.elapsed();
            let other = 1 - primary;
            let deadline = Instant::now() + BOUND;
            let mut fenced_at = None;
            let mut fence_probe = None;
            let promoted_at = loop {
                let nodes = f.nodes(&mut mon);
                let reported = |states: &[&str]| {
                    nodes
                        .iter()
                        .any(|n| n.port == f.ports[other] && states.contains(&n.reported.as_str()))
                };
                if fenced_at.is_none() && reported(&["stop_replication"]) {
                    fenced_at = Some(t0.elapsed());
                    fence_probe = Some(probe_fenced(&f, f.ports[other], t0, &mut probes));
                }
                if reported(&["wait_primary", "primary"]) {
                    break t0.elapsed();
                }
                assert!(
                    Instant::now() < deadline,
                    "{} was not promoted within {BOUND:?} of the kill: {nodes:?}\n{}",
                    NODES[other],
                    f.logs()
                );
                thread::sleep(Duration::from_millis(50));
            };
            // The machine comes back: its keeper starts again, and rejoins as secondary.
            f.run(NODES[primary]);
            failovers.push(Failover {
                killed: primary,
                pid,
                tli_before: tli,
                killed_at,
                fenced_at,
                fence_probe,
                promoted_at,
                promoted: other,
                rejoined_at: None,
            });
        }
        // The last old primary rejoins too; the load runs on past the last promotion.
        let (primary, _) = f.wait_healthy(&mut mon);
        let last = failovers.last_mut().unwrap();
        assert_eq!(
            primary, last.promoted,
            "the promoted node is not the primary"
        );
        last.rejoined_at = Some(t0.elapsed());
        let until = LOAD.max(last.promoted_at + AFTER_LAST);
        if let Some(rest) = until.checked_sub(t0.elapsed()) {
            thread::sleep(rest);
        }
        stop.store(true, Ordering::Relaxed);
        let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        (failovers, results, probes, t0.elapsed())
    });

    let mut sessions = Vec::new();
    let mut stats = ClientStats::default();
    for (ss, st) in results {
        sessions.extend(ss);
        stats.connects += st.connects;
        stats.connect_failures += st.connect_failures;
        stats.statement_errors += st.statement_errors;
        for (e, n) in st.errors {
            *stats.errors.entry(e).or_default() += n;
        }
    }

    // Counting: every value the clients (and the fence probes) drew.
    let clients_only = sessions.len();
    sessions.extend(probes);
    let sessions = &sessions[..];
    let mut problems: Vec<String> = Vec::new();
    let snowflake_count: usize = sessions.iter().map(|s| s.snowflake.len()).sum();
    problems.extend(duplicates("snowflake id", sessions, |s| &s.snowflake));
    let (snowflake_tls, order) = timeline_order("snowflake", sessions, |s| &s.snowflake);
    problems.extend(order);
    let foreign: Vec<i64> = sessions
        .iter()
        .flat_map(|s| s.snowflake.iter().copied())
        .filter(|id| twitter::worker_of(*id) != WORKER_ID)
        .take(5)
        .collect();
    if !foreign.is_empty() {
        problems.push(format!("snowflake ids of another worker id: {foreign:?}"));
    }
    let mut segment_lines = Vec::new();
    for (n, name) in NAMES.iter().enumerate() {
        let count: usize = sessions.iter().map(|s| s.segment[n].len()).sum();
        problems.extend(duplicates(name, sessions, |s| &s.segment[n]));
        let (tls, order) = timeline_order(name, sessions, |s| &s.segment[n]);
        problems.extend(order);
        segment_lines.push(format!("  segment {name}: {count} numbers; {tls}"));
    }

    println!(
        "ha_failover: seed {seed}; {CLIENTS} clients; setup {}; load {} with {FAILOVERS} failovers",
        secs(setup),
        secs(load)
    );
    for (k, fo) in failovers.iter().enumerate() {
        let next_kill = failovers.get(k + 1).map_or(Duration::MAX, |n| n.killed_at);
        let on = |node: usize| {
            sessions[..clients_only].iter().filter(move |s| {
                s.port == f.ports[node] && s.connected >= fo.killed_at && s.connected < next_kill
            })
        };
        let first = |g: usize| on(fo.promoted).filter_map(|s| s.first[g]).min();
        let drawn: usize = on(fo.promoted)
            .map(|s| s.snowflake.len() + s.segment.iter().map(Vec::len).sum::<usize>())
            .sum();
        let prev_kill = k
            .checked_sub(1)
            .map_or(Duration::ZERO, |p| failovers[p].killed_at);
        let last_before = sessions
            .iter()
            .filter(|s| {
                s.port == f.ports[fo.killed]
                    && s.connected >= prev_kill
                    && s.connected < fo.killed_at
            })
            .filter_map(|s| s.last[0].max(s.last[1]))
            .max();
        let old_after: Vec<&Session> = on(fo.killed).collect();
        let old_ids: usize = old_after
            .iter()
            .map(|s| s.snowflake.len() + s.segment.iter().map(Vec::len).sum::<usize>())
            .sum();
        let tli_after: HashSet<i32> = on(fo.promoted).map(|s| s.tli).collect();
        let unavailable = |t: Option<Duration>| {
            t.map_or("never".to_owned(), |t| secs(t.saturating_sub(fo.killed_at)))
        };
        println!(
            "  failover {}: kill -9 of {}'s postmaster (pid {}, timeline {}) and keeper at {}; {} promoted \
             but fenced read-only after {}, writable after {}, its first snowflake id after {}, first segment number after {} \
             (timeline {:?}), {} values from it before the next kill; last value from {} at {} \
             (kill {}); {} sessions on {} after the kill drew {} values; {} secondary again \
             after {}",
            k + 1,
            NODES[fo.killed],
            fo.pid,
            fo.tli_before,
            secs(fo.killed_at),
            NODES[fo.promoted],
            fo.fenced_at
                .map_or("-".into(), |t| secs(t.saturating_sub(fo.killed_at))),
            secs(fo.promoted_at - fo.killed_at),
            unavailable(first(0)),
            unavailable(first(1)),
            tli_after,
            drawn,
            NODES[fo.killed],
            last_before.map_or("-".into(), secs),
            secs(fo.killed_at),
            old_after.len(),
            NODES[fo.killed],
            old_ids,
            NODES[fo.killed],
            fo.rejoined_at
                .map_or("-".into(), |t| secs(t.saturating_sub(fo.killed_at))),
        );
        if let Some(probe) = &fo.fence_probe {
            println!(
                "    while fenced, a direct connection to {}: {probe}",
                NODES[fo.promoted]
            );
        }
        assert_ne!(fo.promoted, fo.killed);
        for (g, what) in ["snowflake ids", "segment numbers"].iter().enumerate() {
            match first(g) {
                None => problems.push(format!(
                    "failover {}: no {what} from the new primary {} afterwards",
                    k + 1,
                    NODES[fo.promoted]
                )),
                Some(t) if t - fo.killed_at > BOUND => problems.push(format!(
                    "failover {}: {what} unavailable for {} (bound {BOUND:?})",
                    k + 1,
                    secs(t - fo.killed_at)
                )),
                Some(_) => {}
            }
        }
        if tli_after.iter().any(|t| *t <= fo.tli_before) {
            problems.push(format!(
                "failover {}: sessions on the promoted node on timeline {tli_after:?}, not past {}",
                k + 1,
                fo.tli_before
            ));
        }
    }
    println!("  snowflake: {snowflake_count} ids; {snowflake_tls}");
    for l in &segment_lines {
        println!("{l}");
    }
    println!(
        "  clients: {} connections, {} failed connection attempts, {} failed statements",
        stats.connects, stats.connect_failures, stats.statement_errors
    );
    for (e, n) in &stats.errors {
        println!("    {n} x {e}");
    }
    println!(
        "  duplicates and order violations: {}; total run time {}",
        problems.len(),
        secs(started.elapsed())
    );
    assert!(
        problems.is_empty(),
        "{} problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
    assert!(snowflake_count > 0);
    assert_eq!(failovers.len(), FAILOVERS);
}
