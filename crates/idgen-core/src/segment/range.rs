//! Pure segment arithmetic: names, the next range above a high-water mark, Leaf's dynamic
//! step, and when to prefetch; covered by plain `#[test]`s and proptest.
//!
//! A segment's high-water mark `max_id` is the largest number that may have been handed out;
//! numbers above it never have (DESIGN.md §2, after Leaf's `leaf_alloc.max_id`). A refill moves
//! it up by one step and hands out the numbers in between.

/// The largest `step` a segment may have, and so the bound of `idgen.segment_max_step`: a
/// billion. A restart skips the numbers still cached (up to two ranges), so a larger step is
/// almost certainly a mistake, such as a start value passed as the step.
pub const MAX_STEP: i32 = 1_000_000_000;

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
    #[allow(clippy::len_without_is_empty)] // never empty
    pub fn len(&self) -> u64 {
        (self.last as i128 - self.first as i128 + 1) as u64
    }
}

/// Which blocks of a segment's numbers this server may hand out (an outer/inner step, as
/// Tinyid's delta/remainder): with `count` servers sharing one logical segment, server `index`
/// takes only the blocks whose number is `index` modulo `count`, so they never overlap and need
/// no communication. Block `k` of a segment with step `s` holds `k*s + 1 ..= (k+1)*s`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Nodes {
    /// How many servers share the segment names (`idgen.segment_node_count`), at least 1.
    pub count: u32,
    /// This server's 0-based place among them (`idgen.segment_node_index`), below `count`.
    pub index: u32,
}

impl Nodes {
    /// One server: every block is its own, and ranges follow the dynamic step.
    #[cfg(test)]
    pub(crate) const SINGLE: Nodes = Nodes { count: 1, index: 0 };

    /// True when other servers own some blocks.
    pub fn interleaved(&self) -> bool {
        self.count > 1
    }
}

/// The range a refill of `step` numbers takes above the high-water mark `max_id`, or `None`
/// when no number above `max_id` is left for this server ("reached maximum value", as
/// PostgreSQL's sequence.c). The last range is cut short at `i64::MAX` rather than wrapping.
/// `step` must be positive.
///
/// One server (`Nodes::SINGLE`): `max_id + 1 ..= max_id + step`. Interleaved: the rest of
/// the first block of `step` numbers above `max_id` that this server owns; `step` is then the
/// block size and must be the same on every server.
pub fn next_range(max_id: i64, step: i64, nodes: Nodes) -> Option<Range> {
    debug_assert!(step > 0 && nodes.index < nodes.count);
    let first = max_id.checked_add(1)?;
    if !nodes.interleaved() {
        return Some(Range {
            first,
            last: max_id.saturating_add(step),
        });
    }
    let (step, count) = (step as i128, nodes.count as i128);
    let block = (first as i128 - 1).div_euclid(step);
    let own = block + (nodes.index as i128 - block).rem_euclid(count);
    let start = own * step + 1;
    if start > i64::MAX as i128 {
        return None;
    }
    Some(Range {
        first: start.max(first as i128) as i64,
        last: (start + step - 1).min(i64::MAX as i128) as i64,
    })
}

/// The part of the number line this server's interleave covers, for growing from N to M
/// servers under traffic (README "Growing from N to M servers"): the old interleave hands out
/// numbers up to a fence F only (`until`), the new one numbers above F only (`from`). Every
/// server caps its old interleave at F before any server takes a block of the new one, so the
/// two never meet, whatever the order the servers switch in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Fences {
    /// `idgen.segment_interleave_from`: no number at or below it is handed out.
    pub from: Option<i64>,
    /// `idgen.segment_interleave_until`: no number above it is handed out.
    pub until: Option<i64>,
}

/// Why [`fenced_range`] has no range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoRange {
    /// No number above the mark is left for this server ([`next_range`]'s `None`).
    Exhausted,
    /// The interleave reached `idgen.segment_interleave_until`, this fence.
    Until(i64),
}

