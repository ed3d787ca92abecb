//! Clients and ORMs: README's recipes run by the real client libraries
//! against a real server. Each test starts a server preloading idgen, then runs the client
//! program of its recipe (tests/recipes/clients/) with the database's URL in
//! `IDGEN_DATABASE_URL`; the program asserts what the recipe promises and prints what it saw,
//! and the test asserts its exit status, its output and what is left in the database.
//!
//! * Django 5.2 and 6.1 (`django/check.py`): a migration creates the extension, a serial and a
//!   table whose id is `db_default=Func(function="snowflake_nextval")`; `create()` returns the
//!   id; `bulk_create` of 1,000 returns every id on 6.1 and leaves `pk` a `DatabaseDefault` on
//!   5.2, where ids drawn first with `snowflake_nextvals(1000)` are the workaround. Run as the
//!   superuser and as an application role (extension created beforehand, `idgen_admin`).
//! * SQLAlchemy 2.1 with psycopg 3 (`sqlalchemy/check.py`): `server_default=text(...)` for a
//!   Snowflake primary key and a segment column, ids and numbers back through `RETURNING`.
//! * node-postgres (`node/check.js`): int8 as strings, BigInt with a JSON replacer, the
//!   `parseInt` trap, JSON built by the server.
//!
//! The interpreters and packages are installed outside the clone by
//! `scripts/recipes/clients.sh`, which names their directory in `IDGEN_CLIENTS_DIR`.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use idgen_cluster_tests::{Cluster, One};

/// The longest a client program may run (each takes a few seconds).
const CLIENT_LIMIT: Duration = Duration::from_secs(180);

/// Where `scripts/recipes/clients.sh` installed the virtual environments and `pg`.
fn clients_dir() -> PathBuf {
    PathBuf::from(
        std::env::var("IDGEN_CLIENTS_DIR")
            .expect("IDGEN_CLIENTS_DIR is unset: run these tests with scripts/recipes/clients.sh"),
    )
}

/// A recipe's directory in the repository: tests/recipes/clients/<name>.
fn recipe(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../recipes/clients")
        .join(name)
}

/// The URL of database `db` on `cluster`, as every client here takes it.
fn database_url(cluster: &Cluster, db: &str) -> String {
    format!("postgresql://postgres@127.0.0.1:{}/{db}", cluster.port())
}

/// A client program while it runs; killed if the test ends (or panics) before it exits.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}

