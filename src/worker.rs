//! idgen's background workers. The allocator: one per database that uses segments, started on
//! demand, gone after `idgen.segment_worker_idle_timeout` without work. The reservation keeper
//! ([`idgen_reservation_keeper_main`]): one per server, keeping the Snowflake reservation file
//! ahead of the clock while ids are issued.
//!
//! The allocator alone writes `idgen_segment`. Every unit of work (a refill, a load, an admin call) runs in
//! a transaction of its own, committed with `synchronous_commit` at least `on` before any number
//! of a new range is published to the shared cache: a caller's ROLLBACK can never undo a
//! high-water mark whose numbers are in use (DESIGN.md §2). A commit whose wait for the
//! synchronous standbys was cut short (a cancel, a termination request) publishes nothing: a
//! failover to a standby without it must not hand its numbers out again. A failed unit is reported to the
//! waiting caller and the worker goes on, as pg_cron's workers do.
//!
//! A [`Failure`] is plain data of fixed size (it travels through shared memory), so results
//! carrying it are large; they are produced once per unit of work, never on a hot path.
#![allow(clippy::result_large_err)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use pgrx::bgworkers::{BackgroundWorker, SignalWakeFlags};
use pgrx::pg_sys;
use pgrx::prelude::*;

use crate::error::Error;
use crate::guc;
use crate::segment::cache::{
    self, DescriptionChange, Failure, Refilled, Request, RequestKind, SlotMeta, Work,
};
use crate::segment::catalog;
use crate::segment::range::{fenced_range, max_id_for_start, next_step, NoRange};

/// Entry point of the reservation keeper (registered by `snowflake::server::register_keeper`):
/// looks every [`KEEPER_PERIOD_MS`] while the generator is in use, every second otherwise, and
/// extends the durable reservation before a caller would have to (`server::keep_ahead`). No
/// database connection: it only touches shared memory and the file. Exits on SIGTERM.
///
/// [`KEEPER_PERIOD_MS`]: crate::snowflake::server::KEEPER_PERIOD_MS
#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn idgen_reservation_keeper_main(_arg: pg_sys::Datum) {
    use crate::snowflake::server;
    BackgroundWorker::attach_signal_handlers(SignalWakeFlags::SIGHUP | SignalWakeFlags::SIGTERM);
    let mut period = Duration::from_secs(1);
    let mut watched = Instant::now();
    while BackgroundWorker::wait_latch(Some(period)) {
        if watched.elapsed() >= Duration::from_secs(1) {
            server::watch_clocksource();
            watched = Instant::now();
        }
        if BackgroundWorker::sighup_received() {
            // SAFETY: reloading the configuration files between looks (idgen.max_drift_ms).
            unsafe { pg_sys::ProcessConfigFile(pg_sys::GucContext::PGC_SIGHUP) };
        }
        let active = !crate::recovery_in_progress() && server::keep_ahead();
        period = if active {
            Duration::from_millis(server::KEEPER_PERIOD_MS)
        } else {
            Duration::from_secs(1)
        };
    }
}

/// Registers the allocator of database `db` as a dynamic background worker. False when
/// PostgreSQL has no free background worker slot (`max_worker_processes`).
pub fn launch(db: pg_sys::Oid) -> bool {
    cache::allocator_builder(db).load_dynamic().is_ok()
}

