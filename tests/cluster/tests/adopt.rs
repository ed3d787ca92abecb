//! Pins `idgen_adopt_column` (issue 19, part 3) on real servers: a `bigserial`, an identity
//! column and a partitioned table's column switch to idgen while 4 clients keep inserting, and
//! no insert fails (they wait for the lock) and no key repeats; a dry run changes nothing; the
//! undo statements it returns bring the sequence back; refused calls change nothing.

use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

use idgen_cluster_tests::{column, db_error, Cluster, One};
use postgres::Client;

const CLIENTS: usize = 4;

/// The rows of an adoption: each step's action and the statement that undoes it.
type Steps = Vec<(String, Option<String>)>;

/// Runs `adopt` (an `idgen_adopt_column` call) while `CLIENTS` connections insert into `table`
/// one row per statement; returns every client's inserted ids in order, and the steps' actions
/// and undo statements. Panics if any insert fails.
fn adopt_under_inserts(cluster: &Cluster, table: &str, adopt: &str) -> (Vec<Vec<i64>>, Steps) {
    let stop = AtomicBool::new(false);
    let insert = format!("INSERT INTO {table} (payload) VALUES ($1) RETURNING id");
    thread::scope(|s| {
        let handles: Vec<_> = (0..CLIENTS)
            .map(|c| {
                let (stop, insert) = (&stop, &insert);
                s.spawn(move || {
                    let mut client = cluster.connect("postgres");
                    let statement = client.prepare(insert).unwrap();
                    let mut ids = Vec::new();
                    let mut i = 0i32;
                    while !stop.load(Ordering::Relaxed) {
                        let row = client
                            .query_one(&statement, &[&(c as i32 * 1_000_000 + i)])
                            .unwrap_or_else(|e| panic!("insert {i} of client {c} failed: {e}"));
                        ids.push(row.get(0));
                        i += 1;
                    }
                    ids
                })
            })
            .collect();
        thread::sleep(Duration::from_millis(700));
        let mut admin = cluster.connect("postgres");
        let steps = admin
            .query(
                &format!("SELECT action, undo FROM {adopt} ORDER BY step"),
                &[],
            )
            .unwrap()
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect();
        thread::sleep(Duration::from_millis(700));
        stop.store(true, Ordering::Relaxed);
        let ids = handles.into_iter().map(|h| h.join().unwrap()).collect();
        (ids, steps)
    })
}

/// Every id is distinct, each client's ids were inserted, and the table holds exactly them and
/// the `initial` rows.
fn check_keys(client: &mut Client, table: &str, initial: usize, per_client: &[Vec<i64>]) -> usize {
    let all: Vec<i64> = per_client.iter().flatten().copied().collect();
    let mut distinct = all.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), all.len(), "a key was handed out twice");
    let rows: i64 = client.one(&format!("SELECT count(*) FROM {table}"));
    assert_eq!(
        rows as usize,
        initial + all.len(),
        "the table holds its first rows and every insert that returned"
    );
    let in_table: i64 = client.one_with(
        &format!("SELECT count(DISTINCT id) FROM {table} WHERE id = ANY($1)"),
        &[&all],
    );
    assert_eq!(in_table as usize, all.len());
    all.len()
}

fn default_of(client: &mut Client, table: &str, col: &str) -> Option<String> {
    client
        .query_one(
            "SELECT pg_get_expr(d.adbin, d.adrelid) FROM pg_attribute a
               LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
              WHERE a.attrelid = $1::text::regclass AND a.attname = $2::text",
            &[&table, &col],
        )
        .unwrap()
        .get(0)
}

