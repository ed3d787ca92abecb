//! Conformance of the registry's SQL (`sql/registry.sql`, what a real registry runs) with the
//! protocol's decisions in `idgen_core::registry` (what `crates/idgen-core/tests/registry_model.rs`
//! checks), DESIGN.md §6 "The model": each test starts a registry, asks its SQL functions the
//! same question as the core's function over edge values and a few hundred pseudo-random
//! inputs (a fixed seed), and lists every input on which the two answers differ.
//!
//! What maps to what (the SQL reads some of its inputs from the registry's state, which the
//! tests set as the registry's superuser):
//! - `idgen_registry_grants_wait_over(now, epoch_ms, tick_ms)` is
//!   `epoch_wait_over(now, floor(max(E + CLOCK_STEP_MS - epoch_ms, 0) / tick_ms),
//!   ceil(wait_lease / tick_ms))`, E the registry's epoch (`idgen_registry_epoch()`) in Unix ms
//!   rounded down and wait_lease the longest of its `idgen.registry_max_lease` and of the
//!   leases it answered (`idgen_registry_wait_lease_ms()`).
//! - `idgen_registry_check_lease` is `lease_ms` and the registry's setting (a node asking for
//!   more than it is refused); a renewal interval at most a third of the lease.
//! - `idgen_registry_segment_take` on a stored mark is `take(mark, step, i64::MAX)`, and so is
//!   `idgen_registry_serial_take` on a serial's counter (a missing counter at mark 0).
//! - `idgen_registry_claim` of an id whose row is set is `claimable`, then `grant`.
//! - `idgen_registry_renew` of a row whose fence is set is `renew` (`renewal_is_grant`, `fence`).
//! - `idgen_registry_hello` opening a recovery is `shows_rollback`.
//! - `idgen_registry_recover()` is `recovered_mark` per segment and serial counter and
//!   `recovered_revision`.
//! - `idgen_registry_check_durable()` then `idgen_registry_check_open(true)` is `durable`
//!   and `may_hand_out` (by SQLSTATE: both refusals are 55000).
//!
//! A refusal maps to the SQLSTATE the core's `Refusal` names.
//!
//! Not compared: `range_usable` and `next_tick` (the node's decisions: the extension calls the
//! core's functions itself); the SQL's release bounds and the ranges' wait of
//! `idgen_registry_check_open` (no core function: the core takes the wait as an argument); a
//! synchronous standby streaming (`Durability::synchronous_standbys` above 0 needs a standby).
//!
//! Where the SQL refuses what the core would allow, on purpose (safe: nothing is handed out):
//! a global serial's take near the bigint maximum (22003) or above 10^6 numbers (22023), and
//! the grants' wait for a layout epoch about 2^63 ms before the registry's (22003; every claim
//! of such a fleet fails the same way). Two disagreements this test found were fixed: a take's
//! largest step (the core's `MAX_STEP` is now the registry's 2^31 - 1) and a hello past 2^62
//! (the SQL capped what a node showed, so after a recovery to 2^62 + 1 no loss opened one).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use idgen_cluster_tests::registry::{failure_text, registry, DIRECT_CLAIM};
use idgen_cluster_tests::{wait_for, Cluster, One};
use idgen_core::registry as core;
use idgen_core::registry::{
    Durability, Previous, Range, Refusal, Registry, CLOCK_STEP_MS, MAX_LEASE_MS, MAX_STEP,
    MIN_LEASE_MS,
};
use postgres::Client;

/// A holder secret (the registry wants at least 32 bytes; it keeps only its hash).
const SECRET: &str = "conformance-secret-0123456789abcdef";

/// The layout epoch of the claims and renewals here (Twitter's, Unix ms).
const FLEET_EPOCH_MS: i64 = 1_288_834_974_657;

/// The largest revision the registry believes a node shows (`least(seen_revision, 2^62)` in its
/// hello and recovery reports; DESIGN.md §6: "a revision at most 2^62").
const REVISION_CAP: i64 = 1 << 62;

/// xorshift64 (Marsaglia's 13/7/17): the tests' inputs, the same at every run.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// Uniform in `0..n`.
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// Uniform in `lo..=hi`.
    fn between(&mut self, lo: i64, hi: i64) -> i64 {
        let span = (hi as i128 - lo as i128 + 1) as u128;
        (lo as i128 + (self.next() as u128 % span) as i128) as i64
    }

    /// Any i64, a quarter each: uniform, small, near a bound, of a random magnitude.
    fn any(&mut self) -> i64 {
        match self.below(4) {
            0 => self.next() as i64,
            1 => self.between(-1000, 1000),
            2 if self.below(2) == 0 => i64::MAX - self.between(0, 1000),
            2 => i64::MIN + self.between(0, 1000),
            _ => {
                let magnitude = (self.next() >> (1 + self.below(63))) as i64;
                if self.below(2) == 0 {
                    magnitude
                } else {
                    -magnitude
                }
            }
        }
    }

    /// A positive i32 of a random magnitude (1 to `i32::MAX`).
    fn positive_i32(&mut self) -> i32 {
        ((self.next() >> (33 + self.below(31))) as i32).max(1)
    }

    /// Any i32, a third each: uniform, small, of a random magnitude.
    fn any_i32(&mut self) -> i32 {
        match self.below(3) {
            0 => self.next() as i32,
            1 => self.between(-10, 200_000) as i32,
            _ => self.positive_i32(),
        }
    }
}

/// The inputs on which the SQL and the core disagree, for one comparison.
struct Findings {
    what: &'static str,
    compared: usize,
    disagreements: Vec<String>,
}

impl Findings {
    fn new(what: &'static str) -> Self {
        Findings {
            what,
            compared: 0,
            disagreements: Vec::new(),
        }
    }

    /// Records one input; `describe` says what each side answered when they disagree.
    fn check(&mut self, agree: bool, describe: impl FnOnce() -> String) {
        self.compared += 1;
        if !agree {
            self.disagreements.push(describe());
        }
    }

    /// Panics listing the disagreements (the first 20), if any.
    fn assert_none(&self) {
        eprintln!(
            "{}: {} inputs compared, {} disagreements",
            self.what,
            self.compared,
            self.disagreements.len()
        );
        assert!(
            self.disagreements.is_empty(),
            "{}: the SQL and the core disagree on {} of {} inputs; the first:\n{}",
            self.what,
            self.disagreements.len(),
            self.compared,
            self.disagreements
                .iter()
                .take(20)
                .cloned()
                .collect::<Vec<_>>()
                .join("\n")
        );
        assert!(self.compared > 0, "{}: nothing compared", self.what);
    }
}

/// A statement's result, or its SQLSTATE.
fn outcome<T>(result: Result<T, postgres::Error>) -> Result<T, String> {
    result.map_err(|e| match e.code() {
        Some(c) => c.code().to_owned(),
        None => panic!("no SQLSTATE: {e}"),
    })
}

/// The SQLSTATE the registry raises for a refusal (`Refusal`'s documentation).
fn sqlstate_of(refusal: Refusal) -> String {
    match refusal {
        Refusal::OutOfBounds => "22023",
        Refusal::NotDurable | Refusal::Recovering => "55000",
        Refusal::Waiting => "55P03",
        Refusal::HeldByAnother => "55006",
        Refusal::NotTheHolder => "42501",
        Refusal::Exhausted => "2200H",
    }
    .to_owned()
}

/// Microseconds since 1970 of a timestamp (negative before).
fn unix_us(t: SystemTime) -> i128 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_micros() as i128,
        Err(e) => -(e.duration().as_micros() as i128),
    }
}

/// Unix ms of a timestamp, rounded down.
fn floor_ms(t: SystemTime) -> i64 {
    unix_us(t).div_euclid(1000) as i64
}

