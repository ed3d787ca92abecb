//! How idgen's background workers (the segment allocator, the reservation keeper, the registry
//! client) take signals, wait and reload their settings: one discipline, pg_cron's. Each
//! installs its handlers at its start, before it unblocks signals
//! ([`install_signal_handlers`]): PostgreSQL's `SignalHandlerForConfigReload` for SIGHUP, and
//! for SIGTERM either PostgreSQL's `die` ([`Sigterm::Die`]) or, for a worker that must do
//! something before it exits, a flag that also notes who sent the signal ([`Sigterm::Flag`]);
//! SIGINT optionally cancels as in a backend ([`Sigint::Cancel`]). It sleeps on its latch
//! ([`wait`]), re-reads the configuration files between units of work when a SIGHUP asked for
//! it ([`reload_if_pending`]), and a worker with a database session names itself in
//! `pg_stat_activity` ([`set_application_name`]).

use std::ffi::{c_int, CStr};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::Duration;

use pgrx::pg_sys;

use crate::pgver::set_signal_handler;

/// What SIGTERM (a fast or smart shutdown, `pg_terminate_backend`, `kill -TERM`) does.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sigterm {
    /// PostgreSQL's `die`, as in a regular backend: the worker exits (FATAL) at the next
    /// interrupt check, wherever it waits (a latch, a lock, SPI, the commit's wait for
    /// synchronous standbys). For a worker with nothing to do at exit beyond its
    /// `before_shmem_exit` callbacks; [`terminating`] tells it one is pending.
    Die,
    /// A flag ([`terminating`]) and the latch, and the sender's pid
    /// ([`terminated_by_postmaster`]): no wait ends by itself, the worker's loop sees the flag
    /// and decides what to do before it exits (the registry client releases its lease at a
    /// shutdown; the reservation keeper returns, which ends it for good, without a FATAL).
    Flag,
}

/// What SIGINT (`pg_cancel_backend`) does.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sigint {
    /// Left as PostgreSQL set it for the worker (ignored in a worker without a database).
    Unchanged,
    /// PostgreSQL's `StatementCancelHandler`, as in a backend: the next interrupt check outside
    /// a holdoff raises "canceling statement due to user request"; [`cancel_seen`] notes it.
    Cancel,
}

// PostgreSQL's signal handlers themselves (pgrx's `pg_sys` functions are Rust wrappers that
// cannot be installed as handlers).
extern "C-unwind" {
    fn die(signal: c_int);
    fn StatementCancelHandler(signal: c_int);
    fn SignalHandlerForConfigReload(signal: c_int);
}

/// Installs this worker's signal handlers, then unblocks signals
/// (`BackgroundWorkerUnblockSignals`), as pg_cron's scheduler does: SIGHUP is PostgreSQL's
/// `SignalHandlerForConfigReload` (see [`reload_if_pending`]); SIGTERM and SIGINT as `sigterm`
/// and `sigint` say. Call it first in the worker's entry point, where signals are still blocked.
pub(crate) fn install_signal_handlers(sigterm: Sigterm, sigint: Sigint) {
    // SAFETY: at the start of the worker, before signals are unblocked, as postgres.c installs
    // a backend's handlers; the handlers are PostgreSQL's own and this module's, which are
    // async-signal-safe.
    unsafe {
        set_signal_handler(pg_sys::SIGHUP as i32, Some(SignalHandlerForConfigReload));
        match sigterm {
            Sigterm::Die => set_signal_handler(pg_sys::SIGTERM as i32, Some(die)),
            Sigterm::Flag => install_flag_sigterm(),
        }
        if sigint == Sigint::Cancel {
            set_signal_handler(pg_sys::SIGINT as i32, Some(on_cancel));
        }
        pg_sys::BackgroundWorkerUnblockSignals();
    }
}

/// A SIGTERM arrived ([`Sigterm::Flag`]; kept: it is never forgotten once seen).
static TERMINATING: AtomicBool = AtomicBool::new(false);

/// The process that sent the first SIGTERM ([`Sigterm::Flag`]; 0 if unknown).
static TERMINATED_BY: AtomicI32 = AtomicI32::new(0);

/// The SIGTERM handler of [`Sigterm::Flag`]: notes the sender, sets the flag (and PostgreSQL's
/// `ShutdownRequestPending`, as its `SignalHandlerForShutdownRequest` does) and wakes the latch.
extern "C" fn on_sigterm(_signal: c_int, info: *mut libc::siginfo_t, _context: *mut libc::c_void) {
    // SAFETY: in a signal handler: errno is saved and restored around SetLatch, which
    // PostgreSQL's own handlers call from signal handlers; `info` is the kernel's siginfo.
    unsafe {
        let saved = *libc::__errno_location();
        if !info.is_null() && !TERMINATING.load(Ordering::Relaxed) {
            TERMINATED_BY.store((*info).si_pid(), Ordering::Relaxed);
        }
        TERMINATING.store(true, Ordering::Relaxed);
        (&raw mut pg_sys::ShutdownRequestPending).write_volatile(1);
        pg_sys::SetLatch(pg_sys::MyLatch);
        *libc::__errno_location() = saved;
    }
}

