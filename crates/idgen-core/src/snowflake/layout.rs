//! Snowflake bit layout: pure arithmetic.
//!
//! An id is a positive `i64` below `2^id_bits`:
//!
//! ```text
//!   0… | time: id_bits - worker_bits - sequence_bits | worker: worker_bits | sequence: sequence_bits
//! ```
//!
//! Twitter's layout (the default) is `0 | 41 | 10 | 12` with 1 ms ticks (`id_bits` 63, the whole
//! positive `bigint`); Sonyflake's is 10 ms ticks with a 16-bit machine id and an 8-bit
//! sequence; Twitter split its 10 worker bits 5+5 into datacenter and machine, here they are one
//! number. Time is counted in *ticks* of `time_unit_ms` milliseconds since the epoch.
//!
//! `id_bits` below 63 (down to 53, JavaScript's `Number.MAX_SAFE_INTEGER` being `2^53 - 1`, as
//! Yitter's IdGenerator offers for the web) only shortens the time field: an id is composed the
//! same way (`tick << (worker_bits + sequence_bits) | worker << sequence_bits | sequence`), so
//! two layouts that differ only in `id_bits` give the same id for the same (tick, worker,
//! sequence) and never collide ([`Layout::counts_ticks_as`]). The narrower one runs out of time
//! sooner.
//!
//! The generator works on a *state word*, the id without its worker bits:
//! `tick << sequence_bits | sequence`. Adding one to a state word whose sequence is at its maximum
//! carries into the tick, which is how a sequence overflow "borrows" the next tick (DESIGN.md §1).

use thiserror::Error;

/// The fewest time bits a layout may leave (2^32 ms is about 50 days; anything less is a typo).
pub const MIN_TIME_BITS: u32 = 32;

/// The widest id, in bits, and the default: every positive `bigint`.
pub const MAX_ID_BITS: u32 = 63;

/// The narrowest id, in bits: ids below 2^53 are exact in a JavaScript `Number` (and in any
/// IEEE-754 double, hence JSON parsers that read numbers as doubles).
pub const MIN_ID_BITS: u32 = 53;

/// Unix milliseconds of the default epoch, `2024-01-01 00:00:00+00`.
pub const DEFAULT_EPOCH_UNIX_MS: i64 = 1_704_067_200_000;

/// Failures of the layout arithmetic. The extension maps each to a SQLSTATE (`snowflake::decode`
/// for arguments, the generation path for its own).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum LayoutError {
    /// The widths leave fewer than [`MIN_TIME_BITS`] for time, `id_bits` is outside
    /// [`MIN_ID_BITS`]`..=`[`MAX_ID_BITS`], or the unit is zero.
    #[error("invalid snowflake layout: {0}")]
    Invalid(String),
    /// A negative `bigint` is never a Snowflake id (the sign bit is always 0).
    #[error("snowflake id {0} is negative")]
    NegativeId(i64),
    /// An id at or above `2^id_bits`: no id of this layout (only when `id_bits` < 63).
    #[error("snowflake id {id} is not below 2^{id_bits}")]
    IdTooWide { id: i64, id_bits: u32 },
    /// A worker id that does not fit in `worker_bits`.
    #[error("worker id {worker} is out of range 0..{max}")]
    WorkerOutOfRange { worker: i64, max: u64 },
    /// A sequence that does not fit in `sequence_bits`.
    #[error("sequence {sequence} is out of range 0..{max}")]
    SequenceOutOfRange { sequence: i64, max: u64 },
    /// A time before the epoch: ticks are unsigned.
    #[error("time is {ms} ms before the epoch")]
    BeforeEpoch { ms: i64 },
    /// A tick that does not fit in the time bits: the layout has run out of time.
    #[error("tick {tick} exceeds the largest tick {max} of the layout")]
    TimeExhausted { tick: u64, max: u64 },
}

