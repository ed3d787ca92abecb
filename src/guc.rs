//! Every idgen setting: one private static each, defined in [`init`], read through typed getters.
//! Nothing else touches the statics (the model is pg_search's `gucs.rs`).
//!
//! Settings that uniqueness depends on (worker id, layout, epoch) are `postmaster` context: they
//! are read from `postgresql.conf` at server start, cannot be changed by `SET` (SQLSTATE 55P02),
//! and are the same in every backend of the server. The clock policy (`idgen.max_drift_ms`,
//! `idgen.max_wait_ms`) and `idgen.sequence_jitter` are `sighup`: reloadable, never per session,
//! and none of their values can make an id repeat. The segment interleave (node count and
//! index) is `sighup` too, but a change takes effect only together with a fence
//! (`idgen.segment_interleave_from`, see [`segment_nodes`]).
//!
//! No value of any setting can stop a running server: PostgreSQL checks every setting written in
//! postgresql.conf at each reload, in the postmaster too (postmaster-context ones included, which
//! it then does not apply), and an ERROR there is fatal. The integer settings have no check hook
//! (PostgreSQL's own range check only logs); `idgen.epoch`'s hook catches every ERROR, and the
//! fence settings' hook parses in plain Rust, so both refuse a bad value instead: a reload logs
//! "invalid value for parameter" and keeps the old value, and `ALTER SYSTEM` fails with 22023.

use std::ffi::{c_char, c_void, CStr, CString};

use pgrx::datetime::TimestampWithTimeZone;
use pgrx::pg_sys;
use pgrx::pg_sys::panic::CaughtError;
use pgrx::prelude::*;
use pgrx::{GucContext, GucFlags, GucRegistry, GucSetting};

/// `idgen.worker_id`: this server's Snowflake worker id, `0..=2^worker_bits - 1` (0..=1023 by
/// default; checked against the layout at start). The default `-1` means "not set":
/// `snowflake_nextval()` fails (SQLSTATE 55000) until the DBA picks one. There is deliberately
/// no valid default, as in pgEdge snowflake: two servers sharing a worker id issue duplicate
/// ids, the field's most common production failure.
static WORKER_ID: GucSetting<i32> = GucSetting::<i32>::new(-1);

/// `idgen.worker_bits`: width of the worker field of a Snowflake id (default 10, Twitter's).
static WORKER_BITS: GucSetting<i32> = GucSetting::<i32>::new(10);

/// `idgen.sequence_bits`: width of the sequence field (default 12, Twitter's: 4096 ids a tick).
static SEQUENCE_BITS: GucSetting<i32> = GucSetting::<i32>::new(12);

/// `idgen.time_unit_ms`: length of one tick of the time field, in ms (default 1; Sonyflake 10).
static TIME_UNIT_MS: GucSetting<i32> = GucSetting::<i32>::new(1);

/// `idgen.max_drift_ms`: how far ahead of the wall clock the generator may stamp ids, in ms
/// (default 1000; -1 unbounded, as pgEdge snowflake). Reloadable.
static MAX_DRIFT_MS: GucSetting<i32> = GucSetting::<i32>::new(1000);

/// `idgen.max_wait_ms`: how long a call beyond the drift bound waits for the clock before it
/// fails with SQLSTATE 53400, in ms (default 5000). Reloadable.
static MAX_WAIT_MS: GucSetting<i32> = GucSetting::<i32>::new(5000);

/// `idgen.sequence_jitter`: the first id of a new tick starts at a random sequence below this
/// bound (default 0: at 0), as Leaf does with 100. Reloadable.
static SEQUENCE_JITTER: GucSetting<i32> = GucSetting::<i32>::new(0);

/// The text of the default epoch.
const DEFAULT_EPOCH: &CStr = c"2024-01-01 00:00:00+00";

/// `idgen.epoch`: the instant at which Snowflake tick 0 starts, as a `timestamptz` literal.
/// Default `2024-01-01 00:00:00+00`, good until 2093 with 41 time bits of 1 ms. Changing it on a
/// server that has issued ids moves every later id's time field: it is fixed at server start.
static EPOCH: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(Some(DEFAULT_EPOCH));

