//! Pins the safety of business serial numbers on real servers:
//!
//! * Definitions: `serial_create` takes IANA time zone names only (an abbreviation or a POSIX
//!   spec is refused with 22023 and a hint) and is undone by ROLLBACK; `serial_drop` too, and a
//!   draw concurrent with a drop that rolls back continues the counter.
//! * Identity: counters belong to a serial, not to a name prefix (dropping `inv` leaves
//!   `inv:eu` alone); names with multibyte characters work; the segment interleave settings
//!   (`idgen.segment_node_count`/`_index`) do not apply to serial counters.
//! * Rendering: `{MS}` is the milliseconds, 000 to 999.
//! * Periods: a period's counter never restarts, even when the clock goes back to it after two
//!   later periods (libfaketime): the next number continues it, or the draw is refused.
//! * Isolation: REPEATABLE READ and SERIALIZABLE transactions draw, fast and gapless, first
//!   draws of a new serial and concurrent first draws of a new period included.
//! * Privileges: drawing needs USAGE on the serial (`serial_grant`/`serial_revoke`); a refused
//!   draw advances no counter and holds no lock; `idgen_serials` shows a role its serials only;
//!   no serial function is SECURITY DEFINER; grants name roles exactly (`"Public"` may be a
//!   role) and a dropped role's name can be revoked.
//! * Escalation: the owner of a database (not a superuser) cannot get code of hers run by
//!   idgen's serial or registry functions through overloads in schema `public`, the extension's
//!   schema (CVE-2018-1058's pattern, with the owner's `CREATE` on `public`).
//! * Load: a gapless serial under 8 clients for 30 s, half the transactions rolled back,
//!   commits exactly 1..N, and no client gets a contention error.
//! * Backends: one terminated while it waits for its counter's next range leaves the counter
//!   usable (the refill it started is given up at its exit, not left "in progress"); a
//!   transaction that changed a serial cannot be prepared (PREPARE TRANSACTION), since other
//!   backends' caches hear of a change when its transaction commits in the same backend; a
//!   backend with a serial cached follows the extension dropped and created again (in another
//!   schema), drawing from the new serial's counter.
//!
//! Not pinned here: the upgrade from 0.5.0.

use std::collections::HashSet;
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use idgen_cluster_tests::registry::DURABLE;
use idgen_cluster_tests::{column, db_error, sqlstate, wait_for, Cluster, FakeClock, One};
use postgres::{Client, IsolationLevel, NoTls};

fn next(client: &mut Client, serial: &str) -> String {
    client.one_with("SELECT serial_nextval($1)", &[&serial])
}

fn try_next(client: &mut Client, serial: &str) -> Result<String, postgres::Error> {
    client
        .query_one("SELECT serial_nextval($1)", &[&serial])
        .map(|r| r.get(0))
}

/// A server with idgen preloaded (worker id 3) whose clock libfaketime moves, and the extension
/// in database `postgres`.
fn cluster_with_fake_clock(tag: &str) -> (Cluster, FakeClock) {
    let mut cluster = Cluster::init(
        tag,
        &["shared_preload_libraries = 'idgen'", "idgen.worker_id = 3"],
    );
    let clock = cluster.fake_clock();
    cluster.start_server();
    cluster.create_db_with_idgen("postgres");
    (cluster, clock)
}

/// Seconds from the server's real now to the next 12:00 UTC: a clock offset that puts the
/// server in the middle of a UTC day, far from both of its midnights.
fn offset_to_next_utc_noon(client: &mut Client) -> f64 {
    client.one(
        "SELECT extract(epoch FROM
                (date_trunc('day', now() AT TIME ZONE 'UTC' - interval '12 hours') + interval '1 day 12 hours')
                - (now() AT TIME ZONE 'UTC'))::float8",
    )
}

/// Sets the server's clock to the real time plus `offset_secs` and waits until the backend of
/// `client` runs on it (a process may pick a change up later than [`FakeClock::PICKUP`]).
fn move_clock(clock: &FakeClock, client: &mut Client, offset_secs: f64) {
    clock.set_offset_secs(offset_secs);
    thread::sleep(FakeClock::PICKUP);
    wait_for_clock(client, offset_secs);
}

/// Waits until the backend of `client` has its clock at the real time plus `offset_secs`
/// (within a minute: the offsets these tests use are a day apart).
fn wait_for_clock(client: &mut Client, offset_secs: f64) {
    wait_for(
        "the server's clock to move",
        Duration::from_secs(15),
        || {
            let server: f64 = client.one("SELECT extract(epoch FROM clock_timestamp())::float8");
            let real = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_secs_f64();
            ((server - real - offset_secs).abs() < 60.0).then_some(())
        },
    );
}

/// A failed statement's SQLSTATE and message (postgres::Error's Display says only "db error").
fn describe(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(d) => format!("{}: {}", d.code().code(), d.message()),
        None => e.to_string(),
    }
}

/// `SELECT serial_nextval(serial)` in a transaction of `isolation`, committed; a serialization
/// failure (40001, the documented answer of REPEATABLE READ and SERIALIZABLE to a concurrent
/// update) is retried when `retry` says so; any other error is returned.
fn draw_in(
    client: &mut Client,
    isolation: IsolationLevel,
    serial: &str,
    retry: bool,
) -> Result<String, postgres::Error> {
    loop {
        let mut tx = client
            .build_transaction()
            .isolation_level(isolation)
            .start()
            .unwrap();
        let drawn = tx
            .query_one("SELECT serial_nextval($1)", &[&serial])
            .map(|r| r.get::<_, String>(0));
        let drawn = drawn.and_then(|text| tx.commit().map(|()| text));
        match drawn {
            Err(e) if retry && e.code().map(|c| c.code()) == Some("40001") => continue,
            other => return other,
        }
    }
}

/// 0.5.0: `serial_create(..., time_zone => 'PST')` succeeded (PostgreSQL's `AT TIME ZONE` takes
/// abbreviations and POSIX specs, whose meaning is not a place's calendar).
#[test]
fn time_zones_are_iana_names_and_creating_is_undone_by_rollback() {
    let cluster = Cluster::with_idgen("serial-safety-zones", 3, &[]);
    let mut admin = cluster.connect("postgres");
    for (i, zone) in ["Asia/Tokyo", "UTC", "Europe/Paris"].iter().enumerate() {
        admin
            .execute(
                "SELECT serial_create($1, 'Z{YYYY}{MM}{DD}-{seq}', reset => 'day', time_zone => $2)",
                &[&format!("zone_{i}"), zone],
            )
            .unwrap_or_else(|e| panic!("{zone}: {}", describe(&e)));
    }
    for zone in ["PST", "CEST", "UTC+99", "+05:00", "<+03>-3"] {
        let created = admin.execute(
            "SELECT serial_create('bad_zone', 'Z{YYYY}{MM}{DD}-{seq}', reset => 'day', time_zone => $1)",
            &[&zone],
        );
        assert!(created.is_err(), "time zone {zone:?} was accepted");
        let e = db_error(created);
        assert_eq!(e.code().code(), "22023", "{zone}: {e:?}");
        assert!(e.hint().is_some(), "{zone}: no hint: {e:?}");
    }
    assert_eq!(
        column::<String>(&mut admin, "SELECT name FROM idgen_serials ORDER BY name"),
        ["zone_0", "zone_1", "zone_2"]
    );
    // Every argument of 0.6.0, scope included, then ROLLBACK: nothing is left.
    admin
        .batch_execute(
            "BEGIN;
             SELECT serial_create('rolled_back', 'R{seq}', reset => 'never', time_zone => 'UTC',
                                  gapless => false, description => 'undone', scope => 'local');
             ROLLBACK;",
        )
        .unwrap();
    assert_eq!(sqlstate(try_next(&mut admin, "rolled_back")), "42704");
    admin
        .batch_execute("SELECT serial_create('rolled_back', 'R{seq}')")
        .unwrap();
    assert_eq!(next(&mut admin, "rolled_back"), "R1");
}