/// A Snowflake layout: the epoch, the width of the whole id and the widths of its worker and
/// sequence fields (time takes the rest), and the tick length. Fixed at server start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    epoch_unix_ms: i64,
    id_bits: u32,
    worker_bits: u32,
    sequence_bits: u32,
    time_unit_ms: u32,
    // Derived from the widths once, as they are needed per id.
    max_sequence: u64,
    max_tick: u64,
}

/// The parts of an id, as `snowflake_decode` shows them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parts {
    /// Ticks since the epoch.
    pub tick: u64,
    /// The worker id, `0..=max_worker()`.
    pub worker: u64,
    /// The sequence within the tick, `0..=max_sequence()`.
    pub sequence: u64,
}

impl Default for Layout {
    /// Twitter's layout: 41 time bits of 1 ms, 10 worker bits, 12 sequence bits, epoch 2024-01-01.
    fn default() -> Self {
        Layout::with(DEFAULT_EPOCH_UNIX_MS, MAX_ID_BITS, 10, 12, 1)
    }
}

impl Layout {
    /// A layout of 63-bit ids (every positive `bigint`) with the given epoch (Unix ms), widths
    /// (bits) and tick length (ms): [`Layout::within`] 63 bits.
    pub fn new(
        epoch_unix_ms: i64,
        worker_bits: u32,
        sequence_bits: u32,
        time_unit_ms: u32,
    ) -> Result<Self, LayoutError> {
        Layout::within(
            MAX_ID_BITS,
            epoch_unix_ms,
            worker_bits,
            sequence_bits,
            time_unit_ms,
        )
    }

    /// A layout whose ids stay below `2^id_bits`, with the given epoch (Unix ms), widths (bits)
    /// and tick length (ms): time takes `id_bits - worker_bits - sequence_bits` bits.
    ///
    /// Errors with [`LayoutError::Invalid`] when `id_bits` is outside
    /// [`MIN_ID_BITS`]`..=`[`MAX_ID_BITS`], the time field would be narrower than
    /// [`MIN_TIME_BITS`], or the tick length is zero.
    pub fn within(
        id_bits: u32,
        epoch_unix_ms: i64,
        worker_bits: u32,
        sequence_bits: u32,
        time_unit_ms: u32,
    ) -> Result<Self, LayoutError> {
        if time_unit_ms == 0 {
            return Err(LayoutError::Invalid(
                "time unit must be at least 1 ms".into(),
            ));
        }
        if !(MIN_ID_BITS..=MAX_ID_BITS).contains(&id_bits) {
            return Err(LayoutError::Invalid(format!(
                "ids of {id_bits} bits: the width must be from {MIN_ID_BITS} to {MAX_ID_BITS} bits"
            )));
        }
        let used = worker_bits.saturating_add(sequence_bits);
        if used > id_bits - MIN_TIME_BITS {
            return Err(LayoutError::Invalid(format!(
                "ids of {id_bits} bits with {worker_bits} worker bits and {sequence_bits} sequence bits leave {} time bits, fewer than {MIN_TIME_BITS}",
                id_bits as i64 - used as i64
            )));
        }
        Ok(Layout::with(
            epoch_unix_ms,
            id_bits,
            worker_bits,
            sequence_bits,
            time_unit_ms,
        ))
    }

    /// A layout of checked widths (`worker_bits + sequence_bits <= id_bits - MIN_TIME_BITS`).
    fn with(
        epoch_unix_ms: i64,
        id_bits: u32,
        worker_bits: u32,
        sequence_bits: u32,
        time_unit_ms: u32,
    ) -> Self {
        Layout {
            epoch_unix_ms,
            id_bits,
            worker_bits,
            sequence_bits,
            time_unit_ms,
            max_sequence: (1u64 << sequence_bits) - 1,
            max_tick: (1u64 << (id_bits - worker_bits - sequence_bits)) - 1,
        }
    }

    /// Whether `other` counts the same ticks and composes ids the same way: the same epoch,
    /// widths of worker and sequence, and tick length. `id_bits` may differ: it only says how
    /// far the time field goes, so the same (tick, worker, sequence) is the same id under both,
    /// and a tick recorded under one (the reservation file, a registry's fence) means the same
    /// under the other.
    pub fn counts_ticks_as(&self, other: &Layout) -> bool {
        (
            self.epoch_unix_ms,
            self.worker_bits,
            self.sequence_bits,
            self.time_unit_ms,
        ) == (
            other.epoch_unix_ms,
            other.worker_bits,
            other.sequence_bits,
            other.time_unit_ms,
        )
    }