/// The registry's clock now, Unix ms rounded down.
fn registry_ms(c: &mut Client) -> i64 {
    floor_ms(c.one::<SystemTime>("SELECT clock_timestamp()"))
}

/// The registry's clock now in ticks of `tick_ms` from the fleet's epoch, computed here from
/// its timestamp (never negative, as the registry counts).
fn registry_tick(c: &mut Client, tick_ms: i32) -> i64 {
    (registry_ms(c) - FLEET_EPOCH_MS).max(0) / tick_ms as i64
}

/// `ceil(a / b)` for a >= 0, b > 0.
fn ceil_div(a: i64, b: i64) -> i64 {
    (a + b - 1) / b
}

/// A hello as node `node` (incarnation `node`, role postgres) that saw revision `seen`;
/// returns its recovery column.
fn hello(c: &mut Client, node: &str, seen: i64) -> Option<String> {
    c.query_one(
        "SELECT recovery FROM idgen_registry_hello($1::text, $1::text, $2::bigint, 5432)",
        &[&node, &seen],
    )
    .unwrap_or_else(|e| panic!("idgen_registry_hello({node}, {seen}): {}", failure_text(&e)))
    .get(0)
}

/// A hello as node `node`, then a wait until the registry grants (`grants_from`) or hands out
/// ranges (`ranges_from`), its wait after its start.
fn hello_and_wait(c: &mut Client, node: &str, column: &str) {
    let left: f64 = c
        .query_one(
            &format!(
                "SELECT extract(epoch FROM {column} - clock_timestamp())::float8 \
                 FROM idgen_registry_hello($1::text, $1::text, 0, 5432)"
            ),
            &[&node],
        )
        .unwrap_or_else(|e| panic!("idgen_registry_hello: {}", failure_text(&e)))
        .get(0);
    if left > 0.0 {
        std::thread::sleep(Duration::from_secs_f64(left + 0.05));
    }
}

/// Sets `name = value` in the registry's configuration (ALTER SYSTEM, reload) and waits until
/// `check` returns `expect` in this session.
fn reconfigure(c: &mut Client, name: &str, value: &str, check: &str, expect: &str) {
    c.batch_execute(&format!("ALTER SYSTEM SET {name} = '{value}'"))
        .unwrap();
    c.batch_execute("SELECT pg_reload_conf()").unwrap();
    wait_for(
        &format!("{name} = {value} in force"),
        Duration::from_secs(10),
        || (c.one::<String>(check) == expect).then_some(()),
    );
}

/// Sets the registry's `idgen.registry_max_lease` to `ms`.
fn set_max_lease(c: &mut Client, ms: i64) {
    reconfigure(
        c,
        "idgen.registry_max_lease",
        &format!("{ms}ms"),
        "SELECT idgen_registry_max_lease_ms()::text",
        &ms.to_string(),
    );
}

/// A started registry (DURABLE settings, idgen in `postgres`), its server recorded by a hello
/// of node `conf`, and a superuser session on it.
fn started(tag: &str) -> (Cluster, Client) {
    let reg = registry(tag);
    let mut c = reg.connect("postgres");
    assert_eq!(
        hello(&mut c, "conf", 0),
        None,
        "a fresh registry is not recovering"
    );
    (reg, c)
}

/// The registry's epoch E (`idgen_registry_epoch()`) in Unix ms, rounded down.
fn epoch_unix_ms(c: &mut Client) -> i64 {
    floor_ms(c.one::<SystemTime>("SELECT idgen_registry_epoch()"))
}

/// The core's answer to the SQL's `idgen_registry_grants_wait_over(now, epoch_ms, tick_ms)`
/// with the registry's epoch at `e_ms` and its longest lease `max_lease_ms`, and the tick past
/// which it grants (`None` when the epoch's tick leaves i64: no such registry clock).
fn core_grants_wait_over(
    now: i64,
    e_ms: i64,
    epoch_ms: i64,
    tick_ms: i32,
    max_lease_ms: i64,
) -> Option<(bool, i64)> {
    let since = (e_ms as i128 + CLOCK_STEP_MS as i128 - epoch_ms as i128).max(0);
    let epoch_tick = i64::try_from(since / tick_ms as i128).ok()?;
    let wait = ceil_div(max_lease_ms, tick_ms as i64);
    Some((
        core::epoch_wait_over(now, epoch_tick, wait).is_ok(),
        epoch_tick.saturating_add(wait),
    ))
}

/// The registry's epoch set for the grants' wait: its start (epoch_at NULL), a moment of the
/// next day, or one far in the future (with any microseconds).
fn set_epoch(c: &mut Client, rng: &mut XorShift, which: u32) {
    let us = rng.between(0, 999) as i32;
    match which {
        0 => c
            .execute("UPDATE idgen_registry_server SET epoch_at = NULL", &[])
            .unwrap(),
        1 => c
            .execute(
                "UPDATE idgen_registry_server SET epoch_at = clock_timestamp() \
                 + $1::bigint::float8 * interval '1 millisecond' \
                 + $2::integer * interval '1 microsecond'",
                &[&rng.between(0, 86_400_000), &us],
            )
            .unwrap(),
        // Up to year 287 000 (timestamptz ends in 294 276; float8 ms are exact below 2^53).
        _ => c
            .execute(
                "UPDATE idgen_registry_server SET epoch_at = timestamptz 'epoch' \
                 + $1::bigint::float8 * interval '1 millisecond' \
                 + $2::integer * interval '1 microsecond'",
                &[&rng.between(2_000_000_000_000, 9_000_000_000_000_000), &us],
            )
            .unwrap(),
    };
}

/// Node settings' bounds: `idgen.epoch` is a timestamptz (4714 BC at the earliest), and
/// `idgen.time_unit_ms` at most a day.
const EARLIEST_EPOCH_MS: i64 = -210_866_803_200_000;

/// Sets the lease the registry's waits after an epoch count with: its setting
/// `idgen.registry_max_lease` to `setting` and the longest lease it recorded having answered
/// (`idgen_registry_server.max_lease_ms`, which its hellos raise) to `answered`; returns the
/// longest of the two, the wait's lease (`idgen_registry_wait_lease_ms()`: a setting lowered
/// never shortens a wait below a lease a node may still hold).
fn set_wait_lease(c: &mut Client, setting: i64, answered: i64) -> i64 {
    set_max_lease(c, setting);
    c.execute(
        "UPDATE idgen_registry_server SET max_lease_ms = $1::bigint",
        &[&answered],
    )
    .unwrap();
    setting.max(answered)
}

