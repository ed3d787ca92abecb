//! idgen's metrics end to end, with Debian's postgres_exporter (0.11.1) and Prometheus (2.42):
//! the exporter reads the extension's views with the repository's
//! `monitoring/postgres_exporter/queries.yaml`, Prometheus scrapes it every second
//! (`tests/recipes/monitoring/prometheus.yml`) and evaluates
//! `monitoring/prometheus/idgen-alerts.yml`: a copy whose `for:` durations are 0s and whose
//! range windows are 30 times shorter (`idgen_cluster_tests::monitoring::quick_rules`:
//! `increase(...[15m])` clears 30 s after the event), so that a test waits seconds, not the
//! production durations. Each test starts its own servers, its own exporter and its own
//! Prometheus on free ports of 127.0.0.1 (never the packaged services), provokes a condition,
//! and reads Prometheus's HTTP API: the series are there, the alert fires, and it clears when
//! the condition ends. Nothing is timed; every wait is a poll with a bound.
//!
//! - Every metric of `queries.yaml` (read from the file, not listed here) has a series, with
//!   its label columns as labels, from a node of a registry (server-wide views, registry
//!   client) with a segment, a serial and draws in a second database and a third database
//!   without the extension, and from the registry's database (the registry view), one DSN per
//!   server with the databases discovered (`monitoring/README.md`'s setup); every rule
//!   evaluates without error and none fires.
//! - A segment set near the maximum of the `int4` column whose default draws from it: its
//!   used ratio passes 0.9 and the near-maximum alert fires for that segment only; widening the
//!   column to `bigint` clears it.
//! - A clock stepped back 5 s under libfaketime: `clock_regressions_total` rises and the
//!   stepped-back alert fires, then clears once the step has left the rule's window.
//! - A registry stopped under a node with a 10 s lease: the client goes to `renewing`, the
//!   lease-expiring alert fires as the fence nears, then the fenced one (and ids fail with
//!   55000); the registry started again, the node holds its lease and both clear.
//!
//! Run by `scripts/recipes/monitoring.sh`, which installs the packages.

use std::collections::{BTreeSet, HashSet};
use std::time::{Duration, Instant};

use idgen_cluster_tests::monitoring::{dsn, Monitoring, Sample};
use idgen_cluster_tests::registry::{held_worker, node, DURABLE};
use idgen_cluster_tests::{column, sqlstate, Cluster, FakeClock};

/// The alerts of `monitoring/prometheus/idgen-alerts.yml` that the tests provoke.
const SEGMENT_NEAR_MAX: &str = "IdgenSegmentNearMax";
const CLOCK_STEPPED_BACK: &str = "IdgenSnowflakeClockSteppedBack";
const LEASE_EXPIRING: &str = "IdgenRegistryLeaseExpiring";
const FENCED: &str = "IdgenRegistryNodeFenced";

/// Sanity bound for an alert to fire or clear once its condition holds or ends: a few scrapes
/// and evaluations of a second each (not a performance claim).
const ALERT_BOUND: Duration = Duration::from_secs(60);

/// Lease and renewal interval of the registry tests' node, and the registry's longest lease:
/// short enough for a quick outage, long enough for several scrapes within one lease.
const LEASE: [&str; 2] = [
    "idgen.registry_lease = 10s",
    "idgen.registry_renew_interval = 1s",
];

/// A registry whose longest lease is [`LEASE`]'s (it grants nothing for that long after a start).
fn registry(tag: &str) -> Cluster {
    Cluster::with_idgen(
        tag,
        0,
        &[DURABLE[0], DURABLE[1], "idgen.registry_max_lease = 10s"],
    )
}

/// A node of `reg` with an `auto` worker id and [`LEASE`], holding its lease; and its worker id.
fn leased_node(reg: &Cluster, tag: &str) -> (Cluster, i32) {
    let n = node(reg, tag, &["idgen.worker_id = auto", LEASE[0], LEASE[1]]);
    let worker = held_worker(&n, Duration::from_secs(60));
    (n, worker)
}

fn values(samples: &[Sample]) -> Vec<f64> {
    samples.iter().map(|s| s.value).collect()
}

/// An expression with one series while the registry client is in `state`: queries.yaml
/// carries the state either as a state set (`idgen_registry_client_state_active{state=...}`)
/// or as a label of every `idgen_registry_client_*` series.
fn in_state(m: &Monitoring, state: &str) -> String {
    if m.queries
        .iter()
        .any(|q| q.key == "idgen_registry_client_state")
    {
        format!("idgen_registry_client_state_active{{state=\"{state}\"}} == 1")
    } else {
        format!("idgen_registry_client_lease_held{{state=\"{state}\"}}")
    }
}

