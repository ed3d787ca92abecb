//! Trust across servers (DESIGN.md §6) against real servers: what one node, one role
//! in `idgen_registry` or one reader of settings and logs can do to another node's numbers,
//! lease and secrets through the registry.
//!
//! * a global segment's give-back never returns a number another node holds: after the
//!   interleaving A's range, B's range above it, A's prefetched range above that (A's range, B's range above it, A's prefetched range above that),
//!   A's give-back, at a clean stop or through idleness, leaves the registry's mark at or above
//!   B's range, and no number is drawn on both nodes;
//! * leases and global segments change only by their holder: a second role in
//!   `idgen_registry` that knows a holder's incarnation but not its secret is refused (42501 or
//!   55006) by renew, release and claim (the same incarnation, the same system on a later
//!   timeline, another server), and cannot open or complete a recovery (the operator's);
//!   global give-back is gone; nothing changes, the holder keeps issuing, and no refusal names
//!   the holder's incarnation;
//! * secrets stay secret: `idgen.registry` (with its password) is hidden from a plain role's
//!   `SHOW`, `current_setting` and `pg_settings`, and a refused value's password appears in no
//!   log line and no error;
//! * one live lease per worker id, whatever carries a node's name: a base-backup copy, a
//!   restored and promoted copy, or a standby streaming under the primary's node name and
//!   promoted while the primary renews never takes the live node's lease; a member reusing a
//!   node's incarnation does not block its reclaim; and a renewal without the holder's secret
//!   cannot raise its fence.

use std::thread;
use std::time::{Duration, Instant};

use idgen_cluster_tests::registry::{
    auto_fast, client_pid, direct_hello, draw, draw_segment, failure_text, held_worker, intruder,
    node, refused, registry, repeated, segment_mark, signal, state_of, status, Stopped,
    DIRECT_CLAIM, FAST,
};
use idgen_cluster_tests::{column, sqlstate, twitter, wait_for, Cluster, One};
use postgres::types::ToSql;
use postgres::Client;

/// The current range of segment `g` that `node` has cached, from `segment_status()`.
fn current_range(node: &Cluster) -> (i64, i64) {
    let row = node
        .connect("postgres")
        .query_one(
            "SELECT current_first, current_last FROM segment_status() WHERE name = 'g'",
            &[],
        )
        .unwrap();
    let (first, last): (Option<i64>, Option<i64>) = (row.get(0), row.get(1));
    (
        first.expect("a cached current range"),
        last.expect("a cached current range"),
    )
}

/// The interleaving that once duplicated numbers, up to A's give-back: a registry, nodes A and B, global
/// segment `g` (step 100); A draws 1 (A holds 1..100), B draws 1 (B holds the range above), A
/// draws 30 more, which prefetches A's next range above B's. Returns the registry, A, B, every
/// number drawn so far, B's range and the registry's mark before the give-back.
fn interleave(
    tag: &str,
    a_settings: &[&str],
) -> (Cluster, Cluster, Cluster, Vec<i64>, (i64, i64), i64) {
    let reg = registry(&format!("{tag}_reg"));
    let a = node(&reg, &format!("{tag}_a"), a_settings);
    let b = node(&reg, &format!("{tag}_b"), &[]);
    a.connect("postgres")
        .batch_execute("SELECT segment_create('g', step => 100, scope => 'global')")
        .unwrap();
    let mut drawn = draw_segment(&a, "g", 1);
    assert_eq!(drawn, [1], "A's first number");
    drawn.extend(draw_segment(&b, "g", 1));
    let b_range = current_range(&b);
    assert!(
        b_range.0 > 100 && drawn[1] == b_range.0,
        "B's range {b_range:?} lies above A's first one (B drew {})",
        drawn[1]
    );
    drawn.extend(draw_segment(&a, "g", 30));
    // Past 10% of its range A asked for the next one, which lies above B's.
    let before = wait_for("A's prefetched next range", Duration::from_secs(20), || {
        let next: Option<i64> = a
            .connect("postgres")
            .one("SELECT next_first FROM segment_status() WHERE name = 'g'");
        let mark = segment_mark(&reg, "g");
        (next.is_some() && mark > b_range.1).then_some(mark)
    });
    (reg, a, b, drawn, b_range, before)
}

