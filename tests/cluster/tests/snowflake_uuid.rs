//! `snowflake_uuid()` keeps the Snowflake generator's guarantees as a `uuid`, tested as the
//! bigint ids are: eight connections in two databases draw distinct values, each connection's
//! strictly increasing and every one a valid RFC 9562 version 7 with the server's worker id;
//! values drawn one after another on different backends increase; after kill -9 of the
//! postmaster and after a restart with the clock 30 s behind, every value sorts above every
//! value before; two servers with distinct worker ids never draw the same value. And bad input
//! gets a specific SQLSTATE.
//!
//! Values are compared as text: PostgreSQL prints a uuid as fixed-width lowercase hex with
//! hyphens at fixed places, so text order is its byte order, which is `uuid`'s order. The
//! version and variant are read from the text too, independently of the extension (on 17 and
//! later `uuid_extract_version()` is asked as well, on 18 `uuid_extract_timestamp()`).

use std::collections::HashSet;
use std::thread;
use std::time::{Duration, Instant};

use idgen_cluster_tests::{push_generator_ahead, sqlstate, twitter, Cluster, FakeClock, One};

const WORKER_ID: i64 = 7;

/// The parts of a uuid in the default layout (41/10/12, 1 ms), read from its text: (Unix ms,
/// version, variant bits, sequence, worker id).
fn parts(text: &str) -> (i64, u32, u32, i64, i64) {
    let hex: String = text.chars().filter(|c| *c != '-').collect();
    assert_eq!(hex.len(), 32, "{text}");
    let v = u128::from_str_radix(&hex, 16).unwrap();
    let ms = (v >> 80) as i64;
    let version = ((v >> 76) & 0xf) as u32;
    let variant = ((v >> 62) & 0x3) as u32;
    let sequence = ((v >> 64) & 0xfff) as i64;
    let worker = ((v >> 52) & 0x3ff) as i64;
    (ms, version, variant, sequence, worker)
}

/// Asserts `text` is version 7 with RFC 9562's variant and carries `worker`.
fn assert_v7(text: &str, worker: i64) {
    let (_, version, variant, _, w) = parts(text);
    assert_eq!((version, variant), (7, 0b10), "{text} is not version 7");
    assert_eq!(w, worker, "{text} carries worker {w}");
}

fn assert_increasing(label: &str, values: &[String]) {
    if let Some(w) = values.windows(2).find(|w| w[0] >= w[1]) {
        panic!("{label}: {} was followed by {}", w[0], w[1]);
    }
}

