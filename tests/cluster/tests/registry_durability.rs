//! The registry's side of the fault model (DESIGN.md §6 "Fault model"), against real servers:
//! a registry grants worker ids and hands out global ranges only while it can show that it
//! keeps the commits it acknowledges (a synchronous standby streaming, or its operator's
//! declaration of a single durable server, with `fsync` and `synchronous_commit` on), and it
//! bounds what a member sends: leases, final reservations, a global segment's
//! start; and a node talks to a registry off its machine only over TLS.

use std::thread;
use std::time::{Duration, Instant};

use idgen_cluster_tests::registry::{
    auto_fast, direct_hello, failure_text, held_worker, intruder, node, registry, registry_setting,
    state_of, DIRECT_CLAIM, DURABLE,
};
use idgen_cluster_tests::{db_error, sqlstate, wait_for, Cluster, One, STANDBY_NAME};
use postgres::Client;

/// The fleet layout of the direct calls below: epoch 2024-01-01, 10 worker bits, 12 sequence
/// bits, 1 ms ticks.
const EPOCH_MS: i64 = 1_704_067_200_000;

/// A registry with `fsync` but neither a synchronous standby nor the declaration refuses a
/// node's claim and a global segment's range with 55000 and says why; the node's status shows
/// it. A session cannot declare it (the setting is a reload setting), a role whose
/// `synchronous_commit` is `off` is refused even after the operator's declaration, and the
/// declaration, reloaded, lets the waiting node in.
#[test]
fn a_registry_that_cannot_show_it_keeps_commits_grants_and_hands_out_nothing() {
    let reg = Cluster::with_idgen(
        "dur_plain",
        0,
        &["fsync = on", "idgen.registry_max_lease = 2s"],
    );
    let n = node(&reg, "dur_plain_n", &auto_fast(&[]));
    let mut client = n.connect("postgres");
    let (state, worker, error) = wait_for("a refused claim", Duration::from_secs(20), || {
        let s = state_of(&n);
        s.2.is_some().then_some(s)
    });
    assert_ne!(state, "held", "{worker:?}");
    let error = error.unwrap();
    assert!(
        error.contains("cannot show that it keeps the commits it acknowledges"),
        "{error}"
    );

    // A global segment: created (creation hands out nothing), its first range refused.
    client
        .batch_execute("SELECT segment_create('dur_g', scope => 'global')")
        .unwrap();
    let e = db_error(client.query_one("SELECT segment_nextval('dur_g')", &[]));
    assert!(
        e.message().contains("cannot show") || e.detail().unwrap_or("").contains("cannot show"),
        "{e:?}"
    );

    // No session can declare it: the setting is read from the configuration only.
    let mut r = reg.connect("postgres");
    assert_eq!(
        sqlstate(r.batch_execute("SET idgen.registry_single_server = on")),
        "55P02"
    );

    // The operator declares it: the node gets its worker id.
    r.batch_execute("ALTER SYSTEM SET idgen.registry_single_server = on")
        .unwrap();
    r.batch_execute("SELECT pg_reload_conf()").unwrap();
    let w = held_worker(&n, Duration::from_secs(20));
    assert_eq!(
        client.one::<i64>("SELECT segment_nextval('dur_g')"),
        1,
        "worker {w}"
    );

    // A member whose synchronous_commit is off is refused, declaration or not.
    r.batch_execute(
        "CREATE ROLE lazy LOGIN IN ROLE idgen_registry; ALTER ROLE lazy SET synchronous_commit = off",
    )
    .unwrap();
    let mut lazy = reg.connect_as("postgres", "lazy");
    let e = db_error(lazy.query_one(
        DIRECT_CLAIM,
        &[
            &"lazy-node",
            &"inc",
            &"s".repeat(64),
            &"sys",
            &1i32,
            &None::<i32>,
            &EPOCH_MS,
            &10i32,
            &12i32,
            &1i32,
        ],
    ));
    assert_eq!(e.code().code(), "55000", "{e:?}");
    assert!(
        e.detail()
            .unwrap_or("")
            .contains("synchronous_commit is off"),
        "{e:?}"
    );
}