    /// Epoch in Unix milliseconds.
    pub fn epoch_unix_ms(&self) -> i64 {
        self.epoch_unix_ms
    }
    /// Width of the whole id, in bits (63 by default): every id is below `2^id_bits`.
    pub fn id_bits(&self) -> u32 {
        self.id_bits
    }
    /// The largest id of the layout: `2^id_bits - 1` (`i64::MAX` by default).
    pub fn max_id(&self) -> i64 {
        ((1u64 << self.id_bits) - 1) as i64
    }
    /// Width of the worker field, in bits.
    pub fn worker_bits(&self) -> u32 {
        self.worker_bits
    }
    /// Width of the sequence field, in bits.
    pub fn sequence_bits(&self) -> u32 {
        self.sequence_bits
    }
    /// Width of the time field, in bits: the rest of `id_bits`.
    pub fn time_bits(&self) -> u32 {
        self.id_bits - self.worker_bits - self.sequence_bits
    }
    /// Length of one tick, in milliseconds.
    pub fn time_unit_ms(&self) -> u32 {
        self.time_unit_ms
    }
    /// Largest worker id (1023 by default).
    pub fn max_worker(&self) -> u64 {
        (1u64 << self.worker_bits) - 1
    }
    /// Largest sequence within a tick (4095 by default).
    pub fn max_sequence(&self) -> u64 {
        self.max_sequence
    }
    /// Largest tick the time field holds.
    pub fn max_tick(&self) -> u64 {
        self.max_tick
    }
    /// How many ids one worker can issue per second of wall clock without borrowing ticks.
    pub fn ids_per_second(&self) -> u64 {
        (1000 / self.time_unit_ms as u64).max(1) << self.sequence_bits
    }

    /// The state word of (tick, sequence): `tick << sequence_bits | sequence`.
    pub fn state(&self, tick: u64, sequence: u64) -> u64 {
        (tick << self.sequence_bits) | (sequence & self.max_sequence())
    }
    /// The tick of a state word.
    pub fn state_tick(&self, state: u64) -> u64 {
        state >> self.sequence_bits
    }

    /// The id for a state word and a worker id. The caller guarantees `worker <= max_worker()`.
    ///
    /// Errors with [`LayoutError::TimeExhausted`] when the state's tick does not fit: an id is
    /// never wrapped and never negative.
    pub fn id_from_state(&self, state: u64, worker: u64) -> Result<i64, LayoutError> {
        let tick = self.state_tick(state);
        if tick > self.max_tick() {
            return Err(LayoutError::TimeExhausted {
                tick,
                max: self.max_tick(),
            });
        }
        let sequence = state & self.max_sequence();
        Ok(self.pack(tick, worker, sequence))
    }

    fn pack(&self, tick: u64, worker: u64, sequence: u64) -> i64 {
        let id = (tick << (self.worker_bits + self.sequence_bits))
            | (worker << self.sequence_bits)
            | sequence;
        debug_assert!(id <= self.max_id() as u64);
        id as i64
    }

    /// The id of (tick, worker, sequence), each range-checked: the inverse of [`Layout::decode`].
    pub fn compose(&self, tick: u64, worker: i64, sequence: i64) -> Result<i64, LayoutError> {
        if worker < 0 || worker as u64 > self.max_worker() {
            return Err(LayoutError::WorkerOutOfRange {
                worker,
                max: self.max_worker(),
            });
        }
        if sequence < 0 || sequence as u64 > self.max_sequence() {
            return Err(LayoutError::SequenceOutOfRange {
                sequence,
                max: self.max_sequence(),
            });
        }
        if tick > self.max_tick() {
            return Err(LayoutError::TimeExhausted {
                tick,
                max: self.max_tick(),
            });
        }
        Ok(self.pack(tick, worker as u64, sequence as u64))
    }

