//! Every idgen setting: one private static each, described by a named struct in one table
//! ([`INT_SETTINGS`], [`TEXT_SETTINGS`]), defined in [`init`], read through typed getters that
//! return plain values. Nothing else touches the statics (the model is pg_search's `gucs.rs`).
//! The check hooks and the parsing of the text settings are in [`check`].
//!
//! Settings that uniqueness depends on (worker id, layout, epoch) are `postmaster` context: they
//! are read from `postgresql.conf` at server start, cannot be changed by `SET` (SQLSTATE 55P02),
//! and are the same in every backend of the server. The clock policy (`idgen.max_drift_ms`,
//! `idgen.max_wait_ms`) and `idgen.sequence_jitter` are `sighup`: reloadable, never per session,
//! and none of their values can make an id repeat. The segment interleave (node count and
//! index) is `sighup` too, but a change takes effect only together with a fence
//! (`idgen.segment_interleave_from`; the segment allocator checks it against
//! [`segment_nodes_at_start`]).
//!
//! No value of any setting can stop a running server: PostgreSQL checks every setting written in
//! postgresql.conf at each reload, in the postmaster too (postmaster-context ones included, which
//! it then does not apply), and an ERROR there is fatal. The integer settings have no check hook
//! (PostgreSQL's own range check only logs); `idgen.epoch`'s hook catches every ERROR, and the
//! fence settings' hook parses in plain Rust, so both refuse a bad value instead: a reload logs
//! "invalid value for parameter" and keeps the old value, and `ALTER SYSTEM` fails with 22023.

mod check;

use std::ffi::{CStr, CString};
use std::sync::OnceLock;

use pgrx::pg_sys;
use pgrx::{GucContext, GucFlags, GucRegistry, GucSetting};

use crate::error::Error;

/// `idgen.worker_id`: this server's Snowflake worker id, `0..=2^worker_bits - 1` (0..=1023 by
/// default; checked against the layout at start). The default `-1` means "not set":
/// `snowflake_nextval()` fails (SQLSTATE 55000) until the DBA picks one. There is deliberately
/// no valid default, as in pgEdge snowflake: two servers sharing a worker id issue duplicate
/// ids, the field's most common production failure.
static WORKER_ID: GucSetting<i32> = GucSetting::<i32>::new(-1);
static WORKER_BITS: GucSetting<i32> = GucSetting::<i32>::new(10);
static SEQUENCE_BITS: GucSetting<i32> = GucSetting::<i32>::new(12);
static TIME_UNIT_MS: GucSetting<i32> = GucSetting::<i32>::new(1);
static MAX_DRIFT_MS: GucSetting<i32> = GucSetting::<i32>::new(1000);
static MAX_WAIT_MS: GucSetting<i32> = GucSetting::<i32>::new(5000);
static SEQUENCE_JITTER: GucSetting<i32> = GucSetting::<i32>::new(0);
static SEGMENT_WAIT_TIMEOUT: GucSetting<i32> = GucSetting::<i32>::new(10_000);
static SEGMENT_REFILL_INTERVAL: GucSetting<i32> = GucSetting::<i32>::new(15 * 60 * 1000);
static SEGMENT_MAX_STEP: GucSetting<i32> = GucSetting::<i32>::new(1_000_000);
static SEGMENT_WORKER_IDLE_TIMEOUT: GucSetting<i32> = GucSetting::<i32>::new(60_000);
static SEGMENT_NODE_COUNT: GucSetting<i32> = GucSetting::<i32>::new(1);
static SEGMENT_NODE_INDEX: GucSetting<i32> = GucSetting::<i32>::new(0);

/// The largest `step` a segment may have, and so the bound of `idgen.segment_max_step`: a
/// billion. A restart skips the numbers still cached (up to two ranges), so a larger step is
/// almost certainly a mistake, such as a start value passed as the step.
pub(crate) const MAX_SEGMENT_STEP: i32 = 1_000_000_000;

/// The text of the default epoch.
const DEFAULT_EPOCH: &CStr = c"2024-01-01 00:00:00+00";