/// A registry with a synchronous standby streaming grants without any declaration.
#[test]
fn a_registry_with_a_synchronous_standby_grants() {
    let reg = Cluster::with_idgen(
        "dur_sync",
        0,
        &["fsync = on", "idgen.registry_max_lease = 2s"],
    );
    let _standby = Cluster::standby_of(&reg, "dur_sync_standby", &[]);
    let mut r = reg.connect("postgres");
    r.batch_execute(&format!(
        "ALTER SYSTEM SET synchronous_standby_names = '{STANDBY_NAME}'"
    ))
    .unwrap();
    r.batch_execute("SELECT pg_reload_conf()").unwrap();
    wait_for("a synchronous standby", Duration::from_secs(20), || {
        r.one::<bool>(
            "SELECT EXISTS (SELECT FROM pg_stat_replication WHERE sync_state = 'sync' \
             AND state = 'streaming')",
        )
        .then_some(())
    });
    let n = node(&reg, "dur_sync_n", &auto_fast(&[]));
    held_worker(&n, Duration::from_secs(20));
}

/// S8: a member stores no lease and no renewal interval beyond what the registry grants
/// (`idgen.registry_max_lease` on the registry, 2 s here; before, 2^31 - 1 ms made the next
/// probation last weeks); a node cannot ask for more than 120 s either.
#[test]
fn a_lease_beyond_the_registrys_longest_is_refused() {
    let reg = registry("dur_lease");
    let mut member = intruder(&reg);
    direct_hello(&mut member, "n1");
    let claim = |lease: i32, renew: i32| {
        format!(
            "SELECT * FROM idgen_registry_claim('n1', 'inc1', repeat('a', 64), 'sys', 1, NULL, \
             {EPOCH_MS}, 10, 12, 1, {lease}, {renew}, 0, 5432)"
        )
    };
    for (lease, renew) in [
        (2_147_483_647, 200),
        (2001, 200),
        (2000, 2_147_483_647),
        (2000, 700),
        (99, 10),
    ] {
        assert_eq!(
            sqlstate(member.batch_execute(&claim(lease, renew))),
            "22023",
            "lease {lease} ms, renewals every {renew} ms"
        );
    }
    // Nothing was recorded; the longest lease the registry grants is granted.
    let mut r = reg.connect("postgres");
    assert_eq!(r.one::<i64>("SELECT count(*) FROM idgen_registry_lease"), 0);
    member.batch_execute(&claim(2000, 600)).unwrap();
    let stored: i32 = r.one("SELECT max(lease_ms) FROM idgen_registry_lease");
    assert_eq!(stored, 2000);

    // The node's own setting stops at 120 s.
    let out = Cluster::init("dur_lease_node", &[]);
    out.append_settings(&[
        "shared_preload_libraries = 'idgen'",
        "idgen.worker_id = auto",
        &registry_setting(&reg, "postgres"),
        "idgen.registry_lease = 121s",
    ]);
    let started = out.pg_ctl_start();
    assert!(!started.status.success(), "a 121 s lease was accepted");
    assert!(out.log().contains("idgen.registry_lease"), "{}", out.log());
}

/// S7: a member releases its lease with a final reservation far in the future; the registry
/// keeps the released tick at the lease's fence + 1, so the worker id is not burned for later
/// holders (before, a forged fence or release put it at 2^62 and the next `auto` node failed
/// with 22003), and a real node takes it and issues ids.
#[test]
fn a_release_cannot_burn_a_worker_id_with_a_forged_final_tick() {
    let reg = registry("dur_fence");
    let mut member = intruder(&reg);
    direct_hello(&mut member, "forger");
    let secret = "b".repeat(64);
    let row = member
        .query_one(
            "SELECT * FROM idgen_registry_claim('forger', 'inc1', $1::text, 'sys', 1, 0, \
             1704067200000, 10, 12, 1, 2000, 200, 0, 5432)",
            &[&secret],
        )
        .unwrap();
    let worker: i32 = row.get("worker_id");
    let fence: i64 = row.get("fence_tick");
    let released: bool = member
        .query_one(
            "SELECT idgen_registry_release($1::integer, 'inc1', $2::text, 4611686018427387904)",
            &[&worker, &secret],
        )
        .unwrap()
        .get(0);
    assert!(released);
    let mut r = reg.connect("postgres");
    let kept: i64 = r.one(&format!(
        "SELECT released_tick FROM idgen_registry_lease WHERE worker_id = {worker}"
    ));
    assert!(
        kept <= fence + 1,
        "the forged final tick was kept: {kept} against the lease's fence {fence}"
    );
    let n = node(&reg, "dur_fence_n", &["idgen.worker_id = 0"]);
    assert_eq!(held_worker(&n, Duration::from_secs(20)), worker);
    let id: i64 = n.connect("postgres").one("SELECT snowflake_nextval()");
    assert!(id > 0);
}