/// Entry point of the allocator; `arg` is the database oid.
///
/// Signals are PostgreSQL's own, as in a regular backend, so that every wait obeys them with
/// `CHECK_FOR_INTERRUPTS` semantics (a latch wait, a lock wait, SPI, the commit's wait for
/// synchronous standbys): SIGTERM (`pg_terminate_backend`, a fast shutdown) is `die`, and the
/// worker exits at the next interrupt check; SIGINT (`pg_cancel_backend`) cancels the unit of
/// work in progress ([`in_transaction`]); SIGHUP reloads the configuration between units.
#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn idgen_allocator_main(arg: pg_sys::Datum) {
    let db = pg_sys::Oid::from(arg.value() as u32);
    // SAFETY: installing PostgreSQL's own handlers (and ours, which calls its cancel handler)
    // before signals are unblocked, as postgres.c does for a backend.
    unsafe {
        pg_sys::pqsignal(pg_sys::SIGHUP as i32, Some(SignalHandlerForConfigReload));
        pg_sys::pqsignal(pg_sys::SIGTERM as i32, Some(die));
        pg_sys::pqsignal(pg_sys::SIGINT as i32, Some(on_cancel));
        pg_sys::BackgroundWorkerUnblockSignals();
    }
    // Registered before connecting, so it also runs if the connection fails (database gone),
    // and after PostgreSQL's own cleanup of an open transaction.
    // SAFETY: a #[pg_guard]ed callback with a plain datum argument.
    unsafe { pg_sys::before_shmem_exit(Some(on_exit), arg) };
    if !cache::lock().claim_allocator(db) {
        return; // another allocator serves this database
    }
    BackgroundWorker::connect_worker_to_spi_by_oid(Some(db), None);
    force_settings();
    log!("idgen allocator started for database {}", db.to_u32());

    let mut last_work = Instant::now();
    loop {
        check_interrupts_between_units();
        // SAFETY: a plain flag set by the SIGHUP handler.
        if unsafe { pg_sys::ConfigReloadPending } != 0 {
            reload_configuration();
        }
        if cache::lock().retire_requested(db) {
            break;
        }
        let work = cache::lock().take_work(db);
        if let Some(work) = work {
            run(db, work);
            last_work = Instant::now();
            continue;
        }
        let idle_limit = Duration::from_millis(guc::segment_worker_idle_timeout_ms());
        let idle = last_work.elapsed();
        if idle >= idle_limit {
            if cache::lock().retire_if_idle(db) {
                break;
            }
            continue;
        }
        crate::latch::wait(idle_limit - idle);
    }
}

// PostgreSQL's signal handlers themselves (pgrx's `pg_sys` functions are Rust wrappers that
// cannot be installed as handlers).
extern "C-unwind" {
    fn die(signal: std::ffi::c_int);
    fn StatementCancelHandler(signal: std::ffi::c_int);
    fn SignalHandlerForConfigReload(signal: std::ffi::c_int);
}

/// Set by [`on_cancel`] when `pg_cancel_backend` reaches the allocator; cleared at the start
/// of each unit of work. A unit that saw it fails, even if its commit went through: PostgreSQL
/// ends a commit's wait for synchronous standbys on a cancel with only a WARNING ("canceling
/// wait for synchronous replication"), so the commit may be local only.
static CANCEL_SEEN: AtomicBool = AtomicBool::new(false);

/// The allocator's SIGINT handler: notes the cancel, then PostgreSQL's own handler
/// (`StatementCancelHandler`: sets `QueryCancelPending` and the latch). Async-signal-safe: an
/// atomic store and PostgreSQL's handler, no pgrx guard.
unsafe extern "C-unwind" fn on_cancel(signal: std::ffi::c_int) {
    CANCEL_SEEN.store(true, Ordering::SeqCst);
    // SAFETY: PostgreSQL's signal handler, called from a signal handler as designed.
    unsafe { StatementCancelHandler(signal) };
}

/// Between units of work: a termination request ends the worker here (FATAL, through
/// `CHECK_FOR_INTERRUPTS`); a cancel that arrived while idle has nothing to cancel.
fn check_interrupts_between_units() {
    CANCEL_SEEN.store(false, Ordering::SeqCst);
    // SAFETY: plain flags of this process. Cancels are held off around the check, so one that
    // arrives in between stays pending for the next unit of work (which it then cancels)
    // instead of raising an ERROR here, outside any transaction.
    unsafe {
        pg_sys::QueryCancelHoldoffCount += 1;
        pg_sys::QueryCancelPending = 0;
    }
    pgrx::check_for_interrupts!();
    // SAFETY: as above.
    unsafe { pg_sys::QueryCancelHoldoffCount -= 1 };
}

/// A WARNING in the server log from the allocator, with interrupts held: `errfinish` checks for
/// interrupts, and a pending cancel must not turn the warning into an ERROR that escapes the
/// unit of work (a termination is handled at the next check, between units).
fn warn(message: &str) {
    // SAFETY: a plain counter of this process, restored below.
    unsafe { pg_sys::InterruptHoldoffCount += 1 };
    warning!("{message}");
    // SAFETY: as above.
    unsafe { pg_sys::InterruptHoldoffCount -= 1 };
}

