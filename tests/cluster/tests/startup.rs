//! Pins what happens before any id is drawn: idgen refuses to load unless preloaded (with the
//! exact line as hint), refuses to generate without a worker id, keeps its settings at
//! postmaster level, and a server with an invalid setting does not start.

use idgen_cluster_tests::{column, db_error, sqlstate, Cluster, One};

/// Servers without idgen in `shared_preload_libraries`, and the hint `CREATE EXTENSION idgen`
/// must give on each: the exact line, keeping the libraries already preloaded.
const NOT_PRELOADED: &[(&str, &[&str], &str)] = &[
    ("nopreload", &[], "shared_preload_libraries = 'idgen'"),
    (
        "otherpreload",
        &["shared_preload_libraries = 'plpgsql'"],
        "shared_preload_libraries = 'plpgsql,idgen'",
    ),
];

#[test]
fn refuses_to_load_unless_preloaded_and_hints_the_exact_line() {
    for &(tag, settings, line) in NOT_PRELOADED {
        let c = Cluster::start(tag, settings);
        let err = db_error(
            c.connect("postgres")
                .batch_execute("CREATE EXTENSION idgen"),
        );
        assert_eq!(err.code().code(), "55000", "{tag}: {err:?}");
        assert!(
            err.hint().unwrap_or("").contains(line),
            "{tag}: the hint does not give {line}: {err:?}"
        );
    }
}

#[test]
fn without_worker_id_generation_fails_and_decoding_works() {
    let c = Cluster::start("noworker", &["shared_preload_libraries = 'idgen'"]);
    c.create_db_with_idgen("postgres");
    let mut client = c.connect("postgres");
    let err = db_error(client.query_one("SELECT snowflake_nextval()", &[]));
    assert_eq!(err.code().code(), "55000");
    assert!(
        err.hint().unwrap_or("").contains("idgen.worker_id"),
        "{err:?}"
    );
    assert_eq!(
        sqlstate(client.query("SELECT snowflake_nextvals(3)", &[])),
        "55000"
    );
    // Nothing was issued, so there is no currval either.
    assert_eq!(
        sqlstate(client.query_one("SELECT snowflake_currval()", &[])),
        "55000"
    );
    let row = client
        .query_one("SELECT worker_id, last_id FROM snowflake_status()", &[])
        .unwrap();
    assert_eq!(
        (row.get::<_, Option<i32>>(0), row.get::<_, Option<i64>>(1)),
        (None, None)
    );
    // Pure functions need no worker id.
    let w: i32 = client.one("SELECT worker_id FROM snowflake_decode(snowflake_compose(now(), 9))");
    assert_eq!(w, 9);
}

#[test]
fn settings_are_fixed_at_server_start() {
    let c = Cluster::with_idgen("settings", 3, &[]);
    let mut client = c.connect("postgres");
    for (statement, code) in [
        ("SET idgen.worker_id = 4", "55P02"),
        ("SET idgen.epoch = '2025-01-01+00'", "55P02"),
        ("SET idgen.worker_bits = 5", "55P02"),
        ("SET idgen.id_bits = 53", "55P02"),
        ("SET idgen.time_unit_ms = 10", "55P02"),
        // Reloadable, but not per session: only postgresql.conf or ALTER SYSTEM change them.
        ("SET idgen.max_drift_ms = -1", "55P02"),
        ("SET idgen.sequence_jitter = 100", "55P02"),
        // The idgen. prefix is reserved: a misspelt setting is an error, not a placeholder.
        ("SET idgen.wroker_id = 4", "42602"),
    ] {
        assert_eq!(
            sqlstate(client.batch_execute(statement)),
            code,
            "{statement}"
        );
    }
    for (name, value) in ALTER_SYSTEM_REFUSALS {
        let statement = format!("ALTER SYSTEM SET {name} = {value}");
        assert_eq!(
            sqlstate(client.batch_execute(&statement)),
            "22023",
            "{statement}"
        );
    }
    // Every setting idgen defines has a refused value above and in
    // invalid_settings_stop_the_server_from_starting.
    let defined: Vec<String> = column(
        &mut client,
        "SELECT name FROM pg_settings WHERE name LIKE 'idgen.%' ORDER BY name",
    );
    assert_eq!(defined.len(), 26, "{defined:?}");
    for name in &defined {
        assert!(
            ALTER_SYSTEM_REFUSALS.iter().any(|(n, _)| n == name),
            "no ALTER SYSTEM case for {name}"
        );
        assert!(
            START_REFUSALS.iter().any(|(_, n)| n == name),
            "no start-up case for {name}"
        );
    }
    let auto = std::fs::read_to_string(c.data().join("postgresql.auto.conf")).unwrap();
    assert!(
        !auto.contains("idgen"),
        "a rejected value reached postgresql.auto.conf:\n{auto}"
    );
    let shown: String = client.one("SHOW idgen.worker_id");
    assert_eq!(shown, "3");
}

