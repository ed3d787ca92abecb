//! The registry (DESIGN.md §6) against real servers: a registry database and nodes
//! with `idgen.registry` set, started by the tests. Each invariant is a test:
//!
//! * one holder per worker id: `auto` nodes get distinct ids; an explicit id held by another
//!   node is refused (55006) while the holder renews; a clone with the same node name gets
//!   another id (`auto`) or waits (a fixed id) while the original renews;
//! * fencing by tick: an outage shorter than the lease is ridden out; a longer one stops ids at
//!   the confirmed bound R (55000), and they resume by themselves when the registry returns;
//! * a new holder starts above the old one: a crashed node's id taken over by a node whose
//!   clock is an hour behind issues only ids above every id of the dead one, at once;
//! * restarts: a clean restart reclaims the same id once the clock has passed its final
//!   reservation; after a `kill -9` an `auto` node takes another free id at once (its old one
//!   stays leased until it expires) and a fixed id waits for the old lease to expire; a
//!   promoted standby claims like any other node: another id, at once;
//! * one layout per fleet, the clock offset limit, 1,024 holders, and bad input (conninfo,
//!   unreachable registry, registry without idgen, missing privilege, node name).

use std::collections::HashSet;
use std::time::{Duration, Instant};

use idgen_cluster_tests::registry::{
    direct_hello, draw, held_worker, node, nothing_issued, refused, registry, registry_setting,
    status, wait_until_released_id_is_free, DURABLE, FAST,
};
use idgen_cluster_tests::{column, db_error, sqlstate, twitter, wait_for, Cluster, One};

/// A registry as [`registry`] makes it, but whose longest lease (`idgen.registry_max_lease`) is
/// `max_lease` (e.g. `"20s"`) instead of 2 s: for nodes whose leases must outlive a restart.
/// After its start it grants nothing for that long plus a second.
fn registry_with_max_lease(tag: &str, max_lease: &str) -> Cluster {
    let longest = format!("idgen.registry_max_lease = {max_lease}");
    Cluster::with_idgen(tag, 0, &[DURABLE[0], DURABLE[1], &longest])
}

