//! A serial never prints a text twice through an admin call, on real servers:
//!
//! * `serial_alter` refuses a format that differs from the serial's in more than the width of
//!   `{seq}` (22023): the counters go on, and `A1{seq:03}` → `A{seq:04}` printed `A1001` to
//!   `A1005` a second time after 1,000 draws, fast or gapless; a wider `{seq}` is accepted and
//!   goes on above every number printed;
//! * a dropped serial's name keeps what it printed: created again with the same format (its
//!   `{seq}` may be wider), reset and scope it goes on counting, with another definition it is
//!   refused (42710) until `serial_forget(name)`, the DBA's explicit word that its texts may be
//!   printed again; all of it transactional;
//! * a gapless draw on a standby fails with 25006, as its documentation says, not with the
//!   lock manager's 55000.
//!
//! The property behind the first (no accepted change of format prints an old text, over any
//! formats, resets, counters and periods) is `idgen_core::serial::format`'s proptest.

use std::collections::HashSet;

use idgen_cluster_tests::{column, db_error, sqlstate, wait_for, Cluster, One};
use postgres::Client;

fn next(client: &mut Client, serial: &str) -> String {
    client.one_with("SELECT serial_nextval($1)", &[&serial])
}

/// Texts printed more than once among `texts`.
fn repeated(texts: &[String]) -> Vec<String> {
    let mut seen = HashSet::new();
    let mut twice: Vec<String> = texts
        .iter()
        .filter(|t| !seen.insert(t.as_str()))
        .cloned()
        .collect();
    twice.sort();
    twice.dedup();
    twice
}

/// Fast and gapless: before this was refused, the change was accepted
/// and `A1001`..`A1005` were printed twice.
#[test]
fn a_format_change_that_could_print_an_old_text_is_refused() {
    let cluster = Cluster::with_idgen("serial-names-alter", 3, &[]);
    let mut admin = cluster.connect("postgres");
    for (serial, gapless) in [("rv_gapless", true), ("rv_fast", false)] {
        admin
            .execute(
                "SELECT serial_create($1, 'A1{seq:03}', reset => 'never', gapless => $2)",
                &[&serial, &gapless],
            )
            .unwrap();
        let mut texts: Vec<String> = (0..5).map(|_| next(&mut admin, serial)).collect();
        let altered = admin.execute("SELECT serial_alter($1, format => 'A{seq:04}')", &[&serial]);
        let refused = altered.is_err();
        texts.extend(column::<String>(
            &mut admin,
            &format!(
                "SELECT serial_nextval('{serial}') FROM generate_series(1, {})",
                if refused { 5 } else { 1000 }
            ),
        ));
        assert_eq!(
            repeated(&texts),
            Vec::<String>::new(),
            "{serial}: printed twice"
        );
        assert_eq!(sqlstate(altered), "22023", "{serial}");
    }
    // The "locale fix" of a day-reset format: on 3 April it would print 4 March's texts.
    admin
        .batch_execute(
            "SELECT serial_create('inv', 'INV-{DD}{MM}{YYYY}-{seq:04}', reset => 'day', gapless => true)",
        )
        .unwrap();
    let e = db_error(
        admin.batch_execute("SELECT serial_alter('inv', format => 'INV-{MM}{DD}{YYYY}-{seq:04}')"),
    );
    assert_eq!(e.code().code(), "22023", "{e:?}");
    assert!(e.hint().unwrap_or("").contains("width of {seq}"), "{e:?}");
    // What the 22003 hint asks for is accepted, and goes on above every number printed.
    let before = next(&mut admin, "inv");
    admin
        .batch_execute(
            "SELECT serial_alter('inv', format => 'INV-{DD}{MM}{YYYY}-{seq:06}', description => 'wider')",
        )
        .unwrap();
    let after = next(&mut admin, "inv");
    assert!(after.ends_with("-000002"), "{before} then {after}");
    let format: String = admin.one("SELECT format FROM idgen_serial WHERE name = 'inv'");
    assert_eq!(format, "INV-{DD}{MM}{YYYY}-{seq:06}");
}