/// After A let go of its ranges: the registry's mark did not move (a global segment gives
/// nothing back), and 150 draws on A and 60 on B repeat nothing drawn before or by the other
/// node.
fn assert_no_number_twice(
    reg: &Cluster,
    a: &Cluster,
    b: &Cluster,
    mut drawn: Vec<i64>,
    b_range: (i64, i64),
    before: i64,
    after: i64,
) {
    assert_eq!(
        after, before,
        "the registry's mark moved when A let go of its ranges, with B holding {b_range:?}"
    );
    drawn.extend(draw_segment(a, "g", 150));
    drawn.extend(draw_segment(b, "g", 60));
    let twice = repeated(&drawn);
    assert!(
        twice.is_empty(),
        "{} numbers drawn twice ({:?} ...); the registry's mark went from {before} to {after} at \
         A's give-back, with B holding {b_range:?}",
        twice.len(),
        &twice[..twice.len().min(10)]
    );
    assert!(
        after >= b_range.1,
        "the registry's mark went from {before} to {after} at A's give-back, below B's range \
         {b_range:?}"
    );
    assert!(
        segment_mark(reg, "g") >= *drawn.iter().max().unwrap(),
        "the registry's mark is below a number drawn"
    );
}

/// Global give-backs once handed out a number twice: A
/// holds 1..100, B the range above, A has prefetched the range above B's; A stops cleanly.
/// Nothing is given back (the registry's mark stays where A's last range put it), and after A
/// restarts 150 draws on A and 60 on B repeat no number (the first draws included).
#[test]
fn a_global_segment_gives_nothing_back_at_a_clean_stop() {
    let (reg, a, b, drawn, b_range, before) = interleave("trust_gb", &[]);
    a.stop("fast");
    let after = segment_mark(&reg, "g");
    a.start_server();
    assert_no_number_twice(&reg, &a, &b, drawn, b_range, before, after);
}

/// As above, but 'g' leaves A's cache through idleness (`idgen.segment_worker_idle_timeout =
/// 2s`) while A runs: the mark stays, no number repeats.
#[test]
fn a_global_segment_gives_nothing_back_when_it_leaves_the_cache() {
    let (reg, a, b, drawn, b_range, before) =
        interleave("trust_idle", &["idgen.segment_worker_idle_timeout = '2s'"]);
    // Left alone, 'g' leaves A's cache; A keeps running.
    wait_for("'g' to leave A's cache", Duration::from_secs(30), || {
        let cached: i64 = a
            .connect("postgres")
            .one("SELECT count(*) FROM segment_cache_status() WHERE name = 'g'");
        (cached == 0).then_some(())
    });
    let after = segment_mark(&reg, "g");
    assert_no_number_twice(&reg, &a, &b, drawn, b_range, before, after);
}

