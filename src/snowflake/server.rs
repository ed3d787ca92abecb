//! The server's generator: the layout fixed at start, the wall clock and its policy, the shared
//! state word, the durable reservation, and this session's `snowflake_currval`.
//!
//! Shared state (the state word, the reserved end, counters) is in shared memory and advanced
//! with atomics only; the hot path takes no lock. The reservation file is read and written under
//! the LWLock `idgen_snowflake`, by the one caller that needs it, about once a second. Session
//! state (`currval`) is a process static, which no other process ever sees (DESIGN.md §3).

use std::sync::atomic::{AtomicI64, AtomicPtr, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use pgrx::bgworkers::{BackgroundWorkerBuilder, BgWorkerStartTime};
use pgrx::pg_sys;
use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;

use super::clock::wall_clock_unix_ms;
use super::clock::{self, monotonic_ms};
use super::generator::{self, Limits, Outcome, Reservation};
use super::layout::{Layout, LayoutError};
use super::reservation::{self, FileError, Stored};
use crate::error::Error;
use crate::guc;
use crate::shmem::{self, SnowflakeShared};

/// The layout, built once from the settings in the postmaster and inherited by every backend.
static LAYOUT: OnceLock<Layout> = OnceLock::new();

/// The last id this session drew, for `snowflake_currval()`; [`NO_CURRVAL`] before the first.
/// A backend is one thread, so a relaxed atomic is a plain load and store: a mutex here cost
/// two locked instructions per id.
static CURRVAL: AtomicI64 = AtomicI64::new(NO_CURRVAL);

/// [`CURRVAL`] before the session's first id (ids are never negative).
const NO_CURRVAL: i64 = -1;

/// The LWLock serializing the reservation file, set in the postmaster's shmem startup hook.
static LOCK: AtomicPtr<pg_sys::LWLock> = AtomicPtr::new(std::ptr::null_mut());
const TRANCHE: &std::ffi::CStr = c"idgen_snowflake";

/// How far ahead of need the reservation is extended, in ms: "about a second" (DESIGN.md §1).
pub const RESERVATION_WINDOW_MS: u64 = 1000;

/// A wall-clock reading this far below an earlier one counts as a regression. Readings are
/// ordered (a caller loads the highest reading before it reads the clock), so only a clock that
/// really stepped back falls below; 1 ms absorbs rounding to milliseconds.
const REGRESSION_TOLERANCE_MS: i64 = 1;

/// At most one clock-regression WARNING per this many ms, per server.
const WARNING_INTERVAL_MS: i64 = 10_000;

/// Builds the layout from the settings. Called from `_PG_init` after `guc::init`, in the
/// postmaster (idgen refuses to load anywhere else); an unusable layout, or a worker id that
/// does not fit it, stops the server (22023, naming the setting).
pub fn init() {
    clock::calibrate();
    let layout = LAYOUT.get_or_init(|| configured().unwrap_or_else(|e| e.report()));
    if layout.exhausted_at_unix_ms() <= wall_clock_unix_ms() {
        pgrx::warning!(
            "the snowflake layout ran out of time at Unix time {} ms: snowflake_nextval() will fail",
            layout.exhausted_at_unix_ms()
        );
    }
}

/// The layout `idgen.epoch`, `idgen.worker_bits`, `idgen.sequence_bits` and
/// `idgen.time_unit_ms` describe, checked against `idgen.worker_id`.
fn configured() -> Result<Layout, Error> {
    let (worker_bits, sequence_bits, time_unit_ms) = guc::layout_widths();
    let layout = Layout::new(
        guc::epoch_unix_ms(),
        worker_bits,
        sequence_bits,
        time_unit_ms,
    )?;
    match guc::worker_id() {
        Some(worker) if worker > layout.max_worker() => Err(Error::InvalidSetting {
            name: "idgen.worker_id".into(),
            value: worker.to_string(),
            detail: format!(
                "idgen.worker_bits = {worker_bits} allows worker ids 0 to {}.",
                layout.max_worker()
            ),
        }),
        _ => Ok(layout),
    }
}

/// The server's layout, built by [`init`] in the postmaster and inherited by every backend.
pub fn layout() -> &'static Layout {
    LAYOUT.get().expect("the layout is built in _PG_init")
}

