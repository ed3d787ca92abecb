//! Pins business serial numbers on real servers: the counter restarts when
//! the day changes in the serial's time zone (the server's clock moved to just before a Tokyo
//! midnight with libfaketime); fast mode under 4 clients repeats nothing, as a column DEFAULT
//! too; gapless mode leaves no gap when transactions roll back; the padding's overflow is an
//! error, never a truncated or repeated number; a serial is created once, dropped with its
//! and drawn only by the roles it is granted to.

use std::collections::HashSet;
use std::thread;
use std::time::Duration;

use idgen_cluster_tests::{column, db_error, Cluster, FakeClock, One};
use postgres::Client;

fn next(client: &mut Client, serial: &str) -> String {
    client.one_with("SELECT serial_nextval($1)", &[&serial])
}

#[test]
fn the_counter_restarts_when_the_day_changes_in_the_serials_time_zone() {
    let mut cluster = Cluster::init(
        "serial-midnight",
        &["shared_preload_libraries = 'idgen'", "idgen.worker_id = 3"],
    );
    let clock = cluster.fake_clock();
    cluster.start_server();
    cluster.create_db_with_idgen("postgres");
    let mut client = cluster.connect("postgres");
    client
        .batch_execute(
            "SELECT serial_create('invoice', 'INV-{YYYY}{MM}{DD}-{seq:06}', reset => 'day', time_zone => 'Asia/Tokyo')",
        )
        .unwrap();
    // Seconds from now to the next midnight in Tokyo; the clock goes to 6 s before it.
    let to_midnight: f64 = client.one(
        "SELECT extract(epoch FROM ((date_trunc('day', now() AT TIME ZONE 'Asia/Tokyo') + interval '1 day')
                AT TIME ZONE 'Asia/Tokyo') - now())::float8",
    );
    clock.set_offset_secs(to_midnight - 6.0);
    thread::sleep(FakeClock::PICKUP);
    let mut drawn: Vec<(String, String)> = Vec::new();
    for _ in 0..12 {
        let row = client
            .query_one(
                "SELECT serial_nextval('invoice'), to_char(clock_timestamp() AT TIME ZONE 'Asia/Tokyo', 'YYYYMMDD')",
                &[],
            )
            .unwrap();
        drawn.push((row.get(0), row.get(1)));
        thread::sleep(Duration::from_millis(800));
    }
    let days: Vec<&String> = {
        let mut d: Vec<&String> = drawn.iter().map(|(_, day)| day).collect();
        d.dedup();
        d
    };
    assert_eq!(
        days.len(),
        2,
        "the draws straddle a Tokyo midnight: {drawn:?}"
    );
    // Each number carries the day it was drawn in, and each day counts from 1.
    let mut counters = std::collections::HashMap::new();
    for (text, day) in &drawn {
        assert!(
            text.starts_with(&format!("INV-{day}-")),
            "{text} drawn on {day}"
        );
        let n = counters.entry(day.clone()).or_insert(0);
        *n += 1;
        assert_eq!(text, &format!("INV-{day}-{:06}", n), "{drawn:?}");
    }
}