/// [`next_range`] within `fences`: the next own range above both the high-water mark and
/// `from`, cut at `until`.
pub fn fenced_range(
    max_id: i64,
    step: i64,
    nodes: Nodes,
    fences: Fences,
) -> Result<Range, NoRange> {
    let above = fences.from.map_or(max_id, |from| from.max(max_id));
    let range = next_range(above, step, nodes).ok_or(NoRange::Exhausted)?;
    match fences.until {
        Some(until) if range.first > until => Err(NoRange::Until(until)),
        Some(until) => Ok(Range {
            first: range.first,
            last: range.last.min(until),
        }),
        None => Ok(range),
    }
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
            next_range(0, 1000, Nodes::SINGLE),
            Some(Range {
                first: 1,
                last: 1000
            })
        );
        assert_eq!(
            next_range(-5, 3, Nodes::SINGLE),
            Some(Range {
                first: -4,
                last: -2
            })
        );
        assert_eq!(next_range(1000, 1, Nodes::SINGLE).map(|r| r.len()), Some(1));
    }

    #[test]
    fn next_range_stops_at_the_bigint_maximum() {
        let r = next_range(i64::MAX - 10, 1000, Nodes::SINGLE).unwrap();
        assert_eq!(
            r,
            Range {
                first: i64::MAX - 9,
                last: i64::MAX
            }
        );
        assert_eq!(r.len(), 10);
        assert_eq!(next_range(i64::MAX, 1, Nodes::SINGLE), None);
    }

    #[test]
    fn start_minus_one_is_the_first_high_water_mark() {
        assert_eq!(max_id_for_start(1), Some(0));
        assert_eq!(max_id_for_start(i64::MIN + 1), Some(i64::MIN));
        assert_eq!(max_id_for_start(i64::MIN), None);
        let r = next_range(max_id_for_start(i64::MIN + 1).unwrap(), 2, Nodes::SINGLE).unwrap();
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

    /// Three servers, step 1000, from start 1: server 0 takes 1..=1000, 3001..=4000, ...;
    /// server 1 takes 1001..=2000, ...; server 2 takes 2001..=3000, ...
    #[test]
    fn interleaved_servers_take_their_own_blocks() {
        let node = |index| Nodes { count: 3, index };
        let r = |first, last| Some(Range { first, last });
        assert_eq!(next_range(0, 1000, node(0)), r(1, 1000));
        assert_eq!(next_range(0, 1000, node(1)), r(1001, 2000));
        assert_eq!(next_range(0, 1000, node(2)), r(2001, 3000));
        assert_eq!(next_range(1000, 1000, node(0)), r(3001, 4000));
        assert_eq!(next_range(2000, 1000, node(1)), r(4001, 5000));
        // A high-water mark inside an own block (a start, or setval) continues inside it.
        assert_eq!(next_range(3500, 1000, node(0)), r(3501, 4000));
        // ... and one inside another server's block skips to the next own block.
        assert_eq!(next_range(1500, 1000, node(0)), r(3001, 4000));
        // Negative numbers are blocks too (block -1 is -999..=0).
        assert_eq!(next_range(-2000, 1000, node(1)), r(-1999, -1000));
        // No own block left below the bigint maximum: exhausted, never wrapped.
        let last_block = (i64::MAX - 1) / 1000; // the block holding i64::MAX
        let owner = (last_block % 3) as u32;
        let other = Nodes {
            count: 3,
            index: (owner + 1) % 3,
        };
        assert_eq!(next_range(i64::MAX - 5, 1000, other), None);
        assert_eq!(
            next_range(
                i64::MAX - 5,
                1000,
                Nodes {
                    count: 3,
                    index: owner
                }
            ),
            r(i64::MAX - 4, i64::MAX)
        );
    }

    #[test]
    fn fences_bound_the_range() {
        let two = Nodes { count: 2, index: 1 };
        let none = Fences::default();
        assert_eq!(
            fenced_range(0, 100, two, none),
            Ok(Range {
                first: 101,
                last: 200
            })
        );
        // Cut at until; past it, refused.
        let until = Fences {
            from: None,
            until: Some(150),
        };
        assert_eq!(
            fenced_range(0, 100, two, until),
            Ok(Range {
                first: 101,
                last: 150
            })
        );
        assert_eq!(fenced_range(150, 100, two, until), Err(NoRange::Until(150)));
        // From: the block holding the fence is taken only above it.
        let three = Nodes { count: 3, index: 2 };
        let from = Fences {
            from: Some(2_050),
            until: None,
        };
        assert_eq!(
            fenced_range(0, 100, three, from),
            Ok(Range {
                first: 2_051,
                last: 2_100
            })
        );
        assert_eq!(
            fenced_range(5_000, 100, three, from),
            Ok(Range {
                first: 5_001,
                last: 5_100
            })
        );
        assert_eq!(
            fenced_range(i64::MAX, 1, Nodes::SINGLE, none),
            Err(NoRange::Exhausted)
        );
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

        /// Servers sharing a segment name, each refilling from its own high-water mark (all
        /// created with the same start and step), never hand out the same number, and each
        /// server's ranges increase and stay within one of its own blocks (one server: whole
        /// steps from the high-water mark, as before).
        #[test]
        fn interleaved_servers_never_overlap(count in 1u32..6, step in 1i64..500,
                                             start in -10_000i64..10_000, refills in 1usize..30) {
            let mut seen = std::collections::HashSet::new();
            for index in 0..count {
                let nodes = Nodes { count, index };
                let mut max_id = max_id_for_start(start).unwrap();
                for _ in 0..refills {
                    let r = next_range(max_id, step, nodes).unwrap();
                    prop_assert!(r.first > max_id && r.last >= r.first);
                    if count > 1 {
                        let block = |x: i64| (x - 1).div_euclid(step);
                        prop_assert_eq!(block(r.first), block(r.last));
                        prop_assert_eq!(block(r.first).rem_euclid(count as i64), index as i64);
                    } else {
                        prop_assert_eq!(r.len(), step as u64);
                    }
                    for x in r.first..=r.last {
                        prop_assert!(seen.insert(x), "{} handed out twice", x);
                    }
                    max_id = r.last;
                }
            }
        }

        /// Growing from `old` to `new` servers while every server keeps refilling, as README
        /// "Growing from N to M servers" says: the operator picks a fence above every mark; each
        /// old server caps its interleave at it, in any order, and the check refuses a server
        /// already past it (the operator then picks a higher fence and caps again); only once
        /// every old server is capped, servers switch to the new interleave above the fence, in
        /// any order, and the added servers start there. No number is handed out twice, and
        /// every server's numbers increase.
        #[test]
        fn growing_under_traffic_never_repeats_a_number(
            old in 1u32..5, added in 1u32..4, step in 1i64..50, margin in 0i64..2_000,
            fence_at in 0usize..100, schedule in proptest::collection::vec(0usize..64, 1..400),
        ) {
            #[derive(Clone, Copy, PartialEq)]
            enum Phase { Old, Capped, New }
            let new = old + added;
            let mut max_id = vec![0i64; new as usize];
            let mut phase = vec![Phase::Old; new as usize];
            let mut last = vec![0i64; new as usize];
            let mut seen = std::collections::HashSet::new();
            let mut fence: Option<i64> = None;
            for (turn, pick) in schedule.into_iter().enumerate() {
                let server = pick % new as usize;
                let is_old = (server as u32) < old;
                if fence.is_none() && turn >= fence_at {
                    fence = max_id.iter().max().map(|m| m + margin);
                }
                let all_capped = (0..old as usize).all(|s| phase[s] != Phase::Old);
                if let Some(f) = fence {
                    if is_old && phase[server] == Phase::Old && pick % 3 == 0 {
                        if max_id[server] > f {
                            // segment_interleave_ready refuses: a higher fence, capped anew.
                            let higher = max_id.iter().max().unwrap() + margin;
                            fence = Some(higher);
                            for p in phase.iter_mut().take(old as usize) {
                                *p = Phase::Old;
                            }
                        } else {
                            phase[server] = Phase::Capped;
                        }
                        continue;
                    }
                    if all_capped && pick % 3 == 1 && phase[server] != Phase::New {
                        phase[server] = Phase::New;
                    }
                }
                let index = server as u32;
                let (nodes, fences) = match phase[server] {
                    Phase::Old if is_old => (Nodes { count: old, index }, Fences::default()),
                    Phase::Old => continue, // an added server starts once switched
                    Phase::Capped => (Nodes { count: old, index }, Fences { from: None, until: fence }),
                    Phase::New => (Nodes { count: new, index }, Fences { from: fence, until: None }),
                };
                match fenced_range(max_id[server], step, nodes, fences) {
                    Ok(r) => {
                        for x in r.first..=r.last {
                            prop_assert!(seen.insert(x), "{} handed out twice", x);
                            prop_assert!(x > last[server]);
                            last[server] = x;
                        }
                        max_id[server] = r.last;
                    }
                    Err(NoRange::Until(u)) => prop_assert_eq!(Some(u), fence),
                    Err(NoRange::Exhausted) => prop_assert!(false, "exhausted"),
                }
            }
        }

        #[test]
        fn consecutive_ranges_never_overlap(max_id in any::<i64>(), a in 1i64..i64::MAX, b in 1i64..i64::MAX) {
            if let Some(r1) = next_range(max_id, a, Nodes::SINGLE) {
                prop_assert!(r1.first > max_id);
                prop_assert!(r1.last >= r1.first);
                if let Some(r2) = next_range(r1.last, b, Nodes::SINGLE) {
                    prop_assert!(r2.first > r1.last);
                }
            }
        }
    }
}