/// `idgen.segment_wait_timeout`: how long a caller waits for a range when both buffers of a
/// segment are empty, in ms (default 10 s; 0 waits until cancelled). Per session, like
/// `lock_timeout`: it only bounds the caller's own wait. Past it: SQLSTATE 55P03.
static SEGMENT_WAIT_TIMEOUT: GucSetting<i32> = GucSetting::<i32>::new(10_000);

/// `idgen.segment_refill_interval`: Leaf's `SEGMENT_DURATION`, in ms (default 15 min). A range
/// used up faster doubles the next step; one lasting twice as long halves it. Reloadable.
static SEGMENT_REFILL_INTERVAL: GucSetting<i32> = GucSetting::<i32>::new(15 * 60 * 1000);

/// `idgen.segment_max_step`: the largest step the dynamic step grows to (default 1,000,000, as
/// Leaf's `MAX_STEP`); a segment whose own step is larger keeps its own. Reloadable.
static SEGMENT_MAX_STEP: GucSetting<i32> = GucSetting::<i32>::new(1_000_000);

/// `idgen.segment_worker_idle_timeout`: an allocator background worker with nothing to do for
/// this long exits, in ms (default 60 s); the next caller that needs it starts it again.
static SEGMENT_WORKER_IDLE_TIMEOUT: GucSetting<i32> = GucSetting::<i32>::new(60_000);

/// `idgen.segment_node_count`: how many servers share segment names (default 1). With more,
/// server `idgen.segment_node_index` takes only the blocks of `step` numbers whose block number
/// is its index modulo the count (seed 001's inner/outer step), so servers never overlap.
static SEGMENT_NODE_COUNT: GucSetting<i32> = GucSetting::<i32>::new(1);

/// `idgen.segment_node_index`: this server's 0-based place among `idgen.segment_node_count`.
static SEGMENT_NODE_INDEX: GucSetting<i32> = GucSetting::<i32>::new(0);

/// `idgen.segment_interleave_from` and `idgen.segment_interleave_until`: the fences of growing
/// from N to M servers under traffic (`segment::range::Fences`), as text (a bigint does not fit
/// an integer setting); empty for none. Reloadable.
static SEGMENT_INTERLEAVE_FROM: GucSetting<Option<CString>> =
    GucSetting::<Option<CString>>::new(Some(c""));
static SEGMENT_INTERLEAVE_UNTIL: GucSetting<Option<CString>> =
    GucSetting::<Option<CString>>::new(Some(c""));

/// The interleave the server started with: changing it by a reload is safe only together with
/// `idgen.segment_interleave_from` (see [`segment_nodes`]).
static STARTED_NODES: std::sync::OnceLock<(i32, i32)> = std::sync::OnceLock::new();

/// Every integer setting: (name, short description, long description, static, min, max,
/// context, unit flags). None may silently fall back to its default (see [`init`]).
type IntSetting = (
    &'static CStr,
    &'static CStr,
    &'static CStr,
    &'static GucSetting<i32>,
    i32,
    i32,
    GucContext,
    GucFlags,
);

