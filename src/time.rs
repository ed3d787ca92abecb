//! Time: the system clocks read in milliseconds (from `idgen_core::time`), PostgreSQL's
//! `TimestampTz` now, and the conversions between Unix milliseconds and `timestamptz`. Used by
//! both generators, the settings (`idgen.epoch`) and the segment cache; the Snowflake
//! generator's own millisecond gate is in `idgen_core::snowflake::clock`.

use pgrx::datetime::TimestampWithTimeZone;
use pgrx::pg_sys;

use crate::error::Error;

pub(crate) use idgen_core::time::{
    boottime_ms, monotonic_ms, wall_clock_unix_ms, wall_clock_unix_us,
};

/// Unix milliseconds of PostgreSQL's epoch, 2000-01-01 00:00:00+00 (`timestamptz` counts
/// microseconds from there).
const PG_EPOCH_UNIX_MS: i64 = 946_684_800_000;

/// The current time as PostgreSQL's `TimestampTz` (µs since 2000-01-01), as
/// `GetCurrentTimestamp` gives it: what the segment cache records and compares.
pub(crate) fn now_timestamptz_us() -> i64 {
    // SAFETY: GetCurrentTimestamp only reads the clock (gettimeofday); it raises no error.
    unsafe { pg_sys::GetCurrentTimestamp() }
}

/// Unix milliseconds of a finite `timestamptz`, rounded down to the millisecond.
pub(crate) fn timestamptz_to_unix_ms(ts: TimestampWithTimeZone) -> i64 {
    let micros: pg_sys::TimestampTz = ts.into();
    micros.div_euclid(1000) + PG_EPOCH_UNIX_MS
}

/// The `timestamptz` of Unix milliseconds. Errors with 22008 outside `timestamptz`'s range.
pub(crate) fn unix_ms_to_timestamptz(ms: i64) -> Result<TimestampWithTimeZone, Error> {
    let micros = (ms as i128 - PG_EPOCH_UNIX_MS as i128) * 1000;
    i64::try_from(micros)
        .ok()
        .and_then(|m| TimestampWithTimeZone::try_from(m).ok())
        .ok_or_else(|| Error::TimestampOutOfRange {
            detail: format!("Unix time {ms} ms is outside timestamptz."),
        })
}