/// A refused statement's error; panics naming `what` when it succeeded or failed without a
/// server error.
fn refusal(
    client: &mut Client,
    what: &str,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> postgres::error::DbError {
    match client.query(sql, params) {
        Ok(rows) => panic!("{what}: accepted ({} rows), expected a refusal", rows.len()),
        Err(e) => e
            .as_db_error()
            .cloned()
            .unwrap_or_else(|| panic!("{what}: not a server error: {e}")),
    }
}

/// A's lease as the registry has it: what must not change under an intruder (the fence and the
/// expiry move with A's own renewals, the fence never back).
#[derive(Debug, PartialEq)]
struct Lease {
    node_name: String,
    incarnation: String,
    system_identifier: String,
    timeline: i32,
    start_tick: i64,
    released_tick: Option<i64>,
}

fn lease_of(reg: &Cluster, worker: i32) -> (Lease, i64) {
    let row = reg
        .connect("postgres")
        .query_one(
            "SELECT node_name, incarnation, system_identifier, timeline, start_tick, \
             released_tick, fence_tick FROM idgen_registry_lease WHERE worker_id = $1",
            &[&worker],
        )
        .unwrap();
    (
        Lease {
            node_name: row.get(0),
            incarnation: row.get(1),
            system_identifier: row.get(2),
            timeline: row.get(3),
            start_tick: row.get(4),
            released_tick: row.get(5),
        },
        row.get(6),
    )
}

/// A role in `idgen_registry` that knows A's incarnation but not its secret, after its own
/// hello: renew, release and claim (A's incarnation; A's system on a later timeline, as a
/// promoted copy of A would; another server) aimed at A's lease are refused with 42501 or
/// 55006, opening or completing a recovery (the operator's functions) with 42501; no refusal
/// names A's incarnation, global give-back does not exist, the lease table is not writable;
/// A's lease and its global segment's mark are unchanged, no recovery is open, and A keeps its
/// lease, issues ids and draws on from its range.
#[test]
fn registry_functions_aimed_at_another_nodes_lease_or_segment_are_refused() {
    let reg = registry("trust_intruder_reg");
    let mut settings = vec![
        "idgen.worker_id = auto",
        "idgen.segment_worker_idle_timeout = '10min'",
    ];
    settings.extend(FAST);
    let a = node(&reg, "trust_intruder_a", &settings);
    let worker = held_worker(&a, Duration::from_secs(20));
    a.connect("postgres")
        .batch_execute("SELECT segment_create('g', step => 100, scope => 'global')")
        .unwrap();
    let drawn = draw_segment(&a, "g", 5);
    assert_eq!(drawn, [1, 2, 3, 4, 5]);

    let (lease, fence_before) = lease_of(&reg, worker);
    assert_eq!(lease.released_tick, None);
    let mark = segment_mark(&reg, "g");
    let mut r = reg.connect("postgres");
    let layout = r
        .query_one(
            "SELECT epoch_unix_ms, worker_bits, sequence_bits, time_unit_ms FROM idgen_registry_fleet",
            &[],
        )
        .unwrap();
    let (epoch, worker_bits, sequence_bits, tick_ms): (i64, i32, i32, i32) =
        (layout.get(0), layout.get(1), layout.get(2), layout.get(3));
    // The intruder knows A's incarnation (leaked somehow) but not its secret.
    let mut intruder = intruder(&reg);
    direct_hello(&mut intruder, "intruder");
    // A guess of the right shape (64 hex digits, as a node's secret), so that only its value
    // is wrong.
    let guess = "0123456789abcdef".repeat(4);
    let guess = guess.as_str();
    let later_timeline = lease.timeline + 1;
    let other_system = format!("{}9", lease.system_identifier);
    let claim = DIRECT_CLAIM;
    let attempts: Vec<(&str, &str, Vec<&(dyn ToSql + Sync)>)> = vec![
        (
            "renew of A's lease with a guessed secret",
            "SELECT * FROM idgen_registry_renew($1::integer, $2::text, $3::text, 2000, 200, \
             0::double precision)",
            vec![&worker, &lease.incarnation, &guess],
        ),
        (
            "release of A's lease with a guessed secret",
            "SELECT idgen_registry_release($1::integer, $2::text, $3::text, 0::bigint)",
            vec![&worker, &lease.incarnation, &guess],
        ),
        (
            "claim of A's worker id as A's incarnation with a guessed secret",
            claim,
            vec![
                &lease.node_name,
                &lease.incarnation,
                &guess,
                &lease.system_identifier,
                &lease.timeline,
                &worker,
                &epoch,
                &worker_bits,
                &sequence_bits,
                &tick_ms,
            ],
        ),
        (
            "claim of A's worker id from A's system on a later timeline (a promoted copy)",
            claim,
            vec![
                &"intruder",
                &"intruder-incarnation-1",
                &guess,
                &lease.system_identifier,
                &later_timeline,
                &worker,
                &epoch,
                &worker_bits,
                &sequence_bits,
                &tick_ms,
            ],
        ),
        (
            "claim of A's worker id by another server",
            claim,
            vec![
                &"intruder",
                &"intruder-incarnation-2",
                &guess,
                &other_system,
                &lease.timeline,
                &worker,
                &epoch,
                &worker_bits,
                &sequence_bits,
                &tick_ms,
            ],
        ),
        (
            "opening a recovery (the operator's)",
            "SELECT idgen_registry_begin_recovery('opened by an intruder')",
            vec![],
        ),
        (
            "completing a recovery (the operator's)",
            "SELECT * FROM idgen_registry_recover()",
            vec![],
        ),
    ];
    // Global give-back is gone: nobody lowers a global segment's mark.
    assert!(r.one::<bool>("SELECT to_regproc('idgen_registry_segment_give_back') IS NULL"));
    for (what, sql, params) in &attempts {
        let e = refusal(&mut intruder, what, sql, params);
        let code = e.code().code();
        assert!(
            code == "42501" || code == "55006",
            "{what}: SQLSTATE {code}, expected 42501 or 55006: {} (detail {:?})",
            e.message(),
            e.detail()
        );
        let text = format!(
            "{} {} {}",
            e.message(),
            e.detail().unwrap_or(""),
            e.hint().unwrap_or("")
        );
        assert!(
            !text.contains(&lease.incarnation),
            "{what}: the refusal names A's incarnation {}: {text}",
            lease.incarnation
        );
    }
    // Nor the tables behind them.
    let direct = refusal(
        &mut intruder,
        "UPDATE of the lease table",
        "UPDATE idgen_registry_lease SET released_tick = 0",
        &[],
    );
    assert_eq!(direct.code().code(), "42501", "{direct:?}");

    // Nothing changed: A's lease, the segment's mark; A renews and issues.
    std::thread::sleep(Duration::from_secs(1));
    let (after, fence_after) = lease_of(&reg, worker);
    assert_eq!(after, lease, "A's lease changed");
    assert!(fence_after >= fence_before, "A's fence went back");
    assert_eq!(segment_mark(&reg, "g"), mark, "the segment's mark changed");
    assert!(
        r.one::<bool>("SELECT recovery_since IS NULL FROM idgen_registry_server"),
        "a recovery is open"
    );
    let mut ac = a.connect("postgres");
    let (state, held, last_error) = status(&mut ac);
    assert_eq!(
        (state.as_str(), held),
        ("held", Some(worker)),
        "A lost its lease: {last_error:?}"
    );
    let id: i64 = ac.one("SELECT snowflake_nextval()");
    assert_eq!(
        idgen_cluster_tests::twitter::worker_of(id),
        i64::from(worker)
    );
    assert_eq!(draw_segment(&a, "g", 1), [6], "A's range of g is intact");
}

/// `idgen.registry` with a password: a role with only LOGIN sees it in neither `SHOW`,
/// `current_setting` nor `pg_settings` (42501 or no password); a refused value (at a reload, and
/// by ALTER SYSTEM) puts its password in no log line and no error; the node's log never shows
/// the registry's password.
#[test]
fn the_registry_setting_is_hidden_from_plain_roles() {
    let reg = registry("trust_secret_reg");
    // The registry trusts local connections: the password is sent to nobody, but it is text.
    let setting = format!(
        "idgen.registry = 'host=127.0.0.1 port={} dbname=postgres user=postgres password=s3cr3t-pw'",
        reg.port()
    );
    let n = node(&reg, "trust_secret", &[&setting]);
    let mut su = n.connect("postgres");
    let shown: String = su.one("SELECT current_setting('idgen.registry')");
    assert!(
        shown.contains(&format!("port={}", reg.port())),
        "the node's registry setting: {shown}"
    );
    su.batch_execute("CREATE ROLE plain LOGIN").unwrap();

    let mut leaks = Vec::new();
    let mut plain = n.connect_as("postgres", "plain");
    for sql in [
        "SHOW idgen.registry",
        "SELECT current_setting('idgen.registry')",
        "SELECT current_setting('idgen.registry', true)",
        "SELECT row_to_json(s)::text FROM pg_settings s WHERE name = 'idgen.registry'",
    ] {
        match plain.query(sql, &[]) {
            Ok(rows) => {
                for row in rows {
                    let text: Option<String> = row.get(0);
                    if let Some(text) = text.filter(|t| t.contains("s3cr3t-pw")) {
                        leaks.push(format!("password visible to a plain role: {sql} -> {text}"));
                    }
                }
            }
            Err(e) => {
                let code = e.code().map(|c| c.code().to_owned());
                if code.as_deref() != Some("42501") {
                    leaks.push(format!(
                        "{sql}: expected 42501 or a row without the password: {e}"
                    ));
                }
            }
        }
    }

    // A refused value in postgresql.conf, at a reload: its log line has no password.
    n.append_settings(&["idgen.registry = 'host=127.0.0.1 password=hunter2-xyz bogus_option=1'"]);
    su.batch_execute("SELECT pg_reload_conf()").unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    if let Some(line) = n.log().lines().find(|l| l.contains("hunter2-xyz")) {
        leaks.push(format!("password in the server log at a reload: {line}"));
    }

    // The same through ALTER SYSTEM: refused or not, the password is in no error and no log
    // line of idgen's. (The statement's own text is PostgreSQL's to log: not logged here.)
    su.batch_execute("SET log_min_error_statement = panic")
        .unwrap();
    let altered = su.batch_execute(
        "ALTER SYSTEM SET idgen.registry = 'host=127.0.0.1 password=hunter3-xyz bogus_option=1'",
    );
    match altered {
        Ok(()) => {
            su.batch_execute("SELECT pg_reload_conf()").unwrap();
            std::thread::sleep(Duration::from_millis(1500));
        }
        Err(e) => {
            let text = match e.as_db_error() {
                Some(d) => format!(
                    "{} {} {}",
                    d.message(),
                    d.detail().unwrap_or(""),
                    d.hint().unwrap_or("")
                ),
                None => e.to_string(),
            };
            if text.contains("hunter3-xyz") {
                leaks.push(format!("password in ALTER SYSTEM's error: {text}"));
            }
        }
    }
    if let Some(line) = n.log().lines().find(|l| l.contains("hunter3-xyz")) {
        leaks.push(format!(
            "password in the server log after ALTER SYSTEM: {line}"
        ));
    }
    if let Some(line) = n.log().lines().find(|l| l.contains("s3cr3t-pw")) {
        leaks.push(format!("the registry's password in the server log: {line}"));
    }
    assert!(leaks.is_empty(), "{}", leaks.join("\n"));
}

/// A base backup of a live node restored elsewhere and promoted (a later
/// timeline of the same system, as on a staging host) does not take over the node's lease: the
/// registry treats it as any other server (0.9.0 has no succession by promotion at all), so
/// it gets another worker id. The original keeps its worker id and issues ids past several
/// lease lengths. (On 0.4.0 the copy took the lease through the promotion path, and the
/// original was fenced as `lost`.)
#[test]
fn a_restored_and_promoted_copy_of_a_node_does_not_take_its_lease() {
    let reg = registry("reg_staging");
    let prod = node(&reg, "prod", &["idgen.worker_id = auto", FAST[0], FAST[1]]);
    let w = held_worker(&prod, Duration::from_secs(20));
    let incarnation: String = reg.connect("postgres").one(&format!(
        "SELECT incarnation FROM idgen_registry_lease WHERE worker_id = {w}"
    ));
    let before: Vec<i64> = column(
        &mut prod.connect("postgres"),
        "SELECT snowflake_nextval() FROM generate_series(1, 1000)",
    );

    // The copy: a base backup, restored with archive recovery (recovery.signal) so that it
    // ends recovery on a new timeline, as a restore does.
    let copy = Cluster::clone_of(
        &prod,
        "staging",
        &["idgen.node_name = 'staging'", "restore_command = 'false'"],
    );
    copy.write_signal("recovery.signal");
    copy.start_server();
    let mut c = copy.connect("postgres");
    wait_for("the copy to end recovery", Duration::from_secs(30), || {
        (!c.one::<bool>("SELECT pg_is_in_recovery()")).then_some(())
    });
    let timeline =
        |client: &mut Client| client.one::<i32>("SELECT timeline_id FROM pg_control_checkpoint()");
    wait_for(
        "the copy's first checkpoint on its timeline",
        Duration::from_secs(30),
        || {
            c.batch_execute("CHECKPOINT").unwrap();
            (timeline(&mut c) > timeline(&mut prod.connect("postgres"))).then_some(())
        },
    );
    // The copy's registry client claims: it gets another worker id (auto), never prod's.
    let copy_worker = held_worker(&copy, Duration::from_secs(20));
    assert_ne!(
        copy_worker, w,
        "the restored copy took the live node's worker id"
    );

    // Three lease lengths later prod still holds its lease, under the same incarnation.
    std::thread::sleep(Duration::from_secs(6));
    let (state, worker, error) = status(&mut prod.connect("postgres"));
    assert_eq!(
        (state.as_str(), worker),
        ("held", Some(w)),
        "prod lost its lease: {error:?}"
    );
    let holder: String = reg.connect("postgres").one(&format!(
        "SELECT incarnation FROM idgen_registry_lease WHERE worker_id = {w}"
    ));
    assert_eq!(holder, incarnation);
    let after: Vec<i64> = column(
        &mut prod.connect("postgres"),
        "SELECT snowflake_nextval() FROM generate_series(1, 1000)",
    );
    assert!(after.iter().min() > before.iter().max());
}

/// The release at a shutdown uses the connection in hand and never opens a
/// new one: with the registry gone (the client's connection dropped after a failed renewal) a
/// fast shutdown says the lease was not released and does not try to connect. (0.4.0 connected
/// again for the release, through DNS and a connection attempt a shutdown must not wait for.)
#[test]
fn the_release_at_shutdown_never_connects_again() {
    let reg = registry("reg_gone");
    let n = node(&reg, "gone", &["idgen.worker_id = auto", FAST[0], FAST[1]]);
    let w = held_worker(&n, Duration::from_secs(20));
    reg.stop("immediate");
    let mut c = n.connect("postgres");
    wait_for("a failed renewal", Duration::from_secs(10), || {
        (status(&mut c).0 == "renewing").then_some(())
    });
    drop(c);
    n.stop("fast");
    let log = n.log();
    assert!(
        log.contains(&format!(
            "worker id {w} not released (no connection to the registry)"
        )),
        "{log}"
    );
    assert!(!log.contains("could not release"), "{log}");
}

/// A member of `idgen_registry` claims a free worker id under node A's
/// incarnation (with a secret of its own). A's children then restart without the postmaster
/// (`kill -9` of a backend: shared memory is reinitialized, the registry client starts again
/// with the same incarnation and no grant): A's re-claim is not blocked by the intruder's
/// row, and within 20 s A holds a worker id again and issues ids with it. (The intruder says
/// its hello first, as a node does, and is granted the id: incarnations are names, not
/// credentials.)
#[test]
fn a_member_reusing_a_nodes_incarnation_does_not_block_its_reclaim() {
    let reg = registry("review_incarn_reg");
    let a = node(&reg, "review_incarn_a", &auto_fast(&[]));
    let w = held_worker(&a, Duration::from_secs(20));
    let mut r = reg.connect("postgres");
    let row = r
        .query_one(
            "SELECT l.incarnation, l.system_identifier, l.timeline, f.epoch_unix_ms, f.worker_bits, \
             f.sequence_bits, f.time_unit_ms FROM idgen_registry_lease l, idgen_registry_fleet f \
             WHERE l.worker_id = $1",
            &[&w],
        )
        .unwrap();
    let (incarnation, system, timeline): (String, String, i32) =
        (row.get(0), row.get(1), row.get(2));
    let (epoch, worker_bits, sequence_bits, tick_ms): (i64, i32, i32, i32) =
        (row.get(3), row.get(4), row.get(5), row.get(6));
    let mut intruder = intruder(&reg);
    direct_hello(&mut intruder, "intruder");
    let free = w + 5;
    let secret = "0123456789abcdef".repeat(4);
    let claimed = intruder.query(
        DIRECT_CLAIM,
        &[
            &"intruder",
            &incarnation,
            &secret,
            &system,
            &timeline,
            &free,
            &epoch,
            &worker_bits,
            &sequence_bits,
            &tick_ms,
        ],
    );
    let claimed = claimed.map(|rows| rows.len()).map_err(|e| failure_text(&e));
    assert_eq!(
        claimed,
        Ok(1),
        "the intruder's claim of the free worker id {free} as A's incarnation"
    );

    // Until A's renewals have moved its row past the intruder's in the table (a scan for the
    // incarnation then meets the intruder's row first).
    wait_for(
        "A's lease row after the intruder's",
        Duration::from_secs(10),
        || {
            r.one_with::<bool>(
                "SELECT coalesce((SELECT ctid FROM idgen_registry_lease WHERE worker_id = $1) \
             > (SELECT ctid FROM idgen_registry_lease WHERE worker_id = $2), true)",
                &[&w, &free],
            )
            .then_some(())
        },
    );

    // A crash of one backend: the postmaster restarts every child with the same incarnation.
    let mut busy = a.connect("postgres");
    let victim: i32 = busy.one("SELECT pg_backend_pid()");
    signal(victim, "-9");
    drop(busy);
    let mut ac = wait_for(
        "A to accept connections again",
        Duration::from_secs(30),
        || {
            Client::connect(&a.conninfo("postgres"), postgres::NoTls)
                .ok()
                .filter(|_| a.log().contains("all server processes terminated"))
        },
    );
    let outcome = {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let s = status(&mut ac);
            if s.0 == "held" || Instant::now() > deadline {
                break s;
            }
            thread::sleep(Duration::from_millis(100));
        }
    };
    assert_eq!(
        outcome.0, "held",
        "A after its children restarted (it held {w}): {outcome:?}"
    );
    let id = ac
        .query_one("SELECT snowflake_nextval()", &[])
        .unwrap_or_else(|e| panic!("A's id after the restart: {}", failure_text(&e)));
    let id: i64 = id.get(0);
    assert_eq!(Some(twitter::worker_of(id) as i32), outcome.1);
}

