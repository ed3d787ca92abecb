//! The Snowflake generator: one 64-bit state word advanced by compare-and-swap.
//!
//! The word holds the last issued `(tick, sequence)` as a [state word](mod@super::layout). A caller
//! reserves `count` consecutive state words with
//!
//! ```text
//!   first = max(now_tick << sequence_bits | jitter, last + 1);   last' = first + count - 1
//! ```
//!
//! and publishes `last'` with one CAS (DESIGN.md §1). Every caller of one server goes through the
//! same word, so ids are strictly increasing across all backends; a sequence overflow carries into
//! the next tick ("borrows" it) instead of waiting; a clock that steps back is absorbed the same
//! way. Unlike pgEdge snowflake's per-backend state, nothing here is per process.
//!
//! Two [`Limits`] bound what may be published, checked before the CAS so that a refused
//! reservation changes nothing: the *drift* bound (how many ticks ahead of the wall clock the
//! last id may be, `idgen.max_drift_ms`) and the *reserved end* (the first tick not yet covered
//! by the durable reservation file, DESIGN.md §1 "Surviving restarts and crashes").

use std::sync::atomic::{AtomicU64, Ordering};

use super::layout::{Layout, LayoutError};

/// A reservation of the state words `first..=last`, all unissued before the CAS that made it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reservation {
    /// First reserved state word.
    pub first: u64,
    /// Last reserved state word; the shared word now holds it.
    pub last: u64,
    /// Ticks ahead of the wall clock that this reservation entered for the first time
    /// (sequence overflow or clock behind): the `borrowed_ticks` counter of `snowflake_status()`.
    pub borrowed_ticks: u64,
}

/// What the next reservation of `count >= 1` state words would be, given the last issued state
/// word and the current wall-clock tick. Pure: the CAS in [`reserve`] publishes it.
///
/// `jitter` (below `2^sequence_bits`) is where the sequence starts when the reservation opens a
/// new wall-clock tick, as Leaf's random sequence start; 0 for Twitter's behaviour. A
/// continuation of the last tick (or a borrowed tick) never jumps: it is `last + 1`.
///
/// Errors with [`LayoutError::TimeExhausted`] when the reservation would pass the layout's last
/// tick; nothing is reserved then.
pub fn plan(
    layout: &Layout,
    last: u64,
    now_tick: u64,
    count: u64,
    jitter: u64,
) -> Result<Reservation, LayoutError> {
    debug_assert!(count >= 1);
    debug_assert!(jitter <= layout.max_sequence());
    let max_tick = layout.max_tick();
    if now_tick > max_tick {
        return Err(LayoutError::TimeExhausted {
            tick: now_tick,
            max: max_tick,
        });
    }
    let first = if now_tick > layout.state_tick(last) {
        layout.state(now_tick, jitter)
    } else {
        last.saturating_add(1)
    };
    let end = first
        .checked_add(count - 1)
        .filter(|end| layout.state_tick(*end) <= max_tick);
    let Some(end) = end else {
        let tick = layout.state_tick(first.saturating_add(count - 1));
        return Err(LayoutError::TimeExhausted {
            tick: tick.max(max_tick + 1),
            max: max_tick,
        });
    };
    // Ticks newly entered by this reservation that are ahead of the wall clock.
    let end_tick = layout.state_tick(end);
    let already = layout.state_tick(last).max(now_tick);
    Ok(Reservation {
        first,
        last: end,
        borrowed_ticks: end_tick.saturating_sub(already),
    })
}

/// The bounds a reservation must stay within to be published.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The most ticks the last reserved id may be ahead of the wall-clock tick; `None` is
    /// unbounded (`idgen.max_drift_ms = -1`).
    pub max_ahead_ticks: Option<u64>,
    /// The first tick not covered by the durable reservation: no id at or beyond it may be
    /// issued. 0 before the reservation file has been read.
    pub reserved_end: u64,
}

/// What [`reserve`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The reservation was published.
    Issued(Reservation),
    /// Refused, nothing published: the last id would be `ahead_ticks` ahead of the wall clock,
    /// more than [`Limits::max_ahead_ticks`]. The caller waits for the clock or fails.
    TooFarAhead {
        /// Ticks between the wall clock and the last id of the refused reservation.
        ahead_ticks: u64,
        /// The refused reservation's last tick.
        end_tick: u64,
    },
    /// Refused, nothing published: the last id's tick is not below [`Limits::reserved_end`].
    /// The caller extends the durable reservation first.
    BeyondReservation {
        /// The refused reservation's last tick.
        end_tick: u64,
    },
}

