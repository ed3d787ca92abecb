//! The findings of issue 29's adversarial review of the Rust serials, each pinned on a real
//! server (each failed on the commit the review read, 0c02f10's parent):
//!
//! * a backend terminated while it waits for its serial counter's next range leaves the
//!   counter usable (the refill it started is given up at its exit, not left "in progress");
//! * a transaction that changed a serial cannot be prepared (PREPARE TRANSACTION): the other
//!   backends' caches are told of a change when its transaction commits in the same backend;
//! * a backend that has a serial cached sees the extension dropped and created again (in
//!   another schema): it draws from the new serial's counter, not from a range of the old one.

use std::collections::HashSet;
use std::thread;
use std::time::Duration;

use idgen_cluster_tests::{column, sqlstate, wait_for, Cluster, One};

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

/// Third review: a dropped role's name could not be revoked (42704), so a role created under
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
