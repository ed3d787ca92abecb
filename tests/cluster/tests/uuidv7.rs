//! What idgen guarantees that PostgreSQL 18's `uuidv7()` does not (README
//! "PostgreSQL 18's uuidv7()"): `uuidv7()` is time-ordered, and monotonic within one backend,
//! but it is stamped from the wall clock alone and remembers nothing across a restart, so when
//! the clock is behind the time of values already handed out (a step back by NTP, a restored
//! VM, a clock fixed after running fast) new values sort below old ones. idgen's durable
//! reservation makes every Snowflake id after the restart sort above every id before it.
//!
//! One server (libfaketime) hands out both; it stops, its clock goes back 30 s, and it starts
//! again: asserted, every `uuidv7()` value after the restart sorts below the last one before
//! it, while every `snowflake_nextval()` after is above every one before (with
//! `idgen.max_drift_ms` at 120 s, so that idgen serves ahead of the clock rather than waiting);
//! and within one backend both are increasing.
//!
//! `uuidv7()` exists from PostgreSQL 18: the test is `#[ignore]`d in the plain cluster run and
//! `scripts/test.sh` runs it (`--ignored`) on 18.

use idgen_cluster_tests::{Cluster, FakeClock, One};

fn draw(client: &mut postgres::Client, n: i32) -> (Vec<String>, Vec<i64>) {
    let rows = client
        .query(
            "SELECT uuidv7()::text, snowflake_nextval() FROM generate_series(1, $1)",
            &[&n],
        )
        .unwrap();
    (
        rows.iter().map(|r| r.get(0)).collect(),
        rows.iter().map(|r| r.get(1)).collect(),
    )
}

fn assert_increasing<T: PartialOrd + std::fmt::Debug>(what: &str, values: &[T]) {
    for w in values.windows(2) {
        assert!(
            w[0] < w[1],
            "{what} not increasing within one backend: {w:?}"
        );
    }
}

#[test]
#[ignore = "needs PostgreSQL 18's uuidv7(): run by scripts/test.sh on 18"]
fn after_a_restart_with_the_clock_behind_uuidv7_sorts_lower_and_snowflake_ids_do_not() {
    let mut cluster = Cluster::init(
        "uuidv7",
        &[
            "shared_preload_libraries = 'idgen'",
            "idgen.worker_id = 4",
            "idgen.max_drift_ms = 120000",
        ],
    );
    let clock = cluster.fake_clock();
    cluster.start_server();
    cluster.create_db_with_idgen("postgres");
    let mut client = cluster.connect("postgres");
    let version: i32 = client.one("SELECT current_setting('server_version_num')::int");
    assert!(
        version >= 180000,
        "uuidv7() needs PostgreSQL 18, this is {version}"
    );
    let (uuids_before, ids_before) = draw(&mut client, 5_000);
    assert_increasing("uuidv7()", &uuids_before);
    assert_increasing("snowflake_nextval()", &ids_before);
    drop(client);

    cluster.stop("fast");
    clock.set_offset_secs(-30.0);
    cluster.start_server();
    std::thread::sleep(FakeClock::PICKUP);
    let mut client = cluster.connect("postgres");
    let (uuids_after, ids_after) = draw(&mut client, 5_000);
    assert_increasing("uuidv7()", &uuids_after);
    assert_increasing("snowflake_nextval()", &ids_after);

    let last_uuid = uuids_before.last().unwrap();
    assert!(
        uuids_after.iter().all(|u| u < last_uuid),
        "expected uuidv7() after the clock went back to sort below the last value before it: {} vs {last_uuid}",
        uuids_after[0]
    );
    let last_id = *ids_before.last().unwrap();
    assert!(
        ids_after.iter().all(|&id| id > last_id),
        "a Snowflake id after the restart ({}) is not above the last one before ({last_id})",
        ids_after[0]
    );
}