/// The SQL's grants' wait after the registry's epoch ends at the tick the core's
/// `epoch_wait_over` ends at: strictly past the epoch's tick (the epoch plus the registry
/// clock's step bound, in the fleet's ticks, rounded down) plus the longest lease (the longest
/// of `idgen.registry_max_lease` and of the leases the registry answered) rounded up to ticks.
/// Compared for leases from 100 ms to 120 s (a setting lowered below an answered lease
/// included), epochs at the registry's start, the next day and up to year 287 000 (any
/// microsecond), every layout epoch a node can have and beyond the registry's epoch, ticks of
/// 1 ms to `i32::MAX` ms, and clocks just below, at and above the end of the wait and anywhere
/// in i64.
#[test]
fn the_grants_wait_after_an_epoch_ends_at_the_tick_epoch_wait_over_ends_at() {
    let (_reg, mut c) = started("conf_wait");
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    let mut f = Findings::new("idgen_registry_grants_wait_over vs epoch_wait_over");
    let stmt = c
        .prepare("SELECT idgen_registry_grants_wait_over($1::bigint, $2::bigint, $3::integer)")
        .unwrap();
    let edge_ticks = [1, 3, 7, 999, 1000, 1001, 86_400_000, i32::MAX];
    let random_lease = rng.between(MIN_LEASE_MS, MAX_LEASE_MS);
    let leases = [
        (2000, 2000),
        (MIN_LEASE_MS, 0),
        (MIN_LEASE_MS, 2000),
        (MAX_LEASE_MS, MIN_LEASE_MS),
        (random_lease, rng.between(0, MAX_LEASE_MS)),
    ];
    for (setting, answered) in leases {
        let max_lease = set_wait_lease(&mut c, setting, answered);
        for which in [0, 1, 2] {
            set_epoch(&mut c, &mut rng, which);
            let e_ms = epoch_unix_ms(&mut c);
            let mut inputs: Vec<(i64, i32)> = Vec::new();
            for tick in edge_ticks {
                for epoch_ms in [
                    FLEET_EPOCH_MS,
                    EARLIEST_EPOCH_MS,
                    e_ms + CLOCK_STEP_MS - 1,
                    e_ms + CLOCK_STEP_MS,
                    e_ms + CLOCK_STEP_MS + 1,
                ] {
                    inputs.push((epoch_ms, tick));
                }
            }
            for _ in 0..12 {
                let epoch_ms = if rng.below(2) == 0 {
                    rng.between(EARLIEST_EPOCH_MS, e_ms + 10_000)
                } else {
                    e_ms + CLOCK_STEP_MS - rng.between(-5000, 5000)
                };
                let tick = if rng.below(2) == 0 {
                    rng.positive_i32()
                } else {
                    rng.between(1, 5000) as i32
                };
                inputs.push((epoch_ms, tick));
            }
            for (epoch_ms, tick) in inputs {
                let (_, end) = core_grants_wait_over(0, e_ms, epoch_ms, tick, max_lease)
                    .expect("within the nodes' layouts the epoch's tick is an i64");
                let anywhere = match rng.below(5) {
                    0 => 0,
                    1 => i64::MAX,
                    2 => i64::MIN,
                    _ => rng.any(),
                };
                for now in [
                    end - 1,
                    end,
                    end + 1,
                    end + rng.between(-1000, 1000),
                    anywhere,
                ] {
                    let (core, _) =
                        core_grants_wait_over(now, e_ms, epoch_ms, tick, max_lease).unwrap();
                    let sql = outcome(
                        c.query_one(&stmt, &[&now, &epoch_ms, &tick])
                            .map(|r| r.get::<_, bool>(0)),
                    );
                    f.check(sql == Ok(core), || {
                        format!(
                            "now_tick {now}, epoch_ms {epoch_ms}, tick_ms {tick}, registry epoch \
                             {e_ms} ms, idgen.registry_max_lease {setting} ms, longest answered \
                             {answered} ms: SQL {sql:?}, core {core} (wait over past tick {end})"
                        )
                    });
                }
            }
        }
    }
    f.assert_none();
}

/// Lengths tried: the bounds and around them, both ends of an i32, and random ones.
fn lease_inputs(rng: &mut XorShift, setting: i64) -> Vec<i32> {
    let mut v: Vec<i32> = vec![
        i32::MIN,
        -1,
        0,
        1,
        99,
        100,
        101,
        1999,
        2000,
        2001,
        119_999,
        120_000,
        120_001,
        i32::MAX,
    ];
    for d in [-1, 0, 1] {
        v.push((setting + d) as i32);
    }
    for _ in 0..150 {
        v.push(rng.any_i32());
    }
    v
}

/// A lease length is accepted by `idgen_registry_check_lease` exactly when the core's
/// `lease_ms` accepts it (100 ms to `MAX_LEASE_MS`) and it is within the registry's own
/// `idgen.registry_max_lease` (a node asking for more is refused, 22023), for settings of
/// 120 s (where the two are the same bound), 2 s and 100 ms; with a valid renewal interval.
#[test]
fn a_lease_is_accepted_exactly_within_lease_ms_and_the_registrys_longest_lease() {
    let reg = registry("conf_lease");
    let mut c = reg.connect("postgres");
    let mut rng = XorShift(0xd1b5_4a32_d192_ed03);
    let mut f = Findings::new("idgen_registry_check_lease vs lease_ms");
    let stmt = c
        .prepare("SELECT idgen_registry_check_lease($1::integer, $2::integer)")
        .unwrap();
    for setting in [MAX_LEASE_MS, 2000, MIN_LEASE_MS] {
        set_max_lease(&mut c, setting);
        for lease in lease_inputs(&mut rng, setting) {
            let core = core::lease_ms(lease as i64);
            let expected = match core {
                Ok(ms) if ms <= setting => Ok(()),
                Ok(_) => Err(sqlstate_of(Refusal::OutOfBounds)),
                Err(r) => Err(sqlstate_of(r)),
            };
            assert!(core.is_err() || core == Ok(lease as i64));
            let sql = outcome(c.execute(&stmt, &[&lease, &1i32]).map(|_| ()));
            f.check(sql == expected, || {
                format!("lease {lease} ms, max lease {setting} ms: SQL {sql:?}, core {core:?}")
            });
        }
    }
    f.assert_none();
}

/// A renewal interval is accepted for a lease exactly from 1 ms to a third of the lease,
/// rounded up to a whole ms (DESIGN.md §6: "renewals at most a third of a lease apart"; the core
/// states the third only in prose), and every interval a node sends
/// (`guc::registry_renew_interval_ms`: its setting, 10 ms to 120 s, capped at a third of its
/// lease rounded down, at least 1) is accepted for every lease the registry grants.
#[test]
fn renewal_intervals_up_to_a_third_of_the_lease_are_accepted_and_every_one_a_node_sends() {
    let reg = registry("conf_renew_interval");
    let mut c = reg.connect("postgres");
    let mut rng = XorShift(0x94d0_49bb_1331_11eb);
    set_max_lease(&mut c, MAX_LEASE_MS);
    let stmt = c
        .prepare("SELECT idgen_registry_check_lease($1::integer, $2::integer)")
        .unwrap();
    let mut f = Findings::new("idgen_registry_check_lease renewal bound vs a third");
    let mut node = Findings::new("idgen_registry_check_lease vs the node's renewal interval");
    let mut leases: Vec<i64> = vec![100, 101, 102, 103, 2000, 119_998, 119_999, 120_000];
    for _ in 0..60 {
        leases.push(rng.between(MIN_LEASE_MS, MAX_LEASE_MS));
    }
    for lease in leases {
        let third_up = ceil_div(lease, 3);
        let mut intervals: Vec<i64> = vec![
            i32::MIN as i64,
            -1,
            0,
            1,
            lease / 3,
            third_up,
            third_up + 1,
            lease,
            i32::MAX as i64,
        ];
        for _ in 0..4 {
            intervals.push(rng.between(1, lease));
        }
        for every in intervals {
            let within = (1..=third_up).contains(&every);
            let sql = outcome(
                c.execute(&stmt, &[&(lease as i32), &(every as i32)])
                    .map(|_| ()),
            );
            let expected = if within {
                Ok(())
            } else {
                Err(sqlstate_of(Refusal::OutOfBounds))
            };
            f.check(sql == expected, || {
                format!("lease {lease} ms, renewal every {every} ms: SQL {sql:?}, expected {expected:?}")
            });
        }
        for setting in [10, 200, lease / 3, lease / 3 + 1, MAX_LEASE_MS] {
            let sent = setting.max(1).min((lease / 3).max(1));
            let sql = outcome(
                c.execute(&stmt, &[&(lease as i32), &(sent as i32)])
                    .map(|_| ()),
            );
            node.check(sql.is_ok(), || {
                format!("lease {lease} ms, the node's interval {sent} ms: SQL {sql:?}")
            });
        }
    }
    f.assert_none();
    node.assert_none();
}

