//! Serials on several servers (issue 29, point 3), against a real registry and its nodes: a
//! global serial (`scope => 'global'`) takes its counter's ranges from the registry, so every
//! node drawing it prints different texts, also when a worker id moves from one node to
//! another within the day; a local serial that shows `{worker}` is refused on a node whose
//! worker id comes from the registry (it would repeat texts when the id moves).

use std::collections::HashSet;
use std::thread;
use std::time::Duration;

use idgen_cluster_tests::registry::{auto_fast, held_worker, node, registry};
use idgen_cluster_tests::{column, sqlstate, Cluster, One};

const FORMAT: &str = "INV-{YYYY}{MM}{DD}-W{worker:04}-{seq:06}";

fn create_global(n: &Cluster) {
    n.connect("postgres")
        .batch_execute(&format!(
            "SELECT serial_create('inv', '{FORMAT}', reset => 'day', time_zone => 'Europe/Paris', scope => 'global')"
        ))
        .unwrap();
}

fn draw(n: &Cluster, count: i32) -> Vec<String> {
    column(
        &mut n.connect("postgres"),
        &format!("SELECT serial_nextval('inv') FROM generate_series(1, {count})"),
    )
}

fn assert_distinct(texts: &[String]) {
    let set: HashSet<&String> = texts.iter().collect();
    assert_eq!(set.len(), texts.len(), "a text twice: {texts:?}");
}

