//! idgen under logical replication, against real servers. Run by
//! `scripts/recipes/logical.sh`, which installs Debian's `postgresql-15-pglogical` first.
//!
//! **Bidirectional pglogical** (pgEdge's use case for Snowflake ids): servers A and B, both
//! nodes of an idgen registry on a third server (`idgen.worker_id = auto`), each logging in to
//! it with a role of its own (asserted: two roles, neither a superuser), replicate one table
//! both ways with pglogical 2.4 (a subscription each way, `forward_origins := '{}'` so that no
//! change comes back to where it started). The table's ids come from `snowflake_nextval()`, its
//! order numbers from a global segment (its high-water mark in the registry). A's
//! `shared_preload_libraries` lists idgen first, B's pglogical first: both orders work. Two
//! writers per side insert one row per statement for [`WRITE_TIME`] (60 s); then
//! both sides must converge. Asserted: the two nodes leased distinct worker ids and each row's
//! id carries its writer's; every insert a writer saw succeed is on both sides (same id, number
//! and node), no other row is; no id and no number twice; both tables identical, row by row;
//! no pglogical conflict in either server log. Controls then make pglogical conflict on
//! purpose (one id, and one number under two ids, inserted on both sides while the
//! subscriptions are disabled) to show that the log check sees conflicts, and what repeated
//! ids or numbers do: both sides log `CONFLICT` (on the primary key, on the number's unique
//! index), each keeps the other's row (`apply_remote`), the tables differ, and a committed row
//! is gone from its own server.
//!
//! **One-way migration with built-in logical replication** (a major upgrade by replication,
//! here 15 to 15): an old server (worker id 1, a local segment) is published and a new one
//! (worker id 2, the same segment created there beforehand, as a schema script would) subscribes
//! while two writers insert on the old one, through the initial copy and streaming. Cut-over:
//! stop writes (the database admits no new session, its sessions are ended: a pooled session of
//! the application is gone and a new one, of the application or a superuser, is refused, so
//! nothing draws above the marks read later), wait for the subscription's slot to confirm the
//! old server's WAL position, drop the subscription and its slot, move each local segment of the new server to the old server's high-water
//! mark (`segment_setval`, statements generated on the old server, exactly what its marks say
//! although the database's owner planted a table named as idgen's for the superuser who
//! generates them), check that the new server's
//! Snowflake ids are above the replicated ones. Asserted: the new server has exactly the old
//! server's rows; without the segment step its first insert repeats a replicated number (23505,
//! the negative control); after it, 2,000 new rows have ids and numbers above every replicated
//! one, all distinct, ids of worker 2; a segment the new server did not have (numbers drawn on
//! the old server outside the table) is created above the old mark. Also: idgen's tables can be
//! published, and a `FOR ALL TABLES` publication includes them (which is why the recipe lists
//! tables).
//!
//! The configuration and the statements that docs/operations/logical-replication.md shows are
//! read from `tests/recipes/logical/` (templates: the test fills in each `{{...}}`), and the
//! page includes those files.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use idgen_cluster_tests::registry::{held_worker, registry, registry_setting, FAST};
use idgen_cluster_tests::{as_postgres, column, db_error, twitter, wait_for, Cluster, One};

/// How long the writers of both pglogical nodes insert (60 s).
const WRITE_TIME: Duration = Duration::from_secs(60);
/// Writers per pglogical node.
const WRITERS: usize = 2;
/// Sanity bound for replication to catch up (not a performance claim).
const CATCH_UP: Duration = Duration::from_secs(300);
/// Sanity bound for a subscription to start replicating, a lease to be granted, a log line.
const SETTLE: Duration = Duration::from_secs(60);
/// The pglogical conflict report (pglogical_conflict.c), logged at
/// `pglogical.conflict_log_level` (LOG by default, which the server log keeps).
const CONFLICT: &str = "CONFLICT: remote";

const TABLE: &str = "CREATE TABLE orders (
    id   bigint PRIMARY KEY DEFAULT snowflake_nextval(),
    no   bigint UNIQUE DEFAULT segment_nextval('orders_no'),
    node text NOT NULL,
    at   timestamptz NOT NULL DEFAULT clock_timestamp())";

/// postgresql.conf of a pglogical node; its `shared_preload_libraries` is `'idgen,pglogical'`
/// and its `{{registry}}` the registry's connection string.
const PGLOGICAL_CONF: &str = include_str!("../../recipes/logical/pglogical.conf");

/// `output_plugin_libraries`, for the releases that know it.
const OUTPUT_PLUGINS_CONF: &str = include_str!("../../recipes/logical/output-plugins.conf");