/// A member of
/// `idgen_registry` (not the holder, no secret) calls `idgen_registry_renew` of node A's worker
/// id: with a made-up incarnation it is refused (55006, not this incarnation's lease), with A's
/// incarnation (a name, not a credential) and a secret of its own (42501); the renewal of 0.8.0
/// that took a known fence from the caller is gone (42883). Pinned: A's fence stays within a
/// longest lease of the registry's clock (a renewal moves it to the clock plus the holder's
/// lease, nothing the caller names), and A holds its lease and issues ids with it.
#[test]
fn an_unauthenticated_renewal_cannot_raise_another_nodes_fence() {
    let reg = registry("review2_fence_reg");
    let a = node(&reg, "review2_fence_a", &auto_fast(&[]));
    let w = held_worker(&a, Duration::from_secs(20));
    let mut r = reg.connect("postgres");
    let incarnation: String = r.one_with(
        "SELECT incarnation FROM idgen_registry_lease WHERE worker_id = $1",
        &[&w],
    );
    let mut intruder = intruder(&reg);
    let renew = "SELECT * FROM idgen_registry_renew($1::integer, $2::text, repeat('ab', 32), \
                 2000, 200, 0::double precision)";
    assert_eq!(
        sqlstate(intruder.query(renew, &[&w, &"whatever"])),
        "55006",
        "a renewal of A's worker id under a made-up incarnation"
    );
    assert_eq!(
        sqlstate(intruder.query(renew, &[&w, &incarnation])),
        "42501",
        "a renewal of A's worker id under A's incarnation without A's secret"
    );
    assert_eq!(
        sqlstate(intruder.query(
            "SELECT * FROM idgen_registry_renew($1::integer, 'whatever', repeat('ab', 32), 2000, \
             200, 0::double precision, 9000000000000000000::bigint)",
            &[&w],
        )),
        "42883",
        "the renewal with a known fence"
    );
    held_worker(&a, Duration::from_secs(10));
    thread::sleep(Duration::from_millis(500));
    let row = r
        .query_one(
            "SELECT l.fence_tick, \
                    (floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint - f.epoch_unix_ms) \
                    / f.time_unit_ms + ceil(idgen_registry_max_lease_ms()::numeric / f.time_unit_ms)::bigint \
             FROM idgen_registry_lease l, idgen_registry_fleet f WHERE l.worker_id = $1",
            &[&w],
        )
        .unwrap_or_else(|e| panic!("A's fence: {}", failure_text(&e)));
    let (fence, bound): (i64, i64) = (row.get(0), row.get(1));
    assert!(
        fence <= bound,
        "A's fence {fence} is beyond the registry's clock plus a longest lease, tick {bound}"
    );
    let (state, held, error) = state_of(&a);
    assert_eq!(
        (state.as_str(), held),
        ("held", Some(w)),
        "A after the forged renewals: {error:?}"
    );
    a.connect("postgres")
        .query_one("SELECT snowflake_nextval()", &[])
        .unwrap_or_else(|e| panic!("A's id: {}", failure_text(&e)));
}