    /// The parts of an id. Errors with [`LayoutError::NegativeId`] for a negative value and
    /// [`LayoutError::IdTooWide`] for one above [`Layout::max_id`] (whose tick would be past the
    /// layout's last).
    pub fn decode(&self, id: i64) -> Result<Parts, LayoutError> {
        if id < 0 {
            return Err(LayoutError::NegativeId(id));
        }
        if id > self.max_id() {
            return Err(LayoutError::IdTooWide {
                id,
                id_bits: self.id_bits,
            });
        }
        let id = id as u64;
        Ok(Parts {
            tick: id >> (self.worker_bits + self.sequence_bits),
            worker: (id >> self.sequence_bits) & self.max_worker(),
            sequence: id & self.max_sequence(),
        })
    }

    /// The tick containing Unix time `unix_ms` (rounded down to the tick).
    ///
    /// Errors with [`LayoutError::BeforeEpoch`] before the epoch and
    /// [`LayoutError::TimeExhausted`] past the last tick.
    pub fn tick_at(&self, unix_ms: i64) -> Result<u64, LayoutError> {
        // The difference of two i64 always fits a u64 (per id: no 128-bit arithmetic).
        let since = unix_ms.wrapping_sub(self.epoch_unix_ms) as u64;
        if unix_ms < self.epoch_unix_ms {
            return Err(LayoutError::BeforeEpoch {
                ms: since.wrapping_neg().min(i64::MAX as u64) as i64,
            });
        }
        let tick = self.ticks_in_ms(since);
        if tick > self.max_tick() {
            return Err(LayoutError::TimeExhausted {
                tick,
                max: self.max_tick(),
            });
        }
        Ok(tick)
    }

    /// Whole ticks in `ms` milliseconds. Runs per id: the default 1 ms tick skips the 64-bit
    /// division, which cost a sixth of `snowflake_nextval()`'s own time.
    pub fn ticks_in_ms(&self, ms: u64) -> u64 {
        if self.time_unit_ms == 1 {
            ms
        } else {
            ms / self.time_unit_ms as u64
        }
    }

    /// Unix milliseconds at which `tick` starts. Saturates rather than overflowing `i64`.
    pub fn unix_ms_of_tick(&self, tick: u64) -> i64 {
        let ms = self.epoch_unix_ms as i128 + tick as i128 * self.time_unit_ms as i128;
        ms.clamp(i64::MIN as i128, i64::MAX as i128) as i64
    }

