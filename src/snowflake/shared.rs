//! The Snowflake generator's server-wide state: the layout, fixed at start from the settings,
//! and the objects in shared memory (the state word, the reserved end, the clock watch and the
//! counters; the LWLock of the reservation file). The hot path takes no lock: everything here
//! but the reservation file is advanced with atomics (DESIGN.md §1, §3).

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::OnceLock;

use idgen_core::snowflake::layout::{Layout, LayoutError};

use crate::error::Error;
use crate::guc;
use crate::lwlock::NamedLWLock;
use crate::shmem::{CacheLine, Part, ShmemStruct};

/// The server's one Snowflake generator (DESIGN.md §1). All zero is its state at start.
#[repr(C)]
#[derive(Default)]
pub(crate) struct SnowflakeShared {
    /// The last issued state word, `tick << sequence_bits | sequence`; 0 before the first id.
    /// Advanced only by compare-and-swap in `generator::reserve`.
    pub(crate) state: CacheLine<AtomicU64>,
    /// The first tick not covered by the durable reservation file: no id at or beyond it is
    /// issued. 0 until the file has been read (lazily, by the first caller after a start).
    /// Read on every call, written about once a second.
    pub(crate) reserved_end: CacheLine<AtomicU64>,
    /// The highest wall-clock reading (Unix ms) any caller has seen; a reading below it is a
    /// clock regression. Written about once per millisecond under load.
    pub(crate) clock_seen_ms: CacheLine<AtomicI64>,
    /// Counters for `snowflake_status()`, since server start, and the warning rate limiter.
    pub(crate) counters: CacheLine<SnowflakeCounters>,
}

/// Rarely written counters of the Snowflake generator (`snowflake_status()`).
#[repr(C)]
#[derive(Default)]
pub(crate) struct SnowflakeCounters {
    /// Ticks entered ahead of the wall clock (sequence overflow or clock behind).
    pub(crate) borrowed_ticks: AtomicU64,
    /// Calls that had to wait for the clock (beyond `idgen.max_drift_ms`).
    pub(crate) waits: AtomicU64,
    /// Calls that failed because the clock stayed too far behind (SQLSTATE 53400).
    pub(crate) clock_failures: AtomicU64,
    /// Clock regressions seen: the wall clock read below an earlier reading.
    pub(crate) regressions: AtomicU64,
    /// Writes of the reservation file.
    pub(crate) reservation_writes: AtomicU64,
    /// CLOCK_MONOTONIC ms of the last regression WARNING (rate limit); 0 for none yet.
    pub(crate) last_warning_ms: AtomicI64,
    /// The head start: a tick the generator may treat as its clock while the wall clock is
    /// below it, without waiting (a promotion floor, or the floor a registry grant starts at:
    /// DESIGN.md §1, §6). 0 for none.
    pub(crate) head_start_tick: AtomicU64,
    /// The kernel's clocksource is no longer the TSC: every process closes its TSC gate
    /// (`idgen_core::snowflake::clock`). Set by the reservation keeper, never cleared until a
    /// restart.
    pub(crate) tsc_gate_off: AtomicBool,
}

/// `idgen_snowflake` in shared memory: zeroed when the postmaster (re)creates shared memory,
/// i.e. at start and after a crash.
static SHARED: ShmemStruct<SnowflakeShared> = ShmemStruct::new(c"idgen_snowflake");

/// The LWLock `idgen_snowflake`, serializing reading and writing the reservation file.
pub(crate) static RESERVATION_LOCK: NamedLWLock = NamedLWLock::new(c"idgen_snowflake");

/// The layout, built once from the settings in the postmaster and inherited by every backend.
static LAYOUT: OnceLock<Layout> = OnceLock::new();

/// The Snowflake generator's share of shared memory.
pub(crate) const PART: Part = Part {
    request: || {
        SHARED.request();
        RESERVATION_LOCK.request();
    },
    attach: || {
        // SAFETY: SnowflakeShared is atomics only, for which all-zero bytes are valid (its
        // Default); nothing else to initialize.
        unsafe { SHARED.attach(|_| {}) };
        RESERVATION_LOCK.attach();
        idgen_core::snowflake::clock::attach_gate_switch(&SHARED.get().counters.0.tsc_gate_off);
    },
};

/// The generator's shared state.
pub(crate) fn shared() -> &'static SnowflakeShared {
    SHARED.get()
}

/// Builds the layout from the settings, once, in the postmaster (`_PG_init`).
pub(crate) fn build_layout() -> Result<&'static Layout, Error> {
    if let Some(layout) = LAYOUT.get() {
        return Ok(layout);
    }
    let layout = configured()?;
    Ok(LAYOUT.get_or_init(|| layout))
}

/// The layout `idgen.epoch`, `idgen.id_bits`, `idgen.worker_bits`, `idgen.sequence_bits` and
/// `idgen.time_unit_ms` describe, checked against `idgen.worker_id`. An unusable one is 22023
/// with a detail that names the settings and their values.
fn configured() -> Result<Layout, Error> {
    let (worker_bits, sequence_bits, time_unit_ms) = guc::layout_widths();
    let id_bits = guc::id_bits();
    let layout = Layout::within(
        id_bits,
        guc::epoch_unix_ms(),
        worker_bits,
        sequence_bits,
        time_unit_ms,
    )
    .map_err(|e| match e {
        LayoutError::Invalid(why) => Error::InvalidLayout {
            detail: format!(
                "idgen.id_bits = {id_bits}, idgen.worker_bits = {worker_bits}, idgen.sequence_bits = {sequence_bits}, idgen.time_unit_ms = {time_unit_ms}: {why}."
            ),
        },
        e => e.into(),
    })?;
    match guc::worker_id_setting() {
        guc::WorkerIdSetting::Fixed(worker) if worker > layout.max_worker() => {
            Err(Error::InvalidSetting {
                name: "idgen.worker_id".into(),
                value: worker.to_string(),
                detail: format!(
                    "idgen.worker_bits = {worker_bits} allows worker ids 0 to {}.",
                    layout.max_worker()
                ),
            })
        }
        _ => Ok(layout),
    }
}

/// The server's layout, built by [`build_layout`] in the postmaster and inherited by every
/// backend.
pub(crate) fn layout() -> &'static Layout {
    LAYOUT.get().expect("the layout is built in _PG_init")
}

/// Moves the state word so that the next id is at `tick` or later (sequence 0); never back.
pub(crate) fn advance_state_to(layout: &Layout, shared: &SnowflakeShared, tick: u64) {
    if tick > 0 {
        shared
            .state
            .0
            .fetch_max((tick << layout.sequence_bits()) - 1, Ordering::AcqRel);
    }
}

/// Raises the head start to `tick` (never lowers it): ids up to `tick` plus `idgen.max_drift_ms`
/// are stamped without waiting for the clock (`issue::reserve`).
pub(crate) fn raise_head_start(shared: &SnowflakeShared, tick: u64) {
    shared
        .counters
        .0
        .head_start_tick
        .fetch_max(tick, Ordering::AcqRel);
}