/// Before, a serial created under a dropped one's name counted from 1
/// and printed `D1` again.
#[test]
fn a_dropped_serials_name_keeps_what_it_printed() {
    let cluster = Cluster::with_idgen("serial-names-drop", 3, &[]);
    let mut admin = cluster.connect("postgres");
    for (serial, gapless) in [("d_gapless", true), ("d_fast", false)] {
        admin
            .execute(
                "SELECT serial_create($1, 'D{seq:03}', gapless => $2)",
                &[&serial, &gapless],
            )
            .unwrap();
        let mut texts: Vec<String> = (0..3).map(|_| next(&mut admin, serial)).collect();
        admin.execute("SELECT serial_drop($1)", &[&serial]).unwrap();
        // The same definition, or a wider counter, another mode: it goes on counting.
        admin
            .execute(
                "SELECT serial_create($1, 'D{seq:03}', gapless => $2)",
                &[&serial, &!gapless],
            )
            .unwrap();
        texts.extend((0..3).map(|_| next(&mut admin, serial)));
        assert_eq!(
            repeated(&texts),
            Vec::<String>::new(),
            "{serial}: printed twice"
        );
        let n: i64 = admin.one_with(
            "SELECT count(*) FROM idgen_serial_dropped WHERE name = $1",
            &[&serial],
        );
        assert_eq!(n, 0, "{serial}: the tombstone went with the new serial");
    }

    // Another format, reset or scope: refused, and nothing changes.
    admin
        .batch_execute("SELECT serial_create('x', 'X{seq}'); SELECT serial_nextval('x'); SELECT serial_drop('x');")
        .unwrap();
    for (create, what) in [
        ("SELECT serial_create('x', 'Y{seq}')", "format"),
        (
            "SELECT serial_create('x', 'X{YYYY}{seq}', reset => 'year')",
            "reset",
        ),
    ] {
        let e = db_error(admin.batch_execute(create));
        assert_eq!(e.code().code(), "42710", "{create}: {e:?}");
        assert!(e.message().contains(what), "{e:?}");
        assert!(
            e.hint().unwrap_or("").contains("serial_forget('x')"),
            "{e:?}"
        );
    }
    assert_eq!(
        admin.one::<i64>("SELECT count(*) FROM idgen_serial WHERE name = 'x'"),
        0
    );
    // A drop and a forget rolled back change nothing.
    admin
        .batch_execute("BEGIN; SELECT serial_forget('x'); ROLLBACK;")
        .unwrap();
    assert_eq!(
        sqlstate(admin.batch_execute("SELECT serial_create('x', 'Y{seq}')")),
        "42710"
    );
    // The DBA's explicit word: the name's texts may be printed again.
    admin.batch_execute("SELECT serial_forget('x')").unwrap();
    assert_eq!(
        sqlstate(admin.batch_execute("SELECT serial_forget('x')")),
        "42704"
    );
    admin
        .batch_execute("SELECT serial_create('x', 'X{seq}')")
        .unwrap();
    assert_eq!(next(&mut admin, "x"), "X1");
    admin
        .batch_execute("BEGIN; SELECT serial_drop('x'); ROLLBACK;")
        .unwrap();
    assert_eq!(next(&mut admin, "x"), "X2");
    let dropped: i64 = admin.one("SELECT count(*) FROM idgen_serial_dropped");
    assert_eq!(dropped, 0);
    // Only idgen_admin forgets.
    admin
        .batch_execute("CREATE ROLE clerk LOGIN; SELECT serial_drop('x')")
        .unwrap();
    let mut clerk = cluster.connect_as("postgres", "clerk");
    assert_eq!(
        sqlstate(clerk.batch_execute("SELECT serial_forget('x')")),
        "42501"
    );
}

/// Before: 55000 ("cannot acquire lock mode ExclusiveLock on database
/// objects while recovery is in progress").
#[test]
fn a_gapless_draw_on_a_standby_fails_with_25006() {
    let primary = Cluster::with_idgen("serial-names-primary", 3, &[]);
    let mut admin = primary.connect("postgres");
    admin
        .batch_execute(
            "SELECT serial_create('g', 'G{seq}', gapless => true);
             SELECT serial_create('f', 'F{seq}');",
        )
        .unwrap();
    assert_eq!(next(&mut admin, "g"), "G1");
    let standby = Cluster::standby_of(&primary, "serial-names-standby", &[]);
    // The serials reach the standby.
    wait_for(
        "the serials on the standby",
        std::time::Duration::from_secs(30),
        || {
            let mut c = standby.connect("postgres");
            (c.one::<i64>("SELECT count(*) FROM idgen_serial") == 2).then_some(())
        },
    );
    let mut on_standby = standby.connect("postgres");
    for serial in ["g", "f"] {
        let e = db_error(on_standby.query_one("SELECT serial_nextval($1)", &[&serial]));
        assert_eq!(e.code().code(), "25006", "{serial}: {e:?}");
    }
    // The admin calls too (before the name's lock is asked for, which PostgreSQL refuses
    // during recovery with 55000).
    for call in [
        "SELECT serial_create('n', 'N{seq}')",
        "SELECT serial_drop('f')",
        "SELECT serial_forget('f')",
    ] {
        let e = db_error(on_standby.batch_execute(call));
        assert_eq!(e.code().code(), "25006", "{call}: {e:?}");
    }
}