/// Reserves `count >= 1` consecutive state words from the shared `word` within `limits`:
/// lock-free, one CAS in the uncontended case, retried with the fresh value when another
/// backend won the race. A refused reservation publishes nothing.
///
/// The wall-clock tick is read once, before the loop: a caller that loses the race only ever
/// moves further ahead of it, so there is no need to read the clock again.
///
/// A reservation that opens a new tick starts its sequence at `jitter` only as far as the drift
/// bound leaves room for `count` ids (see [`jitter_room`]): from an idle generator, a batch of
/// up to [`max_batch`] is always issued, never refused as too far ahead.
///
/// Always inlined: it is the per-id path, and as a call of its own it cost 47 instructions an
/// id more (callgrind, 200,000 ids).
#[inline(always)]
pub fn reserve(
    layout: &Layout,
    word: &AtomicU64,
    now_tick: u64,
    count: u64,
    jitter: u64,
    limits: Limits,
) -> Result<Outcome, LayoutError> {
    // Out of line, and skipped without jitter (the default): the per-id path stays small.
    let jitter = if jitter == 0 {
        0
    } else {
        fitted_jitter(layout, count, jitter, limits.max_ahead_ticks)
    };
    let mut last = word.load(Ordering::Relaxed);
    loop {
        let r = plan(layout, last, now_tick, count, jitter)?;
        let end_tick = layout.state_tick(r.last);
        let ahead_ticks = end_tick.saturating_sub(now_tick);
        if limits.max_ahead_ticks.is_some_and(|max| ahead_ticks > max) {
            return Ok(Outcome::TooFarAhead {
                ahead_ticks,
                end_tick,
            });
        }
        if end_tick >= limits.reserved_end {
            return Ok(Outcome::BeyondReservation { end_tick });
        }
        // Uniqueness needs only the total order of read-modify-writes on this one word.
        match word.compare_exchange_weak(last, r.last, Ordering::AcqRel, Ordering::Relaxed) {
            Ok(_) => return Ok(Outcome::Issued(r)),
            Err(seen) => last = seen,
        }
    }
}

/// The most ticks ahead of the clock that `max_drift_ms` allows (`None`: unbounded).
pub fn max_ahead_ticks(layout: &Layout, max_drift_ms: Option<u64>) -> Option<u64> {
    max_drift_ms.map(|ms| layout.ticks_in_ms(ms))
}

/// `jitter`, lowered to [`jitter_room`].
#[inline(never)]
fn fitted_jitter(layout: &Layout, count: u64, jitter: u64, max_ahead_ticks: Option<u64>) -> u64 {
    jitter.min(jitter_room(layout, count, max_ahead_ticks))
}

/// The highest sequence a reservation of `count` ids may start a new wall-clock tick at and
/// still end within `max_ahead_ticks` of it: the ids of the `max_ahead_ticks + 1` ticks from
/// the clock's on, less `count` (unbounded: `u64::MAX`).
///
/// The jitter (`idgen.sequence_jitter`) spreads the *first* id of a tick over `id % N` shards;
/// a batch that fills ticks has nothing to spread, and starting it high would push its last id
/// one tick past the drift bound: [`max_batch`] ids would then be refused (53400, or a wait for
/// the clock) from an idle generator whenever the jitter is not 0. A single id always has room
/// for any jitter below `2^sequence_bits`.
pub fn jitter_room(layout: &Layout, count: u64, max_ahead_ticks: Option<u64>) -> u64 {
    match max_ahead_ticks {
        None => u64::MAX,
        Some(ticks) => ticks
            .saturating_add(1)
            .saturating_mul(layout.max_sequence() + 1)
            .saturating_sub(count),
    }
}

/// The largest `count` one reservation may take: a second's worth of ids, and no more ticks than
/// the drift bound allows even from an idle generator (else the call could never be served).
/// It does not depend on `idgen.sequence_jitter`: [`reserve`] starts a batch low enough
/// ([`jitter_room`]) for it to fit.
pub fn max_batch(layout: &Layout, max_ahead_ticks: Option<u64>) -> u64 {
    let per_second = layout.ids_per_second();
    match max_ahead_ticks {
        None => per_second,
        Some(ticks) => {
            let ticks = ticks.saturating_add(1).min(layout.max_tick());
            per_second.min(ticks.saturating_mul(layout.max_sequence() + 1))
        }
    }
}

/// Drift, in ticks: how far the generator's last tick is ahead of the wall-clock tick (0 when it
/// is behind, i.e. idle). `last` is the shared state word, `now_tick` the wall clock's tick.
pub fn drift_ticks(layout: &Layout, last: u64, now_tick: u64) -> u64 {
    layout.state_tick(last).saturating_sub(now_tick)
}

#[cfg(test)]
mod tests;
