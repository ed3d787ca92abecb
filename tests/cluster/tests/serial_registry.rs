//! Serials on several servers, against a real registry and its nodes: a
//! global serial (`scope => 'global'`) takes its counter's ranges from the registry, so every
//! node drawing it prints different texts, also when a worker id moves from one node to
//! another within the day, and after the registry lost the counter's last ranges (a restore)
//! and recovered; a local serial that shows `{worker}` is refused on a node whose worker id
//! comes from the registry (it would repeat texts when the id moves).

use std::collections::HashSet;
use std::thread;
use std::time::{Duration, Instant};

use idgen_cluster_tests::registry::{
    auto_fast, failure_text, held_worker, node, recover, registry, restore, snapshot,
    wait_for_reports, wait_until_released_id_is_free,
};
use idgen_cluster_tests::{column, sqlstate, wait_for, Cluster, One};

const FORMAT: &str = "INV-{YYYY}{MM}{DD}-W{worker:04}-{seq:06}";

fn create_global(n: &Cluster) {
    n.connect("postgres")
        .batch_execute(&format!(
            "SELECT serial_create('inv', '{FORMAT}', reset => 'day', time_zone => 'Europe/Paris', scope => 'global')"
        ))
        .unwrap();
}

fn draw(n: &Cluster, count: i32) -> Vec<String> {
    draw_serial(n, "inv", count)
}

/// `count` texts of serial `name` drawn on `n` in one statement.
fn draw_serial(n: &Cluster, name: &str, count: i32) -> Vec<String> {
    column(
        &mut n.connect("postgres"),
        &format!("SELECT serial_nextval('{name}') FROM generate_series(1, {count})"),
    )
}

fn assert_distinct(texts: &[String]) {
    let set: HashSet<&String> = texts.iter().collect();
    assert_eq!(set.len(), texts.len(), "a text twice: {texts:?}");
}

/// Two `auto` nodes draw global serial `inv` (its texts show the worker id), two clients each
/// at once: no text twice, and no counter value twice (the counter alone keeps them apart).
/// Node a stops cleanly; once its worker id is free a third node takes it the same day and
/// draws: still no text twice, since the counter is the registry's, not the node's. A local
/// serial showing `{worker}` is refused (55000) where worker ids come from the registry, and a
/// global gapless serial cannot be created (22023).
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
    wait_until_released_id_is_free(&reg, wa);
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

/// A server without `idgen.registry` cannot create a global serial (55000): its counter
/// would have nowhere to live.
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

/// Global serial `m` created on node a with a monthly reset and on node b with a yearly one,
/// same name and format: the first node to draw it defines it in the registry; b's draw is
/// refused (55000), since it would print a's texts from another counter. Widening the
/// counter's padding on a (the hint of 22003) keeps a drawing.
#[test]
fn a_global_serial_defined_with_another_reset_on_another_node_is_refused() {
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
}

/// The registry's mark of global serial `serial`'s counter of no period (a serial that never
/// resets), on whatever server listens on `reg`'s port.
fn counter_mark(reg: &Cluster, serial: &str) -> i64 {
    reg.connect("postgres").one_with(
        "SELECT max_id FROM idgen_registry_serial_counter WHERE serial = $1 AND period = ''",
        &[&serial],
    )
}

/// Texts of serial `name` drawn on `node`, one a statement, at most `max`, until one is
/// refused; returns them and the refusal's SQLSTATE, message and detail. A failure to reach
/// the registry (class 08: the allocator's connection to a registry that restarted is gone,
/// and it connects again after a pause) is tried again, 50 times at most.
fn serial_until_refused(node: &Cluster, name: &str, max: usize) -> (Vec<String>, Option<String>) {
    let mut client = node.connect("postgres");
    let sql = format!("SELECT serial_nextval('{name}')");
    let mut texts = Vec::new();
    let mut unreached = 0;
    while texts.len() < max {
        match client.query_one(&sql, &[]) {
            Ok(row) => texts.push(row.get(0)),
            Err(e) => {
                let code = e.code().map(|c| c.code().to_owned()).unwrap_or_default();
                if code.starts_with("08") && unreached < 50 {
                    unreached += 1;
                    thread::sleep(Duration::from_millis(200));
                    continue;
                }
                return (texts, Some(failure_text(&e)));
            }
        }
    }
    (texts, None)
}

