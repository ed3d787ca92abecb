//! Pins that no value of an idgen setting can stop the server, and that the reloadable clock
//! settings never make a batch within the documented maximum fail.
//!
//! * A bad value of every idgen setting, written to postgresql.conf and reloaded, leaves the
//!   postmaster and the open sessions running with the old value, and the server log names the
//!   setting. A postmaster-context setting changed in postgresql.conf is not applied on reload,
//!   but it is still checked, in the postmaster, where an ERROR raised by a check hook is fatal.
//! * The same values are refused by `ALTER SYSTEM` with 22023, the documented SQLSTATE of a bad
//!   setting value, and never reach postgresql.auto.conf.
//! * `snowflake_nextvals(n)` at the documented maximum (a second of ids, and no more ticks than
//!   `idgen.max_drift_ms` allows ahead of the clock) succeeds from an idle generator without
//!   waiting, for every `idgen.sequence_jitter`, at the corners of the drift bound.

use std::fs;
use std::time::{Duration, Instant};

use idgen_cluster_tests::{column, sqlstate, Cluster, One};
use postgres::Client;

/// A bad value of each idgen setting, as written after `=` in postgresql.conf and in
/// `ALTER SYSTEM SET`, with what makes it bad.
const BAD_VALUES: &[(&str, &str, &str)] = &[
    ("idgen.worker_id", "-2", "below -1"),
    ("idgen.worker_id", "'seven'", "not an integer"),
    ("idgen.worker_id", "2147483648", "beyond int"),
    ("idgen.id_bits", "52", "below 53"),
    ("idgen.id_bits", "64", "above 63"),
    ("idgen.worker_bits", "32", "above 31"),
    ("idgen.worker_bits", "-1", "negative"),
    ("idgen.sequence_bits", "32", "above 31"),
    ("idgen.sequence_bits", "'twelve'", "not an integer"),
    ("idgen.time_unit_ms", "0", "below 1"),
    ("idgen.time_unit_ms", "'10 kB'", "not a time unit"),
    // timestamptz_in raises 22009 here, which pgrx's TimestampWithTimeZone::from_str does not
    // catch: an ERROR from the check hook in the postmaster.
    (
        "idgen.epoch",
        "'2024-01-01 00:00:00+16'",
        "offset beyond 15:59",
    ),
    ("idgen.epoch", "'not a time'", "not a timestamptz (22007)"),
    (
        "idgen.epoch",
        "'2024-13-45 00:00:00+00'",
        "no such date (22008)",
    ),
    (
        "idgen.epoch",
        "'2024-01-01 00:00:00 Mars/Olympus'",
        "no such zone (22023)",
    ),
    (
        "idgen.epoch",
        "'294277-01-01 00:00:00+00'",
        "beyond timestamptz",
    ),
    ("idgen.epoch", "''", "empty"),
    ("idgen.epoch", "'2999-01-01 00:00:00+00'", "in the future"),
    ("idgen.epoch", "'infinity'", "not finite"),
    ("idgen.epoch", "'-infinity'", "not finite"),
    ("idgen.epoch", "'now'", "not a fixed instant"),
    ("idgen.epoch", "'today'", "not a fixed instant"),
    ("idgen.epoch", "'yesterday 12:00+00'", "not a fixed instant"),
    ("idgen.max_drift_ms", "-2", "below -1"),
    ("idgen.max_drift_ms", "'1 fortnight'", "not a time unit"),
    ("idgen.max_wait_ms", "-1", "negative"),
    ("idgen.max_wait_ms", "'3000000h'", "beyond int ms"),
    ("idgen.sequence_jitter", "-1", "negative"),
    ("idgen.sequence_jitter", "2147483648", "beyond int"),
    ("idgen.segment_wait_timeout", "-1", "negative"),
    ("idgen.segment_refill_interval", "0", "below 1"),
    ("idgen.segment_max_step", "0", "below 1"),
    (
        "idgen.segment_max_step",
        "1000000001",
        "above the maximum step",
    ),
    ("idgen.segment_node_count", "0", "below 1"),
    ("idgen.segment_node_count", "1025", "above 1024"),
    ("idgen.segment_node_index", "-1", "negative"),
    ("idgen.segment_node_index", "1024", "above 1023"),
    ("idgen.segment_worker_idle_timeout", "0", "below 1"),
    ("idgen.segment_cache_size", "15", "below 16"),
    ("idgen.segment_cache_size", "1000001", "above 1,000,000"),
    ("idgen.serial_cache_size", "15", "below 16"),
    ("idgen.serial_cache_size", "1000001", "above 1,000,000"),
    ("idgen.segment_interleave_from", "'12x'", "not a bigint"),
    (
        "idgen.segment_interleave_from",
        "'99999999999999999999'",
        "beyond bigint",
    ),
    ("idgen.segment_interleave_until", "'1.5'", "not a bigint"),
    (
        "idgen.worker_id",
        "'automatic'",
        "neither auto nor an integer",
    ),
    (
        "idgen.registry",
        "'host=127.0.0.1 port'",
        "not a connection string",
    ),
    ("idgen.registry", "'postgresql://[::1'", "not a URI"),
    ("idgen.node_name", "'two words'", "a blank in a node name"),
    (
        "idgen.node_name",
        "'nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn'",
        "64 bytes",
    ),
    ("idgen.registry_lease", "99", "below 100 ms"),
    ("idgen.registry_renew_interval", "'5ms'", "below 10 ms"),
    ("idgen.registry_max_clock_offset_ms", "-2", "below -1"),
    (
        "idgen.registry_lease",
        "'121s'",
        "above the longest lease a registry grants",
    ),
    ("idgen.registry_single_server", "'maybe'", "not a boolean"),
    ("idgen.registry_max_lease", "99", "below 100 ms"),
    (
        "idgen.registry_max_lease",
        "'121s'",
        "above the longest lease a registry grants",
    ),
];

