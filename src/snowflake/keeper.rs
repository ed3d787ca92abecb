//! The reservation keeper: a background worker without a database, one per server, that keeps
//! the durable reservation ahead of the clock while the generator is in use, so that no caller
//! waits for the file's write and fsync; and watches the kernel's clocksource (DESIGN.md §1).

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use pgrx::bgworkers::{BackgroundWorkerBuilder, BgWorkerStartTime};
use pgrx::pg_sys;
use pgrx::prelude::*;

use super::durable::{extend, low_water_ticks, RESERVATION_WINDOW_MS};
use super::shared::{layout, shared};
use super::watch::watch_clocksource;
use crate::worker::{self, Sigint, Sigterm};

/// How long after the generator's last id the reservation keeper goes on extending the
/// reservation, in ms: a server whose ids stopped stops rewriting the file after this, and its
/// next first id pays the write again.
const KEEP_AHEAD_AFTER_USE_MS: u64 = 10 * 60 * 1000;

/// How often the keeper looks, in ms, while the generator is in use: a fifth of the low-water
/// mark, so that it extends the reservation before any caller comes within the low-water mark.
const KEEPER_PERIOD_MS: u64 = RESERVATION_WINDOW_MS / 4 / 5;

/// Registers the reservation keeper, a background worker without a database that keeps the
/// durable reservation ahead of the clock while the generator is in use (see [`keep_ahead`]).
/// Called from `_PG_init` in the postmaster; it starts once recovery has finished (a standby
/// issues no ids), and takes one of `max_worker_processes`.
pub(crate) fn register() {
    BackgroundWorkerBuilder::new("idgen reservation keeper")
        .set_type("idgen reservation keeper")
        .set_library("idgen")
        .set_function("idgen_reservation_keeper_main")
        .enable_shmem_access(None)
        .set_start_time(BgWorkerStartTime::RecoveryFinished)
        .set_restart_time(Some(Duration::from_secs(5)))
        .load();
}

/// Entry point of the reservation keeper (registered by [`register`]): looks every
/// [`KEEPER_PERIOD_MS`] while the generator is in use, every second otherwise, and extends the
/// durable reservation before a caller would have to ([`keep_ahead`]). No database connection:
/// it only touches shared memory and the file.
///
/// SIGTERM is a flag ([`Sigterm::Flag`]), not `die`: the keeper returns at its next wakeup,
/// never in the middle of a look, and a worker that returns exits with 0, which the postmaster
/// does not restart (after a `kill -TERM` too); the callers then extend the reservation
/// themselves. SIGHUP reloads the configuration (`idgen.max_drift_ms`) between looks.
// SAFETY: called by PostgreSQL's background worker machinery (bgworker_main) in a new process
// attached to shared memory, with signals blocked until install_signal_handlers unblocks them;
// #[pg_guard] turns a Rust panic into a PostgreSQL ERROR (the worker exits, and is restarted).
#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn idgen_reservation_keeper_main(_arg: pg_sys::Datum) {
    worker::install_signal_handlers(Sigterm::Flag, Sigint::Unchanged);
    let mut period = Duration::from_secs(1);
    let mut watched = Instant::now();
    loop {
        worker::wait(period);
        if worker::terminating() {
            return;
        }
        if watched.elapsed() >= Duration::from_secs(1) {
            watch_clocksource();
            watched = Instant::now();
        }
        worker::reload_if_pending();
        let active = !crate::recovery::in_progress() && keep_ahead();
        period = if active {
            Duration::from_millis(KEEPER_PERIOD_MS)
        } else {
            Duration::from_secs(1)
        };
    }
}

/// One look of the reservation keeper: if the generator issued ids since start (the file has
/// been read) and within [`KEEP_AHEAD_AFTER_USE_MS`], and the reservation ends within the
/// low-water mark of the clock, extends it, exactly as a caller would but off the callers'
/// path. Without it, the first id after an idle second waited for the file's write and fsync
/// (2 to 3 ms here), i.e. every insert of a table written less than once a second did. Returns
/// whether the generator is in use (the keeper then looks again soon). Errors are left to the
/// callers, who report them.
fn keep_ahead() -> bool {
    let layout = layout();
    let shared = shared();
    if shared.reserved_end.0.load(Ordering::Acquire) == 0
        || super::lease::known_worker_id().is_none()
    {
        return false;
    }
    let now_ms = crate::time::wall_clock_unix_ms();
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