#[test]
fn fast_mode_repeats_nothing_under_four_clients_and_serves_a_column_default() {
    let cluster = Cluster::with_idgen("serial-fast", 3, &[]);
    let mut admin = cluster.connect("postgres");
    admin
        .batch_execute(
            "SELECT serial_create('order_no', 'ORD{seq:08}');
             CREATE TABLE orders (no text PRIMARY KEY DEFAULT serial_nextval('order_no'), payload int);",
        )
        .unwrap();
    let per_client: Vec<Vec<String>> = thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(|| {
                    let mut c = cluster.connect("postgres");
                    column(
                        &mut c,
                        "INSERT INTO orders (payload) SELECT g FROM generate_series(1, 2000) g RETURNING no",
                    )
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let all: Vec<&String> = per_client.iter().flatten().collect();
    let distinct: HashSet<&&String> = all.iter().collect();
    assert_eq!(all.len(), 8000);
    assert_eq!(distinct.len(), 8000, "a serial number was handed out twice");
    assert!(all.iter().all(|n| n.len() == 11 && n.starts_with("ORD")));
    // Each client's numbers increase (one session draws in order).
    for numbers in &per_client {
        assert!(numbers.windows(2).all(|w| w[0] < w[1]));
    }
    let (mode, mark): (bool, Option<i64>) = {
        let row = admin
            .query_one(
                "SELECT gapless, current_mark FROM idgen_serials WHERE name = 'order_no'",
                &[],
            )
            .unwrap();
        (row.get(0), row.get(1))
    };
    assert!(!mode);
    assert!(mark.unwrap() >= 8000);
}

#[test]
fn gapless_mode_leaves_no_gap_when_transactions_roll_back() {
    let cluster = Cluster::with_idgen("serial-gapless", 3, &[]);
    let mut admin = cluster.connect("postgres");
    admin
        .batch_execute(
            "SELECT serial_create('inv', 'F{YYYY}-{seq:05}', reset => 'year', gapless => true);
             CREATE TABLE invoices (no text PRIMARY KEY DEFAULT serial_nextval('inv'), client int);",
        )
        .unwrap();
    thread::scope(|s| {
        for c in 0..4 {
            let cluster = &cluster;
            s.spawn(move || {
                let mut client = cluster.connect("postgres");
                for i in 0..60 {
                    let mut tx = client.transaction().unwrap();
                    tx.execute("INSERT INTO invoices (client) VALUES ($1)", &[&c])
                        .unwrap();
                    if i % 3 == 0 {
                        tx.rollback().unwrap();
                    } else {
                        tx.commit().unwrap();
                    }
                }
            });
        }
    });
    let numbers: Vec<String> = column(&mut admin, "SELECT no FROM invoices ORDER BY no");
    assert_eq!(numbers.len(), 4 * 40);
    let year: String = admin.one("SELECT to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY')");
    let expected: Vec<String> = (1..=160).map(|n| format!("F{year}-{n:05}")).collect();
    assert_eq!(
        numbers, expected,
        "committed numbers run 1..160 without a gap"
    );
    let committed: i64 = admin.one("SELECT current_mark FROM idgen_serials WHERE name = 'inv'");
    assert_eq!(committed, 160);
}

#[test]
fn the_padding_overflows_with_an_error_never_a_repeat() {
    let cluster = Cluster::with_idgen("serial-overflow", 3, &[]);
    let mut admin = cluster.connect("postgres");
    admin
        .batch_execute(
            "SELECT serial_create('tiny', 'T{seq:01}');
             SELECT serial_create('tiny_gapless', 'G{seq:01}', gapless => true);",
        )
        .unwrap();
    for serial in ["tiny", "tiny_gapless"] {
        let texts: Vec<String> = (0..9).map(|_| next(&mut admin, serial)).collect();
        let distinct: HashSet<&String> = texts.iter().collect();
        assert_eq!(distinct.len(), 9, "{texts:?}");
        for _ in 0..3 {
            let e = db_error(admin.query_one("SELECT serial_nextval($1)", &[&serial]));
            assert_eq!(e.code().code(), "22003", "{serial}: {e:?}");
            assert!(e.message().contains(serial), "{e:?}");
        }
    }
    // Widening the format goes on above every number handed out.
    admin
        .batch_execute("SELECT serial_alter('tiny', format => 'T{seq:03}')")
        .unwrap();
    let wider = next(&mut admin, "tiny");
    assert!(wider.as_str() > "T009", "{wider}");
}

#[test]
fn a_serial_is_created_once_dropped_with_its_counters_and_drawn_by_grantees() {
    // Refused arguments and formats are in the bad-input matrix (bad_input.rs).
    let cluster = Cluster::with_idgen("serial-checks", 3, &[]);
    let mut admin = cluster.connect("postgres");
    assert_eq!(admin.one::<i64>("SELECT count(*) FROM idgen_serial"), 0);
    admin
        .batch_execute("SELECT serial_create('a', 'A{seq}')")
        .unwrap();
    let e = db_error(admin.batch_execute("SELECT serial_create('a', 'A{seq}')"));
    assert_eq!(e.code().code(), "42710");
    assert_eq!(next(&mut admin, "a"), "A1");
    admin.batch_execute("SELECT serial_drop('a')").unwrap();
    let left: i64 = admin.one("SELECT count(*) FROM idgen_segment");
    assert_eq!(left, 0, "serial counters are not segments");
    // A serial created under the dropped one's name goes on counting: the name keeps what
    // it printed (serial_names.rs has the rest).
    admin
        .batch_execute("SELECT serial_create('a', 'A{seq}')")
        .unwrap();
    assert_eq!(next(&mut admin, "a"), "A2");
    // Only admins create serials; only grantees draw.
    admin
        .batch_execute("SELECT serial_create('b', 'B{seq}'); CREATE ROLE clerk LOGIN;")
        .unwrap();
    let mut clerk = cluster.connect_as("postgres", "clerk");
    assert_eq!(
        db_error(clerk.batch_execute("SELECT serial_create('c', 'C{seq}')"))
            .code()
            .code(),
        "42501"
    );
    assert_eq!(
        db_error(clerk.query_one("SELECT serial_nextval('b')", &[]))
            .code()
            .code(),
        "42501"
    );
    assert!(column::<String>(&mut clerk, "SELECT name FROM idgen_serials").is_empty());
    admin
        .batch_execute("SELECT serial_grant('b', 'clerk')")
        .unwrap();
    assert_eq!(next(&mut clerk, "b"), "B1");
    assert_eq!(
        column::<String>(&mut clerk, "SELECT name FROM idgen_serials"),
        ["b"]
    );
    admin
        .batch_execute("SELECT serial_revoke('b', 'clerk')")
        .unwrap();
    assert_eq!(
        db_error(clerk.query_one("SELECT serial_nextval('b')", &[]))
            .code()
            .code(),
        "42501"
    );
}
