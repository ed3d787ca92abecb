//! How the allocator runs one unit of work: in a transaction of its own, committed with
//! `synchronous_commit` at least `on` before any number of a new range is published to the shared
//! cache, so that a caller's ROLLBACK can never undo a high-water mark whose numbers are in use
//! (DESIGN.md §2). A commit whose wait for the synchronous standbys was cut short (a cancel, a
//! termination request) publishes nothing: a failover to a standby without it must not hand its
//! numbers out again. Also the worker's signals, interrupts and settings.
//!
//! A [`Failure`] is plain data of fixed size (it travels through shared memory), so results
//! carrying it are large; they are produced once per unit of work, never on a hot path.
#![allow(clippy::result_large_err)]

use pgrx::pg_sys;
use pgrx::prelude::*;

use crate::error::Error;
use crate::failure::Failure;
use crate::guc;
use crate::worker::{self, Sigint, Sigterm};

/// Installs the allocator's signal handlers: PostgreSQL's own, as in a regular backend, so that
/// every wait obeys them with `CHECK_FOR_INTERRUPTS` semantics (a latch wait, a lock wait, SPI,
/// the commit's wait for synchronous standbys). SIGTERM is `die`: the worker exits at the next
/// interrupt check; SIGINT cancels the unit of work in progress, and is noted
/// (`worker::cancel_seen`: a unit that saw it fails, even if its commit went through); SIGHUP
/// reloads the configuration between units. Then unblocks signals.
pub(crate) fn install_signal_handlers() {
    worker::install_signal_handlers(Sigterm::Die, Sigint::Cancel);
}

/// Between units of work: a termination request ends the worker here (FATAL, through
/// `CHECK_FOR_INTERRUPTS`); a cancel that arrived while idle has nothing to cancel.
pub(crate) fn check_interrupts_between_units() {
    worker::forget_cancel();
    // SAFETY: plain counters and flags of this process, which PostgreSQL's interrupt machinery
    // reads on this same thread. Cancels are held off around the check, so one that arrives in
    // between stays pending for the next unit of work (which it then cancels) instead of raising
    // an ERROR here, outside any transaction.
    unsafe {
        pg_sys::QueryCancelHoldoffCount += 1;
        pg_sys::QueryCancelPending = 0;
    }
    pgrx::check_for_interrupts!();
    // SAFETY: restores the holdoff count raised above.
    unsafe { pg_sys::QueryCancelHoldoffCount -= 1 };
}

/// A WARNING in the server log from the allocator, with interrupts held: `errfinish` checks for
/// interrupts, and a pending cancel must not turn the warning into an ERROR that escapes the
/// unit of work (a termination is handled at the next check, between units).
pub(crate) fn warn(message: &str) {
    // SAFETY: a plain counter of this process (HOLD_INTERRUPTS), restored below.
    unsafe { pg_sys::InterruptHoldoffCount += 1 };
    warning!("{message}");
    // SAFETY: restores the count raised above (RESUME_INTERRUPTS).
    unsafe { pg_sys::InterruptHoldoffCount -= 1 };
}

/// If a SIGHUP arrived, re-reads the configuration files, then puts the allocator's own
/// settings back. Between units of work only.
pub(crate) fn reload_configuration() {
    if worker::reload_if_pending() {
        force_settings();
    }
}

/// Re-reads the configuration files now, then puts the allocator's own settings back. Between
/// units of work, or at the start of one that must see the latest settings.
pub(crate) fn reload_now() {
    worker::reload();
    force_settings();
}

/// The allocator's own settings: commits are durable (locally and, with synchronous standbys,
/// on them) before a range is used; no user schema is searched; a clear application_name.
pub(crate) fn force_settings() {
    use crate::backend::set_override as set;
    // SAFETY: a plain int GUC variable of this process, read on its only thread.
    if unsafe { pg_sys::synchronous_commit }
        < pg_sys::SyncCommitLevel::SYNCHRONOUS_COMMIT_REMOTE_FLUSH as i32
    {
        set(c"synchronous_commit", c"on");
    }
    set(c"search_path", c"");
    worker::set_application_name(c"idgen allocator");
}

/// How a unit of work ended without a usable result.
pub(crate) enum Unfinished {
    /// Nothing was committed: the failure goes to the caller, the cache stays as it was.
    Failed(Failure),
    /// The commit went through locally but was not confirmed by the synchronous standbys (their
    /// wait was cancelled, or the worker is being terminated): what it wrote must be treated as
    /// committed (the numbers it replaced are never reused) but its result is never published,
    /// since a failover to a standby that lacks the commit would hand its numbers out again.
    Unconfirmed(Failure),
}

/// The error for the waiting caller.
impl From<Unfinished> for Failure {
    fn from(u: Unfinished) -> Self {
        match u {
            Unfinished::Failed(f) | Unfinished::Unconfirmed(f) => f,
        }
    }
}

/// Runs `body` in a transaction of its own and commits it; any error (idgen's or PostgreSQL's)
/// aborts the transaction and comes back as [`Unfinished::Failed`] for the caller waiting on it.
/// A commit during which a cancel or a termination request arrived is
/// [`Unfinished::Unconfirmed`]: PostgreSQL ends the commit's wait for synchronous standbys on
/// either with only a WARNING, so the commit may exist on this server alone.
pub(crate) fn in_transaction<R>(body: impl FnOnce() -> Result<R, Error>) -> Result<R, Unfinished> {
    run_transaction(body, true)
}

