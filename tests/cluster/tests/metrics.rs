//! Pins the metrics contract (`sql/metrics.sql`, docs/operations/monitoring.md "Metrics")
//! against real servers:
//!
//! * only `pg_monitor` (and superusers) read the views: a plain role gets 42501 on each, a
//!   member of `pg_monitor` reads every one, and none shows another role's serials to a plain
//!   role through `idgen_serials`' back door;
//! * a segment's counters: every number drawn is counted as issued (with and without a
//!   per-backend cache), refills are counted, a call that sleeps for a range is a wait and one
//!   that gives up with 55P03 a timeout; the counters never go down while draws and refills
//!   race with the reads;
//! * a segment's `max_value` is the narrowest integer type of the columns whose DEFAULT draws
//!   from it, and no other segment's name matches (a prefix, a LIKE wildcard, a quote);
//! * a serial's `max_value` is its format's width;
//! * the Snowflake view is the generator's status in seconds, `max_drift_seconds` the setting;
//! * the registry client's view counts calls and failures (the registry stopped), and has no row
//!   without `idgen.registry`; the registry's view counts worker ids held and free.

use std::time::Duration;

use idgen_cluster_tests::registry::{self, held_worker};
use idgen_cluster_tests::{column, sqlstate, wait_for, Cluster, One};
use postgres::Client;

const VIEWS: [&str; 5] = [
    "idgen_metrics_snowflake",
    "idgen_metrics_registry_client",
    "idgen_metrics_segment",
    "idgen_metrics_serial",
    "idgen_metrics_registry",
];

/// One segment's row of `idgen_metrics_segment`: (issued, refills, waits, timeouts, failed
/// refills).
fn counters(c: &mut Client, segment: &str) -> (i64, i64, i64, i64, i64) {
    let r = c
        .query_one(
            "SELECT issued_total, refills_total, waits_total, timeouts_total, refill_failures_total
               FROM idgen_metrics_segment WHERE segment = $1",
            &[&segment],
        )
        .unwrap();
    (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4))
}

#[test]
fn only_pg_monitor_reads_the_metrics() {
    let c = Cluster::with_idgen("metrics-roles", 1, &[]);
    let mut admin = c.connect("postgres");
    admin
        .batch_execute(
            "CREATE ROLE plain LOGIN; CREATE ROLE watcher LOGIN IN ROLE pg_monitor;
             SELECT segment_create('secret_orders');
             SELECT serial_create('secret_invoices', 'INV-{seq:04}');",
        )
        .unwrap();
    let mut plain = c.connect_as("postgres", "plain");
    let mut watcher = c.connect_as("postgres", "watcher");
    for view in VIEWS {
        assert_eq!(
            sqlstate(plain.simple_query(&format!("SELECT * FROM {view}"))),
            "42501",
            "a plain role reads {view}"
        );
        watcher
            .simple_query(&format!("SELECT * FROM {view}"))
            .unwrap_or_else(|e| panic!("pg_monitor cannot read {view}: {e}"));
    }
    // pg_monitor sees the serial a plain role may not draw from (idgen_serials hides it).
    assert_eq!(
        watcher.one::<i64>(
            "SELECT count(*) FROM idgen_metrics_serial WHERE serial = 'secret_invoices'"
        ),
        1
    );
    assert_eq!(
        plain.one::<i64>("SELECT count(*) FROM idgen_serials WHERE name = 'secret_invoices'"),
        0
    );
    // The internal functions behind them are pg_monitor's too, or harmless.
    for internal in ["idgen_registry_calls()", "segment_cache_counters()"] {
        assert_eq!(
            sqlstate(plain.simple_query(&format!("SELECT * FROM {internal}"))),
            "42501",
            "a plain role calls {internal}"
        );
    }
}

