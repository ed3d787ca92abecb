//! Conversions between Snowflake ids, ticks and `timestamptz`, for decode, compose and status.
//! The bit arithmetic is in [`super::layout`]; this adds PostgreSQL's time type.

use pgrx::datetime::TimestampWithTimeZone;
use pgrx::pg_sys;

use super::layout::{Layout, Parts};
use crate::error::Error;

/// Unix milliseconds of PostgreSQL's epoch, 2000-01-01 00:00:00+00 (`timestamptz` counts
/// microseconds from there).
const PG_EPOCH_UNIX_MS: i64 = 946_684_800_000;

/// Unix milliseconds of a finite `timestamptz`, rounded down to the millisecond.
pub fn timestamptz_to_unix_ms(ts: TimestampWithTimeZone) -> i64 {
    let micros: pg_sys::TimestampTz = ts.into();
    micros.div_euclid(1000) + PG_EPOCH_UNIX_MS
}

/// The `timestamptz` of Unix milliseconds. Errors with 22008 outside `timestamptz`'s range.
pub fn unix_ms_to_timestamptz(ms: i64) -> Result<TimestampWithTimeZone, Error> {
    let micros = (ms as i128 - PG_EPOCH_UNIX_MS as i128) * 1000;
    i64::try_from(micros)
        .ok()
        .and_then(|m| TimestampWithTimeZone::try_from(m).ok())
        .ok_or_else(|| Error::TimestampOutOfRange {
            detail: format!("Unix time {ms} ms is outside timestamptz."),
        })
}

/// The time at which `tick` starts.
pub fn tick_start(layout: &Layout, tick: u64) -> Result<TimestampWithTimeZone, Error> {
    unix_ms_to_timestamptz(layout.unix_ms_of_tick(tick))
}

/// The parts of `id` with its tick as a time. Errors with 22023 for a negative id.
pub fn decode(layout: &Layout, id: i64) -> Result<(TimestampWithTimeZone, Parts), Error> {
    let parts = layout.decode(id)?;
    Ok((tick_start(layout, parts.tick)?, parts))
}

/// The id for (time, worker, sequence): the lowest id at `ts` for that worker and sequence.
/// Errors with 22008 for a time outside the layout (or infinite), 22003 for a worker id or
/// sequence that does not fit.
pub fn compose(
    layout: &Layout,
    ts: TimestampWithTimeZone,
    worker: i64,
    sequence: i64,
) -> Result<i64, Error> {
    if !ts.is_finite() {
        return Err(Error::TimestampOutOfRange {
            detail: "An infinite timestamp has no snowflake id.".into(),
        });
    }
    let tick = layout.tick_at(timestamptz_to_unix_ms(ts))?;
    Ok(layout.compose(tick, worker, sequence)?)
}