/// Three `auto` nodes get three distinct worker ids (the registry's view agrees) and draw 6,000
/// distinct ids. A clean stop releases the lease at a final tick above the node's last id; once
/// the registry's clock has passed it, the restarted node gets the same id back and issues
/// above that tick. A `kill -9` leaves its lease live (20 s); the restarted node does not wait
/// for it: it holds another free id, distinct from every live holder's, while the old lease
/// still lives, and repeats none of its earlier ids. This is what replaced the same-name
/// takeover: a crashed node never needs its old id back, and no two servers ever share one.
#[test]
fn auto_nodes_get_distinct_ids_reclaim_theirs_after_a_clean_restart_and_take_another_at_once_after_a_crash(
) {
    // A lease that outlives a restart: the crashed node's old one is still live when it claims.
    let reg = registry_with_max_lease("reg_auto", "20s");
    let settings = [
        "idgen.worker_id = auto",
        "idgen.registry_renew_interval = 300ms",
        "idgen.registry_lease = 20s",
    ];
    let nodes: Vec<Cluster> = (0..3)
        .map(|i| node(&reg, &format!("auto{i}"), &settings))
        .collect();
    let workers: Vec<i32> = nodes
        .iter()
        .map(|n| held_worker(n, Duration::from_secs(40)))
        .collect();
    assert_eq!(
        workers.iter().collect::<HashSet<_>>().len(),
        3,
        "{workers:?}"
    );
    let held: Vec<i32> = column(
        &mut reg.connect("postgres"),
        "SELECT worker_id FROM idgen_registry_workers WHERE state = 'held' ORDER BY 1",
    );
    let mut sorted = workers.clone();
    sorted.sort();
    assert_eq!(held, sorted);

    let mut all = HashSet::new();
    let mut last = Vec::new();
    for (n, &w) in nodes.iter().zip(&workers) {
        let ids = draw(n, 2000);
        assert!(ids.iter().all(|&id| twitter::worker_of(id) == i64::from(w)));
        last.push(*ids.iter().max().unwrap());
        all.extend(ids);
    }
    assert_eq!(all.len(), 6000, "a repeated id among three nodes");

    // A clean restart releases the lease with the final reservation; once the registry's clock
    // has passed it, the node reclaims its own id.
    nodes[0].stop("fast");
    let released: Option<i64> = reg.connect("postgres").one_with(
        "SELECT released_tick FROM idgen_registry_workers WHERE worker_id = $1",
        &[&workers[0]],
    );
    let released = released.expect("a clean shutdown releases the lease");
    assert!(
        released > last[0] >> 22,
        "released at {released}, last id's tick {}",
        last[0] >> 22
    );
    wait_until_released_id_is_free(&reg, workers[0]);
    nodes[0].start_server();
    assert_eq!(held_worker(&nodes[0], Duration::from_secs(10)), workers[0]);
    let after = draw(&nodes[0], 100);
    assert!(*after.iter().min().unwrap() > last[0]);
    assert!(after.iter().all(|&id| id >> 22 >= released));
    all.extend(after);

    // kill -9: the old lease lives on for 20 s, and the restarted node takes another free id
    // at once instead of waiting for it.
    nodes[1].kill_postmaster();
    nodes[1].start_after_crash();
    let again = held_worker(&nodes[1], Duration::from_secs(15));
    assert!(
        !workers.contains(&again),
        "the restarted node holds {again}, one of {workers:?}"
    );
    let mut r = reg.connect("postgres");
    let (old_state, old_still_live): (String, bool) = {
        let row = r
            .query_one(
                "SELECT o.state, o.expires_at > n.claimed_at \
                 FROM idgen_registry_workers o, idgen_registry_workers n \
                 WHERE o.worker_id = $1 AND n.worker_id = $2 AND o.node_name = n.node_name",
                &[&workers[1], &again],
            )
            .unwrap();
        (row.get(0), row.get(1))
    };
    assert!(
        old_still_live,
        "the new id was granted after the old lease ({old_state}) expired"
    );
    let after = draw(&nodes[1], 2000);
    assert!(after
        .iter()
        .all(|&id| twitter::worker_of(id) == i64::from(again)));
    let before = all.len();
    all.extend(after);
    assert_eq!(
        all.len(),
        before + 2000,
        "the restarted node repeated an id"
    );
}

/// A node with a fixed worker id restarted after a `kill -9` finds its old lease (6 s) still
/// live: its claim is refused (55006, naming its own node name) and it issues nothing; it
/// retries, holds the same id once the old lease expired (the registry granted it no earlier
/// than the old expiry), and issues only ids above every id of its previous life. A fixed id
/// is never granted twice at once, even to the same node name.
#[test]
fn a_fixed_worker_id_restarted_after_a_crash_waits_for_its_old_lease_to_expire_and_repeats_no_id() {
    let reg = registry_with_max_lease("reg_fixed_crash", "6s");
    let n = node(
        &reg,
        "fixed_crash",
        &[
            "idgen.worker_id = 9",
            "idgen.node_name = 'fixed'",
            "idgen.registry_renew_interval = 300ms",
            "idgen.registry_lease = 6s",
        ],
    );
    assert_eq!(held_worker(&n, Duration::from_secs(30)), 9);
    let before = draw(&n, 2000);
    n.kill_postmaster();
    n.start_after_crash();
    let e = refused(&n);
    assert_eq!(e.code().code(), "55006", "{e:?}");
    assert!(e.message().contains("'fixed' holds worker id 9"), "{e:?}");
    assert!(nothing_issued(&n));
    // The old lease as the registry has it while the restarted node waits (nothing but that
    // node can replace it, and only after it expired).
    let mut r = reg.connect("postgres");
    let (old_incarnation, old_expiry): (String, f64) = {
        let row = r
            .query_one(
                "SELECT incarnation, extract(epoch FROM expires_at)::float8 \
                 FROM idgen_registry_lease WHERE worker_id = 9",
                &[],
            )
            .unwrap();
        (row.get(0), row.get(1))
    };
    assert_eq!(held_worker(&n, Duration::from_secs(30)), 9);
    let row = r
        .query_one(
            "SELECT incarnation, extract(epoch FROM claimed_at)::float8 \
             FROM idgen_registry_lease WHERE worker_id = 9",
            &[],
        )
        .unwrap();
    let (incarnation, claimed): (String, f64) = (row.get(0), row.get(1));
    assert_ne!(incarnation, old_incarnation, "the same incarnation holds 9");
    assert!(
        claimed >= old_expiry,
        "granted again at {claimed}, before the old lease expired at {old_expiry}"
    );
    let after = draw(&n, 2000);
    assert!(after.iter().min().unwrap() > before.iter().max().unwrap());
}

