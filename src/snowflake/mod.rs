//! Snowflake ids: the SQL surface and the subsystem's `init` (DESIGN.md §1). The pure parts are
//! in the `idgen-core` crate: the bit layout ([`layout`](idgen_core::snowflake::layout)), the
//! state word ([`generator`](idgen_core::snowflake::generator)), the clock gate
//! ([`clock`](idgen_core::snowflake::clock)), the reservation file
//! ([`reservation`](idgen_core::snowflake::reservation)) and the text form
//! ([`text`](idgen_core::snowflake::text)). Here: the clock watch in [`watch`], the shared state
//! and the layout fixed at start in [`shared`], the per-id path in [`issue`], the durable
//! reservation in [`durable`] kept ahead by the [`keeper`] background worker,
//! `snowflake_status()` in [`status`], time conversions in [`decode`].
//!
//! An id's way, step by step (`idgen_core::` paths are the core's; the rest are files here):
//!
//! | step | where |
//! |---|---|
//! | worker id | `issue::reserve` → `lease::worker_id` (the setting, or the registry's grant) |
//! | clock | `watch::read_clock` → `idgen_core::snowflake::clock::now_ms` (the TSC gate); a step back is counted by `watch::regression` |
//! | tick and state word | `idgen_core::snowflake::layout::Layout::tick_at` → `idgen_core::snowflake::generator::reserve` (one compare-and-swap on `shared::SnowflakeShared`'s state) |
//! | reservation | `durable::extend` (ahead of need, or when the generator reaches the reserved end) → `idgen_core::snowflake::reservation` (the file), never past `lease::fence_end`; the `keeper` worker keeps it ahead when idle |
//! | wait or refuse | `issue::unblock`: too far ahead of the clock → sleep within `idgen.max_wait_ms`, else 53400 |
//! | id | `idgen_core::snowflake::layout::Layout::id_from_state` (state word + worker id) → `currval` |

mod decode;
mod durable;
mod issue;
mod keeper;
pub(crate) mod lease;
mod shared;
mod status;
mod uuid;
mod watch;

use idgen_core::snowflake::{clock, text};
use pgrx::datetime::TimestampWithTimeZone;
use pgrx::prelude::*;

use crate::error::{Error, OrReport};
use shared::layout;

/// Sets up the generator. Called once from `_PG_init`, in the postmaster, after `guc::init`:
/// calibrates the clock's TSC gate, builds the layout from the settings (an unusable layout, or a
/// worker id that does not fit it, stops the server with 22023 naming the setting), declares the
/// generator's shared memory and registers the reservation keeper.
pub(crate) fn init() {
    clock::calibrate();
    let layout = shared::build_layout().or_report();
    if layout.exhausted_at_unix_ms() <= crate::time::wall_clock_unix_ms() {
        pgrx::warning!(
            "the snowflake layout ran out of time at Unix time {} ms: snowflake_nextval() will fail",
            layout.exhausted_at_unix_ms()
        );
    }
    lease::init();
    crate::shmem::register(shared::PART);
    crate::shmem::register(lease::PART);
    keeper::register();
}

/// The next Snowflake id of this server: `bigint`, positive, strictly greater than every id
/// this server issued before, in any backend or database.
///
/// Lock-free: one compare-and-swap on the shared state word. Never waits while the id stays
/// within `idgen.max_drift_ms` of the wall clock; beyond it waits for the clock up to
/// `idgen.max_wait_ms`, then fails with 53400 (DESIGN.md §1 "Clock policy"). Errors: 55000
/// until `idgen.worker_id` is set; 25006 on a standby; 2200H when the layout has run out of
/// time; XX001/58030/55000 when the reservation file is corrupt, unwritable or from another
/// layout (see `issue::reserve`).
#[pg_extern(volatile, parallel_restricted)]
fn snowflake_nextval() -> i64 {
    issue::reserve(1, issue::Caller::Ids).or_report().last_id
}