/// 0.5.0: after `serial_drop` and ROLLBACK the fast serial drew `F0001` again (its counter
/// segments were dropped at once, outside the transaction).
#[test]
fn dropping_is_undone_by_rollback_and_never_restarts_a_counter() {
    let cluster = Cluster::with_idgen("serial-safety-drop", 3, &[]);
    let mut admin = cluster.connect("postgres");
    admin
        .batch_execute(
            "SELECT serial_create('f', 'F{seq:04}');
             SELECT serial_create('g', 'G{seq:04}', gapless => true);",
        )
        .unwrap();
    for (serial, letter, gapless) in [("f", 'F', false), ("g", 'G', true)] {
        // The number after `last`: the very next in gapless mode; in fast mode any later one
        // (fast mode may leave gaps, never goes back).
        let assert_continues = |text: &str, last: u32, after: &str| {
            let n: u32 = text
                .strip_prefix(letter)
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("{serial} after {after}: {text}"));
            if gapless {
                assert_eq!(n, last + 1, "{serial} after {after}: {text}");
            } else {
                assert!(n > last, "{serial} after {after}: {text} follows {last}");
            }
            n
        };
        for n in 1..=3 {
            assert_eq!(next(&mut admin, serial), format!("{letter}{n:04}"));
        }
        admin
            .batch_execute(&format!("BEGIN; SELECT serial_drop('{serial}'); ROLLBACK;"))
            .unwrap();
        let last = assert_continues(&next(&mut admin, serial), 3, "serial_drop then ROLLBACK");

        // A draw while another session's drop is open: it waits or goes on, and once the drop
        // is rolled back the counter continues.
        let mut dropper = cluster.connect("postgres");
        dropper.batch_execute("BEGIN").unwrap();
        dropper
            .execute("SELECT serial_drop($1)", &[&serial])
            .unwrap();
        let concurrent = thread::scope(|s| {
            let drawer = s.spawn(|| {
                let mut c = cluster.connect("postgres");
                try_next(&mut c, serial)
            });
            thread::sleep(Duration::from_secs(1));
            dropper.batch_execute("ROLLBACK").unwrap();
            drawer.join().unwrap()
        });
        let after = "a draw concurrent with a serial_drop rolled back";
        let concurrent =
            concurrent.unwrap_or_else(|e| panic!("{serial}: {after}: {}", describe(&e)));
        let last = assert_continues(&concurrent, last, after);
        assert_continues(&next(&mut admin, serial), last, "that draw");
    }
}

/// 0.5.0: dropping `inv` dropped the counter segments of `inv:eu` too (by the name prefix
/// `serial:inv:`): `inv:eu` drew `E1` again.
#[test]
fn counters_belong_to_their_serial_and_multibyte_names_work() {
    let cluster = Cluster::with_idgen("serial-safety-identity", 3, &[]);
    let mut admin = cluster.connect("postgres");
    let fast_mb = "facture-été-日本";
    let gapless_mb = "請求書:ü";
    admin
        .execute(
            "SELECT serial_create('inv', 'I{seq}'), serial_create('inv:eu', 'E{seq}'),
                    serial_create('inv:', 'C{seq}', gapless => true),
                    serial_create($1, 'J{seq}'), serial_create($2, 'K{seq}', gapless => true)",
            &[&fast_mb, &gapless_mb],
        )
        .unwrap();
    let serials = [
        ("inv", "I"),
        ("inv:eu", "E"),
        ("inv:", "C"),
        (fast_mb, "J"),
        (gapless_mb, "K"),
    ];
    for (serial, prefix) in serials {
        for n in 1..=2 {
            assert_eq!(next(&mut admin, serial), format!("{prefix}{n}"), "{serial}");
        }
    }
    admin.batch_execute("SELECT serial_drop('inv')").unwrap();
    assert_eq!(sqlstate(try_next(&mut admin, "inv")), "42704");
    for (serial, prefix) in &serials[1..] {
        assert_eq!(
            next(&mut admin, serial),
            format!("{prefix}3"),
            "{serial} after serial_drop('inv')"
        );
    }
    assert_eq!(
        column::<String>(&mut admin, "SELECT name FROM idgen_serials ORDER BY name"),
        ["inv:", "inv:eu", gapless_mb, fast_mb]
            .iter()
            .map(|s| s.to_string())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect::<Vec<_>>()
    );
    admin
        .execute("SELECT serial_drop($1)", &[&fast_mb])
        .unwrap();
    for (serial, prefix) in [("inv:eu", "E"), ("inv:", "C"), (gapless_mb, "K")] {
        assert_eq!(next(&mut admin, serial), format!("{prefix}4"), "{serial}");
    }
}

/// 0.5.0: the first draw failed with 22003 (the counter segment took server 1's first block,
/// 101 to 200, which overflows `{seq:02}`).
#[test]
fn segment_interleave_settings_do_not_apply_to_serial_counters() {
    let cluster = Cluster::with_idgen(
        "serial-safety-interleave",
        3,
        &[
            "idgen.segment_node_count = 2",
            "idgen.segment_node_index = 1",
        ],
    );
    let mut admin = cluster.connect("postgres");
    admin
        .batch_execute("SELECT serial_create('t', 'T-{seq:02}')")
        .unwrap();
    let drawn: Vec<String> = (0..5)
        .map(|_| try_next(&mut admin, "t").unwrap_or_else(|e| panic!("{}", describe(&e))))
        .collect();
    assert_eq!(drawn, ["T-01", "T-02", "T-03", "T-04", "T-05"]);
    // In another session too (no block of 100 skipped per session either).
    let mut other = cluster.connect("postgres");
    let n: String = next(&mut other, "t");
    assert!(n.len() == 4 && n.as_str() > "T-05", "{n} after {drawn:?}");
}

