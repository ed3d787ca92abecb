//! Time: the system clocks read in milliseconds, PostgreSQL's `TimestampTz` now, and the
//! conversions between Unix milliseconds and `timestamptz`. Used by both generators, the
//! settings (`idgen.epoch`) and the segment cache; the Snowflake generator's own millisecond
//! gate is in `snowflake::clock`.

use pgrx::datetime::TimestampWithTimeZone;
use pgrx::pg_sys;

use crate::error::Error;

/// Nanoseconds per millisecond.
pub(crate) const NS_PER_MS: u64 = 1_000_000;

/// Unix milliseconds of PostgreSQL's epoch, 2000-01-01 00:00:00+00 (`timestamptz` counts
/// microseconds from there).
const PG_EPOCH_UNIX_MS: i64 = 946_684_800_000;

/// `clock` as (whole ms, rounded down also before 1970; ns into that ms).
pub(crate) fn read_clock(clock: libc::clockid_t) -> (i64, u64) {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid out pointer; the clocks read here (REALTIME, MONOTONIC) always exist on
    // Linux, so the call cannot fail.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    // tv_nsec is in 0..1e9, so the division rounds down even for negative tv_sec.
    let ms = ts.tv_sec * 1000 + ts.tv_nsec / NS_PER_MS as i64;
    (ms, ts.tv_nsec as u64 % NS_PER_MS)
}

/// The wall clock in Unix milliseconds (negative before 1970), read now.
pub(crate) fn wall_clock_unix_ms() -> i64 {
    read_clock(libc::CLOCK_REALTIME).0
}

/// The wall clock in Unix microseconds, read now: the registry client's clock measurements.
pub(crate) fn wall_clock_unix_us() -> i64 {
    let (ms, ns) = read_clock(libc::CLOCK_REALTIME);
    ms * 1000 + (ns / 1000) as i64
}

/// CLOCK_MONOTONIC in ms: the same in every process, unaffected by steps of the wall clock.
pub(crate) fn monotonic_ms() -> i64 {
    read_clock(libc::CLOCK_MONOTONIC).0
}

/// CLOCK_BOOTTIME in ms: as [`monotonic_ms`], but counting the time the machine was suspended
/// too (a node suspended for hours must find its registry contact hours old when it resumes).
pub(crate) fn boottime_ms() -> i64 {
    read_clock(libc::CLOCK_BOOTTIME).0
}

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