/// Shared-memory request hook part: the reservation file's LWLock.
pub fn request_shmem() {
    // SAFETY: called from shmem_request_hook, where tranche requests are allowed.
    unsafe { pg_sys::RequestNamedLWLockTranche(TRANCHE.as_ptr(), 1) };
}

/// Shared-memory startup hook part: remembers where the LWLock is, and points the clock's TSC
/// gate at its shared switch.
pub fn attach_shmem() {
    // SAFETY: called from shmem_startup_hook, after the tranche was requested.
    unsafe {
        let tranche = pg_sys::GetNamedLWLockTranche(TRANCHE.as_ptr());
        LOCK.store(&raw mut (*tranche).lock, Ordering::SeqCst);
    }
    clock::attach_gate_switch(&shmem::snowflake().counters.0.tsc_gate_off);
}

/// The reservation keeper's look at the clocksource, about once a second: when the kernel no
/// longer keeps time with the TSC (it marked it unstable), switches every process's TSC gate
/// off for good and says so in the log. The gate was calibrated once, at start.
pub fn watch_clocksource() {
    let off = &shmem::snowflake().counters.0.tsc_gate_off;
    if clock::gate_open() && !clock::tsc_clocksource() && !off.swap(true, Ordering::Relaxed) {
        pgrx::log!(
            "idgen: the kernel's clocksource is no longer tsc; snowflake_nextval() reads the clock for every id from now on"
        );
    }
}

/// What [`reserve`] drew: the state words, the worker id to put in them, and the last id.
pub struct Drawn {
    /// The reserved state words.
    pub reservation: Reservation,
    /// This server's worker id.
    pub worker: u64,
    /// The id of `reservation.last`: the only id when one was drawn, and the session's currval.
    pub last_id: i64,
}

/// The largest batch `snowflake_nextvals` may take under the current drift bound.
pub fn max_batch() -> u64 {
    let layout = layout();
    generator::max_batch(
        layout,
        generator::max_ahead_ticks(layout, guc::max_drift_ms()),
    )
}

/// Reserves `count >= 1` consecutive ids (`count <= max_batch()`). Sets this session's
/// `currval` to the last id.
///
/// The clock policy (DESIGN.md §1): while the last id stays within `idgen.max_drift_ms` of the
/// wall clock, the call never waits. Beyond it, it sleeps (interruptibly) until the clock has
/// caught up, if that takes at most `idgen.max_wait_ms` in all; otherwise it fails at once.
///
/// Errors: 55000 when `idgen.worker_id` is unset or the reservation file was written under
/// another layout, 25006 during recovery, 22008 when the clock reads before the epoch, 2200H
/// when the layout has run out of time, 53400 when the clock is too far behind, XX001 for a
/// corrupt reservation file, 58030 when it cannot be written.
pub fn reserve(count: u64) -> Result<Drawn, Error> {
    // let-else, not `ok_or`: an eagerly built error is dropped on every call.
    let Some(worker) = guc::worker_id() else {
        return Err(Error::WorkerIdNotSet);
    };
    if crate::recovery_in_progress() {
        return Err(Error::InRecovery);
    }
    if crate::read_only_transaction() {
        return Err(Error::ReadOnlyTransaction {
            function: if count == 1 {
                "snowflake_nextval()"
            } else {
                "snowflake_nextvals()"
            },
        });
    }
    let layout = layout();
    let shared = shmem::snowflake();
    let mut waiting_since: Option<Instant> = None;
    loop {
        let now_ms = read_clock(shared);
        let now_tick = match layout.tick_at(now_ms) {
            Ok(tick) => tick,
            Err(LayoutError::BeforeEpoch { ms }) => return Err(Error::ClockBeforeEpoch { ms }),
            Err(e) => return Err(exhausted(layout, e)),
        };
        let limits = Limits {
            max_ahead_ticks: generator::max_ahead_ticks(layout, guc::max_drift_ms()),
            reserved_end: shared.reserved_end.0.load(Ordering::Acquire),
        };
        let outcome = generator::reserve(
            layout,
            &shared.state.0,
            now_tick,
            count,
            jitter(layout),
            limits,
        )
        .map_err(|e| exhausted(layout, e))?;
        match outcome {
            Outcome::Issued(r) => {
                let counters = &shared.counters.0;
                if r.borrowed_ticks > 0 {
                    counters
                        .borrowed_ticks
                        .fetch_add(r.borrowed_ticks, Ordering::Relaxed);
                }
                let end_tick = layout.state_tick(r.last);
                if end_tick + low_water_ticks(layout) >= limits.reserved_end {
                    // Extend ahead of need, unless another backend is at it. A failure here
                    // costs nothing yet: the caller that really needs the extension reports it.
                    let _ = extend(layout, shared, end_tick, now_ms, false);
                }
                let last_id = layout
                    .id_from_state(r.last, worker)
                    .map_err(|e| exhausted(layout, e))?;
                CURRVAL.store(last_id, Ordering::Relaxed);
                return Ok(Drawn {
                    reservation: r,
                    worker,
                    last_id,
                });
            }
            blocked => unblock(layout, shared, blocked, limits, now_ms, &mut waiting_since)?,
        }
    }
}