fn int_settings() -> [IntSetting; 13] {
    [
        (
            c"idgen.worker_id",
            c"Snowflake worker id of this server, unique among all servers sharing an id space.",
            c"From 0 to 2^idgen.worker_bits - 1 (1023 by default). -1 (the default) means unset: snowflake_nextval() fails until it is set.",
            &WORKER_ID,
            -1,
            i32::MAX,
            GucContext::Postmaster,
            GucFlags::default(),
        ),
        (
            c"idgen.worker_bits",
            c"Width of the worker id field of a Snowflake id, in bits.",
            c"Time bits are what is left of 63 after worker and sequence bits; at least 32 must be left.",
            &WORKER_BITS,
            0,
            31,
            GucContext::Postmaster,
            GucFlags::default(),
        ),
        (
            c"idgen.sequence_bits",
            c"Width of the sequence field of a Snowflake id, in bits.",
            c"2^sequence_bits ids per tick before the generator borrows the next tick.",
            &SEQUENCE_BITS,
            0,
            31,
            GucContext::Postmaster,
            GucFlags::default(),
        ),
        (
            c"idgen.time_unit_ms",
            c"Length of one tick of the Snowflake time field.",
            c"1 ms as Twitter's Snowflake; 10 ms as Sonyflake.",
            &TIME_UNIT_MS,
            1,
            86_400_000,
            GucContext::Postmaster,
            GucFlags::UNIT_MS,
        ),
        (
            c"idgen.max_drift_ms",
            c"How far ahead of the wall clock Snowflake ids may be stamped.",
            c"Within it calls never wait; beyond it they wait up to idgen.max_wait_ms for the clock. -1 means unbounded.",
            &MAX_DRIFT_MS,
            -1,
            i32::MAX,
            GucContext::Sighup,
            GucFlags::UNIT_MS,
        ),
        (
            c"idgen.max_wait_ms",
            c"How long a Snowflake call beyond idgen.max_drift_ms waits for the clock.",
            c"A call that cannot be served within it fails with SQLSTATE 53400. 0 never waits.",
            &MAX_WAIT_MS,
            0,
            i32::MAX,
            GucContext::Sighup,
            GucFlags::UNIT_MS,
        ),
        (
            c"idgen.sequence_jitter",
            c"The first Snowflake id of a new tick starts at a random sequence below this bound.",
            c"0 (the default) starts at 0. Spreads low-traffic ids over id % N shards, as Leaf does with 100.",
            &SEQUENCE_JITTER,
            0,
            i32::MAX,
            GucContext::Sighup,
            GucFlags::default(),
        ),
        (
            c"idgen.segment_wait_timeout",
            c"How long a segment_nextval waits for a range when both cached ranges are empty.",
            c"In milliseconds; 0 waits until cancelled. Past it the call fails with SQLSTATE 55P03.",
            &SEGMENT_WAIT_TIMEOUT,
            0,
            i32::MAX,
            GucContext::Userset,
            GucFlags::UNIT_MS,
        ),
        (
            c"idgen.segment_refill_interval",
            c"Target lifetime of a cached segment range (Leaf's dynamic step).",
            c"A range used up faster doubles the next step; one lasting twice as long halves it.",
            &SEGMENT_REFILL_INTERVAL,
            1,
            i32::MAX,
            GucContext::Sighup,
            GucFlags::UNIT_MS,
        ),
        (
            c"idgen.segment_max_step",
            c"Largest step the dynamic step of a segment grows to.",
            c"A segment whose own step is larger keeps its own step.",
            &SEGMENT_MAX_STEP,
            1,
            crate::segment::range::MAX_STEP,
            GucContext::Sighup,
            GucFlags::default(),
        ),
        (
            c"idgen.segment_node_count",
            c"How many servers share segment names, each taking its own blocks of numbers.",
            c"1 (the default): this server takes every block. Set the same count on every server, and the same step for each segment.",
            &SEGMENT_NODE_COUNT,
            1,
            1024,
            GucContext::Sighup,
            GucFlags::default(),
        ),
        (
            c"idgen.segment_node_index",
            c"This server's 0-based place among idgen.segment_node_count servers.",
            c"Server i takes the blocks of step numbers whose block number is i modulo the count. Unique per server.",
            &SEGMENT_NODE_INDEX,
            0,
            1023,
            GucContext::Sighup,
            GucFlags::default(),
        ),
        (
            c"idgen.segment_worker_idle_timeout",
            c"How long an idle idgen allocator worker stays before it exits.",
            c"In milliseconds. The next call that needs the worker starts it again.",
            &SEGMENT_WORKER_IDLE_TIMEOUT,
            1,
            i32::MAX,
            GucContext::Sighup,
            GucFlags::UNIT_MS,
        ),
    ]
}