/// Leaves the allocator table and fails what this allocator was running.
#[pg_guard]
unsafe extern "C-unwind" fn on_exit(_code: i32, arg: pg_sys::Datum) {
    let db = pg_sys::Oid::from(arg.value() as u32);
    cache::lock().allocator_exits(db);
}

/// Re-reads the configuration files, then puts the allocator's own settings back. Between
/// units of work only.
fn reload_configuration() {
    // SAFETY: a plain flag of this process; the reload runs outside any transaction.
    unsafe {
        pg_sys::ConfigReloadPending = 0;
        pg_sys::ProcessConfigFile(pg_sys::GucContext::PGC_SIGHUP);
    }
    force_settings();
}

/// The allocator's own settings: commits are durable (locally and, with synchronous standbys,
/// on them) before a range is used; no user schema is searched; a clear application_name.
fn force_settings() {
    let set = |name: &std::ffi::CStr, value: &std::ffi::CStr| {
        // SAFETY: valid setting names and values; the override source outranks the files.
        unsafe {
            pg_sys::SetConfigOption(
                name.as_ptr(),
                value.as_ptr(),
                pg_sys::GucContext::PGC_SUSET,
                pg_sys::GucSource::PGC_S_OVERRIDE,
            )
        }
    };
    // SAFETY: a plain GUC variable.
    if unsafe { pg_sys::synchronous_commit }
        < pg_sys::SyncCommitLevel::SYNCHRONOUS_COMMIT_REMOTE_FLUSH as i32
    {
        set(c"synchronous_commit", c"on");
    }
    set(c"search_path", c"");
    set(c"application_name", c"idgen allocator");
}

