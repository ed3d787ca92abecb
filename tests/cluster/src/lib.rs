//! Throwaway PostgreSQL 15 servers for idgen's multi-connection, restart and start-up tests.
//!
//! A [`Cluster`] is a fresh `initdb` in its own directory under the system temp dir, owned by
//! the `postgres` user when the tests run as root (PostgreSQL refuses to run as root), listening
//! only on 127.0.0.1 at a free port. It is stopped (`-m immediate`) and removed on drop.

pub mod bench;

use std::fs;
use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use postgres::types::{FromSql, ToSql};

pub mod monitoring;
pub mod registry;

/// Directory of the PostgreSQL server programs the tests run: Debian's 15, unless `IDGEN_PG_BIN`
/// names another installation (16 or 18 from `scripts/pg-versions.sh`, or a relocated copy, so
/// that two builds of idgen can be tested at once).
pub fn pg_bin() -> String {
    std::env::var("IDGEN_PG_BIN").unwrap_or_else(|_| "/usr/lib/postgresql/15/bin".to_owned())
}

/// The lines of `IDGEN_PG_EXTRA_CONF` (settings of postgresql.conf, one a line), which
/// [`Cluster::init_from`] writes into every server it makes, after the harness's defaults and
/// before the test's own settings (a copy made by [`Cluster::standby_of`] or
/// [`Cluster::clone_of`] has them from its primary). For settings a whole run needs, such as
/// CloudNativePG's `extension_control_path` and `dynamic_library_path` when idgen is loaded from
/// its unpacked OCI image (`scripts/image-check.sh`).
fn extra_conf() -> Vec<String> {
    let conf = std::env::var("IDGEN_PG_EXTRA_CONF").unwrap_or_default();
    let mut lines: Vec<String> = conf
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_owned)
        .collect();
    if !lines.is_empty() {
        lines.insert(0, "# IDGEN_PG_EXTRA_CONF".to_owned());
    }
    lines
}

/// One throwaway server.
pub struct Cluster {
    dir: PathBuf,
    /// The installation's programs ([`pg_bin`] unless made by [`Cluster::init_from`]).
    bin: String,
    port: std::sync::atomic::AtomicU16,
    /// Environment of the server processes (e.g. libfaketime's).
    env: Vec<(String, String)>,
}

/// The `application_name` a standby made by [`Cluster::standby_of`] streams as.
pub const STANDBY_NAME: &str = "idgen_standby";

/// Debian's libfaketime (package `faketime`), preloaded into a server by [`Cluster::fake_clock`].
pub const LIBFAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

/// The clock of a server running under libfaketime: an offset from the real time, read from a
/// file that every server process re-reads at least once a second.
pub struct FakeClock {
    spec: PathBuf,
}

impl FakeClock {
    /// How long until every server process has picked up a change (libfaketime's cache).
    pub const PICKUP: std::time::Duration = std::time::Duration::from_millis(1500);

    /// Sets the server's clock to the real time plus `secs` (negative: behind).
    pub fn set_offset_secs(&self, secs: f64) {
        fs::write(&self.spec, format!("{secs:+.3}\n")).expect("write the faketime spec");
    }
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { geteuid() == 0 }
}

extern "C" {
    fn geteuid() -> u32;
}

/// A PostgreSQL program (`pg_dump`, `psql`, ...) from [`pg_bin`], run as the `postgres` user
/// when we are root, as ourselves otherwise, with [`own_libpq`].
pub fn as_postgres(program: &str) -> Command {
    as_postgres_from(&pg_bin(), program)
}

/// [`as_postgres`] for the installation whose programs are in `bindir` ([`Cluster::program`]).
fn as_postgres_from(bindir: &str, program: &str) -> Command {
    let path = format!("{bindir}/{program}");
    let mut c = if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--", &path]);
        c
    } else {
        Command::new(path)
    };
    own_libpq(&mut c, bindir);
    c
}

/// Puts the libpq of the installation in `bindir` first in `cmd`'s library path when that
/// installation carries one (the 16 and 18 that `scripts/pg-versions.sh` unpacks do; Debian's 15
/// uses the system's). idgen links `libpq.so.5`, and the server loads it with idgen's library
/// into its global symbol scope, so the walreceiver's libpq calls bind to the same library: it
/// must be the one the server was built with, as it is in a distribution's packages. Debian's
/// libpq 15 in a server of 18 makes every standby fail (`invalid connection option
/// "sslnegotiation"`, an option `pg_basebackup -R` of 17 and later writes).
fn own_libpq(cmd: &mut Command, bindir: &str) {
    let libdir = Path::new(bindir).join("../lib");
    if libdir.join("libpq.so.5").exists() {
        let mut path = std::ffi::OsString::from(libdir);
        if let Some(rest) = std::env::var_os("LD_LIBRARY_PATH") {
            path.push(":");
            path.push(rest);
        }
        cmd.env("LD_LIBRARY_PATH", path);
    }
}