/// A base-backup copy of node A (`idgen.node_name = 'prod'`, worker id
/// auto: the same node name, system identifier and timeline, another port) never holds A's
/// worker id while A renews: it is granted another free id at once (or refused). Then A's
/// registry client pauses for 1.5 s (over two renewal intervals of 200 ms, under the 2 s
/// lease). The copy does not take A's live lease: 3 s later A holds the same worker id and
/// issues ids with it, and the copy does not hold A's worker id.
#[test]
fn a_copy_with_the_same_node_name_does_not_take_a_live_lease_when_the_original_pauses() {
    let reg = registry("review_copy_reg");
    let a = node(
        &reg,
        "review_copy_a",
        &auto_fast(&["idgen.node_name = 'prod'"]),
    );
    let w = held_worker(&a, Duration::from_secs(20));
    let copy = Cluster::clone_of(&a, "review_copy_b", &[]);
    copy.start_server();
    {
        let mut cc = copy.connect("postgres");
        let outcome = wait_for(
            "the copy to hold a worker id or be refused",
            Duration::from_secs(20),
            || {
                let (state, cw, e) = status(&mut cc);
                assert!(
                    !(state == "held" && cw == Some(w)),
                    "the copy took A's worker id while A renewed"
                );
                (state == "held" || state == "refused").then_some((state, cw, e))
            },
        );
        eprintln!("the copy while A renews: {outcome:?}");
    }
    let client = client_pid(&a).expect("A's registry client");
    {
        let _paused = Stopped::new(client);
        thread::sleep(Duration::from_millis(1500));
    }
    thread::sleep(Duration::from_secs(3));
    let (state, held, error) = state_of(&a);
    let copy_state = state_of(&copy);
    eprintln!("A: {state} {held:?} {error:?}; the copy: {copy_state:?}");
    assert_eq!(
        (state.as_str(), held),
        ("held", Some(w)),
        "A after a 1.5 s pause of its client: {error:?} (the copy: {copy_state:?})"
    );
    assert_ne!(
        (copy_state.0.as_str(), copy_state.1),
        ("held", Some(w)),
        "the copy holds A's worker id"
    );
    let id: i64 = a
        .connect("postgres")
        .query_one("SELECT snowflake_nextval()", &[])
        .unwrap_or_else(|e| panic!("A's id: {}", failure_text(&e)))
        .get(0);
    assert_eq!(twitter::worker_of(id), i64::from(w));
}

