//! Tests of the generator: the arithmetic of reservations, jitter and batches, property tests
//! over layouts, and racing threads on one state word.

use super::*;
use std::collections::HashSet;
use std::sync::Arc;

fn l() -> Layout {
    Layout::default()
}

/// No drift bound, everything reserved.
const OPEN: Limits = Limits {
    max_ahead_ticks: None,
    reserved_end: u64::MAX,
};

fn issued(outcome: Outcome) -> Reservation {
    match outcome {
        Outcome::Issued(r) => r,
        other => panic!("expected an issued reservation, got {other:?}"),
    }
}

#[test]
fn first_id_of_a_fresh_tick_has_sequence_zero() {
    let r = plan(&l(), 0, 100, 1, 0).unwrap();
    assert_eq!((r.first, r.last), (l().state(100, 0), l().state(100, 0)));
    assert_eq!(r.borrowed_ticks, 0);
}

#[test]
fn same_tick_continues_the_sequence() {
    let last = l().state(100, 7);
    let r = plan(&l(), last, 100, 1, 0).unwrap();
    assert_eq!(r.first, l().state(100, 8));
}

#[test]
fn sequence_overflow_borrows_the_next_tick() {
    let last = l().state(100, 4095);
    let r = plan(&l(), last, 100, 1, 0).unwrap();
    assert_eq!(r.first, l().state(101, 0));
    assert_eq!(r.borrowed_ticks, 1);
    // Once the tick is borrowed, further ids in it borrow nothing new.
    let r2 = plan(&l(), r.last, 100, 1, 0).unwrap();
    assert_eq!(r2.borrowed_ticks, 0);
    // When the clock reaches that tick, nothing is borrowed either.
    let r3 = plan(&l(), r.last, 101, 1, 0).unwrap();
    assert_eq!((r3.first, r3.borrowed_ticks), (l().state(101, 1), 0));
}

#[test]
fn clock_behind_the_last_tick_never_goes_back() {
    let last = l().state(500, 3);
    let r = plan(&l(), last, 400, 1, 0).unwrap();
    assert_eq!(r.first, l().state(500, 4));
}

#[test]
fn a_batch_spans_ticks_and_counts_what_it_borrows() {
    let r = plan(&l(), 0, 10, 3 * 4096 + 1, 0).unwrap();
    assert_eq!(r.first, l().state(10, 0));
    assert_eq!(r.last, l().state(13, 0));
    assert_eq!(r.borrowed_ticks, 3);
}

/// A 53-bit layout (README, "Ids for JavaScript") runs out at its own last tick: the batch that
/// would pass it is refused whole, and the last id issued is 2^53 - 1.
#[test]
fn a_53_bit_layout_stops_at_its_last_tick() {
    let l = Layout::within(53, 0, 6, 6, 1).unwrap();
    let max = l.max_tick();
    let last = l.state(max, 62);
    let word = AtomicU64::new(last);
    let r = issued(reserve(&l, &word, max, 1, 0, OPEN).unwrap());
    assert_eq!(l.id_from_state(r.last, 63), Ok((1 << 53) - 1));
    assert!(matches!(
        reserve(&l, &word, max, 1, 0, OPEN),
        Err(LayoutError::TimeExhausted { .. })
    ));
    assert!(matches!(
        plan(&l, 0, max + 1, 1, 0),
        Err(LayoutError::TimeExhausted { .. })
    ));
    assert_eq!(word.load(Ordering::Relaxed), l.state(max, 63));
}

#[test]
fn reservations_past_the_last_tick_fail_and_reserve_nothing() {
    let max = l().max_tick();
    let last = l().state(max, 4094);
    assert_eq!(
        plan(&l(), last, max, 1, 0).unwrap().last,
        l().state(max, 4095)
    );
    assert!(matches!(
        plan(&l(), last, max, 2, 0),
        Err(LayoutError::TimeExhausted { .. })
    ));
    assert!(matches!(
        plan(&l(), 0, max + 1, 1, 0),
        Err(LayoutError::TimeExhausted { .. })
    ));
    assert!(matches!(
        plan(&l(), u64::MAX - 1, 0, 5, 0),
        Err(LayoutError::TimeExhausted { .. })
    ));

    let word = AtomicU64::new(last);
    assert!(reserve(&l(), &word, max, 2, 0, OPEN).is_err());
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
    let r = issued(reserve(&l(), &word, 7, 10, 0, OPEN).unwrap());
    assert_eq!(word.load(Ordering::Relaxed), r.last);
    assert_eq!(r.last - r.first, 9);
    let r2 = issued(reserve(&l(), &word, 7, 1, 0, OPEN).unwrap());
    assert_eq!(r2.first, r.last + 1);
}

#[test]
fn jitter_starts_a_new_tick_only() {
    // A fresh tick starts at the jitter...
    let r = plan(&l(), l().state(99, 4000), 100, 1, 37).unwrap();
    assert_eq!(r.first, l().state(100, 37));
    // ...but a continuation of the current tick, or a borrowed one, never jumps.
    let r = plan(&l(), l().state(100, 3), 100, 1, 37).unwrap();
    assert_eq!(r.first, l().state(100, 4));
    let r = plan(&l(), l().state(100, 4095), 100, 1, 37).unwrap();
    assert_eq!(r.first, l().state(101, 0));
}

