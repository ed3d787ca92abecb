//! Pins `idgen_adopt_column` on real servers: a `bigserial`, an identity
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

// An adopt never hands out a number the column holds.

/// `INSERT`s `rows` rows into `table` with the column's default, in one statement; the error if
/// one repeats a key (23505).
fn insert_rows(client: &mut Client, table: &str, rows: i32) -> Result<u64, postgres::Error> {
    client.execute(
        &format!("INSERT INTO {table} (payload) SELECT g FROM generate_series(1, $1) g"),
        &[&rows],
    )
}

/// Every key of `table` is distinct, and it holds `rows` rows.
fn assert_distinct(client: &mut Client, table: &str, rows: i64) {
    let (all, distinct): (i64, i64) = {
        let r = client
            .query_one(
                &format!("SELECT count(*), count(DISTINCT id) FROM {table}"),
                &[],
            )
            .unwrap();
        (r.get(0), r.get(1))
    };
    assert_eq!((all, distinct), (rows, rows), "{table}");
}

/// A trial adopt rolled back leaves its segment (not undone by ROLLBACK) with numbers cached in
/// shared memory; the sequence then hands out numbers those cached ones overlap; the second
/// adopt must move the segment above the column anyway. 0.5.0 saw the mark above the floor,
/// skipped the setval and handed out the cached 54: `duplicate key ... (id)=(54)`.
#[test]
fn a_rerun_after_a_rolled_back_adopt_starts_above_the_rows_inserted_in_between() {
    let cluster = Cluster::with_idgen("adopt-rerun", 3, &[]);
    let mut admin = cluster.connect("postgres");
    admin
        .batch_execute(
            "CREATE TABLE t4 (id bigserial PRIMARY KEY, payload int NOT NULL);
             INSERT INTO t4 (payload) SELECT g FROM generate_series(1, 50) g;",
        )
        .unwrap();
    admin
        .batch_execute(
            "BEGIN;
             SELECT * FROM idgen_adopt_column('t4', 'id', generator => 'segment');
             INSERT INTO t4 (payload) VALUES (1), (2), (3);
             ROLLBACK;",
        )
        .unwrap();
    // The segment stayed, with a range cached; the column is back on its sequence.
    let mark: i64 = admin.one("SELECT max_id FROM idgen_segment WHERE name = 't4_id'");
    assert!(
        mark > 550,
        "the cached range covers what the sequence hands out next: {mark}"
    );
    insert_rows(&mut admin, "t4", 500).unwrap();
    let floor: i64 = admin.one("SELECT max(id) FROM t4");
    assert_eq!(floor, 550);

    let steps: Vec<String> = column(
        &mut admin,
        "SELECT action FROM idgen_adopt_column('t4', 'id', generator => 'segment') ORDER BY step",
    );
    println!("steps: {steps:?}");
    insert_rows(&mut admin, "t4", 2000).unwrap_or_else(|e| panic!("{e:?}"));
    assert_distinct(&mut admin, "t4", 2550);
    let above: i64 = admin.one("SELECT count(*) FROM t4 WHERE id > 550");
    assert_eq!(above, 2000, "every new key is above the floor");
}