/// `count` texts of serial `name` drawn on `node` in one statement, tried again (for at most
/// 30 s) while it fails, as it does until the registry hands out ranges again after its
/// recovery (55P03, its wait after the new epoch).
fn serial_once_ranges_resume(node: &Cluster, name: &str, count: i32) -> Vec<String> {
    let mut client = node.connect("postgres");
    let sql = format!("SELECT serial_nextval('{name}') FROM generate_series(1, {count})");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match client.query(&sql, &[]) {
            Ok(rows) => return rows.iter().map(|r| r.get(0)).collect(),
            Err(e) => assert!(
                Instant::now() < deadline,
                "no texts of {name} 30 s after the recovery: {}",
                failure_text(&e)
            ),
        }
        thread::sleep(Duration::from_millis(200));
    }
}

/// A registry restored from a base backup taken before node a took its last ranges of global
/// serial `r` (the restored counter is below texts a printed): the nodes' hellos show it
/// revisions it answered after the snapshot, which opens its recovery; while it is open no node takes a range of
/// `r` (55000): not node b, which never drew it, nor node a once its cached texts are spent.
/// Both nodes report; the operator's `idgen_registry_recover()` raises the counter to at least
/// a's mark, and then both nodes print texts again, none of them printed before. (This
/// replaced the regression reports and `idgen_registry_resolve()` of earlier releases.)
#[test]
fn a_registry_that_lost_a_global_serials_counter_recovers_without_repeating_a_text() {
    let reg = registry("serial-reg3");
    let a = node(&reg, "serial-node-f", &auto_fast(&[]));
    let b = node(&reg, "serial-node-g", &auto_fast(&[]));
    held_worker(&a, Duration::from_secs(30));
    held_worker(&b, Duration::from_secs(30));
    for n in [&a, &b] {
        n.connect("postgres")
            .batch_execute("SELECT serial_create('r', 'R{seq}', scope => 'global')")
            .unwrap();
    }
    let mut texts = draw_serial(&a, "r", 15);

    // The snapshot, then more of a's ranges, and renewals enough that the revisions the nodes
    // saw are well past the snapshot's (a sequence is logged up to 32 values ahead).
    let snap = snapshot(&reg, "serial-snap");
    let mark_at_snapshot = counter_mark(&reg, "r");
    let revision_at_snapshot: i64 = reg
        .connect("postgres")
        .one("SELECT last_value FROM idgen_registry_revision");
    texts.extend(draw_serial(&a, "r", 60));
    let mut r = reg.connect("postgres");
    wait_for(
        "the registry's revision to move past the snapshot's",
        Duration::from_secs(30),
        || {
            (r.one::<i64>("SELECT last_value FROM idgen_registry_revision")
                > revision_at_snapshot + 64)
                .then_some(())
        },
    );
    drop(r);
    let mark_before_restore = counter_mark(&reg, "r");
    assert!(
        mark_before_restore > mark_at_snapshot,
        "ranges of r taken after the snapshot: mark {mark_at_snapshot} -> {mark_before_restore}"
    );

    restore(&reg, &snap);
    assert_eq!(
        counter_mark(&reg, "r"),
        mark_at_snapshot,
        "the restored registry has the snapshot's counter"
    );
    let mut r = reg.connect("postgres");
    wait_for("the recovery to open", Duration::from_secs(20), || {
        r.one::<bool>("SELECT recovery_since IS NOT NULL FROM idgen_registry_server")
            .then_some(())
    });
    let reason: String = r.one("SELECT recovery_reason FROM idgen_registry_server");
    assert!(reason.contains("had seen revision"), "{reason}");

    // While it is open, no range of r: b never drew it, a spends its cached texts first.
    let (none, failure) = serial_until_refused(&b, "r", 1);
    assert!(
        none.is_empty(),
        "b drew {none:?} while the registry recovers"
    );
    let failure = failure.expect("b's draw while the registry recovers");
    assert!(failure.starts_with("55000"), "{failure}");
    let (cached, failure) = serial_until_refused(&a, "r", 1000);
    let failure = failure.expect("1000 texts of r while the registry recovers, none refused");
    assert!(failure.starts_with("55000"), "{failure}");
    texts.extend(cached);
    assert_distinct(&texts);

    // Both nodes report; the operator completes the recovery, raising r's counter.
    wait_for_reports(&reg, 2, Duration::from_secs(20));
    let raised = recover(&reg, &[]);
    assert!(
        raised
            .iter()
            .any(|(s, to)| s == "global serial r, period " && *to >= mark_before_restore),
        "r's counter was not raised to a's mark {mark_before_restore}: {raised:?}"
    );
    for n in [&a, &b, &a] {
        texts.extend(serial_once_ranges_resume(n, "r", 20));
    }
    assert_distinct(&texts);
}