/// A registry ready to hand out ranges to node `conf` (its hello, the ranges' wait after its
/// start), with global segment `conf`.
fn ranges_registry(tag: &str) -> (Cluster, Client) {
    let (reg, mut c) = started(tag);
    hello_and_wait(&mut c, "conf", "ranges_from");
    c.batch_execute("SELECT idgen_registry_segment_create('conf', 1, 1000, 'conformance')")
        .unwrap();
    (reg, c)
}

/// Takes of segment `conf` directly (node `conf`'s incarnation), each from the stored mark
/// `mark` with `step`, compared with the core's `take(mark, step, i64::MAX)`: the range and the
/// mark stored after it (its last number), or the SQLSTATE and the mark unchanged.
fn compare_takes(c: &mut Client, inputs: &[(i64, i32)], f: &mut Findings) {
    let set_mark = c
        .prepare("UPDATE idgen_registry_segment SET max_id = $1::bigint WHERE name = 'conf'")
        .unwrap();
    let mark_of = c
        .prepare("SELECT max_id FROM idgen_registry_segment WHERE name = 'conf'")
        .unwrap();
    let take = c
        .prepare(
            "SELECT first_id, last_id FROM idgen_registry_segment_take('conf', $1::integer, \
             'conf', $2::text)",
        )
        .unwrap();
    for &(mark, step) in inputs {
        c.execute(&set_mark, &[&mark]).unwrap();
        let sql = outcome(
            c.query_one(&take, &[&step, &SECRET])
                .map(|r| (r.get::<_, i64>(0), r.get::<_, i64>(1))),
        );
        let after: i64 = c.query_one(&mark_of, &[]).unwrap().get(0);
        let core = core::take(mark, step as i64, i64::MAX);
        let agree = match core {
            Ok(Range { first, last }) => sql == Ok((first, last)) && after == last,
            Err(r) => sql == Err(sqlstate_of(r)) && after == mark,
        };
        f.check(agree, || {
            format!("mark {mark}, step {step}: SQL {sql:?} (mark after {after}), core {core:?}")
        });
    }
}

/// Marks tried with `step`: both ends of an i64, around 0, and around where a take of `step`
/// reaches the maximum.
fn edge_marks(step: i32) -> [i64; 11] {
    let below_max = i64::MAX.saturating_sub((step as i64).max(0));
    [
        i64::MIN,
        i64::MIN + 1,
        -1,
        0,
        1,
        9_223_372_036_854_775_800,
        below_max - 1,
        below_max,
        below_max + 1,
        i64::MAX - 1,
        i64::MAX,
    ]
}

/// A mark: near the maximum for `step` or anywhere.
fn random_mark(rng: &mut XorShift, step: i32) -> i64 {
    if rng.below(2) == 0 {
        i64::MAX - rng.between(0, 3 * (step as i64).max(1))
    } else {
        rng.any()
    }
}

/// A global take (`idgen_registry_segment_take`, called directly by a node's incarnation that
/// said hello) hands out exactly the range the core's `take(mark, step, i64::MAX)` computes
/// from the stored mark, and stores its last number as the new mark; where the core refuses,
/// the SQL raises the same SQLSTATE (2200H at the maximum, 22023 for a step below 1) and the
/// mark stays. Marks from i64::MIN to i64::MAX, steps of any i32 up to `MAX_STEP` (above it:
/// [`a_global_take_refuses_a_step_above_max_step_as_take_does`]).
#[test]
fn a_global_take_hands_out_the_range_take_computes_and_stores_its_last_number() {
    let (_reg, mut c) = ranges_registry("conf_take");
    let mut rng = XorShift(0xbf58_476d_1ce4_e5b9);
    let mut inputs: Vec<(i64, i32)> = Vec::new();
    for step in [
        i32::MIN,
        -1,
        0,
        1,
        2,
        7,
        1000,
        1_000_000_000,
        MAX_STEP as i32 - 1,
        MAX_STEP as i32,
    ] {
        inputs.extend(edge_marks(step).map(|m| (m, step)));
    }
    while inputs.len() < 300 {
        let step = match rng.below(3) {
            0 => rng.between(1, MAX_STEP) as i32,
            1 => rng.between(1, 2000) as i32,
            _ => rng.any_i32(),
        };
        if step as i64 <= MAX_STEP {
            inputs.push((random_mark(&mut rng, step), step));
        }
    }
    let mut f = Findings::new("idgen_registry_segment_take vs take");
    compare_takes(&mut c, &inputs, &mut f);
    f.assert_none();
}

/// A take of any step a member can ask (up to 2^31 - 1, `step_size integer`) hands out what the
/// core's `take` hands out, or refuses as it does. (The core's `MAX_STEP` was 2^30 while the
/// SQL handed out up to 2^31 - 1: found here, and the core now says the registry's bound.)
#[test]
fn a_global_take_of_the_largest_steps_agrees_with_take() {
    let (_reg, mut c) = ranges_registry("conf_take_step");
    let mut rng = XorShift(0x8cb9_2ba7_2f3d_8dd7);
    let mut inputs: Vec<(i64, i32)> = Vec::new();
    assert_eq!(
        MAX_STEP,
        i64::from(i32::MAX),
        "the core's bound is the registry's"
    );
    for step in [(1 << 30) + 1, i32::MAX] {
        inputs.extend(edge_marks(step).map(|m| (m, step)));
    }
    for _ in 0..20 {
        let step = rng.between((1 << 30) + 1, i32::MAX as i64) as i32;
        inputs.push((random_mark(&mut rng, step), step));
    }
    let mut f = Findings::new("idgen_registry_segment_take vs take, steps above 2^30");
    compare_takes(&mut c, &inputs, &mut f);
    f.assert_none();
}

/// Takes of global serial `s1`'s counter for period 2024 directly (node `conf`'s incarnation),
/// each from the counter at `mark` (none: no counter yet) with `step`, compared with the core's
/// `take(mark, step, i64::MAX)`, a missing counter at mark 0: the new mark is the range's last
/// number and the node's range (the new mark less the step, plus one, to the new mark) is the
/// core's; or the SQLSTATE and the counter unchanged.
fn compare_serial_takes(c: &mut Client, inputs: &[(Option<i64>, i64)], f: &mut Findings) {
    let take = c
        .prepare(
            "SELECT mark FROM idgen_registry_serial_take('s1', '2024', $1::bigint, 'conf', \
             $2::text, 'never', 'S-{n}')",
        )
        .unwrap();
    let counter = c
        .prepare(
            "SELECT max_id FROM idgen_registry_serial_counter \
             WHERE serial = 's1' AND period = '2024'",
        )
        .unwrap();
    for &(mark, step) in inputs {
        c.batch_execute("DELETE FROM idgen_registry_serial_counter")
            .unwrap();
        if let Some(m) = mark {
            c.execute(
                "INSERT INTO idgen_registry_serial_counter (serial, period, max_id) \
                 VALUES ('s1', '2024', $1::bigint)",
                &[&m],
            )
            .unwrap();
        }
        let sql = outcome(
            c.query_one(&take, &[&step, &SECRET])
                .map(|r| r.get::<_, i64>(0)),
        );
        let after = c
            .query_opt(&counter, &[])
            .unwrap()
            .map(|r| r.get::<_, i64>(0));
        let core = core::take(mark.unwrap_or(0), step, i64::MAX);
        let agree = match core {
            Ok(Range { first, last }) => {
                sql == Ok(last) && last - step + 1 == first && after == Some(last)
            }
            Err(r) => sql == Err(sqlstate_of(r)) && after == mark,
        };
        f.check(agree, || {
            format!("counter {mark:?}, step {step}: SQL {sql:?} (counter after {after:?}), core {core:?}")
        });
    }
}