/// 0.5.0: `T{SS}.{MS}-{seq}` rendered `{MS}` as seconds and milliseconds (`T31.31010-1` at
/// :31.010).
#[test]
fn ms_renders_the_milliseconds_in_three_digits() {
    let cluster = Cluster::with_idgen("serial-safety-ms", 3, &[]);
    let mut admin = cluster.connect("postgres");
    admin
        .batch_execute("SELECT serial_create('ms', 'T{SS}.{MS}-{seq}')")
        .unwrap();
    for n in 1..=200i64 {
        let row = admin
            .query_one(
                "SELECT serial_nextval('ms'), extract(epoch FROM clock_timestamp())::float8",
                &[],
            )
            .unwrap();
        let (text, at): (String, f64) = (row.get(0), row.get(1));
        let (time, seq) = text
            .strip_prefix('T')
            .and_then(|t| t.rsplit_once('-'))
            .unwrap_or_else(|| panic!("{text}"));
        assert_eq!(seq, n.to_string(), "{text}");
        let (ss, ms) = time.split_once('.').unwrap_or_else(|| panic!("{text}"));
        assert_eq!((ss.len(), ms.len()), (2, 3), "{text}: SS.MS");
        let (ss, ms): (u32, u32) = (ss.parse().unwrap(), ms.parse().unwrap());
        assert!(ss < 60 && ms < 1000, "{text}");
        // The draw's time of the minute is just before the clock read after it.
        let rendered = ss as f64 + ms as f64 / 1000.0;
        let behind = (at.rem_euclid(60.0) - rendered).rem_euclid(60.0);
        assert!(
            behind < 0.25 || behind > 59.99,
            "{text} drawn at :{:.3}",
            at.rem_euclid(60.0)
        );
        thread::sleep(Duration::from_millis(7));
    }
}

/// 0.5.0: back on the first day, the fast serial drew `D<day 1>-000001` again (the first day's
/// counter segment had been dropped when the third day began).
#[test]
fn a_period_counter_never_restarts_when_the_clock_goes_back_to_it() {
    let (cluster, clock) = cluster_with_fake_clock("serial-safety-clock-back");
    let mut admin = cluster.connect("postgres");
    admin
        .batch_execute(
            "SELECT serial_create('day', 'D{YYYY}{MM}{DD}-{seq:06}', reset => 'day');
             SELECT serial_create('day_gapless', 'G{YYYY}{MM}{DD}-{seq:06}', reset => 'day', gapless => true);",
        )
        .unwrap();
    let noon = offset_to_next_utc_noon(&mut admin);
    for (serial, letter) in [("day", 'D'), ("day_gapless", 'G')] {
        let mut printed: Vec<String> = Vec::new();
        let mut first_day = String::new();
        for (days, draws) in [(0, 3), (1, 2), (2, 2)] {
            move_clock(&clock, &mut admin, noon + days as f64 * 86_400.0);
            for n in 1..=draws {
                let row = admin
                    .query_one(
                        "SELECT serial_nextval($1), to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYYMMDD')",
                        &[&serial],
                    )
                    .unwrap();
                let (text, day): (String, String) = (row.get(0), row.get(1));
                assert_eq!(text, format!("{letter}{day}-{n:06}"), "{printed:?}");
                if days == 0 {
                    first_day = day;
                }
                printed.push(text);
            }
        }
        // Two days back, to the first day: its counter goes on, or the draw is refused.
        move_clock(&clock, &mut admin, noon);
        match try_next(&mut admin, serial) {
            Ok(text) => {
                assert_eq!(text, format!("{letter}{first_day}-000004"), "{printed:?}");
                printed.push(text);
            }
            Err(e) => {
                let e = e
                    .as_db_error()
                    .unwrap_or_else(|| panic!("{serial}: {}", describe(&e)))
                    .clone();
                assert_ne!(e.code().code(), "XX000", "{serial}: {e:?}");
            }
        }
        let distinct: HashSet<&String> = printed.iter().collect();
        assert_eq!(
            distinct.len(),
            printed.len(),
            "a text printed twice: {printed:?}"
        );
    }
}

/// 0.5.0: concurrent first draws of a new period (REPEATABLE READ, fast mode) failed with 42704,
/// `segment "serial:period_rr_false:<day 1>" does not exist`: each session's cleanup dropped the
/// first day's counter segment, and all but one found it gone. (The one-session draws passed.)
#[test]
fn repeatable_read_and_serializable_transactions_draw() {
    let (cluster, clock) = cluster_with_fake_clock("serial-safety-isolation");
    let mut admin = cluster.connect("postgres");
    let levels = [
        ("rr", IsolationLevel::RepeatableRead),
        ("ser", IsolationLevel::Serializable),
    ];

    // One session: the first draws of new serials, two in one transaction.
    for (level_name, level) in levels {
        for gapless in [false, true] {
            let serial = format!("one_{level_name}_{gapless}");
            admin
                .execute(
                    "SELECT serial_create($1, 'S{seq:03}', gapless => $2)",
                    &[&serial, &gapless],
                )
                .unwrap();
            let mut tx = admin
                .build_transaction()
                .isolation_level(level)
                .start()
                .unwrap();
            let two: Vec<String> = (0..2)
                .map(|_| {
                    tx.query_one("SELECT serial_nextval($1)", &[&serial])
                        .map(|r| r.get(0))
                        .unwrap_or_else(|e| panic!("{serial}: {}", describe(&e)))
                })
                .collect();
            tx.commit().unwrap();
            assert_eq!(two, ["S001", "S002"], "{serial}");
            let third = draw_in(&mut admin, level, &serial, false)
                .unwrap_or_else(|e| panic!("{serial}: {}", describe(&e)));
            assert_eq!(third, "S003", "{serial}");
        }
    }

    // Several sessions: concurrent first draws of a new serial, and of a new period of a daily
    // serial that has two earlier periods (the third day's first draws clean the first day up).
    let noon = offset_to_next_utc_noon(&mut admin);
    move_clock(&clock, &mut admin, noon);
    for (level_name, _) in levels {
        for gapless in [false, true] {
            admin
                .execute(
                    "SELECT serial_create($1, 'N{seq:03}', gapless => $3),
                            serial_create($2, 'P{YYYY}{MM}{DD}-{seq:03}', reset => 'day', gapless => $3)",
                    &[
                        &format!("new_{level_name}_{gapless}"),
                        &format!("period_{level_name}_{gapless}"),
                        &gapless,
                    ],
                )
                .unwrap();
        }
    }
    for days in 0..2 {
        move_clock(&clock, &mut admin, noon + days as f64 * 86_400.0);
        for serial in column::<String>(
            &mut admin,
            "SELECT name FROM idgen_serials WHERE name LIKE 'period%'",
        ) {
            next(&mut admin, &serial);
        }
    }
    let day_three = noon + 2.0 * 86_400.0;
    move_clock(&clock, &mut admin, day_three);
    const SESSIONS: usize = 6;
    for (level_name, level) in levels {
        for gapless in [false, true] {
            for serial in [
                format!("new_{level_name}_{gapless}"),
                format!("period_{level_name}_{gapless}"),
            ] {
                let start = Barrier::new(SESSIONS);
                let drawn: Vec<Result<String, String>> = thread::scope(|s| {
                    let handles: Vec<_> = (0..SESSIONS)
                        .map(|_| {
                            let (cluster, start, serial) = (&cluster, &start, &serial);
                            s.spawn(move || {
                                let mut c = cluster.connect("postgres");
                                wait_for_clock(&mut c, day_three);
                                start.wait();
                                draw_in(&mut c, level, serial, gapless).map_err(|e| describe(&e))
                            })
                        })
                        .collect();
                    handles.into_iter().map(|h| h.join().unwrap()).collect()
                });
                let errors: Vec<&String> = drawn.iter().filter_map(|d| d.as_ref().err()).collect();
                assert!(errors.is_empty(), "{serial}: {errors:?}");
                let mut texts: Vec<String> = drawn.into_iter().map(Result::unwrap).collect();
                texts.sort();
                let distinct: HashSet<&String> = texts.iter().collect();
                assert_eq!(distinct.len(), SESSIONS, "{serial}: {texts:?}");
                if gapless {
                    let counters: Vec<String> = texts
                        .iter()
                        .map(|t| {
                            t.rsplit('-')
                                .next()
                                .unwrap()
                                .trim_start_matches('N')
                                .to_owned()
                        })
                        .collect();
                    let expected: Vec<String> = (1..=SESSIONS).map(|n| format!("{n:03}")).collect();
                    assert_eq!(counters, expected, "{serial}: {texts:?}");
                }
            }
        }
    }
}