#[test]
fn a_reservation_too_far_ahead_of_the_clock_is_refused_and_changes_nothing() {
    let word = AtomicU64::new(l().state(1_005, 4095));
    let bounded = Limits {
        max_ahead_ticks: Some(5),
        ..OPEN
    };
    // The next id would be at tick 1006, 6 ticks ahead of the clock at 1000.
    assert_eq!(
        reserve(&l(), &word, 1_000, 1, 0, bounded).unwrap(),
        Outcome::TooFarAhead {
            ahead_ticks: 6,
            end_tick: 1_006
        }
    );
    assert_eq!(word.load(Ordering::Relaxed), l().state(1_005, 4095));
    // One tick later the clock has caught up enough.
    let r = issued(reserve(&l(), &word, 1_001, 1, 0, bounded).unwrap());
    assert_eq!(r.first, l().state(1_006, 0));
    // Unbounded borrowing never refuses.
    assert!(matches!(
        reserve(&l(), &word, 0, 1, 0, OPEN).unwrap(),
        Outcome::Issued(_)
    ));
}

#[test]
fn a_bound_of_zero_ticks_is_classic_snowflake_waiting_for_the_next_tick() {
    let word = AtomicU64::new(l().state(50, 4095));
    let strict = Limits {
        max_ahead_ticks: Some(0),
        ..OPEN
    };
    assert!(matches!(
        reserve(&l(), &word, 50, 1, 0, strict).unwrap(),
        Outcome::TooFarAhead { ahead_ticks: 1, .. }
    ));
    assert!(matches!(
        reserve(&l(), &word, 51, 1, 0, strict).unwrap(),
        Outcome::Issued(_)
    ));
}

#[test]
fn nothing_is_issued_at_or_beyond_the_reserved_end() {
    let word = AtomicU64::new(0);
    let limits = Limits {
        max_ahead_ticks: None,
        reserved_end: 101,
    };
    assert!(matches!(
        reserve(&l(), &word, 100, 4096, 0, limits).unwrap(),
        Outcome::Issued(_)
    ));
    assert_eq!(
        reserve(&l(), &word, 100, 1, 0, limits).unwrap(),
        Outcome::BeyondReservation { end_tick: 101 }
    );
    assert_eq!(word.load(Ordering::Relaxed), l().state(100, 4095));
    // Before the reservation file is read (reserved_end 0) nothing is issued at all.
    assert!(matches!(
        reserve(
            &l(),
            &AtomicU64::new(0),
            5,
            1,
            0,
            Limits {
                reserved_end: 0,
                ..limits
            }
        )
        .unwrap(),
        Outcome::BeyondReservation { .. }
    ));
}

#[test]
fn batches_are_capped_by_a_second_and_by_the_drift_bound() {
    let layout = l();
    assert_eq!(max_batch(&layout, None), 4_096_000);
    assert_eq!(
        max_batch(&layout, max_ahead_ticks(&layout, Some(1000))),
        4_096_000
    );
    // With no drift allowed a batch must fit in the current tick.
    assert_eq!(max_batch(&layout, max_ahead_ticks(&layout, Some(0))), 4096);
    assert_eq!(
        max_batch(&layout, max_ahead_ticks(&layout, Some(9))),
        10 * 4096
    );
    // Drift is counted in whole ticks: 25 ms of 10 ms ticks is 2 ticks ahead.
    let sonyflake = Layout::new(0, 16, 8, 10).unwrap();
    assert_eq!(max_ahead_ticks(&sonyflake, Some(25)), Some(2));
    assert_eq!(max_batch(&sonyflake, Some(2)), 3 * 256);
}

/// From an idle generator (its last id in an earlier tick than the
/// clock's), a batch of [`max_batch`] ids is issued without waiting, whatever sequence the
/// jitter would start the new tick at, at every corner of the drift bound and in layouts
/// with other tick lengths and sequence widths; and it is still one run of consecutive
/// state words starting in the clock's tick.
#[test]
fn a_batch_of_the_maximum_fits_from_an_idle_generator_whatever_the_jitter() {
    let layouts = [
        l(),
        Layout::new(0, 16, 8, 10).unwrap(), // Sonyflake: 10 ms ticks of 256 ids
        Layout::new(0, 20, 2, 1).unwrap(),
        Layout::new(0, 10, 0, 1).unwrap(), // one id a tick: no room for any jitter
    ];
    for layout in layouts {
        let s = layout.max_sequence();
        for drift_ms in [
            Some(0),
            Some(1),
            Some(9),
            Some(25),
            Some(998),
            Some(999),
            Some(1000),
            None,
        ] {
            let max_ahead = max_ahead_ticks(&layout, drift_ms);
            let count = max_batch(&layout, max_ahead);
            for jitter in [0, 1.min(s), s / 2, s.saturating_sub(1), s] {
                let now = 1_000_000;
                let idle = layout.state(now - 3, 5);
                let word = AtomicU64::new(idle);
                let limits = Limits {
                    max_ahead_ticks: max_ahead,
                    reserved_end: u64::MAX,
                };
                let case = format!(
                    "{layout:?}, max_drift_ms {drift_ms:?}, jitter {jitter}, count {count}"
                );
                let r = match reserve(&layout, &word, now, count, jitter, limits) {
                    Ok(Outcome::Issued(r)) => r,
                    other => panic!("{case}: {other:?}"),
                };
                assert_eq!(r.last - r.first + 1, count, "{case}");
                assert_eq!(layout.state_tick(r.first), now, "{case}");
                assert_eq!(word.load(Ordering::Relaxed), r.last, "{case}");
                // The jitter is only given up as far as the batch needs: a single id still
                // starts the tick at it.
                let word = AtomicU64::new(idle);
                let one = issued(reserve(&layout, &word, now, 1, jitter, limits).unwrap());
                assert_eq!(one.first, layout.state(now, jitter), "{case}");
            }
        }
    }
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
                    let r = issued(reserve(&layout, &word, 1_000, count, 0, OPEN).unwrap());
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
