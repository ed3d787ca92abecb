//! Global segments (DESIGN.md §6) against real servers: a segment created once in
//! the registry is drawn by every node by name, from ranges each node's allocator takes in the
//! registry with one committed UPDATE; nothing is repeated when the registry restarts or fails
//! over to its synchronous standby mid-run; and the rules of a global segment on a node.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

use idgen_cluster_tests::registry::{held_worker, node, registry, FAST};
use idgen_cluster_tests::{sqlstate, Cluster, One, STANDBY_NAME};

/// Settings of a node drawing from global segments: callers wait out a registry restart.
const WAITING: &str = "idgen.segment_wait_timeout = 60s";

/// `clients` connections per node draw numbers of segment `name` (100 per statement) until
/// `stop`, while `during` runs; returns every number drawn and the failures seen.
fn draw_while(
    nodes: &[&Cluster],
    clients: usize,
    name: &str,
    during: impl FnOnce(),
) -> (Vec<i64>, Vec<String>) {
    let stop = AtomicBool::new(false);
    thread::scope(|s| {
        let handles: Vec<_> = nodes
            .iter()
            .flat_map(|n| (0..clients).map(move |_| *n))
            .map(|n| {
                let stop = &stop;
                s.spawn(move || {
                    let mut client = n.connect("postgres");
                    let (mut drawn, mut failures) = (Vec::new(), Vec::new());
                    let sql = format!("SELECT segment_nextvals('{name}', 100)");
                    while !stop.load(Ordering::Relaxed) {
                        match client.query(&sql, &[]) {
                            Ok(rows) => drawn.extend(rows.iter().map(|r| r.get::<_, i64>(0))),
                            Err(e) => {
                                failures.push(e.to_string());
                                thread::sleep(Duration::from_millis(100));
                                if client.is_closed() {
                                    client = n.connect("postgres");
                                }
                            }
                        }
                    }
                    (drawn, failures)
                })
            })
            .collect();
        during();
        stop.store(true, Ordering::Relaxed);
        let mut all = (Vec::new(), Vec::new());
        for h in handles {
            let (d, f) = h.join().unwrap();
            all.0.extend(d);
            all.1.extend(f);
        }
        all
    })
}

fn assert_distinct(numbers: &[i64]) {
    let set: HashSet<_> = numbers.iter().collect();
    assert_eq!(
        set.len(),
        numbers.len(),
        "{} repeated numbers",
        numbers.len() - set.len()
    );
}

/// Three nodes by eight clients draw global segment `orders` (created by one node; another
/// node's declaration with another step keeps the registry's step of 100) while the registry
/// stops for 2 s and starts again (after which it hands out no range for half a longest lease):
/// every draw succeeds (callers wait, `idgen.segment_wait_timeout`), over 10,000 numbers from
/// the start, none twice, all at or below the registry's mark, and every node knows `orders`
/// as global. A registry restart must never cost a repeated number or a failed caller.
#[test]
fn three_nodes_by_eight_clients_draw_one_global_segment_across_a_registry_restart_repeating_nothing(
) {
    let reg = registry("reg_global");
    let nodes: Vec<Cluster> = (0..3)
        .map(|i| node(&reg, &format!("global{i}"), &[WAITING]))
        .collect();
    nodes[0]
        .connect("postgres")
        .batch_execute(
            "SELECT segment_create('orders', start => 1, step => 100, scope => 'global')",
        )
        .unwrap();
    // Another node declaring it again keeps the registry's segment (its step stays 100).
    nodes[1]
        .connect("postgres")
        .batch_execute("SELECT segment_create('orders', start => 1, step => 7, scope => 'global')")
        .unwrap();
    let refs: Vec<&Cluster> = nodes.iter().collect();
    let (drawn, failures) = draw_while(&refs, 8, "orders", || {
        thread::sleep(Duration::from_secs(2));
        reg.stop("fast");
        thread::sleep(Duration::from_secs(2));
        reg.start_server();
        thread::sleep(Duration::from_secs(3));
    });
    assert!(
        failures.is_empty(),
        "{:?}",
        &failures[..failures.len().min(5)]
    );
    assert!(drawn.len() > 10_000, "only {} numbers", drawn.len());
    assert_distinct(&drawn);
    assert_eq!(
        *drawn.iter().min().unwrap(),
        1,
        "the first number is the start"
    );
    let mut r = reg.connect("postgres");
    let (mark, step): (i64, i32) = {
        let row = r
            .query_one(
                "SELECT max_id, step FROM idgen_registry_segment WHERE name = 'orders'",
                &[],
            )
            .unwrap();
        (row.get(0), row.get(1))
    };
    assert_eq!(step, 100);
    assert!(mark >= *drawn.iter().max().unwrap());
    // Every node drew from it, the two that never created it included.
    for n in &nodes {
        let scope: String = n
            .connect("postgres")
            .one("SELECT scope FROM idgen_segment WHERE name = 'orders'");
        assert_eq!(scope, "global");
    }
}