/// Defines every setting and reserves the `idgen.` prefix. Called once from `_PG_init`, in the
/// postmaster (the library is preloaded), before any backend exists.
///
/// PostgreSQL only warns when `postgresql.conf` gives a custom setting a value its definition
/// rejects, and keeps the default: for a uniqueness-critical setting that would be a silent
/// change of identity. So each setting's text is read before it is defined, and if it did not
/// take effect the server refuses to start (22023, naming the setting).
pub fn init() {
    let epoch_text = configured_text(c"idgen.epoch");
    let fence_texts = [
        c"idgen.segment_interleave_from",
        c"idgen.segment_interleave_until",
    ]
    .map(|name| (name, configured_text(name)));
    let int_texts = int_settings().map(|(name, ..)| configured_text(name));

    // pgrx offers no string GUC with a check hook, hence the direct call.
    // SAFETY: called once in _PG_init; the name, descriptions and boot value are 'static C
    // strings and EPOCH's storage is a 'static cell that PostgreSQL owns from here on.
    unsafe {
        pg_sys::DefineCustomStringVariable(
            c"idgen.epoch".as_ptr(),
            c"Instant at which Snowflake tick 0 starts (a timestamptz literal).".as_ptr(),
            c"Fixed at server start; must not be in the future. Give an explicit UTC offset."
                .as_ptr(),
            EPOCH.as_ptr(),
            DEFAULT_EPOCH.as_ptr(),
            pg_sys::GucContext::PGC_POSTMASTER,
            0,
            Some(check_epoch),
            None,
            None,
        );
    }
    for (name, short, long, setting, min, max, context, flags) in int_settings() {
        GucRegistry::define_int_guc(name, short, long, setting, min, max, context, flags);
    }
    for (name, short, setting) in [
        (
            c"idgen.segment_interleave_from",
            c"The current segment interleave hands out numbers above this one only (growing from N to M servers).",
            &SEGMENT_INTERLEAVE_FROM,
        ),
        (
            c"idgen.segment_interleave_until",
            c"The current segment interleave hands out numbers up to this one only (growing from N to M servers).",
            &SEGMENT_INTERLEAVE_UNTIL,
        ),
    ] {
        // SAFETY: called once in _PG_init; 'static names, descriptions and storage.
        unsafe {
            pg_sys::DefineCustomStringVariable(
                name.as_ptr(),
                short.as_ptr(),
                c"A bigint, or empty for none. See README, Growing from N to M servers.".as_ptr(),
                setting.as_ptr(),
                c"".as_ptr(),
                pg_sys::GucContext::PGC_SIGHUP,
                0,
                Some(check_fence),
                None,
                None,
            );
        }
    }
    // SAFETY: called once in _PG_init, after the last idgen setting is defined.
    unsafe { pg_sys::MarkGUCPrefixReserved(c"idgen".as_ptr()) };

    for ((name, _, _, setting, min, max, _, flags), text) in
        int_settings().into_iter().zip(int_texts)
    {
        let Some(text) = text else { continue };
        if parse_int(&text, flags.bits()) != Some(setting.get()) {
            let unit = if flags.contains(GucFlags::UNIT_MS) {
                " milliseconds"
            } else {
                ""
            };
            rejected(
                &name.to_string_lossy(),
                &text,
                &format!("It must be an integer from {min} to {max}{unit}."),
            );
        }
    }
    let (count, index) = (SEGMENT_NODE_COUNT.get(), SEGMENT_NODE_INDEX.get());
    let _ = STARTED_NODES.set((count, index));
    if index >= count {
        rejected(
            "idgen.segment_node_index",
            &index.to_string(),
            &format!(
                "idgen.segment_node_count = {count} allows indexes 0 to {}.",
                count - 1
            ),
        );
    }
    for (name, text) in fence_texts {
        let Some(text) = text else { continue };
        if let Err(detail) = parse_fence(&text) {
            rejected(&name.to_string_lossy(), &text, &detail);
        }
    }
    if let Some(text) = epoch_text {
        let applied = EPOCH.get().map(|c| c.to_string_lossy().into_owned());
        if applied.as_deref() != Some(text.as_str()) {
            let detail = parse_epoch(&text)
                .err()
                .unwrap_or_else(|| "The epoch is in the future.".into());
            rejected("idgen.epoch", &text, &detail);
        }
    }
}

/// An integer setting's text as PostgreSQL's own GUC parser reads it (`0x10`, ` 7 `, `15min`
/// with unit `flags`, and so on).
fn parse_int(text: &str, flags: i32) -> Option<i32> {
    let text = CString::new(text).ok()?;
    let mut value = 0;
    // SAFETY: a NUL-terminated string and a valid out pointer; no hint is requested.
    unsafe { pg_sys::parse_int(text.as_ptr(), &mut value, flags, std::ptr::null_mut()) }
        .then_some(value)
}

/// The text a setting has before it is defined (a placeholder from `postgresql.conf` or the
/// command line), if any.
fn configured_text(name: &CStr) -> Option<String> {
    // SAFETY: GetConfigOption with missing_ok returns NULL or a string valid for this call.
    unsafe {
        let raw = pg_sys::GetConfigOption(name.as_ptr(), true, false);
        (!raw.is_null()).then(|| CStr::from_ptr(raw).to_string_lossy().into_owned())
    }
}

