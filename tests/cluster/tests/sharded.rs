//! Many servers, one id space (DESIGN.md §2 "Several nodes, no coordination"): three
//! PostgreSQL shards with worker ids 1, 2, 3 and `idgen.segment_node_count = 3`, behind a
//! PL/Proxy front server whose `insert_order(customer, amount)` routes by `hashtext(customer)`
//! to a shard. On the shard the row gets `DEFAULT snowflake_nextval()` and an order number from
//! `segment_nextval('order_no')`. Six clients insert 300,000 orders through the front; the test
//! then reads every shard and asserts on the ids and order numbers.

use std::collections::HashSet;
use std::thread;
use std::time::Instant;

use idgen_cluster_tests::{column, twitter, Cluster, One};

const SHARDS: usize = 3;
const CLIENTS: usize = 6;
const ORDERS_PER_CLIENT: usize = 50_000;
const STEP: i64 = 1000;

/// Run after `CREATE EXTENSION idgen` has committed (the allocator works in transactions of
/// its own and cannot see an uncommitted extension).
const SHARD_SCHEMA: &str = "
-- Defaults are evaluated in column order: the clock is read just before and just after the id
-- is drawn, so the id was created within [before_at, after_at].
CREATE TABLE orders (
    before_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    id         bigint PRIMARY KEY DEFAULT snowflake_nextval(),
    after_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    order_no   bigint NOT NULL UNIQUE DEFAULT segment_nextval('order_no'),
    customer   text NOT NULL,
    amount     numeric NOT NULL
);
CREATE FUNCTION insert_order(customer text, amount numeric, OUT id bigint, OUT order_no bigint)
LANGUAGE sql AS $$
    INSERT INTO orders (customer, amount) VALUES (customer, amount) RETURNING id, order_no
$$;
SELECT segment_create('order_no', step => 1000);
";

/// One order as read back from its shard.
struct Order {
    shard: usize,
    id: i64,
    order_no: i64,
    before_us: i64,
    after_us: i64,
}

fn start_shard(index: usize) -> Cluster {
    let settings = [
        "shared_preload_libraries = 'idgen'".to_string(),
        format!("idgen.worker_id = {}", index + 1),
        "idgen.segment_node_count = 3".to_string(),
        format!("idgen.segment_node_index = {index}"),
    ];
    let settings: Vec<&str> = settings.iter().map(String::as_str).collect();
    let shard = Cluster::start(&format!("shard{index}"), &settings);
    shard.create_db_with_idgen("postgres");
    shard
        .connect("postgres")
        .batch_execute(SHARD_SCHEMA)
        .unwrap();
    shard
}

/// The front: PL/Proxy needs a power of two of partitions, so four partitions map to the three
/// shards (0, 1, 2, 0).
fn start_front(shards: &[Cluster]) -> Cluster {
    let front = Cluster::start("front", &[]);
    let partitions: Vec<String> = (0..4)
        .map(|p| {
            format!(
                "p{p} 'host=127.0.0.1 port={} dbname=postgres user=postgres'",
                shards[p % SHARDS].port()
            )
        })
        .collect();
    front
        .connect("postgres")
        .batch_execute(&format!(
            "CREATE EXTENSION plproxy;
             CREATE SERVER shards FOREIGN DATA WRAPPER plproxy OPTIONS ({});
             CREATE USER MAPPING FOR PUBLIC SERVER shards OPTIONS (user 'postgres');
             CREATE FUNCTION insert_order(customer text, amount numeric, OUT id bigint, OUT order_no bigint)
             LANGUAGE plproxy AS $$
                 CLUSTER 'shards';
                 RUN ON hashtext(customer);
             $$;",
            partitions.join(", ")
        ))
        .unwrap();
    front
}

