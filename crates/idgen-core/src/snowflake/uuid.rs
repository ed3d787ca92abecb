//! Snowflake UUIDs: RFC 9562 version-7 UUIDs drawn from the Snowflake generator's state word, so
//! that they carry the generator's guarantees (strictly increasing per server across backends,
//! restarts and promotions; distinct across servers with distinct worker ids) and stay valid v7
//! for every consumer.
//!
//! Layout (big-endian, 128 bits; RFC 9562 §5.7, counter by §6.2 Method 1):
//!
//! ```text
//! unix_ts_ms (48) | ver 0111 (4) | X[73..62] (12) | var 10 (2) | X[61..0] (62)
//! X (74 bits) = sequence << (74 - sb) | worker << (74 - sb - wb) | random (74 - sb - wb bits)
//! ```
//!
//! `unix_ts_ms` is the start of the id's tick (`epoch + tick * time_unit_ms`); the sequence
//! follows it at once, as Method 1's counter (exactly `rand_a` in the default layout: 12 bits),
//! then the worker id, then random bits. PostgreSQL compares `uuid`s bytewise, so on one server
//! (one worker id) the values sort by (tick, sequence): the state word's order. (T, S, W) is
//! unique, so the UUID is, whatever its random bits. RFC 9562 §6.4 says an embedded node id
//! SHOULD use version 8; version 7 is chosen so that every v7 consumer
//! (`uuid_extract_timestamp()`, ORMs, indexes) accepts it, the deviation documented.
//!
//! The time field is the tick's start: exact for 1 ms ticks, the first millisecond of the tick
//! otherwise, and up to `idgen.max_drift_ms` ahead of the clock for a borrowed tick (§6.1 and
//! §6.2 allow both).

use thiserror::Error;

use super::layout::{Layout, Parts};

/// Bits after the version and around the variant: `rand_a` (12) and `rand_b` (62).
const X_BITS: u32 = 74;
/// The largest Unix millisecond a v7 UUID can hold (48 bits).
pub const MAX_UNIX_MS: i64 = (1 << 48) - 1;

/// Why bytes are not a Snowflake UUID of a layout, or a tick has no UUID.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum UuidError {
    /// Not version 7 with the RFC 9562 variant.
    #[error(
        "uuid is not an RFC 9562 version 7 uuid (version {version}, variant bits {variant:#04b})"
    )]
    NotV7 { version: u8, variant: u8 },
    /// Its time is not the start of a tick of the layout, or lies outside the layout.
    #[error("uuid's time {unix_ms} ms is not the start of a tick of this snowflake layout")]
    NotATick { unix_ms: i64 },
    /// The tick's start does not fit the 48-bit time field (before 1970 or after year 10889).
    #[error("tick starts at {unix_ms} ms, outside a version 7 uuid's 48-bit time")]
    TimeOutOfRange { unix_ms: i64 },
    /// The layout's worker and sequence fields leave no room (never for a valid layout:
    /// `worker_bits + sequence_bits <= 31`).
    #[error("worker and sequence bits ({0}) exceed the uuid's 74 free bits")]
    TooWide(u32),
}

/// The UUID (16 bytes, big-endian) of (tick, worker, sequence) of `layout`, with `random`'s low
/// bits in the free positions. The caller guarantees `worker <= max_worker()` and
/// `sequence <= max_sequence()`.
pub fn compose(layout: &Layout, parts: Parts, random: u128) -> Result<[u8; 16], UuidError> {
    let (sb, wb) = (layout.sequence_bits(), layout.worker_bits());
    let n = sb + wb;
    if n > X_BITS {
        return Err(UuidError::TooWide(n));
    }
    let unix_ms = layout.unix_ms_of_tick(parts.tick);
    if !(0..=MAX_UNIX_MS).contains(&unix_ms) {
        return Err(UuidError::TimeOutOfRange { unix_ms });
    }
    let free = X_BITS - n;
    let random_mask = if free == 0 { 0 } else { (1u128 << free) - 1 };
    let x: u128 = ((parts.sequence as u128) << (X_BITS - sb))
        | ((parts.worker as u128) << free)
        | (random & random_mask);
    let value: u128 = ((unix_ms as u128) << 80)
        | (0x7u128 << 76)
        | ((x >> 62) << 64)
        | (0x2u128 << 62)
        | (x & ((1u128 << 62) - 1));
    Ok(value.to_be_bytes())
}