/// `idgen.epoch`: the instant at which Snowflake tick 0 starts, as a `timestamptz` literal.
static EPOCH: GucSetting<Option<CString>> = GucSetting::<Option<CString>>::new(Some(DEFAULT_EPOCH));
static SEGMENT_INTERLEAVE_FROM: GucSetting<Option<CString>> =
    GucSetting::<Option<CString>>::new(Some(c""));
static SEGMENT_INTERLEAVE_UNTIL: GucSetting<Option<CString>> =
    GucSetting::<Option<CString>>::new(Some(c""));

/// The interleave the server started with: changing it by a reload is safe only together with
/// `idgen.segment_interleave_from`.
static STARTED_NODES: OnceLock<(i32, i32)> = OnceLock::new();

/// The unit of an integer setting, as `SHOW` and `postgresql.conf` spell it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Unit {
    None,
    Milliseconds,
}

/// When an integer setting can change: at server start only, at a reload, or per session.
#[derive(Clone, Copy)]
enum Context {
    Postmaster,
    Sighup,
    Userset,
}

impl Context {
    fn guc(self) -> GucContext {
        match self {
            Context::Postmaster => GucContext::Postmaster,
            Context::Sighup => GucContext::Sighup,
            Context::Userset => GucContext::Userset,
        }
    }
}

/// One integer setting: everything `DefineCustomIntVariable` takes, by name.
struct IntSetting {
    name: &'static CStr,
    short: &'static CStr,
    long: &'static CStr,
    value: &'static GucSetting<i32>,
    min: i32,
    max: i32,
    context: Context,
    unit: Unit,
}

impl IntSetting {
    fn flags(&self) -> GucFlags {
        match self.unit {
            Unit::None => GucFlags::empty(),
            Unit::Milliseconds => GucFlags::UNIT_MS,
        }
    }
}

