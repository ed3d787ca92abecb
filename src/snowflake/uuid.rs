//! Snowflake UUIDs on the SQL surface: RFC 9562 version-7 `uuid`s drawn from the same state word
//! as `snowflake_nextval()`, so they carry its guarantees (strictly increasing per server across
//! backends, restarts, crashes and promotions; distinct across servers with distinct worker ids).
//! The bit layout is `idgen_core::snowflake::uuid`'s; here: the draw, the random bits, and the
//! conversions to and from `bigint` ids.

use std::cell::RefCell;

use idgen_core::snowflake::layout::{Layout, Parts};
use idgen_core::snowflake::uuid::{self, UuidError};
use pgrx::pg_sys;

use super::issue::{self, Caller};
use super::shared::layout;
use crate::error::Error;

/// Random bytes drawn per refill of [`RANDOM`]: 256 UUIDs' worth, one `pg_strong_random` call
/// (a system call, or OpenSSL's generator) per 256 UUIDs instead of one per UUID.
const RANDOM_BATCH: usize = 16 * 256;

/// This backend's unused CSPRNG output. Filled only in the backend that uses it (never in the
/// postmaster), so no two processes share bytes.
struct RandomPool {
    bytes: Vec<u8>,
    next: usize,
}

thread_local! {
    static RANDOM: RefCell<RandomPool> = const {
        RefCell::new(RandomPool { bytes: Vec::new(), next: 0 })
    };
}

/// 128 bits from the operating system's CSPRNG (`pg_strong_random`, as `gen_random_uuid()` and
/// `uuidv7()` use). Fails with XX000 when it fails, as PostgreSQL's own callers do.
fn random_u128() -> u128 {
    RANDOM.with(|pool| {
        let mut pool = pool.borrow_mut();
        if pool.next + 16 > pool.bytes.len() {
            pool.bytes.resize(RANDOM_BATCH, 0);
            // SAFETY: a valid, writable buffer of RANDOM_BATCH bytes.
            let ok =
                unsafe { pg_sys::pg_strong_random(pool.bytes.as_mut_ptr().cast(), RANDOM_BATCH) };
            if !ok {
                pool.bytes.clear();
                // pgrx raises a panic as an ERROR with XX000 (gen_random_uuid()'s failure).
                panic!("could not generate random values");
            }
            pool.next = 0;
        }
        let at = pool.next;
        let mut word = [0u8; 16];
        word.copy_from_slice(&pool.bytes[at..at + 16]);
        // Used bytes are not kept around for a later reader of the process's memory.
        pool.bytes[at..at + 16].fill(0);
        pool.next = at + 16;
        u128::from_ne_bytes(word)
    })
}

/// A new Snowflake UUID: one state word from the generator (as `snowflake_nextval()`), composed
/// with random bits. Errors: those of `snowflake_nextval()` (without setting `currval`), and
/// 22008 when the tick's start does not fit the 48-bit time field.
pub(crate) fn next() -> Result<[u8; 16], Error> {
    let drawn = issue::reserve(1, Caller::Uuid)?;
    let layout = layout();
    let state = drawn.reservation.last;
    let parts = Parts {
        tick: layout.state_tick(state),
        worker: drawn.worker,
        sequence: state & layout.max_sequence(),
    };
    compose(layout, parts, random_u128())
}

/// The UUID of `parts` with `random` in the free bits.
fn compose(layout: &Layout, parts: Parts, random: u128) -> Result<[u8; 16], Error> {
    uuid::compose(layout, parts, random).map_err(|e| match e {
        UuidError::TimeOutOfRange { unix_ms } => Error::TimestampOutOfRange {
            detail: format!(
                "The tick starts at Unix time {unix_ms} ms; a version 7 uuid holds 0 to {} ms.",
                uuid::MAX_UNIX_MS
            ),
        },
        // A valid layout's worker and sequence fields (at most 31 bits) always fit the 74.
        other => panic!("{other}"),
    })
}

/// The parts of a Snowflake UUID under this server's layout. Errors with 22023 when it is not
/// version 7 with RFC 9562's variant, or its time is not the start of one of the layout's ticks.
pub(crate) fn decode(bytes: [u8; 16]) -> Result<Parts, Error> {
    uuid::decode(layout(), bytes).map_err(|e| Error::NotASnowflakeUuid {
        uuid: pgrx::Uuid::from_bytes(bytes).to_string(),
        why: match e {
            UuidError::NotV7 { .. } => format!("{}.", capitalised(&e.to_string())),
            UuidError::NotATick { .. } => format!(
                "{}: idgen.epoch {} ms, idgen.time_unit_ms {}.",
                capitalised(&e.to_string()),
                layout().epoch_unix_ms(),
                layout().time_unit_ms()
            ),
            other => other.to_string(),
        },
    })
}

/// The `bigint` Snowflake id with the UUID's tick, worker id and sequence. Errors as [`decode`].
pub(crate) fn to_id(bytes: [u8; 16]) -> Result<i64, Error> {
    let layout = layout();
    let parts = decode(bytes)?;
    layout
        .compose(parts.tick, parts.worker as i64, parts.sequence as i64)
        .map_err(Error::from)
}

/// The canonical Snowflake UUID of a `bigint` id: its tick, worker id and sequence, every random
/// bit zero, so that `to_id(from_id(id)) = id`. Errors: 22023 for a negative id or one not below
/// `2^idgen.id_bits`; 22008 when its tick's start does not fit the 48-bit time field.
pub(crate) fn from_id(id: i64) -> Result<[u8; 16], Error> {
    let layout = layout();
    let parts = layout.decode(id)?;
    compose(layout, parts, 0)
}

fn capitalised(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}