/// A node asking for worker id 5, which another live node (`alpha`) holds, is refused (55006,
/// naming `alpha` in the error and the log) and issues nothing, while `alpha` keeps the id and
/// issues: an explicit id never gets a second holder.
#[test]
fn an_explicit_id_held_by_another_node_is_refused_naming_the_holder() {
    let reg = registry("reg_explicit");
    let mut a_settings = vec!["idgen.worker_id = 5", "idgen.node_name = 'alpha'"];
    a_settings.extend(FAST);
    let a = node(&reg, "alpha", &a_settings);
    assert_eq!(held_worker(&a, Duration::from_secs(20)), 5);
    let mut b_settings = vec!["idgen.worker_id = 5", "idgen.node_name = 'beta'"];
    b_settings.extend(FAST);
    let b = node(&reg, "beta", &b_settings);
    let e = refused(&b);
    assert_eq!(e.code().code(), "55006", "{e:?}");
    assert!(e.message().contains("alpha"), "{e:?}");
    assert!(nothing_issued(&b));
    assert!(
        b.log().contains("worker id 5 is held by node 'alpha'"),
        "{}",
        b.log()
    );
    // alpha keeps its id and issues.
    assert_eq!(twitter::worker_of(draw(&a, 1)[0]), 5);
}

/// A base-backup clone of a live `auto` node, with its node name (`alpha`): started as it is,
/// the clone gets another worker id at once, while the original keeps its own; set to the
/// original's worker id, it is refused (55006, naming `alpha`) and issues nothing for as long
/// as the original renews, and takes the id only after the original died and its lease
/// expired, issuing above every id of the original. Never two holders of one worker id, and
/// no id repeated between the three servers.
#[test]
fn a_clone_with_the_same_node_name_never_shares_the_originals_worker_id_while_it_renews() {
    let reg = registry("reg_clone");
    let mut settings = vec!["idgen.worker_id = auto", "idgen.node_name = 'alpha'"];
    settings.extend(FAST);
    let original = node(&reg, "original", &settings);
    let w = held_worker(&original, Duration::from_secs(20));
    let mut ids = draw(&original, 1000);

    // As it is (auto): another worker id, at once, beside the original.
    let auto_clone = Cluster::clone_of(&original, "clone_auto", &[]);
    auto_clone.start_server();
    let other = held_worker(&auto_clone, Duration::from_secs(20));
    assert_ne!(other, w, "the clone took the live original's worker id");
    let (state, held, _) = status(&mut original.connect("postgres"));
    assert_eq!(
        (state.as_str(), held),
        ("held", Some(w)),
        "the original's lease"
    );
    let from_clone = draw(&auto_clone, 1000);
    assert!(from_clone
        .iter()
        .all(|&id| twitter::worker_of(id) == i64::from(other)));
    ids.extend(from_clone);
    drop(auto_clone);

    // Set to the original's worker id: refused while the original renews.
    let fixed = format!("idgen.worker_id = {w}");
    let fixed_clone = Cluster::clone_of(&original, "clone_fixed", &[&fixed]);
    fixed_clone.start_server();
    let e = refused(&fixed_clone);
    assert_eq!(e.code().code(), "55006", "{e:?}");
    assert!(e.message().contains("alpha"), "{e:?}");
    // Never two holders: while the original renews (ten renewals), the clone stays refused.
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(status(&mut fixed_clone.connect("postgres")).0, "refused");
    assert!(nothing_issued(&fixed_clone));
    ids.extend(draw(&original, 1000));

    // The original dies: once its lease expired the clone takes the id over, above its R.
    original.kill_postmaster();
    assert_eq!(held_worker(&fixed_clone, Duration::from_secs(20)), w);
    let after = draw(&fixed_clone, 1000);
    let max_before = ids
        .iter()
        .filter(|&&id| twitter::worker_of(id) == i64::from(w))
        .max()
        .unwrap();
    assert!(after.iter().min().unwrap() > max_before);
    let count = ids.len() + after.len();
    ids.extend(after);
    assert_eq!(
        ids.iter().collect::<HashSet<_>>().len(),
        count,
        "an id repeated"
    );
}