#[test]
fn a_global_serial_prints_different_texts_on_every_node_and_after_a_worker_id_moves() {
    let reg = registry("serial-reg");
    let a = node(&reg, "serial-node-a", &auto_fast(&[]));
    let b = node(&reg, "serial-node-b", &auto_fast(&[]));
    let (wa, wb) = (
        held_worker(&a, Duration::from_secs(30)),
        held_worker(&b, Duration::from_secs(30)),
    );
    assert_ne!(wa, wb);
    create_global(&a);
    create_global(&b);
    // Both nodes at once, two clients each.
    let mut texts: Vec<String> = thread::scope(|s| {
        let hs: Vec<_> = [&a, &a, &b, &b]
            .into_iter()
            .map(|n| s.spawn(move || draw(n, 300)))
            .collect();
        hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    assert_distinct(&texts);
    // The counter alone keeps them apart (the worker ids differ too, so compare without them).
    let counters: Vec<String> = texts
        .iter()
        .map(|t| t.rsplit('-').next().unwrap().to_owned())
        .collect();
    assert_distinct(&counters);

    // Node a stops; a third node takes its worker id the same day and draws the same serial.
    a.stop("fast");
    let c = node(&reg, "serial-node-c", &auto_fast(&[]));
    let wc = held_worker(&c, Duration::from_secs(60));
    assert_eq!(wc, wa, "the third node took the first node's worker id");
    create_global(&c);
    texts.extend(draw(&c, 300));
    texts.extend(draw(&b, 100));
    assert_distinct(&texts);

    // A local serial showing {worker} is refused where worker ids come from the registry.
    let mut client = c.connect("postgres");
    assert_eq!(
        sqlstate(client.batch_execute(&format!(
            "SELECT serial_create('local_inv', '{FORMAT}', reset => 'day')"
        ))),
        "55000"
    );
    // A global gapless serial cannot be: the registry is outside the caller's transaction.
    assert_eq!(
        sqlstate(client.batch_execute(
            "SELECT serial_create('g', 'G{seq}', gapless => true, scope => 'global')"
        )),
        "22023"
    );
}

#[test]
fn a_global_serial_needs_a_registry() {
    let n = Cluster::with_idgen("serial-noreg", 3, &[]);
    let mut client = n.connect("postgres");
    assert_eq!(
        sqlstate(
            client.batch_execute("SELECT serial_create('inv', 'INV-{seq}', scope => 'global')")
        ),
        "55000"
    );
}

#[test]
fn a_global_serial_is_refused_where_it_is_defined_differently_or_the_registry_lost_its_counter() {
    let reg = registry("serial-reg2");
    let a = node(&reg, "serial-node-d", &auto_fast(&[]));
    let b = node(&reg, "serial-node-e", &auto_fast(&[]));
    held_worker(&a, Duration::from_secs(30));
    held_worker(&b, Duration::from_secs(30));
    // Same name and format, another reset: the same texts from another counter row.
    a.connect("postgres")
        .batch_execute("SELECT serial_create('m', 'M-{YYYY}{MM}-{seq:04}', reset => 'month', scope => 'global')")
        .unwrap();
    b.connect("postgres")
        .batch_execute("SELECT serial_create('m', 'M-{YYYY}{MM}-{seq:04}', reset => 'year', scope => 'global')")
        .unwrap();
    let first: String = a.connect("postgres").one("SELECT serial_nextval('m')");
    assert!(first.ends_with("-0001"), "{first}");
    // Widening the counter (the hint of 22003) on one node keeps it drawing.
    a.connect("postgres")
        .batch_execute("SELECT serial_alter('m', format => 'M-{YYYY}{MM}-{seq:05}')")
        .unwrap();
    let wider: Vec<String> = column(
        &mut a.connect("postgres"),
        "SELECT serial_nextval('m') FROM generate_series(1, 20)",
    );
    assert!(
        wider
            .iter()
            .all(|t| t.rsplit('-').next().unwrap().len() == 5),
        "{wider:?}"
    );
    assert_eq!(
        sqlstate(
            b.connect("postgres")
                .query_one("SELECT serial_nextval('m')", &[])
        ),
        "55000"
    );
    // The registry loses its counter (a restore, an asynchronous failover): the node that took
    // it finds the loss at its next range, instead of printing its texts again.
    let texts = {
        let mut c = a.connect("postgres");
        c.batch_execute("SELECT serial_create('r', 'R{seq}', scope => 'global')")
            .unwrap();
        column::<String>(
            &mut c,
            "SELECT serial_nextval('r') FROM generate_series(1, 15)",
        )
    };
    // Another period's counter beside it (the finding must name this one).
    reg.connect("postgres")
        .batch_execute(
            "INSERT INTO idgen_registry_serial_counter (serial, period, max_id) VALUES ('r', '20000101', 5);
             UPDATE idgen_registry_serial_counter SET max_id = 0 WHERE serial = 'r' AND period = '';",
        )
        .unwrap();
    let mut c = a.connect("postgres");
    let mut after = Vec::new();
    let mut failure = None;
    for _ in 0..200 {
        match c.query_one("SELECT serial_nextval('r')", &[]) {
            Ok(row) => after.push(row.get::<_, String>(0)),
            Err(e) => {
                failure = Some(sqlstate::<()>(Err(e)));
                break;
            }
        }
    }
    assert_eq!(failure.as_deref(), Some("55000"), "{after:?}");
    let mut all = texts;
    all.extend(after);
    assert_distinct(&all);
    // The finding is the registry's: no node takes a range until an operator resolves it, not
    // even one that never drew the serial.
    let mut r = reg.connect("postgres");
    let reported: i64 = r.one(
        "SELECT count(*) FROM idgen_registry_regression WHERE serial = 'r' AND resolved_at IS NULL",
    );
    assert_eq!(reported, 1);
    b.connect("postgres")
        .batch_execute("SELECT serial_create('r', 'R{seq}', scope => 'global')")
        .unwrap();
    assert_eq!(
        sqlstate(
            b.connect("postgres")
                .query_one("SELECT serial_nextval('r')", &[])
        ),
        "55000"
    );
    // Resolving raises the counter to the node's mark: the texts go on above it.
    let raised: Vec<String> = column(&mut r, "SELECT segment FROM idgen_registry_resolve()");
    assert_eq!(raised, ["serial r, period "]);
    for n in [&a, &b] {
        all.extend(column::<String>(
            &mut n.connect("postgres"),
            "SELECT serial_nextval('r') FROM generate_series(1, 20)",
        ));
    }
    assert_distinct(&all);
}