/// S11: `segment_create(..., scope => 'global', start => N)` of a name the registry has with
/// numbers below N is refused (42P07), instead of handing those numbers out; a start at or
/// below the registry's next number is kept.
#[test]
fn a_global_segment_asked_to_start_above_the_registrys_numbers_is_refused() {
    let reg = registry("dur_start");
    // Any member may declare the name first.
    let mut member = intruder(&reg);
    member
        .batch_execute("SELECT * FROM idgen_registry_segment_create('orders', 1, 100, 'squatted')")
        .unwrap();
    let n = node(&reg, "dur_start_n", &[&DURABLE[1], "idgen.worker_id = 3"]);
    let mut c = n.connect("postgres");
    let e = db_error(
        c.batch_execute("SELECT segment_create('orders', scope => 'global', start => 1000000)"),
    );
    assert_eq!(e.code().code(), "42P07", "{e:?}");
    assert!(e.message().contains("below the start 1000000"), "{e:?}");
    // Nothing was declared on the node either.
    assert!(!c.one::<bool>("SELECT EXISTS (SELECT FROM idgen_segment WHERE name = 'orders')"));
    c.batch_execute("SELECT segment_create('orders', scope => 'global', start => 1)")
        .unwrap();
    assert_eq!(c.one::<i64>("SELECT segment_nextval('orders')"), 1);
}

/// S12: a registry that is not on a loopback address or a Unix socket needs `sslmode=require`
/// or stronger; without it the server does not start, and its log says why (before, the
/// holder secrets crossed the network in clear under libpq's default `prefer`). With TLS
/// required, or on this machine, it starts.
#[test]
fn a_registry_off_this_machine_without_tls_is_refused_at_start() {
    for (registry, starts) in [
        ("host=10.0.0.11 port=5432 dbname=ids user=idgen_node", false),
        (
            "host=registry.example hostaddr=10.0.0.11 sslmode=prefer",
            false,
        ),
        ("host=127.0.0.1,10.0.0.11 sslmode=disable", false),
        ("host=10.0.0.11 port=5432 dbname=ids sslmode=require", true),
        ("host=127.0.0.1 port=5432 dbname=ids", true),
    ] {
        let c = Cluster::init("dur_tls", &[]);
        c.append_settings(&[
            "shared_preload_libraries = 'idgen'",
            "idgen.worker_id = auto",
            &format!("idgen.registry = '{registry}'"),
        ]);
        let out = c.pg_ctl_start();
        assert_eq!(out.status.success(), starts, "{registry}: {}", c.log());
        if !starts {
            assert!(
                c.log().contains("needs sslmode=require or stronger"),
                "{registry}: {}",
                c.log()
            );
        }
    }
}

/// A registry whose configuration commits with `synchronous_commit = remote_write` (a common
/// latency setting) still grants: idgen's session raises it to `on`, which the registry's
/// durability check asks for.
#[test]
fn a_registry_configured_with_remote_write_still_grants() {
    let reg = Cluster::with_idgen(
        "dur_rw",
        0,
        &[
            DURABLE[0],
            DURABLE[1],
            DURABLE[2],
            "synchronous_commit = remote_write",
        ],
    );
    let n = node(&reg, "dur_rw_n", &auto_fast(&[]));
    held_worker(&n, Duration::from_secs(20));
}

/// The fleet layout of the direct claims: idgen's default epoch (2024-01-01), 10 worker bits,
/// 12 sequence bits, 1 ms ticks.
const LAYOUT: &str = "1704067200000, 10, 12, 1";

/// A failed statement's SQLSTATE, if the server raised it.
fn code_of(e: &postgres::Error) -> Option<String> {
    e.code().map(|c| c.code().to_owned())
}

/// A direct claim of the registry (superuser), with the fleet layout [`LAYOUT`]: returns the
/// worker id, floor and fence, or the error. Say [`direct_hello`] first.
#[allow(clippy::too_many_arguments)]
fn claim(
    r: &mut Client,
    node: &str,
    incarnation: &str,
    secret: &str,
    system: &str,
    timeline: i32,
    worker: Option<i32>,
    lease_ms: i32,
    renew_ms: i32,
) -> Result<(i32, i64, i64, Option<String>), postgres::Error> {
    r.query_one(
        &format!(
            "SELECT worker_id, floor_tick, fence_tick, previous_holder FROM idgen_registry_claim(\
             $1::text, $2::text, $3::text, $4::text, $5::integer, $6::integer, {LAYOUT}, \
             $7::integer, $8::integer, 0::double precision, 5432)"
        ),
        &[
            &node,
            &incarnation,
            &secret,
            &system,
            &timeline,
            &worker,
            &lease_ms,
            &renew_ms,
        ],
    )
    .map(|row| (row.get(0), row.get(1), row.get(2), row.get(3)))
}