/// 0.5.0: a role without any grant drew from the serial (every role could); `serial_grant`
/// does not exist (42883).
#[test]
fn drawing_needs_usage_on_the_serial_and_a_refused_draw_changes_nothing() {
    let cluster = Cluster::with_idgen("serial-safety-usage", 3, &[]);
    let mut superuser = cluster.connect("postgres");
    superuser
        .batch_execute(
            "CREATE ROLE ops LOGIN; GRANT idgen_admin TO ops;
             CREATE ROLE clerk LOGIN; CREATE ROLE outsider LOGIN;
             CREATE ROLE accounting NOLOGIN; CREATE ROLE bookkeeper LOGIN IN ROLE accounting;",
        )
        .unwrap();
    let mut ops = cluster.connect_as("postgres", "ops");
    ops.batch_execute(
        "SELECT serial_create('g', 'G{seq:04}', gapless => true);
         SELECT serial_create('f', 'F{seq:04}');",
    )
    .unwrap();
    // The creator may draw.
    assert_eq!(next(&mut ops, "g"), "G0001");
    assert_eq!(next(&mut ops, "f"), "F0001");
    assert_eq!(
        column::<String>(&mut ops, "SELECT name FROM idgen_serials ORDER BY name"),
        ["f", "g"]
    );

    // A role without USAGE: refused, though the function itself is PUBLIC's.
    let mut outsider = cluster.connect_as("postgres", "outsider");
    assert!(
        outsider.one::<bool>("SELECT has_function_privilege('serial_nextval(text)', 'EXECUTE')")
    );
    for serial in ["g", "f"] {
        for _ in 0..3 {
            assert_eq!(
                sqlstate(try_next(&mut outsider, serial)),
                "42501",
                "{serial}"
            );
        }
    }
    assert_eq!(
        column::<String>(&mut outsider, "SELECT name FROM idgen_serials"),
        Vec::<String>::new()
    );
    // ... only admins grant.
    assert_eq!(
        sqlstate(outsider.batch_execute("SELECT serial_grant('g', 'outsider')")),
        "42501"
    );

    ops.batch_execute("SELECT serial_grant('g', 'clerk'); SELECT serial_grant('g', 'accounting');")
        .unwrap();
    // A refused draw inside an open transaction holds nothing: a granted role draws at once,
    // the next number (the refused calls advanced no counter).
    outsider.batch_execute("BEGIN").unwrap();
    assert_eq!(sqlstate(try_next(&mut outsider, "g")), "42501");
    let mut clerk = cluster.connect_as("postgres", "clerk");
    clerk.batch_execute("SET statement_timeout = '2s'").unwrap();
    assert_eq!(
        try_next(&mut clerk, "g").map_err(|e| describe(&e)),
        Ok("G0002".to_owned()),
        "a granted draw while a refused one's transaction is open"
    );
    outsider.batch_execute("ROLLBACK").unwrap();
    assert_eq!(next(&mut clerk, "g"), "G0003");
    assert_eq!(
        sqlstate(try_next(&mut clerk, "f")),
        "42501",
        "granted on g only"
    );
    assert_eq!(
        column::<String>(&mut clerk, "SELECT name FROM idgen_serials"),
        ["g"]
    );

    // Through a role's membership.
    let mut bookkeeper = cluster.connect_as("postgres", "bookkeeper");
    assert_eq!(next(&mut bookkeeper, "g"), "G0004");
    assert_eq!(
        column::<String>(&mut bookkeeper, "SELECT name FROM idgen_serials"),
        ["g"]
    );

    // Revoked: refused again, and the serial is no longer listed.
    ops.batch_execute("SELECT serial_revoke('g', 'clerk')")
        .unwrap();
    assert_eq!(sqlstate(try_next(&mut clerk, "g")), "42501");
    assert_eq!(
        column::<String>(&mut clerk, "SELECT name FROM idgen_serials"),
        Vec::<String>::new()
    );

    // A superuser always may; nothing was skipped.
    assert_eq!(next(&mut superuser, "g"), "G0005");
    assert_eq!(next(&mut superuser, "f").len(), 5);
    assert!(!superuser.one::<bool>(
        "SELECT prosecdef FROM pg_proc WHERE oid = 'serial_nextval(text)'::regprocedure"
    ));
}

/// Schema `public` of a database that `mallory` (not a superuser) owns, with idgen installed
/// there by a superuser. Returns a superuser's connection to it that collects NOTICEs.
struct OwnedDatabase {
    superuser: Client,
    notices: Arc<Mutex<Vec<String>>>,
    cluster: Cluster,
}

/// Sets off the trap: says so (NOTICE), records it when it may, and makes mallory a superuser
/// when it runs with a superuser's rights. Every overload below calls it, then the real function.
const TRAP: &str = "
    CREATE TABLE public.idgen_trap (what text, by_role text);
    GRANT INSERT ON public.idgen_trap TO PUBLIC;
    CREATE FUNCTION public.idgen_trap_spring(what text) RETURNS void LANGUAGE plpgsql AS $$
    BEGIN
        RAISE NOTICE 'overload ran: % as %', what, current_user;
        INSERT INTO public.idgen_trap VALUES (what, current_user);
        BEGIN
            ALTER ROLE mallory SUPERUSER;
        EXCEPTION WHEN insufficient_privilege THEN NULL;
        END;
    END $$;";