/// An outage of the registry shorter than the lease (1 s of 2 s) is ridden out: ids go on. A
/// longer one stops ids at the lease's confirmed bound R (55000, no id with a tick past R), and
/// ids resume by themselves, above every earlier one, when the registry returns.
#[test]
fn an_outage_shorter_than_the_lease_is_ridden_out_and_a_longer_one_fences_at_r_until_the_registry_returns(
) {
    let reg = registry("reg_outage");
    let mut settings = vec!["idgen.worker_id = auto"];
    settings.extend(FAST);
    let n = node(&reg, "outage", &settings);
    held_worker(&n, Duration::from_secs(20));
    let mut client = n.connect("postgres");

    reg.stop("fast");
    let t = Instant::now();
    let mut ids = Vec::new();
    while t.elapsed() < Duration::from_millis(1000) {
        ids.push(client.one::<i64>("SELECT snowflake_nextval()"));
        std::thread::sleep(Duration::from_millis(50));
    }
    reg.start_server();
    held_worker(&n, Duration::from_secs(20));

    // Longer than the lease: ids continue up to R, then 55000 until the registry answers.
    reg.stop("fast");
    let fenced = wait_for("the fence", Duration::from_secs(20), || {
        match client.query_one("SELECT snowflake_nextval()", &[]) {
            Ok(row) => {
                ids.push(row.get(0));
                None
            }
            Err(e) => Some(e),
        }
    });
    let e = fenced.as_db_error().expect("a server error");
    assert_eq!(e.code().code(), "55000", "{e:?}");
    let fence_tick: i64 = client.one("SELECT fence_tick FROM idgen_registry_status");
    assert!(
        ids.iter().all(|id| id >> 22 <= fence_tick),
        "an id past R = {fence_tick}"
    );
    reg.start_server();
    let resumed: i64 = wait_for("ids again", Duration::from_secs(20), || {
        client
            .query_one("SELECT snowflake_nextval()", &[])
            .ok()
            .map(|r| r.get(0))
    });
    assert!(resumed > *ids.iter().max().unwrap());
    assert_eq!(ids.iter().collect::<HashSet<_>>().len(), ids.len());
}

/// A node holding worker id 7 is killed; a node whose clock is an hour behind asks for id 7,
/// gets it once the dead node's lease expired, and issues at once (a head start of over an
/// hour, not a wait for its clock) ids above every id of the dead one: a new holder's ids start
/// above the old holder's fence whatever its own clock says.
#[test]
fn a_dead_nodes_id_taken_over_by_a_node_an_hour_behind_issues_above_every_id_of_the_dead_one() {
    let reg = registry("reg_behind");
    let mut settings = vec!["idgen.worker_id = 7"];
    settings.extend(FAST);
    let dead = node(&reg, "dead", &settings);
    held_worker(&dead, Duration::from_secs(20));
    let before = draw(&dead, 5000);
    dead.kill_postmaster();

    let setting = registry_setting(&reg, "postgres");
    let mut behind = Cluster::init(
        "behind",
        &[
            "shared_preload_libraries = 'idgen'",
            setting.as_str(),
            "idgen.worker_id = 7",
            "idgen.registry_max_clock_offset_ms = -1",
            FAST[0],
            FAST[1],
        ],
    );
    behind.fake_clock().set_offset_secs(-3600.0);
    behind.start_server();
    behind.create_db_with_idgen("postgres");
    // The dead node's lease expires after 2 s; then the claim succeeds.
    assert_eq!(held_worker(&behind, Duration::from_secs(20)), 7);
    let mut client = behind.connect("postgres");
    let head_start: i64 = client.one("SELECT head_start_ms FROM idgen_registry_status");
    assert!(head_start > 3_500_000, "head start {head_start} ms");
    // (The registry client's own clock reads are not faked: libfaketime 0.9.10 fakes the
    // backends of a server it is preloaded into, not its background workers. The ids come from
    // the backends; the clock offset check is tested with the registry's clock moved instead.)
    // Issued at once, without waiting an hour for the clock.
    let t = Instant::now();
    let after = draw(&behind, 5000);
    assert!(t.elapsed() < Duration::from_secs(5));
    assert!(after.iter().min().unwrap() > before.iter().max().unwrap());
}