/// `count` consecutive Snowflake ids from one reservation (one CAS), in increasing order.
///
/// `count` is `1..=` the ids the layout issues per second (4,096,000 by default), and no more
/// than fit in the `idgen.max_drift_ms + 1` ticks (whole ticks) from the clock's on: a larger
/// batch would run the generator far ahead of the clock. `idgen.sequence_jitter` does not lower
/// the maximum: a batch that opens a new tick starts its sequence low enough to fit, so from an
/// idle generator a batch of the maximum never waits. Errors: 22004 for NULL, 22023 out of
/// range, and those of [`snowflake_nextval`] (53400 when an earlier batch has run the generator
/// so far ahead that the clock would not catch up within `idgen.max_wait_ms`).
/// `snowflake_currval()` becomes the last id.
#[pg_extern(volatile, parallel_restricted)]
fn snowflake_nextvals(count: Option<i32>) -> SetOfIterator<'static, i64> {
    let count = count
        .ok_or(Error::NullArgument { argument: "count" })
        .or_report();
    let layout = layout();
    let max = issue::max_batch();
    if count < 1 || count as u64 > max {
        Error::CountOutOfRange {
            count: count.into(),
            max,
        }
        .report();
    }
    let drawn = issue::reserve(count as u64, issue::Caller::Ids).or_report();
    let (r, worker) = (drawn.reservation, drawn.worker);
    SetOfIterator::new((r.first..=r.last).map(move |state| {
        layout
            .id_from_state(state, worker)
            .expect("the reservation was checked against the layout")
    }))
}

/// The id most recently returned by `snowflake_nextval()`/`snowflake_nextvals()` in this session,
/// as `currval` is for sequences. Errors with 55000 before the first one.
#[pg_extern(volatile, parallel_restricted)]
fn snowflake_currval() -> i64 {
    issue::currval().or_report()
}

/// Forgets this session's `snowflake_currval()` (`DISCARD SEQUENCES`, `DISCARD ALL`, whose hook
/// is the segment cache's `ProcessUtility_hook`): a pooler's next client gets 55000 before its
/// first id, as with `currval`, never the previous client's id.
pub(crate) fn discard_currval() {
    issue::discard_currval();
}

/// The parts of a Snowflake id under this server's layout: the start of its tick, its worker id
/// and its sequence. One row. Errors with 22023 for a negative id.
#[pg_extern(immutable, strict, parallel_safe)]
fn snowflake_decode(
    id: i64,
) -> TableIterator<
    'static,
    (
        name!(ts, TimestampWithTimeZone),
        name!(worker_id, i32),
        name!(sequence, i32),
    ),
> {
    let (ts, parts) = decode::decode(layout(), id).or_report();
    TableIterator::once((ts, parts.worker as i32, parts.sequence as i32))
}

/// The start of the tick in which a Snowflake id was issued. Errors with 22023 for a negative id.
#[pg_extern(immutable, strict, parallel_safe)]
fn snowflake_timestamp(id: i64) -> TimestampWithTimeZone {
    decode::decode(layout(), id).or_report().0
}

/// The lowest id at time `ts` for `worker_id` and `sequence` (both default 0): bounds for range
/// scans and partitions, e.g. `WHERE id >= snowflake_compose('2026-01-01')`.
///
/// Errors: 22008 when `ts` is before `idgen.epoch`, past the layout's end, or infinite; 22003
/// when the worker id or sequence does not fit the layout.
#[pg_extern(immutable, strict, parallel_safe)]
fn snowflake_compose(
    ts: TimestampWithTimeZone,
    worker_id: default!(i32, 0),
    sequence: default!(i32, 0),
) -> i64 {
    decode::compose(layout(), ts, worker_id.into(), sequence.into()).or_report()
}