#[test]
fn a_bigserial_switches_to_a_segment_under_four_inserting_clients() {
    let cluster = Cluster::with_idgen("adopt-serial", 3, &[]);
    let mut admin = cluster.connect("postgres");
    admin
        .batch_execute(
            "CREATE TABLE orders (id bigserial PRIMARY KEY, payload int NOT NULL);
             INSERT INTO orders (payload) SELECT g FROM generate_series(1, 1000) g;",
        )
        .unwrap();
    let (ids, steps) = adopt_under_inserts(
        &cluster,
        "orders",
        "idgen_adopt_column('orders', 'id', generator => 'segment', segment => 'orders')",
    );
    println!("steps: {steps:?}");
    let n = check_keys(&mut admin, "orders", 1000, &ids);
    assert!(n > 0);
    assert_eq!(
        default_of(&mut admin, "orders", "id").as_deref(),
        Some("segment_nextval('orders'::text)")
    );
    // The sequence is detached, not dropped (drop_sequence => false), and every segment number
    // is above every value the sequence gave.
    let owned: Option<String> = admin.one("SELECT pg_get_serial_sequence('orders', 'id')");
    assert_eq!(owned, None);
    let last_sequence: i64 = admin.one("SELECT last_value FROM orders_id_seq");
    let first_segment: i64 =
        admin.one("SELECT min(id) FROM orders WHERE id > (SELECT last_value FROM orders_id_seq)");
    assert!(first_segment > last_sequence);
    for client in &ids {
        assert!(
            client.windows(2).all(|w| w[0] < w[1]),
            "each client's keys increase"
        );
    }
    let mark: i64 = admin.one("SELECT max_id FROM idgen_segment WHERE name = 'orders'");
    assert!(mark >= admin.one::<i64>("SELECT max(id) FROM orders"));

    // Adopting again is a no-op.
    let again: Vec<String> = column(
        &mut admin,
        "SELECT action FROM idgen_adopt_column('orders', 'id', generator => 'segment', segment => 'orders')",
    );
    assert_eq!(again.len(), 1);
    assert!(again[0].starts_with("nothing to do"), "{again:?}");

    // The undo statements, in reverse order, bring the sequence back above every key.
    for (_, undo) in steps.iter().rev() {
        if let Some(undo) = undo {
            admin
                .batch_execute(undo)
                .unwrap_or_else(|e| panic!("{undo}: {e}"));
        }
    }
    assert_eq!(
        admin
            .one::<Option<String>>("SELECT pg_get_serial_sequence('orders', 'id')")
            .as_deref(),
        Some("public.orders_id_seq")
    );
    let max_before: i64 = admin.one("SELECT max(id) FROM orders");
    let back: i64 = admin.one("INSERT INTO orders (payload) VALUES (0) RETURNING id");
    assert!(back > max_before, "{back} after {max_before}");
    let segments: i64 = admin.one("SELECT count(*) FROM idgen_segment");
    assert_eq!(segments, 0, "the undo dropped the segment");
}

#[test]
fn an_identity_column_switches_to_snowflake_ids_under_four_inserting_clients() {
    let cluster = Cluster::with_idgen("adopt-identity", 7, &[]);
    let mut admin = cluster.connect("postgres");
    admin
        .batch_execute(
            "CREATE TABLE events (id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, payload int NOT NULL);
             INSERT INTO events (payload) SELECT g FROM generate_series(1, 500) g;",
        )
        .unwrap();
    let (ids, steps) =
        adopt_under_inserts(&cluster, "events", "idgen_adopt_column('events', 'id')");
    println!("steps: {steps:?}");
    check_keys(&mut admin, "events", 500, &ids);
    let identity: String =
        admin.one("SELECT attidentity::text FROM pg_attribute WHERE attrelid = 'events'::regclass AND attname = 'id'");
    assert_eq!(identity, "", "the identity is gone");
    // Rows inserted after the switch carry Snowflake ids of this server (worker id 7).
    let snowflakes: i64 = admin.one(
        "SELECT count(*) FROM events e, snowflake_decode(e.id) d WHERE e.id > 1000000 AND d.worker_id = 7",
    );
    let large: i64 = admin.one("SELECT count(*) FROM events WHERE id > 1000000");
    assert!(
        snowflakes > 0 && snowflakes == large,
        "{snowflakes} of {large}"
    );
}

#[test]
fn a_partitioned_tables_column_switches_for_every_partition() {
    let cluster = Cluster::with_idgen("adopt-partitioned", 3, &[]);
    let mut admin = cluster.connect("postgres");
    admin
        .batch_execute(
            "CREATE TABLE measures (id bigserial, payload int NOT NULL, PRIMARY KEY (id, payload))
                 PARTITION BY RANGE (payload);
             CREATE TABLE measures_low PARTITION OF measures FOR VALUES FROM (MINVALUE) TO (2000000);
             CREATE TABLE measures_high PARTITION OF measures FOR VALUES FROM (2000000) TO (MAXVALUE);
             INSERT INTO measures (payload) SELECT g FROM generate_series(1, 300) g;",
        )
        .unwrap();
    // A partition is refused: its parent's default is the one that counts.
    let e = db_error(admin.batch_execute(
        "SELECT * FROM idgen_adopt_column('measures_low', 'id', generator => 'segment')",
    ));
    assert_eq!(e.code().code(), "42809");
    let (ids, _) = adopt_under_inserts(
        &cluster,
        "measures",
        "idgen_adopt_column('measures', 'id', generator => 'segment')",
    );
    check_keys(&mut admin, "measures", 300, &ids);
    for partition in ["measures", "measures_low", "measures_high"] {
        assert_eq!(
            default_of(&mut admin, partition, "id").as_deref(),
            Some("segment_nextval('measures_id'::text)"),
            "{partition}"
        );
    }
    // Clients 2 and 3 insert into the high partition: both partitions got segment numbers.
    let high: i64 = admin.one("SELECT count(*) FROM measures_high");
    assert!(high > 0);
}