/// A global serial's take (`idgen_registry_serial_take`) moves its counter to the last number of
/// the range the core's `take` computes from the counter's mark (a new counter from 0), and the
/// node's range (the step below the new mark) is that range; a step below 1 is refused (22023)
/// as `take` refuses it. Steps of 1 to 10^6 (the SQL's bound; a node's are at most 10^5) from
/// counters up to where the step reaches i64::MAX exactly (beyond:
/// [`a_global_serial_take_beyond_its_bounds_refuses_or_hands_out_as_take_does`]).
#[test]
fn a_global_serial_take_moves_the_counter_to_the_last_number_take_computes() {
    let (_reg, mut c) = ranges_registry("conf_serial_take");
    let mut rng = XorShift(0x1405_7b7e_f767_814f);
    let mut inputs: Vec<(Option<i64>, i64)> = Vec::new();
    for step in [i64::MIN, -1, 0, 1, 2, 100_000, 999_999, 1_000_000] {
        let top = i64::MAX - step.max(0);
        for mark in [None, Some(0), Some(1), Some(top - 1), Some(top)] {
            inputs.push((mark, step));
        }
    }
    for _ in 0..120 {
        let step = if rng.below(2) == 0 {
            rng.between(1, 1_000_000)
        } else {
            rng.between(1, 1000)
        };
        let top = i64::MAX - step;
        let mark = match rng.below(3) {
            0 => Some(rng.between(1, 1_000_000)),
            1 => Some(top - rng.between(0, 1000)),
            _ => Some(rng.between(1, top)),
        };
        inputs.push((mark, step));
    }
    let mut f = Findings::new("idgen_registry_serial_take vs take");
    compare_serial_takes(&mut c, &inputs, &mut f);
    f.assert_none();
}

/// Writes worker id `worker`'s lease row as another holder's (node `other`) or as node
/// `conf`'s (with `SECRET`): its recorded floor, fence and release, and its expiry at
/// `expires_ms` (Unix ms).
fn write_lease(
    c: &mut Client,
    worker: i32,
    holder: &str,
    start: i64,
    fence: i64,
    released: Option<i64>,
    expires_ms: i64,
) {
    c.execute(
        "INSERT INTO idgen_registry_lease AS r (worker_id, node_name, incarnation, \
         system_identifier, timeline, address, start_tick, fence_tick, released_tick, lease_ms, \
         renew_interval_ms, claimed_at, renewed_at, expires_at, holder_key) \
         VALUES ($1::integer, $2::text, $2::text, 'conformance', 1, NULL, $3::bigint, $4::bigint, \
                 $5::bigint, 2000, 200, clock_timestamp(), clock_timestamp(), \
                 timestamptz 'epoch' + $6::bigint::float8 * interval '1 millisecond', \
                 idgen_registry_key($7::text)) \
         ON CONFLICT (worker_id) DO UPDATE SET node_name = excluded.node_name, \
            incarnation = excluded.incarnation, start_tick = excluded.start_tick, \
            fence_tick = excluded.fence_tick, released_tick = excluded.released_tick, \
            expires_at = excluded.expires_at, holder_key = excluded.holder_key, \
            renewed_at = excluded.renewed_at",
        &[
            &worker,
            &holder,
            &start,
            &fence,
            &released,
            &expires_ms,
            &SECRET,
        ],
    )
    .unwrap();
}

/// Records the fleet's layout: `FLEET_EPOCH_MS`, 10 worker bits, 12 sequence bits, `tick_ms`.
fn set_fleet(c: &mut Client, tick_ms: i32) {
    c.execute(
        "INSERT INTO idgen_registry_fleet VALUES (true, $1::bigint, 10, 12, $2::integer, \
         clock_timestamp()) ON CONFLICT (singleton) DO UPDATE \
         SET epoch_unix_ms = excluded.epoch_unix_ms, time_unit_ms = excluded.time_unit_ms",
        &[&FLEET_EPOCH_MS, &tick_ms],
    )
    .unwrap();
}

/// The end of tick `tick` (the start of the next) in Unix ms: the latest expiry a lease whose
/// fence is `tick` has when the registry writes it (its claim or renewal at some moment of a
/// tick `now` sets the expiry a lease later and the fence at `now` plus the lease in ticks,
/// rounded up).
fn end_of_tick_ms(tick: i64, tick_ms: i32) -> i64 {
    FLEET_EPOCH_MS + (tick + 1) * tick_ms as i64
}

/// Runs `attempt` with the registry's tick read before it; returns its result once the tick
/// read after it is the same (so the SQL saw that tick), at most 50 tries.
fn at_one_tick<T>(
    c: &mut Client,
    tick_ms: i32,
    mut attempt: impl FnMut(&mut Client, i64) -> T,
) -> (i64, T) {
    for _ in 0..50 {
        let before = registry_tick(c, tick_ms);
        let result = attempt(c, before);
        if registry_tick(c, tick_ms) == before {
            return (before, result);
        }
    }
    panic!("the registry's tick of {tick_ms} ms moved during 50 tries in a row");
}

/// Waits until a claim of a never leased id succeeds (the registry's grants' wait, counted in
/// ticks of `tick_ms`, is over).
fn wait_for_grants(c: &mut Client, tick_ms: i32) {
    wait_for("grants", Duration::from_secs(10), || {
        c.execute("DELETE FROM idgen_registry_lease WHERE worker_id = 1", &[])
            .unwrap();
        claim(c, tick_ms).ok()
    });
}

/// A direct claim of worker id 1 by node `conf` (lease 2 s) in the fleet's layout with ticks of
/// `tick_ms`: its floor and fence, or its SQLSTATE.
fn claim(c: &mut Client, tick_ms: i32) -> Result<(i64, i64), String> {
    let worker = Some(1i32);
    outcome(
        c.query_one(
            DIRECT_CLAIM,
            &[
                &"conf",
                &"conf",
                &SECRET,
                &"conformance",
                &1i32,
                &worker,
                &FLEET_EPOCH_MS,
                &10i32,
                &12i32,
                &tick_ms,
            ],
        )
        .map(|r| (r.get::<_, i64>("floor_tick"), r.get::<_, i64>("fence_tick"))),
    )
}