/// One transaction creates, then drops, 1,000 serials on a server whose lock table holds a few
/// hundred locks, while another session creates a serial of another name: nothing of a name
/// waits for another name's calls. A lock per name filled PostgreSQL's lock table (53200, on
/// the code before the first fix); 64 locks shared by the names made the other session wait
/// for the open transaction (55P03 under its lock_timeout, on the code before the second).
#[test]
fn one_transaction_of_a_thousand_serial_calls_blocks_no_other_name() {
    let cluster = Cluster::with_idgen(
        "serial-names-many",
        3,
        &["max_connections = 20", "max_locks_per_transaction = 10"],
    );
    let mut admin = cluster.connect("postgres");
    let mut other = cluster.connect("postgres");
    for (sql, other_name) in [
        ("SELECT count(*) FROM (SELECT serial_create('t' || g, 'T{seq}') FROM generate_series(1, 1000) g) c", "zc"),
        ("SELECT count(*) FROM (SELECT serial_drop('t' || g) FROM generate_series(1, 1000) g) c", "zd"),
    ] {
        if let Err(e) = admin.batch_execute(&format!("BEGIN; {sql}")) {
            panic!("{sql}: {e:?}");
        }
        let created = other.batch_execute(&format!(
            "SET lock_timeout = '2s'; SELECT serial_create('{other_name}', 'Z{{seq}}')"
        ));
        assert!(
            created.is_ok(),
            "a create of {other_name} while another transaction runs {sql}: {created:?}"
        );
        admin.batch_execute("COMMIT").unwrap();
    }
    let dropped: i64 = admin.one("SELECT count(*) FROM idgen_serial_dropped");
    assert_eq!(dropped, 1000);
}

/// A create of a name whose drop is not committed yet waits for it (on the name in the unique
/// index), then goes on counting. On the code before this test, the create missed the
/// uncommitted tombstone, took a new id once the drop committed, and printed `R1` again.
#[test]
fn a_create_concurrent_with_a_drop_of_the_name_goes_on_counting() {
    let cluster = Cluster::with_idgen("serial-names-race", 3, &[]);
    let mut admin = cluster.connect("postgres");
    admin
        .batch_execute("SELECT serial_create('r', 'R{seq}', gapless => true)")
        .unwrap();
    let mut texts: Vec<String> = (0..3).map(|_| next(&mut admin, "r")).collect();
    let mut dropper = cluster.connect("postgres");
    dropper
        .batch_execute("BEGIN; SELECT serial_drop('r');")
        .unwrap();
    let creator = {
        let mut c = cluster.connect("postgres");
        std::thread::spawn(move || {
            c.batch_execute("SELECT serial_create('r', 'R{seq}', gapless => true)")
                .map_err(|e| format!("{e:?}"))
        })
    };
    // The create is waiting (for the name's lock, or on the unique index before the fix).
    wait_for(
        "the create to wait",
        std::time::Duration::from_secs(10),
        || {
            let waiting: i64 = admin.one(
                "SELECT count(*) FROM pg_stat_activity
              WHERE query LIKE 'SELECT serial_create(%' AND wait_event_type = 'Lock'",
            );
            (waiting == 1).then_some(())
        },
    );
    dropper.batch_execute("COMMIT").unwrap();
    creator.join().unwrap().unwrap();
    texts.extend((0..3).map(|_| next(&mut admin, "r")));
    assert_eq!(
        repeated(&texts),
        Vec::<String>::new(),
        "printed twice: {texts:?}"
    );
    let left: i64 = admin.one("SELECT count(*) FROM idgen_serial_dropped");
    assert_eq!(left, 0, "the tombstone went with the new serial");
}
