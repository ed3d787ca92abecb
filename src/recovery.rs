//! Whether this server or transaction may issue ids at all: not during recovery (a standby
//! carries its primary's worker id and high-water marks), not in a read-only transaction (as
//! PostgreSQL's `nextval()`). Asked on every id, so both answers cost a load or two.

use std::sync::atomic::{AtomicBool, Ordering};

use pgrx::pg_sys;

/// Whether this server is in recovery (a standby, or still replaying WAL after a crash), where
/// neither generator may issue ids. Once PostgreSQL has said no, recovery cannot start again in
/// this process, so the answer is kept: the generators ask per id, and every call into
/// PostgreSQL from Rust costs pgrx a `sigsetjmp` (19 ns per Snowflake id, measured).
#[inline]
pub(crate) fn in_progress() -> bool {
    !RECOVERY_ENDED.load(Ordering::Relaxed) && ask_in_progress()
}

/// Whether the current transaction is read-only (`BEGIN READ ONLY`,
/// `default_transaction_read_only`, as pg_auto_failover sets on a primary it fences), where
/// neither generator issues ids: as PostgreSQL's `nextval()` refuses there. One load of a
/// global per call.
#[inline]
pub(crate) fn read_only_transaction() -> bool {
    // SAFETY: a plain bool of this backend, set at transaction start and read on the same
    // (only) thread.
    unsafe { pg_sys::XactReadOnly }
}

/// Set once this process has seen recovery end.
static RECOVERY_ENDED: AtomicBool = AtomicBool::new(false);

/// The out-of-line part of [`in_progress`]: asks PostgreSQL.
#[cold]
#[inline(never)]
fn ask_in_progress() -> bool {
    // SAFETY: RecoveryInProgress reads XLogCtl, which is in shared memory in every process
    // attached to it (backends and background workers with shared memory access: all callers).
    let in_recovery = unsafe { pg_sys::RecoveryInProgress() };
    if !in_recovery {
        RECOVERY_ENDED.store(true, Ordering::Relaxed);
    }
    in_recovery
}