/// A standby made by `pg_basebackup` copies the primary's `postgresql.conf`, node name
/// included (a restored copy of the primary carries it too), and here streams under it. It is
/// promoted while the primary still runs and renews (a split brain), asking for the primary's
/// very worker id (`idgen.worker_id` fixed to it). A promoted standby claims like any other
/// server, and the same node name earns it nothing: it is refused (55006, the id is held by a
/// live lease) while the primary renews and issues no id, and the primary keeps its worker id
/// and issues ids with it. (Before 0.9.0 the primary vouched for its standbys by name, and
/// such a copy, promoted, took the live primary's lease.)
#[test]
fn a_promoted_standby_under_the_primarys_name_never_takes_its_live_lease() {
    let reg = registry("reg_own_name");
    let setting = format!(
        "idgen.registry = 'host=127.0.0.1 port={} dbname=postgres user=postgres'",
        reg.port()
    );
    let primary = Cluster::start(
        "own_name",
        &[
            "shared_preload_libraries = 'idgen'",
            &setting,
            "idgen.worker_id = auto",
            "idgen.node_name = 'prod'",
            FAST[0],
            FAST[1],
        ],
    );
    primary.create_db_with_idgen("postgres");
    let w = held_worker(&primary, Duration::from_secs(20));
    let mut ids = draw(&primary, 100);
    // The standby streams as application_name = 'prod', the primary's node name: a copy made
    // a standby by hand (standby.signal and primary_conninfo in its postgresql.conf).
    let standby = Cluster::clone_of(
        &primary,
        "own_name_standby",
        &[
            &format!(
                "primary_conninfo = 'host=127.0.0.1 port={} user=postgres application_name=prod'",
                primary.port()
            ),
            &format!("idgen.worker_id = {w}"),
        ],
    );
    standby.write_signal("standby.signal");
    standby.start_server();
    let mut p = primary.connect("postgres");
    wait_for("the standby to stream", Duration::from_secs(30), || {
        p.one::<bool>(
            "SELECT EXISTS (SELECT FROM pg_stat_replication \
             WHERE application_name = 'prod' AND state = 'streaming')",
        )
        .then_some(())
    });
    standby.promote();
    let refusal = refused(&standby);
    assert_eq!(
        refusal.code().code(),
        "55006",
        "the promoted standby's claim of the primary's worker id {w}: {}",
        refusal.message()
    );
    // Several renewals of the primary later, the promoted standby still has no worker id.
    std::thread::sleep(Duration::from_secs(3));
    let (state, held, error) = state_of(&standby);
    assert!(
        held.is_none() && state != "held",
        "the promoted standby: {state} {held:?} {error:?}"
    );
    assert_eq!(status(&mut p).0, "held");
    assert_eq!(status(&mut p).1, Some(w));
    ids.extend(draw(&primary, 100));
    assert!(ids.iter().all(|&id| twitter::worker_of(id) == i64::from(w)));
    let standby_ids = standby
        .connect("postgres")
        .query("SELECT snowflake_nextval()", &[]);
    assert!(
        standby_ids.is_err(),
        "the promoted standby issued an id without a worker id: {standby_ids:?}"
    );
    assert!(repeated(&ids).is_empty(), "the primary repeated an id");
    drop(standby);
}