/// Every integer setting. None may silently fall back to its default (see [`init`]).
static INT_SETTINGS: [IntSetting; 13] = [
    IntSetting {
        name: c"idgen.worker_id",
        short: c"Snowflake worker id of this server, unique among all servers sharing an id space.",
        long: c"From 0 to 2^idgen.worker_bits - 1 (1023 by default). -1 (the default) means unset: snowflake_nextval() fails until it is set.",
        value: &WORKER_ID,
        min: -1,
        max: i32::MAX,
        context: Context::Postmaster,
        unit: Unit::None,
    },
    IntSetting {
        name: c"idgen.worker_bits",
        short: c"Width of the worker id field of a Snowflake id, in bits.",
        long: c"Time bits are what is left of 63 after worker and sequence bits; at least 32 must be left.",
        value: &WORKER_BITS,
        min: 0,
        max: 31,
        context: Context::Postmaster,
        unit: Unit::None,
    },
    IntSetting {
        name: c"idgen.sequence_bits",
        short: c"Width of the sequence field of a Snowflake id, in bits.",
        long: c"2^sequence_bits ids per tick before the generator borrows the next tick.",
        value: &SEQUENCE_BITS,
        min: 0,
        max: 31,
        context: Context::Postmaster,
        unit: Unit::None,
    },
    IntSetting {
        name: c"idgen.time_unit_ms",
        short: c"Length of one tick of the Snowflake time field.",
        long: c"1 ms as Twitter's Snowflake; 10 ms as Sonyflake.",
        value: &TIME_UNIT_MS,
        min: 1,
        max: 86_400_000,
        context: Context::Postmaster,
        unit: Unit::Milliseconds,
    },
    IntSetting {
        name: c"idgen.max_drift_ms",
        short: c"How far ahead of the wall clock Snowflake ids may be stamped.",
        long: c"Within it calls never wait; beyond it they wait up to idgen.max_wait_ms for the clock. -1 means unbounded.",
        value: &MAX_DRIFT_MS,
        min: -1,
        max: i32::MAX,
        context: Context::Sighup,
        unit: Unit::Milliseconds,
    },
    IntSetting {
        name: c"idgen.max_wait_ms",
        short: c"How long a Snowflake call beyond idgen.max_drift_ms waits for the clock.",
        long: c"A call that cannot be served within it fails with SQLSTATE 53400. 0 never waits.",
        value: &MAX_WAIT_MS,
        min: 0,
        max: i32::MAX,
        context: Context::Sighup,
        unit: Unit::Milliseconds,
    },
    IntSetting {
        name: c"idgen.sequence_jitter",
        short: c"The first Snowflake id of a new tick starts at a random sequence below this bound.",
        long: c"0 (the default) starts at 0. Spreads low-traffic ids over id % N shards, as Leaf does with 100.",
        value: &SEQUENCE_JITTER,
        min: 0,
        max: i32::MAX,
        context: Context::Sighup,
        unit: Unit::None,
    },
    IntSetting {
        name: c"idgen.segment_wait_timeout",
        short: c"How long a segment_nextval waits for a range when both cached ranges are empty.",
        long: c"In milliseconds; 0 waits until cancelled. Past it the call fails with SQLSTATE 55P03.",
        value: &SEGMENT_WAIT_TIMEOUT,
        min: 0,
        max: i32::MAX,
        context: Context::Userset,
        unit: Unit::Milliseconds,
    },
    IntSetting {
        name: c"idgen.segment_refill_interval",
        short: c"Target lifetime of a cached segment range (Leaf's dynamic step).",
        long: c"A range used up faster doubles the next step; one lasting twice as long halves it.",
        value: &SEGMENT_REFILL_INTERVAL,
        min: 1,
        max: i32::MAX,
        context: Context::Sighup,
        unit: Unit::Milliseconds,
    },
    IntSetting {
        name: c"idgen.segment_max_step",
        short: c"Largest step the dynamic step of a segment grows to.",
        long: c"A segment whose own step is larger keeps its own step.",
        value: &SEGMENT_MAX_STEP,
        min: 1,
        max: MAX_SEGMENT_STEP,
        context: Context::Sighup,
        unit: Unit::None,
    },
    IntSetting {
        name: c"idgen.segment_node_count",
        short: c"How many servers share segment names, each taking its own blocks of numbers.",
        long: c"1 (the default): this server takes every block. Set the same count on every server, and the same step for each segment.",
        value: &SEGMENT_NODE_COUNT,
        min: 1,
        max: 1024,
        context: Context::Sighup,
        unit: Unit::None,
    },
    IntSetting {
        name: c"idgen.segment_node_index",
        short: c"This server's 0-based place among idgen.segment_node_count servers.",
        long: c"Server i takes the blocks of step numbers whose block number is i modulo the count. Unique per server.",
        value: &SEGMENT_NODE_INDEX,
        min: 0,
        max: 1023,
        context: Context::Sighup,
        unit: Unit::None,
    },
    IntSetting {
        name: c"idgen.segment_worker_idle_timeout",
        short: c"How long an idle idgen allocator worker stays before it exits.",
        long: c"In milliseconds. The next call that needs the worker starts it again.",
        value: &SEGMENT_WORKER_IDLE_TIMEOUT,
        min: 1,
        max: i32::MAX,
        context: Context::Sighup,
        unit: Unit::Milliseconds,
    },
];

/// One text setting, defined with a check hook that refuses a bad value (pgrx offers no
/// string GUC with a check hook, hence `DefineCustomStringVariable` directly).
struct TextSetting {
    name: &'static CStr,
    short: &'static CStr,
    long: &'static CStr,
    value: &'static GucSetting<Option<CString>>,
    boot: &'static CStr,
    context: pg_sys::GucContext::Type,
    check: check::Hook,
    /// The check of [`init`] (the hook's, as plain Rust): `Err` is the detail of the refusal.
    parse: fn(&str) -> Result<(), String>,
}