/// Runs `cmd` (a client program) to its end within [`CLIENT_LIMIT`], its output in files of
/// the cluster's directory; panics with the output if it fails. Returns what it printed.
fn run_client(cluster: &Cluster, what: &str, mut cmd: Command) -> String {
    let out_path = cluster.dir().join(format!("{what}.out"));
    let out = fs::File::create(&out_path).expect("create the client's output file");
    cmd.stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out);
    let mut child = Running(
        cmd.spawn()
            .unwrap_or_else(|e| panic!("{what}: cannot start {cmd:?}: {e}")),
    );
    let deadline = Instant::now() + CLIENT_LIMIT;
    let status = loop {
        if let Some(status) = child.0.try_wait().expect("wait for the client") {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "{what} still running after {CLIENT_LIMIT:?}:\n{}",
            fs::read_to_string(&out_path).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let printed = fs::read_to_string(&out_path).unwrap_or_default();
    println!("--- {what}\n{printed}");
    assert!(status.success(), "{what} failed ({status}):\n{printed}");
    printed
}

/// A Python of the virtual environment `venv` running `script` in the recipe `name`'s
/// directory on the database at `url`.
fn python(venv: &str, name: &str, script: &str, url: &str) -> Command {
    let interpreter = clients_dir().join(venv).join("bin/python");
    assert!(
        interpreter.exists(),
        "{interpreter:?} is missing: run these tests with scripts/recipes/clients.sh"
    );
    let mut cmd = Command::new(interpreter);
    cmd.arg(script)
        .current_dir(recipe(name))
        .env("IDGEN_DATABASE_URL", url)
        .env("DJANGO_SETTINGS_MODULE", "settings")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env_remove("PYTHONPATH")
        .env_remove("IDGEN_APP_ROLE");
    cmd
}

/// Runs the Django recipe with the Django of `venv` twice, on a server of its own; returns
/// what the two runs printed.
///
/// * As the superuser, on a new database without the extension: the migration creates it,
///   and `migrate shop zero` drops the table, the serial and the extension again.
/// * As `shop_app`, an application role that owns its database and is a member of
///   `idgen_admin` (for `serial_create`), the extension created beforehand by the superuser:
///   the migration runs the same, and `migrate shop zero` fails with 42501, changing nothing.
fn django(tag: &str, worker_id: u32, venv: &str) -> (String, String) {
    let cluster = Cluster::with_idgen(tag, worker_id, &[]);
    let mut postgres = cluster.connect("postgres");
    for sql in [
        "CREATE DATABASE shop",
        "CREATE ROLE shop_app LOGIN",
        "GRANT idgen_admin TO shop_app",
        "CREATE DATABASE shop_app OWNER shop_app",
    ] {
        postgres.batch_execute(sql).unwrap();
    }
    cluster
        .connect("shop_app")
        .batch_execute("CREATE EXTENSION idgen")
        .unwrap();

    let url = database_url(&cluster, "shop");
    let as_superuser = run_client(
        &cluster,
        &format!("{venv}-superuser"),
        python(venv, "django", "check.py", &url),
    );
    assert!(as_superuser.contains("django recipe ok"), "{as_superuser}");
    assert!(
        as_superuser
            .contains("migrate: extension, serial 'invoice', id DEFAULT snowflake_nextval()"),
        "{as_superuser}"
    );
    // The last step was `migrate shop zero`: the reverse operations dropped it all.
    let mut db = cluster.connect("shop");
    let left: i64 = db.one(
        "SELECT (SELECT count(*) FROM pg_extension WHERE extname = 'idgen')
              + (SELECT count(*) FROM pg_class WHERE relname = 'shop_order')",
    );
    assert_eq!(left, 0, "migrate shop zero left the extension or the table");
    let applied: i64 = db.one("SELECT count(*) FROM django_migrations WHERE app = 'shop'");
    assert_eq!(applied, 0);

    let url = database_url(&cluster, "shop_app").replace("postgres@", "shop_app@");
    let mut cmd = python(venv, "django", "check.py", &url);
    cmd.env("IDGEN_APP_ROLE", "1");
    let as_app = run_client(&cluster, &format!("{venv}-app-role"), cmd);
    assert!(as_app.contains("django recipe ok"), "{as_app}");
    assert!(
        as_app.contains("migrate shop zero: 42501 (must be owner of extension idgen), rolled back"),
        "{as_app}"
    );
    let mut db = cluster.connect("shop_app");
    let (rows, ids, owner): (i64, i64, String) = {
        let r = db
            .query_one(
                "SELECT count(*), count(DISTINCT id),
                        (SELECT tableowner::text FROM pg_tables WHERE tablename = 'shop_order')
                   FROM shop_order",
                &[],
            )
            .unwrap();
        (r.get(0), r.get(1), r.get(2))
    };
    assert_eq!(rows, ids);
    assert!(rows > 1000, "{rows} rows");
    assert_eq!(owner, "shop_app");
    (as_superuser, as_app)
}

#[test]
#[ignore = "needs Django 5.2 from PyPI: run by scripts/recipes/clients.sh"]
fn django_5_2_db_default_ids_and_bulk_create_with_snowflake_nextvals_first() {
    let (as_superuser, as_app) = django("django52", 52, "django-5.2");
    for printed in [&as_superuser, &as_app] {
        assert!(printed.contains("django 5.2."), "{printed}");
        assert!(
            printed.contains(
                "bulk_create: 1000 rows inserted, pk left a DatabaseDefault on 1000 objects"
            ),
            "{printed}"
        );
        assert!(
            printed.contains(
                "bulk_create after snowflake_nextvals(1000): 1000 distinct ids, each its own row's"
            ),
            "{printed}"
        );
        assert!(
            printed.contains("table: 2001 rows, 2001 distinct ids and numbers"),
            "{printed}"
        );
    }
}

#[test]
#[ignore = "needs Django 6.1 from PyPI and a Python >= 3.12: run by scripts/recipes/clients.sh"]
fn django_6_1_db_default_ids_and_bulk_create_returns_every_id() {
    let (as_superuser, as_app) = django("django61", 61, "django-6.1");
    for printed in [&as_superuser, &as_app] {
        assert!(printed.contains("django 6.1."), "{printed}");
        assert!(
            printed
                .contains("bulk_create: 1000 objects, 1000 distinct ids set, each its own row's"),
            "{printed}"
        );
        assert!(
            printed.contains("table: 1001 rows, 1001 distinct ids and numbers"),
            "{printed}"
        );
    }
}

#[test]
#[ignore = "needs SQLAlchemy and psycopg from PyPI: run by scripts/recipes/clients.sh"]
fn sqlalchemy_server_default_ids_and_segment_numbers_come_back_by_returning() {
    let cluster = Cluster::with_idgen("sqlalchemy", 21, &[]);
    cluster.create_db_with_idgen("shop");
    let printed = run_client(
        &cluster,
        "sqlalchemy",
        python(
            "sqlalchemy",
            "sqlalchemy",
            "check.py",
            &database_url(&cluster, "shop"),
        ),
    );
    assert!(printed.contains("sqlalchemy recipe ok"), "{printed}");
    assert!(
        printed.contains("Order flush of 1000: 1000 INSERT ... RETURNING statements"),
        "{printed}"
    );
    let mut db = cluster.connect("shop");
    let (rows, ids, numbers): (i64, i64, i64) = {
        let r = db
            .query_one(
                "SELECT count(*), count(DISTINCT id), count(DISTINCT order_no) FROM orders",
                &[],
            )
            .unwrap();
        (r.get(0), r.get(1), r.get(2))
    };
    assert_eq!((rows, ids, numbers), (1001, 1001, 1001));
    let events: i64 = db.one("SELECT count(DISTINCT id) FROM events WHERE id > 9007199254740992");
    assert_eq!(events, 1000);
}

#[test]
#[ignore = "needs Node.js and pg from npm: run by scripts/recipes/clients.sh"]
fn node_postgres_strings_bigint_and_the_parseint_trap() {
    let cluster = Cluster::with_idgen("node", 31, &[]);
    cluster.create_db_with_idgen("shop");
    let mut cmd = Command::new("node");
    cmd.arg("check.js")
        .current_dir(recipe("node"))
        .env("IDGEN_DATABASE_URL", database_url(&cluster, "shop"))
        .env("NODE_PATH", clients_dir().join("node/node_modules"));
    let printed = run_client(&cluster, "node-postgres", cmd);
    assert!(printed.contains("node-postgres recipe ok"), "{printed}");
    for line in [
        "(a) default: 1000 ids as strings, all equal to id::text",
        "(b) setTypeParser(20, BigInt): 1000 exact BigInts; JSON.stringify throws TypeError; \
         with the replacer 1000 ids as exact JSON strings",
        "(c) setTypeParser(20, parseInt): ",
        "with id::text in the JSON 1000 of 1000 exact (both)",
    ] {
        assert!(printed.contains(line), "no {line:?} in:\n{printed}");
    }
    let rows: i64 = cluster
        .connect("shop")
        .one("SELECT count(DISTINCT id) FROM orders");
    assert_eq!(rows, 1000);
}