/// A Snowflake UUID: an RFC 9562 version-7 `uuid` drawn from the same generator (the same state
/// word) as `snowflake_nextval()`. Bits, most significant first: 48 the Unix millisecond at which
/// the id's tick starts; 4 the version, 7; the tick's sequence (RFC 9562 §6.2 Method 1's counter:
/// in the default layout exactly the 12 bits of `rand_a`); 2 the variant, `10`; the worker id;
/// random bits from the CSPRNG in the rest (52 in the default layout).
///
/// Strictly greater (as PostgreSQL orders `uuid`s) than every Snowflake UUID this server issued
/// before, in any backend, across restarts, crashes and promotions; distinct from every other
/// server's with another worker id. Never equal in parts to a `bigint` id the server issued.
/// Leaves `snowflake_currval()` as it was. Errors: those of `snowflake_nextval()` (55000, 25006,
/// 53400, 2200H, XX001, 58030), and 22008 when the tick's start is outside the 48-bit time field
/// (after the year 10889, reachable only with an unusual `idgen.epoch` and `idgen.time_unit_ms`).
/// RFC 9562 §6.4 recommends version 8 for a UUID with a node id; version 7 is kept so that every
/// consumer of version 7 (`uuid_extract_timestamp()`, ORMs) accepts it.
#[pg_extern(volatile, parallel_restricted)]
fn snowflake_uuid() -> pgrx::Uuid {
    pgrx::Uuid::from_bytes(uuid::next().or_report())
}

/// The parts of a Snowflake UUID under this server's layout: the start of its tick, its worker id
/// and its sequence, as `snowflake_decode` gives them for the `bigint` id. One row. Errors with
/// 22023 when the uuid is not version 7 with RFC 9562's variant, or its time is not the start of
/// one of this layout's ticks. A version-7 uuid from elsewhere whose time happens to start a tick
/// decodes to meaningless parts, as a foreign `bigint` does.
#[pg_extern(immutable, strict, parallel_safe)]
fn snowflake_uuid_decode(
    uuid: pgrx::Uuid,
) -> TableIterator<
    'static,
    (
        name!(ts, TimestampWithTimeZone),
        name!(worker_id, i32),
        name!(sequence, i32),
    ),
> {
    let parts = uuid::decode(*uuid.as_bytes()).or_report();
    let ts = decode::tick_start(layout(), parts.tick).or_report();
    TableIterator::once((ts, parts.worker as i32, parts.sequence as i32))
}

/// The `bigint` Snowflake id with the uuid's tick, worker id and sequence (its random bits are
/// dropped). Errors with 22023 as `snowflake_uuid_decode`.
#[pg_extern(immutable, strict, parallel_safe)]
fn snowflake_uuid_to_id(uuid: pgrx::Uuid) -> i64 {
    uuid::to_id(*uuid.as_bytes()).or_report()
}

/// The canonical Snowflake UUID of a `bigint` id: its tick, worker id and sequence with every
/// random bit zero, so that `snowflake_uuid_to_id(snowflake_uuid_from_id(id)) = id`, and
/// `snowflake_uuid_from_id(snowflake_uuid_to_id(u))` is `u` with its random bits cleared. Errors:
/// 22023 for a negative id or one not below `2^idgen.id_bits`; 22008 when its tick starts outside
/// the 48-bit time field.
#[pg_extern(immutable, strict, parallel_safe)]
fn snowflake_uuid_from_id(id: i64) -> pgrx::Uuid {
    pgrx::Uuid::from_bytes(uuid::from_id(id).or_report())
}

/// This server's worker id (`idgen.worker_id`, or the registry's grant), for the `{worker}`
/// token of serial numbers. Errors: 55000 while it is unset or not yet granted.
pub(crate) fn worker_id() -> Result<u64, Error> {
    lease::worker_id()
}

/// The text form of a Snowflake id, a serial number: `prefix` + the UTC start of its
/// tick as `yyyyMMddHHmmssSSS` + the worker id + the sequence, zero-padded to the layout's
/// widths (4 and 4 digits by default), e.g. `ORD2026112208301512300070042`. For one prefix the
/// texts sort (`COLLATE "C"`) as the ids do; `snowflake_parse` reads the id back. Errors: 22023
/// a negative id, 22008 a tick after the year 9999.
#[pg_extern(immutable, strict, parallel_safe)]
fn snowflake_format(id: i64, prefix: default!(&str, "''")) -> String {
    text::format(layout(), id, prefix)
        .map_err(Error::from)
        .or_report()
}