/// Clears the way for a reservation that `outcome` refused under `limits`: extends the durable
/// reservation (BeyondReservation), or sleeps until the clock has caught up with the generator
/// (TooFarAhead) if all the waiting of this call, `waiting_since`, stays within
/// `idgen.max_wait_ms`; else fails with 53400. Out of line: the per-id path never comes here.
#[cold]
#[inline(never)]
fn unblock(
    layout: &Layout,
    shared: &SnowflakeShared,
    outcome: Outcome,
    limits: Limits,
    now_ms: i64,
    waiting_since: &mut Option<Instant>,
) -> Result<(), Error> {
    match outcome {
        Outcome::Issued(_) => Ok(()),
        Outcome::BeyondReservation { end_tick } => extend(layout, shared, end_tick, now_ms, true),
        Outcome::TooFarAhead {
            ahead_ticks,
            end_tick,
        } => {
            let max_ahead = limits.max_ahead_ticks.unwrap_or(ahead_ticks);
            let catch_up_ms = (layout.unix_ms_of_tick(end_tick - max_ahead) - now_ms).max(1) as u64;
            let waited_ms = waiting_since.map_or(0, |t| t.elapsed().as_millis() as u64);
            if waited_ms + catch_up_ms > guc::max_wait_ms() {
                shared
                    .counters
                    .0
                    .clock_failures
                    .fetch_add(1, Ordering::Relaxed);
                return Err(Error::ClockBehind {
                    behind_ms: layout.unix_ms_of_tick(end_tick) - now_ms,
                    max_drift_ms: guc::max_drift_ms().unwrap_or(0),
                    max_wait_ms: guc::max_wait_ms(),
                });
            }
            if waiting_since.is_none() {
                *waiting_since = Some(Instant::now());
                shared.counters.0.waits.fetch_add(1, Ordering::Relaxed);
            }
            crate::latch::sleep_interruptibly(Duration::from_millis(catch_up_ms));
            Ok(())
        }
    }
}