/// Installs [`on_sigterm`] with `sigaction` and `SA_SIGINFO` (`pqsignal` passes no sender).
///
/// # Safety
/// As [`install_signal_handlers`]: before signals are unblocked, in the process's only thread.
unsafe fn install_flag_sigterm() {
    // SAFETY: a zeroed sigaction with a valid SA_SIGINFO handler and an empty mask, installed
    // for SIGTERM only, in the process's only thread.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_sigterm as *const () as usize;
        action.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGTERM, &action, std::ptr::null_mut());
    }
}

/// Whether this worker was asked to terminate: a SIGTERM reached [`Sigterm::Flag`]'s handler,
/// or `die` set `ProcDiePending` ([`Sigterm::Die`]: the next interrupt check exits).
pub(crate) fn terminating() -> bool {
    // SAFETY: a plain flag of this process, set by its SIGTERM handler, read on its only thread.
    TERMINATING.load(Ordering::Relaxed) || unsafe { pg_sys::ProcDiePending != 0 }
}

/// Whether the SIGTERM ([`Sigterm::Flag`]) came from the postmaster: a shutdown, not a
/// `kill -TERM` of this process from elsewhere.
pub(crate) fn terminated_by_postmaster() -> bool {
    // SAFETY: PostmasterPid is set before any child starts and never changes.
    TERMINATING.load(Ordering::Relaxed)
        && TERMINATED_BY.load(Ordering::Relaxed) == unsafe { pg_sys::PostmasterPid }
}

/// Set by [`on_cancel`] when `pg_cancel_backend` reaches the worker ([`Sigint::Cancel`]);
/// cleared by [`forget_cancel`]. It outlives `QueryCancelPending`: PostgreSQL ends a commit's
/// wait for synchronous standbys on a cancel with only a WARNING ("canceling wait for
/// synchronous replication"), and a worker may need to know that its commit was cut short.
static CANCEL_SEEN: AtomicBool = AtomicBool::new(false);

/// The SIGINT handler of [`Sigint::Cancel`]: notes the cancel, then PostgreSQL's own handler
/// (`StatementCancelHandler`: sets `QueryCancelPending` and the latch). Async-signal-safe: an
/// atomic store and PostgreSQL's handler, no pgrx guard.
///
/// # Safety
/// Installed as the SIGINT handler by [`install_signal_handlers`]; called by the kernel.
unsafe extern "C-unwind" fn on_cancel(signal: c_int) {
    CANCEL_SEEN.store(true, Ordering::SeqCst);
    // SAFETY: PostgreSQL's own SIGINT handler, called from within a SIGINT handler with the
    // signal number it was given, as pqsignal would call it.
    unsafe { StatementCancelHandler(signal) };
}

/// Whether a cancel arrived since the last [`forget_cancel`] ([`Sigint::Cancel`]).
pub(crate) fn cancel_seen() -> bool {
    CANCEL_SEEN.load(Ordering::SeqCst)
}

/// Forgets the cancels [`cancel_seen`] noted so far.
pub(crate) fn forget_cancel() {
    CANCEL_SEEN.store(false, Ordering::SeqCst);
}

/// Sleeps on the latch up to `timeout` (at least 1 ms), returning early when it is set (a
/// signal, new work), then checks for interrupts (`CHECK_FOR_INTERRUPTS`: with
/// [`Sigterm::Die`] a termination request exits here). Exits the process if the postmaster
/// dies.
pub(crate) fn wait(timeout: Duration) {
    crate::latch::sleep_interruptibly(timeout);
}

/// If a SIGHUP arrived since the last reload (`ConfigReloadPending`), re-reads the configuration
/// files ([`reload`]); whether it did. Between units of work, outside any transaction.
pub(crate) fn reload_if_pending() -> bool {
    // SAFETY: a flag of this process set by SignalHandlerForConfigReload, read on its only
    // thread.
    let pending = unsafe { pg_sys::ConfigReloadPending } != 0;
    if pending {
        reload();
    }
    pending
}

/// Re-reads the configuration files now (`ProcessConfigFile`), clearing a pending SIGHUP's
/// request first, as PostgreSQL's own processes do. Outside any transaction.
pub(crate) fn reload() {
    // SAFETY: outside any transaction, on the worker's only thread: where PostgreSQL's own
    // processes apply a reload (clearing the flag first, as they do).
    unsafe {
        pg_sys::ConfigReloadPending = 0;
        pg_sys::ProcessConfigFile(pg_sys::GucContext::PGC_SIGHUP);
    }
}

/// Sets this worker's `application_name`, which `pg_stat_activity` shows (as pg_cron's
/// `pgstat_report_appname`), over any value of the configuration files or the database's
/// stored settings. A worker without a database session has no row there, and needs none.
pub(crate) fn set_application_name(name: &CStr) {
    crate::backend::set_override(c"application_name", name);
}