impl OwnedDatabase {
    fn new(tag: &str) -> OwnedDatabase {
        // Its registry functions are called as a node would: a registry that grants.
        let cluster = Cluster::with_idgen(tag, 3, &DURABLE);
        cluster
            .connect("postgres")
            .batch_execute("CREATE ROLE mallory LOGIN")
            .and_then(|()| {
                cluster
                    .connect("postgres")
                    .batch_execute("CREATE DATABASE evil OWNER mallory")
            })
            .unwrap();
        let mut installer = cluster.connect("evil");
        installer.batch_execute("CREATE EXTENSION idgen").unwrap();
        assert_eq!(
            installer.one::<String>(
                "SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'idgen'"
            ),
            "public"
        );
        // The owner of the database owns schema public (PostgreSQL 15: pg_database_owner).
        let mut mallory = cluster.connect_as("evil", "mallory");
        assert!(mallory.one::<bool>("SELECT has_schema_privilege('public', 'CREATE')"));
        mallory.batch_execute(TRAP).unwrap();
        let notices = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&notices);
        let superuser = cluster
            .conninfo("evil")
            .parse::<postgres::Config>()
            .unwrap()
            .notice_callback(move |n| sink.lock().unwrap().push(n.message().to_owned()))
            .connect(NoTls)
            .unwrap();
        OwnedDatabase {
            cluster,
            notices,
            superuser,
        }
    }

    fn mallory(&self) -> Client {
        self.cluster.connect_as("evil", "mallory")
    }

    /// Runs `sql` as the superuser; panics naming it if it fails.
    fn run(&mut self, sql: &str) {
        self.superuser
            .batch_execute(sql)
            .unwrap_or_else(|e| panic!("{sql}: {}", describe(&e)));
    }

    /// Panics if any overload of mallory's ran, or mallory became a superuser.
    fn assert_no_overload_ran(&mut self, after: &str) {
        let ran: Vec<String> = self
            .notices
            .lock()
            .unwrap()
            .iter()
            .filter(|n| n.contains("overload ran"))
            .cloned()
            .collect();
        let trapped: Vec<(String, String)> = self
            .superuser
            .query("SELECT what, by_role FROM public.idgen_trap", &[])
            .unwrap()
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect();
        let superuser: bool = self
            .cluster
            .connect("postgres")
            .one("SELECT rolsuper FROM pg_roles WHERE rolname = 'mallory'");
        assert!(
            ran.is_empty() && trapped.is_empty() && !superuser,
            "after {after}: mallory's overloads ran {ran:?}, recorded {trapped:?}; mallory superuser: {superuser}"
        );
    }

    /// idgen's functions that run with their owner's rights, by signature.
    fn security_definers(&mut self) -> Vec<String> {
        column(
            &mut self.superuser,
            "SELECT p.oid::regprocedure::text FROM pg_proc p
               JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
               JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'idgen'
              WHERE p.prosecdef ORDER BY 1",
        )
    }
}

/// Overloads of idgen's functions and of operators, in schema public, that a call with an
/// untyped literal, a NULL or a loosely typed argument would pick over the real one (an integer
/// literal for `start bigint`, a timestamptz for `at timestamp`, a varchar for text).
const SERIAL_OVERLOADS: &str = "
    CREATE FUNCTION public.segment_create(name text, start integer, step integer DEFAULT 1000,
                                          description text DEFAULT NULL, scope text DEFAULT 'local')
    RETURNS void LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM public.idgen_trap_spring('segment_create(text, integer, ...)');
        PERFORM public.segment_create(name, start::bigint, step, description, scope);
    END $$;
    CREATE FUNCTION public.segment_create(name varchar, start bigint DEFAULT 1, step integer DEFAULT 1000,
                                          description text DEFAULT NULL, scope text DEFAULT 'local')
    RETURNS void LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM public.idgen_trap_spring('segment_create(varchar, ...)');
        PERFORM public.segment_create(name::text, start, step, description, scope);
    END $$;
    CREATE FUNCTION public.segment_nextval(name varchar) RETURNS bigint LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM public.idgen_trap_spring('segment_nextval(varchar)');
        RETURN public.segment_nextval(name::text);
    END $$;
    CREATE FUNCTION public.segment_drop(name varchar) RETURNS void LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM public.idgen_trap_spring('segment_drop(varchar)');
        PERFORM public.segment_drop(name::text);
    END $$;
    CREATE FUNCTION public.idgen_serial_render(name text, format text, at timestamptz, seq bigint)
    RETURNS text LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM public.idgen_trap_spring('idgen_serial_render(..., timestamptz, bigint)');
        RETURN public.idgen_serial_render(name, format, at AT TIME ZONE 'UTC', seq);
    END $$;
    CREATE FUNCTION public.idgen_serial_render(name text, format text, at timestamp, seq integer)
    RETURNS text LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM public.idgen_trap_spring('idgen_serial_render(..., timestamp, integer)');
        RETURN public.idgen_serial_render(name, format, at, seq::bigint);
    END $$;
    CREATE FUNCTION public.idgen_serial_check(format varchar, reset text) RETURNS void
    LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM public.idgen_trap_spring('idgen_serial_check(varchar, text)');
        PERFORM public.idgen_serial_check(format::text, reset);
    END $$;
    CREATE FUNCTION public.trap_eq(a text, b varchar) RETURNS boolean LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM public.idgen_trap_spring('text = varchar');
        RETURN a OPERATOR(pg_catalog.=) b::text;
    END $$;
    CREATE OPERATOR public.= (LEFTARG = text, RIGHTARG = varchar, FUNCTION = public.trap_eq);
    CREATE FUNCTION public.trap_eq(a varchar, b text) RETURNS boolean LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM public.idgen_trap_spring('varchar = text');
        RETURN a::text OPERATOR(pg_catalog.=) b;
    END $$;
    CREATE OPERATOR public.= (LEFTARG = varchar, RIGHTARG = text, FUNCTION = public.trap_eq);
    CREATE FUNCTION public.trap_cat(a text, b bigint) RETURNS text LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM public.idgen_trap_spring('text || bigint');
        RETURN a OPERATOR(pg_catalog.||) b::text;
    END $$;
    CREATE OPERATOR public.|| (LEFTARG = text, RIGHTARG = bigint, FUNCTION = public.trap_cat);
    CREATE FUNCTION public.trap_plus(a bigint, b numeric) RETURNS numeric LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM public.idgen_trap_spring('bigint + numeric');
        RETURN a::numeric OPERATOR(pg_catalog.+) b;
    END $$;
    CREATE OPERATOR public.+ (LEFTARG = bigint, RIGHTARG = numeric, FUNCTION = public.trap_plus);";