/// A hot standby of an `auto` node (a 20 s lease) is promoted after its primary was killed:
/// it claims like any other node, so it holds a worker id at once, another than the primary's,
/// while the primary's lease still lives (the registry granted it before that lease's expiry),
/// and none of its ids repeats one of the primary's. (Before 0.9.0 a standby its primary had
/// attested took over the primary's own lease.)
#[test]
fn a_promoted_standby_gets_another_worker_id_at_once_and_repeats_none_of_its_primarys_ids() {
    let reg = registry_with_max_lease("reg_promote", "20s");
    let primary = node(
        &reg,
        "primary",
        &[
            "idgen.worker_id = auto",
            "idgen.registry_renew_interval = 300ms",
            "idgen.registry_lease = 20s",
        ],
    );
    let w = held_worker(&primary, Duration::from_secs(40));
    let standby = Cluster::standby_of(&primary, "standby", &["idgen.node_name = 'promoted'"]);
    let before = draw(&primary, 2000);
    primary.kill_postmaster();
    standby.promote();
    let ws = held_worker(&standby, Duration::from_secs(20));
    assert_ne!(
        ws, w,
        "the promoted standby took its primary's live worker id"
    );
    let still_live: bool = reg.connect("postgres").one_with(
        "SELECT p.expires_at > s.claimed_at AND p.node_name <> s.node_name \
         FROM idgen_registry_workers p, idgen_registry_workers s \
         WHERE p.worker_id = $1 AND s.worker_id = $2",
        &[&w, &ws],
    );
    assert!(
        still_live,
        "the standby's grant waited for the primary's lease to expire"
    );
    let after = draw(&standby, 2000);
    assert!(after
        .iter()
        .all(|&id| twitter::worker_of(id) == i64::from(ws)));
    let primarys: HashSet<i64> = before.into_iter().collect();
    let repeated: Vec<&i64> = after.iter().filter(|id| primarys.contains(id)).collect();
    assert!(
        repeated.is_empty(),
        "ids of the primary again: {repeated:?}"
    );
}

/// With all 1,024 worker ids of the default layout held (direct claims with 30 s leases, on a
/// registry whose longest lease is 30 s), a node asking for one is refused with 53400 and
/// issues nothing; a node whose `idgen.epoch` differs from the fleet's is refused with 22023,
/// naming the setting: ids of two layouts could collide.
#[test]
fn the_1025th_holder_is_refused_and_a_node_of_another_layout_is_refused_naming_the_difference() {
    // Leases long enough to outlive the next node's start and refusal.
    let reg = registry_with_max_lease("reg_full", "30s");
    let mut r = reg.connect("postgres");
    direct_hello(&mut r, "sim");
    let layout = "1704067200000, 10, 12, 1";
    for i in 0..1024 {
        r.batch_execute(&format!(
            "SELECT * FROM idgen_registry_claim('sim{i}', 'inc{i}', repeat('{:x}', 64), 'sys', 1, NULL, {layout}, 30000, 10000, 0, 5432)",
            i % 16
        ))
        .unwrap();
    }
    assert_eq!(
        r.one::<i64>(
            "SELECT count(DISTINCT worker_id) FROM idgen_registry_workers WHERE state = 'held'"
        ),
        1024
    );
    let full = node(&reg, "full", &["idgen.worker_id = auto"]);
    let e = refused(&full);
    assert_eq!(e.code().code(), "53400", "{e:?}");
    assert!(nothing_issued(&full));

    let other = node(
        &reg,
        "other_epoch",
        &[
            "idgen.worker_id = auto",
            "idgen.epoch = '2025-01-01 00:00:00+00'",
        ],
    );
    let e = refused(&other);
    assert_eq!(e.code().code(), "22023", "{e:?}");
    assert!(e.detail().unwrap_or("").contains("idgen.epoch"), "{e:?}");
    assert!(nothing_issued(&other));
}