/// A claim of a worker id is refused or granted as the core decides: `claimable` of its last
/// holder's row (held while the clock is at or below its fence, 55006; a release whose final
/// tick the clock has not reached waits, 55P03; never leased, expired or released in the past:
/// free), and a grant is `grant(now, lease in ticks)`: the floor at the registry's clock and the
/// fence a lease (2 s, rounded up to ticks) past it. Rows are written with fences and final
/// ticks around the clock's tick, and the expiry the registry writes with such a fence at the
/// latest; ticks of 1000 ms and 333 ms.
#[test]
fn a_claim_refuses_and_grants_as_claimable_and_grant_decide() {
    let (_reg, mut c) = started("conf_claim");
    hello_and_wait(&mut c, "conf", "grants_from");
    let mut rng = XorShift(0x6a09_e667_f3bc_c909);
    let mut f = Findings::new("idgen_registry_claim vs claimable and grant");
    for tick_ms in [1000, 333] {
        set_fleet(&mut c, tick_ms);
        wait_for_grants(&mut c, tick_ms);
        let lease_ticks = ceil_div(2000, tick_ms as i64);
        let mut cases: Vec<(u8, i64)> = vec![(0, 0)];
        for delta in [-1000, -3, -2, -1, 0, 1, 2, 3, 1000] {
            cases.push((1, delta));
            cases.push((2, delta));
        }
        for _ in 0..16 {
            cases.push((1 + rng.below(2) as u8, rng.between(-10, 10)));
        }
        for (kind, delta) in cases {
            let (now, (previous, sql)) = at_one_tick(&mut c, tick_ms, |c, now| {
                let at = now + delta;
                let previous = match kind {
                    0 => {
                        c.execute("DELETE FROM idgen_registry_lease WHERE worker_id = 1", &[])
                            .unwrap();
                        Previous::Never
                    }
                    1 => {
                        write_lease(
                            c,
                            1,
                            "other",
                            at - 10,
                            at,
                            None,
                            end_of_tick_ms(at, tick_ms),
                        );
                        Previous::Leased { fence: at }
                    }
                    _ => {
                        let past = registry_ms(c) - 1000;
                        write_lease(c, 1, "other", at - 10, at - 1, Some(at), past);
                        Previous::Released { final_tick: at }
                    }
                };
                (previous, claim(c, tick_ms))
            });
            let core = core::claimable(previous, now).map(|()| core::grant(now, lease_ticks));
            let agree = match core {
                Ok(g) => sql == Ok((g.floor, g.fence)),
                Err(r) => sql == Err(sqlstate_of(r)),
            };
            f.check(agree, || {
                format!(
                    "tick {tick_ms} ms, clock at tick {now}, previous {previous:?}: SQL {sql:?}, \
                     core {core:?}"
                )
            });
        }
    }
    f.assert_none();
}

/// A direct renewal of worker id 2 by node `conf` (its secret) asking `lease_ms`: the fence
/// and floor it answers, or its SQLSTATE.
fn renew(c: &mut Client, lease_ms: i32) -> Result<(i64, i64), String> {
    let every = (lease_ms / 3).max(1);
    outcome(
        c.query_one(
            "SELECT fence_tick, floor_tick FROM idgen_registry_renew(2, 'conf', $1::text, \
             $2::integer, $3::integer, 0::double precision)",
            &[&SECRET, &lease_ms, &every],
        )
        .map(|r| (r.get::<_, i64>(0), r.get::<_, i64>(1))),
    )
}

/// A renewal moves the fence and the floor as the core's `renew` does: never back
/// (`fence`: the recorded fence or a lease past the clock, whichever is later), and a lease
/// whose fence the clock has passed is renewed as a new grant (`renewal_is_grant`: the floor
/// jumps to the clock, and the fence is a lease past it). Leases of 100 ms to 2 s (1 or 2 ticks
/// of 1000 ms, up to 7 of 333 ms), fences around the clock, and the latest expiry the registry
/// writes with such a fence (the SQL also treats a lease whose expiry passed as expired:
/// [`a_renewal_past_its_expiry_within_its_fence_keeps_the_cores_fence_and_only_raises_the_floor`]).
#[test]
fn a_renewal_moves_the_fence_and_floor_as_renew_does() {
    let (_reg, mut c) = started("conf_renew");
    hello_and_wait(&mut c, "conf", "grants_from");
    let mut rng = XorShift(0xbb67_ae85_84ca_a73b);
    let mut f = Findings::new("idgen_registry_renew vs renew");
    for tick_ms in [1000, 333] {
        set_fleet(&mut c, tick_ms);
        wait_for_grants(&mut c, tick_ms);
        let mut cases: Vec<(i64, i32)> = Vec::new();
        for delta in [-1000, -3, -2, -1, 0, 1, 2, 3, 1000] {
            for lease in [100, 1000, 1001, 2000] {
                cases.push((delta, lease));
            }
        }
        for _ in 0..10 {
            cases.push((rng.between(-10, 10), rng.between(100, 2000) as i32));
        }
        for (delta, lease_ms) in cases {
            let (now, (start, fence, sql)) = at_one_tick(&mut c, tick_ms, |c, now| {
                let fence = now + delta;
                let start = now.min(fence) - 100;
                write_lease(
                    c,
                    2,
                    "conf",
                    start,
                    fence,
                    None,
                    end_of_tick_ms(fence, tick_ms),
                );
                (start, fence, renew(c, lease_ms))
            });
            let lease_ticks = ceil_div(lease_ms as i64, tick_ms as i64);
            let core = core::renew(fence, now, lease_ticks);
            let expected = (core.fence, core.floor.unwrap_or(start));
            f.check(sql == Ok(expected), || {
                format!(
                    "tick {tick_ms} ms, clock at tick {now}, recorded fence {fence} and floor \
                     {start}, lease {lease_ms} ms ({lease_ticks} ticks): SQL (fence, floor) \
                     {sql:?}, core {core:?}"
                )
            });
        }
    }
    f.assert_none();
}

/// Where the SQL and the core differ by design: the SQL renews a lease whose expiry
/// (`expires_at`, a lease after its last renewal in ms) has passed as a new grant even while
/// the clock is still at or below its fence (ticks longer than 1 ms, or a lease asked shorter
/// than the one that set the fence), where the core's `renewal_is_grant` looks at the fence
/// only. Both fence the same tick; the SQL only moves the floor up to the clock (and waits
/// out the grants' wait, as for a grant), which issues nothing the core's renewal would not
/// allow. Lists the differences it saw on stderr.
#[test]
fn a_renewal_past_its_expiry_within_its_fence_keeps_the_cores_fence_and_only_raises_the_floor() {
    let (_reg, mut c) = started("conf_renew_expiry");
    hello_and_wait(&mut c, "conf", "grants_from");
    let tick_ms = 1000;
    set_fleet(&mut c, tick_ms);
    wait_for_grants(&mut c, tick_ms);
    let mut f = Findings::new("idgen_registry_renew after the expiry: fence and floor");
    let mut differ = Vec::new();
    for (delta, lease_ms) in [(0, 2000), (1, 2000), (2, 1000), (5, 100), (100, 2000)] {
        let (now, (start, fence, sql)) = at_one_tick(&mut c, tick_ms, |c, now| {
            let fence = now + delta;
            let start = now - 100;
            let expired = registry_ms(c) - 1;
            write_lease(c, 2, "conf", start, fence, None, expired);
            (start, fence, renew(c, lease_ms))
        });
        let lease_ticks = ceil_div(lease_ms as i64, tick_ms as i64);
        let core = core::renew(fence, now, lease_ticks);
        let core_floor = core.floor.unwrap_or(start);
        let safe = matches!(sql, Ok((sql_fence, sql_floor))
            if sql_fence == core.fence && sql_floor >= core_floor && sql_floor <= now);
        f.check(safe, || {
            format!(
                "clock at tick {now}, recorded fence {fence} and floor {start}, expiry passed, \
                 lease {lease_ms} ms: SQL (fence, floor) {sql:?}, core {core:?}"
            )
        });
        if sql != Ok((core.fence, core_floor)) {
            differ.push(format!(
                "clock at tick {now}, recorded fence {fence} and floor {start}, expiry passed, \
                 lease {lease_ms} ms: SQL (fence, floor) {sql:?}, core {core:?}"
            ));
        }
    }
    eprintln!(
        "renewals past their expiry within their fence, SQL vs core ({} differ):\n{}",
        differ.len(),
        differ.join("\n")
    );
    f.assert_none();
}

