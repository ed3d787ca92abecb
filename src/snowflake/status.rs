//! `snowflake_status()`: one row describing this server's generator, read from shared memory
//! without changing it.

use std::sync::atomic::Ordering;

use idgen_core::snowflake::generator;
use pgrx::datetime::TimestampWithTimeZone;
use pgrx::prelude::*;

use super::decode::tick_start;
use super::shared::{layout, shared};
use crate::error::OrReport;
use crate::time::{unix_ms_to_timestamptz, wall_clock_unix_ms};

/// One row describing this server's generator:
///
/// * `worker_id` (NULL while unset); the layout: `id_bits` (every id is below `2^id_bits`),
///   bits per field (`time_bits` is what `worker_bits` and `sequence_bits` leave of `id_bits`),
///   `time_unit_ms`, `epoch`, and `exhausted_at`, when the time field runs out;
/// * `last_id` (NULL before the first since start) and `last_tick_at`, its tick's time;
/// * `drift_ms`: how far the last tick is ahead of the wall clock (0 when behind);
/// * `borrowed_ticks`, `waits` (calls that waited for the clock), `clock_failures` (calls that
///   failed with 53400) and `clock_regressions`, counted since start;
/// * `reserved_tick` and `reserved_until`: the last tick the durable reservation covers and the
///   end of that tick (NULL until the first call since start has read the file), and
///   `reservation_writes`, the file writes since start.
// The return type is the SQL signature: pgrx reads the column names from `name!` in place,
// so it cannot be a type alias.
#[allow(clippy::type_complexity)]
#[pg_extern(volatile, parallel_safe)]
fn snowflake_status() -> TableIterator<
    'static,
    (
        name!(worker_id, Option<i32>),
        name!(id_bits, i32),
        name!(time_bits, i32),
        name!(worker_bits, i32),
        name!(sequence_bits, i32),
        name!(time_unit_ms, i32),
        name!(epoch, TimestampWithTimeZone),
        name!(exhausted_at, Option<TimestampWithTimeZone>),
        name!(last_id, Option<i64>),
        name!(last_tick_at, Option<TimestampWithTimeZone>),
        name!(drift_ms, i64),
        name!(borrowed_ticks, i64),
        name!(waits, i64),
        name!(clock_failures, i64),
        name!(clock_regressions, i64),
        name!(reserved_tick, Option<i64>),
        name!(reserved_until, Option<TimestampWithTimeZone>),
        name!(reservation_writes, i64),
    ),
> {
    let layout = layout();
    let worker = super::lease::known_worker_id();
    let snap = snapshot();
    let issued = snap.last_state != 0;
    let last_tick = layout.state_tick(snap.last_state);
    let last_id = worker
        .filter(|_| issued)
        .and_then(|w| layout.id_from_state(snap.last_state, w).ok());
    let drift_ms = match layout.tick_at(snap.now_unix_ms) {
        Ok(now_tick) => {
            generator::drift_ticks(layout, snap.last_state, now_tick) * layout.time_unit_ms() as u64
        }
        Err(_) => 0, // the clock is outside the layout: nextval reports that itself
    };
    let reserved = (snap.reserved_end > 0).then_some(snap.reserved_end);
    TableIterator::once((
        worker.map(|w| w as i32),
        layout.id_bits() as i32,
        layout.time_bits() as i32,
        layout.worker_bits() as i32,
        layout.sequence_bits() as i32,
        layout.time_unit_ms() as i32,
        unix_ms_to_timestamptz(layout.epoch_unix_ms()).or_report(),
        unix_ms_to_timestamptz(layout.exhausted_at_unix_ms()).ok(),
        last_id,
        issued.then(|| tick_start(layout, last_tick).ok()).flatten(),
        drift_ms as i64,
        snap.borrowed_ticks as i64,
        snap.waits as i64,
        snap.clock_failures as i64,
        snap.regressions as i64,
        reserved.map(|end| end as i64 - 1),
        reserved.and_then(|end| tick_start(layout, end).ok()),
        snap.reservation_writes as i64,
    ))
}

/// A snapshot of the shared state for `snowflake_status()`.
struct Snapshot {
    /// The last issued state word (0: none yet).
    last_state: u64,
    /// The first tick not covered by the reservation file (0: not read since start).
    reserved_end: u64,
    /// Ticks borrowed ahead of the wall clock since start.
    borrowed_ticks: u64,
    /// Calls that waited for the clock since start.
    waits: u64,
    /// Calls that failed because the clock was too far behind (53400) since start.
    clock_failures: u64,
    /// Clock regressions seen since start.
    regressions: u64,
    /// Reservation file writes since start.
    reservation_writes: u64,
    /// The wall clock when the snapshot was taken, Unix ms.
    now_unix_ms: i64,
}

/// Reads the shared state without changing it.
fn snapshot() -> Snapshot {
    let shared = shared();
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
