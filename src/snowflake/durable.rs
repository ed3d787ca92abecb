//! The durable reservation: the file in the data directory that records the first tick no id
//! of this server has reached (format in [`super::reservation`]), read at the first use after a
//! start and extended about a second ahead of need, under the LWLock `idgen_snowflake`, by
//! whichever caller (or the reservation keeper) needs it. No id at or beyond the reserved end is
//! issued, so a restart, a crash or a clock that stepped back never repeats an id; a promoted
//! standby starts past anything its old primary can have issued (DESIGN.md §1).

use std::sync::atomic::Ordering;

use idgen_core::snowflake::layout::Layout;
use idgen_core::snowflake::reservation::{self, FileError, Stored};
use pgrx::pg_sys;

use super::shared::{advance_state_to, raise_head_start, SnowflakeShared, RESERVATION_LOCK};
use super::watch::{regression, REGRESSION_TOLERANCE_MS};
use crate::error::Error;
use crate::guc;

/// How far ahead of need the reservation is extended, in ms: "about a second" (DESIGN.md §1).
pub(crate) const RESERVATION_WINDOW_MS: u64 = 1000;

/// Reservation width in ticks: [`RESERVATION_WINDOW_MS`], at least one tick.
fn window_ticks(layout: &Layout) -> u64 {
    RESERVATION_WINDOW_MS
        .div_ceil(layout.time_unit_ms() as u64)
        .max(1)
}

/// A quarter window: when fewer reserved ticks than this are left, the reservation is extended
/// ahead of need.
pub(crate) fn low_water_ticks(layout: &Layout) -> u64 {
    // Per id: no division at the default 1 ms tick.
    layout.ticks_in_ms(RESERVATION_WINDOW_MS / 4).max(1)
}

/// Makes the durable reservation cover `end_tick`, reading the file first if this is the first
/// use since the server (re)started. `wait`: block on the LWLock (the caller cannot proceed
/// without it); otherwise give up at once if another backend holds it.
#[cold]
#[inline(never)]
pub(crate) fn extend(
    layout: &Layout,
    shared: &SnowflakeShared,
    end_tick: u64,
    now_ms: i64,
    wait: bool,
) -> Result<(), Error> {
    let guard = if wait {
        RESERVATION_LOCK.exclusive()
    } else {
        match RESERVATION_LOCK.try_exclusive() {
            Some(guard) => guard,
            None => return Ok(()),
        }
    };
    // Nothing under the lock raises an error (file errors are values); an unexpected panic
    // becomes an ERROR whose cleanup releases every LWLock.
    let result = extend_locked(layout, shared, end_tick, now_ms);
    drop(guard);
    let notes = result?;
    if let Some(fence_end) = notes.fenced {
        return Err(super::lease::fenced(layout, fence_end));
    }
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
    /// The reservation would reach the registry's fence, this first unconfirmed tick.
    fenced: Option<u64>,
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
pub(crate) const PROMOTION_CLOCK_SKEW_MS: i64 = 1000;

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
    let path = reservation::path_in(&crate::backend::data_dir());
    let mut reserved_end = shared.reserved_end.0.load(Ordering::Acquire);
    let mut notes = LoadNotes::default();
    // SAFETY: GetWALInsertionTimeLine reads shared memory and requires that recovery has ended;
    // both callers of `extend` check that first (`issue::reserve` per call, the keeper per look).
    let timeline = unsafe { pg_sys::GetWALInsertionTimeLine() };
    if reserved_end == 0 {
        let stored = reservation::read(&path).map_err(file_error)?;
        let file_timeline = stored.as_ref().map(|s| s.timeline);
        if let Some(stored) = &stored {
            if !stored.layout.counts_ticks_as(layout) {
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
            raise_head_start(shared, floor);
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
    // Never past the registry's fence (DESIGN.md §6): ids stay below the bound it recorded.
    let fence_end = super::lease::fence_end();
    if end_tick >= fence_end {
        notes.fenced = Some(fence_end);
        return Ok(notes);
    }
    let now_tick = layout.tick_at(now_ms).unwrap_or(0);
    let last_tick = layout.state_tick(shared.state.0.load(Ordering::Acquire));
    let target = end_tick
        .max(now_tick)
        .max(last_tick)
        .saturating_add(window_ticks(layout) + low_water + 1)
        .min(layout.max_tick() + 1)
        .min(fence_end);
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
pub(crate) fn describe(layout: &Layout) -> String {
    format!(
        "idgen.epoch = {} ms after 1970, idgen.worker_bits = {}, idgen.sequence_bits = {}, idgen.time_unit_ms = {}",
        layout.epoch_unix_ms(),
        layout.worker_bits(),
        layout.sequence_bits(),
        layout.time_unit_ms()
    )
}