/// On the registry: the role of node `{{node}}`.
const REGISTRY_NODE: &str = include_str!("../../recipes/logical/registry-node.sql");

/// A pglogical node's statements, one at a time; `{{node}}` its name, `{{dsn}}` how the other
/// node reaches it.
const PGLOGICAL_NODE: &str = include_str!("../../recipes/logical/pglogical-node.sql");

/// The subscription `{{subscription}}` to the node at `{{provider_dsn}}`.
const PGLOGICAL_SUBSCRIBE: &str = include_str!("../../recipes/logical/pglogical-subscribe.sql");

/// A node's worker id and the state of its lease.
const PGLOGICAL_CHECK: &str = include_str!("../../recipes/logical/pglogical-check.sql");

/// The status of the subscription `{{subscription}}`.
const PGLOGICAL_STATUS: &str = include_str!("../../recipes/logical/pglogical-status.sql");

/// The migration's steps, as the page shows them; `{{old_dsn}}` is how the new server reaches
/// the old one, `{{lsn}}` the old server's WAL position once the writes stopped.
const MIGRATION_PUBLISH: &str = include_str!("../../recipes/logical/migration-publish.sql");
const MIGRATION_SUBSCRIBE: &str = include_str!("../../recipes/logical/migration-subscribe.sql");
const MIGRATION_COPIED: &str = include_str!("../../recipes/logical/migration-copied.sql");
/// Stops the writes on the old server: run in the session that then reads the old server's
/// position, waits for the slot and generates the segment statements.
const MIGRATION_STOP_WRITES: &str = include_str!("../../recipes/logical/migration-stop-writes.sql");
const MIGRATION_LSN: &str = include_str!("../../recipes/logical/migration-lsn.sql");
const MIGRATION_CAUGHT_UP: &str = include_str!("../../recipes/logical/migration-caught-up.sql");
const MIGRATION_DROP: &str = include_str!("../../recipes/logical/migration-drop.sql");
/// Drops the subscription's slot on the old server, which the subscription can no longer reach.
const MIGRATION_DROP_SLOT: &str = include_str!("../../recipes/logical/migration-drop-slot.sql");
/// Two queries generating the segment statements: `segment_setval`, then `segment_create`.
const MIGRATION_SEGMENTS: &str = include_str!("../../recipes/logical/migration-segments.sql");
const MIGRATION_IDS: &str = include_str!("../../recipes/logical/migration-ids.sql");

/// The statements of `sql`, each ending at a line whose code (before a `--` comment) ends
/// with `;`.
fn statements(sql: &str) -> Vec<String> {
    let mut all = Vec::new();
    let mut current = String::new();
    for line in sql.lines() {
        current += line;
        current += "\n";
        let code = line.split("--").next().unwrap_or("").trim_end();
        if code.ends_with(';') {
            all.push(std::mem::take(&mut current));
        }
    }
    assert!(current.trim().is_empty(), "no ; after:\n{current}");
    all
}

/// One row as both sides must hold it: id, number, node, time (as text).
type Row = (i64, i64, String, String);

fn rows(c: &Cluster) -> Vec<Row> {
    rows_of(&mut c.connect("postgres"))
}

/// [`rows`] through an open session.
fn rows_of(client: &mut postgres::Client) -> Vec<Row> {
    client
        .query("SELECT id, no, node, at::text FROM orders ORDER BY id", &[])
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
        .collect()
}

fn count(c: &Cluster) -> i64 {
    c.connect("postgres").one("SELECT count(*) FROM orders")
}

/// `writers` connections to database `db` of each of `nodes` insert one row per statement
/// (`node` = the node's label) until `stop`, while `during` runs; returns per node the (id,
/// number) of every insert that succeeded, and the failures.
fn write_while(
    nodes: &[(&Cluster, &str)],
    db: &str,
    writers: usize,
    during: impl FnOnce(),
) -> (Vec<Vec<(i64, i64)>>, Vec<String>) {
    let stop = AtomicBool::new(false);
    thread::scope(|s| {
        let handles: Vec<Vec<_>> = nodes
            .iter()
            .map(|&(node, label)| {
                (0..writers)
                    .map(|_| {
                        let stop = &stop;
                        s.spawn(move || {
                            let mut client = node.connect(db);
                            let insert = client
                                .prepare("INSERT INTO orders (node) VALUES ($1) RETURNING id, no")
                                .unwrap();
                            let (mut done, mut failures) = (Vec::new(), Vec::new());
                            while !stop.load(Ordering::Relaxed) {
                                match client.query_one(&insert, &[&label]) {
                                    Ok(r) => done.push((r.get::<_, i64>(0), r.get::<_, i64>(1))),
                                    Err(e) => {
                                        failures.push(format!("{label}: {e}"));
                                        if failures.len() > 20 {
                                            break;
                                        }
                                    }
                                }
                            }
                            (done, failures)
                        })
                    })
                    .collect()
            })
            .collect();
        during();
        stop.store(true, Ordering::Relaxed);
        let mut failures = Vec::new();
        let per_node = handles
            .into_iter()
            .map(|hs| {
                let mut done = Vec::new();
                for h in hs {
                    let (d, f) = h.join().unwrap();
                    done.extend(d);
                    failures.extend(f);
                }
                done
            })
            .collect();
        (per_node, failures)
    })
}