/// The registry's clock runs 5 s ahead of the node's (libfaketime on the registry, whose
/// `clock_timestamp()` is the reference): with `idgen.registry_max_clock_offset_ms = 1000` the
/// claim is refused (53400) and the offset, about -5000 ms, is shown; raised, it succeeds.
#[test]
fn a_clock_too_far_off_the_registrys_is_refused_and_measured() {
    let mut reg = Cluster::init(
        "reg_offset",
        &[
            "shared_preload_libraries = 'idgen'",
            "idgen.worker_id = 0",
            DURABLE[0],
            DURABLE[1],
            DURABLE[2],
        ],
    );
    reg.fake_clock().set_offset_secs(5.0);
    reg.start_server();
    reg.create_db_with_idgen("postgres");
    let n = node(
        &reg,
        "offset",
        &[
            "idgen.worker_id = auto",
            "idgen.registry_max_clock_offset_ms = 1000",
        ],
    );
    let e = refused(&n);
    assert_eq!(e.code().code(), "53400", "{e:?}");
    let offset: f64 = n
        .connect("postgres")
        .one("SELECT clock_offset_ms FROM idgen_registry_status");
    assert!((-6000.0..-4000.0).contains(&offset), "offset {offset}");
    assert!(nothing_issued(&n));
    n.append_settings(&["idgen.registry_max_clock_offset_ms = 10000"]);
    n.connect("postgres")
        .batch_execute("SELECT pg_reload_conf()")
        .unwrap();
    held_worker(&n, Duration::from_secs(20));
}