/// A global segment with per-backend blocks: each node's cache is its own setting
/// (a column of its local catalog), blocks are cut from the ranges each node takes in the
/// registry, and two nodes by four clients repeat nothing.
#[test]
fn global_segment_with_backend_blocks_on_two_nodes_repeats_nothing() {
    let reg = registry("reg_global_blocks");
    let nodes: Vec<Cluster> = (0..2)
        .map(|i| node(&reg, &format!("gblocks{i}"), &[WAITING]))
        .collect();
    nodes[0]
        .connect("postgres")
        .batch_execute(
            "SELECT segment_create('orders', step => 100, scope => 'global', cache => 7)",
        )
        .unwrap();
    let mut second = nodes[1].connect("postgres");
    second
        .batch_execute(
            "SELECT segment_create('orders', scope => 'global', cache => 0); \
             SELECT segment_nextval('orders')",
        )
        .unwrap();
    let caches: Vec<i32> = nodes
        .iter()
        .map(|n| {
            n.connect("postgres")
                .one("SELECT cache FROM segment_status() WHERE name = 'orders'")
        })
        .collect();
    assert_eq!(caches, [7, 0]);
    let refs: Vec<&Cluster> = nodes.iter().collect();
    let (drawn, failures) = draw_while(&refs, 4, "orders", || {
        thread::sleep(Duration::from_secs(3));
    });
    assert!(
        failures.is_empty(),
        "{:?}",
        &failures[..failures.len().min(5)]
    );
    assert!(drawn.len() > 1_000, "only {} numbers", drawn.len());
    assert_distinct(&drawn);
}

/// A registry with a synchronous standby fails over (primary stopped `immediate`, standby
/// promoted: a new timeline, so a new epoch with its wait) while two nodes, reaching it by a
/// two-host conninfo, draw global segment `invoices` and Snowflake ids: no segment draw fails,
/// no number and no id repeats, and the promoted registry's mark covers every number drawn. A
/// failover to a synchronous standby loses no acknowledged commit, and the nodes need no
/// operator for it.
#[test]
fn a_registry_failover_to_its_synchronous_standby_mid_run_repeats_no_number_and_no_id() {
    let primary = registry("reg_ha_primary");
    let standby = Cluster::standby_of(&primary, "reg_ha_standby", &[]);
    primary.append_settings(&[&format!("synchronous_standby_names = '{STANDBY_NAME}'")]);
    primary
        .connect("postgres")
        .batch_execute("SELECT pg_reload_conf()")
        .unwrap();
    let conninfo = format!(
        "idgen.registry = 'host=127.0.0.1,127.0.0.1 port={},{} dbname=postgres user=postgres target_session_attrs=read-write connect_timeout=2'",
        primary.port(),
        standby.port()
    );
    let nodes: Vec<Cluster> = (0..2)
        .map(|i| {
            let mut settings = vec![conninfo.as_str(), WAITING, "idgen.worker_id = auto"];
            settings.extend(FAST);
            // The registry's own setting comes from node(); this one, later, wins.
            node(&primary, &format!("ha{i}"), &settings)
        })
        .collect();
    for n in &nodes {
        held_worker(n, Duration::from_secs(20));
    }
    nodes[0]
        .connect("postgres")
        .batch_execute("SELECT segment_create('invoices', step => 50, scope => 'global')")
        .unwrap();
    let ids_stop = AtomicBool::new(false);
    let refs: Vec<&Cluster> = nodes.iter().collect();
    let (ids, (drawn, failures)) = thread::scope(|s| {
        let id_threads: Vec<_> = nodes
            .iter()
            .map(|n| {
                let stop = &ids_stop;
                s.spawn(move || {
                    let mut client = n.connect("postgres");
                    let mut ids = Vec::new();
                    while !stop.load(Ordering::Relaxed) {
                        // Fenced while the registry fails over (55000) is allowed; a repeat not.
                        if let Ok(rows) = client.query(
                            "SELECT snowflake_nextval() FROM generate_series(1, 100)",
                            &[],
                        ) {
                            ids.extend(rows.iter().map(|r| r.get::<_, i64>(0)));
                        }
                    }
                    ids
                })
            })
            .collect();
        let segments = draw_while(&refs, 4, "invoices", || {
            thread::sleep(Duration::from_secs(2));
            primary.stop("immediate");
            standby.promote();
            thread::sleep(Duration::from_secs(4));
        });
        ids_stop.store(true, Ordering::Relaxed);
        let ids: Vec<i64> = id_threads
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect();
        (ids, segments)
    });
    assert!(
        failures.is_empty(),
        "{:?}",
        &failures[..failures.len().min(5)]
    );
    assert!(
        drawn.len() > 1000 && ids.len() > 1000,
        "{} numbers, {} ids",
        drawn.len(),
        ids.len()
    );
    assert_distinct(&drawn);
    assert_distinct(&ids);
    // The promoted registry carries every range and lease the old one confirmed.
    let mark: i64 = standby
        .connect("postgres")
        .one("SELECT max_id FROM idgen_registry_segment WHERE name = 'invoices'");
    assert!(mark >= *drawn.iter().max().unwrap());
}

