//! Pure segment arithmetic: names, the next range above a high-water mark, Leaf's dynamic
//! step, and when to prefetch. No pgrx here; covered by plain `#[test]`s.
//!
//! A segment's high-water mark `max_id` is the largest number that may have been handed out;
//! numbers above it never have (DESIGN.md §2, after Leaf's `leaf_alloc.max_id`). A refill moves
//! it up by one step and hands out the numbers in between.

/// Longest segment name, in bytes: PostgreSQL's `NAMEDATALEN - 1`.
pub const MAX_NAME_BYTES: usize = 63;

/// Longest description kept with a segment, in bytes.
pub const MAX_DESCRIPTION_BYTES: usize = 1024;

/// Why a segment name is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameError {
    /// The empty string.
    Empty,
    /// More than [`MAX_NAME_BYTES`] bytes; carries the length in bytes.
    TooLong(usize),
}

/// Checks a segment name: 1 to 63 bytes of any text (names are data, never SQL).
pub fn check_name(name: &str) -> Result<(), NameError> {
    match name.len() {
        0 => Err(NameError::Empty),
        n if n > MAX_NAME_BYTES => Err(NameError::TooLong(n)),
        _ => Ok(()),
    }
}

/// An inclusive range of numbers, `first..=last`, handed out from one refill.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range {
    /// First number of the range.
    pub first: i64,
    /// Last number of the range (inclusive); `>= first`.
    pub last: i64,
}

impl Range {
    /// How many numbers the range holds (at least 1).
    pub fn len(&self) -> u64 {
        (self.last as i128 - self.first as i128 + 1) as u64
    }

    /// Always false: a range holds at least one number.
    pub fn is_empty(&self) -> bool {
        false
    }
}

/// The range a refill of `step` numbers takes above the high-water mark `max_id`, or `None`
/// when `max_id` is already `i64::MAX` ("reached maximum value", as PostgreSQL's sequence.c).
/// The last range is cut short at `i64::MAX` rather than wrapping. `step` must be positive.
pub fn next_range(max_id: i64, step: i64) -> Option<Range> {
    debug_assert!(step > 0);
    let first = max_id.checked_add(1)?;
    Some(Range {
        first,
        last: max_id.saturating_add(step),
    })
}

/// The high-water mark a segment created with `start` gets: `start - 1`, so that the first
/// number handed out is `start`. `None` for `i64::MIN`, which has no predecessor.
pub fn max_id_for_start(start: i64) -> Option<i64> {
    start.checked_sub(1)
}

/// The step of the next refill, as Leaf's `SegmentIDGenImpl.updateSegmentFromDb`: a range that
/// lasted less than `interval_ms` doubles the step (up to `max_step`), one that lasted at least
/// twice as long halves it (never below the segment's own `base_step`), otherwise it stays.
///
/// * `previous`: the step of the last refill, `None` before the first (then: `base_step`).
/// * `since_last_ms`: milliseconds since the last refill.
/// * `max_step`: `idgen.segment_max_step`; a `base_step` above it wins (the step is then fixed).
pub fn next_step(
    previous: Option<i64>,
    base_step: i64,
    max_step: i64,
    since_last_ms: i64,
    interval_ms: i64,
) -> i64 {
    let ceiling = max_step.max(base_step);
    let Some(previous) = previous else {
        return base_step;
    };
    let previous = previous.clamp(base_step, ceiling);
    if since_last_ms < interval_ms {
        previous.saturating_mul(2).min(ceiling)
    } else if since_last_ms < interval_ms.saturating_mul(2) {
        previous
    } else {
        (previous / 2).max(base_step)
    }
}