/// Every text setting.
static TEXT_SETTINGS: [TextSetting; 3] = [
    TextSetting {
        name: c"idgen.epoch",
        short: c"Instant at which Snowflake tick 0 starts (a timestamptz literal).",
        long: c"Fixed at server start; must not be in the future. Give an explicit UTC offset.",
        value: &EPOCH,
        boot: DEFAULT_EPOCH,
        context: pg_sys::GucContext::PGC_POSTMASTER,
        check: check::epoch,
        parse: check::epoch_text,
    },
    TextSetting {
        name: c"idgen.segment_interleave_from",
        short: c"The current segment interleave hands out numbers above this one only (growing from N to M servers).",
        long: c"A bigint, or empty for none. See README, Growing from N to M servers.",
        value: &SEGMENT_INTERLEAVE_FROM,
        boot: c"",
        context: pg_sys::GucContext::PGC_SIGHUP,
        check: check::fence,
        parse: check::fence_text,
    },
    TextSetting {
        name: c"idgen.segment_interleave_until",
        short: c"The current segment interleave hands out numbers up to this one only (growing from N to M servers).",
        long: c"A bigint, or empty for none. See README, Growing from N to M servers.",
        value: &SEGMENT_INTERLEAVE_UNTIL,
        boot: c"",
        context: pg_sys::GucContext::PGC_SIGHUP,
        check: check::fence,
        parse: check::fence_text,
    },
];

/// Defines every setting and reserves the `idgen.` prefix. Called once from `_PG_init`, in the
/// postmaster (the library is preloaded), before any backend exists.
///
/// PostgreSQL only warns when `postgresql.conf` gives a custom setting a value its definition
/// rejects, and keeps the default: for a uniqueness-critical setting that would be a silent
/// change of identity. So each setting's text is read before it is defined, and if it did not
/// take effect the server refuses to start (22023, naming the setting).
pub(crate) fn init() {
    let int_texts = INT_SETTINGS
        .each_ref()
        .map(|s| crate::backend::setting_text(s.name));
    let text_texts = TEXT_SETTINGS
        .each_ref()
        .map(|s| crate::backend::setting_text(s.name));

    for s in &TEXT_SETTINGS {
        // SAFETY: called once in _PG_init; the name, descriptions and boot value are 'static C
        // strings, the storage is a 'static cell that PostgreSQL owns from here on, and the
        // check hook has the signature PostgreSQL calls.
        unsafe {
            pg_sys::DefineCustomStringVariable(
                s.name.as_ptr(),
                s.short.as_ptr(),
                s.long.as_ptr(),
                s.value.as_ptr(),
                s.boot.as_ptr(),
                s.context,
                0,
                Some(s.check),
                None,
                None,
            );
        }
    }
    for s in &INT_SETTINGS {
        GucRegistry::define_int_guc(
            s.name,
            s.short,
            s.long,
            s.value,
            s.min,
            s.max,
            s.context.guc(),
            s.flags(),
        );
    }
    // SAFETY: called once in _PG_init, after the last idgen setting is defined; the prefix is a
    // 'static C string.
    unsafe { pg_sys::MarkGUCPrefixReserved(c"idgen".as_ptr()) };

    for (s, text) in INT_SETTINGS.iter().zip(int_texts) {
        let Some(text) = text else { continue };
        if check::parse_int(&text, s.flags().bits()) != Some(s.value.get()) {
            let unit = match s.unit {
                Unit::Milliseconds => " milliseconds",
                Unit::None => "",
            };
            rejected(
                s.name,
                &text,
                &format!("It must be an integer from {} to {}{unit}.", s.min, s.max),
            );
        }
    }
    for (s, text) in TEXT_SETTINGS.iter().zip(text_texts) {
        let Some(text) = text else { continue };
        let applied = s.value.get().map(|c| c.to_string_lossy().into_owned());
        if let Err(detail) = (s.parse)(&text) {
            rejected(s.name, &text, &detail);
        }
        if applied.as_deref() != Some(text.as_str()) {
            rejected(s.name, &text, "PostgreSQL did not apply it.");
        }
    }
    let (count, index) = (SEGMENT_NODE_COUNT.get(), SEGMENT_NODE_INDEX.get());
    let _ = STARTED_NODES.set((count, index));
    if index >= count {
        rejected(
            c"idgen.segment_node_index",
            &index.to_string(),
            &node_index_detail(count),
        );
    }
}

/// Refuses to start: setting `name` has a value that did not take effect (22023).
fn rejected(name: &CStr, value: &str, detail: &str) -> ! {
    Error::InvalidSetting {
        name: name.to_string_lossy().into_owned(),
        value: value.into(),
        detail: detail.into(),
    }
    .report()
}

