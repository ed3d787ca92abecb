//! Every idgen setting: one private static each, described by a named struct in one table
//! ([`INT_SETTINGS`], [`TEXT_SETTINGS`]), defined in [`init`], read through typed getters that
//! return plain values. Nothing else touches the statics (the model is pg_search's `gucs.rs`).
//! The check hooks and the parsing of the text settings are in [`check`].
//!
//! Settings that uniqueness depends on (worker id, layout and `idgen.id_bits`, epoch) are
//! `postmaster` context: they are read from `postgresql.conf` at server start, cannot be changed
//! by `SET` (SQLSTATE 55P02), and are the same in every backend of the server. The clock policy (`idgen.max_drift_ms`,
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
use pgrx::{GucFlags, GucRegistry, GucSetting};

use crate::error::Error;

mod table;

pub(crate) use check::MAX_NODE_NAME;
use table::*;

/// The interleave the server started with: changing it by a reload is safe only together with
/// `idgen.segment_interleave_from`.
static STARTED_NODES: OnceLock<(i32, i32)> = OnceLock::new();

/// `idgen.worker_id` as parsed at start.
static WORKER_ID_AT_START: OnceLock<WorkerIdSetting> = OnceLock::new();

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
    let bool_texts = BOOL_SETTINGS
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
                if s.secret {
                    pg_sys::GUC_SUPERUSER_ONLY as i32
                } else {
                    0
                },
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
    for s in &BOOL_SETTINGS {
        GucRegistry::define_bool_guc(
            s.name,
            s.short,
            s.long,
            s.value,
            s.context.guc(),
            GucFlags::empty(),
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
    for (s, text) in BOOL_SETTINGS.iter().zip(bool_texts) {
        let Some(text) = text else { continue };
        if check::parse_bool(&text) != Some(s.value.get()) {
            rejected(s.name, &text, "It must be a boolean: on or off.");
        }
    }
    for (s, text) in TEXT_SETTINGS.iter().zip(text_texts) {
        let Some(text) = text else { continue };
        let applied = s.value.get().map(|c| c.to_string_lossy().into_owned());
        let shown = if s.secret {
            "(not shown)"
        } else {
            text.as_str()
        };
        if let Err(detail) = (s.parse)(&text) {
            rejected(s.name, shown, &detail);
        }
        if applied.as_deref() != Some(text.as_str()) {
            rejected(s.name, shown, "PostgreSQL did not apply it.");
        }
    }
    if worker_id_setting() == WorkerIdSetting::Auto && registry_conninfo().is_none() {
        rejected(
            c"idgen.worker_id",
            "auto",
            "auto claims a worker id from the registry, and idgen.registry is empty.",
        );
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

/// The allocator's `lock_timeout` for each unit of work, in ms: `idgen.segment_wait_timeout`,
/// or its default (10 s) when it is 0. The setting's 0 means "callers wait until cancelled";
/// the allocator's lock waits stay bounded whatever it is, or a session holding a lock on
/// idgen's catalog while it waits for the allocator would stop the database's refills for good.
pub(crate) fn allocator_lock_timeout_ms() -> i32 {
    segment_wait_timeout_ms().unwrap_or(table::SEGMENT_WAIT_TIMEOUT_DEFAULT_MS)
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

/// `idgen.segment_cache_size`: slots of the segment cache (fixed at start).
pub(crate) fn segment_cache_size() -> usize {
    SEGMENT_CACHE_SIZE.get().max(1) as usize
}

/// `idgen.serial_cache_size`: slots of the fast-serial counter cache (fixed at start).
pub(crate) fn serial_cache_size() -> usize {
    SERIAL_CACHE_SIZE.get().max(1) as usize
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

/// What `idgen.worker_id` says: read once, at start (it is a postmaster setting).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WorkerIdSetting {
    /// `-1`, the default: no worker id; `snowflake_nextval()` fails with 55000.
    Unset,
    /// An explicit worker id (checked against the layout at start).
    Fixed(u64),
    /// `auto`: claimed from `idgen.registry` (DESIGN.md §6).
    Auto,
}

/// `idgen.worker_id` as the server started with it.
pub(crate) fn worker_id_setting() -> WorkerIdSetting {
    *WORKER_ID_AT_START.get_or_init(|| {
        text_of(&WORKER_ID)
            .and_then(|t| check::worker_id_value(&t).ok())
            .unwrap_or(WorkerIdSetting::Unset)
    })
}

/// `idgen.registry`, or `None` while empty: the registry's libpq connection string.
pub(crate) fn registry_conninfo() -> Option<String> {
    text_of(&REGISTRY).filter(|t| !t.trim().is_empty())
}

/// `idgen.node_name`, or `None` while empty (the registry client then makes one).
pub(crate) fn node_name() -> Option<String> {
    text_of(&NODE_NAME).filter(|t| !t.is_empty())
}

/// `idgen.registry_lease` in ms.
pub(crate) fn registry_lease_ms() -> u64 {
    REGISTRY_LEASE.get().max(1) as u64
}

/// `idgen.registry_renew_interval` in ms, at most a third of the lease (the registry refuses
/// more).
pub(crate) fn registry_renew_interval_ms() -> u64 {
    (REGISTRY_RENEW_INTERVAL.get().max(1) as u64).min((registry_lease_ms() / 3).max(1))
}

/// `idgen.registry_max_clock_offset_ms`, or `None` for -1 (no limit).
pub(crate) fn registry_max_clock_offset_ms() -> Option<u64> {
    u64::try_from(REGISTRY_MAX_CLOCK_OFFSET_MS.get()).ok()
}

/// The text of a text setting (`None` for NULL).
fn text_of(setting: &GucSetting<Option<CString>>) -> Option<String> {
    setting.get().map(|c| c.to_string_lossy().into_owned())
}

/// `idgen.id_bits`: the width of a whole Snowflake id, 53 to 63 bits (fixed at start).
pub(crate) fn id_bits() -> u32 {
    u32::try_from(ID_BITS.get()).expect("the GUC minimum is 53")
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
