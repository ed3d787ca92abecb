//! The server's generator: the layout fixed at start, the wall clock, the shared state word, and
//! this session's `snowflake_currval`.
//!
//! Shared state (the state word) is in shared memory and advanced with atomics only; the hot
//! path takes no LWLock. Session state (`currval`) is a process static behind a `parking_lot`
//! mutex, which no other process ever sees (DESIGN.md §3).

use std::sync::atomic::Ordering;
use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use pgrx::pg_sys;

use super::generator::{self, Reservation};
use super::layout::{Layout, LayoutError};
use crate::error::Error;
use crate::{guc, shmem};

/// The layout, built once from the settings in the postmaster and inherited by every backend.
static LAYOUT: OnceLock<Layout> = OnceLock::new();

/// The last id this session drew, for `snowflake_currval()`.
static CURRVAL: Mutex<Option<i64>> = Mutex::new(None);

/// Builds the layout from the settings. Called from `_PG_init` after `guc::init`, in the
/// postmaster (idgen refuses to load anywhere else); an unusable layout stops the server.
pub fn init() {
    LAYOUT.get_or_init(|| configured().unwrap_or_else(|e| Error::from(e).report()));
}

/// The layout the settings describe: `idgen.epoch` with Twitter's widths (41 | 10 | 12, 1 ms).
fn configured() -> Result<Layout, LayoutError> {
    let twitter = Layout::default();
    Layout::new(
        guc::epoch_unix_ms(),
        twitter.worker_bits(),
        twitter.sequence_bits(),
        twitter.time_unit_ms(),
    )
}

/// The server's layout, built by [`init`] in the postmaster and inherited by every backend.
pub fn layout() -> &'static Layout {
    LAYOUT.get().expect("the layout is built in _PG_init")
}

/// The wall clock in Unix milliseconds (negative before 1970).
pub fn wall_clock_unix_ms() -> i64 {
    match SystemTime::now().duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_millis() as i64,
        Err(e) => -(e.duration().as_millis() as i64),
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

/// Reserves `count >= 1` consecutive ids. Sets this session's `currval` to the last id.
///
/// Errors: 55000 when `idgen.worker_id` is unset, 25006 during recovery, 22008 when the clock
/// reads before the epoch, 2200H when the layout has run out of time.
pub fn reserve(count: u64) -> Result<Drawn, Error> {
    let worker = guc::worker_id().ok_or(Error::WorkerIdNotSet)?;
    // SAFETY: RecoveryInProgress reads shared memory that exists in every backend; once it has
    // returned false it only reads a process-local flag.
    if unsafe { pg_sys::RecoveryInProgress() } {
        return Err(Error::InRecovery);
    }
    let layout = layout();
    let now_tick = match layout.tick_at(wall_clock_unix_ms()) {
        Ok(tick) => tick,
        Err(LayoutError::BeforeEpoch { ms }) => return Err(Error::ClockBeforeEpoch { ms }),
        Err(e) => return Err(exhausted(layout, e)),
    };
    let shared = shmem::snowflake();
    let r = generator::reserve(layout, &shared.state.0, now_tick, count)
        .map_err(|e| exhausted(layout, e))?;
    if r.borrowed_ticks > 0 {
        shared
            .borrowed_ticks
            .0
            .fetch_add(r.borrowed_ticks, Ordering::Relaxed);
    }
    let last_id = layout
        .id_from_state(r.last, worker)
        .map_err(|e| exhausted(layout, e))?;
    *CURRVAL.lock() = Some(last_id);
    Ok(Drawn {
        reservation: r,
        worker,
        last_id,
    })
}

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
    CURRVAL.lock().ok_or(Error::CurrvalNotYetDefined)
}

/// A snapshot of the shared state for `snowflake_status()`.
pub struct Snapshot {
    /// The last issued state word (0: none yet).
    pub last_state: u64,
    /// Ticks borrowed ahead of the wall clock since start.
    pub borrowed_ticks: u64,
    /// The wall clock when the snapshot was taken, Unix ms.
    pub now_unix_ms: i64,
}

/// Reads the shared state without changing it.
pub fn snapshot() -> Snapshot {
    let shared = shmem::snowflake();
    Snapshot {
        last_state: shared.state.0.load(Ordering::Acquire),
        borrowed_ticks: shared.borrowed_ticks.0.load(Ordering::Relaxed),
        now_unix_ms: wall_clock_unix_ms(),
    }
}
