//! Configurable Snowflake layouts on real servers (DESIGN.md §1 "Layout"): a
//! Sonyflake-like layout of 10 ms ticks, Twitter's 5+5 datacenter/machine split of the worker
//! field with Leaf's random sequence start, and a layout running out of time (under
//! libfaketime, 20 s before the default layout's end in 2093); ids for the web, below 2^53
//! (`idgen.id_bits = 53`), and such a layout run out.

use std::thread;
use std::time::Duration;

use idgen_cluster_tests::{column, db_error, sqlstate, Cluster, FakeClock, One};

const PRELOAD: &str = "shared_preload_libraries = 'idgen'";
const EPOCH_MS: i64 = 1_704_067_200_000;

/// Sonyflake: 39 bits of 10 ms ticks, a 16-bit machine id, an 8-bit sequence.
#[test]
fn a_sonyflake_layout_counts_ten_ms_ticks_with_a_16_bit_worker() {
    let cluster = Cluster::start(
        "sonyflake",
        &[
            PRELOAD,
            "idgen.worker_bits = 16",
            "idgen.sequence_bits = 8",
            "idgen.time_unit_ms = 10",
            "idgen.worker_id = 40000",
        ],
    );
    cluster.create_db_with_idgen("postgres");
    let mut client = cluster.connect("postgres");
    let row = client
        .query_one(
            "SELECT time_bits, worker_bits, sequence_bits, time_unit_ms, \
             exhausted_at = '2024-01-01 00:00:00+00'::timestamptz + (2^39 * 10) * interval '1 millisecond' \
             FROM snowflake_status()",
            &[],
        )
        .unwrap();
    assert_eq!(
        (
            row.get::<_, i32>(0),
            row.get::<_, i32>(1),
            row.get::<_, i32>(2),
            row.get::<_, i32>(3),
            row.get::<_, bool>(4)
        ),
        (39, 16, 8, 10, true)
    );

    let ids: Vec<i64> = column(&mut client, "SELECT snowflake_nextvals(1000)");
    assert!(ids.windows(2).all(|w| w[0] < w[1]));
    assert!(ids.iter().all(|id| (id >> 8) & 0xffff == 40000));
    // 1000 ids at 256 per tick need at least four ticks.
    let ticks: std::collections::BTreeSet<i64> = ids.iter().map(|id| id >> 24).collect();
    assert!(ticks.len() >= 4, "{} ticks", ticks.len());

    // Decoding uses the layout: the tick is 10 ms long.
    let id = ids[700];
    let row = client
        .query_one(
            "SELECT (extract(epoch FROM ts) * 1000)::bigint, worker_id, sequence FROM snowflake_decode($1)",
            &[&id],
        )
        .unwrap();
    let (ts_ms, worker, sequence): (i64, i32, i32) = (row.get(0), row.get(1), row.get(2));
    assert_eq!(ts_ms, EPOCH_MS + (id >> 24) * 10);
    assert_eq!(ts_ms % 10, 0);
    assert_eq!((worker, sequence as i64), (40000, id & 0xff));
    let composed: i64 = client.one_with(
        "SELECT snowflake_compose(snowflake_timestamp($1), 40000, $2)",
        &[&id, &sequence],
    );
    assert_eq!(composed, id);
    for bad in [
        "SELECT snowflake_compose(now(), 65536)",
        "SELECT snowflake_compose(now(), 0, 256)",
    ] {
        assert_eq!(sqlstate(client.query_one(bad, &[])), "22003", "{bad}");
    }
    let top: i64 = client.one("SELECT snowflake_compose(now(), 65535, 255)");
    assert_eq!(((top >> 8) & 0xffff, top & 0xff), (65535, 255));
}

