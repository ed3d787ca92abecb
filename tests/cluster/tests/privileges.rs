//! Pins who may do what (DESIGN.md §4): every role draws ids and reads the status; members of
//! `idgen_admin` (created by the extension) create, alter, drop and setval segments; nobody
//! writes `idgen_segment` directly, not even `idgen_admin`; only a superuser changes settings,
//! except `idgen.segment_wait_timeout`, which like `lock_timeout` bounds only the caller's own
//! wait; and nothing idgen runs resolves a table, function or operator through the caller's
//! `search_path`.

use idgen_cluster_tests::{column, sqlstate, Cluster, One};

/// Direct writes to the catalog table: refused to everyone but the extension's allocator.
const TABLE_WRITES: &[&str] = &[
    "INSERT INTO idgen_segment (name, max_id, step) VALUES ('w', 0, 1)",
    "UPDATE idgen_segment SET max_id = 0",
    "DELETE FROM idgen_segment",
    "TRUNCATE idgen_segment",
];

/// Changing settings: refused to every role but a superuser.
const SETTING_CHANGES: &[(&str, &str)] = &[
    ("ALTER SYSTEM SET idgen.max_drift_ms = 5", "42501"),
    ("ALTER SYSTEM SET idgen.worker_id = 9", "42501"),
    ("ALTER SYSTEM RESET ALL", "42501"),
    ("SET idgen.worker_id = 9", "55P02"),
    ("SET idgen.max_drift_ms = 5", "55P02"),
    ("SET idgen.segment_max_step = 5", "55P02"),
    ("SELECT pg_reload_conf()", "42501"),
];

#[test]
fn roles_draw_administer_and_configure_as_documented() {
    let cluster = Cluster::with_idgen("privileges", 6, &[]);
    let mut superuser = cluster.connect("postgres");
    superuser
        .batch_execute(
            "CREATE ROLE app LOGIN; CREATE ROLE ops LOGIN; GRANT idgen_admin TO ops;
             SELECT segment_create('p', step => 10);",
        )
        .unwrap();

    // Any role draws ids and reads the status and the high-water marks.
    let mut app = cluster.connect_as("postgres", "app");
    assert_eq!(app.one::<i64>("SELECT segment_nextval('p')"), 1);
    assert_eq!(app.one::<i64>("SELECT segment_currval('p')"), 1);
    assert!(app.one::<i64>("SELECT snowflake_nextval()") > 0);
    assert_eq!(
        app.one::<i64>("SELECT worker_id::bigint FROM snowflake_status()"),
        6
    );
    assert_eq!(app.one::<i64>("SELECT count(*) FROM segment_status()"), 1);
    assert!(app.one::<i64>("SELECT max_id FROM idgen_segment WHERE name = 'p'") >= 1);
    // ... but does not change segments, the table or the settings.
    for sql in [
        "SELECT segment_create('q')",
        "SELECT segment_alter('p', step => 5)",
        "SELECT segment_drop('p')",
        "SELECT segment_setval('p', 1000)",
    ] {
        assert_eq!(sqlstate(app.batch_execute(sql)), "42501", "app: {sql}");
    }
    for sql in TABLE_WRITES {
        assert_eq!(sqlstate(app.batch_execute(sql)), "42501", "app: {sql}");
    }
    for (sql, code) in SETTING_CHANGES {
        assert_eq!(sqlstate(app.batch_execute(sql)), *code, "app: {sql}");
    }
    // The caller's own wait bound is the caller's.
    app.batch_execute("SET idgen.segment_wait_timeout = '2s'")
        .unwrap();

    // A member of idgen_admin administers segments, through the allocator ...
    let mut ops = cluster.connect_as("postgres", "ops");
    ops.batch_execute(
        "SELECT segment_create('q', start => 500, step => 20);
         SELECT segment_alter('q', step => 30, description => 'by ops');",
    )
    .unwrap();
    assert_eq!(ops.one::<i64>("SELECT segment_setval('p', 1000)"), 1000);
    assert_eq!(ops.one::<i64>("SELECT segment_nextval('q')"), 500);
    assert_eq!(
        ops.one::<i64>("SELECT step::bigint FROM idgen_segment WHERE name = 'q'"),
        30
    );
    ops.batch_execute("SELECT segment_drop('q')").unwrap();
    // ... but still never writes the table itself, nor changes settings.
    for sql in TABLE_WRITES {
        assert_eq!(sqlstate(ops.batch_execute(sql)), "42501", "ops: {sql}");
    }
    for (sql, code) in SETTING_CHANGES {
        assert_eq!(sqlstate(ops.batch_execute(sql)), *code, "ops: {sql}");
    }
    assert_eq!(app.one::<i64>("SELECT segment_nextval('p')"), 1001);
    assert_eq!(
        superuser.one::<i64>("SELECT count(*) FROM idgen_segment"),
        1
    );
    let auto = std::fs::read_to_string(cluster.data().join("postgresql.auto.conf")).unwrap();
    assert!(!auto.contains("idgen"), "{auto}");

    // A second database's CREATE EXTENSION reuses the role; DROP EXTENSION leaves it without
    // grants, and CREATE EXTENSION grants again.
    cluster.create_db_with_idgen("second");
    let mut second = cluster.connect("second");
    second
        .batch_execute("DROP EXTENSION idgen; CREATE EXTENSION idgen;")
        .unwrap();
    let mut ops2 = cluster.connect_as("second", "ops");
    ops2.batch_execute("SELECT segment_create('in_second')")
        .unwrap();
    assert_eq!(ops2.one::<i64>("SELECT segment_nextval('in_second')"), 1);
}