fn run(mut cmd: Command, what: &str) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run: {e}"));
    out
}

/// A port on 127.0.0.1 that nothing listens on now. Taken below Linux's ephemeral range
/// (32768-60999), so that no outgoing connection picks it as its local port before the server
/// binds it (which failed a start now and then), and spread by process id, so that test
/// processes running side by side try different ports first. Also for the other servers a
/// test starts (pgbouncer, etcd, Patroni's REST API): one counter per process, so no two callers
/// in a test process get the same port.
pub fn free_port() -> u16 {
    const FIRST: u32 = 20_000;
    const COUNT: u32 = 12_000;
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let offset = std::process::id() % 600 * 20;
    for _ in 0..COUNT {
        let port = (FIRST + (offset + NEXT.fetch_add(1, Ordering::Relaxed)) % COUNT) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port from {FIRST} to {}", FIRST + COUNT - 1);
}

/// A new directory `idgen-<tag>-<pid>-<n>-<nanos>` under the system temp dir, owned by the
/// `postgres` user when we are root (servers and the programs beside them write in it).
pub fn unique_dir(tag: &str) -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let dir = std::env::temp_dir().join(format!(
        "idgen-{tag}-{}-{}-{nanos}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    fs::create_dir_all(&dir).expect("create cluster dir");
    if is_root() {
        let ok = Command::new("chown")
            .args(["postgres:postgres", dir.to_str().unwrap()])
            .status();
        assert!(
            ok.map(|s| s.success()).unwrap_or(false),
            "chown postgres {dir:?}"
        );
    }
    dir
}

impl Cluster {
    /// initdb and start a server with `settings` (lines of postgresql.conf) appended.
    /// Panics with the server log if it does not start.
    pub fn start(tag: &str, settings: &[&str]) -> Cluster {
        let c = Cluster::init(tag, settings);
        c.start_server();
        c
    }

    /// A started server preloading idgen with worker id `worker_id`, `settings` appended, and
    /// the extension created in database `postgres`: what most tests start from.
    pub fn with_idgen(tag: &str, worker_id: u32, settings: &[&str]) -> Cluster {
        let worker = format!("idgen.worker_id = {worker_id}");
        let mut all = vec!["shared_preload_libraries = 'idgen'", worker.as_str()];
        all.extend_from_slice(settings);
        let c = Cluster::start(tag, &all);
        c.create_db_with_idgen("postgres");
        c
    }

    /// `pg_ctl start` of an initialized or stopped server; panics with the log if it fails.
    pub fn start_server(&self) {
        for _ in 0..5 {
            let out = self.pg_ctl_start();
            if out.status.success() {
                return;
            }
            // Another process took the port since it was picked: take another one.
            if !self.log().contains("could not create any TCP/IP sockets") {
                break;
            }
            self.port.store(free_port(), Ordering::Relaxed);
            self.append_settings(&[&format!("port = {}", self.port())]);
        }
        panic!("server did not start:\n{}", self.log());
    }

    /// initdb only; `settings` are written to postgresql.conf. Start with [`Cluster::pg_ctl_start`].
    pub fn init(tag: &str, settings: &[&str]) -> Cluster {
        Cluster::init_from(&pg_bin(), tag, settings)
    }

    /// [`Cluster::init`] with the programs of the installation in `bindir` (another major
    /// version, for `pg_upgrade`).
    pub fn init_from(bindir: &str, tag: &str, settings: &[&str]) -> Cluster {
        let c = Cluster::new(bindir, tag);
        let mut initdb = c.program("initdb");
        initdb.args([
            "-D",
            c.data().to_str().unwrap(),
            "-U",
            "postgres",
            "-A",
            "trust",
            "--no-sync",
            "-E",
            "UTF8",
            "--locale=C",
        ]);
        c.create_data(initdb, "initdb");
        c.append_settings(&[
            "\n# idgen test cluster",
            "listen_addresses = '127.0.0.1'",
            "fsync = off\nmax_connections = 40\nlog_min_messages = warning",
        ]);
        let extra = extra_conf();
        c.append_settings(&extra.iter().map(String::as_str).collect::<Vec<_>>());
        c.append_own_settings(settings);
        c
    }

    /// A hot standby of `primary`, made with `pg_basebackup -R` and started: it streams from the
    /// primary as `application_name` [`STANDBY_NAME`] (for `synchronous_standby_names`). The
    /// primary's postgresql.conf is copied; `settings` are appended after this server's own port
    /// and socket directory, so they win.
    pub fn standby_of(primary: &Cluster, tag: &str, settings: &[&str]) -> Cluster {
        let c = Cluster::base_backup(primary, tag, settings, true);
        c.start_server();
        c
    }

    /// A copy of `primary` made with `pg_basebackup` while it runs, not started and not a
    /// standby: started, it recovers to the end of the backup and becomes a second primary with
    /// the same system identifier, timeline and postgresql.conf (`settings` appended).
    pub fn clone_of(primary: &Cluster, tag: &str, settings: &[&str]) -> Cluster {
        Cluster::base_backup(primary, tag, settings, false)
    }

    fn base_backup(primary: &Cluster, tag: &str, settings: &[&str], standby: bool) -> Cluster {
        let c = Cluster::new(&primary.bin, tag);
        let mut backup = c.program("pg_basebackup");
        backup.args(["-D", c.data().to_str().unwrap()]);
        if standby {
            backup.arg("-R");
        }
        backup.args([
            "-X",
            "stream",
            "-c",
            "fast",
            "-d",
            &format!(
                "host=127.0.0.1 port={} user=postgres application_name={STANDBY_NAME}",
                primary.port()
            ),
        ]);
        c.create_data(backup, "pg_basebackup");
        c.append_settings(&["\n# idgen test copy"]);
        c.append_own_settings(settings);
        c
    }

    /// `kill -9` of the postmaster: the server crashes (its backends exit when they notice).
    pub fn kill_postmaster(&self) {
        let killed = Command::new("kill")
            .args(["-9", &self.postmaster_pid().to_string()])
            .status()
            .expect("kill");
        assert!(killed.success(), "kill -9 of the postmaster");
    }

    /// Starts the server again after [`Cluster::kill_postmaster`]: until the orphaned backends
    /// have exited the old shared memory is in use and a new postmaster refuses to start.
    pub fn start_after_crash(&self) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while !self.pg_ctl_start().status.success() {
            assert!(
                std::time::Instant::now() < deadline,
                "no restart:\n{}",
                self.log()
            );
            std::thread::sleep(std::time::Duration::from_millis(300));
        }
    }

    fn new(bindir: &str, tag: &str) -> Cluster {
        Cluster {
            dir: unique_dir(tag),
            bin: bindir.to_owned(),
            port: std::sync::atomic::AtomicU16::new(free_port()),
            env: Vec::new(),
        }
    }

    /// Runs the command that creates the data directory (initdb, pg_basebackup).
    fn create_data(&self, cmd: Command, what: &str) {
        let out = run(cmd, what);
        assert!(
            out.status.success(),
            "{what} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// This server's port and socket directory, then `settings`.
    fn append_own_settings(&self, settings: &[&str]) {
        self.append_settings(&[
            &format!("port = {}", self.port()),
            &format!("unix_socket_directories = '{}'", self.dir.display()),
        ]);
        self.append_settings(settings);
    }

    /// Appends `settings` to postgresql.conf (they take effect at the next start or reload).
    pub fn append_settings(&self, settings: &[&str]) {
        let mut conf = fs::OpenOptions::new()
            .append(true)
            .open(self.data().join("postgresql.conf"))
            .unwrap();
        for s in settings {
            writeln!(conf, "{s}").unwrap();
        }
    }

    /// `program` of this server's installation, as [`as_postgres`] runs it.
    pub fn program(&self, program: &str) -> Command {
        as_postgres_from(&self.bin, program)
    }

    /// Creates the empty file `name` (`recovery.signal`, `standby.signal`) in the data
    /// directory of a server not started yet, owned by `postgres`.
    pub fn write_signal(&self, name: &str) {
        let path = self.data().join(name);
        fs::write(&path, "").unwrap();
        let owned = Command::new("chown")
            .args(["postgres:postgres", path.to_str().unwrap()])
            .status()
            .unwrap();
        assert!(owned.success(), "chown {path:?}");
    }

    /// `pg_ctl promote -w`: the standby becomes a primary.
    pub fn promote(&self) {
        let mut cmd = self.program("pg_ctl");
        cmd.args(["-D", self.data().to_str().unwrap(), "-w", "promote"]);
        let out = run(cmd, "pg_ctl promote");
        assert!(out.status.success(), "promote failed:\n{}", self.log());
    }

    /// Makes the server (from its next start) run under libfaketime with a clock offset read
    /// from a file in the cluster directory, initially the real time. CLOCK_MONOTONIC is left
    /// alone, as a real clock step leaves it alone.
    pub fn fake_clock(&mut self) -> FakeClock {
        let clock = FakeClock {
            spec: self.dir.join("faketime.spec"),
        };
        clock.set_offset_secs(0.0);
        self.env = vec![
            ("LD_PRELOAD".into(), LIBFAKETIME.into()),
            (
                "FAKETIME_TIMESTAMP_FILE".into(),
                clock.spec.display().to_string(),
            ),
            ("FAKETIME_CACHE_DURATION".into(), "1".into()),
            ("FAKETIME_DONT_FAKE_MONOTONIC".into(), "1".into()),
        ];
        clock
    }

    /// Sets an environment variable of the server processes, from the next start.
    pub fn set_env(&mut self, key: &str, value: &str) {
        self.env.retain(|(k, _)| k != key);
        self.env.push((key.to_owned(), value.to_owned()));
    }

    /// The postmaster's process id, from `postmaster.pid`.
    pub fn postmaster_pid(&self) -> u32 {
        let pid_file = fs::read_to_string(self.data().join("postmaster.pid"))
            .expect("postmaster.pid of a running server");
        pid_file.lines().next().unwrap().trim().parse().unwrap()
    }

    /// `pg_ctl start -w`; returns its output (the server log has the reasons for a failure).
    pub fn pg_ctl_start(&self) -> Output {
        let mut cmd = self.program("pg_ctl");
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        cmd.args([
            "-D",
            self.data().to_str().unwrap(),
            "-l",
            self.log_path().to_str().unwrap(),
            "-w",
            "-t",
            "60",
            "start",
        ]);
        run(cmd, "pg_ctl start")
    }

    /// `pg_ctl stop -m <mode>` (smart, fast, immediate). A fast or immediate stop of a running
    /// server must finish within [`Cluster::STOP_LIMIT`]: idgen's workers obey shutdown
    /// whatever they are waiting for (a synchronous standby that is gone, say); panics if not.
    pub fn stop(&self, mode: &str) {
        let running = self.data().join("postmaster.pid").exists();
        let started = std::time::Instant::now();
        let mut cmd = self.program("pg_ctl");
        cmd.args([
            "-D",
            self.data().to_str().unwrap(),
            "-m",
            mode,
            "-w",
            "-t",
            "60",
            "stop",
        ]);
        let _ = run(cmd, "pg_ctl stop");
        let took = started.elapsed();
        if running && mode != "smart" && took > Self::STOP_LIMIT && !std::thread::panicking() {
            panic!(
                "pg_ctl stop -m {mode} took {took:?} (limit {:?}):\n{}",
                Self::STOP_LIMIT,
                self.log()
            );
        }
    }

    /// The longest a fast or immediate stop may take.
    pub const STOP_LIMIT: std::time::Duration = std::time::Duration::from_secs(10);

    /// The data directory.
    pub fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    fn log_path(&self) -> PathBuf {
        self.dir.join("server.log")
    }

    /// The server log so far.
    pub fn log(&self) -> String {
        fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// The directory of the cluster (its data directory, log and socket are inside).
    pub fn dir(&self) -> PathBuf {
        self.dir.clone()
    }

    /// The TCP port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port.load(Ordering::Relaxed)
    }

    /// A libpq-style connection string for `db`.
    pub fn conninfo(&self, db: &str) -> String {
        format!(
            "host=127.0.0.1 port={} user=postgres dbname={db} application_name=idgen-tests",
            self.port()
        )
    }

    /// A new connection to database `db` as the superuser `postgres`.
    pub fn connect(&self, db: &str) -> postgres::Client {
        self.connect_as(db, "postgres")
    }

    /// A new connection to database `db` as `role` (which must be able to log in).
    pub fn connect_as(&self, db: &str, role: &str) -> postgres::Client {
        let conninfo = self
            .conninfo(db)
            .replace("user=postgres", &format!("user={role}"));
        postgres::Client::connect(&conninfo, postgres::NoTls).unwrap_or_else(|e| {
            panic!(
                "connect to {db} as {role} on port {}: {e}\n{}",
                self.port(),
                self.log()
            )
        })
    }

    /// Creates database `db` and `CREATE EXTENSION idgen` in it.
    pub fn create_db_with_idgen(&self, db: &str) {
        if db != "postgres" {
            self.connect("postgres")
                .batch_execute(&format!("CREATE DATABASE {db}"))
                .unwrap();
        }
        self.connect(db)
            .batch_execute("CREATE EXTENSION idgen")
            .unwrap();
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop("immediate");
        if std::env::var_os("IDGEN_KEEP_CLUSTERS").is_none() {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

/// One-value queries: the first column of the only row a statement returns, as `T`, with a
/// panic naming the statement when it fails. `client.one::<i64>("SELECT ...")`.
pub trait One {
    /// The value `sql` returns.
    fn one<T: for<'a> FromSql<'a>>(&mut self, sql: &str) -> T;
    /// The value `sql` returns with `params` bound to `$1`, `$2`, ...
    fn one_with<T: for<'a> FromSql<'a>>(&mut self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> T;
}

impl One for postgres::Client {
    fn one<T: for<'a> FromSql<'a>>(&mut self, sql: &str) -> T {
        self.one_with(sql, &[])
    }

    fn one_with<T: for<'a> FromSql<'a>>(&mut self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> T {
        self.query_one(sql, params)
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
            .get(0)
    }
}

/// The first column of every row `sql` returns, in order.
pub fn column<T>(client: &mut postgres::Client, sql: &str) -> Vec<T>
where
    T: for<'a> postgres::types::FromSql<'a>,
{
    client
        .query(sql, &[])
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .iter()
        .map(|r| r.get(0))
        .collect()
}

/// The SQLSTATE of a failed statement, e.g. `"55000"`. Panics when it succeeded.
pub fn sqlstate<T: std::fmt::Debug>(result: Result<T, postgres::Error>) -> String {
    match result {
        Ok(v) => panic!("expected an error, got {v:?}"),
        Err(e) => e
            .code()
            .map(|c| c.code().to_owned())
            .unwrap_or_else(|| panic!("no SQLSTATE: {e}")),
    }
}

/// The `DbError` of a failed statement (message, detail, hint). Panics when it succeeded.
pub fn db_error<T: std::fmt::Debug>(
    result: Result<T, postgres::Error>,
) -> postgres::error::DbError {
    match result {
        Ok(v) => panic!("expected an error, got {v:?}"),
        Err(e) => e
            .as_db_error()
            .cloned()
            .unwrap_or_else(|| panic!("not a server error: {e}")),
    }
}

/// Runs the Snowflake generator ahead of the clock: `batches` reservations of `count` ids each
/// (`LIMIT 1` stops the set-returning function after its first row, but the whole batch is
/// reserved). Returns the last id reserved (`snowflake_currval()`).
pub fn push_generator_ahead(client: &mut postgres::Client, batches: usize, count: i32) -> i64 {
    for _ in 0..batches {
        client
            .execute("SELECT snowflake_nextvals($1) LIMIT 1", &[&count])
            .unwrap();
    }
    client.one("SELECT snowflake_currval()")
}

/// `pg_config --pkglibdir`-relative path of pg_regress (from postgresql-server-dev-15).
pub fn pg_regress_path() -> PathBuf {
    let out = Command::new(format!("{}/pg_config", pg_bin()))
        .arg("--pkglibdir")
        .output()
        .expect("pg_config");
    let libdir = String::from_utf8(out.stdout).unwrap();
    Path::new(libdir.trim()).join("pgxs/src/test/regress/pg_regress")
}

/// Snowflake default layout helpers, computed independently of the extension.
pub mod twitter {
    /// Worker id bits of an id in the default layout.
    pub fn worker_of(id: i64) -> i64 {
        (id >> 12) & 1023
    }

    /// Tick (ms since the layout's epoch) of an id in the default layout.
    pub fn tick_of(id: i64) -> i64 {
        id >> 22
    }
}

/// Polls `check` every 100 ms until it returns `Some`, for at most `timeout`; panics with
/// `what` after that.
pub fn wait_for<T>(
    what: &str,
    timeout: std::time::Duration,
    mut check: impl FnMut() -> Option<T>,
) -> T {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// Panics, naming `label`, at the first number of `numbers` not above the one before it.
pub fn assert_increasing(label: &str, numbers: &[i64]) {
    if let Some(w) = numbers.windows(2).find(|w| w[0] >= w[1]) {
        panic!("{label}: {} was followed by {}", w[0], w[1]);
    }
}

/// Panics, naming `label`, at the first number of `all` seen twice; else returns how many
/// numbers there were.
pub fn assert_distinct<'a>(label: &str, all: impl IntoIterator<Item = &'a i64>) -> usize {
    let mut seen = std::collections::HashSet::new();
    for v in all {
        assert!(seen.insert(*v), "{label}: number {v} was handed out twice");
    }
    seen.len()
}

/// Every file under `dir` (subdirectories included) whose extension is `ext`, sorted.
pub fn files_with_extension(dir: &std::path::Path, ext: &str) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("read {d:?}: {e}")) {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|x| x == ext) {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}