/// [`in_transaction`] for a change that is safe whether or not its commit survives or reaches
/// the standbys (a give-back: lowering a mark is never needed for uniqueness), so its commit is
/// not checked; a termination request during it is not a failure.
pub(crate) fn in_unconfirmed_transaction<R>(
    body: impl FnOnce() -> Result<R, Error>,
) -> Result<R, Failure> {
    run_transaction(body, false).map_err(Failure::from)
}

/// Runs `body` with interrupts held off (`HOLD_INTERRUPTS`): a termination request or a cancel
/// arriving meanwhile takes effect at the next check after it. Only for short work that cannot
/// wait on anyone (a `NOWAIT` lock, an asynchronous commit). The count is restored to what it
/// was, not decremented: an ERROR raised (and caught) inside `body` resets it to 0 (`errfinish`),
/// and a decrement would then wrap and hold interrupts off for good.
pub(crate) fn with_interrupts_held<R>(body: impl FnOnce() -> R) -> R {
    // SAFETY: a plain counter of this process (HOLD_INTERRUPTS), read and written on its only
    // thread; restored below.
    let saved = unsafe { pg_sys::InterruptHoldoffCount };
    // SAFETY: as above.
    unsafe { pg_sys::InterruptHoldoffCount = saved + 1 };
    let r = body();
    // SAFETY: as above: back to the caller's level (RESUME_INTERRUPTS, robust to errfinish).
    unsafe { pg_sys::InterruptHoldoffCount = saved };
    r
}

fn run_transaction<R>(
    body: impl FnOnce() -> Result<R, Error>,
    confirm: bool,
) -> Result<R, Unfinished> {
    let mut body = Some(body);
    // SAFETY: the worker is connected to its database (BackgroundWorkerInitializeConnection)
    // and between transactions, where a transaction may start.
    unsafe {
        pg_sys::SetCurrentStatementStartTimestamp();
        pg_sys::StartTransactionCommand();
        pg_sys::PushActiveSnapshot(pg_sys::GetTransactionSnapshot());
    }
    PgTryBuilder::new(std::panic::AssertUnwindSafe(|| {
        // No unit waits for a lock longer than a caller waits for a range: a session holding
        // a lock on idgen's catalog (an uncommitted `ALTER EXTENSION idgen UPDATE`, a `LOCK
        // TABLE`, a long `FOR UPDATE`) while it waits for this allocator would otherwise stop
        // every refill of the database, unseen by the deadlock detector (the session sleeps on
        // a condition variable, not on a lock). The unit then fails with 55P03, and the next
        // one runs. With the setting at 0 (callers wait until cancelled), the unit still waits
        // at most the setting's default: the callers' choice must not remove the allocator's
        // bound, or that session and the allocator would wait for each other for ever.
        let ms = guc::allocator_lock_timeout_ms();
        let value = std::ffi::CString::new(ms.to_string()).expect("digits");
        crate::backend::set_local(c"lock_timeout", &value);
        let outcome = (body.take().expect("runs once"))();
        // SAFETY: the transaction and snapshot started above are still open.
        unsafe {
            pg_sys::PopActiveSnapshot();
            if outcome.is_ok() {
                pg_sys::CommitTransactionCommand();
            } else {
                pg_sys::AbortCurrentTransaction();
            }
        }
        match outcome {
            Ok(v) if !confirm => Ok(v),
            Ok(v) => match unconfirmed_commit() {
                None => Ok(v),
                Some(f) => Err(Unfinished::Unconfirmed(f)),
            },
            Err(e) => Err(Unfinished::Failed(Failure::from_error(&e))),
        }
    }))
    .catch_others(|caught| {
        // SAFETY: pgrx has flushed the error state; this aborts the failed transaction.
        unsafe { pg_sys::AbortCurrentTransaction() };
        warn(&format!(
            "idgen allocator: {}",
            Failure::from_caught(&caught).to_error()
        ));
        Err(Unfinished::Failed(Failure::from_caught(&caught)))
    })
    .execute()
}

/// After a commit: the failure to report if a cancel or a termination request arrived during
/// the unit of work (so possibly during the commit's wait for synchronous standbys).
fn unconfirmed_commit() -> Option<Failure> {
    let terminating = worker::terminating();
    let (sqlstate, why) = if terminating {
        (
            PgSqlErrorCode::ERRCODE_ADMIN_SHUTDOWN,
            "the idgen allocator was terminated",
        )
    } else if worker::cancel_seen() {
        (
            PgSqlErrorCode::ERRCODE_QUERY_CANCELED,
            "the idgen allocator was cancelled",
        )
    } else {
        return None;
    };
    let failure = Failure::from_error(&Error::Relayed {
        sqlstate: sqlstate as i32,
        message: format!("{why} while committing; the change is not used"),
        detail: Some(
            "The commit may not have reached the synchronous standbys; numbers it reserved are skipped, never handed out."
                .into(),
        ),
        hint: Some("Retry.".into()),
    });
    // The cancel is recorded (`worker::cancel_seen`); a pending one must not fire in what follows.
    // SAFETY: a plain flag of this process, cleared on its only thread.
    unsafe { pg_sys::QueryCancelPending = 0 };
    warn(&format!("idgen allocator: {}", failure.to_error()));
    Some(failure)
}