fn rejected(name: &str, value: &str, detail: &str) -> ! {
    crate::error::Error::InvalidSetting {
        name: name.into(),
        value: value.into(),
        detail: detail.into(),
    }
    .report()
}

/// `idgen.segment_wait_timeout` in ms; `None` for 0 (wait until cancelled).
pub fn segment_wait_timeout_ms() -> Option<i32> {
    Some(SEGMENT_WAIT_TIMEOUT.get()).filter(|&ms| ms > 0)
}

/// `idgen.segment_refill_interval` in ms.
pub fn segment_refill_interval_ms() -> i64 {
    SEGMENT_REFILL_INTERVAL.get().into()
}

/// `idgen.segment_max_step`.
pub fn segment_max_step() -> i64 {
    SEGMENT_MAX_STEP.get().into()
}

/// `idgen.segment_worker_idle_timeout` in ms.
pub fn segment_worker_idle_timeout_ms() -> u64 {
    SEGMENT_WORKER_IDLE_TIMEOUT.get().max(1) as u64
}

/// `idgen.segment_node_count` and `idgen.segment_node_index` as now in force (reloadable).
///
/// Errors: 22023 when the index is not below the count (checked at start too; a reload can
/// still bring a bad pair); 55000 when either differs from what the server started with while
/// `idgen.segment_interleave_from` is unset: a new interleave over the numbers of the old one
/// hands out numbers other servers have handed out (README, Growing from N to M servers).
pub fn segment_nodes() -> Result<crate::segment::range::Nodes, crate::error::Error> {
    use crate::error::Error;
    let (count, index) = (SEGMENT_NODE_COUNT.get(), SEGMENT_NODE_INDEX.get());
    if index >= count {
        return Err(Error::InvalidSetting {
            name: "idgen.segment_node_index".into(),
            value: index.to_string(),
            detail: format!(
                "idgen.segment_node_count = {count} allows indexes 0 to {}.",
                count - 1
            ),
        });
    }
    let started = STARTED_NODES.get().copied().unwrap_or((count, index));
    if (count, index) != started && segment_fences().from.is_none() {
        return Err(Error::InterleaveChangedWithoutFence {
            started,
            now: (count, index),
        });
    }
    Ok(crate::segment::range::Nodes {
        count: count.max(1) as u32,
        index: index.max(0) as u32,
    })
}

/// `idgen.segment_interleave_from` and `idgen.segment_interleave_until` (their check hook has
/// accepted the text: empty, or a bigint).
pub fn segment_fences() -> crate::segment::range::Fences {
    let read = |s: &GucSetting<Option<CString>>| {
        s.get()
            .and_then(|c| c.to_str().ok().and_then(|t| parse_fence(t).ok().flatten()))
    };
    crate::segment::range::Fences {
        from: read(&SEGMENT_INTERLEAVE_FROM),
        until: read(&SEGMENT_INTERLEAVE_UNTIL),
    }
}

/// A fence setting's text: empty (or blanks) for none, else a bigint.
fn parse_fence(text: &str) -> Result<Option<i64>, String> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(None);
    }
    text.parse::<i64>()
        .map(Some)
        .map_err(|_| format!("\"{text}\" is not a bigint (or empty for none)."))
}

/// GUC check hook of the fence settings. Pure Rust parsing: nothing here can raise an error.
#[pg_guard]
unsafe extern "C-unwind" fn check_fence(
    newval: *mut *mut c_char,
    _extra: *mut *mut c_void,
    _source: pg_sys::GucSource::Type,
) -> bool {
    // SAFETY: PostgreSQL passes a valid pointer to the candidate value (a C string or NULL).
    let raw = unsafe { *newval };
    if raw.is_null() {
        return true;
    }
    // SAFETY: non-null, NUL-terminated string owned by the GUC machinery for this call.
    let text = unsafe { CStr::from_ptr(raw) }.to_string_lossy();
    match parse_fence(&text) {
        Ok(_) => true,
        Err(detail) => fail_check(&detail),
    }
}

/// `idgen.worker_id`, or `None` while it is unset (`-1`).
pub fn worker_id() -> Option<u64> {
    u64::try_from(per_call(&WORKER_ID)).ok()
}