/// An error as the server gave it: SQLSTATE and message, or the client's own words.
fn failure(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(d) => format!("{}: {}", d.code().code(), d.message()),
        None => e.to_string(),
    }
}

fn conflicts(c: &Cluster) -> Vec<String> {
    c.log()
        .lines()
        .filter(|l| l.contains(CONFLICT))
        .map(str::to_owned)
        .collect()
}

fn errors(c: &Cluster) -> Vec<String> {
    c.log()
        .lines()
        .filter(|l| l.contains("ERROR:"))
        .map(str::to_owned)
        .collect()
}

/// A pglogical node of `reg`, named `label` there (its registry role is made by
/// [`REGISTRY_NODE`]): idgen with a leased worker id, pglogical, the table in the replication
/// set `default`, the global segment declared. `preload` is its `shared_preload_libraries`.
fn pglogical_node(reg: &Cluster, tag: &str, label: &str, preload: &str) -> Cluster {
    reg.connect("postgres")
        .batch_execute(&REGISTRY_NODE.replace("{{node}}", label))
        .unwrap_or_else(|e| panic!("{REGISTRY_NODE}: {e}"));
    const PRELOAD: &str = "shared_preload_libraries = 'idgen,pglogical'";
    const REGISTRY: &str = "idgen.registry = '{{registry}}'";
    assert!(PGLOGICAL_CONF.contains(PRELOAD) && PGLOGICAL_CONF.contains(REGISTRY));
    let conf = PGLOGICAL_CONF
        .replace(PRELOAD, &format!("shared_preload_libraries = '{preload}'"))
        .replace(
            REGISTRY,
            &registry_setting(reg, &format!("idgen_node_{label}")),
        );
    let mut settings = vec![
        conf.as_str(),
        FAST[0],
        FAST[1],
        "idgen.segment_wait_timeout = 60s",
    ];
    // PostgreSQL 15.19 and later accept only the output plugins this setting lists (pgoutput
    // and test_decoding by default); pglogical's providers decode with its own. Earlier
    // releases do not know the setting (and would refuse to start with it).
    if has_setting("output_plugin_libraries") {
        settings.push(OUTPUT_PLUGINS_CONF);
    }
    let c = Cluster::start(tag, &settings);
    let dsn = dsn(&c);
    let mut client = c.connect("postgres");
    // One statement at a time: segment_create needs CREATE EXTENSION idgen committed.
    let node = PGLOGICAL_NODE
        .replace("{{node}}", tag)
        .replace("{{dsn}}", &dsn);
    let node = statements(&node);
    assert!(
        node.iter()
            .any(|s| s.trim_end().trim_end_matches(';') == TABLE),
        "the migration's table is the recipe's"
    );
    for sql in &node {
        client
            .batch_execute(sql)
            .unwrap_or_else(|e| panic!("{tag}: {sql}: {e}\n{}", c.log()));
    }
    c
}

/// Whether the server programs know the setting `name` (`postgres --describe-config`).
fn has_setting(name: &str) -> bool {
    let out = as_postgres("postgres")
        .arg("--describe-config")
        .output()
        .expect("postgres --describe-config");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .any(|l| l.split('\t').next() == Some(name))
}

fn dsn(c: &Cluster) -> String {
    dsn_of(c, "postgres")
}

/// How another server reaches database `db` of `c`, as a superuser.
fn dsn_of(c: &Cluster, db: &str) -> String {
    format!("host=127.0.0.1 port={} dbname={db} user=postgres", c.port())
}

fn subscribe(subscriber: &Cluster, name: &str, provider: &Cluster) {
    subscriber
        .connect("postgres")
        .batch_execute(
            &PGLOGICAL_SUBSCRIBE
                .replace("{{subscription}}", name)
                .replace("{{provider_dsn}}", &dsn(provider)),
        )
        .unwrap();
}

fn subscription_status(c: &Cluster, name: &str) -> String {
    c.connect("postgres")
        .one(&PGLOGICAL_STATUS.replace("{{subscription}}", name))
}