#[test]
fn segment_counters_count_every_number_and_each_refill() {
    let c = Cluster::with_idgen("metrics-segment", 1, &[]);
    let mut db = c.connect("postgres");
    db.batch_execute(
        "SELECT segment_create('plain_seg', step => 10);
         SELECT segment_create('block_seg', step => 10, cache => 4);",
    )
    .unwrap();
    // Not cached yet: listed, with zero counters.
    assert_eq!(counters(&mut db, "plain_seg"), (0, 0, 0, 0, 0));
    for _ in 0..25 {
        db.one::<i64>("SELECT segment_nextval('plain_seg')");
    }
    db.batch_execute("SELECT count(*) FROM segment_nextvals('plain_seg', 50)")
        .unwrap();
    let (issued, refills, _, timeouts, failures) = counters(&mut db, "plain_seg");
    assert_eq!(issued, 75, "every number drawn without a per-backend cache");
    assert_eq!(
        refills,
        db.one::<i64>("SELECT refills FROM segment_status() WHERE name = 'plain_seg'")
    );
    assert!(
        refills >= 2,
        "75 numbers from ranges of at least 10: {refills} refills"
    );
    assert_eq!((timeouts, failures), (0, 0));
    // With a per-backend cache a block is counted when it is taken: 1 number drawn, 4 issued.
    db.one::<i64>("SELECT segment_nextval('block_seg')");
    assert_eq!(counters(&mut db, "block_seg").0, 4);
    // Another session's draws are counted too, and the count never goes down while the
    // allocator refills and other sessions draw.
    let port = c.port();
    let drawers: Vec<_> = (0..2)
        .map(|_| {
            let conninfo = c.conninfo("postgres");
            std::thread::spawn(move || {
                let mut s = postgres::Client::connect(&conninfo, postgres::NoTls).unwrap();
                for _ in 0..300 {
                    s.one::<i64>("SELECT segment_nextval('plain_seg')");
                }
            })
        })
        .collect();
    let mut last = issued;
    while drawers.iter().any(|d| !d.is_finished()) {
        let now = counters(&mut db, "plain_seg").0;
        assert!(
            now >= last,
            "issued went down from {last} to {now} (port {port})"
        );
        last = now;
    }
    for d in drawers {
        d.join().unwrap();
    }
    assert_eq!(counters(&mut db, "plain_seg").0, 75 + 600);
}

#[test]
fn a_call_that_sleeps_for_a_range_is_a_wait_and_one_that_gives_up_a_timeout() {
    let c = Cluster::with_idgen("metrics-waits", 1, &["idgen.segment_wait_timeout = 1s"]);
    let mut db = c.connect("postgres");
    db.batch_execute("SELECT segment_create('slow_seg', step => 2)")
        .unwrap();
    db.one::<i64>("SELECT segment_nextval('slow_seg')");
    // Hold the segment's row: the allocator's refill waits for the lock, so once the cached
    // ranges are used up the next call sleeps, then gives up.
    let mut holder = c.connect("postgres");
    holder
        .batch_execute("BEGIN; SELECT * FROM idgen_segment WHERE name = 'slow_seg' FOR UPDATE")
        .unwrap();
    let failure = (0..10)
        .map(|_| db.query_one("SELECT segment_nextval('slow_seg')", &[]))
        .find_map(Result::err)
        .expect("a call fails while the refill is blocked");
    assert_eq!(sqlstate::<()>(Err(failure)), "55P03");
    // The refill's lock wait (the allocator's lock_timeout is idgen.segment_wait_timeout)
    // fails, and the call that slept for it gets its error; or the call gives up first.
    let (_, _, waits, timeouts, failures) = counters(&mut db, "slow_seg");
    assert!(waits >= 1, "the call that failed had slept: waits {waits}");
    assert!(
        timeouts + failures >= 1,
        "neither a timeout nor a failed refill counted: {timeouts} {failures}"
    );
    holder.batch_execute("ROLLBACK").unwrap();
    // The next call gets its range; the counters stay.
    wait_for("a number again", Duration::from_secs(10), || {
        db.query_one("SELECT segment_nextval('slow_seg')", &[]).ok()
    });
    let after = counters(&mut db, "slow_seg");
    assert!(after.2 >= waits && after.3 >= timeouts && after.4 >= failures);
}

