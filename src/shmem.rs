//! Every shared-memory object of idgen, in one place; names are prefixed `idgen_`.
//!
//! Only PostgreSQL's primitives live here: atomics (and, later, LWLocks and condition
//! variables). A process-local lock (`std` or `parking_lot`) must never be placed in shared
//! memory: its waiters park in a per-process table and another backend would never wake them
//! (DESIGN.md §3).

use std::sync::atomic::AtomicU64;

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
    /// How many ticks ahead of the wall clock the generator has entered (sequence overflow or
    /// clock behind), since server start.
    pub borrowed_ticks: CacheLine<AtomicU64>,
}

// SAFETY: only atomics, no pointers; the same bytes are valid in every process.
unsafe impl PGRXSharedMemory for SnowflakeShared {}

static SNOWFLAKE: PgAtomic<SnowflakeShared> = unsafe { PgAtomic::new(c"idgen_snowflake") };

/// Requests and attaches every shared-memory object. Called once from `_PG_init` in the
/// postmaster; each object is zeroed when the postmaster (re)creates shared memory, i.e. at
/// start and after a crash.
pub fn init() {
    pg_shmem_init!(SNOWFLAKE);
}

/// The Snowflake generator's shared state.
pub fn snowflake() -> &'static SnowflakeShared {
    SNOWFLAKE.get()
}