/// The DETAIL of an `idgen.segment_node_index` not below the count.
pub(crate) fn node_index_detail(count: i32) -> String {
    format!(
        "idgen.segment_node_count = {count} allows indexes 0 to {}.",
        count - 1
    )
}

/// `idgen.segment_wait_timeout` in ms; `None` for 0 (wait until cancelled).
pub(crate) fn segment_wait_timeout_ms() -> Option<i32> {
    Some(SEGMENT_WAIT_TIMEOUT.get()).filter(|&ms| ms > 0)
}

/// `idgen.segment_refill_interval` in ms.
pub(crate) fn segment_refill_interval_ms() -> i64 {
    SEGMENT_REFILL_INTERVAL.get().into()
}

/// `idgen.segment_max_step`.
pub(crate) fn segment_max_step() -> i64 {
    SEGMENT_MAX_STEP.get().into()
}

/// `idgen.segment_worker_idle_timeout` in ms.
pub(crate) fn segment_worker_idle_timeout_ms() -> u64 {
    SEGMENT_WORKER_IDLE_TIMEOUT.get().max(1) as u64
}

/// `idgen.segment_node_count` and `idgen.segment_node_index` as now in force (reloadable):
/// (count, index). The index may not be below the count after a reload.
pub(crate) fn segment_nodes() -> (i32, i32) {
    (SEGMENT_NODE_COUNT.get(), SEGMENT_NODE_INDEX.get())
}

/// `idgen.segment_node_count` and `idgen.segment_node_index` as the server started with them.
pub(crate) fn segment_nodes_at_start() -> (i32, i32) {
    STARTED_NODES.get().copied().unwrap_or_else(segment_nodes)
}

/// `idgen.segment_interleave_from` and `idgen.segment_interleave_until`: (from, until), each
/// `None` while empty (their check hook has accepted the text: empty, or a bigint).
pub(crate) fn segment_fences() -> (Option<i64>, Option<i64>) {
    let read = |s: &GucSetting<Option<CString>>| {
        s.get().and_then(|c| {
            c.to_str()
                .ok()
                .and_then(|t| check::fence_value(t).ok().flatten())
        })
    };
    (
        read(&SEGMENT_INTERLEAVE_FROM),
        read(&SEGMENT_INTERLEAVE_UNTIL),
    )
}

/// `idgen.worker_id`, or `None` while it is unset (`-1`).
pub(crate) fn worker_id() -> Option<u64> {
    u64::try_from(per_call(&WORKER_ID)).ok()
}

/// `idgen.worker_bits`, `idgen.sequence_bits` and `idgen.time_unit_ms`: (bits, bits, ms).
pub(crate) fn layout_widths() -> (u32, u32, u32) {
    let non_negative = |v: i32| u32::try_from(v).expect("the GUC minimum is 0 or 1");
    (
        non_negative(WORKER_BITS.get()),
        non_negative(SEQUENCE_BITS.get()),
        non_negative(TIME_UNIT_MS.get()),
    )
}

/// `idgen.max_drift_ms`, or `None` for -1 (unbounded borrowing).
pub(crate) fn max_drift_ms() -> Option<u64> {
    u64::try_from(per_call(&MAX_DRIFT_MS)).ok()
}

/// `idgen.max_wait_ms`.
pub(crate) fn max_wait_ms() -> u64 {
    MAX_WAIT_MS.get().max(0) as u64
}

/// `idgen.sequence_jitter`: 0 for off.
pub(crate) fn sequence_jitter() -> u64 {
    per_call(&SEQUENCE_JITTER).max(0) as u64
}

/// `idgen.epoch` in Unix milliseconds. The check hook has already accepted the text, so a parse
/// failure here cannot happen.
pub(crate) fn epoch_unix_ms() -> i64 {
    let text = EPOCH.get().expect("idgen.epoch has a boot value");
    let text = text.to_str().expect("idgen.epoch passed its check hook");
    check::epoch_value(text).expect("idgen.epoch passed its check hook")
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