#[test]
fn max_value_is_the_narrowest_column_drawing_from_the_segment_and_no_other_name_matches() {
    let c = Cluster::with_idgen("metrics-max", 1, &[]);
    let mut db = c.connect("postgres");
    db.batch_execute(
        "SELECT segment_create('a');
         SELECT segment_create('ab');
         SELECT segment_create('a_c');
         SELECT segment_create('axc');
         SELECT segment_create('it''s');
         CREATE TABLE narrow (id int4 DEFAULT segment_nextval('ab'));
         CREATE TABLE small (id int2 DEFAULT segment_nextval('it''s'));
         CREATE TABLE wide (id int8 DEFAULT segment_nextval('ab'));
         CREATE TABLE wildcard (id int4 DEFAULT segment_nextval('a_c'));",
    )
    .unwrap();
    let max = |db: &mut Client, s: &str| -> i64 {
        db.query_one(
            "SELECT max_value FROM idgen_metrics_segment WHERE segment = $1",
            &[&s],
        )
        .unwrap()
        .get(0)
    };
    assert_eq!(
        max(&mut db, "ab"),
        i32::MAX as i64,
        "int4 is narrower than int8"
    );
    assert_eq!(max(&mut db, "it's"), i16::MAX as i64);
    assert_eq!(max(&mut db, "a_c"), i32::MAX as i64);
    // 'a' is a prefix of 'ab' and matches 'a_c' as a LIKE pattern; 'axc' matches 'a_c' as a
    // pattern: none of them is drawn by a column.
    assert_eq!(max(&mut db, "a"), i64::MAX);
    assert_eq!(max(&mut db, "axc"), i64::MAX);
    // A name with a backslash and a quote, a domain over int4, a domain over a domain over
    // int2; a temporary table (any role may create one) counts for nothing.
    db.batch_execute(
        r"SELECT segment_create(E'back\\slash''s');
          SELECT segment_create('dom');
          SELECT segment_create('dom2');
          SELECT segment_create('tmp');
          CREATE DOMAIN small_id AS int4 CHECK (VALUE > 0);
          CREATE DOMAIN tiny AS int2;
          CREATE DOMAIN tinier AS tiny;
          CREATE TABLE escaped (id int4 DEFAULT segment_nextval(E'back\\slash''s'));
          CREATE TABLE domained (id small_id DEFAULT segment_nextval('dom'));
          CREATE TABLE domained2 (id tinier DEFAULT segment_nextval('dom2'));
          CREATE TEMP TABLE passing (id int2 DEFAULT segment_nextval('tmp'));",
    )
    .unwrap();
    assert_eq!(max(&mut db, "back\\slash's"), i32::MAX as i64);
    assert_eq!(max(&mut db, "dom"), i32::MAX as i64);
    assert_eq!(max(&mut db, "dom2"), i16::MAX as i64);
    assert_eq!(max(&mut db, "tmp"), i64::MAX, "a temporary table counted");
    // By name, cast to varchar: still the segment's column.
    db.batch_execute(
        "SELECT segment_create('named');
         SELECT segment_create('varchared');
         CREATE TABLE by_name (id int4 DEFAULT segment_nextval(name => 'named'));
         CREATE TABLE by_varchar (id int4 DEFAULT segment_nextval('varchared'::varchar));",
    )
    .unwrap();
    assert_eq!(max(&mut db, "named"), i32::MAX as i64);
    assert_eq!(max(&mut db, "varchared"), i32::MAX as i64);
    // A session (or a database owner's ALTER DATABASE) that quotes every identifier.
    db.batch_execute("SET quote_all_identifiers = on").unwrap();
    assert_eq!(max(&mut db, "ab"), i32::MAX as i64);
    assert_eq!(max(&mut db, "named"), i32::MAX as i64);
    db.batch_execute("RESET quote_all_identifiers").unwrap();
    // Read with standard_conforming_strings off, PostgreSQL prints the name as E'...'.
    db.batch_execute("SET standard_conforming_strings = off")
        .unwrap();
    assert_eq!(max(&mut db, "back\\slash's"), i32::MAX as i64);
    db.batch_execute("RESET standard_conforming_strings")
        .unwrap();

    // Near its maximum: a high-water mark at 95 % of int4 shows as a ratio above 0.9.
    db.batch_execute("SELECT segment_setval('ab', 2040109465)")
        .unwrap();
    let ratio: f64 = db.one("SELECT used_ratio FROM idgen_metrics_segment WHERE segment = 'ab'");
    assert!(ratio > 0.9 && ratio < 1.0, "used_ratio {ratio}");
    // The column moves to bigint: the segment is far from its maximum again.
    db.batch_execute("ALTER TABLE narrow ALTER COLUMN id TYPE int8")
        .unwrap();
    assert_eq!(max(&mut db, "ab"), i64::MAX);
    let ratio: f64 = db.one("SELECT used_ratio FROM idgen_metrics_segment WHERE segment = 'ab'");
    assert!(ratio < 0.001, "used_ratio {ratio}");
}

