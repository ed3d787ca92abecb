//! idgen behind pgbouncer, with Debian's pgbouncer (1.18 on Debian 12).
//! Each test starts its own server and its own pgbouncer (as `postgres`, on a free port, with
//! `auth_type = trust`, no Unix socket), never the packaged service, and kills it when done.
//!
//! - Session pooling with `server_reset_query = DISCARD ALL` and one server connection: the
//!   second client lands on the first one's backend (same `pg_backend_pid()`) and gets 55000
//!   from `snowflake_currval()`, `segment_currval('order_no')` and `currval('s')` alike; so does
//!   a client after its own `DISCARD SEQUENCES` or `DISCARD ALL` sent through pgbouncer, and a
//!   direct connection.
//! - Transaction pooling, 8 clients on 2 server connections, short transactions of
//!   `INSERT ... RETURNING id, no` into a table whose defaults draw both generators: every id and
//!   number is distinct, every returned pair is in the table, the currvals inside the
//!   transaction equal what RETURNING gave. A currval in a later transaction is answered by
//!   whichever backend the pooler picks: the counts of "own value", "another client's value"
//!   and 55000 are printed; on a pool of one backend the second client's id is what the first
//!   client's later currval returns, always. Statement pooling: a single-statement
//!   `INSERT ... RETURNING` works, a transaction block is refused.
//! - psycopg 3 (PyPI, in the recipe's venv) through transaction pooling with
//!   `prepare_threshold=None`: all ids distinct; with the default threshold, the second client on
//!   a one-backend pool fails to prepare the statement the first one left there (42P05), the
//!   failure that pgbouncer before 1.21 gives psycopg's prepared statements.
//!
//! pgbouncer's configuration is read from `tests/recipes/pgbouncer/*.ini`, templates whose
//! placeholders the test fills in; docs/operations/poolers.md includes those files.
//!
//! Run by `scripts/recipes/pgbouncer.sh`, which installs pgbouncer and the venv.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::io::Read;
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use idgen_cluster_tests::{free_port, sqlstate, wait_for, Cluster, One};

/// Sanity bound for every wait (not a performance claim).
const BOUND: Duration = Duration::from_secs(60);

/// Transaction pooling: clients, transactions per client, server connections.
const CLIENTS: usize = 8;
const TRANSACTIONS: usize = 150;
const POOL: usize = 2;

/// pgbouncer.ini for session pooling: database `sess`.
const SESSION_INI: &str = include_str!("../../recipes/pgbouncer/session.ini");

/// pgbouncer.ini for transaction pooling (`txn`) and statement pooling (`stmt`).
const TRANSACTION_INI: &str = include_str!("../../recipes/pgbouncer/transaction.ini");

/// The database lines of the recipes, which [`small_pools`] gives the test's pool sizes.
const SESS_LINE: &str = "sess = host=127.0.0.1 port={{port}} dbname=postgres pool_mode=session\n";
const TXN_LINE: &str = "txn = host=127.0.0.1 port={{port}} dbname=postgres pool_mode=transaction\n";

/// `ini` (one of the recipes) with the test's small pools: `sess` on one server connection, so
/// that the next client gets the previous client's backend; `txn` on [`POOL`]; and `txn_one`,
/// the same database as `txn` on one server connection, where every client's transactions run
/// on the same backend. The recipes keep pgbouncer's default pool size.
fn small_pools(ini: &str) -> String {
    let mut out = ini.to_owned();
    if ini.contains("\nsess = ") {
        assert!(ini.contains(SESS_LINE), "session.ini: {SESS_LINE}");
        out = out.replace(SESS_LINE, &SESS_LINE.replace('\n', " pool_size=1\n"));
    }
    if ini.contains("\ntxn = ") {
        assert!(ini.contains(TXN_LINE), "transaction.ini: {TXN_LINE}");
        let pooled = TXN_LINE.replace('\n', &format!(" pool_size={POOL}\n"));
        let one = TXN_LINE
            .replacen("txn =", "txn_one =", 1)
            .replace('\n', " pool_size=1\n");
        out = out.replace(TXN_LINE, &(pooled + &one));
    }
    out
}