/// The Snowflake id whose text form is `text` (any prefix): the inverse of `snowflake_format`.
/// Errors: 22P02 a text that is no id's text form (too short, a non-digit among the last 25
/// characters, a date or time that does not exist, a time inside a tick), 22008 a time before
/// the epoch or past the layout, 22003 a worker id or sequence out of range.
#[pg_extern(immutable, strict, parallel_safe)]
fn snowflake_parse(text: &str) -> i64 {
    text::parse(layout(), text).map_err(Error::from).or_report()
}

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    use crate::testing::{assert_sqlstate, one_i64};
    use pgrx::prelude::*;

    #[pg_test]
    fn the_text_form_reads_back_and_sorts_like_the_ids() {
        let ids: Vec<i64> = Spi::connect(|c| {
            c.select("SELECT snowflake_nextvals(3)", None, &[])
                .unwrap()
                .map(|row| row.get::<i64>(1).unwrap().unwrap())
                .collect()
        });
        let text = |id: i64| {
            Spi::get_one::<String>(&format!("SELECT snowflake_format({id}, 'INV-')"))
                .unwrap()
                .unwrap()
        };
        let texts: Vec<String> = ids.iter().map(|&id| text(id)).collect();
        for (id, t) in ids.iter().zip(&texts) {
            // INV- + 17 digits of time + 4 of worker (42) + 4 of sequence.
            assert_eq!(t.len(), 4 + 25, "{t}");
            assert_eq!(&t[21..25], "0042", "{t}");
            let back = one_i64(&format!("SELECT snowflake_parse('{t}')"));
            assert_eq!(back, *id);
        }
        assert!(texts.windows(2).all(|w| w[0] < w[1]), "{texts:?}");
        // The time part is the id's tick start in UTC.
        let same: bool = Spi::get_one(&format!(
            "SELECT to_char(snowflake_timestamp({0}) AT TIME ZONE 'UTC', 'YYYYMMDDHH24MISSMS')              = substr(snowflake_format({0}), 1, 17)",
            ids[0]
        ))
        .unwrap()
        .unwrap();
        assert!(same);
        assert_eq!(
            Spi::get_one::<String>("SELECT snowflake_format(NULL)").unwrap(),
            None
        );
        assert_sqlstate("SELECT snowflake_format(-1)", "22023");
        assert_sqlstate("SELECT snowflake_parse('INV-2026')", "22P02");
        assert_sqlstate(
            "SELECT snowflake_parse('2026133108301512300070042')",
            "22P02",
        );
        assert_sqlstate(
            "SELECT snowflake_parse('2023123123595999900000000')",
            "22008",
        );
        assert_sqlstate(
            "SELECT snowflake_parse('2026112208301512310240042')",
            "22003",
        );
    }

    #[pg_test]
    fn nextval_increases_and_carries_the_worker_id() {
        let a = one_i64("SELECT snowflake_nextval()");
        let b = one_i64("SELECT snowflake_nextval()");
        assert!(a > 0 && b > a, "{a} then {b}");
        assert_eq!((b >> 12) & 1023, 42, "worker id bits of {b}");
        assert_eq!(one_i64("SELECT snowflake_currval()"), b);
        let worker =
            Spi::get_one::<i32>(&format!("SELECT worker_id FROM snowflake_decode({b})")).unwrap();
        assert_eq!(worker, Some(42));
    }

    /// `DISCARD SEQUENCES` (and `DISCARD ALL`, which a transaction block refuses) forget
    /// `snowflake_currval()`, as they forget `currval` (else a pooler's next client would get
    /// the previous client's id).
    #[pg_test]
    fn discard_sequences_forgets_currval() {
        let id = one_i64("SELECT snowflake_nextval()");
        assert_eq!(one_i64("SELECT snowflake_currval()"), id);
        Spi::run("DISCARD SEQUENCES").unwrap();
        assert_sqlstate("SELECT snowflake_currval()", "55000");
        assert!(one_i64("SELECT snowflake_nextval()") > id);
    }

    #[pg_test]
    fn nextvals_returns_consecutive_increasing_ids_and_sets_currval() {
        let ids: Vec<i64> = Spi::connect(|c| {
            c.select("SELECT snowflake_nextvals(5000)", None, &[])
                .unwrap()
                .map(|row| row.get::<i64>(1).unwrap().unwrap())
                .collect()
        });
        assert_eq!(ids.len(), 5000);
        assert!(ids.windows(2).all(|w| w[0] < w[1]));
        // 5000 ids need at least two ticks: the batch borrows rather than repeating a sequence.
        let distinct_ticks: std::collections::BTreeSet<i64> =
            ids.iter().map(|id| id >> 22).collect();
        assert!(distinct_ticks.len() >= 2);
        assert_eq!(one_i64("SELECT snowflake_currval()"), *ids.last().unwrap());
        assert!(one_i64("SELECT snowflake_nextval()") > *ids.last().unwrap());
    }

    #[pg_test]
    fn compose_and_decode_are_inverse() {
        let id = one_i64("SELECT snowflake_compose('2026-05-04 03:02:01.123+00', 42, 7)");
        let row = Spi::get_three::<bool, i32, i32>(&format!(
            "SELECT ts = '2026-05-04 03:02:01.123+00', worker_id, sequence FROM snowflake_decode({id})"
        ))
        .unwrap();
        assert_eq!(row, (Some(true), Some(42), Some(7)));
        let same_ts = Spi::get_one::<bool>(&format!(
            "SELECT snowflake_timestamp({id}) = '2026-05-04 03:02:01.123+00'"
        ))
        .unwrap();
        assert_eq!(same_ts, Some(true));
        // Defaults give the lowest id at that millisecond; sub-millisecond digits are truncated.
        let low = one_i64("SELECT snowflake_compose('2026-05-04 03:02:01.1239+00')");
        assert_eq!(low, id & !((1 << 22) - 1));
        // The epoch itself is id 0.
        assert_eq!(
            one_i64("SELECT snowflake_compose('2024-01-01 00:00:00+00')"),
            0
        );
    }

    #[pg_test]
    fn generated_ids_decode_to_now() {
        let ok = Spi::get_one::<bool>(
            "SELECT snowflake_timestamp(snowflake_nextval()) BETWEEN now() - interval '1 minute' AND clock_timestamp() + interval '2 seconds'",
        )
        .unwrap();
        assert_eq!(ok, Some(true));
    }

    #[pg_test]
    fn compose_bounds_select_ids_by_time() {
        let id = one_i64("SELECT snowflake_nextval()");
        let inside = Spi::get_one::<bool>(&format!(
            "SELECT {id} >= snowflake_compose(snowflake_timestamp({id})) \
             AND {id} < snowflake_compose(snowflake_timestamp({id}) + interval '1 millisecond')"
        ))
        .unwrap();
        assert_eq!(inside, Some(true));
    }

    #[pg_test]
    fn status_reports_the_worker_layout_and_last_id() {
        let id = one_i64("SELECT snowflake_nextval()");
        let (worker, bits, last) = Spi::get_three::<i32, i32, i64>(
            "SELECT worker_id, time_bits + worker_bits + sequence_bits, last_id FROM snowflake_status()",
        )
        .unwrap();
        assert_eq!(worker, Some(42));
        assert_eq!(bits, Some(63));
        assert_eq!(
            one_i64("SELECT id_bits::bigint FROM snowflake_status()"),
            63
        );
        assert!(last.unwrap() >= id);
        let epoch_ok = Spi::get_one::<bool>(
            "SELECT epoch = '2024-01-01 00:00:00+00' AND exhausted_at > '2093-01-01' FROM snowflake_status()",
        )
        .unwrap();
        assert_eq!(epoch_ok, Some(true));
    }

    /// Drift is how far the last tick is ahead of the wall clock. One reservation of a second's
    /// ids runs the generator ~1000 ticks ahead; it is called in the select list, where LIMIT 1
    /// stops after one row (in FROM, PostgreSQL would first materialise all 4,096,000). The
    /// status read is bracketed by two clock reads, so drift must lie between the two bounds.
    #[pg_test]
    fn drift_is_how_far_the_last_tick_is_ahead_of_the_clock() {
        let clock_ms = "SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint";
        Spi::run("SELECT snowflake_nextvals(4096000) LIMIT 1").unwrap();
        let before = one_i64(clock_ms);
        let (drift, last_tick_ms) = Spi::get_two::<i64, i64>(
            "SELECT drift_ms, (extract(epoch FROM last_tick_at) * 1000)::bigint FROM snowflake_status()",
        )
        .unwrap();
        let after = one_i64(clock_ms);
        let (drift, last_tick_ms) = (drift.unwrap(), last_tick_ms.unwrap());
        assert!(
            (last_tick_ms - after).max(0) <= drift && drift <= (last_tick_ms - before).max(0),
            "drift {drift} ms, last tick at {last_tick_ms}, clock between {before} and {after}"
        );
    }

    #[pg_test]
    fn bad_counts_fail_with_their_sqlstates() {
        assert_sqlstate("SELECT snowflake_nextvals(NULL)", "22004");
        assert_sqlstate("SELECT snowflake_nextvals(0)", "22023");
        assert_sqlstate("SELECT snowflake_nextvals(-1)", "22023");
        assert_sqlstate("SELECT snowflake_nextvals(2147483647)", "22023");
    }

    #[pg_test]
    fn bad_ids_fail_with_their_sqlstates() {
        assert_sqlstate("SELECT snowflake_decode(-1)", "22023");
        assert_sqlstate("SELECT snowflake_timestamp(-9223372036854775808)", "22023");
    }

    /// `idgen.id_bits` (63 on the test server): the layout's last instant composes to its
    /// largest id, `2^id_bits - 1`, and every id up to it decodes and formats; the next instant
    /// is refused. What is derived from the layout agrees with `snowflake_status()`.
    #[pg_test]
    fn the_largest_id_is_two_to_the_id_bits_minus_one() {
        let top = one_i64(
            "SELECT snowflake_compose(exhausted_at - interval '1 millisecond', 1023, 4095) \
             FROM snowflake_status()",
        );
        let id_bits = one_i64("SELECT id_bits::bigint FROM snowflake_status()");
        assert_eq!(top as u64, (1u64 << id_bits) - 1);
        assert_eq!(top, i64::MAX);
        let ok = Spi::get_one::<bool>(&format!(
            "SELECT (SELECT ts = exhausted_at - interval '1 millisecond' FROM snowflake_decode({top})) \
                AND snowflake_timestamp({top}) = exhausted_at - interval '1 millisecond' \
                AND snowflake_parse(snowflake_format({top})) = {top} \
             FROM snowflake_status()"
        ))
        .unwrap();
        assert_eq!(ok, Some(true));
        assert_sqlstate(
            "SELECT snowflake_compose(exhausted_at) FROM snowflake_status()",
            "22008",
        );
        let setting = Spi::get_two::<String, String>(
            "SELECT setting, context FROM pg_settings WHERE name = 'idgen.id_bits'",
        )
        .unwrap();
        assert_eq!(
            setting,
            (Some("63".to_owned()), Some("postmaster".to_owned()))
        );
    }

    #[pg_test]
    fn bad_compose_arguments_fail_with_their_sqlstates() {
        assert_sqlstate("SELECT snowflake_compose(now(), 1024)", "22003");
        assert_sqlstate("SELECT snowflake_compose(now(), -1)", "22003");
        assert_sqlstate("SELECT snowflake_compose(now(), 0, 4096)", "22003");
        assert_sqlstate("SELECT snowflake_compose(now(), 0, -1)", "22003");
        assert_sqlstate(
            "SELECT snowflake_compose('2023-12-31 23:59:59.999+00')",
            "22008",
        );
        assert_sqlstate("SELECT snowflake_compose('2100-01-01+00')", "22008");
        assert_sqlstate("SELECT snowflake_compose('infinity')", "22008");
        assert_sqlstate("SELECT snowflake_compose('-infinity')", "22008");
    }

    /// Every id is below the durable reservation, which runs ahead of the last id and was
    /// written (at least once for this server) rather than per id.
    #[pg_test]
    fn the_reservation_runs_ahead_of_the_last_id() {
        let id = one_i64("SELECT snowflake_nextval()");
        let (reserved, writes, ahead) = Spi::get_three::<i64, i64, bool>(
            "SELECT reserved_tick, reservation_writes, reserved_until > last_tick_at FROM snowflake_status()",
        )
        .unwrap();
        assert!(
            reserved.unwrap() >= id >> 22,
            "reserved {reserved:?}, id {id}"
        );
        assert_eq!(ahead, Some(true));
        let writes = writes.unwrap();
        assert!(writes >= 1);
        Spi::run("SELECT snowflake_nextval() FROM generate_series(1, 1000)").unwrap();
        let later = one_i64("SELECT reservation_writes FROM snowflake_status()");
        assert!(
            later - writes <= 2,
            "{} writes for 1000 ids",
            later - writes
        );
    }

    #[pg_test]
    fn worker_id_cannot_be_changed_in_a_session() {
        assert_sqlstate("SET idgen.worker_id = 3", "55P02");
        assert_sqlstate("SET idgen.worker_bits = 5", "55P02");
        assert_sqlstate("SET idgen.id_bits = 53", "55P02");
        assert_sqlstate("SET idgen.max_drift_ms = -1", "55P02");
        assert_sqlstate("SET idgen.epoch = '2025-01-01+00'", "55P02");
        assert_sqlstate("SET idgen.no_such_setting = 1", "42602"); // the prefix is reserved
    }

    #[pg_test]
    fn decoders_are_immutable_strict_and_parallel_safe() {
        let n = Spi::get_one::<i64>(
            "SELECT count(*) FROM pg_proc WHERE proname IN ('snowflake_decode', 'snowflake_timestamp', 'snowflake_compose') \
             AND provolatile = 'i' AND proisstrict AND proparallel = 's'",
        )
        .unwrap();
        assert_eq!(n, Some(3));
        let generators = Spi::get_one::<i64>(
            "SELECT count(*) FROM pg_proc WHERE proname IN ('snowflake_nextval', 'snowflake_nextvals', 'snowflake_currval') \
             AND provolatile = 'v' AND proparallel = 'r'",
        )
        .unwrap();
        assert_eq!(generators, Some(3));
    }

    /// A Snowflake UUID is version 7 with RFC 9562's variant (read from its text, as 15 and
    /// 16 have no `uuid_extract_version()`), carries the id's parts, converts to the id and back
    /// to its canonical form, and bad input gets 22023.
    #[pg_test]
    fn a_snowflake_uuid_is_version_7_and_converts_to_its_id_and_back() {
        let ok = Spi::get_one::<bool>(
            "WITH u AS (SELECT snowflake_uuid() AS u),
                  d AS (SELECT u, snowflake_uuid_to_id(u) AS id FROM u)
             SELECT substr(u::text, 15, 1) = '7'
                AND substr(u::text, 20, 1) IN ('8', '9', 'a', 'b')
                AND (SELECT (ts, worker_id, sequence) FROM snowflake_uuid_decode(u))
                    = (SELECT (ts, worker_id, sequence) FROM snowflake_decode(id))
                AND snowflake_uuid_to_id(snowflake_uuid_from_id(id)) = id
                AND snowflake_uuid_from_id(id)::text LIKE '%0-000000000000'
                AND left(snowflake_uuid_from_id(id)::text, 22) = left(u::text, 22)
             FROM d",
        )
        .unwrap();
        assert_eq!(ok, Some(true));
        assert_sqlstate(
            "SELECT snowflake_uuid_to_id('0190a1b2-c3d4-4e5f-8a6b-7c8d9e0f1a2b')",
            "22023",
        );
        assert_sqlstate(
            "SELECT * FROM snowflake_uuid_decode('00000000-0001-7000-8000-000000000000')",
            "22023",
        );
        assert_sqlstate("SELECT snowflake_uuid_from_id(-1)", "22023");
    }
}