#[test]
fn a_dry_run_and_every_refused_call_change_nothing() {
    let cluster = Cluster::with_idgen("adopt-refused", 3, &[]);
    let mut admin = cluster.connect("postgres");
    admin
        .batch_execute(
            "CREATE TABLE t (id bigserial PRIMARY KEY, small serial, big bigint, note text);
             INSERT INTO t (big) VALUES (9000000000000000000);
             CREATE ROLE stranger LOGIN;
             GRANT SELECT ON t TO stranger;",
        )
        .unwrap();
    let state = |c: &mut Client| -> String {
        c.one("SELECT (SELECT string_agg(attname || '=' || coalesce(pg_get_expr(d.adbin, d.adrelid), '-') || attidentity::text, ',' ORDER BY attnum)
                         FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
                        WHERE a.attrelid = 't'::regclass AND a.attnum > 0)
               || ' | ' || (SELECT count(*) FROM idgen_segment)::text
               || ' | ' || coalesce(pg_get_serial_sequence('t', 'id'), '-')")
    };
    let before = state(&mut admin);

    let planned: Vec<String> = column(
        &mut admin,
        "SELECT statement FROM idgen_adopt_column('t', 'id', generator => 'segment', dry_run => true) WHERE statement IS NOT NULL",
    );
    assert!(
        planned
            .iter()
            .any(|s| s.contains("segment_create('t_id', start => 2)")),
        "{planned:?}"
    );
    assert!(
        planned.iter().any(|s| s.contains("SET DEFAULT")),
        "{planned:?}"
    );
    assert_eq!(state(&mut admin), before, "the dry run changed something");

    for (sql, code) in [
        ("SELECT * FROM idgen_adopt_column(NULL, 'id')", "22004"),
        ("SELECT * FROM idgen_adopt_column('t', NULL)", "22004"),
        (
            "SELECT * FROM idgen_adopt_column('t', 'id', generator => NULL)",
            "22004",
        ),
        (
            "SELECT * FROM idgen_adopt_column('t', 'id', generator => 'uuid')",
            "22023",
        ),
        (
            "SELECT * FROM idgen_adopt_column('t', 'id', segment => 's')",
            "22023",
        ),
        ("SELECT * FROM idgen_adopt_column('t', 'nope')", "42703"),
        ("SELECT * FROM idgen_adopt_column('t', 'small')", "42804"),
        ("SELECT * FROM idgen_adopt_column('t', 'note')", "42804"),
        (
            "SELECT * FROM idgen_adopt_column('t_id_seq', 'last_value')",
            "42809",
        ),
        (
            "SELECT * FROM idgen_adopt_column('no_such_table', 'id')",
            "42P01",
        ),
        // The column holds a value Snowflake ids may reach: a segment is the way.
        ("SELECT * FROM idgen_adopt_column('t', 'big')", "55000"),
        (
            "SELECT * FROM idgen_adopt_column('t', 'id', generator => 'segment', segment => '')",
            "22023",
        ),
    ] {
        let e = db_error(admin.batch_execute(sql));
        assert_eq!(e.code().code(), code, "{sql}: {e:?}");
        assert_eq!(state(&mut admin), before, "{sql} changed something");
    }
    let e = db_error(admin.batch_execute("SELECT * FROM idgen_adopt_column('t', 'small')"));
    assert!(e.hint().unwrap_or("").contains("TYPE bigint"), "{e:?}");
    let mut stranger = cluster.connect_as("postgres", "stranger");
    let e = db_error(stranger.batch_execute("SELECT * FROM idgen_adopt_column('t', 'id')"));
    assert_eq!(e.code().code(), "42501");
    assert_eq!(state(&mut admin), before);
}