/// Ids for the web (README "Ids for JavaScript"): `idgen.id_bits = 53` with 6 worker and 6
/// sequence bits leaves 41 time bits of 1 ms, so every id is below 2^53 until 2093. The
/// layout's last instant composes to 2^53 - 1; a bigint at 2^53 is no id of it (22023), and a
/// time past its end none either (22008).
#[test]
fn a_53_bit_layout_keeps_every_id_below_2_53() {
    let cluster = Cluster::start(
        "web53",
        &[
            PRELOAD,
            "idgen.id_bits = 53",
            "idgen.worker_bits = 6",
            "idgen.sequence_bits = 6",
            "idgen.worker_id = 63",
        ],
    );
    cluster.create_db_with_idgen("postgres");
    let mut client = cluster.connect("postgres");
    let row = client
        .query_one(
            "SELECT id_bits, time_bits, worker_bits, sequence_bits, \
             exhausted_at = '2093-09-06 15:47:35.552+00' FROM snowflake_status()",
            &[],
        )
        .unwrap();
    assert_eq!(
        (
            row.get::<_, i32>(0),
            row.get::<_, i32>(1),
            row.get::<_, i32>(2),
            row.get::<_, i32>(3),
            row.get::<_, bool>(4)
        ),
        (53, 41, 6, 6, true)
    );
    let ids: Vec<i64> = column(&mut client, "SELECT snowflake_nextvals(1000)");
    assert!(ids.windows(2).all(|w| w[0] < w[1]));
    assert!(ids.iter().all(|id| *id < 1 << 53 && (id >> 6) & 63 == 63));
    let top: i64 = client.one(
        "SELECT snowflake_compose(exhausted_at - interval '1 millisecond', 63, 63) FROM snowflake_status()",
    );
    assert_eq!(top, (1 << 53) - 1);
    let back: i64 = client.one_with("SELECT snowflake_parse(snowflake_format($1))", &[&top]);
    assert_eq!(back, top);
    for (bad, code) in [
        ("SELECT snowflake_decode(9007199254740992)", "22023"),
        ("SELECT snowflake_timestamp(9223372036854775807)", "22023"),
        ("SELECT snowflake_format(9007199254740992)", "22023"),
        (
            "SELECT snowflake_compose(exhausted_at) FROM snowflake_status()",
            "22008",
        ),
        ("SELECT snowflake_compose(now(), 64)", "22003"),
    ] {
        assert_eq!(sqlstate(client.query_one(bad, &[])), code, "{bad}");
    }
}

/// A 53-bit layout whose 32 time bits of 1 ms ran out 49.7 days after the default epoch
/// (2024-02-19): the server starts (with a WARNING), and every call fails with 2200H: no id
/// at or above 2^53 is ever issued.
#[test]
fn a_53_bit_layout_that_has_run_out_issues_nothing() {
    let cluster = Cluster::start(
        "web53end",
        &[
            PRELOAD,
            "idgen.id_bits = 53",
            "idgen.worker_bits = 10",
            "idgen.sequence_bits = 11",
            "idgen.worker_id = 1",
        ],
    );
    cluster.create_db_with_idgen("postgres");
    let mut client = cluster.connect("postgres");
    let (time_bits, past): (i32, bool) = {
        let row = client
            .query_one(
                "SELECT time_bits, exhausted_at < now() FROM snowflake_status()",
                &[],
            )
            .unwrap();
        (row.get(0), row.get(1))
    };
    assert_eq!((time_bits, past), (32, true));
    for statement in ["SELECT snowflake_nextval()", "SELECT snowflake_nextvals(2)"] {
        assert_eq!(
            sqlstate(client.query(statement, &[])),
            "2200H",
            "{statement}"
        );
    }
    let last: Option<i64> = client.one("SELECT last_id FROM snowflake_status()");
    assert_eq!(last, None);
}