/// Same-named tables in two schemas, each adopted with the default segment name, rows inserted
/// into both in between: neither repeats a key. 0.5.0 named both segments `t_id`; the second
/// adopt found the first table's segment above its floor and handed out the first table's
/// cached numbers, which the second held.
#[test]
fn same_named_tables_in_two_schemas_never_repeat_a_key() {
    let cluster = Cluster::with_idgen("adopt-schemas", 3, &[]);
    let mut admin = cluster.connect("postgres");
    admin
        .batch_execute(
            "CREATE SCHEMA a;
             CREATE SCHEMA b;
             CREATE TABLE a.t (id bigserial PRIMARY KEY, payload int NOT NULL);
             CREATE TABLE b.t (id bigserial PRIMARY KEY, payload int NOT NULL);
             INSERT INTO a.t (payload) SELECT g FROM generate_series(1, 50) g;
             INSERT INTO b.t (payload) SELECT g FROM generate_series(1, 20) g;
             SELECT * FROM idgen_adopt_column('a.t', 'id', generator => 'segment');",
        )
        .unwrap();
    insert_rows(&mut admin, "a.t", 100).unwrap();
    insert_rows(&mut admin, "b.t", 500).unwrap();
    admin
        .batch_execute("SELECT * FROM idgen_adopt_column('b.t', 'id', generator => 'segment')")
        .unwrap();
    for _ in 0..4 {
        for table in ["b.t", "a.t"] {
            insert_rows(&mut admin, table, 500)
                .unwrap_or_else(|e| panic!("insert into {table}: {e:?}"));
        }
    }
    assert_distinct(&mut admin, "a.t", 50 + 100 + 2000);
    assert_distinct(&mut admin, "b.t", 20 + 500 + 2000);
    // Each table has a segment of its own, named after its schema.
    assert_eq!(
        default_of(&mut admin, "a.t", "id").as_deref(),
        Some("segment_nextval('a.t_id'::text)")
    );
    assert_eq!(
        default_of(&mut admin, "b.t", "id").as_deref(),
        Some("segment_nextval('b.t_id'::text)")
    );
}

/// REPEATABLE READ and SERIALIZABLE read through a snapshot older than the adopt's table lock:
/// rows another session committed after it (here with explicit keys, which the sequence does
/// not know) must not be handed out again. The call is refused with 25001 and changes nothing
/// (or, were the floor read after the lock, the keys never repeat); READ COMMITTED then works.
/// 0.5.0 started the segment above the snapshot's max(id) and repeated key 11.
#[test]
fn an_adopt_in_a_repeatable_read_transaction_never_misses_rows_committed_since_its_snapshot() {
    let cluster = Cluster::with_idgen("adopt-isolation", 3, &[]);
    let mut admin = cluster.connect("postgres");
    let mut other = cluster.connect("postgres");
    for (table, level) in [("rr", "REPEATABLE READ"), ("ser", "SERIALIZABLE")] {
        admin
            .batch_execute(&format!(
                "CREATE TABLE {table} (id bigserial PRIMARY KEY, payload int NOT NULL);
                 INSERT INTO {table} (payload) SELECT g FROM generate_series(1, 10) g;"
            ))
            .unwrap();
        let state = |c: &mut Client| -> String {
            c.one(&format!(
                "SELECT coalesce(pg_get_serial_sequence('{table}', 'id'), '-')
                        || ' | ' || (SELECT pg_get_expr(d.adbin, d.adrelid) FROM pg_attrdef d
                                      WHERE d.adrelid = '{table}'::regclass AND d.adnum = 1)
                        || ' | ' || (SELECT count(*) FROM idgen_segment)::text"
            ))
        };
        let before = state(&mut admin);
        admin
            .batch_execute(&format!(
                "BEGIN ISOLATION LEVEL {level}; SELECT count(*) FROM {table};"
            ))
            .unwrap();
        // Committed after the snapshot: keys the sequence never handed out.
        other
            .batch_execute(&format!(
                "INSERT INTO {table} (id, payload) SELECT g, g FROM generate_series(11, 100) g"
            ))
            .unwrap();
        let adopt =
            format!("SELECT * FROM idgen_adopt_column('{table}', 'id', generator => 'segment')");
        match admin.batch_execute(&adopt) {
            Err(e) => {
                let e = db_error::<()>(Err(e));
                assert_eq!(e.code().code(), "25001", "{level}: {e:?}");
                assert!(e.hint().unwrap_or("").contains("READ COMMITTED"), "{e:?}");
                admin.batch_execute("ROLLBACK").unwrap();
                assert_eq!(
                    state(&mut admin),
                    before,
                    "{level}: the refused call changed something"
                );
                admin.batch_execute(&adopt).unwrap();
            }
            Ok(()) => admin.batch_execute("COMMIT").unwrap(),
        }
        insert_rows(&mut admin, table, 2000)
            .unwrap_or_else(|e| panic!("{level}: insert after the adopt: {e:?}"));
        assert_distinct(&mut admin, table, 100 + 2000);
    }
}