/// `n` uuids from one statement, in the order the rows were made, with the bigint ids they
/// convert to.
fn draw(client: &mut postgres::Client, n: i32) -> Vec<(String, i64)> {
    let mut rows: Vec<(i32, String, i64)> = client
        .query(
            "SELECT g, u::text, snowflake_uuid_to_id(u)
               FROM (SELECT g, snowflake_uuid() AS u FROM generate_series(1, $1) g) s",
            &[&n],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    rows.sort_by_key(|r| r.0);
    rows.into_iter().map(|(_, u, id)| (u, id)).collect()
}

#[test]
fn eight_connections_draw_distinct_increasing_uuids() {
    const CONNECTIONS: usize = 8;
    const ROUNDS: usize = 100;
    const BATCH: i32 = 200;
    let cluster = Cluster::with_idgen("uuid8", WORKER_ID as u32, &[]);
    cluster.create_db_with_idgen("second_db");

    // Each connection alternates uuids and bigint ids: both come from one generator, so the
    // bigint form of every uuid is distinct from every bigint id drawn alongside.
    let per_connection: Vec<(Vec<(String, i64)>, Vec<i64>)> = thread::scope(|s| {
        let handles: Vec<_> = (0..CONNECTIONS)
            .map(|i| {
                let cluster = &cluster;
                s.spawn(move || {
                    let db = if i < 6 { "postgres" } else { "second_db" };
                    let mut client = cluster.connect(db);
                    let (mut uuids, mut ids) = (Vec::new(), Vec::new());
                    for round in 0..ROUNDS {
                        if round % 2 == 0 {
                            uuids.extend(draw(&mut client, BATCH));
                        } else {
                            ids.extend(
                                client
                                    .query("SELECT snowflake_nextvals($1)", &[&BATCH])
                                    .unwrap()
                                    .iter()
                                    .map(|r| r.get::<_, i64>(0)),
                            );
                        }
                    }
                    (uuids, ids)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });

    let mut texts = HashSet::new();
    let mut numbers = HashSet::new();
    let mut pairs = Vec::new();
    for (i, (uuids, ids)) in per_connection.iter().enumerate() {
        let label = format!("connection {i}");
        let t: Vec<String> = uuids.iter().map(|(u, _)| u.clone()).collect();
        assert_increasing(&label, &t);
        for (u, id) in uuids {
            assert_v7(u, WORKER_ID);
            assert!(texts.insert(u.clone()), "{label}: {u} drawn twice");
            assert!(numbers.insert(*id), "{label}: {u}'s id {id} drawn twice");
            // The id has the uuid's worker, and its tick starts at the uuid's millisecond.
            let (ms, _, _, sequence, worker) = parts(u);
            assert_eq!((twitter::worker_of(*id), *id & 0xfff), (worker, sequence));
            assert_eq!(twitter::tick_of(*id) + 1_704_067_200_000, ms, "{u} vs {id}");
        }
        for id in ids {
            assert!(numbers.insert(*id), "{label}: id {id} drawn twice");
        }
        pairs.extend(uuids.iter().cloned());
    }
    assert_eq!(texts.len(), CONNECTIONS * ROUNDS / 2 * BATCH as usize);
    // One order for both forms: sorted as uuids, the ids sort too.
    pairs.sort();
    let ids: Vec<i64> = pairs.iter().map(|(_, id)| *id).collect();
    if let Some(w) = ids.windows(2).find(|w| w[0] >= w[1]) {
        panic!(
            "uuid order and id order differ at ids {} and {}",
            w[0], w[1]
        );
    }

    // Version and time as PostgreSQL reads them: uuid_extract_version() from 17 on, and
    // uuid_extract_timestamp() of a version 7 from 18 on (17 reads version 1 only: NULL).
    let mut client = cluster.connect("postgres");
    let version: i32 = client.one("SELECT current_setting('server_version_num')::int");
    if version >= 170000 {
        let bad: i64 = client.one_with(
            "SELECT count(*)
               FROM (SELECT snowflake_uuid() u FROM generate_series(1, 10000)) s,
                    LATERAL snowflake_uuid_decode(u) d
              WHERE uuid_extract_version(u) IS DISTINCT FROM 7
                 OR ($1 AND uuid_extract_timestamp(u) IS DISTINCT FROM d.ts)",
            &[&(version >= 180000)],
        );
        assert_eq!(
            bad, 0,
            "values PostgreSQL does not read as version 7 at their tick"
        );
    }
}

/// Strictly increasing across backends: each value is drawn after the one before it returned,
/// on another backend (three, two databases), and sorts above it.
#[test]
fn values_drawn_one_after_another_on_different_backends_increase() {
    let cluster = Cluster::with_idgen("uuidseq", WORKER_ID as u32, &[]);
    cluster.create_db_with_idgen("other");
    let mut clients = [
        cluster.connect("postgres"),
        cluster.connect("postgres"),
        cluster.connect("other"),
    ];
    let mut last = String::new();
    for i in 0..3000 {
        let u: String = clients[i % 3].one("SELECT snowflake_uuid()::text");
        assert!(u > last, "{u} after {last}");
        last = u;
    }
    // snowflake_uuid() leaves snowflake_currval() as it was.
    let c = &mut clients[0];
    let id: i64 = c.one("SELECT snowflake_nextval()");
    let _: String = c.one("SELECT snowflake_uuid()::text");
    assert_eq!(c.one::<i64>("SELECT snowflake_currval()"), id);
}

#[test]
fn kill_9_of_the_postmaster_never_repeats_a_uuid() {
    let cluster = Cluster::with_idgen("uuidkill9", 8, &["idgen.max_drift_ms = -1"]);
    let mut pusher = cluster.connect("postgres");
    // The generator far ahead of the clock: a restart that forgot it would repeat values.
    push_generator_ahead(&mut pusher, 30, 4_096_000);
    let (pushed, _) = draw(&mut pusher, 1).pop().unwrap();
    drop(pusher);
    let before: Vec<String> = thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(|| {
                    let mut client = cluster.connect("postgres");
                    let mut values = Vec::new();
                    while let Ok(rows) = client.query(
                        "SELECT snowflake_uuid()::text FROM generate_series(1, 100)",
                        &[],
                    ) {
                        values.extend(rows.iter().map(|r| r.get::<_, String>(0)));
                    }
                    values
                })
            })
            .collect();
        thread::sleep(Duration::from_millis(1500));
        let killed = std::process::Command::new("kill")
            .args(["-9", &cluster.postmaster_pid().to_string()])
            .status()
            .unwrap();
        assert!(killed.success());
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    assert!(
        before.len() > 1000,
        "only {} before the crash",
        before.len()
    );
    let max_before = before.iter().max().unwrap().max(&pushed).clone();

    let deadline = Instant::now() + Duration::from_secs(60);
    while !cluster.pg_ctl_start().status.success() {
        assert!(Instant::now() < deadline, "no restart:\n{}", cluster.log());
        thread::sleep(Duration::from_millis(500));
    }
    let after = draw(&mut cluster.connect("postgres"), 10_000);
    let min_after = after.iter().map(|(u, _)| u).min().unwrap();
    assert!(
        *min_after > max_before,
        "after the crash {min_after} <= {max_before} before it"
    );
}

#[test]
fn after_a_restart_with_the_clock_behind_every_uuid_sorts_above() {
    let mut cluster = Cluster::init(
        "uuidclock",
        &[
            "shared_preload_libraries = 'idgen'",
            "idgen.worker_id = 4",
            "idgen.max_drift_ms = 120000",
        ],
    );
    let clock = cluster.fake_clock();
    cluster.start_server();
    cluster.create_db_with_idgen("postgres");
    let before = draw(&mut cluster.connect("postgres"), 5_000);
    let before: Vec<String> = before.into_iter().map(|(u, _)| u).collect();
    assert_increasing("before", &before);

    cluster.stop("fast");
    clock.set_offset_secs(-30.0);
    cluster.start_server();
    thread::sleep(FakeClock::PICKUP);
    let mut client = cluster.connect("postgres");
    // The server's clock is behind now: as an independent witness, its clock_timestamp() is
    // below the time in the last value before the restart.
    let now_ms: i64 = client.one("SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint");
    let last = before.last().unwrap();
    assert!(now_ms + 20_000 < parts(last).0, "the clock did not go back");
    let after: Vec<String> = draw(&mut client, 5_000)
        .into_iter()
        .map(|(u, _)| u)
        .collect();
    assert_increasing("after", &after);
    assert!(
        after[0] > *last,
        "after the clock went back {} sorts below {last}",
        after[0]
    );
}

#[test]
fn two_servers_with_distinct_worker_ids_never_draw_the_same_uuid() {
    let one = Cluster::with_idgen("uuidw1", 1, &[]);
    let two = Cluster::with_idgen("uuidw2", 2, &[]);
    let drawn: Vec<Vec<(String, i64)>> = thread::scope(|s| {
        [&one, &two]
            .map(|c| s.spawn(move || draw(&mut c.connect("postgres"), 50_000)))
            .into_iter()
            .map(|h| h.join().unwrap())
            .collect()
    });
    let mut all = HashSet::new();
    for (worker, values) in [(1, &drawn[0]), (2, &drawn[1])] {
        for (u, _) in values {
            assert_v7(u, worker);
            assert!(all.insert(u.clone()), "{u} drawn twice");
        }
    }
    // Same milliseconds on both: what keeps them apart is the worker id, not the time.
    let ms = |v: &Vec<(String, i64)>| v.iter().map(|(u, _)| parts(u).0).collect::<HashSet<_>>();
    assert!(
        ms(&drawn[0]).intersection(&ms(&drawn[1])).count() > 0,
        "the two servers never drew in the same millisecond: the test shows nothing"
    );
}

#[test]
fn bad_input_gets_a_specific_sqlstate_and_conversions_round_trip() {
    let cluster = Cluster::with_idgen("uuidbad", 3, &[]);
    let mut c = cluster.connect("postgres");
    let cases = [
        // Version 4.
        (
            "SELECT * FROM snowflake_uuid_decode('0190a1b2-c3d4-4e5f-8a6b-7c8d9e0f1a2b')",
            "22023",
        ),
        (
            "SELECT snowflake_uuid_to_id('0190a1b2-c3d4-4e5f-8a6b-7c8d9e0f1a2b')",
            "22023",
        ),
        // Version 7 with the NCS variant (0xxx).
        (
            "SELECT snowflake_uuid_to_id('0190a1b2-c3d4-7e5f-4a6b-7c8d9e0f1a2b')",
            "22023",
        ),
        // Version 7 from 1970, before idgen.epoch.
        (
            "SELECT snowflake_uuid_to_id('00000000-0001-7000-8000-000000000000')",
            "22023",
        ),
        (
            "SELECT * FROM snowflake_uuid_decode('00000000-0000-0000-0000-000000000000')",
            "22023",
        ),
        ("SELECT snowflake_uuid_from_id(-1)", "22023"),
    ];
    for (sql, code) in cases {
        assert_eq!(sqlstate(c.query_one(sql, &[])), code, "{sql}");
    }
    // A read-only transaction refuses as for bigint ids, naming the function.
    let e = c
        .batch_execute("BEGIN READ ONLY; SELECT snowflake_uuid();")
        .unwrap_err();
    assert_eq!(e.code().unwrap().code(), "25006");
    let message = e.as_db_error().unwrap().message();
    assert!(message.contains("snowflake_uuid()"), "{message}");
    c.batch_execute("ROLLBACK").unwrap();
    // NULL in, NULL out (strict).
    assert!(c
        .one::<Option<i64>>("SELECT snowflake_uuid_to_id(NULL)")
        .is_none());

    // to_id(from_id(id)) = id; from_id(to_id(u)) = u with the random bits cleared.
    let (u, id) = draw(&mut c, 1).pop().unwrap();
    let canonical: String = c.one_with("SELECT snowflake_uuid_from_id($1)::text", &[&id]);
    // Everything but the 52 random bits (the last hex digit of the fourth group, the fifth).
    assert_eq!(&canonical[..22], &u[..22], "{canonical} vs {u}");
    assert_eq!(&canonical[22..], "0-000000000000", "{canonical}");
    assert_eq!(parts(&canonical), parts(&u));
    let back: i64 = c.one_with(
        "SELECT snowflake_uuid_to_id(snowflake_uuid_from_id($1))",
        &[&id],
    );
    assert_eq!(back, id);
    let decoded: (i32, i32) = {
        let row = c
            .query_one(
                "SELECT worker_id, sequence FROM snowflake_uuid_decode($1::text::uuid)",
                &[&u],
            )
            .unwrap();
        (row.get(0), row.get(1))
    };
    assert_eq!((decoded.0 as i64, decoded.1 as i64), (3, id & 0xfff));
}