/// Twitter's 10 worker bits as 5 datacenter bits and 5 machine bits: worker id
/// `datacenter << 5 | machine`. With `idgen.sequence_jitter = 100`, the first id of each tick
/// starts at a random sequence below 100 (Leaf); reloaded to 0, it starts at 0 again.
#[test]
fn a_datacenter_machine_split_and_a_random_sequence_start() {
    let (datacenter, machine) = (3, 17);
    let cluster = Cluster::start(
        "dcsplit",
        &[
            PRELOAD,
            &format!("idgen.worker_id = {}", datacenter << 5 | machine),
            "idgen.sequence_jitter = 100",
        ],
    );
    cluster.create_db_with_idgen("postgres");
    let mut client = cluster.connect("postgres");
    let row = client
        .query_one(
            "SELECT worker_id >> 5, worker_id & 31 FROM snowflake_decode(snowflake_nextval())",
            &[],
        )
        .unwrap();
    assert_eq!(
        (row.get::<_, i32>(0), row.get::<_, i32>(1)),
        (datacenter, machine)
    );
    // The lowest id of datacenter 3 at a time, for range scans by datacenter.
    let low: i64 = client.one("SELECT snowflake_compose(now(), 3 << 5)");
    assert_eq!(((low >> 12) & 1023) >> 5, 3);

    let spaced = |client: &mut postgres::Client| -> Vec<i64> {
        (0..40)
            .map(|_| {
                thread::sleep(Duration::from_millis(3)); // each id opens a new tick
                client.one::<i64>("SELECT snowflake_nextval()") & 4095
            })
            .collect()
    };
    let sequences = spaced(&mut client);
    assert!(sequences.iter().all(|s| *s < 100), "{sequences:?}");
    let distinct: std::collections::HashSet<_> = sequences.iter().collect();
    assert!(distinct.len() >= 10, "not random: {sequences:?}");

    client
        .batch_execute("ALTER SYSTEM SET idgen.sequence_jitter = 0")
        .unwrap();
    client.batch_execute("SELECT pg_reload_conf()").unwrap();
    thread::sleep(Duration::from_millis(300));
    let mut client = cluster.connect("postgres");
    let sequences = spaced(&mut client);
    assert!(sequences.iter().all(|s| *s == 0), "{sequences:?}");
}

/// 20 s before the default layout runs out (2093-09-06 15:47:35.552 UTC), with unbounded drift:
/// batches, then single ids, use up every tick to the very last id, which is positive and
/// carries the largest tick; every further call fails with 2200H and moves nothing. Once the
/// clock itself passes the end, calls fail the same way.
#[test]
fn the_layout_runs_out_loudly_never_wrapping() {
    let end_ms = EPOCH_MS + (1i64 << 41);
    let mut cluster = Cluster::init(
        "exhaust",
        &[PRELOAD, "idgen.worker_id = 1", "idgen.max_drift_ms = -1"],
    );
    let clock = cluster.fake_clock();
    let real_ms = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64
    };
    clock.set_offset_secs((end_ms - 20_000 - real_ms()) as f64 / 1000.0);
    cluster.start_server();
    cluster.create_db_with_idgen("postgres");
    let mut client = cluster.connect("postgres");
    let at_end: bool =
        client.one("SELECT exhausted_at = '2093-09-06 15:47:35.552+00' FROM snowflake_status()");
    assert!(at_end);

    let mut last = 0i64;
    for (statement, limit) in [
        ("SELECT snowflake_nextvals(4096000) LIMIT 1", 100),
        ("SELECT snowflake_nextvals(4096) LIMIT 1", 2000),
        ("SELECT snowflake_nextval()", 5000),
    ] {
        let mut calls = 0;
        loop {
            match client.query_one(statement, &[]) {
                Ok(_) => {
                    last = client.one("SELECT snowflake_currval()");
                    assert!(last > 0);
                }
                Err(e) => {
                    let e = e.as_db_error().cloned().expect("a server error");
                    assert_eq!(e.code().code(), "2200H", "{e:?}");
                    assert!(e.message().contains("end of its time range"), "{e:?}");
                    break;
                }
            }
            calls += 1;
            assert!(calls < limit, "{statement} never ran out");
        }
    }
    let max_tick = (1i64 << 41) - 1;
    assert_eq!(
        last,
        max_tick << 22 | 1 << 12 | 4095,
        "the last id is not the layout's last"
    );
    let (currval, last_id): (i64, i64) = {
        let row = client
            .query_one(
                "SELECT snowflake_currval(), last_id FROM snowflake_status()",
                &[],
            )
            .unwrap();
        (row.get(0), row.get(1))
    };
    assert_eq!((currval, last_id), (last, last));

    clock.set_offset_secs((end_ms + 5_000 - real_ms()) as f64 / 1000.0);
    thread::sleep(FakeClock::PICKUP);
    let mut client = cluster.connect("postgres");
    let err = db_error(client.query_one("SELECT snowflake_nextval()", &[]));
    assert_eq!(err.code().code(), "2200H", "{err:?}");
    assert_eq!(
        sqlstate(client.query("SELECT snowflake_nextvals(2)", &[])),
        "2200H"
    );
}
