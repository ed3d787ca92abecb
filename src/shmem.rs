//! Every shared-memory object of idgen, in one place; names are prefixed `idgen_`.
//!
//! Only PostgreSQL's primitives live here: atomics, LWLocks and condition variables. A
//! process-local lock (`std::sync::Mutex` and the like) must never be placed in shared memory: its
//! waiters park in a per-process table and another backend would never wake them (DESIGN.md §3).

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64};

use pgrx::pg_sys;
use pgrx::prelude::*;
use pgrx::{pg_shmem_init, PGRXSharedMemory, PgAtomic};

/// Pads a value to its own cache line (PostgreSQL's `PG_CACHE_LINE_SIZE`, 128 bytes), so that a
/// counter bumped now and then does not slow down the CAS on the state word next to it.
#[repr(C, align(128))]
#[derive(Default)]
pub struct CacheLine<T>(pub T);

/// The server's one Snowflake generator (DESIGN.md §1).
#[repr(C)]
#[derive(Default)]
pub struct SnowflakeShared {
    /// The last issued state word, `tick << sequence_bits | sequence`; 0 before the first id.
    /// Advanced only by compare-and-swap in `snowflake::generator::reserve`.
    pub state: CacheLine<AtomicU64>,
    /// The first tick not covered by the durable reservation file: no id at or beyond it is
    /// issued. 0 until the file has been read (lazily, by the first caller after a start).
    /// Read on every call, written about once a second.
    pub reserved_end: CacheLine<AtomicU64>,
    /// The highest wall-clock reading (Unix ms) any caller has seen; a reading below it is a
    /// clock regression. Written about once per millisecond under load.
    pub clock_seen_ms: CacheLine<AtomicI64>,
    /// Counters for `snowflake_status()`, since server start, and the warning rate limiter.
    pub counters: CacheLine<SnowflakeCounters>,
}

/// Rarely written counters of the Snowflake generator (`snowflake_status()`).
#[repr(C)]
#[derive(Default)]
pub struct SnowflakeCounters {
    /// Ticks entered ahead of the wall clock (sequence overflow or clock behind).
    pub borrowed_ticks: AtomicU64,
    /// Calls that had to wait for the clock (beyond `idgen.max_drift_ms`).
    pub waits: AtomicU64,
    /// Calls that failed because the clock stayed too far behind (SQLSTATE 53400).
    pub clock_failures: AtomicU64,
    /// Clock regressions seen: the wall clock read below an earlier reading.
    pub regressions: AtomicU64,
    /// Writes of the reservation file.
    pub reservation_writes: AtomicU64,
    /// CLOCK_MONOTONIC ms of the last regression WARNING (rate limit); 0 for none yet.
    pub last_warning_ms: AtomicI64,
    /// The kernel's clocksource is no longer the TSC: every process closes its TSC gate
    /// (`snowflake::clock`). Set by the reservation keeper, never cleared until a restart.
    pub tsc_gate_off: AtomicBool,
}

// SAFETY: only atomics, no pointers; the same bytes are valid in every process.
unsafe impl PGRXSharedMemory for SnowflakeShared {}

static SNOWFLAKE: PgAtomic<SnowflakeShared> = unsafe { PgAtomic::new(c"idgen_snowflake") };

/// Requests and attaches every shared-memory object. Called once from `_PG_init` in the
/// postmaster; each object is zeroed when the postmaster (re)creates shared memory, i.e. at
/// start and after a crash.
///
/// * `idgen_snowflake`: the Snowflake state word ([`SnowflakeShared`]), and the LWLock tranche
///   `idgen_snowflake` that serializes reading and writing the reservation file.
/// * `idgen_segment_cache` and the LWLock tranche `idgen_segment`: the segment cache
///   ([`crate::segment::cache::SegmentShared`]), set up by hooks of its own because it holds a
///   condition variable that must be initialized in place.
pub fn init() {
    pg_shmem_init!(SNOWFLAKE);
    // SAFETY: _PG_init runs once in the postmaster; the previous hooks are kept and called.
    unsafe {
        PREV_SHMEM_REQUEST_HOOK = pg_sys::shmem_request_hook;
        pg_sys::shmem_request_hook = Some(shmem_request);
        PREV_SHMEM_STARTUP_HOOK = pg_sys::shmem_startup_hook;
        pg_sys::shmem_startup_hook = Some(shmem_startup);
    }
}

static mut PREV_SHMEM_REQUEST_HOOK: Option<unsafe extern "C-unwind" fn()> = None;
static mut PREV_SHMEM_STARTUP_HOOK: Option<unsafe extern "C-unwind" fn()> = None;

#[pg_guard]
unsafe extern "C-unwind" fn shmem_request() {
    // SAFETY: the hook chain set up in `init`.
    unsafe {
        if let Some(prev) = PREV_SHMEM_REQUEST_HOOK {
            prev();
        }
    }
    crate::segment::cache::request_shmem();
    crate::snowflake::server::request_shmem();
}

#[pg_guard]
unsafe extern "C-unwind" fn shmem_startup() {
    // SAFETY: the hook chain set up in `init`; AddinShmemInitLock (main LWLock 21) serializes
    // ShmemInitStruct callers, as PostgreSQL requires.
    unsafe {
        if let Some(prev) = PREV_SHMEM_STARTUP_HOOK {
            prev();
        }
        let init_lock = &raw mut (*pg_sys::MainLWLockArray.add(21)).lock;
        pg_sys::LWLockAcquire(init_lock, pg_sys::LWLockMode::LW_EXCLUSIVE);
        crate::segment::cache::attach_shmem();
        crate::snowflake::server::attach_shmem();
        pg_sys::LWLockRelease(init_lock);
    }
}

/// The Snowflake generator's shared state.
pub fn snowflake() -> &'static SnowflakeShared {
    SNOWFLAKE.get()
}