/// How long a reload may take to reach the log or a session: generous, it is not measured.
const RELOAD_LIMIT: Duration = Duration::from_secs(30);

fn show(client: &mut Client, name: &str) -> String {
    client
        .query_one(&format!("SHOW {name}"), &[])
        .unwrap_or_else(|e| panic!("SHOW {name}: {e}"))
        .get(0)
}

/// Polls `done` every 20 ms until it holds or [`RELOAD_LIMIT`] has passed; returns whether it
/// held.
fn wait_until(mut done: impl FnMut() -> bool) -> bool {
    let give_up = Instant::now() + RELOAD_LIMIT;
    loop {
        if done() {
            return true;
        }
        if Instant::now() > give_up {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn every_setting_has_a_bad_value_here() {
    let c = Cluster::with_idgen("reloadnames", 1, &[]);
    let defined: Vec<String> = column(
        &mut c.connect("postgres"),
        "SELECT name FROM pg_settings WHERE name LIKE 'idgen.%' ORDER BY name",
    );
    assert!(!defined.is_empty());
    for name in &defined {
        assert!(
            BAD_VALUES.iter().any(|(n, ..)| n == name),
            "no bad value for {name}"
        );
    }
}

/// Each bad value is written to postgresql.conf and the configuration reloaded: the postmaster
/// logs the setting as invalid, keeps running (same process, new connections accepted), and the
/// old value stays in force in a session that was open across every reload and in a new one.
#[test]
fn a_bad_value_in_postgresql_conf_never_stops_the_server_on_reload() {
    let c = Cluster::with_idgen("reload", 3, &["idgen.max_drift_ms = 700"]);
    let pid = c.postmaster_pid();
    let conf = c.data().join("postgresql.conf");
    let original = fs::read_to_string(&conf).unwrap();
    let mut witness = c.connect("postgres");
    for &(name, value, why) in BAD_VALUES {
        let before = show(&mut witness, name);
        let log_from = c.log().len();
        fs::write(&conf, format!("{original}{name} = {value}\n")).unwrap();
        witness.batch_execute("SELECT pg_reload_conf()").unwrap();
        let pid_file = c.data().join("postmaster.pid");
        let settled = wait_until(|| {
            !pid_file.exists()
                || c.log()
                    .get(log_from..)
                    .is_some_and(|new| new.contains(name))
        });
        fs::write(&conf, &original).unwrap();
        let log = c.log();
        let new = log.get(log_from..).unwrap_or(&log);
        let case = format!("{name} = {value} ({why})");
        assert!(
            pid_file.exists(),
            "the postmaster stopped after reloading {case}:\n{new}"
        );
        let mut fresh = postgres::Client::connect(&c.conninfo("postgres"), postgres::NoTls)
            .unwrap_or_else(|e| panic!("no new connection after reloading {case}: {e}\n{new}"));
        assert!(
            settled,
            "the log does not name {name} after reloading {case}:\n{new}"
        );
        assert_eq!(c.postmaster_pid(), pid, "{case}");
        assert_eq!(show(&mut fresh, name), before, "{case}: a new session");
        assert_eq!(
            show(&mut witness, name),
            before,
            "{case}: a session open across the reload"
        );
        assert_eq!(witness.one::<i64>("SELECT 1::bigint"), 1, "{case}");
    }
    // The reloads were real: a good value of a reloadable setting takes effect the same way.
    fs::write(&conf, format!("{original}idgen.max_drift_ms = 500\n")).unwrap();
    witness.batch_execute("SELECT pg_reload_conf()").unwrap();
    assert!(
        wait_until(|| show(&mut witness, "idgen.max_drift_ms") == "500ms"),
        "a good value was not applied:\n{}",
        c.log()
    );
    // And the server still draws ids.
    assert!(witness.one::<i64>("SELECT snowflake_nextval()") > 0);
}

/// `ALTER SYSTEM` refuses each bad value with 22023 and writes nothing.
#[test]
fn alter_system_refuses_every_bad_value_with_22023() {
    let c = Cluster::with_idgen("altersystem", 3, &[]);
    let mut client = c.connect("postgres");
    let mut wrong = Vec::new();
    for &(name, value, why) in BAD_VALUES {
        let statement = format!("ALTER SYSTEM SET {name} = {value}");
        match client.batch_execute(&statement) {
            Ok(()) => wrong.push(format!("{statement} ({why}): accepted")),
            Err(e) => {
                let code = sqlstate::<()>(Err(e));
                if code != "22023" {
                    wrong.push(format!("{statement} ({why}): {code}"));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "not refused with 22023:\n{}",
        wrong.join("\n")
    );
    let auto = fs::read_to_string(c.data().join("postgresql.auto.conf")).unwrap();
    assert!(
        !auto.contains("idgen"),
        "a rejected value reached postgresql.auto.conf:\n{auto}"
    );
    // Good values of the same settings are accepted (the refusals above are not blanket ones).
    for statement in [
        "ALTER SYSTEM SET idgen.epoch = '2020-02-03 04:05:06.789+00'",
        "ALTER SYSTEM SET idgen.epoch = 'epoch'",
        "ALTER SYSTEM SET idgen.worker_id = 7",
        "ALTER SYSTEM SET idgen.max_drift_ms = -1",
    ] {
        client
            .batch_execute(statement)
            .unwrap_or_else(|e| panic!("{statement}: {e}"));
    }
    client.batch_execute("ALTER SYSTEM RESET ALL").unwrap();
}

/// The state word of an id of the default layout (`tick << 12 | sequence`, the worker bits
/// removed): consecutive ids of one worker have consecutive state words.
fn state_of(id: i64) -> i64 {
    ((id >> 22) << 12) | (id & 4095)
}

/// The documented maximum batch of the default layout: a second of ids (1000 ticks of 4096),
/// and no more than the `max_drift_ms + 1` ticks the drift bound lets a batch reach.
fn documented_max(max_drift_ms: i64) -> i64 {
    let second = 1000 * 4096;
    if max_drift_ms < 0 {
        second
    } else {
        second.min((max_drift_ms + 1) * 4096)
    }
}

/// With `idgen.max_wait_ms = 0` a call that would have to wait for the clock fails at once
/// (53400), so a batch that succeeds here did not wait. From an idle generator (its last id in
/// an earlier tick than the clock's), a batch of the documented maximum must fit whatever
/// sequence the jitter would start the new tick at; one more is refused with 22023.
#[test]
fn a_batch_at_the_documented_maximum_works_whatever_the_jitter() {
    let c = Cluster::with_idgen("maxbatch", 5, &["idgen.max_wait_ms = 0"]);
    let mut client = c.connect("postgres");
    let mut failures = Vec::new();
    for drift in [0i64, 1, 998, 999, 1000, -1] {
        for jitter in [2i64, 100, 4096, i32::MAX as i64] {
            // One statement each: ALTER SYSTEM cannot run in a multi-statement query.
            for statement in [
                format!("ALTER SYSTEM SET idgen.max_drift_ms = {drift}"),
                format!("ALTER SYSTEM SET idgen.sequence_jitter = {jitter}"),
                "SELECT pg_reload_conf()".into(),
            ] {
                client.batch_execute(&statement).unwrap();
            }
            let expected = vec![drift.to_string(), jitter.to_string()];
            let applied = wait_until(|| {
                column::<String>(
                    &mut client,
                    "SELECT setting FROM pg_settings
                     WHERE name IN ('idgen.max_drift_ms', 'idgen.sequence_jitter') ORDER BY name",
                ) == expected
            });
            assert!(applied, "drift {drift}, jitter {jitter} not applied");
            // Idle: the clock is past the last id's tick (and the margin covers the
            // millisecond the generator's clock reading may lag clock_timestamp()).
            assert!(wait_until(|| {
                client.one::<bool>(
                    "SELECT last_tick_at IS NULL
                             OR clock_timestamp() >= last_tick_at + interval '3 milliseconds'
                         FROM snowflake_status()",
                )
            }));
            let max = documented_max(drift);
            let case = format!("max_drift_ms {drift}, sequence_jitter {jitter}, count {max}");
            let first = client.query_one(
                "SELECT snowflake_nextvals($1::int) LIMIT 1",
                &[&(max as i32)],
            );
            match first {
                Ok(row) => {
                    let first: i64 = row.get(0);
                    let last = client.one::<i64>("SELECT snowflake_currval()");
                    assert_eq!(
                        state_of(last) - state_of(first) + 1,
                        max,
                        "{case}: not one run of consecutive ids"
                    );
                }
                Err(e) => failures.push(format!(
                    "{case}: {} {}",
                    e.code().map_or("?", |c| c.code()),
                    e.as_db_error()
                        .map_or(e.to_string(), |d| d.message().into())
                )),
            }
            assert_eq!(
                sqlstate(client.query(
                    "SELECT snowflake_nextvals($1::int) LIMIT 1",
                    &[&(max as i32 + 1)]
                )),
                "22023",
                "{case}: one more than the maximum"
            );
        }
    }
    assert!(
        failures.is_empty(),
        "batches refused:\n{}",
        failures.join("\n")
    );
}