/// `idgen.worker_bits`, `idgen.sequence_bits` and `idgen.time_unit_ms`: (bits, bits, ms).
pub fn layout_widths() -> (u32, u32, u32) {
    let non_negative = |v: i32| u32::try_from(v).expect("the GUC minimum is 0 or 1");
    (
        non_negative(WORKER_BITS.get()),
        non_negative(SEQUENCE_BITS.get()),
        non_negative(TIME_UNIT_MS.get()),
    )
}

/// `idgen.max_drift_ms`, or `None` for -1 (unbounded borrowing).
pub fn max_drift_ms() -> Option<u64> {
    u64::try_from(per_call(&MAX_DRIFT_MS)).ok()
}

/// `idgen.max_wait_ms`.
pub fn max_wait_ms() -> u64 {
    MAX_WAIT_MS.get().max(0) as u64
}

/// `idgen.sequence_jitter`: 0 for off.
pub fn sequence_jitter() -> u64 {
    per_call(&SEQUENCE_JITTER).max(0) as u64
}

/// An integer setting read on the generators' per-id path. pgrx's `GucSetting::get` checks the
/// calling thread on every read (a thread-local lookup): three such reads were a fifth of
/// `snowflake_nextval()`'s own instructions.
fn per_call(setting: &GucSetting<i32>) -> i32 {
    // SAFETY: the value is a plain `int` that PostgreSQL writes only on the process's one thread
    // (at a SET or a configuration reload, between statements). It is read on that same thread:
    // from `_PG_init` and from SQL functions, whose pgrx wrapper has run the thread check.
    unsafe { *setting.as_ptr() }
}

/// `idgen.epoch` in Unix milliseconds. The check hook has already accepted the text, so a parse
/// failure here cannot happen.
pub fn epoch_unix_ms() -> i64 {
    let text = EPOCH.get().expect("idgen.epoch has a boot value");
    let text = text.to_str().expect("idgen.epoch passed its check hook");
    parse_epoch(text).expect("idgen.epoch passed its check hook")
}

/// Parses a `timestamptz` literal with PostgreSQL's own input function and returns Unix ms.
/// `Err` carries the detail for the "invalid value for parameter" message.
///
/// Never raises an ERROR: it runs in the check hook, which PostgreSQL also calls in the
/// postmaster when postgresql.conf is reloaded, where an ERROR is fatal (issue 16). Refuses the
/// words that make a literal relative to the moment it is read (`now`, `today`, ...): the
/// postmaster, where the layout is built, and a backend running `ALTER SYSTEM` would read
/// different instants.
fn parse_epoch(text: &str) -> Result<i64, String> {
    if let Some(word) = relative_word(text) {
        return Err(format!(
            "\"{word}\" names no fixed instant: the epoch would depend on when it is read. Give a date and time with an explicit UTC offset."
        ));
    }
    let ts = timestamptz_in(text).map_err(|e| format!("\"{text}\" is not a timestamptz: {e}"))?;
    if !ts.is_finite() {
        return Err("the epoch must be a finite time".into());
    }
    Ok(crate::snowflake::timestamptz_to_unix_ms(ts))
}

/// The first word of `text` that makes a `timestamptz` literal relative to the moment it is
/// read (PostgreSQL's special inputs `now`, `today`, `tomorrow` and `yesterday`, any case), if
/// any. Pure.
fn relative_word(text: &str) -> Option<&str> {
    const RELATIVE: [&str; 4] = ["now", "today", "tomorrow", "yesterday"];
    text.split(|c: char| !c.is_ascii_alphabetic())
        .find(|word| RELATIVE.iter().any(|r| word.eq_ignore_ascii_case(r)))
}

