//! The Snowflake generator: one 64-bit state word advanced by compare-and-swap. No pgrx.
//!
//! The word holds the last issued `(tick, sequence)` as a [state word](super::layout). A caller
//! reserves `count` consecutive state words with
//!
//! ```text
//!   first = max(now_tick << sequence_bits, last + 1);   last' = first + count - 1
//! ```
//!
//! and publishes `last'` with one CAS (DESIGN.md §1). Every caller of one server goes through the
//! same word, so ids are strictly increasing across all backends; a sequence overflow carries into
//! the next tick ("borrows" it) instead of waiting; a clock that steps back is absorbed the same
//! way. Unlike pgEdge snowflake's per-backend state, nothing here is per process.

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
/// Errors with [`LayoutError::TimeExhausted`] when the reservation would pass the layout's last
/// tick; nothing is reserved then.
pub fn plan(
    layout: &Layout,
    last: u64,
    now_tick: u64,
    count: u64,
) -> Result<Reservation, LayoutError> {
    debug_assert!(count >= 1);
    let max_tick = layout.max_tick();
    if now_tick > max_tick {
        return Err(LayoutError::TimeExhausted {
            tick: now_tick,
            max: max_tick,
        });
    }
    let first = (now_tick << layout.sequence_bits()).max(last.saturating_add(1));
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

/// Reserves `count >= 1` consecutive state words from the shared `word`: lock-free, one CAS in
/// the uncontended case, retried with the fresh value when another backend won the race.
///
/// The wall-clock tick is read once, before the loop: a caller that loses the race only ever
/// moves further ahead of it, so there is no need to read the clock again.
pub fn reserve(
    layout: &Layout,
    word: &AtomicU64,
    now_tick: u64,
    count: u64,
) -> Result<Reservation, LayoutError> {
    let mut last = word.load(Ordering::Relaxed);
    loop {
        let r = plan(layout, last, now_tick, count)?;
        // Uniqueness needs only the total order of read-modify-writes on this one word.
        match word.compare_exchange_weak(last, r.last, Ordering::AcqRel, Ordering::Relaxed) {
            Ok(_) => return Ok(r),
            Err(seen) => last = seen,
        }
    }
}

/// Drift, in ticks: how far the generator's last tick is ahead of the wall-clock tick (0 when it
/// is behind, i.e. idle). `last` is the shared state word, `now_tick` the wall clock's tick.
pub fn drift_ticks(layout: &Layout, last: u64, now_tick: u64) -> u64 {
    layout.state_tick(last).saturating_sub(now_tick)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::sync::Arc;

    fn l() -> Layout {
        Layout::default()
    }

    #[test]
    fn first_id_of_a_fresh_tick_has_sequence_zero() {
        let r = plan(&l(), 0, 100, 1).unwrap();
        assert_eq!((r.first, r.last), (l().state(100, 0), l().state(100, 0)));
        assert_eq!(r.borrowed_ticks, 0);
    }

    #[test]
    fn same_tick_continues_the_sequence() {
        let last = l().state(100, 7);
        let r = plan(&l(), last, 100, 1).unwrap();
        assert_eq!(r.first, l().state(100, 8));
    }

    #[test]
    fn sequence_overflow_borrows_the_next_tick() {
        let last = l().state(100, 4095);
        let r = plan(&l(), last, 100, 1).unwrap();
        assert_eq!(r.first, l().state(101, 0));
        assert_eq!(r.borrowed_ticks, 1);
        // Once the tick is borrowed, further ids in it borrow nothing new.
        let r2 = plan(&l(), r.last, 100, 1).unwrap();
        assert_eq!(r2.borrowed_ticks, 0);
        // When the clock reaches that tick, nothing is borrowed either.
        let r3 = plan(&l(), r.last, 101, 1).unwrap();
        assert_eq!((r3.first, r3.borrowed_ticks), (l().state(101, 1), 0));
    }

    #[test]
    fn clock_behind_the_last_tick_never_goes_back() {
        let last = l().state(500, 3);
        let r = plan(&l(), last, 400, 1).unwrap();
        assert_eq!(r.first, l().state(500, 4));
    }

    #[test]
    fn a_batch_spans_ticks_and_counts_what_it_borrows() {
        let r = plan(&l(), 0, 10, 3 * 4096 + 1).unwrap();
        assert_eq!(r.first, l().state(10, 0));
        assert_eq!(r.last, l().state(13, 0));
        assert_eq!(r.borrowed_ticks, 3);
    }

    #[test]
    fn reservations_past_the_last_tick_fail_and_reserve_nothing() {
        let max = l().max_tick();
        let last = l().state(max, 4094);
        assert_eq!(plan(&l(), last, max, 1).unwrap().last, l().state(max, 4095));
        assert!(matches!(
            plan(&l(), last, max, 2),
            Err(LayoutError::TimeExhausted { .. })
        ));
        assert!(matches!(
            plan(&l(), 0, max + 1, 1),
            Err(LayoutError::TimeExhausted { .. })
        ));
        assert!(matches!(
            plan(&l(), u64::MAX - 1, 0, 5),
            Err(LayoutError::TimeExhausted { .. })
        ));

        let word = AtomicU64::new(last);
        assert!(reserve(&l(), &word, max, 2).is_err());
        assert_eq!(
            word.load(Ordering::Relaxed),
            last,
            "a failed reservation must not move the word"
        );
    }

    #[test]
    fn drift_counts_ticks_ahead_of_the_clock_only() {
        let last = l().state(1_000, 17);
        assert_eq!(drift_ticks(&l(), last, 990), 10);
        assert_eq!(drift_ticks(&l(), last, 1_000), 0);
        assert_eq!(drift_ticks(&l(), last, 5_000), 0);
    }

    #[test]
    fn reserve_publishes_the_last_state_word() {
        let word = AtomicU64::new(0);
        let r = reserve(&l(), &word, 7, 10).unwrap();
        assert_eq!(word.load(Ordering::Relaxed), r.last);
        assert_eq!(r.last - r.first, 9);
        let r2 = reserve(&l(), &word, 7, 1).unwrap();
        assert_eq!(r2.first, r.last + 1);
    }

    /// Eight threads hammer one word with a frozen clock, so every id after the first 4096 is a
    /// borrowed tick and the CAS is contended on every call: all ids distinct, each thread's
    /// increasing, and nothing skipped (the word advances by exactly what was handed out).
    #[test]
    fn concurrent_reservations_are_unique_and_increasing() {
        const THREADS: usize = 8;
        const PER_THREAD: usize = 20_000;
        let layout = l();
        let word = Arc::new(AtomicU64::new(0));
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let word = Arc::clone(&word);
                std::thread::spawn(move || {
                    let mut ids = Vec::with_capacity(PER_THREAD);
                    for i in 0..PER_THREAD {
                        let count = if (i + t) % 10 == 0 { 3 } else { 1 };
                        let r = reserve(&layout, &word, 1_000, count).unwrap();
                        for s in r.first..=r.last {
                            ids.push(layout.id_from_state(s, 5).unwrap());
                        }
                    }
                    ids
                })
            })
            .collect();
        let mut all = HashSet::new();
        let mut total = 0u64;
        for h in handles {
            let ids = h.join().unwrap();
            assert!(
                ids.windows(2).all(|w| w[0] < w[1]),
                "a thread's ids must increase"
            );
            total += ids.len() as u64;
            all.extend(ids);
        }
        assert_eq!(all.len() as u64, total, "duplicate ids");
        let first = layout.state(1_000, 0);
        assert_eq!(word.load(Ordering::Relaxed), first + total - 1);
    }
}