/// The (tick, worker, sequence) of a Snowflake UUID of `layout`: the inverse of [`compose`]
/// (the random bits are dropped). A foreign v7 UUID whose time happens to start a tick decodes
/// to meaningless parts, as a foreign bigint does.
pub fn decode(layout: &Layout, bytes: [u8; 16]) -> Result<Parts, UuidError> {
    let value = u128::from_be_bytes(bytes);
    let version = ((value >> 76) & 0xf) as u8;
    let variant = ((value >> 62) & 0x3) as u8;
    if version != 7 || variant != 0b10 {
        return Err(UuidError::NotV7 { version, variant });
    }
    let unix_ms = (value >> 80) as i64;
    let since = unix_ms - layout.epoch_unix_ms();
    let unit = layout.time_unit_ms() as i64;
    if since < 0 || since % unit != 0 {
        return Err(UuidError::NotATick { unix_ms });
    }
    let tick = (since / unit) as u64;
    if tick > layout.max_tick() {
        return Err(UuidError::NotATick { unix_ms });
    }
    let (sb, wb) = (layout.sequence_bits(), layout.worker_bits());
    let x = (((value >> 64) & 0xfff) << 62) | (value & ((1u128 << 62) - 1));
    let sequence = if sb == 0 {
        0
    } else {
        (x >> (X_BITS - sb)) as u64
    };
    let worker = ((x >> (X_BITS - sb - wb)) as u64) & layout.max_worker();
    Ok(Parts {
        tick,
        worker,
        sequence,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn layouts() -> impl Strategy<Value = Layout> {
        (0u32..=12, 0u32..=19, 1u32..=1000)
            .prop_filter("fits", |(w, s, _)| w + s <= 31)
            .prop_map(|(w, s, u)| Layout::new(1_704_067_200_000, w, s, u).unwrap())
    }

    fn parts_of(layout: Layout) -> impl Strategy<Value = (Layout, Parts)> {
        let max_tick = layout
            .max_tick()
            .min((MAX_UNIX_MS as u64 - 1_704_067_200_000) / layout.time_unit_ms() as u64);
        (
            0..=max_tick,
            0..=layout.max_worker(),
            0..=layout.max_sequence(),
        )
            .prop_map(move |(tick, worker, sequence)| {
                (
                    layout,
                    Parts {
                        tick,
                        worker,
                        sequence,
                    },
                )
            })
    }

    #[test]
    fn the_default_layout_puts_the_sequence_in_rand_a_and_the_worker_after_the_variant() {
        let l = Layout::default();
        let b = compose(
            &l,
            Parts {
                tick: 0,
                worker: 0x3ff,
                sequence: 0xabc,
            },
            0,
        )
        .unwrap();
        // 2024-01-01 in ms: 0x018cc251f400.
        assert_eq!(&b[..6], &[0x01, 0x8c, 0xc2, 0x51, 0xf4, 0x00]);
        assert_eq!((b[6], b[7]), (0x7a, 0xbc), "version 7, then the sequence");
        assert_eq!(
            b[8],
            0x80 | 0x3f,
            "variant 10, then the worker's top six bits"
        );
        assert_eq!(b[9] >> 4, 0xf, "the worker's low four bits");
    }

    proptest! {
        /// Every UUID is v7 with the RFC variant and decodes to its parts.
        #[test]
        fn every_uuid_is_v7_and_decodes_to_its_parts(
            (l, p) in layouts().prop_flat_map(parts_of),
            random in any::<u128>(),
        ) {
            let b = compose(&l, p, random).unwrap();
            prop_assert_eq!(b[6] >> 4, 7);
            prop_assert_eq!(b[8] >> 6, 0b10);
            prop_assert_eq!(decode(&l, b).unwrap(), p);
        }

        /// On one server (one worker id), a later state word gives a greater UUID, bytewise
        /// (PostgreSQL's uuid order), whatever the random bits.
        #[test]
        fn a_later_state_gives_a_greater_uuid(
            (l, p) in layouts().prop_flat_map(parts_of),
            later in 1u64..1_000_000,
            r1 in any::<u128>(),
            r2 in any::<u128>(),
        ) {
            let state = l.state(p.tick, p.sequence) + later;
            let q = Parts { tick: l.state_tick(state), worker: p.worker, sequence: state & l.max_sequence() };
            prop_assume!(q.tick <= l.max_tick()
                && l.unix_ms_of_tick(q.tick) <= MAX_UNIX_MS);
            prop_assert!(compose(&l, p, r1).unwrap() < compose(&l, q, r2).unwrap());
        }

        /// Distinct (tick, worker, sequence) give distinct UUIDs, whatever the random bits.
        #[test]
        fn distinct_parts_give_distinct_uuids(
            (l, p) in layouts().prop_flat_map(parts_of),
            other_worker in any::<u64>(),
            r1 in any::<u128>(),
            r2 in any::<u128>(),
        ) {
            let q = Parts { worker: other_worker & l.max_worker(), ..p };
            prop_assume!(q != p);
            prop_assert_ne!(compose(&l, p, r1).unwrap(), compose(&l, q, r2).unwrap());
        }
    }

    #[test]
    fn foreign_uuids_are_refused() {
        let l = Layout::default();
        // A version 4 UUID.
        let v4 = 0x550e8400_e29b_41d4_a716_446655440000u128.to_be_bytes();
        assert!(matches!(
            decode(&l, v4),
            Err(UuidError::NotV7 { version: 4, .. })
        ));
        // A v7 before the epoch.
        let early = ((1u128 << 80) | (0x7u128 << 76) | (0x2u128 << 62)).to_be_bytes();
        assert!(matches!(decode(&l, early), Err(UuidError::NotATick { .. })));
        // A v7 in the middle of a 10 ms tick.
        let sonyflake = Layout::new(1_704_067_200_000, 16, 8, 10).unwrap();
        let mid =
            (((1_704_067_200_005u128) << 80) | (0x7u128 << 76) | (0x2u128 << 62)).to_be_bytes();
        assert!(matches!(
            decode(&sonyflake, mid),
            Err(UuidError::NotATick { .. })
        ));
    }
}