/// CVE-2018-1058's pattern: a role puts its own schema first in `search_path`, with look-alikes
/// of idgen's table and PostgreSQL's `=` for text and `now()` that record being called. Every
/// idgen function must keep using the real objects.
#[test]
fn a_malicious_search_path_is_not_followed() {
    let cluster = Cluster::with_idgen("search-path", 6, &[]);
    let mut superuser = cluster.connect("postgres");
    superuser
        .batch_execute(
            "CREATE ROLE mallory LOGIN; GRANT idgen_admin TO mallory;
             CREATE SCHEMA evil AUTHORIZATION mallory;
             SELECT segment_create('p', step => 10);",
        )
        .unwrap();
    let mut mallory = cluster.connect_as("postgres", "mallory");
    mallory
        .batch_execute(
            "CREATE TABLE evil.calls (what text);
             CREATE TABLE evil.idgen_segment (name text, max_id bigint, step int, description text);
             INSERT INTO evil.idgen_segment VALUES ('p', -100, 1, 'fake'), ('ghost', 0, 1, 'fake');
             CREATE FUNCTION evil.text_eq(a text, b text) RETURNS boolean LANGUAGE plpgsql AS
               $$ BEGIN INSERT INTO evil.calls VALUES ('='); RETURN a OPERATOR(pg_catalog.=) b; END $$;
             CREATE OPERATOR evil.= (LEFTARG = text, RIGHTARG = text, FUNCTION = evil.text_eq);
             CREATE FUNCTION evil.now() RETURNS timestamptz LANGUAGE plpgsql AS
               $$ BEGIN INSERT INTO evil.calls VALUES ('now'); RETURN pg_catalog.now(); END $$;
             CREATE FUNCTION evil.quote_ident(text) RETURNS text LANGUAGE plpgsql AS
               $$ BEGIN INSERT INTO evil.calls VALUES ('quote_ident'); RETURN 'evil'; END $$;
             SET search_path = evil, pg_catalog, public;",
        )
        .unwrap();
    // The look-alike operator is live in this session.
    assert_eq!(
        mallory.one::<i64>("SELECT count(*) FROM evil.idgen_segment WHERE name = 'p'"),
        1
    );
    mallory.batch_execute("TRUNCATE evil.calls").unwrap();

    assert_eq!(mallory.one::<i64>("SELECT public.segment_nextval('p')"), 1);
    assert_eq!(mallory.one::<i64>("SELECT public.segment_currval('p')"), 1);
    assert_eq!(
        sqlstate(mallory.batch_execute("SELECT public.segment_currval('ghost')")),
        "42704"
    );
    assert_eq!(
        sqlstate(mallory.batch_execute("SELECT public.segment_nextval('ghost')")),
        "42704"
    );
    let status: Vec<(String, i64)> = mallory
        .query("SELECT name, max_id FROM public.segment_status()", &[])
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(status.len(), 1, "{status:?}");
    assert_eq!(status[0].0, "p");
    assert!(status[0].1 >= 1, "{status:?}");
    mallory
        .batch_execute(
            "SELECT public.segment_create('r', start => 7, step => 3);
             SELECT public.segment_alter('r', step => 4);
             SELECT public.segment_setval('r', 50);",
        )
        .unwrap();
    assert_eq!(mallory.one::<i64>("SELECT public.segment_nextval('r')"), 51);
    mallory
        .batch_execute("SELECT public.segment_drop('r')")
        .unwrap();
    assert!(mallory.one::<i64>("SELECT public.snowflake_nextval()") > 0);
    mallory
        .batch_execute("SELECT * FROM public.snowflake_status()")
        .unwrap();

    assert_eq!(mallory.one::<i64>("SELECT count(*) FROM evil.calls"), 0);
    // The real table saw exactly the real work.
    let real: Vec<String> = column(
        &mut superuser,
        "SELECT name FROM idgen_segment ORDER BY name",
    );
    assert_eq!(real, ["p"]);
    assert_eq!(
        superuser.one::<i64>("SELECT count(*) FROM evil.idgen_segment"),
        2
    );
}