/// A value of each idgen setting that `ALTER SYSTEM` refuses (22023) before writing
/// postgresql.auto.conf: each value is checked against its own range. Combinations (a worker id
/// that does not fit idgen.worker_bits) are checked at start, as PostgreSQL does for wal_level
/// and max_wal_senders.
const ALTER_SYSTEM_REFUSALS: &[(&str, &str)] = &[
    ("idgen.worker_id", "-2"),
    ("idgen.id_bits", "52"),
    ("idgen.id_bits", "64"),
    ("idgen.worker_bits", "32"),
    ("idgen.sequence_bits", "32"),
    ("idgen.time_unit_ms", "0"),
    ("idgen.epoch", "'not a time'"),
    ("idgen.epoch", "'2999-01-01+00'"),
    ("idgen.max_drift_ms", "-2"),
    ("idgen.max_wait_ms", "-1"),
    ("idgen.sequence_jitter", "-1"),
    ("idgen.segment_wait_timeout", "-1"),
    ("idgen.segment_refill_interval", "0"),
    ("idgen.segment_max_step", "0"),
    ("idgen.segment_max_step", "1000000001"),
    ("idgen.segment_node_count", "0"),
    ("idgen.segment_node_index", "-1"),
    ("idgen.segment_worker_idle_timeout", "0"),
    ("idgen.segment_cache_size", "15"),
    ("idgen.serial_cache_size", "15"),
    ("idgen.segment_interleave_from", "'12x'"),
    ("idgen.segment_interleave_until", "'99999999999999999999'"),
    ("idgen.worker_id", "'automatic'"),
    ("idgen.registry", "'nokey'"),
    ("idgen.node_name", "'two words'"),
    ("idgen.registry_lease", "99"),
    ("idgen.registry_renew_interval", "9"),
    ("idgen.registry_max_clock_offset_ms", "-2"),
    ("idgen.registry_lease", "120001"),
    ("idgen.registry_single_server", "'maybe'"),
    ("idgen.registry_max_lease", "99"),
    ("idgen.registry_max_lease", "120001"),
];