#[test]
fn serial_and_snowflake_metrics_say_what_the_status_says() {
    let c = Cluster::with_idgen("metrics-serial", 3, &["idgen.max_drift_ms = 2500"]);
    let mut db = c.connect("postgres");
    db.batch_execute(
        "SELECT serial_create('inv', 'INV-{YYYY}-{seq:04}', reset => 'year');
         SELECT serial_create('free', 'N{seq}');",
    )
    .unwrap();
    for _ in 0..3 {
        db.one::<String>("SELECT serial_nextval('inv')");
    }
    let r = db
        .query_one(
            "SELECT period, value, max_value, used_ratio FROM idgen_metrics_serial WHERE serial = 'inv'",
            &[],
        )
        .unwrap();
    let period: String = r.get(0);
    assert_eq!(
        period,
        db.one::<String>("SELECT current_period FROM idgen_serials WHERE name = 'inv'")
    );
    // A fast serial's counter is its high-water mark, above the three numbers drawn.
    let value: i64 = r.get(1);
    assert_eq!(
        value,
        db.one::<i64>("SELECT current_mark FROM idgen_serials WHERE name = 'inv'")
    );
    assert!(value >= 3);
    assert_eq!(r.get::<_, i64>(2), 9999);
    assert!((r.get::<_, f64>(3) - value as f64 / 9999.0).abs() < 1e-12);
    assert_eq!(
        db.one::<i64>("SELECT max_value FROM idgen_metrics_serial WHERE serial = 'free'"),
        i64::MAX
    );

    db.one::<i64>("SELECT snowflake_nextval()");
    let r = db
        .query_one(
            "SELECT worker_id, worker_id_assigned, layout_remaining_seconds, max_drift_seconds,
                    layout_remaining_seconds - extract(epoch FROM (SELECT exhausted_at - clock_timestamp() FROM snowflake_status()))::float8,
                    reservation_headroom_seconds, clock_regressions_total
               FROM idgen_metrics_snowflake",
            &[],
        )
        .unwrap();
    assert_eq!(r.get::<_, Option<i32>>(0), Some(3));
    assert_eq!(r.get::<_, i32>(1), 1);
    assert!(
        r.get::<_, f64>(2) > 60.0 * 365.0 * 86400.0,
        "the default layout lasts decades"
    );
    assert_eq!(r.get::<_, Option<f64>>(3), Some(2.5));
    assert!(
        r.get::<_, f64>(4).abs() < 5.0,
        "the same time left as the status says"
    );
    assert!(
        r.get::<_, Option<f64>>(5).is_some(),
        "a reservation after an id"
    );
    assert_eq!(r.get::<_, i64>(6), 0);
    // Unbounded drift has no maximum to compare with.
    db.batch_execute("ALTER SYSTEM SET idgen.max_drift_ms = -1")
        .unwrap();
    db.batch_execute("SELECT pg_reload_conf()").unwrap();
    wait_for("the reload", Duration::from_secs(10), || {
        let mut fresh = c.connect("postgres");
        fresh
            .one::<Option<f64>>("SELECT max_drift_seconds FROM idgen_metrics_snowflake")
            .is_none()
            .then_some(())
    });
    // No registry: no row.
    assert_eq!(
        db.one::<i64>("SELECT count(*) FROM idgen_metrics_registry_client"),
        0
    );
    assert_eq!(
        db.one::<i64>("SELECT count(*) FROM idgen_metrics_registry"),
        0
    );
}