/// Reads the wall clock and notes a regression: a reading below the highest one any caller
/// has seen. The highest reading is loaded *before* the clock is read, so a clock that did not
/// step back can never read below it.
fn read_clock(shared: &SnowflakeShared) -> i64 {
    let seen = shared.clock_seen_ms.0.load(Ordering::Acquire);
    let now_ms = clock::now_ms();
    if now_ms > seen {
        shared.clock_seen_ms.0.fetch_max(now_ms, Ordering::AcqRel);
    } else if now_ms < seen - REGRESSION_TOLERANCE_MS
        && shared
            .clock_seen_ms
            .0
            .compare_exchange(seen, now_ms, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
    {
        // The one caller whose CAS lowered the mark counts this regression.
        regression(shared, seen - now_ms, "moved backwards");
    }
    now_ms
}

/// Counts a clock regression of `by_ms` and logs it as a WARNING, at most one per
/// [`WARNING_INTERVAL_MS`] per server.
#[cold]
fn regression(shared: &SnowflakeShared, by_ms: i64, how: &str) {
    let counters = &shared.counters.0;
    let total = counters.regressions.fetch_add(1, Ordering::Relaxed) + 1;
    let now = monotonic_ms();
    let last = counters.last_warning_ms.load(Ordering::Relaxed);
    let due = last == 0 || now - last >= WARNING_INTERVAL_MS;
    if due
        && counters
            .last_warning_ms
            .compare_exchange(last, now.max(1), Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    {
        let drift = match guc::max_drift_ms() {
            Some(ms) => format!("{ms} ms"),
            None => "unbounded".into(),
        };
        ErrorReport::new(
            PgSqlErrorCode::ERRCODE_WARNING,
            format!("idgen: the system clock {how} by {by_ms} ms"),
            "idgen",
        )
        .set_detail(format!(
            "Snowflake ids keep increasing: within idgen.max_drift_ms ({drift}) the generator stamps ids ahead of the clock; beyond it calls wait up to idgen.max_wait_ms ({} ms) and then fail with SQLSTATE 53400. Regressions since start: {total}.",
            guc::max_wait_ms()
        ))
        .set_hint("Check the time synchronisation of this machine (NTP steps, VM migration).")
        .report(PgLogLevel::WARNING);
    }
}

/// The random sequence start of a new tick (`idgen.sequence_jitter`), below the bound and below
/// the layout's sequence range; 0 when jitter is off.
fn jitter(layout: &Layout) -> u64 {
    let setting = guc::sequence_jitter();
    if setting == 0 {
        return 0;
    }
    let bound = setting.min(layout.max_sequence() + 1);
    if bound <= 1 {
        return 0;
    }
    // SAFETY: PostgreSQL's per-process PRNG, seeded at backend start.
    unsafe { pg_sys::pg_prng_uint64_range(&raw mut pg_sys::pg_global_prng_state, 0, bound - 1) }
}

/// Reservation width in ticks: [`RESERVATION_WINDOW_MS`], at least one tick.
fn window_ticks(layout: &Layout) -> u64 {
    RESERVATION_WINDOW_MS
        .div_ceil(layout.time_unit_ms() as u64)
        .max(1)
}

/// A quarter window: when fewer reserved ticks than this are left, the reservation is extended
/// ahead of need.
fn low_water_ticks(layout: &Layout) -> u64 {
    // Per id: no division at the default 1 ms tick.
    layout.ticks_in_ms(RESERVATION_WINDOW_MS / 4).max(1)
}

/// Makes the durable reservation cover `end_tick`, reading the file first if this is the first
/// use since the server (re)started. `wait`: block on the LWLock (the caller cannot proceed
/// without it); otherwise give up at once if another backend holds it.
#[cold]
#[inline(never)]
fn extend(
    layout: &Layout,
    shared: &SnowflakeShared,
    end_tick: u64,
    now_ms: i64,
    wait: bool,
) -> Result<(), Error> {
    let lock = LOCK.load(Ordering::Acquire);
    // SAFETY: LOCK points into the main LWLock array, set up before any backend exists; nothing
    // between acquire and release raises an error (file errors are values), and an unexpected
    // panic is turned into an ERROR whose cleanup releases every LWLock.
    unsafe {
        if wait {
            pg_sys::LWLockAcquire(lock, pg_sys::LWLockMode::LW_EXCLUSIVE);
        } else if !pg_sys::LWLockConditionalAcquire(lock, pg_sys::LWLockMode::LW_EXCLUSIVE) {
            return Ok(());
        }
    }
    let result = extend_locked(layout, shared, end_tick, now_ms);
    // SAFETY: acquired above.
    unsafe { pg_sys::LWLockRelease(lock) };
    let notes = result?;
    if let Some(by_ms) = notes.regressed_by_ms {
        regression(
            shared,
            by_ms,
            "is behind the time of the last reservation before the restart,",
        );
    }
    if let Some(p) = notes.promoted {
        let file = p.file_timeline.map_or("no reservation file".into(), |t| {
            format!("a reservation file of timeline {t}")
        });
        pgrx::log!(
            "idgen: this server is on timeline {} with {file}: it was promoted or recovered since; snowflake ids start {} ms ahead of the clock, past any id the previous primary can have issued",
            p.timeline,
            p.ahead_ms
        );
        if p.unbounded {
            pgrx::warning!(
                "idgen: with idgen.max_drift_ms = -1 the previous primary may have run further ahead of its clock than this server can tell; give a promoted server its own idgen.worker_id"
            );
        }
    }
    Ok(())
}

/// What reading the reservation file found, to be logged once the LWLock is released.
#[derive(Default)]
struct LoadNotes {
    /// The clock is this far behind the time the stored reservation was written.
    regressed_by_ms: Option<i64>,
    /// The server is on another timeline than the file (or has none past timeline 1).
    promoted: Option<Promotion>,
}

struct Promotion {
    file_timeline: Option<u32>,
    timeline: u32,
    ahead_ms: i64,
    /// This server or the previous primary (as its file says) had no drift bound.
    unbounded: bool,
}

/// How far the clocks of a primary and its standbys may disagree, in ms: a promoted server
/// starts this much (plus `idgen.max_drift_ms`) ahead of its clock.
pub const PROMOTION_CLOCK_SKEW_MS: i64 = 1000;

/// [`extend`] under the LWLock.
///
/// At the first use since start it reads the file and continues after the stored reservation.
/// If the server's timeline differs from the file's (or there is no file past timeline 1), the
/// server was promoted, or recovered to a point in time, since the file was written: the file
/// is the old primary's copy (from `pg_basebackup`) and says nothing of the ids issued after
/// it. The old primary never stamped an id more than `idgen.max_drift_ms` ahead of its clock,
/// so this server starts past its own clock plus that bound plus [`PROMOTION_CLOCK_SKEW_MS`].
fn extend_locked(
    layout: &Layout,
    shared: &SnowflakeShared,
    end_tick: u64,
    now_ms: i64,
) -> Result<LoadNotes, Error> {
    let path = reservation::path_in(&data_dir());
    let mut reserved_end = shared.reserved_end.0.load(Ordering::Acquire);
    let mut notes = LoadNotes::default();
    // SAFETY: only called when not in recovery (reserve checks first).
    let timeline = unsafe { pg_sys::GetWALInsertionTimeLine() };
    if reserved_end == 0 {
        let stored = reservation::read(&path).map_err(file_error)?;
        let file_timeline = stored.as_ref().map(|s| s.timeline);
        if let Some(stored) = &stored {
            if stored.layout != *layout {
                return Err(Error::LayoutChanged {
                    path: path.display().to_string(),
                    stored: describe(&stored.layout),
                    configured: describe(layout),
                });
            }
            // Continue after the stored reservation.
            let resume = stored.reserved_end.min(layout.max_tick() + 1);
            advance_state_to(layout, shared, resume);
            if now_ms < stored.written_at_unix_ms - REGRESSION_TOLERANCE_MS {
                notes.regressed_by_ms = Some(stored.written_at_unix_ms - now_ms);
            }
            reserved_end = resume;
            shared.reserved_end.0.store(resume, Ordering::Release);
        }
        if file_timeline.map_or(timeline > 1, |t| t != timeline) {
            // The larger drift bound of ours and the one the primary recorded in the file: a
            // standby's own idgen.max_drift_ms may be smaller than the primary's.
            let own = guc::max_drift_ms();
            let theirs = stored.and_then(|s| s.max_drift_ms);
            let drift_ms = own.unwrap_or(0).max(theirs.unwrap_or(0).max(0) as u64);
            let floor = reservation::promotion_floor_tick(
                layout,
                now_ms,
                drift_ms,
                PROMOTION_CLOCK_SKEW_MS as u64,
            );
            advance_state_to(layout, shared, floor);
            notes.promoted = Some(Promotion {
                file_timeline,
                timeline,
                ahead_ms: layout.unix_ms_of_tick(floor) - now_ms,
                unbounded: own.is_none() || theirs == Some(-1),
            });
        }
    }
    let low_water = low_water_ticks(layout);
    if end_tick.saturating_add(low_water) < reserved_end {
        return Ok(notes); // covered: another backend extended it, or the file did
    }
    let now_tick = layout.tick_at(now_ms).unwrap_or(0);
    let last_tick = layout.state_tick(shared.state.0.load(Ordering::Acquire));
    let target = end_tick
        .max(now_tick)
        .max(last_tick)
        .saturating_add(window_ticks(layout) + low_water + 1)
        .min(layout.max_tick() + 1);
    if target > reserved_end {
        let stored = Stored {
            reserved_end: target,
            written_at_unix_ms: now_ms,
            timeline,
            max_drift_ms: Some(recorded_drift_ms(layout, end_tick.max(last_tick), now_tick)),
            layout: *layout,
        };
        reservation::write(&path, &stored).map_err(file_error)?;
        shared
            .counters
            .0
            .reservation_writes
            .fetch_add(1, Ordering::Relaxed);
        shared.reserved_end.0.store(target, Ordering::Release);
    }
    Ok(notes)
}

/// The drift bound a reservation file records: `idgen.max_drift_ms` (-1 unbounded), or how far
/// ahead of the clock the generator is (up to `ahead_tick`) if that is more, as after the bound
/// was lowered by a reload while the generator ran ahead.
fn recorded_drift_ms(layout: &Layout, ahead_tick: u64, now_tick: u64) -> i64 {
    let Some(setting) = guc::max_drift_ms() else {
        return -1;
    };
    let ahead_ms = ahead_tick
        .saturating_sub(now_tick)
        .saturating_mul(layout.time_unit_ms() as u64);
    setting.max(ahead_ms).min(i64::MAX as u64) as i64
}

/// Moves the state word so that the next id is at `tick` or later (sequence 0); never back.
fn advance_state_to(layout: &Layout, shared: &SnowflakeShared, tick: u64) {
    if tick > 0 {
        shared
            .state
            .0
            .fetch_max((tick << layout.sequence_bits()) - 1, Ordering::AcqRel);
    }
}

/// How long after the generator's last id the reservation keeper goes on extending the
/// reservation, in ms: a server whose ids stopped stops rewriting the file after this, and its
/// next first id pays the write again.
pub const KEEP_AHEAD_AFTER_USE_MS: u64 = 10 * 60 * 1000;

/// How often the keeper looks, in ms, while the generator is in use: a fifth of the low-water
/// mark, so that it extends the reservation before any caller comes within the low-water mark.
pub const KEEPER_PERIOD_MS: u64 = RESERVATION_WINDOW_MS / 4 / 5;

/// Registers the reservation keeper, a background worker without a database that keeps the
/// durable reservation ahead of the clock while the generator is in use (see [`keep_ahead`]).
/// Called from `_PG_init` in the postmaster; it starts once recovery has finished (a standby
/// issues no ids), and takes one of `max_worker_processes`.
pub fn register_keeper() {
    BackgroundWorkerBuilder::new("idgen reservation keeper")
        .set_type("idgen reservation keeper")
        .set_library("idgen")
        .set_function("idgen_reservation_keeper_main")
        .enable_shmem_access(None)
        .set_start_time(BgWorkerStartTime::RecoveryFinished)
        .set_restart_time(Some(Duration::from_secs(5)))
        .load();
}

/// One look of the reservation keeper: if the generator issued ids since start (the file has
/// been read) and within [`KEEP_AHEAD_AFTER_USE_MS`], and the reservation ends within the
/// low-water mark of the clock, extends it, exactly as a caller would but off the callers'
/// path. Without it, the first id after an idle second waited for the file's write and fsync
/// (2 to 3 ms here), i.e. every insert of a table written less than once a second did. Returns
/// whether the generator is in use (the keeper then looks again soon). Errors are left to the
/// callers, who report them.
pub fn keep_ahead() -> bool {
    let layout = layout();
    let shared = shmem::snowflake();
    if shared.reserved_end.0.load(Ordering::Acquire) == 0 || guc::worker_id().is_none() {
        return false;
    }
    let now_ms = wall_clock_unix_ms();
    let Ok(now_tick) = layout.tick_at(now_ms) else {
        return false;
    };
    let last_tick = layout.state_tick(shared.state.0.load(Ordering::Acquire));
    if now_tick > last_tick.saturating_add(layout.ticks_in_ms(KEEP_AHEAD_AFTER_USE_MS)) {
        return false;
    }
    // The callers' own test (`reserve`), so that the LWLock is taken only when a write is due.
    if now_tick + low_water_ticks(layout) >= shared.reserved_end.0.load(Ordering::Acquire) {
        let _ = extend(layout, shared, now_tick, now_ms, false);
    }
    true
}

/// The data directory (the current directory of every backend, but named explicitly).
fn data_dir() -> std::path::PathBuf {
    // SAFETY: DataDir is set before shared_preload_libraries are loaded and never changes.
    let dir = unsafe { std::ffi::CStr::from_ptr(pg_sys::DataDir) };
    std::path::PathBuf::from(dir.to_string_lossy().into_owned())
}

fn file_error(e: FileError) -> Error {
    match e {
        FileError::Corrupt { path, reason } => Error::ReservationCorrupt {
            path: path.display().to_string(),
            reason,
        },
        io @ FileError::Io { .. } => Error::ReservationIo {
            message: io.to_string(),
        },
    }
}

/// A layout as the settings that make it, for messages.
pub fn describe(layout: &Layout) -> String {
    format!(
        "idgen.epoch = {} ms after 1970, idgen.worker_bits = {}, idgen.sequence_bits = {}, idgen.time_unit_ms = {}",
        layout.epoch_unix_ms(),
        layout.worker_bits(),
        layout.sequence_bits(),
        layout.time_unit_ms()
    )
}

#[cold]
fn exhausted(layout: &Layout, e: LayoutError) -> Error {
    Error::TimeExhausted {
        detail: format!(
            "{e}; the layout's {} time bits of {} ms end at Unix time {} ms.",
            layout.time_bits(),
            layout.time_unit_ms(),
            layout.exhausted_at_unix_ms()
        ),
    }
}

/// This session's last id. Errors with 55000 before the first one, as `currval` does.
pub fn currval() -> Result<i64, Error> {
    match CURRVAL.load(Ordering::Relaxed) {
        NO_CURRVAL => Err(Error::CurrvalNotYetDefined),
        id => Ok(id),
    }
}

/// A snapshot of the shared state for `snowflake_status()`.
pub struct Snapshot {
    /// The last issued state word (0: none yet).
    pub last_state: u64,
    /// The first tick not covered by the reservation file (0: not read since start).
    pub reserved_end: u64,
    /// Ticks borrowed ahead of the wall clock since start.
    pub borrowed_ticks: u64,
    /// Calls that waited for the clock since start.
    pub waits: u64,
    /// Calls that failed because the clock was too far behind (53400) since start.
    pub clock_failures: u64,
    /// Clock regressions seen since start.
    pub regressions: u64,
    /// Reservation file writes since start.
    pub reservation_writes: u64,
    /// The wall clock when the snapshot was taken, Unix ms.
    pub now_unix_ms: i64,
}

/// Reads the shared state without changing it.
pub fn snapshot() -> Snapshot {
    let shared = shmem::snowflake();
    let counters = &shared.counters.0;
    Snapshot {
        last_state: shared.state.0.load(Ordering::Acquire),
        reserved_end: shared.reserved_end.0.load(Ordering::Acquire),
        borrowed_ticks: counters.borrowed_ticks.load(Ordering::Relaxed),
        waits: counters.waits.load(Ordering::Relaxed),
        clock_failures: counters.clock_failures.load(Ordering::Relaxed),
        regressions: counters.regressions.load(Ordering::Relaxed),
        reservation_writes: counters.reservation_writes.load(Ordering::Relaxed),
        now_unix_ms: wall_clock_unix_ms(),
    }
}