/// Sets the registry's revision to `r` (>= 0) and the revision it answered node `node` (what a
/// hello compares the node's with) to `known`; closes any open recovery.
fn set_revisions(c: &mut Client, r: i64, node: &str, known: i64) {
    if r == 0 {
        c.execute("SELECT setval('idgen_registry_revision', 1, false)", &[])
            .unwrap();
    } else {
        c.execute(
            "SELECT setval('idgen_registry_revision', $1::bigint)",
            &[&r],
        )
        .unwrap();
    }
    c.execute(
        "UPDATE idgen_registry_node SET revision = $2::bigint WHERE node_name = $1::text",
        &[&node, &known],
    )
    .unwrap();
    c.execute(
        "UPDATE idgen_registry_server SET recovery_since = NULL, recovery_reason = NULL, \
         recovery_opened_by = NULL",
        &[],
    )
    .unwrap();
}

/// A hello opens a recovery exactly when the core's `shows_rollback` says the node's revision
/// proves the registry lost commits (above the registry's revision), for a node the registry
/// last answered its revision (the registry's record of the node equals its revision), over
/// revisions below 2^62 (DESIGN.md §6: the registry believes a revision up to 2^62) and seen
/// revisions anywhere from 0 to i64::MAX. For a node answered less than the registry's
/// revision, or never answered, the SQL opens a recovery whenever the core does (it also
/// opens one for a revision above the node's record and at or below the registry's: stricter,
/// listed on stderr).
#[test]
fn a_hello_opens_a_recovery_exactly_when_shows_rollback_says_so() {
    let (_reg, mut c) = started("conf_rollback");
    let mut rng = XorShift(0x3c6e_f372_fe94_f82b);
    let mut f = Findings::new("idgen_registry_hello vs shows_rollback");
    let mut sound =
        Findings::new("idgen_registry_hello for a node answered less vs shows_rollback");
    let mut stricter = Vec::new();
    let mut revisions: Vec<i64> = vec![0, 1, 2, 1000, REVISION_CAP - 1];
    for _ in 0..15 {
        revisions.push(if rng.below(2) == 0 {
            rng.between(1, 1_000_000)
        } else {
            rng.between(1, REVISION_CAP - 1)
        });
    }
    for r in revisions {
        let mut seen: Vec<i64> = vec![0, r - 1, r, r + 1, REVISION_CAP, REVISION_CAP + 1, i64::MAX];
        for _ in 0..2 {
            seen.push(rng.between(0, i64::MAX));
            seen.push((r + rng.between(-5, 5)).max(0));
        }
        for s in seen.into_iter().filter(|&s| s >= 0) {
            let registry_state = Registry {
                revision: r as u64,
                epoch: 0,
                recovering: false,
            };
            let core = core::shows_rollback(registry_state, s as u64);
            set_revisions(&mut c, r, "conf", r);
            let sql = hello(&mut c, "conf", s).is_some();
            f.check(sql == core, || {
                format!("registry revision {r}, the node's {r}, seen {s}: SQL opens a recovery {sql}, core shows a rollback {core}")
            });
            // The same hello by a node the registry answered less, or never answered.
            let (node, known) = if rng.below(4) == 0 {
                (format!("new{}", rng.next()), 0)
            } else {
                ("conf".to_owned(), rng.between(0, r))
            };
            set_revisions(&mut c, r, &node, known);
            let sql = hello(&mut c, &node, s).is_some();
            sound.check(sql || !core, || {
                format!("registry revision {r}, node {node} answered {known}, seen {s}: SQL opens a recovery {sql}, core shows a rollback {core}")
            });
            if sql != core {
                stricter.push(format!(
                    "registry revision {r}, node {node} answered {known}, seen {s}: SQL opens a recovery {sql}, core shows a rollback {core}"
                ));
            }
        }
    }
    eprintln!(
        "hellos where the SQL opens a recovery and the core shows no rollback ({}), the first 10:\n{}",
        stricter.len(),
        stricter.iter().take(10).cloned().collect::<Vec<_>>().join("\n")
    );
    f.assert_none();
    sound.assert_none();
}

/// A recovery whose reports include a revision of 2^62 or more (a hostile member's report: the
/// registry believes up to 2^62) sets the registry's revision to 2^62 + 1 (as the core's
/// `recovered_revision` of the capped report does); from then on no node's hello can show a
/// revision above it once the hello capped what a node showed at 2^62, so a later loss of
/// commits was never detected, where the core's `shows_rollback` detects it (found here; the
/// hello now compares the revision as it is).
#[test]
fn a_hello_opens_a_recovery_for_a_revision_above_the_registrys_even_past_2_62() {
    let (_reg, mut c) = started("conf_rollback_cap");
    c.batch_execute("SELECT idgen_registry_begin_recovery('conformance')")
        .unwrap();
    c.execute(
        "SELECT idgen_registry_report_marks('conf', 'conf', NULL, NULL, '{}', '{}', $1::bigint)",
        &[&i64::MAX],
    )
    .unwrap();
    c.batch_execute("SELECT * FROM idgen_registry_recover()")
        .unwrap();
    let r: i64 = c.one("SELECT idgen_registry_revision_now()");
    assert_eq!(r, REVISION_CAP + 1);
    let mut f = Findings::new("idgen_registry_hello vs shows_rollback past 2^62");
    for s in [r + 1, r + 1000, i64::MAX] {
        set_revisions(&mut c, r, "conf", r);
        let core = core::shows_rollback(
            Registry {
                revision: r as u64,
                epoch: 0,
                recovering: false,
            },
            s as u64,
        );
        let sql = hello(&mut c, "conf", s).is_some();
        f.check(sql == core, || {
            format!("registry revision {r}, seen {s}: SQL opens a recovery {sql}, core shows a rollback {core}")
        });
    }
    f.assert_none();
}

/// The names a recovery test's nodes report: three global segments, one the registry lost
/// (`lost`), and a global serial's counter (period 2024).
const SEGMENTS: [&str; 3] = ["g1", "g2", "g3"];
const LOST: &str = "lost";
const SERIAL: &str = "\u{1}serial\u{1}s1\u{1}2024";