/// 0.5.0: a superuser's first draw of a new fast serial ran mallory's
/// `public.segment_create(text, integer, ...)` as the extension's owner (serial_nextval is
/// SECURITY DEFINER and calls `@extschema@.segment_create(seg, start => 1, ...)`), which made
/// mallory a superuser.
#[test]
fn a_database_owner_cannot_get_her_overloads_run_by_serial_functions() {
    let mut db = OwnedDatabase::new("serial-safety-owner");
    db.mallory().batch_execute(SERIAL_OVERLOADS).unwrap();
    // Everything a serial's life calls, by a superuser (as an admin would, with the default
    // search_path, which has public in it).
    for sql in [
        "SELECT serial_create('esc_fast', 'E{YYYY}{MM}{DD}-{seq:04}', reset => 'day', time_zone => 'Europe/Paris')",
        "SELECT serial_create('esc_gapless', 'G{YYYY}-{seq:04}', reset => 'year', gapless => true)",
        "SELECT serial_create('esc_never', 'N{seq}', description => 'no reset')",
        "SELECT serial_nextval('esc_fast'), serial_nextval('esc_fast')",
        "SELECT serial_nextval('esc_gapless'), serial_nextval('esc_gapless')",
        "SELECT serial_nextval('esc_never')",
        "SELECT serial_alter('esc_fast', format => 'E{YYYY}{MM}{DD}-{seq:06}', description => 'wider')",
        "SELECT serial_nextval('esc_fast')",
        "SELECT * FROM idgen_serials",
        "BEGIN; SELECT serial_drop('esc_never'); ROLLBACK;",
        "SELECT serial_drop('esc_fast')",
        "SELECT serial_create('esc_fast', 'E{YYYY}{MM}{DD}-{seq:07}', reset => 'day', time_zone => 'Europe/Paris')",
        "SELECT serial_nextval('esc_fast')",
        "SELECT serial_drop('esc_fast')",
        "SELECT serial_forget('esc_fast')",
        "SELECT serial_drop('esc_gapless')",
    ] {
        db.run(sql);
        db.assert_no_overload_ran(sql);
    }
    // The rest of the 0.6.0 surface, and the other generators.
    for sql in [
        "SELECT serial_grant('esc_never', 'mallory')",
        "SELECT serial_revoke('esc_never', 'mallory')",
        "SELECT serial_create('esc_scoped', 'S{seq}', scope => 'local'); SELECT serial_nextval('esc_scoped');",
        "SELECT segment_create('seg', step => 10); SELECT segment_nextval('seg');
         SELECT segment_alter('seg', step => 20); SELECT segment_setval('seg', 100);
         SELECT segment_currval('seg'); SELECT * FROM segment_status(); SELECT segment_drop('seg');",
        "SELECT snowflake_nextval(), snowflake_format(snowflake_nextval())",
        "CREATE TABLE adopted (id bigserial PRIMARY KEY); INSERT INTO adopted DEFAULT VALUES;
         SELECT * FROM idgen_adopt_column('adopted', 'id', generator => 'segment');
         INSERT INTO adopted DEFAULT VALUES;",
    ] {
        db.run(sql);
        db.assert_no_overload_ran(sql);
    }
    // A role granted a serial draws its first number too, in its own name.
    db.run("SELECT serial_grant('esc_never', 'mallory')");
    let drawn = next(&mut db.mallory(), "esc_never");
    assert!(drawn.starts_with('N') && drawn != "N1", "{drawn}");
    db.assert_no_overload_ran("mallory's draw");
    let definers = db.security_definers();
    assert!(
        definers.iter().all(|f| !f.starts_with("serial_nextval(")),
        "{definers:?}"
    );
}

/// Overloads, in schema public, of the registry's internal functions that its SECURITY DEFINER
/// functions call as `@extschema@.name(...)` (public here): a looser or untyped argument would
/// pick one of them over the real function. 0.5.0's report_regression(NULL, ...) was such a
/// call (an untyped NULL prefers the string category); 0.9.0's calls pass typed values (a
/// boolean literal, integer and text variables), which these must not capture.
const REGISTRY_OVERLOADS: &str = "
    CREATE FUNCTION public.idgen_registry_check_open(grants text) RETURNS void
    LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM public.idgen_trap_spring('idgen_registry_check_open(text)');
    END $$;
    CREATE FUNCTION public.idgen_registry_check_lease(lease_length_ms bigint, renew_every_ms bigint)
    RETURNS void LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM public.idgen_trap_spring('idgen_registry_check_lease(bigint, bigint)');
    END $$;
    CREATE FUNCTION public.idgen_registry_check_lease(lease_length_ms numeric, renew_every_ms integer)
    RETURNS void LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM public.idgen_trap_spring('idgen_registry_check_lease(numeric, integer)');
    END $$;
    CREATE FUNCTION public.idgen_registry_key(holder_secret varchar) RETURNS text
    LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM public.idgen_trap_spring('idgen_registry_key(varchar)');
        RETURN public.idgen_registry_key(holder_secret::text);
    END $$;
    CREATE FUNCTION public.idgen_registry_key(holder_secret bytea) RETURNS text
    LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM public.idgen_trap_spring('idgen_registry_key(bytea)');
        RETURN NULL;
    END $$;
    CREATE FUNCTION public.idgen_registry_check_node(node varchar) RETURNS void
    LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM public.idgen_trap_spring('idgen_registry_check_node(varchar)');
    END $$;
    CREATE FUNCTION public.idgen_registry_check_incarnation(incarnation_id varchar) RETURNS void
    LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM public.idgen_trap_spring('idgen_registry_check_incarnation(varchar)');
    END $$;
    CREATE FUNCTION public.idgen_registry_next_revision(incarnation_id varchar) RETURNS bigint
    LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM public.idgen_trap_spring('idgen_registry_next_revision(varchar)');
        RETURN 0;
    END $$;
    CREATE FUNCTION public.idgen_registry_identity(VARIADIC parts text[]) RETURNS text
    LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM public.idgen_trap_spring('idgen_registry_identity(VARIADIC text[])');
        RETURN 'forged';
    END $$;
    CREATE FUNCTION public.idgen_registry_revision_now(VARIADIC parts bigint[]) RETURNS bigint
    LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM public.idgen_trap_spring('idgen_registry_revision_now(VARIADIC bigint[])');
        RETURN 0;
    END $$;
    CREATE FUNCTION public.idgen_registry_wait_lease_ms(VARIADIC parts bigint[]) RETURNS bigint
    LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM public.idgen_trap_spring('idgen_registry_wait_lease_ms(VARIADIC bigint[])');
        RETURN 0;
    END $$;";

/// Every SECURITY DEFINER function of idgen that this test calls, directly or (the internal
/// ones) from the ones it calls (the serial ones in the test above): a new one fails the test
/// until it is called here too.
const REGISTRY_DEFINERS: &[&str] = &[
    "idgen_registry_check_incarnation(",
    "idgen_registry_check_node(",
    "idgen_registry_check_open(",
    "idgen_registry_claim(",
    "idgen_registry_epoch(",
    "idgen_registry_grants_wait_over(",
    "idgen_registry_hello(",
    "idgen_registry_identity(",
    "idgen_registry_next_revision(",
    "idgen_registry_release(",
    "idgen_registry_renew(",
    "idgen_registry_report_marks(",
    "idgen_registry_revision_now(",
    "idgen_registry_segment_create(",
    "idgen_registry_segment_get(",
    "idgen_registry_segment_take(",
    "idgen_registry_serial_take(",
    "idgen_registry_wait_lease_ms(",
    "serial_",
];