/// postgresql.conf lines that stop the server from starting, and the setting its log must name.
const START_REFUSALS: &[(&str, &str)] = &[
    (
        "idgen.worker_bits = 16\nidgen.sequence_bits = 16",
        "idgen.worker_bits",
    ),
    ("idgen.worker_bits = 32", "idgen.worker_bits"),
    // 53 bits less the default 10 + 12 leave 31 time bits: the log names id_bits.
    ("idgen.id_bits = 53", "idgen.id_bits"),
    ("idgen.id_bits = 52", "idgen.id_bits"),
    ("idgen.id_bits = 64", "idgen.id_bits"),
    ("idgen.sequence_bits = 32", "idgen.sequence_bits"),
    ("idgen.sequence_bits = 'twelve'", "idgen.sequence_bits"),
    ("idgen.time_unit_ms = 0", "idgen.time_unit_ms"),
    (
        "idgen.worker_bits = 5\nidgen.worker_id = 32",
        "idgen.worker_id",
    ),
    (
        "idgen.worker_bits = 0\nidgen.worker_id = 1",
        "idgen.worker_id",
    ),
    ("idgen.max_drift_ms = -2", "idgen.max_drift_ms"),
    ("idgen.max_wait_ms = -1", "idgen.max_wait_ms"),
    ("idgen.sequence_jitter = -1", "idgen.sequence_jitter"),
    (
        "idgen.segment_wait_timeout = -1",
        "idgen.segment_wait_timeout",
    ),
    (
        "idgen.segment_refill_interval = 0",
        "idgen.segment_refill_interval",
    ),
    ("idgen.segment_max_step = 0", "idgen.segment_max_step"),
    (
        "idgen.segment_node_count = 3\nidgen.segment_node_index = 3",
        "idgen.segment_node_index",
    ),
    ("idgen.segment_node_index = -1", "idgen.segment_node_index"),
    ("idgen.segment_node_count = 0", "idgen.segment_node_count"),
    (
        "idgen.segment_interleave_from = 'ten'",
        "idgen.segment_interleave_from",
    ),
    (
        "idgen.segment_interleave_until = '1.5'",
        "idgen.segment_interleave_until",
    ),
    (
        "idgen.segment_worker_idle_timeout = 0",
        "idgen.segment_worker_idle_timeout",
    ),
    (
        "idgen.segment_cache_size = 2000000",
        "idgen.segment_cache_size",
    ),
    (
        "idgen.serial_cache_size = 2000000",
        "idgen.serial_cache_size",
    ),
    ("idgen.epoch = 'yesterday-ish'", "idgen.epoch"),
    ("idgen.epoch = '2999-01-01 00:00:00+00'", "idgen.epoch"),
    ("idgen.worker_id = 1024", "idgen.worker_id"),
    ("idgen.worker_id = -2", "idgen.worker_id"),
    ("idgen.worker_id = 'seven'", "idgen.worker_id"),
    ("idgen.worker_id = auto", "idgen.worker_id"), // auto needs idgen.registry
    ("idgen.registry = 'host=127.0.0.1 port'", "idgen.registry"),
    ("idgen.node_name = 'ü'", "idgen.node_name"),
    ("idgen.registry_lease = 0", "idgen.registry_lease"),
    (
        "idgen.registry_renew_interval = 0",
        "idgen.registry_renew_interval",
    ),
    (
        "idgen.registry_max_clock_offset_ms = -5",
        "idgen.registry_max_clock_offset_ms",
    ),
    ("idgen.registry_lease = 121s", "idgen.registry_lease"),
    (
        "idgen.registry_single_server = maybe",
        "idgen.registry_single_server",
    ),
    (
        "idgen.registry_max_lease = 121s",
        "idgen.registry_max_lease",
    ),
];

/// A server whose postgresql.conf has an invalid idgen setting, or settings that make no usable
/// Snowflake layout (fewer than 32 time bits, a worker id that does not fit the worker bits),
/// does not start, and its log names the setting.
#[test]
fn invalid_settings_stop_the_server_from_starting() {
    for &(setting, name) in START_REFUSALS {
        let c = Cluster::init("badconf", &["shared_preload_libraries = 'idgen'", setting]);
        let out = c.pg_ctl_start();
        assert!(!out.status.success(), "server started with {setting}");
        let log = c.log();
        assert!(
            log.contains(name),
            "log for {setting} does not name {name}:\n{log}"
        );
    }
}

/// The positive control of the refusals above: a valid epoch other than the default starts the
/// server and is the time of id 0.
#[test]
fn a_custom_epoch_is_used() {
    let c = Cluster::start(
        "epoch",
        &[
            "shared_preload_libraries = 'idgen'",
            "idgen.worker_id = 0x1",
            "idgen.epoch = '2020-02-03 04:05:06.789+00'",
        ],
    );
    c.create_db_with_idgen("postgres");
    let mut client = c.connect("postgres");
    let zero: i64 = client.one("SELECT snowflake_compose('2020-02-03 04:05:06.789+00')");
    assert_eq!(zero, 0);
    // A worker id written in any form PostgreSQL accepts (here hex) is not refused.
    let worker: i32 = client.one("SELECT worker_id FROM snowflake_status()");
    assert_eq!(worker, 1);
    let at_epoch: bool =
        client.one("SELECT epoch = '2020-02-03 04:05:06.789+00' FROM snowflake_status()");
    assert!(at_epoch);
    // An id drawn now is about (now - epoch) ms << 22.
    let ok: bool = client.one("SELECT abs(extract(epoch FROM snowflake_timestamp(snowflake_nextval()) - clock_timestamp())) < 60");
    assert!(ok);
}