#[test]
fn registry_calls_failures_and_worker_ids_are_counted() {
    let reg = registry::registry("metrics-reg");
    let node = registry::node(
        &reg,
        "metrics-node",
        &["idgen.worker_id = auto", "idgen.segment_wait_timeout = 1s"],
    );
    let worker = held_worker(&node, Duration::from_secs(30));
    let mut n = node.connect("postgres");
    let calls = |n: &mut Client| -> (i64, i64, String, Option<f64>) {
        let r = n
            .query_one(
                "SELECT calls_total, failures_total, state, fence_remaining_seconds
                   FROM idgen_metrics_registry_client",
                &[],
            )
            .unwrap();
        (r.get(0), r.get(1), r.get(2), r.get(3))
    };
    // Claims refused while the registry waits after its start count as failed calls.
    let (first, failed, state, fence) = calls(&mut n);
    assert!(first > failed, "the claim was a call");
    assert_eq!(state, "held");
    let (lease, max_offset): (f64, Option<f64>) = {
        let r = n
            .query_one(
                "SELECT lease_seconds, max_clock_offset_seconds FROM idgen_metrics_registry_client",
                &[],
            )
            .unwrap();
        (r.get(0), r.get(1))
    };
    assert_eq!(lease, 2.0, "registry::FAST's lease");
    assert!(max_offset.is_some_and(|m| m > 0.0));
    assert!(fence.unwrap() > 0.0);
    assert_eq!(
        n.one::<String>("SELECT worker_id::text FROM idgen_metrics_registry_client"),
        worker.to_string()
    );
    // Renewals are calls.
    wait_for("renewals counted", Duration::from_secs(10), || {
        (calls(&mut n).0 > first + 2).then_some(())
    });

    let mut r = reg.connect("postgres");
    let row = r
        .query_one(
            "SELECT worker_ids, worker_ids_held, worker_ids_free, recovery_open
               FROM idgen_metrics_registry",
            &[],
        )
        .unwrap();
    assert_eq!(
        row.get::<_, i64>(0),
        1024,
        "the default layout's 10 worker bits"
    );
    assert_eq!(row.get::<_, i64>(1), 1);
    assert_eq!(row.get::<_, i64>(2), 1023);
    assert_eq!(row.get::<_, i32>(3), 0);

    // A node that asks for no worker id holds no lease by design: no lease_held to alert on.
    let unclaimed = registry::node(&reg, "metrics-unclaimed", &[]);
    let mut u = unclaimed.connect("postgres");
    let held: Option<i32> = wait_for(
        "the unclaimed node's client",
        Duration::from_secs(30),
        || {
            u.query_opt(
                "SELECT lease_held FROM idgen_metrics_registry_client WHERE state = 'unclaimed'",
                &[],
            )
            .unwrap()
            .map(|r| r.get::<_, Option<i32>>(0))
        },
    );
    assert_eq!(held, None, "lease_held on a node without a worker id");
    drop(u);
    drop(unclaimed);

    // A global segment with ranges of 2, drawn from.
    n.batch_execute("SELECT segment_create('g', step => 2, scope => 'global')")
        .unwrap();
    n.one::<i64>("SELECT segment_nextval('g')");

    // The registry stops answering: the failed renewals are counted and the fence comes near,
    // and a call that needs a new range of `g` gives up waiting for it.
    drop(r);
    reg.stop("fast");
    let failure = (0..20)
        .map(|_| n.query_one("SELECT segment_nextval('g')", &[]))
        .find_map(Result::err)
        .expect("the cached ranges of g run out");
    assert_eq!(sqlstate::<()>(Err(failure)), "55P03");
    assert!(
        counters(&mut n, "g").3 >= 1,
        "the call that gave up is a timeout"
    );
    wait_for("failed renewals counted", Duration::from_secs(20), || {
        let (_, now_failed, state, _) = calls(&mut n);
        (now_failed > failed && state == "renewing").then_some(())
    });
    reg.start_server();
    wait_for("held again", Duration::from_secs(30), || {
        (calls(&mut n).2 == "held").then_some(())
    });
}

#[test]
fn every_column_of_the_views_is_a_label_or_a_number() {
    // postgres_exporter turns each column into a label (text) or a sample (a number): a column
    // of another type would be dropped, or fail the scrape.
    let c = Cluster::with_idgen("metrics-types", 1, &[]);
    let mut db = c.connect("postgres");
    let rows: Vec<String> = column(
        &mut db,
        "SELECT c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
           FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
          WHERE c.relname LIKE 'idgen\\_metrics\\_%' AND a.attnum > 0
            AND format_type(a.atttypid, a.atttypmod) NOT IN
                ('text', 'integer', 'bigint', 'double precision')",
    );
    assert!(rows.is_empty(), "{rows:#?}");
    assert_eq!(
        db.one::<i64>("SELECT count(*) FROM pg_class WHERE relname LIKE 'idgen\\_metrics\\_%'"),
        VIEWS.len() as i64
    );
}