#[test]
fn three_shards_behind_plproxy_issue_globally_distinct_ids_and_order_numbers() {
    let shards: Vec<Cluster> = (0..SHARDS).map(start_shard).collect();
    let front = start_front(&shards);

    let started = Instant::now();
    let returned: Vec<(i64, i64)> = thread::scope(|s| {
        let handles: Vec<_> = (0..CLIENTS)
            .map(|c| {
                let front = &front;
                s.spawn(move || {
                    let mut client = front.connect("postgres");
                    let insert = client
                        .prepare("SELECT id, order_no FROM insert_order($1, $2::int4 / 100.0)")
                        .unwrap();
                    (0..ORDERS_PER_CLIENT)
                        .map(|k| {
                            let row = client
                                .query_one(
                                    &insert,
                                    &[&format!("customer-{c}-{k}"), &(k as i32 % 10_000)],
                                )
                                .unwrap();
                            (row.get(0), row.get(1))
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    let took = started.elapsed();

    let mut orders = Vec::new();
    for (shard, cluster) in shards.iter().enumerate() {
        for row in cluster
            .connect("postgres")
            .query(
                "SELECT id, order_no, (extract(epoch FROM before_at) * 1000000)::bigint, \
                 (extract(epoch FROM after_at) * 1000000)::bigint FROM orders",
                &[],
            )
            .unwrap()
        {
            orders.push(Order {
                shard,
                id: row.get(0),
                order_no: row.get(1),
                before_us: row.get(2),
                after_us: row.get(3),
            });
        }
    }
    let total = CLIENTS * ORDERS_PER_CLIENT;
    assert_eq!(returned.len(), total);
    assert_eq!(orders.len(), total, "rows on the shards");
    let ids: HashSet<i64> = orders.iter().map(|o| o.id).collect();
    let order_nos: HashSet<i64> = orders.iter().map(|o| o.order_no).collect();
    assert_eq!(ids.len(), total, "snowflake ids repeated across shards");
    assert_eq!(
        order_nos.len(),
        total,
        "order numbers repeated across shards"
    );
    // What the front returned is exactly what the shards stored.
    assert!(returned
        .iter()
        .all(|(id, no)| ids.contains(id) && order_nos.contains(no)));
    for o in &orders {
        assert_eq!(
            twitter::worker_of(o.id),
            o.shard as i64 + 1,
            "id {} on shard {}",
            o.id,
            o.shard
        );
        assert_eq!(
            ((o.order_no - 1) / STEP) % SHARDS as i64,
            o.shard as i64,
            "order number {} is not in a block of shard {}",
            o.order_no,
            o.shard
        );
    }
    let per_shard: Vec<usize> = (0..SHARDS)
        .map(|s| orders.iter().filter(|o| o.shard == s).count())
        .collect();
    assert!(
        per_shard.iter().all(|n| *n > total / 10),
        "routing: {per_shard:?}"
    );

    // Each id's millisecond lies within the clock readings around it (no drift at this rate).
    const EPOCH_US: i64 = 1_704_067_200_000_000;
    for o in &orders {
        let id_us = (o.id >> 22) * 1000 + EPOCH_US;
        assert!(
            o.before_us / 1000 * 1000 <= id_us && id_us <= o.after_us,
            "id {} stamped outside [{}, {}] us",
            o.id,
            o.before_us,
            o.after_us
        );
    }

    // Cross-shard order by time. Rate: of the neighbours in insert order (by after_at) that are
    // on different shards, how many have their ids the other way round. Ids carry milliseconds,
    // so orders of one millisecond on different shards order by worker id instead.
    orders.sort_by_key(|o| o.after_us);
    let mut pairs = 0u64;
    let mut inversions = 0u64;
    let mut same_ms_inversions = 0u64;
    let mut widest_us = 0i64;
    for w in orders.windows(2) {
        if w[0].shard == w[1].shard {
            continue;
        }
        pairs += 1;
        if w[0].id > w[1].id {
            inversions += 1;
            if w[0].id >> 22 == w[1].id >> 22 {
                same_ms_inversions += 1;
            }
            widest_us = widest_us.max(w[1].after_us - w[0].after_us);
        }
    }
    // Bound: an order created certainly more than a millisecond (the tick) plus the clock skew
    // (one machine, one clock: 0) before another never has the larger id. Checked over all
    // pairs: in id order, no later (larger) id may have been created wholly before an earlier
    // one's creation began, less a millisecond.
    orders.sort_by_key(|o| o.id);
    let mut latest_start = i64::MIN;
    for o in &orders {
        assert!(
            o.after_us + 1000 >= latest_start,
            "id {} was created more than a millisecond before a smaller id",
            o.id
        );
        latest_start = latest_start.max(o.before_us);
    }
    println!(
        "sharded: {total} orders through PL/Proxy by {CLIENTS} clients in {took:?} \
         (per shard {per_shard:?}); {} distinct ids, {} distinct order numbers; \
         {inversions} of {pairs} cross-shard neighbours inverted ({:.3}%; {same_ms_inversions} \
         of them stamped with the same millisecond, so ordered by worker id), widest {widest_us} us \
         apart; no id created more than 1 ms before a smaller one",
        ids.len(),
        order_nos.len(),
        100.0 * inversions as f64 / pairs.max(1) as f64
    );
    assert!(pairs > 1000);
}

/// One server of three: a segment's numbers come only from this server's blocks, also after a
/// `segment_setval`; the step, which is the block size all servers share, cannot be changed
/// (55000) while the description can.
#[test]
fn a_server_of_three_takes_only_its_own_blocks() {
    let server = Cluster::start(
        "nodeof3",
        &[
            "shared_preload_libraries = 'idgen'",
            "idgen.segment_node_count = 3",
            "idgen.segment_node_index = 1",
        ],
    );
    server.create_db_with_idgen("postgres");
    let mut client = server.connect("postgres");
    client
        .batch_execute("SELECT segment_create('invoice', step => 100)")
        .unwrap();
    let numbers: Vec<i64> = column(&mut client, "SELECT segment_nextvals('invoice', 250)");
    let expected: Vec<i64> = (101..=200).chain(401..=500).chain(701..=750).collect();
    assert_eq!(numbers, expected);
    // setval into another server's block: the next number is the start of the next own block.
    client
        .batch_execute("SELECT segment_setval('invoice', 1250)")
        .unwrap();
    let next: i64 = client.one("SELECT segment_nextval('invoice')");
    assert_eq!(next, 1301);
    let err = idgen_cluster_tests::db_error(
        client.batch_execute("SELECT segment_alter('invoice', step => 200)"),
    );
    assert_eq!(err.code().code(), "55000", "{err:?}");
    assert!(
        err.message().contains("idgen.segment_node_count"),
        "{err:?}"
    );
    // The same step, an unknown segment, and the description behave as on one server.
    client
        .batch_execute(
            "SELECT segment_alter('invoice', step => 100, description => 'invoices of node 1')",
        )
        .unwrap();
    assert_eq!(
        idgen_cluster_tests::sqlstate(
            client.batch_execute("SELECT segment_alter('nosuch', step => 200)")
        ),
        "42704"
    );
    let step: i32 = client.one("SELECT step FROM idgen_segment WHERE name = 'invoice'");
    assert_eq!(step, 100);
}