/// Bad settings and registries fail clearly and issue nothing: a malformed `idgen.registry`,
/// node name, or `auto` without a registry stop the server at start (the log names the
/// setting); an unreachable registry is 08001; a registry database without idgen is 42883
/// with a hint to create it; a role outside `idgen_registry` is 42501 with a hint to grant it,
/// and once granted the node gets a worker id by itself, while the role still reads no
/// registry table.
#[test]
fn bad_registries_and_settings_fail_clearly_and_issue_nothing() {
    // Refused at start: the log names the setting.
    for (setting, name) in [
        ("idgen.registry = 'nokey'", "idgen.registry"),
        ("idgen.node_name = 'two words'", "idgen.node_name"),
        ("idgen.worker_id = auto", "idgen.worker_id"), // auto without a registry
    ] {
        let c = Cluster::init("badreg", &["shared_preload_libraries = 'idgen'", setting]);
        assert!(!c.pg_ctl_start().status.success(), "started with {setting}");
        assert!(c.log().contains(name), "{setting}: {}", c.log());
    }

    // Unreachable registry: 08001, and nothing issued.
    let gone = Cluster::init("gone", &[]);
    let unreachable = Cluster::start(
        "unreachable",
        &[
            "shared_preload_libraries = 'idgen'",
            "idgen.worker_id = auto",
            &format!(
                "idgen.registry = 'host=127.0.0.1 port={} dbname=postgres user=postgres connect_timeout=2'",
                gone.port()
            ),
        ],
    );
    unreachable.create_db_with_idgen("postgres");
    let mut client = unreachable.connect("postgres");
    let code = wait_for("08001", Duration::from_secs(20), || {
        let code = sqlstate(client.query_one("SELECT snowflake_nextval()", &[]));
        (code != "55000").then_some(code)
    });
    assert_eq!(code, "08001");

    // A registry database without idgen: 42883 with a hint to create it.
    let plain = Cluster::start("plain", &[]);
    let no_ext = node(&plain, "noext", &["idgen.worker_id = auto"]);
    let e = wait_for("42883", Duration::from_secs(20), || {
        let e = db_error(
            no_ext
                .connect("postgres")
                .query_one("SELECT snowflake_nextval()", &[]),
        );
        (e.code().code() == "42883").then_some(e)
    });
    assert!(
        e.hint().unwrap_or("").contains("CREATE EXTENSION idgen"),
        "{e:?}"
    );
    assert!(nothing_issued(&no_ext));

    // A role without idgen_registry: 42501; granted, the node recovers by itself.
    let reg = registry("reg_priv");
    reg.connect("postgres")
        .batch_execute("CREATE ROLE node LOGIN")
        .unwrap();
    let setting = registry_setting(&reg, "node");
    let n = Cluster::start(
        "priv",
        &[
            "shared_preload_libraries = 'idgen'",
            setting.as_str(),
            "idgen.worker_id = auto",
            FAST[0],
            FAST[1],
        ],
    );
    n.create_db_with_idgen("postgres");
    let e = wait_for("42501", Duration::from_secs(20), || {
        let e = db_error(
            n.connect("postgres")
                .query_one("SELECT snowflake_nextval()", &[]),
        );
        (e.code().code() == "42501").then_some(e)
    });
    assert!(
        e.hint().unwrap_or("").contains("GRANT idgen_registry"),
        "{e:?}"
    );
    assert!(nothing_issued(&n));
    reg.connect("postgres")
        .batch_execute("GRANT idgen_registry TO node")
        .unwrap();
    held_worker(&n, Duration::from_secs(20));
    assert!(draw(&n, 10).len() == 10);
    // The role can do nothing else on the registry.
    let mut as_node = reg.connect_as("postgres", "node");
    assert_eq!(
        sqlstate(as_node.query("SELECT * FROM idgen_registry_lease", &[])),
        "42501"
    );
}

/// README ("Replicas and failover"): on a standby both generators fail with 25006, as
/// `nextval()` does. A standby of a registry node (`idgen.worker_id = auto`, as every Patroni
/// replica of the registry configuration) never claims a worker id (its registry client starts
/// when recovery ends). `snowflake_nextval()` used to check the worker id first and failed with
/// 55000 "this server has no worker id from the registry yet", whose hint sent the user waiting
/// for a registry a standby never asks; found by the Patroni recipe's test (patroni.rs).
#[test]
fn a_standby_of_a_registry_node_refuses_snowflake_ids_with_25006() {
    let reg = registry("reg_standby_25006");
    let primary = node(&reg, "reg_primary_25006", &["idgen.worker_id = auto"]);
    held_worker(&primary, Duration::from_secs(20));
    let standby = Cluster::standby_of(&primary, "standby_25006", &["idgen.node_name = 'standby'"]);
    let mut c = standby.connect("postgres");
    let mut got = Vec::new();
    for sql in [
        "SELECT snowflake_nextval()",
        "SELECT snowflake_nextvals(2) LIMIT 1",
        "SELECT segment_nextval('order_no')",
    ] {
        let code = match c.query_one(sql, &[]) {
            Ok(r) => format!("returned {}", r.get::<_, i64>(0)),
            Err(e) => e
                .as_db_error()
                .map(|d| format!("{}: {}", d.code().code(), d.message()))
                .unwrap_or_else(|| e.to_string()),
        };
        got.push((sql, code));
    }
    let wrong: Vec<String> = got
        .iter()
        .filter(|(_, code)| !code.starts_with("25006"))
        .map(|(sql, code)| format!("{sql}: {code}"))
        .collect();
    assert!(
        wrong.is_empty(),
        "on a standby of a registry node, not 25006:\n{}",
        wrong.join("\n")
    );
}