/// postgres_exporter's queries (`monitoring/postgres_exporter/queries.yaml`), each with the
/// columns its metrics name, in order: the `query: |` block and the `- column:` entries of
/// each key, read from the file's block layout.
fn exporter_queries() -> Vec<(String, String, Vec<String>)> {
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("run by cargo test");
    let path = format!("{manifest}/../../monitoring/postgres_exporter/queries.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut out: Vec<(String, String, Vec<String>)> = Vec::new();
    let mut in_query = false;
    for line in text.lines() {
        if !line.starts_with(' ') && !line.starts_with('#') && line.ends_with(':') {
            out.push((
                line.trim_end_matches(':').to_owned(),
                String::new(),
                Vec::new(),
            ));
            in_query = false;
        } else if line.trim() == "query: |" {
            in_query = true;
        } else if in_query && line.starts_with("    ") {
            let q = &mut out.last_mut().unwrap().1;
            q.push_str(line.trim());
            q.push('\n');
        } else {
            in_query = false;
            let t = line.trim();
            if let Some(col) = t.strip_prefix("- ").and_then(|c| c.strip_suffix(':')) {
                out.last_mut().unwrap().2.push(col.to_owned());
            }
        }
    }
    assert!(out.len() >= 5, "{path}: {out:?}");
    out
}

#[test]
fn the_exporter_queries_run_as_pg_monitor_and_nothing_stands_in_for_the_views() {
    let reg = registry::registry("metrics-exporter");
    let mut r = reg.connect("postgres");
    // The registry database, with a lease, so that every query has a row.
    let node = registry::node(&reg, "metrics-exporter-node", &["idgen.worker_id = auto"]);
    held_worker(&node, Duration::from_secs(30));
    // The exporter's role as monitoring/README.md sets it up; a hostile database owner plants
    // a schema named after it, and views and a function in it and in public, before and after.
    r.batch_execute(
        "CREATE ROLE prometheus LOGIN IN ROLE pg_monitor;
         ALTER ROLE prometheus SET search_path = pg_catalog;
         CREATE ROLE owner LOGIN;
         ALTER DATABASE postgres OWNER TO owner;
         GRANT CREATE ON SCHEMA public TO owner;
         SELECT segment_create('s');
         SELECT serial_create('n', 'N{seq:03}');",
    )
    .unwrap();
    let mut hostile = reg.connect_as("postgres", "owner");
    hostile
        .batch_execute(
            "CREATE TABLE stolen (who text);
             GRANT INSERT ON stolen TO PUBLIC;
             CREATE FUNCTION public.now() RETURNS timestamptz LANGUAGE sql
               AS $$ INSERT INTO public.stolen SELECT current_user; SELECT pg_catalog.now() $$;
             CREATE SCHEMA prometheus;
             GRANT USAGE ON SCHEMA prometheus TO PUBLIC;
             CREATE VIEW prometheus.idgen_metrics_segment AS SELECT 1 AS decoy;
             CREATE VIEW prometheus.idgen_metrics_snowflake AS SELECT 1 AS decoy;",
        )
        .unwrap();
    let mut exporter = reg.connect_as("postgres", "prometheus");
    for (key, query, columns) in exporter_queries() {
        let rows = exporter
            .query(query.as_str(), &[])
            .unwrap_or_else(|e| panic!("{key}: {e}\n{query}"));
        let stmt = exporter.prepare(query.as_str()).unwrap();
        let names: Vec<String> = stmt.columns().iter().map(|c| c.name().to_owned()).collect();
        assert_eq!(names, columns, "{key}: the query's columns and its metrics");
        assert!(
            !rows.is_empty()
                || key == "idgen_registry_client_state"
                || key == "idgen_registry_client",
            "{key}: no row"
        );
    }
    assert_eq!(
        r.one::<i64>("SELECT count(*) FROM stolen"),
        0,
        "a function of the database owner ran in the exporter's session"
    );
}