/// The page's two ways to get the id and the number under transaction pooling: an
/// `INSERT ... RETURNING` with the client as `$1`, and a transaction of `BEGIN`, an `INSERT`,
/// the currvals and `COMMIT`.
const RETURNING: &str = include_str!("../../recipes/pgbouncer/returning.sql");

/// [`RETURNING`]'s statements, each without its comments and its `;`.
fn returning_statements() -> Vec<String> {
    let code: String = RETURNING
        .lines()
        .filter(|l| !l.trim_start().starts_with("--"))
        .collect::<Vec<_>>()
        .join("\n");
    let all: Vec<String> = code
        .split(';')
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect();
    assert_eq!(all.len(), 5, "returning.sql: {all:?}");
    all
}

/// The application's role: no superuser, in the auth_file beside `postgres`.
const APP: &str = "app";

const CREATE_ORDERS: &str = "CREATE TABLE orders (
    id bigint PRIMARY KEY DEFAULT snowflake_nextval(),
    no bigint UNIQUE DEFAULT segment_nextval('order_no'),
    client int NOT NULL)";

/// A process that is killed (SIGKILL) and reaped when dropped.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The uid and gid of `postgres`, when we are root (pgbouncer refuses to run as root).
fn postgres_ids() -> Option<(u32, u32)> {
    let uid = String::from_utf8(Command::new("id").arg("-u").output().unwrap().stdout).unwrap();
    if uid.trim() != "0" {
        return None;
    }
    let passwd = fs::read_to_string("/etc/passwd").unwrap();
    let line = passwd
        .lines()
        .find(|l| l.starts_with("postgres:"))
        .expect("a postgres user (Debian's postgresql package makes it)");
    let f: Vec<&str> = line.split(':').collect();
    Some((f[2].parse().unwrap(), f[3].parse().unwrap()))
}

/// One pgbouncer process in front of `cluster`'s database `postgres`.
struct Pgbouncer {
    child: Option<Killed>,
    dir: PathBuf,
    port: u16,
}