/// The rules of a global segment on a node, each with its SQLSTATE: a local and a global
/// segment cannot share a name (42710), the scope must be known (22023, 22004), the mark and
/// step are the registry's (0A000), an unknown name is 42704; a refused create leaves nothing
/// in the registry; dropping forgets it on the node only (drawing it again continues above);
/// and the registry server itself, which has no registry, cannot create one (55000).
#[test]
fn a_global_segment_on_a_node_follows_its_rules() {
    let reg = registry("reg_rules");
    let n = node(&reg, "rules", &[]);
    let mut c = n.connect("postgres");
    c.batch_execute("SELECT segment_create('local_one')")
        .unwrap();
    c.batch_execute("SELECT segment_create('global_one', scope => 'global')")
        .unwrap();
    for (sql, code) in [
        // A local and a global segment cannot share a name on a node.
        (
            "SELECT segment_create('local_one', scope => 'global')",
            "42710",
        ),
        ("SELECT segment_create('global_one')", "42710"),
        ("SELECT segment_create('x', scope => 'galactic')", "22023"),
        ("SELECT segment_create('x', scope => NULL)", "22004"),
        // Its mark and step are the registry's.
        ("SELECT segment_setval('global_one', 10)", "0A000"),
        ("SELECT segment_alter('global_one', step => 5)", "0A000"),
        // Unknown in the registry too.
        ("SELECT segment_nextval('nowhere')", "42704"),
    ] {
        assert_eq!(sqlstate(c.batch_execute(sql)), code, "{sql}");
    }
    // The refused create of a global 'local_one' made nothing in the registry.
    let in_registry: i64 = reg
        .connect("postgres")
        .one("SELECT count(*) FROM idgen_registry_segment WHERE name = 'local_one'");
    assert_eq!(in_registry, 0);
    // The description may change; drawing works; drop forgets it here only.
    c.batch_execute("SELECT segment_alter('global_one', description => 'shared')")
        .unwrap();
    assert_eq!(c.one::<i64>("SELECT segment_nextval('global_one')"), 1);
    c.batch_execute("SELECT segment_drop('global_one')")
        .unwrap();
    assert!(c.one::<i64>("SELECT segment_nextval('global_one')") > 1);
    // Global without a registry: the registry server itself has none.
    let mut r = reg.connect("postgres");
    assert_eq!(
        sqlstate(r.batch_execute("SELECT segment_create('g', scope => 'global')")),
        "55000"
    );
}

/// A global segment gives nothing back (DESIGN.md §6): a clean restart of the node holding
/// its only range leaves the registry's mark at the end of that range, and the node's next
/// number lies above it (a gap); another node's range lies above both.
#[test]
fn a_global_segment_gives_nothing_back_at_a_clean_restart() {
    let reg = registry("reg_giveback");
    let a = node(&reg, "giveback_a", &[]);
    let b = node(&reg, "giveback_b", &[]);
    let mark = || -> i64 {
        reg.connect("postgres")
            .one("SELECT max_id FROM idgen_registry_segment WHERE name = 'g'")
    };
    let next = |n: &Cluster| -> i64 { n.connect("postgres").one("SELECT segment_nextval('g')") };
    a.connect("postgres")
        .batch_execute("SELECT segment_create('g', scope => 'global')")
        .unwrap();
    let drawn: Vec<i64> = idgen_cluster_tests::column(
        &mut a.connect("postgres"),
        "SELECT segment_nextval('g') FROM generate_series(1, 3)",
    );
    assert_eq!(drawn, [1, 2, 3]);
    assert_eq!(mark(), 1000, "node a holds the first range");
    a.stop("fast");
    assert_eq!(mark(), 1000, "a's clean stop gave numbers back");
    a.start_server();
    let after_restart = next(&a);
    assert!(
        after_restart > 1000,
        "a's next number after its restart: {after_restart}"
    );
    let from_b = next(&b);
    assert!(from_b > after_restart, "b's range lies above a's: {from_b}");
}