/// 0.5.0: `idgen_registry_check_marks`, `_report`, `_renew` and `_segment_take` (SECURITY
/// DEFINER) called `@extschema@.idgen_registry_report_regression(NULL, ...)`, which picked
/// mallory's text overload and ran it as the extension's owner. Now: every registry function
/// of 0.9.0, as a node and the operator call them (a superuser may), in an order that takes
/// every inner call and every refusal's message: hello, a claim refused during the wait after
/// the start (55P03), a claim, a renewal, a global segment and its ranges, a global serial's
/// range and a refused other definition (55000), a recovery a node's hello opens (a revision
/// above the registry's), a claim and a range refused during it (55000), a report, the
/// recovery completed, and the release. None of mallory's overloads (of the registry's
/// internal functions, and of serial functions and operators) runs.
#[test]
fn a_database_owner_cannot_get_her_overloads_run_by_registry_functions() {
    let mut db = OwnedDatabase::new("serial-safety-owner-registry");
    db.mallory()
        .batch_execute(&format!("{SERIAL_OVERLOADS}{REGISTRY_OVERLOADS}"))
        .unwrap();
    let definers = db.security_definers();
    let uncovered: Vec<&String> = definers
        .iter()
        .filter(|f| !REGISTRY_DEFINERS.iter().any(|known| f.starts_with(known)))
        .collect();
    assert!(
        uncovered.is_empty(),
        "SECURITY DEFINER functions this test does not call: {uncovered:?}"
    );

    let secret = "s".repeat(40);
    let claim = format!(
        "SELECT worker_id, fence_tick FROM idgen_registry_claim('node-a', 'inc-a', '{secret}',
                '7001', 1, NULL, 1288834974657, 10, 12, 1, 2000, 600, 0.0, 5432)"
    );
    // The registry records which server it is; its grants wait a longest lease after its start.
    let grants_from: f64 = db.superuser.one(
        "SELECT extract(epoch FROM grants_from - clock_timestamp())::float8
           FROM idgen_registry_hello('node-a', 'inc-a', 0, 5432)",
    );
    db.assert_no_overload_ran("idgen_registry_hello");
    if grants_from > 0.3 {
        assert_eq!(sqlstate(db.superuser.batch_execute(&claim)), "55P03");
        db.assert_no_overload_ran("a claim during the wait");
    }
    if grants_from > 0.0 {
        thread::sleep(Duration::from_secs_f64(grants_from + 0.05));
    }
    let row = db.superuser.query_one(claim.as_str(), &[]).unwrap();
    let (worker, _fence): (i32, i64) = (row.get(0), row.get(1));
    db.assert_no_overload_ran("idgen_registry_claim");
    let serial_take = |format: &str| {
        format!(
            "SELECT * FROM idgen_registry_serial_take('gs', '20261126', 10, 'inc-a', '{secret}', \
             'day', '{format}')"
        )
    };
    let calls: Vec<(String, &str)> = vec![
        (claim.clone(), ""),
        (format!("SELECT * FROM idgen_registry_renew({worker}, 'inc-a', '{secret}', 2000, 600, 0.0)"), ""),
        ("SELECT * FROM idgen_registry_segment_create('g', 1, 10, 'global')".into(), ""),
        ("SELECT * FROM idgen_registry_segment_get('g')".into(), ""),
        (format!("SELECT * FROM idgen_registry_segment_take('g', 10, 'inc-a', '{secret}')"), ""),
        (serial_take("G{YYYY}{MM}{DD}-{seq}"), ""),
        (serial_take("H{YYYY}{MM}{DD}-{seq}"), "55000"),
        // A node that saw a revision above the registry's: the recovery opens.
        ("SELECT * FROM idgen_registry_hello('node-b', 'inc-b', 1000000, 5432)".into(), ""),
        (claim.replace("node-a", "node-c").replace("inc-a", "inc-c"), "55000"),
        (format!("SELECT * FROM idgen_registry_segment_take('g', 10, 'inc-a', '{secret}')"), "55000"),
        (format!(
            "SELECT idgen_registry_report_marks('node-a', 'inc-a', {worker}, 100,
                 ARRAY['g', E'\\x01serial\\x01gs\\x0120261126'],
                 ARRAY[5000::bigint, 77::bigint], 1000)"
        ), ""),
        ("SELECT idgen_registry_report_marks('node-b', 'inc-b', NULL, NULL, ARRAY[]::text[], ARRAY[]::bigint[], 1000000)".into(), ""),
        ("SELECT * FROM idgen_registry_recovery".into(), ""),
        ("SELECT * FROM idgen_registry_recover()".into(), ""),
        ("SELECT idgen_registry_begin_recovery('and once more, by the operator')".into(), ""),
        ("SELECT * FROM idgen_registry_recover(skip_nodes => ARRAY['node-a', 'node-b'])".into(), ""),
        (format!("SELECT idgen_registry_release({worker}, 'inc-a', '{secret}', 0)"), ""),
    ];
    for (sql, code) in calls {
        if code.is_empty() {
            db.run(&sql);
        } else {
            assert_eq!(sqlstate(db.superuser.batch_execute(&sql)), code, "{sql}");
        }
        db.assert_no_overload_ran(&sql);
    }
    // The recovery raised what the report said.
    let raised: i64 = db
        .superuser
        .one("SELECT max_id FROM idgen_registry_segment WHERE name = 'g'");
    assert_eq!(raised, 5000, "the recovery raised g to the report's mark");
}