/// A recovery (`idgen_registry_recover()`) raises each global segment's mark to the core's
/// `recovered_mark` of the registry's mark and the marks reported by the nodes it did not skip
/// (a segment the registry lost is created at the highest reported; a serial counter it lacks
/// counts as 0, and is created only above it), and the revision to the core's
/// `recovered_revision` of the registry's revision and the revisions those nodes showed (each
/// believed up to 2^62). 60 recoveries of three nodes, with marks anywhere in i64, repeated
/// names in one report, two reports by one node, and a skipped node whose report is ignored.
#[test]
fn a_recovery_raises_marks_and_the_revision_as_recovered_mark_and_recovered_revision_do() {
    let reg = registry("conf_recover");
    let mut c = reg.connect("postgres");
    let nodes = ["n1", "n2", "n3"];
    for n in nodes {
        assert_eq!(hello(&mut c, n, 0), None);
    }
    for g in SEGMENTS {
        c.execute(
            "SELECT idgen_registry_segment_create($1::text, 1, 1000, 'conformance')",
            &[&g],
        )
        .unwrap();
    }
    let mut rng = XorShift(0xa54f_f53a_5f1d_36f1);
    let mut f = Findings::new("idgen_registry_recover vs recovered_mark and recovered_revision");
    let mark = |rng: &mut XorShift| -> i64 {
        match rng.below(3) {
            0 => rng.any(),
            1 => rng.between(-5, 5000),
            _ => i64::MAX - rng.between(0, 5),
        }
    };
    for round in 0..60 {
        // The registry's state.
        let marks: Vec<i64> = SEGMENTS.iter().map(|_| mark(&mut rng)).collect();
        for (g, m) in SEGMENTS.iter().zip(&marks) {
            c.execute(
                "UPDATE idgen_registry_segment SET max_id = $2::bigint WHERE name = $1::text",
                &[g, m],
            )
            .unwrap();
        }
        c.execute(
            "DELETE FROM idgen_registry_segment WHERE name = $1::text",
            &[&LOST],
        )
        .unwrap();
        c.batch_execute("DELETE FROM idgen_registry_serial_counter")
            .unwrap();
        let counter = (rng.below(2) == 0).then(|| mark(&mut rng));
        if let Some(m) = counter {
            c.execute(
                "INSERT INTO idgen_registry_serial_counter (serial, period, max_id) \
                 VALUES ('s1', '2024', $1::bigint)",
                &[&m],
            )
            .unwrap();
        }
        let revision = if rng.below(2) == 0 {
            rng.between(1, 1_000_000)
        } else {
            rng.between(1, REVISION_CAP)
        };
        c.execute(
            "SELECT setval('idgen_registry_revision', $1::bigint)",
            &[&revision],
        )
        .unwrap();

        // The recovery and the reports: every node reports once or twice, one may be skipped.
        c.batch_execute("SELECT idgen_registry_begin_recovery('conformance')")
            .unwrap();
        let skipped: Vec<&str> = match rng.below(3) {
            0 => vec![nodes[rng.below(3) as usize]],
            _ => vec![],
        };
        let mut counted: Vec<(String, i64)> = Vec::new();
        let mut shown: Vec<u64> = Vec::new();
        for n in nodes {
            for _ in 0..1 + rng.below(2) {
                let mut names: Vec<String> = Vec::new();
                let mut values: Vec<i64> = Vec::new();
                for _ in 0..rng.below(6) {
                    let name = match rng.below(5) {
                        0..=2 => SEGMENTS[rng.below(3) as usize],
                        3 => LOST,
                        _ => SERIAL,
                    };
                    names.push(name.to_owned());
                    values.push(mark(&mut rng));
                }
                let seen = match rng.below(3) {
                    0 => rng.between(0, 1_000_000),
                    1 => rng.between(0, REVISION_CAP),
                    _ => rng.between(0, i64::MAX),
                };
                let reported: bool = c
                    .query_one(
                        "SELECT idgen_registry_report_marks($1::text, $1::text, NULL, NULL, \
                         $2::text[], $3::bigint[], $4::bigint)",
                        &[&n, &names, &values, &seen],
                    )
                    .unwrap_or_else(|e| panic!("report of {n}: {}", failure_text(&e)))
                    .get(0);
                assert!(reported, "a recovery is open");
                if !skipped.contains(&n) {
                    counted.extend(names.into_iter().zip(values));
                    shown.push(seen.min(REVISION_CAP) as u64);
                }
            }
        }
        let recovered = outcome(
            c.query(
                "SELECT * FROM idgen_registry_recover($1::text[])",
                &[&skipped],
            )
            .map(|rows| rows.len()),
        );
        assert!(
            recovered.is_ok(),
            "round {round}: the recovery failed: {recovered:?}"
        );

        let reported_of = |name: &str| -> Vec<i64> {
            counted
                .iter()
                .filter(|(n, _)| n == name)
                .map(|&(_, m)| m)
                .collect()
        };
        let mut check = |what: String, sql: Option<i64>, core: Option<i64>| {
            f.check(sql == core, || {
                format!("round {round}, {what}: SQL {sql:?}, core {core:?} (reports counted: {counted:?}, skipped {skipped:?})")
            });
        };
        for (g, &m) in SEGMENTS.iter().zip(&marks) {
            let sql = c
                .query_opt(
                    "SELECT max_id FROM idgen_registry_segment WHERE name = $1::text",
                    &[g],
                )
                .unwrap()
                .map(|r| r.get::<_, i64>(0));
            check(
                format!("segment {g} at {m}"),
                sql,
                Some(core::recovered_mark(m, reported_of(g))),
            );
        }
        let lost = reported_of(LOST);
        let sql = c
            .query_opt(
                "SELECT max_id FROM idgen_registry_segment WHERE name = $1::text",
                &[&LOST],
            )
            .unwrap()
            .map(|r| r.get::<_, i64>(0));
        let core_lost = (!lost.is_empty()).then(|| core::recovered_mark(i64::MIN, lost.clone()));
        check("the lost segment".to_owned(), sql, core_lost);
        let serial = reported_of(SERIAL);
        let sql = c
            .query_opt(
                "SELECT max_id FROM idgen_registry_serial_counter WHERE serial = 's1' AND period = '2024'",
                &[],
            )
            .unwrap()
            .map(|r| r.get::<_, i64>(0));
        let core_serial = match counter {
            Some(m) => Some(core::recovered_mark(m, serial.clone())),
            None => Some(core::recovered_mark(0, serial.clone())).filter(|&m| m > 0),
        };
        check(
            format!("the serial counter at {counter:?}"),
            sql,
            core_serial,
        );
        let sql_revision: i64 = c.one("SELECT idgen_registry_revision_now()");
        let core_revision = core::recovered_revision(revision as u64, shown.clone());
        check(
            format!("the revision {revision}, shown {shown:?}"),
            Some(sql_revision),
            i64::try_from(core_revision).ok(),
        );
    }
    f.assert_none();
}

/// The registry hands out only when the core's `durable` and `may_hand_out` say it may: a
/// claim's gates (`idgen_registry_check_durable()`, then `idgen_registry_check_open(true)`)
/// refuse with 55000 exactly when the core refuses, for `fsync` on and off, every
/// `synchronous_commit` level, the single-server declaration on and off, no synchronous
/// standby, and a recovery open or not. (The core names the recovery first, the SQL the
/// durability: both are 55000.)
#[test]
fn the_registry_grants_only_when_durable_and_may_hand_out_say_it_may() {
    let (_reg, mut c) = started("conf_durable");
    hello_and_wait(&mut c, "conf", "grants_from");
    let mut f = Findings::new("idgen_registry_check_durable/check_open vs durable/may_hand_out");
    for fsync in [true, false] {
        let on = if fsync { "on" } else { "off" };
        reconfigure(&mut c, "fsync", on, "SELECT current_setting('fsync')", on);
        for declared in [true, false] {
            let on = if declared { "on" } else { "off" };
            reconfigure(
                &mut c,
                "idgen.registry_single_server",
                on,
                "SELECT setting FROM pg_settings WHERE name = 'idgen.registry_single_server'",
                on,
            );
            for level in ["on", "remote_apply", "remote_write", "local", "off"] {
                c.batch_execute(&format!("SET synchronous_commit = {level}"))
                    .unwrap();
                for recovering in [false, true] {
                    c.execute(
                        "UPDATE idgen_registry_server SET recovery_since = CASE WHEN $1::boolean \
                         THEN clock_timestamp() END, recovery_reason = CASE WHEN $1::boolean \
                         THEN 'conformance' END",
                        &[&recovering],
                    )
                    .unwrap();
                    let durability = Durability {
                        fsync,
                        synchronous_commit: matches!(level, "on" | "remote_apply"),
                        synchronous_standbys: 0,
                        declared_single_server: declared,
                    };
                    let state = Registry {
                        revision: 0,
                        epoch: 0,
                        recovering,
                    };
                    let core = core::may_hand_out(state, durability).map_err(sqlstate_of);
                    let sql = outcome(c.execute("SELECT idgen_registry_check_durable()", &[]))
                        .and_then(|_| {
                            outcome(c.execute("SELECT idgen_registry_check_open(true)", &[]))
                        })
                        .map(|_| ());
                    f.check(sql == core, || {
                        format!(
                            "fsync {fsync}, single server {declared}, synchronous_commit {level}, \
                             recovering {recovering}: SQL {sql:?}, core {core:?} (durable: {:?})",
                            core::durable(durability)
                        )
                    });
                }
            }
        }
    }
    f.assert_none();
}