/// PostgreSQL's `timestamptz_in` on `text`, with every ERROR it raises (22007 bad syntax, 22008
/// out of range, 22009 an offset beyond 15:59, 22023 an unknown zone, ...) caught and returned as
/// its message. pgrx's `TimestampWithTimeZone::from_str` catches only three of these SQLSTATEs
/// and lets 22009 through. Nothing is held across the call (it only pallocs in the current
/// context), so no cleanup beyond PostgreSQL's error state, which the catch flushes, is due.
fn timestamptz_in(text: &str) -> Result<TimestampWithTimeZone, String> {
    let text = CString::new(text).map_err(|_| "it contains a NUL byte".to_string())?;
    PgTryBuilder::new(|| {
        // SAFETY: timestamptz_in takes a NUL-terminated string that outlives the call, a type
        // oid it ignores, and typmod -1 (no rounding); it returns a non-NULL timestamptz.
        unsafe {
            pgrx::direct_function_call::<TimestampWithTimeZone>(
                pg_sys::timestamptz_in,
                &[
                    Some(pg_sys::Datum::from(text.as_ptr())),
                    pg_sys::InvalidOid.into_datum(),
                    (-1i32).into_datum(),
                ],
            )
        }
        .ok_or_else(|| "the input function returned NULL".to_string())
    })
    .catch_others(|e| Err(caught_message(e)))
    .execute()
}

/// The message of a caught PostgreSQL ERROR or Rust panic.
fn caught_message(e: CaughtError) -> String {
    crate::error::caught_report(&e).message().to_owned()
}

/// GUC check hook for `idgen.epoch`: the text must parse, must name a fixed instant and must not
/// be in the future (a future epoch would make every current tick negative). Runs at server
/// start, for `ALTER SYSTEM`, and in every process (the postmaster included) at each reload of
/// postgresql.conf, so a bad value is refused before it can take effect: with 22023 for
/// `ALTER SYSTEM`, as a LOG line naming the setting on reload.
///
/// It must never raise an ERROR, which in the postmaster stops the server: whatever goes wrong
/// while checking is caught and becomes a refusal (`GUC_check_errdetail`, `false`).
#[pg_guard]
unsafe extern "C-unwind" fn check_epoch(
    newval: *mut *mut c_char,
    _extra: *mut *mut c_void,
    _source: pg_sys::GucSource::Type,
) -> bool {
    // SAFETY: PostgreSQL passes a valid pointer to the candidate value (a C string or NULL).
    let raw = unsafe { *newval };
    PgTryBuilder::new(|| check_epoch_text(raw))
        .catch_others(|e| {
            fail_check(&format!(
                "idgen.epoch could not be checked: {}",
                caught_message(e)
            ))
        })
        .execute()
}

/// [`check_epoch`] on the candidate C string `raw`.
fn check_epoch_text(raw: *const c_char) -> bool {
    if raw.is_null() {
        return fail_check("idgen.epoch must be set to a timestamptz literal");
    }
    // SAFETY: non-null, NUL-terminated string owned by the GUC machinery for this call.
    let text = unsafe { CStr::from_ptr(raw) }.to_string_lossy();
    match parse_epoch(&text) {
        Ok(ms) if ms > crate::snowflake::wall_clock_unix_ms() => {
            fail_check(&format!("The epoch \"{text}\" is in the future."))
        }
        Ok(_) => true,
        Err(detail) => fail_check(&detail),
    }
}

/// Sets the detail of a GUC check failure and returns `false` (PostgreSQL's GUC_check_errdetail).
fn fail_check(detail: &str) -> bool {
    let detail = CString::new(detail.replace('\0', "")).expect("NUL bytes were removed");
    // SAFETY: the GUC machinery reads and frees this palloc'd copy after the hook returns.
    unsafe {
        pg_sys::GUC_check_errcode(PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE as i32);
        pg_sys::GUC_check_errdetail_string = pg_sys::pstrdup(detail.as_ptr());
    }
    false
}

#[cfg(test)]
mod tests {
    use super::relative_word;

    #[test]
    fn relative_words_are_found_in_any_case_and_only_as_whole_words() {
        assert_eq!(relative_word("now"), Some("now"));
        assert_eq!(relative_word(" NOW "), Some("NOW"));
        assert_eq!(relative_word("Today"), Some("Today"));
        assert_eq!(relative_word("yesterday 12:00+00"), Some("yesterday"));
        assert_eq!(relative_word("2024-01-01 tomorrow"), Some("tomorrow"));
        // Fixed instants, including PostgreSQL's own 'epoch' and zone names that contain a
        // relative word inside a longer one.
        assert_eq!(relative_word("2024-01-01 00:00:00+00"), None);
        assert_eq!(relative_word("epoch"), None);
        assert_eq!(relative_word("2024-01-01 00:00:00 America/Noronha"), None);
        assert_eq!(relative_word("Jan 1 2024 nowhere"), None);
        assert_eq!(relative_word(""), None);
    }
}