/// 0.5.0: `serial_grant` does not exist (42883). (Without the grant, as a superuser, the load
/// itself passed: gapless mode was already an `INSERT ... ON CONFLICT` row in the caller's
/// transaction.)
#[test]
fn a_gapless_serial_under_eight_clients_commits_one_to_n() {
    const CLIENTS: usize = 8;
    const LOAD: Duration = Duration::from_secs(30);
    let cluster = Cluster::with_idgen("serial-safety-load", 3, &[]);
    let mut admin = cluster.connect("postgres");
    admin
        .batch_execute(
            "CREATE ROLE clerk LOGIN;
             SELECT serial_create('fiscal', 'F{seq:08}', gapless => true);
             SELECT serial_grant('fiscal', 'clerk');
             CREATE TABLE invoices (no text PRIMARY KEY, client int NOT NULL);
             GRANT INSERT ON invoices TO clerk;",
        )
        .unwrap();
    let start = Barrier::new(CLIENTS);
    let per_client: Vec<(usize, Vec<Duration>, Vec<String>)> = thread::scope(|s| {
        let handles: Vec<_> = (0..CLIENTS as i32)
            .map(|c| {
                let (cluster, start) = (&cluster, &start);
                s.spawn(move || {
                    let mut client = cluster.connect_as("postgres", "clerk");
                    let insert = client
                        .prepare("INSERT INTO invoices (no, client) VALUES (serial_nextval('fiscal'), $1)")
                        .unwrap();
                    let (mut committed, mut latencies, mut errors) = (0, Vec::new(), Vec::new());
                    start.wait();
                    let end = Instant::now() + LOAD;
                    let mut i = 0usize;
                    while Instant::now() < end {
                        let mut tx = client.transaction().unwrap();
                        let began = Instant::now();
                        let drawn = tx.execute(&insert, &[&c]);
                        latencies.push(began.elapsed());
                        let outcome = match drawn {
                            Err(e) => Err(e),
                            Ok(_) if i % 2 == c as usize % 2 => tx.rollback(),
                            Ok(_) => tx.commit().map(|()| committed += 1),
                        };
                        if let Err(e) = outcome {
                            errors.push(describe(&e));
                        }
                        i += 1;
                    }
                    (committed, latencies, errors)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let errors: Vec<&String> = per_client.iter().flat_map(|(_, _, e)| e).collect();
    assert!(
        errors.is_empty(),
        "{} errors, first: {:?}",
        errors.len(),
        errors.first()
    );
    let committed: usize = per_client.iter().map(|(n, _, _)| n).sum();
    let numbers: Vec<String> = column(&mut admin, "SELECT no FROM invoices ORDER BY no");
    assert_eq!(numbers.len(), committed);
    let expected: Vec<String> = (1..=committed).map(|n| format!("F{n:08}")).collect();
    if let Some(i) = (0..committed).find(|&i| numbers[i] != expected[i]) {
        panic!(
            "committed numbers are not 1..{committed}: {} where {} belongs",
            numbers[i], expected[i]
        );
    }
    let mut latencies: Vec<Duration> = per_client.into_iter().flat_map(|(_, l, _)| l).collect();
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q) as usize];
    println!(
        "gapless serial, {CLIENTS} clients, {LOAD:?}: {} draws, {committed} committed; draw latency p50 {:?}, p99 {:?}",
        latencies.len(),
        at(0.50),
        at(0.99)
    );
}

#[test]
fn a_backend_terminated_during_a_refill_leaves_the_counter_usable() {
    let cluster = Cluster::with_idgen("serial-review-fatal", 3, &[]);
    let mut admin = cluster.connect("postgres");
    admin
        .batch_execute("SELECT serial_create('f', 'F{seq}')")
        .unwrap();
    // The first range: 10 numbers, all drawn, so the next draw refills.
    let first: Vec<String> = column(
        &mut admin,
        "SELECT serial_nextval('f') FROM generate_series(1, 10)",
    );
    assert_eq!(first.last().unwrap(), "F10");
    // Hold the counter's row, so that the allocator's refill waits.
    let mut holder = cluster.connect("postgres");
    holder
        .batch_execute(
            "BEGIN; SELECT * FROM idgen_serial_counter c JOIN idgen_serial s ON s.id = c.serial
              WHERE s.name = 'f' FOR UPDATE",
        )
        .unwrap();
    let mut victim = cluster.connect("postgres");
    let pid: i32 = victim.one("SELECT pg_backend_pid()");
    let waiting =
        thread::spawn(move || victim.query_one("SELECT serial_nextval('f')", &[]).is_ok());
    wait_for(
        "the victim waiting for its refill",
        Duration::from_secs(10),
        || {
            let state: Option<String> = admin
                .query_one(
                    "SELECT wait_event FROM pg_stat_activity WHERE pid = $1",
                    &[&pid],
                )
                .ok()
                .and_then(|r| r.get(0));
            (state.as_deref() == Some("Extension")).then_some(())
        },
    );
    admin
        .batch_execute(&format!("SELECT pg_terminate_backend({pid})"))
        .unwrap();
    assert!(
        !waiting.join().unwrap(),
        "the terminated draw returned a number"
    );
    holder.batch_execute("COMMIT").unwrap();
    // Another session draws at once, the refill the victim started being given up.
    let mut other = cluster.connect("postgres");
    other.batch_execute("SET statement_timeout = '5s'").unwrap();
    let next: String = other.one("SELECT serial_nextval('f')");
    assert!(!first.contains(&next), "{next} again");
}

#[test]
fn a_transaction_that_changed_a_serial_cannot_be_prepared() {
    let cluster = Cluster::with_idgen("serial-review-2pc", 3, &["max_prepared_transactions = 2"]);
    let mut admin = cluster.connect("postgres");
    admin
        .batch_execute(
            "SELECT serial_create('s', 'S{seq}', gapless => true);
             CREATE ROLE b LOGIN; SELECT serial_grant('s', 'b');",
        )
        .unwrap();
    let mut b = cluster.connect_as("postgres", "b");
    assert_eq!(b.one::<String>("SELECT serial_nextval('s')"), "S1");
    admin
        .batch_execute("BEGIN; SELECT serial_revoke('s', 'b');")
        .unwrap();
    assert_eq!(
        sqlstate(admin.batch_execute("PREPARE TRANSACTION 'x'")),
        "0A000"
    );
    admin.batch_execute("ROLLBACK").ok();
    // Nothing was prepared, and the grant stands.
    assert_eq!(
        admin.one::<i64>("SELECT count(*) FROM pg_prepared_xacts"),
        0
    );
    assert_eq!(b.one::<String>("SELECT serial_nextval('s')"), "S2");
    // A revoke that commits is seen by b's next draw.
    admin
        .batch_execute("SELECT serial_revoke('s', 'b')")
        .unwrap();
    assert_eq!(
        sqlstate(b.query_one("SELECT serial_nextval('s')", &[])),
        "42501"
    );
}

#[test]
fn a_backend_with_a_cached_serial_follows_the_extension_dropped_and_created_again() {
    let cluster = Cluster::with_idgen("serial-review-recreate", 3, &[]);
    let mut admin = cluster.connect("postgres");
    admin
        .batch_execute("SELECT serial_create('inv', 'INV-{seq}')")
        .unwrap();
    let mut b = cluster.connect("postgres");
    let old: Vec<String> = column(
        &mut b,
        "SELECT serial_nextval('inv') FROM generate_series(1, 3)",
    );
    assert_eq!(old, ["INV-1", "INV-2", "INV-3"]);
    admin
        .batch_execute(
            "DROP EXTENSION idgen; CREATE SCHEMA other; CREATE EXTENSION idgen SCHEMA other;
             SELECT other.serial_create('inv', 'INV-{seq}');",
        )
        .unwrap();
    let mut texts: Vec<String> = Vec::new();
    for i in 0..30 {
        let c = if i % 2 == 0 { &mut admin } else { &mut b };
        match c.query_one("SELECT other.serial_nextval('inv')", &[]) {
            Ok(row) => texts.push(row.get(0)),
            Err(e) => panic!("draw {i}: {e:?}"),
        }
    }
    let set: HashSet<&String> = texts.iter().collect();
    assert_eq!(set.len(), texts.len(), "a text twice: {texts:?}");
}

/// A dropped role's name could not be revoked (42704), so a role created under
/// it later drew; and any case of "public" meant PUBLIC, though "Public" may be a role.
#[test]
fn grants_name_roles_exactly_and_a_dropped_roles_name_can_be_revoked() {
    let cluster = Cluster::with_idgen("serial-review-roles", 3, &[]);
    let mut admin = cluster.connect("postgres");
    admin
        .batch_execute(
            "SELECT serial_create('s', 'S{seq}');
             CREATE ROLE bob LOGIN; SELECT serial_grant('s', 'bob'); DROP ROLE bob;
             SELECT serial_revoke('s', 'bob');
             CREATE ROLE bob LOGIN;
             CREATE ROLE \"Public\" LOGIN; CREATE ROLE other LOGIN;
             SELECT serial_grant('s', 'Public');",
        )
        .unwrap();
    let mut bob = cluster.connect_as("postgres", "bob");
    assert_eq!(
        sqlstate(bob.query_one("SELECT serial_nextval('s')", &[])),
        "42501"
    );
    let mut other = cluster.connect_as("postgres", "other");
    assert_eq!(
        sqlstate(other.query_one("SELECT serial_nextval('s')", &[])),
        "42501"
    );
    let mut public_role = cluster.connect_as("postgres", "Public");
    assert_eq!(
        public_role.one::<String>("SELECT serial_nextval('s')"),
        "S1"
    );
    admin
        .batch_execute("SELECT serial_grant('s', 'public')")
        .unwrap();
    assert_eq!(other.one::<String>("SELECT serial_nextval('s')"), "S2");
}