    /// Unix milliseconds at which the layout runs out (the start of the tick after the last).
    pub fn exhausted_at_unix_ms(&self) -> i64 {
        self.unix_ms_of_tick(self.max_tick())
            .saturating_add(self.time_unit_ms as i64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn twitter() -> Layout {
        Layout::default()
    }

    #[test]
    fn default_is_twitter_41_10_12() {
        let l = twitter();
        assert_eq!(
            (l.time_bits(), l.worker_bits(), l.sequence_bits()),
            (41, 10, 12)
        );
        assert_eq!(l.max_worker(), 1023);
        assert_eq!(l.max_sequence(), 4095);
        assert_eq!(l.max_tick(), (1 << 41) - 1);
        assert_eq!(l.ids_per_second(), 4_096_000);
    }

    #[test]
    fn default_layout_lasts_until_2093() {
        // 2^41 ms after 2024-01-01 is 2093-09-06.
        let end_ms = twitter().exhausted_at_unix_ms();
        assert_eq!(end_ms, DEFAULT_EPOCH_UNIX_MS + (1i64 << 41));
        let years = (end_ms - DEFAULT_EPOCH_UNIX_MS) as f64 / (365.2425 * 86_400_000.0);
        assert!((69.0..70.0).contains(&years), "{years}");
    }

    #[test]
    fn compose_places_fields_at_their_bits() {
        let l = twitter();
        assert_eq!(l.compose(0, 0, 0).unwrap(), 0);
        assert_eq!(l.compose(0, 0, 1).unwrap(), 1);
        assert_eq!(l.compose(0, 1, 0).unwrap(), 1 << 12);
        assert_eq!(l.compose(1, 0, 0).unwrap(), 1 << 22);
        assert_eq!(l.compose(3, 7, 5).unwrap(), (3 << 22) | (7 << 12) | 5);
    }

    #[test]
    fn largest_representable_id_is_i64_max() {
        let l = twitter();
        let id = l
            .compose(l.max_tick(), l.max_worker() as i64, l.max_sequence() as i64)
            .unwrap();
        assert_eq!(id, i64::MAX);
        let p = l.decode(id).unwrap();
        assert_eq!((p.tick, p.worker, p.sequence), (l.max_tick(), 1023, 4095));
    }

    #[test]
    fn compose_rejects_out_of_range_fields() {
        let l = twitter();
        assert_eq!(
            l.compose(0, 1024, 0),
            Err(LayoutError::WorkerOutOfRange {
                worker: 1024,
                max: 1023
            })
        );
        assert_eq!(
            l.compose(0, -1, 0),
            Err(LayoutError::WorkerOutOfRange {
                worker: -1,
                max: 1023
            })
        );
        assert_eq!(
            l.compose(0, 0, 4096),
            Err(LayoutError::SequenceOutOfRange {
                sequence: 4096,
                max: 4095
            })
        );
        assert_eq!(
            l.compose(0, 0, -1),
            Err(LayoutError::SequenceOutOfRange {
                sequence: -1,
                max: 4095
            })
        );
        assert_eq!(
            l.compose(l.max_tick() + 1, 0, 0),
            Err(LayoutError::TimeExhausted {
                tick: l.max_tick() + 1,
                max: l.max_tick()
            })
        );
    }

    #[test]
    fn decode_rejects_negative_ids() {
        assert_eq!(twitter().decode(-1), Err(LayoutError::NegativeId(-1)));
        assert_eq!(
            twitter().decode(i64::MIN),
            Err(LayoutError::NegativeId(i64::MIN))
        );
    }

    #[test]
    fn sequence_overflow_carries_into_the_next_tick() {
        let l = twitter();
        let last_of_tick = l.state(41, l.max_sequence());
        let next = last_of_tick + 1;
        assert_eq!(l.state_tick(next), 42);
        assert_eq!(next & l.max_sequence(), 0);
        let (a, b) = (
            l.id_from_state(last_of_tick, 9).unwrap(),
            l.id_from_state(next, 9).unwrap(),
        );
        assert!(b > a);
        assert_eq!(
            l.decode(b).unwrap(),
            Parts {
                tick: 42,
                worker: 9,
                sequence: 0
            }
        );
    }

    #[test]
    fn state_past_the_last_tick_is_exhausted_not_wrapped() {
        let l = twitter();
        let last = l.state(l.max_tick(), l.max_sequence());
        assert_eq!(l.id_from_state(last, 1023).unwrap(), i64::MAX);
        assert!(matches!(
            l.id_from_state(last + 1, 0),
            Err(LayoutError::TimeExhausted { .. })
        ));
    }

    #[test]
    fn layouts_that_leave_too_few_time_bits_are_invalid() {
        assert!(Layout::new(0, 16, 15, 1).is_ok()); // exactly 32 time bits
        assert!(matches!(
            Layout::new(0, 16, 16, 1),
            Err(LayoutError::Invalid(_))
        ));
        assert!(matches!(
            Layout::new(0, 10, 12, 0),
            Err(LayoutError::Invalid(_))
        ));
        assert!(matches!(
            Layout::new(0, u32::MAX, 1, 1),
            Err(LayoutError::Invalid(_))
        ));
    }

    /// The web preset of the README: ids below 2^53 (JavaScript's safe integers), 41 time bits
    /// of 1 ms (until 2093 from the default epoch), 6 worker bits, 6 sequence bits.
    fn web() -> Layout {
        Layout::within(53, DEFAULT_EPOCH_UNIX_MS, 6, 6, 1).unwrap()
    }

    #[test]
    fn a_53_bit_layout_keeps_every_id_below_2_53() {
        let l = web();
        assert_eq!((l.id_bits(), l.time_bits()), (53, 41));
        assert_eq!(l.max_id(), (1i64 << 53) - 1);
        assert_eq!(l.max_tick(), (1 << 41) - 1);
        let last = l
            .compose(l.max_tick(), l.max_worker() as i64, l.max_sequence() as i64)
            .unwrap();
        assert_eq!(last, (1i64 << 53) - 1);
        assert_eq!(
            l.id_from_state(l.state(l.max_tick(), l.max_sequence()), 63),
            Ok(last)
        );
        // 2^41 ms after 2024-01-01, as the 63-bit default with 10 + 12 bits.
        assert_eq!(l.exhausted_at_unix_ms(), twitter().exhausted_at_unix_ms());
        assert_eq!(Layout::default().id_bits(), 63);
        assert_eq!(Layout::default().max_id(), i64::MAX);
    }

    #[test]
    fn a_53_bit_layout_refuses_to_overflow_its_time_field() {
        let l = web();
        let past = l.state(l.max_tick(), l.max_sequence()) + 1;
        assert_eq!(
            l.id_from_state(past, 0),
            Err(LayoutError::TimeExhausted {
                tick: l.max_tick() + 1,
                max: l.max_tick()
            })
        );
        assert!(matches!(
            l.compose(l.max_tick() + 1, 0, 0),
            Err(LayoutError::TimeExhausted { .. })
        ));
        assert!(matches!(
            l.tick_at(l.exhausted_at_unix_ms()),
            Err(LayoutError::TimeExhausted { .. })
        ));
        assert_eq!(l.tick_at(l.exhausted_at_unix_ms() - 1), Ok(l.max_tick()));
    }

    #[test]
    fn a_53_bit_layout_decodes_only_its_own_ids() {
        let l = web();
        let max = (1i64 << 53) - 1;
        assert_eq!(
            l.decode(max),
            Ok(Parts {
                tick: l.max_tick(),
                worker: 63,
                sequence: 63
            })
        );
        assert_eq!(
            l.decode(max + 1),
            Err(LayoutError::IdTooWide {
                id: max + 1,
                id_bits: 53
            })
        );
        assert!(matches!(
            l.decode(i64::MAX),
            Err(LayoutError::IdTooWide { .. })
        ));
        assert_eq!(l.decode(-1), Err(LayoutError::NegativeId(-1)));
    }

    #[test]
    fn id_bits_change_the_time_field_only() {
        let wide = Layout::new(DEFAULT_EPOCH_UNIX_MS, 6, 6, 1).unwrap();
        let narrow = web();
        assert_ne!(wide, narrow);
        assert!(wide.counts_ticks_as(&narrow) && narrow.counts_ticks_as(&wide));
        assert_eq!(wide.time_bits(), 51);
        for (tick, worker, seq) in [(0, 0, 0), (12_345, 7, 9), (narrow.max_tick(), 63, 63)] {
            assert_eq!(
                wide.compose(tick, worker, seq),
                narrow.compose(tick, worker, seq)
            );
        }
        // Any other difference is another id space.
        let other = Layout::within(53, DEFAULT_EPOCH_UNIX_MS, 7, 5, 1).unwrap();
        assert!(!other.counts_ticks_as(&narrow));
        let later = Layout::within(53, DEFAULT_EPOCH_UNIX_MS + 1, 6, 6, 1).unwrap();
        assert!(!later.counts_ticks_as(&narrow));
        let slower = Layout::within(53, DEFAULT_EPOCH_UNIX_MS, 6, 6, 10).unwrap();
        assert!(!slower.counts_ticks_as(&narrow));
    }

    #[test]
    fn id_bits_outside_53_to_63_or_leaving_too_few_time_bits_are_invalid() {
        assert!(Layout::within(53, 0, 10, 11, 1).is_ok()); // exactly 32 time bits
        let Err(LayoutError::Invalid(why)) = Layout::within(53, 0, 10, 12, 1) else {
            panic!("53 bits less 10 + 12 leave 31 time bits");
        };
        assert!(
            why.contains("53") && why.contains("10") && why.contains("12"),
            "{why}"
        );
        assert!(why.contains("31 time bits"), "{why}");
        for id_bits in [0, 52, 64, u32::MAX] {
            assert!(
                matches!(
                    Layout::within(id_bits, 0, 0, 0, 1),
                    Err(LayoutError::Invalid(_))
                ),
                "{id_bits}"
            );
        }
        assert!(Layout::within(63, 0, 16, 15, 1).is_ok());
        assert!(matches!(
            Layout::within(53, 0, u32::MAX, 1, 1),
            Err(LayoutError::Invalid(_))
        ));
    }

    #[test]
    fn sonyflake_layout_counts_ten_ms_ticks() {
        // Sonyflake: 39 bits of 10 ms, 16-bit machine id, 8-bit sequence.
        let l = Layout::new(DEFAULT_EPOCH_UNIX_MS, 16, 8, 10).unwrap();
        assert_eq!(l.time_bits(), 39);
        assert_eq!(l.tick_at(DEFAULT_EPOCH_UNIX_MS + 25).unwrap(), 2);
        assert_eq!(l.unix_ms_of_tick(2), DEFAULT_EPOCH_UNIX_MS + 20);
        assert_eq!(l.ids_per_second(), 100 * 256);
    }

    #[test]
    fn tick_at_rejects_times_before_the_epoch_and_past_the_end() {
        let l = twitter();
        assert_eq!(
            l.tick_at(DEFAULT_EPOCH_UNIX_MS - 5),
            Err(LayoutError::BeforeEpoch { ms: 5 })
        );
        assert_eq!(l.tick_at(DEFAULT_EPOCH_UNIX_MS).unwrap(), 0);
        let end = l.exhausted_at_unix_ms();
        assert_eq!(l.tick_at(end - 1).unwrap(), l.max_tick());
        assert!(matches!(
            l.tick_at(end),
            Err(LayoutError::TimeExhausted { .. })
        ));
        assert!(matches!(
            l.tick_at(i64::MAX),
            Err(LayoutError::TimeExhausted { .. })
        ));
        assert!(matches!(
            l.tick_at(i64::MIN),
            Err(LayoutError::BeforeEpoch { .. })
        ));
    }

    proptest! {
        #[test]
        fn compose_decode_round_trip(
            id_bits in 53u32..=63, wb in 0u32..=10, sb in 0u32..=11, unit in 1u32..=1000,
            tick in any::<u64>(), worker in any::<u64>(), seq in any::<u64>(),
        ) {
            let l = Layout::within(id_bits, DEFAULT_EPOCH_UNIX_MS, wb, sb, unit).unwrap();
            let (tick, worker, seq) = (tick % (l.max_tick() + 1), worker & l.max_worker(), seq & l.max_sequence());
            let id = l.compose(tick, worker as i64, seq as i64).unwrap();
            prop_assert!(id >= 0);
            prop_assert!(id <= l.max_id() && (id as u64) < 1u64 << id_bits);
            prop_assert_eq!(l.decode(id).unwrap(), Parts { tick, worker, sequence: seq });
            prop_assert_eq!(l.id_from_state(l.state(tick, seq), worker).unwrap(), id);
        }

        #[test]
        fn ids_order_like_their_state_words(a in 0u64..(1 << 53), b in 0u64..(1 << 53), worker in 0u64..1024) {
            let l = twitter();
            let (ia, ib) = (l.id_from_state(a, worker).unwrap(), l.id_from_state(b, worker).unwrap());
            prop_assert_eq!(a.cmp(&b), ia.cmp(&ib));
        }

        #[test]
        fn tick_round_trips_through_unix_ms(tick in 0u64..(1 << 41)) {
            let l = twitter();
            prop_assert_eq!(l.tick_at(l.unix_ms_of_tick(tick)).unwrap(), tick);
        }
    }
}