/// The offset into a range of `len` numbers whose drawing asks for the next range: 10% in, as
/// Leaf's double buffer. Exactly one draw covers each offset, so exactly one caller asks.
pub fn prefetch_offset(len: u64) -> u64 {
    len / 10
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn names_are_one_to_sixty_three_bytes() {
        assert_eq!(check_name(""), Err(NameError::Empty));
        assert_eq!(check_name("a"), Ok(()));
        assert_eq!(check_name(&"x".repeat(63)), Ok(()));
        assert_eq!(check_name(&"x".repeat(64)), Err(NameError::TooLong(64)));
        // Bytes, not characters: 22 three-byte characters are 66 bytes.
        assert_eq!(check_name(&"号".repeat(22)), Err(NameError::TooLong(66)));
        assert_eq!(check_name("'; DROP TABLE x; --"), Ok(()));
    }

    #[test]
    fn next_range_starts_above_the_high_water_mark() {
        assert_eq!(
            next_range(0, 1000),
            Some(Range {
                first: 1,
                last: 1000
            })
        );
        assert_eq!(
            next_range(-5, 3),
            Some(Range {
                first: -4,
                last: -2
            })
        );
        assert_eq!(next_range(1000, 1).map(|r| r.len()), Some(1));
    }

    #[test]
    fn next_range_stops_at_the_bigint_maximum() {
        let r = next_range(i64::MAX - 10, 1000).unwrap();
        assert_eq!(
            r,
            Range {
                first: i64::MAX - 9,
                last: i64::MAX
            }
        );
        assert_eq!(r.len(), 10);
        assert_eq!(next_range(i64::MAX, 1), None);
    }

    #[test]
    fn start_minus_one_is_the_first_high_water_mark() {
        assert_eq!(max_id_for_start(1), Some(0));
        assert_eq!(max_id_for_start(i64::MIN + 1), Some(i64::MIN));
        assert_eq!(max_id_for_start(i64::MIN), None);
        let r = next_range(max_id_for_start(i64::MIN + 1).unwrap(), 2).unwrap();
        assert_eq!(r.first, i64::MIN + 1);
    }

    /// Leaf's rule, case by case: (previous, base, max, since last refill ms, expected); the
    /// interval is 15 min.
    #[test]
    fn dynamic_step_doubles_stays_or_halves() {
        const INTERVAL: i64 = 900_000;
        for (previous, base, max, since, expected) in [
            (None, 1000, 1_000_000, 0, 1000), // first refill: the own step
            (Some(1000), 1000, 1_000_000, 10, 2000), // used up fast: doubles
            (Some(800_000), 1000, 1_000_000, 10, 1_000_000), // ... up to the maximum
            (Some(1_000_000), 1000, 1_000_000, 10, 1_000_000), // ... and stays there
            (Some(4000), 1000, 1_000_000, 900_000, 4000), // one to two intervals: stays
            (Some(4000), 1000, 1_000_000, 1_799_999, 4000),
            (Some(4000), 1000, 1_000_000, 1_800_000, 2000), // two intervals or more: halves
            (Some(1500), 1000, 1_000_000, 9_000_000, 1000), // ... never below the own step
            (Some(5000), 5000, 100, 0, 5000),               // own step above the maximum: fixed
            (Some(5000), 5000, 100, i64::MAX, 5000),
        ] {
            assert_eq!(
                next_step(previous, base, max, since, INTERVAL),
                expected,
                "previous {previous:?}, base {base}, max {max}, since {since} ms"
            );
        }
    }

    #[test]
    fn prefetch_at_ten_percent() {
        assert_eq!(prefetch_offset(1000), 100);
        assert_eq!(prefetch_offset(5), 0);
        assert_eq!(prefetch_offset(1), 0);
    }

    proptest! {
        #[test]
        fn step_stays_within_bounds(prev in 1i64..10_000_000, base in 1i64..100_000,
                                    max in 1i64..10_000_000, since in 0i64..100_000_000,
                                    interval in 1i64..10_000_000) {
            let s = next_step(Some(prev), base, max, since, interval);
            prop_assert!(s >= base);
            prop_assert!(s <= max.max(base));
        }

        #[test]
        fn consecutive_ranges_never_overlap(max_id in any::<i64>(), a in 1i64..i64::MAX, b in 1i64..i64::MAX) {
            if let Some(r1) = next_range(max_id, a) {
                prop_assert!(r1.first > max_id);
                prop_assert!(r1.last >= r1.first);
                if let Some(r2) = next_range(r1.last, b) {
                    prop_assert!(r2.first > r1.last);
                }
            }
        }
    }
}