/// A holder releases its worker id with a final
/// reservation ahead of the clock (it reserved ticks up to its fence, the furthest the registry
/// allowed it: a holder's ids are never past its fence) and with one far past its fence (a
/// lie, or a bug). Pinned: the registry records the first as it is and caps the second at the
/// fence plus one, never lower than the ticks the holder may have used: the next holder of the
/// worker id (another server) is refused (55P03) until the registry's clock has passed the
/// released reservation, and then starts above every tick the released holder may have used
/// (its floor above the holder's fence). The renewal of 0.8.0 (with a known fence and
/// attested standbys) is gone (42883).
#[test]
fn the_next_holder_of_a_released_worker_id_starts_above_the_released_reservation() {
    let reg = registry("review2_release_reg");
    let mut r = reg.connect("postgres");
    direct_hello(&mut r, "p");
    let (p_secret, q_secret, x_secret) = ("a1".repeat(32), "b2".repeat(32), "c3".repeat(32));
    assert_eq!(
        sqlstate(r.query(
            "SELECT * FROM idgen_registry_renew(5, 'inc-p', $1::text, 2000, 200, \
             0::double precision, 0::bigint, '{s}'::text[])",
            &[&p_secret],
        )),
        "42883",
        "the renewal with a known fence and attested standbys"
    );
    for (holder, secret, final_past_fence) in [("p", &p_secret, 1_i64), ("q", &q_secret, 1_000_000)]
    {
        let incarnation = format!("inc-{holder}");
        let (w, _, fence, _) = claim_when_free(&mut r, holder, &incarnation, secret, "sys", 5);
        assert_eq!(w, 5);
        let renewed: i64 = r
            .query_one(
                "SELECT fence_tick FROM idgen_registry_renew(5, $1::text, $2::text, 2000, 200, \
                 0::double precision)",
                &[&incarnation, secret],
            )
            .unwrap_or_else(|e| panic!("{holder}'s renewal: {}", failure_text(&e)))
            .get(0);
        assert!(
            renewed >= fence,
            "{holder}'s fence moved back: {fence} -> {renewed}"
        );
        let final_tick = renewed + final_past_fence;
        let released: bool = r
            .query_one(
                "SELECT idgen_registry_release(5, $1::text, $2::text, $3::bigint)",
                &[&incarnation, secret, &final_tick],
            )
            .unwrap_or_else(|e| panic!("{holder}'s release: {}", failure_text(&e)))
            .get(0);
        assert!(released, "{holder}'s release");
        let released_tick: Option<i64> =
            r.one("SELECT released_tick FROM idgen_registry_lease WHERE worker_id = 5");
        assert_eq!(
            released_tick,
            Some(renewed + 1),
            "{holder}'s release at final tick {final_tick} (fence {renewed})"
        );

        // x: another server, at once: the released reservation is ahead of the clock.
        let x_incarnation = format!("inc-x-after-{holder}");
        let first = claim(
            &mut r,
            "x",
            &x_incarnation,
            &x_secret,
            "sys-other",
            1,
            Some(5),
            2000,
            200,
        );
        assert_eq!(
            first.as_ref().err().and_then(code_of).as_deref(),
            Some("55P03"),
            "x's claim of worker id 5 right after {holder}'s release up to tick {renewed}: {:?}",
            first.map_err(|e| failure_text(&e))
        );
        let (xw, x_floor, _, x_prev) =
            claim_when_free(&mut r, "x", &x_incarnation, &x_secret, "sys-other", 5);
        assert_eq!(xw, 5);
        assert!(
            x_floor > renewed,
            "x's floor {x_floor} (after {x_prev:?}) is not above tick {renewed}, the fence of \
             {holder}, which released at final tick {final_tick}"
        );
        // x gives the id back for the next round, at its floor (it issued nothing).
        let released: bool = r
            .query_one(
                "SELECT idgen_registry_release(5, $1::text, $2::text, $3::bigint)",
                &[&x_incarnation, &x_secret, &x_floor],
            )
            .unwrap_or_else(|e| panic!("x's release: {}", failure_text(&e)))
            .get(0);
        assert!(released, "x's release");
    }
}