/// The idgen alerts (those of the rule file) now pending or firing.
fn idgen_alerts(m: &Monitoring) -> Vec<String> {
    m.alerts()
        .into_iter()
        .filter(|a| m.alert_names.contains(&a.name))
        .map(|a| format!("{} {} {:?}", a.name, a.state, a.labels))
        .collect()
}

#[test]
#[ignore = "needs postgres_exporter and Prometheus: run by scripts/recipes/monitoring.sh"]
fn every_metric_of_the_queries_has_a_series_and_nothing_fires_while_healthy() {
    let reg = registry("mon-series-reg");
    let (n, worker) = leased_node(&reg, "mon-series-node");
    n.create_db_with_idgen("app");
    let mut app = n.connect("app");
    app.batch_execute(
        "SELECT segment_create('order_no');
         CREATE TABLE orders (
             id bigint PRIMARY KEY DEFAULT snowflake_nextval(),
             no int4 NOT NULL DEFAULT segment_nextval('order_no'));
         INSERT INTO orders (id) SELECT snowflake_nextval() FROM generate_series(1, 10);
         SELECT serial_create('invoice', 'INV-{YYYY}{MM}{DD}-{seq:06}', reset => 'day');
         SELECT serial_nextval('invoice');",
    )
    .unwrap();

    // A database without the extension, as servers have: the exporter discovers it and leaves
    // it out (it is not among the databases included).
    n.connect("postgres")
        .batch_execute("CREATE DATABASE plain")
        .unwrap();

    // One DSN per server, the exporter discovering the databases (monitoring/README.md).
    let m = Monitoring::start(
        "series",
        &[dsn(&n, "postgres"), dsn(&reg, "postgres")],
        &["postgres", "app"],
    );
    for key in [
        "idgen_snowflake",
        "idgen_registry_client",
        "idgen_segment",
        "idgen_serial",
        "idgen_registry",
    ] {
        assert!(
            m.queries.iter().any(|q| q.key == key),
            "no query {key} in queries.yaml (the contract's keys)"
        );
    }
    m.wait_for_query("pg_up", "pg_up", |s| {
        !s.is_empty() && s.iter().all(|s| s.value == 1.0)
    });

    let expected: BTreeSet<String> = m.queries.iter().flat_map(|q| q.metric_names()).collect();
    println!("{} metrics in queries.yaml: {expected:?}", expected.len());
    m.wait_for_metrics(&expected);
    // Each metric carries its query's label columns (Prometheus drops a label whose value is
    // empty, so: on some series; here every label column has a value somewhere).
    for q in &m.queries {
        for metric in q.metric_names() {
            let series = m.query(&metric);
            for label in q.labels() {
                assert!(
                    series.iter().any(|s| s.labels.contains_key(&label)),
                    "no series of {metric} has the label {label}: {series:#?}"
                );
            }
        }
    }

    // What the series say about the node, its app database and the registry.
    let worker = worker.to_string();
    m.wait_for_query("the node's client, held", &in_state(&m, "held"), |s| {
        s.len() == 1
    });
    let held = m.query(&format!(
        "idgen_registry_client_lease_held{{worker_id=\"{worker}\"}}"
    ));
    assert_eq!(values(&held), [1.0]);
    let order_no = m.wait_for_query(
        "the order_no segment of app",
        "idgen_segment_high_water_mark{datname=\"app\",segment=\"order_no\"}",
        |s| s.len() == 1,
    );
    assert!(order_no[0].value >= 10.0, "{order_no:?}");
    let max = m.query("idgen_segment_max_value{datname=\"app\",segment=\"order_no\"}");
    assert_eq!(
        values(&max),
        [i32::MAX as f64],
        "order_no draws into an int4 column"
    );
    let invoice = m.wait_for_query(
        "the invoice serial of app",
        "idgen_serial_value{datname=\"app\",serial=\"invoice\"}",
        |s| s.len() == 1,
    );
    // The counter as stored: a fast serial's cache reserves a range ahead of the one number
    // drawn.
    assert!(
        invoice[0].value >= 1.0 && invoice[0].value < 999_999.0,
        "{invoice:?}"
    );
    let leases = m.wait_for_query(
        "the registry's leases",
        "idgen_registry_worker_ids_held",
        |s| !s.is_empty(),
    );
    assert!(
        leases.len() == 1 && leases[0].label("datname") == "postgres" && leases[0].value >= 1.0,
        "the registry's database, and only it, holds the node's lease: {leases:?}"
    );
    // The server-wide views: once per server (the registry's worker id is 0), not once per
    // database.
    let assigned = m.query("idgen_snowflake_worker_id_assigned");
    assert!(
        assigned.len() == 2
            && assigned
                .iter()
                .any(|s| s.label("worker_id") == worker && s.value == 1.0),
        "{assigned:?}"
    );

    // Healthy: every rule evaluates, and none fires (a condition seen while the servers were
    // starting clears by itself).
    m.wait_rules_evaluated();
    let deadline = Instant::now() + ALERT_BOUND;
    loop {
        let active = idgen_alerts(&m);
        if active.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "alerts active on healthy servers: {active:#?}\n{}",
            m.diagnostics()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    println!(
        "{} metrics, all with series; {} alerts loaded, none active",
        expected.len(),
        m.alert_names.len()
    );
}

#[test]
#[ignore = "needs postgres_exporter and Prometheus: run by scripts/recipes/monitoring.sh"]
fn a_segment_near_its_columns_maximum_fires_until_the_column_is_widened() {
    let c = Cluster::with_idgen("mon-segment", 1, &[]);
    let mut client = c.connect("postgres");
    client
        .batch_execute(
            "SELECT segment_create('near');
             SELECT segment_create('calm');
             CREATE TABLE t (id int4 PRIMARY KEY DEFAULT segment_nextval('near'));
             CREATE TABLE u (id int4 PRIMARY KEY DEFAULT segment_nextval('calm'));
             INSERT INTO t DEFAULT VALUES;
             INSERT INTO u DEFAULT VALUES;",
        )
        .unwrap();
    let m = Monitoring::start("segment", &[dsn(&c, "postgres")], &["postgres"]);
    let ratio = |seg: &str| format!("idgen_segment_used_ratio{{segment=\"{seg}\"}}");
    m.wait_for_query(
        "both segments' used ratios",
        "idgen_segment_used_ratio",
        |s| s.len() == 2 && s.iter().all(|s| s.value < 0.001),
    );
    m.wait_cleared(SEGMENT_NEAR_MAX, &[], ALERT_BOUND);

    // 2,000,000,000 of an int4's 2,147,483,647: above 0.93.
    client
        .batch_execute("SELECT segment_setval('near', 2000000000); INSERT INTO t DEFAULT VALUES")
        .unwrap();
    let near = m.wait_for_query("near's ratio above 0.9", &ratio("near"), |s| {
        s.len() == 1 && s[0].value > 0.9
    });
    let alert = m.wait_firing(SEGMENT_NEAR_MAX, &[("segment", "near")], ALERT_BOUND);
    println!("used ratio {:?}: {alert:?}", values(&near));
    let others: Vec<_> = m
        .alerts_named(SEGMENT_NEAR_MAX, &[])
        .into_iter()
        .filter(|a| a.labels.get("segment").map(String::as_str) != Some("near"))
        .collect();
    assert!(
        others.is_empty(),
        "the alert for other segments: {others:?}"
    );

    // A segment never moves back; the remedy is a wider column: the ratio falls below 1e-9.
    client
        .batch_execute("ALTER TABLE t ALTER COLUMN id TYPE bigint")
        .unwrap();
    m.wait_for_query("near's ratio with a bigint column", &ratio("near"), |s| {
        s.len() == 1 && s[0].value < 1e-6
    });
    m.wait_cleared(SEGMENT_NEAR_MAX, &[], ALERT_BOUND);
    let widened = m.query("idgen_segment_max_value{segment=\"near\"}");
    assert_eq!(values(&widened), [i64::MAX as f64]);
}

/// Draws 100 ids.
fn draw(client: &mut postgres::Client) {
    client
        .batch_execute("SELECT snowflake_nextval() FROM generate_series(1, 100)")
        .unwrap();
}

#[test]
#[ignore = "needs postgres_exporter, Prometheus and libfaketime: run by scripts/recipes/monitoring.sh"]
fn a_clock_stepped_back_fires_until_the_step_leaves_the_window() {
    let mut c = Cluster::init(
        "mon-clock",
        &["shared_preload_libraries = 'idgen'", "idgen.worker_id = 2"],
    );
    let clock: FakeClock = c.fake_clock();
    c.start_server();
    c.create_db_with_idgen("postgres");
    let mut client = c.connect("postgres");
    draw(&mut client);
    let m = Monitoring::start("clock", &[dsn(&c, "postgres")], &["postgres"]);
    let regressions = "idgen_snowflake_clock_regressions_total";
    m.wait_for_query("no regression yet", regressions, |s| {
        s.len() == 1 && s[0].value == 0.0
    });
    m.wait_cleared(CLOCK_STEPPED_BACK, &[], ALERT_BOUND);

    // Right after a draw (the highest clock reading is now), the clock goes 5 s back: the next
    // draw reads it below that reading, counts the regression and waits for the clock
    // (beyond idgen.max_drift_ms, within idgen.max_wait_ms).
    draw(&mut client);
    clock.set_offset_secs(-5.0);
    std::thread::sleep(FakeClock::PICKUP);
    // Each process picks the step up at its own moment (one was seen more than PICKUP late):
    // draw until this one has.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        draw(&mut client);
        let counted: i64 = client
            .query_one("SELECT clock_regressions FROM snowflake_status()", &[])
            .unwrap()
            .get(0);
        if counted >= 1 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no draw saw the clock 5 s back within 20 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let seen = m.wait_for_query("a regression counted", regressions, |s| {
        s.len() == 1 && s[0].value >= 1.0
    });
    let alert = m.wait_firing(CLOCK_STEPPED_BACK, &[], ALERT_BOUND);
    println!("clock_regressions_total {:?}: {alert:?}", values(&seen));

    // No further step: the alert clears once the step is older than the rule's window (30 s
    // in the copy).
    draw(&mut client);
    m.wait_cleared(CLOCK_STEPPED_BACK, &[], 2 * ALERT_BOUND);
}

#[test]
#[ignore = "needs postgres_exporter and Prometheus: run by scripts/recipes/monitoring.sh"]
fn a_stopped_registry_fires_the_lease_alerts_until_it_returns() {
    let reg = registry("mon-lease-reg");
    let (n, _) = leased_node(&reg, "mon-lease-node");
    let m = Monitoring::start("lease", &[dsn(&n, "postgres")], &["postgres"]);
    m.wait_for_query("the client, held", &in_state(&m, "held"), |s| s.len() == 1);
    m.wait_cleared(LEASE_EXPIRING, &[], ALERT_BOUND);
    m.wait_cleared(FENCED, &[], ALERT_BOUND);

    let stopped = Instant::now();
    reg.stop("fast");
    m.wait_for_query("the client, renewing", &in_state(&m, "renewing"), |s| {
        s.len() == 1
    });
    let renewing = m.query("idgen_registry_client_fence_remaining_seconds");
    // The lease alert fires while the fence is under half a lease away, and gives way to the
    // fenced one at the fence: looked up in Prometheus's ALERTS series, not caught in passing.
    let fenced = m.wait_firing(FENCED, &[], ALERT_BOUND);
    let expiring = m.wait_fired(LEASE_EXPIRING, &[], stopped, ALERT_BOUND);
    let remaining = m.query("idgen_registry_client_fence_remaining_seconds");
    assert!(
        remaining.iter().all(|s| s.value <= 0.0),
        "fenced with fence_remaining_seconds {remaining:?}"
    );
    let failures = m.query("idgen_registry_client_failures_total");
    assert!(failures.iter().all(|s| s.value >= 1.0), "{failures:?}");
    println!(
        "registry stopped: fence_remaining_seconds {:?} when renewing began, {:?} now; \
         {expiring:?}; {fenced:?}",
        values(&renewing),
        values(&remaining)
    );
    assert_eq!(
        sqlstate(
            n.connect("postgres")
                .query_one("SELECT snowflake_nextval()", &[])
        ),
        "55000",
        "a draw past the fence"
    );

    reg.start_server();
    let worker = held_worker(&n, Duration::from_secs(60));
    m.wait_for_query("the client, held again", &in_state(&m, "held"), |s| {
        s.len() == 1
    });
    m.wait_cleared(FENCED, &[], ALERT_BOUND);
    m.wait_cleared(LEASE_EXPIRING, &[], ALERT_BOUND);
    let ids: HashSet<i64> = column(
        &mut n.connect("postgres"),
        "SELECT snowflake_nextval() FROM generate_series(1, 10)",
    )
    .into_iter()
    .collect();
    assert_eq!(ids.len(), 10);
    println!("registry back: worker {worker} held again, both alerts cleared");
}