/// How a unit of work ended without a usable result.
enum Unfinished {
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
fn in_transaction<R>(body: impl FnOnce() -> Result<R, Error>) -> Result<R, Unfinished> {
    let mut body = Some(body);
    // SAFETY: the worker is connected and between transactions.
    unsafe {
        pg_sys::SetCurrentStatementStartTimestamp();
        pg_sys::StartTransactionCommand();
        pg_sys::PushActiveSnapshot(pg_sys::GetTransactionSnapshot());
    }
    PgTryBuilder::new(std::panic::AssertUnwindSafe(|| {
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
    // SAFETY: a plain flag of this process, set by `die`.
    let terminating = unsafe { pg_sys::ProcDiePending } != 0;
    let (sqlstate, why) = if terminating {
        (
            PgSqlErrorCode::ERRCODE_ADMIN_SHUTDOWN,
            "the idgen allocator was terminated",
        )
    } else if CANCEL_SEEN.load(Ordering::SeqCst) {
        (
            PgSqlErrorCode::ERRCODE_QUERY_CANCELED,
            "the idgen allocator was cancelled",
        )
    } else {
        return None;
    };
    let failure = Failure::from_error(&Error::Allocator {
        sqlstate: sqlstate as i32,
        message: format!("{why} while committing; the change is not used"),
        detail: Some(
            "The commit may not have reached the synchronous standbys; numbers it reserved are skipped, never handed out."
                .into(),
        ),
        hint: Some("Retry.".into()),
    });
    // The cancel is recorded (CANCEL_SEEN); a pending one must not fire in what follows.
    // SAFETY: a plain flag of this process.
    unsafe { pg_sys::QueryCancelPending = 0 };
    warn(&format!("idgen allocator: {}", failure.to_error()));
    Some(failure)
}

fn run(db: pg_sys::Oid, work: Work) {
    match work {
        Work::Request(index, request) => {
            let outcome = match request.kind {
                RequestKind::Load => load(db, &request),
                RequestKind::Create => create(db, &request),
                RequestKind::Alter => alter(db, &request),
                RequestKind::Drop => drop_segment(db, &request),
                RequestKind::Setval => setval(db, &request),
                RequestKind::InterleaveReady => interleave_ready(&request),
            };
            cache::lock().finish_request(index, outcome);
        }
        Work::Refill {
            index,
            generation,
            meta,
        } => {
            let outcome = refill(&meta).map_err(|f| {
                let gone = f.sqlstate() == PgSqlErrorCode::ERRCODE_UNDEFINED_OBJECT as i32;
                (f, gone)
            });
            if !cache::lock().finish_refill(index, generation, outcome) {
                warn(&format!(
                    "idgen allocator: a range of segment \"{}\" was committed but not needed; its numbers are skipped",
                    meta.name.as_str()
                ));
            }
        }
    }
}

/// Takes the next range of a cached segment: Leaf's dynamic step (or, with
/// `idgen.segment_node_count > 1`, this server's next own block), one committed UPDATE.
fn refill(meta: &SlotMeta) -> Result<Refilled, Failure> {
    let name = meta.name.as_str();
    let since_ms = if meta.last_refill_at == 0 {
        0
    } else {
        (cache::now() - meta.last_refill_at) / 1000
    };
    let previous = (meta.step > 0).then_some(meta.step);
    let nodes = guc::segment_nodes().map_err(|e| Failure::from_error(&e))?;
    let fences = guc::segment_fences();
    // An unconfirmed commit fails the refill: its range is never installed (numbers skipped).
    let mut done = in_transaction(|| {
        let (max_id, base_step) = catalog::lock_row(name)?;
        // Interleaved servers take one own block of the segment's step per refill: blocks must
        // be the same size on every server, so the dynamic step does not apply.
        let step = if nodes.interleaved() {
            base_step
        } else {
            next_step(
                previous,
                base_step,
                guc::segment_max_step(),
                since_ms,
                guc::segment_refill_interval_ms(),
            )
        };
        let range = fenced_range(max_id, step, nodes, fences).map_err(|e| match e {
            NoRange::Exhausted => Error::SegmentExhausted { name: name.into() },
            NoRange::Until(until) => Error::InterleaveUntilReached {
                name: name.into(),
                until,
            },
        })?;
        catalog::set_max_id(name, range.last)?;
        Ok(Refilled {
            range,
            base_step,
            step,
            at: 0,
        })
    })?;
    done.at = cache::now();
    Ok(done)
}

/// Brings an existing segment into the shared cache; the result is its slot.
fn load(db: pg_sys::Oid, request: &Request) -> Result<i64, Failure> {
    let name = request.name.as_str();
    if let Some(i) = cache::lock().find(db, name) {
        return Ok(i as i64);
    }
    let base_step = in_transaction(|| catalog::step(name))?;
    let mut g = cache::lock();
    if let Some(i) = g.find(db, name) {
        return Ok(i as i64);
    }
    g.assign(db, name, base_step)
        .map(|i| i as i64)
        .ok_or_else(|| {
            Failure::from_error(&Error::SegmentCacheFull {
                max: cache::MAX_SEGMENTS,
            })
        })
}

/// A cached segment made undrawable while an admin call changes it.
struct Frozen {
    index: usize,
    generation: u64,
}

fn freeze(db: pg_sys::Oid, name: &str) -> Option<Frozen> {
    let mut g = cache::lock();
    let index = g.find(db, name)?;
    g.meta(index).frozen = true;
    let s = cache::slot(index);
    s.buffers.freeze();
    Some(Frozen {
        index,
        generation: s.generation.load(std::sync::atomic::Ordering::SeqCst),
    })
}

/// After an admin call: `Keep` thaws the cached ranges unchanged (the call failed), `Clear`
/// skips their numbers (the high-water mark moved), `Release` frees the slot.
enum After {
    Keep,
    Clear,
    Release,
}

fn unfreeze(frozen: Option<Frozen>, after: After) {
    let Some(f) = frozen else { return };
    let mut g = cache::lock();
    let s = cache::slot(f.index);
    if s.generation.load(std::sync::atomic::Ordering::SeqCst) == f.generation {
        match after {
            After::Keep => s.buffers.thaw(),
            After::Clear => s.buffers.clear(),
            After::Release => g.release(f.index),
        }
        g.meta(f.index).frozen = false;
    }
    drop(g);
    cache::broadcast();
}

/// Runs an admin call with the segment's cache frozen; `after` says what becomes of the cache
/// when it committed.
fn frozen_call(
    db: pg_sys::Oid,
    name: &str,
    after: After,
    body: impl FnOnce(Option<i64>) -> Result<i64, Error>,
) -> Result<i64, Failure> {
    let frozen = freeze(db, name);
    let highest = frozen
        .as_ref()
        .and_then(|f| cache::slot(f.index).buffers.highest_taken());
    match in_transaction(|| body(highest)) {
        Ok(v) => {
            unfreeze(frozen, after);
            Ok(v)
        }
        Err(Unfinished::Failed(f)) => {
            unfreeze(frozen, After::Keep);
            Err(f)
        }
        // Committed here, perhaps not on the standbys: the cache must not outlive the change
        // (a setval that moved the mark below the cached range, say), nor the caller trust it.
        Err(Unfinished::Unconfirmed(f)) => {
            unfreeze(frozen, after);
            Err(f)
        }
    }
}

fn create(db: pg_sys::Oid, r: &Request) -> Result<i64, Failure> {
    let name = r.name.as_str();
    let description =
        (r.description_change == DescriptionChange::Set).then(|| r.description.as_str());
    // A slot still cached under this name is stale (its row was removed behind idgen's back):
    // its numbers must not be mixed with the new segment's.
    frozen_call(db, name, After::Release, |_| {
        let max_id = max_id_for_start(r.value).ok_or(Error::StartOutOfRange { start: r.value })?;
        if !catalog::insert(name, max_id, r.step, description)? {
            return Err(Error::SegmentExists { name: name.into() });
        }
        Ok(r.value)
    })
}

fn alter(db: pg_sys::Oid, r: &Request) -> Result<i64, Failure> {
    let name = r.name.as_str();
    let description = match r.description_change {
        DescriptionChange::Keep => None,
        DescriptionChange::Set => Some(Some(r.description.as_str())),
        DescriptionChange::Clear => Some(None),
    };
    let nodes = guc::segment_nodes().map_err(|e| Failure::from_error(&e))?;
    let step = in_transaction(|| {
        if r.step != 0 && nodes.interleaved() {
            // The step is the block size every server interleaves by: it cannot change here.
            let (_, current) = catalog::lock_row(name)?;
            if current != i64::from(r.step) {
                return Err(Error::InterleavedStepChange {
                    name: name.into(),
                    count: nodes.count,
                });
            }
        }
        catalog::alter(name, (r.step != 0).then_some(r.step), description)
    })?;
    let mut g = cache::lock();
    if let Some(i) = g.find(db, name) {
        let m = g.meta(i);
        m.base_step = step;
        m.step = 0; // the dynamic step starts again from the new step
    }
    Ok(step)
}

fn drop_segment(db: pg_sys::Oid, r: &Request) -> Result<i64, Failure> {
    let name = r.name.as_str();
    frozen_call(db, name, After::Release, |_| {
        if !catalog::delete(name)? {
            return Err(Error::UnknownSegment { name: name.into() });
        }
        Ok(0)
    })
}

/// Forward only: the new high-water mark must not be below any number this server may have
/// handed out (the last taken number of the cached range, else the stored mark).
fn setval(db: pg_sys::Oid, r: &Request) -> Result<i64, Failure> {
    let name = r.name.as_str();
    let value = r.value;
    frozen_call(db, name, After::Clear, |highest| {
        let (max_id, _) = catalog::lock_row(name)?;
        let floor = highest.unwrap_or(max_id);
        if value < floor {
            return Err(Error::SetvalBackwards {
                name: name.into(),
                value,
                floor,
            });
        }
        catalog::set_max_id(name, value)?;
        Ok(value)
    })
}

/// The check of the fence when growing from N to M servers: after a configuration reload (so
/// that it cannot lag behind the caller's `pg_reload_conf()`), this allocator runs with
/// `idgen.segment_interleave_until` = `r.value`, so no refill from now on goes past it, and no
/// segment of the database is past it already (a refill before the reload may have gone past
/// it). Units of work run one at a time: once this one has run, both hold for good.
fn interleave_ready(r: &Request) -> Result<i64, Failure> {
    reload_configuration();
    let until = r.value;
    let in_force = guc::segment_fences().until;
    if in_force != Some(until) {
        return Err(Failure::from_error(&Error::InterleaveUntilNotSet {
            until,
            in_force,
        }));
    }
    let highest = in_transaction(catalog::highest_mark)?;
    match highest {
        Some((name, max_id)) if max_id > until => {
            Err(Failure::from_error(&Error::InterleavePastUntil {
                name,
                max_id,
                until,
            }))
        }
        Some((_, max_id)) => Ok(max_id),
        None => Ok(i64::MIN),
    }
}
