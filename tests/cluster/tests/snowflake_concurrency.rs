//! Pins the core Snowflake guarantee on a real server: 8 connections drawing concurrently, six
//! in one database and two in another, get 800,000 distinct ids; each connection's ids strictly
//! increase; every id carries the configured worker id. And `DISCARD ALL`/`SEQUENCES` forget
//! `snowflake_currval()` as they forget `currval` (a pooler's reset between clients).

use std::collections::HashSet;
use std::thread;

use idgen_cluster_tests::{sqlstate, twitter, Cluster, One};

const CONNECTIONS: usize = 8;
const IDS_PER_CONNECTION: usize = 100_000;
const BATCH: i32 = 100;
const WORKER_ID: i64 = 7;

#[test]
fn eight_connections_draw_distinct_increasing_ids() {
    let cluster = Cluster::with_idgen("concurrency", 7, &[]);
    cluster.create_db_with_idgen("second_db");

    let per_connection: Vec<Vec<i64>> = thread::scope(|s| {
        let handles: Vec<_> = (0..CONNECTIONS)
            .map(|i| {
                let cluster = &cluster;
                s.spawn(move || {
                    let db = if i < 6 { "postgres" } else { "second_db" };
                    let mut client = cluster.connect(db);
                    // Alternate the two ways of drawing: one nextval per row, and one batch.
                    let per_row = client
                        .prepare("SELECT g, snowflake_nextval() FROM generate_series(1, $1) g")
                        .unwrap();
                    let batch = client.prepare("SELECT snowflake_nextvals($1)").unwrap();
                    let mut ids = Vec::with_capacity(IDS_PER_CONNECTION);
                    for round in 0..IDS_PER_CONNECTION / BATCH as usize {
                        if round % 2 == 0 {
                            let mut rows: Vec<(i32, i64)> = client
                                .query(&per_row, &[&BATCH])
                                .unwrap()
                                .iter()
                                .map(|r| (r.get(0), r.get(1)))
                                .collect();
                            rows.sort_by_key(|(g, _)| *g);
                            ids.extend(rows.into_iter().map(|(_, id)| id));
                        } else {
                            ids.extend(
                                client
                                    .query(&batch, &[&BATCH])
                                    .unwrap()
                                    .iter()
                                    .map(|r| r.get::<_, i64>(0)),
                            );
                        }
                    }
                    ids
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });

    let mut all = HashSet::with_capacity(CONNECTIONS * IDS_PER_CONNECTION);
    for (i, ids) in per_connection.iter().enumerate() {
        assert_eq!(ids.len(), IDS_PER_CONNECTION);
        if let Some(w) = ids.windows(2).find(|w| w[0] >= w[1]) {
            panic!("connection {i}: {} was followed by {}", w[0], w[1]);
        }
        if let Some(id) = ids.iter().find(|id| twitter::worker_of(**id) != WORKER_ID) {
            panic!(
                "connection {i}: id {id} has worker {}",
                twitter::worker_of(*id)
            );
        }
        all.extend(ids.iter().copied());
    }
    assert_eq!(all.len(), CONNECTIONS * IDS_PER_CONNECTION, "duplicate ids");

    // The generator's last id is the largest issued, seen from either database.
    let max = *all.iter().max().unwrap();
    let last: i64 = cluster
        .connect("second_db")
        .one("SELECT last_id FROM snowflake_status()");
    assert_eq!(last, max);
    // And the server decodes its ids to the same worker id.
    let worker: i32 = cluster
        .connect("postgres")
        .one_with("SELECT worker_id FROM snowflake_decode($1)", &[&max]);
    assert_eq!(worker as i64, WORKER_ID);
    println!(
        "{} ids drawn by {CONNECTIONS} connections, {} distinct",
        CONNECTIONS * IDS_PER_CONNECTION,
        all.len()
    );
}

/// `DISCARD ALL` (pgbouncer's reset query in session mode) and `DISCARD SEQUENCES` forget
/// `snowflake_currval()` as they forget a sequence's `currval`: the next client of a pooled
/// connection gets 55000, never the previous client's id.
#[test]
fn discard_forgets_snowflake_currval_as_it_forgets_currval() {
    let cluster = Cluster::with_idgen("discard", WORKER_ID as u32, &[]);
    let mut c = cluster.connect("postgres");
    c.batch_execute("CREATE SEQUENCE s").unwrap();
    for discard in ["DISCARD ALL", "DISCARD SEQUENCES"] {
        let id: i64 = c.one("SELECT snowflake_nextval()");
        c.batch_execute("SELECT nextval('s')").unwrap();
        assert_eq!(c.one::<i64>("SELECT snowflake_currval()"), id);
        c.batch_execute(discard).unwrap();
        assert_eq!(
            sqlstate(c.query_one("SELECT currval('s')", &[])),
            "55000",
            "currval after {discard}"
        );
        assert_eq!(
            sqlstate(c.query_one("SELECT snowflake_currval()", &[])),
            "55000",
            "snowflake_currval after {discard}"
        );
    }
    // DISCARD TEMP keeps both, as PostgreSQL's does.
    let id: i64 = c.one("SELECT snowflake_nextval()");
    c.batch_execute("DISCARD TEMP").unwrap();
    assert_eq!(c.one::<i64>("SELECT snowflake_currval()"), id);
}