impl Pgbouncer {
    /// Starts pgbouncer with the configuration `template` (one of tests/recipes/pgbouncer/),
    /// its `{{port}}` the server's port, `{{listen_port}}` a free port for pgbouncer and
    /// `{{dir}}` a scratch directory; waits until it listens.
    fn start(cluster: &Cluster, template: &str) -> Pgbouncer {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let dir =
            std::env::temp_dir().join(format!("idgen-pgbouncer-{}-{nanos}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let ids = postgres_ids();
        if let Some((uid, gid)) = ids {
            std::os::unix::fs::chown(&dir, Some(uid), Some(gid)).unwrap();
        }
        // The auth_file: the users pgbouncer admits (with trust, any password), readable by
        // pgbouncer alone, as every auth_file with passwords must be.
        let userlist = dir.join("userlist.txt");
        fs::write(&userlist, format!("\"postgres\" \"\"\n\"{APP}\" \"\"\n")).unwrap();
        fs::set_permissions(&userlist, fs::Permissions::from_mode(0o600)).unwrap();
        if let Some((uid, gid)) = ids {
            std::os::unix::fs::chown(&userlist, Some(uid), Some(gid)).unwrap();
        }
        let mut pgb = Pgbouncer {
            child: None,
            dir,
            port: 0,
        };
        for _ in 0..5 {
            pgb.port = free_port();
            let ini = template
                .replace("{{port}}", &cluster.port().to_string())
                .replace("{{listen_port}}", &pgb.port.to_string())
                .replace("{{dir}}", &pgb.dir.display().to_string());
            assert!(!ini.contains("{{"), "a placeholder left in:\n{ini}");
            let ini_path = pgb.dir.join("pgbouncer.ini");
            fs::write(&ini_path, ini).unwrap();
            let _ = fs::remove_file(pgb.dir.join("pgbouncer.log"));
            let mut cmd = Command::new("pgbouncer");
            cmd.arg(&ini_path)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            if let Some((uid, gid)) = ids {
                cmd.uid(uid).gid(gid);
            }
            let mut child = Killed(
                cmd.spawn()
                    .expect("run pgbouncer (Debian package pgbouncer)"),
            );
            let listening = format!("listening on 127.0.0.1:{}", pgb.port);
            let up = wait_for("pgbouncer to listen or exit", BOUND, || {
                if child.0.try_wait().unwrap().is_some() {
                    return Some(false);
                }
                let ok = pgb.log().contains(&listening)
                    && TcpStream::connect(("127.0.0.1", pgb.port)).is_ok();
                ok.then_some(true)
            });
            if up {
                pgb.child = Some(child);
                return pgb;
            }
            // Another process took the port since it was picked: take another one.
            if !pgb.log().contains("Address already in use") {
                panic!("pgbouncer did not start:\n{}", pgb.log());
            }
        }
        panic!("pgbouncer found no free port:\n{}", pgb.log());
    }

    fn log(&self) -> String {
        fs::read_to_string(self.dir.join("pgbouncer.log")).unwrap_or_default()
    }

    /// A libpq-style connection string for pgbouncer's database `alias`.
    fn conninfo(&self, alias: &str) -> String {
        self.conninfo_as(alias, "postgres")
    }

    /// [`Pgbouncer::conninfo`] for the client `user`.
    fn conninfo_as(&self, alias: &str, user: &str) -> String {
        format!(
            "host=127.0.0.1 port={} user={user} dbname={alias} connect_timeout=60",
            self.port
        )
    }

    fn connect(&self, alias: &str) -> postgres::Client {
        self.connect_as(alias, "postgres")
    }

    /// A client `user` of pgbouncer's database `alias`.
    fn connect_as(&self, alias: &str, user: &str) -> postgres::Client {
        postgres::Client::connect(&self.conninfo_as(alias, user), postgres::NoTls).unwrap_or_else(
            |e| {
                panic!(
                    "connect to pgbouncer's {alias} as {user}: {e}\n{}",
                    self.log()
                )
            },
        )
    }
}

impl Drop for Pgbouncer {
    fn drop(&mut self) {
        self.child.take();
        if std::env::var_os("IDGEN_KEEP_CLUSTERS").is_none() {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

const CURRVALS: [&str; 3] = [
    "SELECT snowflake_currval()",
    "SELECT segment_currval('order_no')",
    "SELECT currval('s')",
];

/// Draws `snowflake_nextval()`, `segment_nextval('order_no')` and `nextval('s')`, and checks
/// that the three currvals now return them.
fn draw_all(client: &mut postgres::Client) -> [i64; 3] {
    let drawn: [i64; 3] = [
        client.one("SELECT snowflake_nextval()"),
        client.one("SELECT segment_nextval('order_no')"),
        client.one("SELECT nextval('s')"),
    ];
    for (sql, want) in CURRVALS.iter().zip(drawn) {
        assert_eq!(client.one::<i64>(sql), want, "{sql} right after drawing");
    }
    drawn
}

/// The three currvals all raise 55000, as before the session's first draw.
fn assert_currvals_unset(client: &mut postgres::Client, when: &str) {
    for sql in CURRVALS {
        assert_eq!(
            sqlstate(client.query_one(sql, &[])),
            "55000",
            "{sql} {when}"
        );
    }
}

#[test]
#[ignore = "needs pgbouncer: run by scripts/recipes/pgbouncer.sh"]
fn session_pooling_discard_all_resets_every_currval() {
    let cluster = Cluster::with_idgen("pgb-session", 1, &[]);
    cluster
        .connect("postgres")
        .batch_execute(
            "SELECT segment_create('order_no', start => 1000, step => 100); CREATE SEQUENCE s",
        )
        .unwrap();

    // A direct connection: DISCARD SEQUENCES and DISCARD ALL forget idgen's currvals as they
    // forget currval('s').
    let mut direct = cluster.connect("postgres");
    assert_currvals_unset(&mut direct, "before the first draw (direct)");
    for discard in ["DISCARD SEQUENCES", "DISCARD ALL"] {
        draw_all(&mut direct);
        direct.batch_execute(discard).unwrap();
        assert_currvals_unset(&mut direct, &format!("after {discard} (direct)"));
    }
    drop(direct);

    assert!(SESSION_INI.contains("\nserver_reset_query = DISCARD ALL\n"));
    let pgb = Pgbouncer::start(&cluster, &small_pools(SESSION_INI));

    // Client 1 draws all three and leaves; pgbouncer sends DISCARD ALL to its backend and hands
    // it to client 2.
    let mut client1 = pgb.connect("sess");
    let pid1: i32 = client1.one("SELECT pg_backend_pid()");
    let drawn = draw_all(&mut client1);
    drop(client1);

    let mut client2 = pgb.connect("sess");
    let pid2: i32 = client2.one("SELECT pg_backend_pid()");
    assert_eq!(
        pid2, pid1,
        "the pool of one hands client 2 client 1's backend"
    );
    assert_currvals_unset(
        &mut client2,
        "for the next client after DISCARD ALL (pgbouncer)",
    );

    // A client's own DISCARD SEQUENCES / DISCARD ALL through pgbouncer.
    for discard in ["DISCARD SEQUENCES", "DISCARD ALL"] {
        draw_all(&mut client2);
        client2.batch_execute(discard).unwrap();
        assert_currvals_unset(
            &mut client2,
            &format!("after the client's {discard} (pgbouncer)"),
        );
    }

    // Once more through a client change, now that the backend has drawn several times.
    let again = draw_all(&mut client2);
    drop(client2);
    let mut client3 = pgb.connect("sess");
    assert_eq!(client3.one::<i32>("SELECT pg_backend_pid()"), pid1);
    assert_currvals_unset(&mut client3, "for the third client (pgbouncer)");
    println!(
        "session pooling: backend {pid1} served 3 clients; drawn {drawn:?} then {again:?}; \
         every currval raised 55000 for the next client"
    );
}

/// `sql` run with the simple query protocol (one message, no named statement): the first
/// column of its one row as i64, or the error's SQLSTATE.
fn simple_one(client: &mut postgres::Client, sql: &str) -> Result<Vec<i64>, String> {
    match client.simple_query(sql) {
        Ok(messages) => {
            let row = messages
                .iter()
                .find_map(|m| match m {
                    postgres::SimpleQueryMessage::Row(r) => Some(r),
                    _ => None,
                })
                .unwrap_or_else(|| panic!("{sql}: no row"));
            Ok((0..row.len())
                .map(|i| row.get(i).unwrap().parse().unwrap())
                .collect())
        }
        Err(e) => Err(e
            .code()
            .map(|c| c.code().to_owned())
            .unwrap_or_else(|| panic!("{sql}: {e}"))),
    }
}

/// What one client saw in its transactions.
#[derive(Default)]
struct ClientRun {
    /// (id, no) returned by each INSERT.
    returned: Vec<(i64, i64)>,
    /// Later transactions' snowflake_currval(): the client's own last id, another value, 55000.
    own: usize,
    other: Vec<i64>,
    unset: usize,
    /// Later transactions' segment_currval('order_no'), the same way.
    seg_own: usize,
    seg_other: Vec<i64>,
    seg_unset: usize,
}

#[test]
#[ignore = "needs pgbouncer: run by scripts/recipes/pgbouncer.sh"]
fn transaction_pooling_returning_is_right_currval_is_the_backends() {
    let started = Instant::now();
    let cluster = Cluster::with_idgen("pgb-txn", 2, &[]);
    cluster
        .connect("postgres")
        .batch_execute(&format!(
            "SELECT segment_create('order_no', start => 1000, step => 100); {CREATE_ORDERS}"
        ))
        .unwrap();
    let pgb = Pgbouncer::start(&cluster, &small_pools(TRANSACTION_INI));
    // The page's INSERT ... RETURNING, with the client as $1.
    let insert = returning_statements()[0].clone();
    assert_eq!(
        insert,
        "INSERT INTO orders (client) VALUES ($1) RETURNING id, no"
    );

    // One backend for two clients: what A's later currval returns is B's id, always.
    let mut a = pgb.connect("txn_one");
    let mut b = pgb.connect("txn_one");
    assert_eq!(
        simple_one(&mut a, "SELECT snowflake_currval()"),
        Err("55000".to_owned()),
        "currval on a backend that never drew"
    );
    let insert_one = |c: &mut postgres::Client, client: i32| -> (i64, i64) {
        let mut t = c.transaction().unwrap();
        let row = t.query_one(insert.as_str(), &[&client]).unwrap();
        t.commit().unwrap();
        (row.get(0), row.get(1))
    };
    let (id_a, no_a) = insert_one(&mut a, -1);
    let (id_b, no_b) = insert_one(&mut b, -2);
    assert_ne!(id_a, id_b);
    let later = simple_one(
        &mut a,
        "SELECT snowflake_currval(), segment_currval('order_no')",
    );
    assert_eq!(
        later,
        Ok(vec![id_b, no_b]),
        "A's currval in a later transaction is B's id and number (A drew {id_a}, {no_a})"
    );
    println!(
        "transaction pooling, one backend: A inserted ({id_a}, {no_a}), B inserted ({id_b}, \
         {no_b}); A's later snowflake_currval(), segment_currval() = {later:?}"
    );
    drop((a, b));

    // 8 clients on 2 server connections.
    let runs: Vec<ClientRun> = thread::scope(|s| {
        let handles: Vec<_> = (0..CLIENTS)
            .map(|i| {
                let pgb = &pgb;
                let insert = &insert;
                s.spawn(move || {
                    let mut c = pgb.connect("txn");
                    let mut run = ClientRun::default();
                    for _ in 0..TRANSACTIONS {
                        // A transaction keeps its server connection from BEGIN to COMMIT: the
                        // prepared INSERT and the currvals run on one backend.
                        let mut t = c.transaction().unwrap();
                        let row = t.query_one(insert.as_str(), &[&(i as i32)]).unwrap();
                        let (id, no): (i64, i64) = (row.get(0), row.get(1));
                        let cur = t
                            .query_one(
                                "SELECT snowflake_currval(), segment_currval('order_no')",
                                &[],
                            )
                            .unwrap();
                        assert_eq!(
                            (cur.get::<_, i64>(0), cur.get::<_, i64>(1)),
                            (id, no),
                            "currval in the inserting transaction"
                        );
                        t.commit().unwrap();
                        run.returned.push((id, no));

                        // A later transaction: any backend of the pool answers.
                        match simple_one(&mut c, "SELECT snowflake_currval()") {
                            Ok(v) if v[0] == id => run.own += 1,
                            Ok(v) => run.other.push(v[0]),
                            Err(code) if code == "55000" => run.unset += 1,
                            Err(code) => panic!("later snowflake_currval(): {code}"),
                        }
                        match simple_one(&mut c, "SELECT segment_currval('order_no')") {
                            Ok(v) if v[0] == no => run.seg_own += 1,
                            Ok(v) => run.seg_other.push(v[0]),
                            Err(code) if code == "55000" => run.seg_unset += 1,
                            Err(code) => panic!("later segment_currval(): {code}"),
                        }
                    }
                    run
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });

    let total = CLIENTS * TRANSACTIONS;
    let returned: Vec<(i64, i64)> = runs
        .iter()
        .flat_map(|r| r.returned.iter().copied())
        .collect();
    assert_eq!(returned.len(), total);
    let ids: HashSet<i64> = returned.iter().map(|r| r.0).collect();
    let nos: HashSet<i64> = returned.iter().map(|r| r.1).collect();
    assert_eq!(ids.len(), total, "duplicate ids");
    assert_eq!(nos.len(), total, "duplicate numbers");

    // The page's transaction, statement by statement through the pool of 2: the currvals are
    // the row it inserted.
    let statements = returning_statements();
    let mut c = pgb.connect("txn");
    c.batch_execute(&statements[1]).unwrap();
    c.batch_execute(&statements[2]).unwrap();
    let cur = c.query_one(statements[3].as_str(), &[]).unwrap();
    let (cur_id, cur_no): (i64, i64) = (cur.get(0), cur.get(1));
    c.batch_execute(&statements[4]).unwrap();
    drop(c);

    let mut direct = cluster.connect("postgres");
    assert_eq!(
        direct.one::<i64>(&format!(
            "SELECT count(*) FROM orders WHERE id = {cur_id} AND no = {cur_no} AND client = 42"
        )),
        1,
        "the page's transaction: its currvals ({cur_id}, {cur_no}) are the row it inserted"
    );
    let table: HashMap<i64, i64> = direct
        .query(
            "SELECT id, no FROM orders WHERE client >= 0 AND client <> 42",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(table.len(), total, "rows in the table");
    for (id, no) in &returned {
        assert_eq!(
            table.get(id),
            Some(no),
            "returned ({id}, {no}) is the row in the table"
        );
    }
    // A later currval that was not the client's own is still some client's id or number: the
    // last one drawn on the backend that answered.
    let all_nos: HashSet<i64> = nos.iter().copied().chain([no_a, no_b]).collect();
    let all_ids: HashSet<i64> = ids.iter().copied().chain([id_a, id_b]).collect();
    for r in &runs {
        assert_eq!(r.own + r.other.len() + r.unset, TRANSACTIONS);
        assert_eq!(r.seg_own + r.seg_other.len() + r.seg_unset, TRANSACTIONS);
        assert!(r.other.iter().all(|v| all_ids.contains(v)));
        assert!(r.seg_other.iter().all(|v| all_nos.contains(v)));
    }
    let sum = |f: &dyn Fn(&ClientRun) -> usize| runs.iter().map(f).sum::<usize>();
    println!(
        "transaction pooling: {CLIENTS} clients x {TRANSACTIONS} transactions on {POOL} server \
         connections: {} distinct ids, {} distinct numbers, every RETURNING pair in the table; \
         snowflake_currval() in the next transaction: own id {}, another client's id {}, 55000 \
         {}; segment_currval('order_no'): own {}, another's {}, 55000 {}",
        ids.len(),
        nos.len(),
        sum(&|r| r.own),
        sum(&|r| r.other.len()),
        sum(&|r| r.unset),
        sum(&|r| r.seg_own),
        sum(&|r| r.seg_other.len()),
        sum(&|r| r.seg_unset),
    );

    // Statement pooling: a single-statement INSERT ... RETURNING (simple protocol) works; a
    // transaction block is refused.
    let mut st = pgb.connect("stmt");
    let row = simple_one(
        &mut st,
        "INSERT INTO orders (client) VALUES (-3) RETURNING id, no",
    )
    .expect("INSERT ... RETURNING under statement pooling");
    assert_eq!(
        direct.one::<i64>(&format!("SELECT no FROM orders WHERE id = {}", row[0])),
        row[1]
    );
    // Several statements in one simple-protocol message are one request: they pass.
    st.batch_execute("BEGIN; INSERT INTO orders (client) VALUES (-4); COMMIT")
        .expect("one message BEGIN; INSERT; COMMIT under statement pooling");
    assert_eq!(
        direct.one::<i64>("SELECT count(*) FROM orders WHERE client = -4"),
        1
    );
    // A transaction left open after a statement is refused, and the client disconnected.
    let err = st
        .batch_execute("BEGIN")
        .expect_err("BEGIN alone under statement pooling");
    let refusal = "transaction blocks not allowed in statement pooling mode";
    assert!(
        err.to_string().contains(refusal) || pgb.log().contains(refusal),
        "BEGIN under statement pooling: {err}\n{}",
        pgb.log()
    );
    assert!(st.is_closed() || st.simple_query("SELECT 1").is_err());
    println!(
        "statement pooling: INSERT ... RETURNING gave ({}, {}); one-message BEGIN; INSERT; \
         COMMIT passed; BEGIN alone: {}",
        row[0],
        row[1],
        err.as_db_error()
            .map(|e| e.message().to_owned())
            .unwrap_or(err.to_string())
    );
    println!(
        "transaction/statement pooling test took {:?}",
        started.elapsed()
    );
}

#[test]
#[ignore = "needs pgbouncer and psycopg: run by scripts/recipes/pgbouncer.sh"]
fn psycopg_through_transaction_pooling_with_prepare_threshold_none() {
    let python = std::env::var("IDGEN_PGBOUNCER_PYTHON")
        .unwrap_or_else(|_| "/var/cache/idgen/recipes/pgbouncer/venv/bin/python".to_owned());
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../recipes/pgbouncer/psycopg_txn.py"
    );
    const PY_CLIENTS: usize = 6;
    const PY_INSERTS: usize = 150;

    let cluster = Cluster::with_idgen("pgb-psycopg", 3, &[]);
    cluster
        .connect("postgres")
        .batch_execute(&format!(
            "SELECT segment_create('order_no', start => 1000, step => 100); {}",
            CREATE_ORDERS
                .replace("TABLE orders", "TABLE py_orders")
                .replace("client int NOT NULL", "client int NOT NULL, note text")
        ))
        .unwrap();
    let pgb = Pgbouncer::start(&cluster, &small_pools(TRANSACTION_INI));

    let out_path = pgb.dir.join("psycopg.out");
    let out = fs::File::create(&out_path).unwrap();
    let mut py = Killed(
        Command::new(&python)
            .arg(script)
            .env("IDGEN_DSN", pgb.conninfo("txn"))
            .env("IDGEN_DSN_ONE", pgb.conninfo("txn_one"))
            .env("IDGEN_CLIENTS", PY_CLIENTS.to_string())
            .env("IDGEN_INSERTS", PY_INSERTS.to_string())
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap_or_else(|e| panic!("run {python} (made by scripts/recipes/pgbouncer.sh): {e}")),
    );
    let status = wait_for("the psycopg script", BOUND, || py.0.try_wait().unwrap());
    let mut output = String::new();
    fs::File::open(&out_path)
        .unwrap()
        .read_to_string(&mut output)
        .unwrap();
    print!("{output}");
    assert!(
        status.success(),
        "psycopg script failed:\n{output}\n{}",
        pgb.log()
    );

    let value = |key: &str| -> String {
        output
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{key}=")))
            .unwrap_or_else(|| panic!("no {key}= in:\n{output}"))
            .to_owned()
    };
    let total = (PY_CLIENTS * PY_INSERTS).to_string();
    assert_eq!(value("errors"), "0");
    assert_eq!(value("returned"), total);
    assert_eq!(value("distinct_ids"), total);
    assert_eq!(value("distinct_nos"), total);
    assert_eq!(value("found"), total);
    assert_eq!(
        value("threshold_none"),
        "none",
        "prepare_threshold=None on one backend"
    );
    assert_eq!(
        value("default_threshold"),
        "42P05",
        "the default prepare_threshold: the second client's prepare of _pg3_0 on the backend \
         the first one left it on"
    );

    let mut direct = cluster.connect("postgres");
    let (rows, ids, nos): (i64, i64, i64) = {
        let r = direct
            .query_one(
                "SELECT count(*), count(DISTINCT id), count(DISTINCT no) FROM py_orders",
                &[],
            )
            .unwrap();
        (r.get(0), r.get(1), r.get(2))
    };
    assert_eq!((ids, nos), (rows, rows));
    println!("psycopg through transaction pooling: {rows} rows in py_orders, all ids and numbers distinct");
}

/// The recipes' pools log in to the server as the client that asked, never as a role of their
/// own: a client `app` (no superuser) gets a backend whose `current_user` is `app`, with
/// `app`'s rights, in every pool mode; pgbouncer's auth_file (`userlist.txt`) is readable by
/// its owner only.
#[test]
#[ignore = "needs pgbouncer: run by scripts/recipes/pgbouncer.sh"]
fn every_pool_logs_in_as_its_client_never_as_a_superuser() {
    let cluster = Cluster::with_idgen("pgb-roles", 4, &[]);
    cluster
        .connect("postgres")
        .batch_execute(&format!("CREATE ROLE {APP} LOGIN NOSUPERUSER"))
        .unwrap();
    let mut seen = Vec::new();
    for (ini, aliases) in [
        (SESSION_INI, &["sess"][..]),
        (TRANSACTION_INI, &["txn", "stmt"][..]),
    ] {
        let pgb = Pgbouncer::start(&cluster, ini);
        let mode = fs::metadata(pgb.dir.join("userlist.txt"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o600, "the auth_file's mode");
        for alias in aliases {
            let mut c = pgb.connect_as(alias, APP);
            let row = c
                .query_one(
                    "SELECT current_user::text, rolsuper FROM pg_roles WHERE rolname = current_user",
                    &[],
                )
                .unwrap();
            let (user, superuser): (String, bool) = (row.get(0), row.get(1));
            seen.push(format!("{alias}: {user}, superuser {superuser}"));
            assert_eq!(
                (user.as_str(), superuser),
                (APP, false),
                "pgbouncer's {alias} for the client {APP}: the server's current_user and whether \
                 it is a superuser"
            );
        }
    }
    println!("pgbouncer: client {APP} through every pool: {seen:?}");
}
