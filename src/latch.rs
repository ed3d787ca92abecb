//! Sleeping in a PostgreSQL process: on its latch, so that a signal (new work, a cancel, a
//! termination request, a reload) ends the sleep at once, and never past the postmaster's death.

use std::time::Duration;

use pgrx::pg_sys;

/// Sleeps on this process's latch up to `timeout` (at least 1 ms); returns early when the
/// latch is set. Exits the process if the postmaster dies. Interrupts are left to the caller.
pub(crate) fn wait(timeout: Duration) {
    let ms = timeout.as_millis().clamp(1, i32::MAX as u128) as std::ffi::c_long;
    // SAFETY: MyLatch is this process's latch; the wait event is the generic extension one.
    unsafe {
        pg_sys::WaitLatch(
            pg_sys::MyLatch,
            (pg_sys::WL_LATCH_SET | pg_sys::WL_TIMEOUT | pg_sys::WL_EXIT_ON_PM_DEATH) as i32,
            ms,
            pg_sys::PG_WAIT_EXTENSION,
        );
        pg_sys::ResetLatch(pg_sys::MyLatch);
    }
}

/// [`wait`], then raises a pending cancel or termination (`CHECK_FOR_INTERRUPTS`).
pub(crate) fn sleep_interruptibly(timeout: Duration) {
    wait(timeout);
    pgrx::check_for_interrupts!();
}