/// [`claim`] of worker id `worker` with a 2 s lease, tried again while the registry answers
/// 55P03 (the id's last holder's ticks are ahead of the clock), for at most 20 s.
fn claim_when_free(
    r: &mut Client,
    node: &str,
    incarnation: &str,
    secret: &str,
    system: &str,
    worker: i32,
) -> (i32, i64, i64, Option<String>) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match claim(
            r,
            node,
            incarnation,
            secret,
            system,
            1,
            Some(worker),
            2000,
            200,
        ) {
            Ok(v) => break v,
            Err(e) if code_of(&e).as_deref() == Some("55P03") && Instant::now() < deadline => {
                thread::sleep(Duration::from_millis(100));
            }
            Err(e) => panic!("{node}'s claim: {}", failure_text(&e)),
        }
    }
}

/// No integer overflow from a lease. The
/// registry grants leases of 100 ms up to its `idgen.registry_max_lease` (2 s here), renewed
/// at most a third of the lease apart, and refuses anything else before any arithmetic with
/// it (22023): a claim with a lease of 2000000000 ms (about 23 days, within `integer`) or one
/// millisecond above the longest, a renewal asking for a longer lease, or renewals further
/// apart than a third of the lease. A lease of exactly the longest is granted, renewed and
/// released, its fence within that lease of its floor.
#[test]
fn a_lease_longer_than_the_registry_max_lease_is_refused() {
    let reg = registry("review2_long_reg");
    let mut r = reg.connect("postgres");
    direct_hello(&mut r, "long");
    let longest: i64 =
        r.one("SELECT setting::bigint FROM pg_settings WHERE name = 'idgen.registry_max_lease'");
    let longest = i32::try_from(longest).unwrap();
    let secret = "d4".repeat(32);
    for (lease, renew) in [(2_000_000_000, 10_000), (longest + 1, 200), (99, 33)] {
        let refused = claim(
            &mut r, "long", "inc-long", &secret, "sys", 1, None, lease, renew,
        );
        assert_eq!(
            sqlstate(refused),
            "22023",
            "a claim of a {lease} ms lease (longest {longest} ms)"
        );
    }
    let refused = claim(
        &mut r,
        "long",
        "inc-long",
        &secret,
        "sys",
        1,
        None,
        longest,
        (longest + 2) / 3 + 1,
    );
    assert_eq!(
        sqlstate(refused),
        "22023",
        "renewals further apart than a third of the lease"
    );
    let none: i64 = r.one("SELECT count(*) FROM idgen_registry_lease");
    assert_eq!(none, 0, "a refused claim left a lease");

    let (w, floor, fence, _) = claim(
        &mut r,
        "long",
        "inc-long",
        &secret,
        "sys",
        1,
        None,
        longest,
        longest / 3,
    )
    .unwrap_or_else(|e| panic!("a claim with a {longest} ms lease: {}", failure_text(&e)));
    assert!(
        fence >= floor && fence <= floor + i64::from(longest),
        "floor {floor}, fence {fence} of a {longest} ms lease (1 ms ticks)"
    );
    let renew = "SELECT fence_tick FROM idgen_registry_renew($1::integer, 'inc-long', $2::text, \
                 $3::integer, $4::integer, 0::double precision)";
    for (lease, every) in [
        (2_000_000_000, 10_000),
        (longest + 1, 200),
        (longest, longest),
    ] {
        assert_eq!(
            sqlstate(r.query(renew, &[&w, &secret, &lease, &every])),
            "22023",
            "a renewal of a {lease} ms lease, every {every} ms (longest {longest} ms)"
        );
    }
    let renewed: i64 = r
        .query_one(renew, &[&w, &secret, &longest, &(longest / 3)])
        .unwrap_or_else(|e| panic!("the renewal of a {longest} ms lease: {}", failure_text(&e)))
        .get(0);
    assert!(
        renewed >= fence,
        "the renewal moved the fence back: {fence} -> {renewed}"
    );
    let released: bool = r
        .query_one(
            "SELECT idgen_registry_release($1::integer, 'inc-long', $2::text, $3::bigint)",
            &[&w, &secret, &(floor + 10)],
        )
        .unwrap_or_else(|e| panic!("the release of a {longest} ms lease: {}", failure_text(&e)))
        .get(0);
    assert!(released);
}