fn wait_status(c: &Cluster, name: &str, status: &str) {
    let deadline = Instant::now() + SETTLE;
    loop {
        let now = subscription_status(c, name);
        if now == status {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "subscription {name} is {now}, not {status}, after {SETTLE:?}:\n{}",
            c.log()
        );
        thread::sleep(Duration::from_millis(100));
    }
}

#[test]
#[ignore = "needs postgresql-15-pglogical: run by scripts/recipes/logical.sh"]
fn pglogical_both_ways_with_registry_worker_ids_and_a_global_segment_repeats_nothing() {
    let started = Instant::now();
    let reg = registry("lr_registry");
    let a = pglogical_node(&reg, "lr_a", "a", "idgen,pglogical");
    let b = pglogical_node(&reg, "lr_b", "b", "pglogical,idgen");
    let (worker_a, worker_b) = (
        held_worker(&a, SETTLE) as i64,
        held_worker(&b, SETTLE) as i64,
    );
    assert_ne!(
        worker_a, worker_b,
        "the registry leased one worker id twice"
    );
    // The page's check on each node: its worker id, held (between renewals: a renewal under
    // way shows `renewing`).
    for (node, worker) in [(&a, worker_a), (&b, worker_b)] {
        let mut c = node.connect("postgres");
        wait_for(
            "the page's check to show the worker id held",
            SETTLE,
            || {
                let row = c.query_one(PGLOGICAL_CHECK, &[]).unwrap();
                let seen = (
                    row.get::<_, Option<i32>>(0).map(i64::from),
                    row.get::<_, String>(1),
                );
                (seen == (Some(worker), "held".to_owned())).then_some(())
            },
        );
    }
    // Each node logs in to the registry with a role of its own, no superuser: a node name
    // belongs to the role of its first call, and nodes that share a role can act for one
    // another ("Many servers with a registry").
    let logins: Vec<String> = column(
        &mut reg.connect("postgres"),
        "SELECT n.role || ' superuser ' || r.rolsuper FROM idgen_registry_node n
           JOIN pg_roles r ON r.rolname = n.role ORDER BY n.node_name",
    );
    let roles: HashSet<&str> = logins
        .iter()
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert!(
        logins.len() == 2
            && roles.len() == 2
            && logins.iter().all(|l| l.ends_with("superuser false")),
        "the nodes' registry logins: {logins:?}"
    );
    subscribe(&a, "a_from_b", &b);
    subscribe(&b, "b_from_a", &a);
    wait_status(&a, "a_from_b", "replicating");
    wait_status(&b, "b_from_a", "replicating");
    println!(
        "pglogical: registry and two nodes ready in {:.1} s; worker ids A {worker_a}, B {worker_b}",
        started.elapsed().as_secs_f64()
    );

    let writing = Instant::now();
    let (done, failures) = write_while(&[(&a, "a"), (&b, "b")], "postgres", WRITERS, || {
        thread::sleep(WRITE_TIME)
    });
    let wrote = writing.elapsed();
    assert!(
        failures.is_empty(),
        "{} failed inserts: {:?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );
    let total = (done[0].len() + done[1].len()) as i64;
    let waiting = Instant::now();
    wait_for("both sides to hold every row", CATCH_UP, || {
        (count(&a) == total && count(&b) == total).then_some(())
    });
    let caught_up = waiting.elapsed();

    // Every acknowledged insert is on both sides, no other row is, nothing is repeated.
    let (rows_a, rows_b) = (rows(&a), rows(&b));
    assert_eq!(rows_a.len() as i64, total);
    assert!(rows_a == rows_b, "the two tables differ");
    let by_id: BTreeMap<i64, (i64, &str)> = rows_a
        .iter()
        .map(|(id, no, node, _)| (*id, (*no, node.as_str())))
        .collect();
    assert_eq!(by_id.len() as i64, total, "duplicate ids");
    let numbers: HashSet<i64> = rows_a.iter().map(|r| r.1).collect();
    assert_eq!(numbers.len() as i64, total, "duplicate numbers");
    for (label, worker, inserted) in [("a", worker_a, &done[0]), ("b", worker_b, &done[1])] {
        for &(id, no) in inserted {
            assert_eq!(
                by_id.get(&id),
                Some(&(no, label)),
                "insert ({id}, {no}) on {label}"
            );
            assert_eq!(
                twitter::worker_of(id),
                worker,
                "worker id of {id} from {label}"
            );
        }
    }
    let (conflicts_a, conflicts_b) = (conflicts(&a), conflicts(&b));
    assert!(
        conflicts_a.is_empty() && conflicts_b.is_empty(),
        "pglogical conflicts: {conflicts_a:?} {conflicts_b:?}"
    );
    let errs: Vec<String> = errors(&a).into_iter().chain(errors(&b)).collect();
    assert_eq!(subscription_status(&a, "a_from_b"), "replicating");
    assert_eq!(subscription_status(&b, "b_from_a"), "replicating");
    let secs = wrote.as_secs_f64();
    println!(
        "pglogical: {} s of writes, {WRITERS} writers per side: A {} rows ({:.0}/s), B {} rows \
         ({:.0}/s), {total} in all ({:.0}/s); both sides identical {:.1} s after the writes \
         stopped; 0 duplicate ids, 0 duplicate numbers (numbers {}..{}), 0 conflicts, {} ERROR \
         lines in the node logs{}",
        WRITE_TIME.as_secs(),
        done[0].len(),
        done[0].len() as f64 / secs,
        done[1].len(),
        done[1].len() as f64 / secs,
        total as f64 / secs,
        caught_up.as_secs_f64(),
        numbers.iter().min().unwrap(),
        numbers.iter().max().unwrap(),
        errs.len(),
        if errs.is_empty() {
            String::new()
        } else {
            format!(": {:?}", &errs[..errs.len().min(3)])
        },
    );

    // Controls, what distinct worker ids and a global segment prevent: with both
    // subscriptions disabled (neither side sees the other's rows), each side inserts a row with
    // id 1 (one id on both sides, as two servers with one worker id would) and a row with
    // number -5 under ids of its own (one number on both sides, as a local segment on each
    // server would). Enabled again, pglogical logs a conflict for each on both sides (on the
    // primary key, then on the number's unique index) and resolves it by `apply_remote`: the
    // incoming row replaces the local one. So each side ends with the other's rows: the
    // tables differ, and the row a writer committed with the repeated number (id 2 on A, id 3
    // on B) is gone from its own server.
    for (node, sub) in [(&a, "a_from_b"), (&b, "b_from_a")] {
        node.connect("postgres")
            .batch_execute(&format!(
                "SELECT pglogical.alter_subscription_disable('{sub}', true)"
            ))
            .unwrap();
        wait_status(node, sub, "disabled");
    }
    for (node, label, id) in [(&a, "a", 2), (&b, "b", 3)] {
        node.connect("postgres")
            .batch_execute(&format!(
                "INSERT INTO orders (id, no, node) VALUES (1, -1, 'same id {label}');
                 INSERT INTO orders (id, no, node) VALUES ({id}, -5, 'same number {label}');"
            ))
            .unwrap();
    }
    for (node, sub) in [(&a, "a_from_b"), (&b, "b_from_a")] {
        node.connect("postgres")
            .batch_execute(&format!(
                "SELECT pglogical.alter_subscription_enable('{sub}', true)"
            ))
            .unwrap();
    }
    let control = "SELECT format('%s %s', id, node) FROM orders WHERE id < 10 ORDER BY id";
    let expected = (
        vec!["1 same id b".to_owned(), "3 same number b".to_owned()],
        vec!["1 same id a".to_owned(), "2 same number a".to_owned()],
    );
    wait_for("the controls' rows applied", SETTLE, || {
        let seen = (
            column::<String>(&mut a.connect("postgres"), control),
            column::<String>(&mut b.connect("postgres"), control),
        );
        (seen == expected).then_some(())
    });
    for node in [&a, &b] {
        let logged = conflicts(node);
        for index in ["(local index orders_pkey)", "(local index orders_no_key)"] {
            assert!(
                logged.iter().any(|l| l.contains(index)),
                "no conflict on {index} logged: {logged:?}"
            );
        }
    }
    println!(
        "pglogical controls: a repeated id and a repeated number, one row each side: A logged \
         {:?}; B logged {:?}; A now holds {:?}, B {:?}",
        conflicts(&a),
        conflicts(&b),
        expected.0,
        expected.1
    );
    println!(
        "pglogical: whole test {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// Rows the old server holds before the migration starts (the initial copy's work).
const PRELOADED: i64 = 50_000;
/// The writers go on this long after the initial copy is done (the streaming phase).
const STREAMING: Duration = Duration::from_secs(3);
/// Rows inserted on the new server after the cut-over, per writer.
const NEW_ROWS: usize = 1_000;
const OLD_WORKER: i64 = 1;
const NEW_WORKER: i64 = 2;

/// The migration's database on both servers, as the recipe names it.
const APP: &str = "app";

#[test]
#[ignore = "needs wal_level = logical servers: run by scripts/recipes/logical.sh"]
fn migration_by_builtin_logical_replication_continues_above_every_replicated_id_and_number() {
    let started = Instant::now();
    let old = Cluster::with_idgen("lr_old", OLD_WORKER as u32, &["wal_level = logical"]);
    let new = Cluster::with_idgen("lr_new", NEW_WORKER as u32, &[]);
    // The application's database on both servers, owned by a role of its own; the application
    // logs in as `app`.
    for c in [&old, &new] {
        c.connect("postgres")
            .batch_execute("CREATE ROLE app_owner LOGIN; CREATE ROLE app LOGIN")
            .unwrap();
        c.create_db_with_idgen(APP);
        c.connect("postgres")
            .batch_execute(&format!("ALTER DATABASE {APP} OWNER TO app_owner"))
            .unwrap();
    }
    let mut o = old.connect(APP);
    o.batch_execute(&format!(
        "SELECT segment_create('orders_no');
         SELECT segment_create('invoice_no', start => 1000, step => 100);
         {TABLE};
         GRANT SELECT, INSERT ON orders TO app;
         INSERT INTO orders (node) SELECT 'old' FROM generate_series(1, {PRELOADED});"
    ))
    .unwrap();
    // A segment the new server will not have: numbers the application used elsewhere.
    let invoices: i64 = o.one("SELECT max(n) FROM segment_nextvals('invoice_no', 1234) AS n");
    // The new server gets the schema first (pg_dump --schema-only carries no segment marks:
    // idgen_segment's rows are data), and the segment, as a schema script would create it.
    let mut n = new.connect(APP);
    n.batch_execute(&format!("SELECT segment_create('orders_no'); {TABLE};"))
        .unwrap();

    // idgen's tables can be published (FOR TABLE), and FOR ALL TABLES publishes them without
    // being asked: list the application's tables instead.
    o.batch_execute(
        "CREATE PUBLICATION marks FOR TABLE idgen_segment; DROP PUBLICATION marks;
         CREATE PUBLICATION everything FOR ALL TABLES",
    )
    .unwrap();
    let idgen_tables: Vec<String> = column(
        &mut o,
        "SELECT tablename::text FROM pg_publication_tables \
         WHERE pubname = 'everything' AND tablename LIKE 'idgen%' ORDER BY 1",
    );
    for t in [
        "idgen_segment",
        "idgen_serial_counter",
        "idgen_registry_install",
    ] {
        assert!(
            idgen_tables.iter().any(|x| x == t),
            "{t} not in {idgen_tables:?}"
        );
    }
    o.batch_execute("DROP PUBLICATION everything").unwrap();

    let mut copy_done = Duration::ZERO;
    let (done, failures) = write_while(&[(&old, "old")], APP, 2, || {
        o.batch_execute(MIGRATION_PUBLISH).unwrap();
        let subscribing = Instant::now();
        n.batch_execute(&MIGRATION_SUBSCRIBE.replace("{{old_dsn}}", &dsn_of(&old, APP)))
            .unwrap();
        wait_for("the initial copy", CATCH_UP, || {
            let ready: bool = new.connect(APP).one(MIGRATION_COPIED);
            ready.then_some(())
        });
        copy_done = subscribing.elapsed();
        thread::sleep(STREAMING);
    });
    assert!(failures.is_empty(), "{failures:?}");
    // Every number the old server handed out, to compare with the marks it gives the new one.
    let mut handed_out: Vec<i64> = done[0].iter().map(|r| r.1).collect();

    // The database's owner plants, for the superuser who runs the cut-over, a table named as
    // idgen's in the schema named after that superuser ("$user", first in the default
    // search_path), with a row that would inject SQL into the generated statements and mark a
    // segment far below its numbers, and puts pg_catalog last in the database's search_path.
    old.connect_as(APP, "app_owner")
        .batch_execute(&format!(
            "CREATE SCHEMA postgres;
             CREATE TABLE postgres.idgen_segment (name text, max_id text, step text,
                                                  cache text, scope text);
             INSERT INTO postgres.idgen_segment
                  VALUES ('orders_no', '1); DROP TABLE public.orders; --', '1', '1', 'local');
             ALTER DATABASE {APP} SET search_path = \"$user\", public, pg_catalog;"
        ))
        .unwrap();

    // A session of the application, idle in a pool across the cut-over.
    let mut pooled = old.connect_as(APP, "app");
    handed_out.push(pooled.one("SELECT segment_nextval('orders_no')"));

    // Cut-over 1: stop the writes, from a session of another database, keeping `o`, the
    // session of the application's database that goes on to the end of the cut-over.
    let kept: i32 = o.one("SELECT pg_backend_pid()");
    let stop_writes = MIGRATION_STOP_WRITES.replace("{{session}}", &kept.to_string());
    let stopped: Vec<String> = old
        .connect("postgres")
        .simple_query(&stop_writes)
        .unwrap_or_else(|e| panic!("{stop_writes}: {}", failure(&e)))
        .into_iter()
        .filter_map(|m| match m {
            postgres::SimpleQueryMessage::Row(r) => Some(
                (0..r.len())
                    .map(|i| r.get(i).unwrap_or("NULL"))
                    .collect::<Vec<_>>()
                    .join(" "),
            ),
            _ => None,
        })
        .collect();
    // From now on no session of the application draws: the pooled one is gone, and a new one,
    // of the application or of a superuser, gets none, whatever it sets (a read-only default,
    // say, is only a default).
    let late_draw = |c: &mut postgres::Client| -> Result<i64, String> {
        c.batch_execute("SET default_transaction_read_only = off")
            .and_then(|_| c.query_one("SELECT segment_nextval('orders_no')", &[]))
            .map(|r| r.get(0))
            .map_err(|e| failure(&e))
    };
    let mut refusals = Vec::new();
    match late_draw(&mut pooled) {
        Ok(no) => panic!(
            "a session of the application opened before the cut-over drew {no} after it \
             (cut-over: {stopped:?})"
        ),
        Err(e) => refusals.push(format!("pooled session: {e}")),
    }
    for role in ["app", "postgres"] {
        let conninfo = old
            .conninfo(APP)
            .replace("user=postgres", &format!("user={role}"));
        match postgres::Client::connect(&conninfo, postgres::NoTls) {
            Ok(mut c) => match late_draw(&mut c) {
                Ok(no) => panic!(
                    "a new session of {role} after the cut-over drew {no} \
                     (cut-over: {stopped:?})"
                ),
                Err(e) => refusals.push(format!("new session of {role}: {e}")),
            },
            Err(e) => refusals.push(format!("new session of {role}: {}", failure(&e))),
        }
    }
    println!("migration: cut-over {stopped:?}; after it: {refusals:?}");

    // Cut-over 2: wait until the subscription has confirmed everything the old server wrote.
    let catching_up = Instant::now();
    let lsn: String = o.one(MIGRATION_LSN);
    wait_for("the slot to confirm the old server's WAL", CATCH_UP, || {
        let caught: bool = o.one(&MIGRATION_CAUGHT_UP.replace("{{lsn}}", &lsn));
        caught.then_some(())
    });
    let caught_up = catching_up.elapsed();
    let replicated = rows_of(&mut new.connect(APP));
    assert!(
        replicated == rows_of(&mut o),
        "the new server's rows differ from the old one's"
    );
    assert_eq!(replicated.len() as i64, PRELOADED + done[0].len() as i64);
    let max_id = replicated.iter().map(|r| r.0).max().unwrap();
    let max_no = replicated.iter().map(|r| r.1).max().unwrap();

    // Cut-over 3: stop replicating, and drop the slot on the old server.
    for sql in statements(MIGRATION_DROP) {
        n.batch_execute(&sql)
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    for sql in statements(MIGRATION_DROP_SLOT) {
        wait_for("the slot to be dropped", SETTLE, || {
            o.batch_execute(&sql).ok()
        });
    }
    assert_eq!(
        o.one::<i64>("SELECT count(*) FROM pg_replication_slots"),
        0,
        "a slot left on the old server"
    );

    // Negative control: without the segment step, the new server's segment starts where it
    // was created, below the replicated numbers: its first insert repeats one.
    let repeat = db_error(n.execute("INSERT INTO orders (node) VALUES ('new')", &[]));
    assert_eq!(
        (repeat.code().code(), repeat.constraint()),
        ("23505", Some("orders_no_key")),
        "the first insert without the segment step: {repeat}"
    );
    let repeat = format!(
        "{} on {}",
        repeat.code().code(),
        repeat.constraint().unwrap()
    );

    // Cut-over 3: every local segment of the new server above the old server's mark. The
    // statements are generated on the old server and run on the new one.
    // Segments the new server has are moved with segment_setval, those it lacks are created
    // above the mark.
    // What the generated statements must be: every local segment of the old server (read here
    // by qualified names), as exact statements that resolve to idgen's functions alone.
    let marks: Vec<(String, i64, i32, i32)> = o
        .query(
            "SELECT name, max_id, step, cache FROM public.idgen_segment \
             WHERE scope OPERATOR(pg_catalog.=) 'local' ORDER BY name",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
        .collect();
    let expected: (Vec<String>, Vec<String>) = marks
        .iter()
        .map(|(name, max_id, step, cache)| {
            (
                format!("SELECT public.segment_setval('{name}'::text, {max_id}::bigint);"),
                format!(
                    "SELECT public.segment_create('{name}'::text, start => {}::bigint, \
                     step => {step}::integer, cache => {cache}::integer);",
                    max_id + 1
                ),
            )
        })
        .unzip();
    let mut generated: Vec<Vec<String>> = Vec::new();
    for sql in statements(MIGRATION_SEGMENTS) {
        let code: String = sql
            .lines()
            .filter(|l| !l.trim_start().starts_with("--"))
            .collect();
        if code.trim_start().starts_with("SELECT") {
            let want = [&expected.0, &expected.1][generated.len().min(1)];
            let lines: Vec<String> = column(&mut o, &sql);
            assert_eq!(
                &lines, want,
                "the statements generated by\n{sql}\nwith a table planted in the schema \"postgres\""
            );
            generated.push(lines);
        } else {
            o.batch_execute(&sql)
                .unwrap_or_else(|e| panic!("{sql}: {e}"));
        }
    }
    assert_eq!(generated.len(), 2, "{generated:?}");
    let (setvals, creates) = (generated[0].clone(), generated[1].clone());
    let old_mark: i64 = o.one("SELECT max_id FROM public.idgen_segment WHERE name = 'orders_no'");
    assert!(
        old_mark >= max_no,
        "the old mark {old_mark} is below a number {max_no}"
    );
    let highest = handed_out.iter().max().copied().unwrap_or(0);
    assert!(
        old_mark >= highest,
        "the old mark {old_mark} is below the number {highest} the old server handed out"
    );
    let mut missing = Vec::new();
    for (setval, create) in setvals.iter().zip(&creates) {
        if let Err(e) = n.batch_execute(setval) {
            assert_eq!(e.code().map(|c| c.code()), Some("42704"), "{setval}: {e}");
            n.batch_execute(create).unwrap();
            missing.push(create.clone());
        }
    }
    assert_eq!(missing.len(), 1, "created: {missing:?}");
    let next_invoice: i64 = n.one("SELECT segment_nextval('invoice_no')");
    assert!(
        next_invoice > invoices,
        "invoice_no {next_invoice} after {invoices}"
    );
    // Cut-over 4: Snowflake ids. The worker ids differ, so ids cannot collide; the check shows
    // that the new server's clock is past the old server's last id (ids keep their order).
    let above: bool = n.one(MIGRATION_IDS);
    assert!(above, "the new server's first id is below a replicated one");

    let new_rows: Vec<(i64, i64)> = thread::scope(|s| {
        let hs: Vec<_> = (0..2)
            .map(|_| {
                let new = &new;
                s.spawn(move || {
                    let mut c = new.connect(APP);
                    let insert = c
                        .prepare("INSERT INTO orders (node) VALUES ('new') RETURNING id, no")
                        .unwrap();
                    (0..NEW_ROWS)
                        .map(|_| {
                            let r = c.query_one(&insert, &[]).unwrap();
                            (r.get::<_, i64>(0), r.get::<_, i64>(1))
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    let ids: HashSet<i64> = new_rows.iter().map(|r| r.0).collect();
    let nos: HashSet<i64> = new_rows.iter().map(|r| r.1).collect();
    assert_eq!(ids.len(), 2 * NEW_ROWS, "repeated new ids");
    assert_eq!(nos.len(), 2 * NEW_ROWS, "repeated new numbers");
    assert!(ids
        .iter()
        .all(|&id| id > max_id && twitter::worker_of(id) == NEW_WORKER));
    assert!(nos.iter().all(|&no| no > max_no));
    assert_eq!(
        new.connect(APP).one::<i64>("SELECT count(*) FROM orders"),
        replicated.len() as i64 + 2 * NEW_ROWS as i64
    );
    println!(
        "migration: {PRELOADED} rows before, {} written on the old server during the copy and \
         {} s of streaming; initial copy ready {:.1} s after CREATE SUBSCRIPTION; slot caught up \
         {:.2} s after the writes stopped; {} rows replicated, identical; max replicated id {} \
         (worker {}), max number {max_no}, old mark {old_mark}; without segment_setval the new \
         server's first insert: {repeat}; after the cut-over {} rows on the new server, numbers \
         {}..{}, ids of worker {NEW_WORKER}, all above; invoice_no (not on the new server) \
         created by `{}`: next {next_invoice} after {invoices}; whole test {:.1} s",
        done[0].len(),
        STREAMING.as_secs(),
        copy_done.as_secs_f64(),
        caught_up.as_secs_f64(),
        replicated.len(),
        max_id,
        twitter::worker_of(max_id),
        2 * NEW_ROWS,
        nos.iter().min().unwrap(),
        nos.iter().max().unwrap(),
        missing[0],
        started.elapsed().as_secs_f64()
    );
}
