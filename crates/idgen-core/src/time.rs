//! The system clocks read in milliseconds with `clock_gettime`: the wall clock for both
//! generators and the registry client, the monotonic and boot-time clocks for intervals. The
//! extension's `crate::time` re-exports these and adds PostgreSQL's `TimestampTz`; the Snowflake
//! generator's own millisecond gate is in [`crate::snowflake::clock`].

/// Nanoseconds per millisecond.
pub const NS_PER_MS: u64 = 1_000_000;

/// `clock` as (whole ms, rounded down also before 1970; ns into that ms).
pub fn read_clock(clock: libc::clockid_t) -> (i64, u64) {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid out pointer; the clocks read here (REALTIME, MONOTONIC, BOOTTIME) exist on
    // Linux, so the call cannot fail.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    // tv_nsec is in 0..1e9, so the division rounds down even for negative tv_sec.
    let ms = ts.tv_sec * 1000 + ts.tv_nsec / NS_PER_MS as i64;
    (ms, ts.tv_nsec as u64 % NS_PER_MS)
}

/// The wall clock in Unix milliseconds (negative before 1970), read now.
pub fn wall_clock_unix_ms() -> i64 {
    read_clock(libc::CLOCK_REALTIME).0
}

/// The wall clock in Unix microseconds, read now: the registry client's clock measurements.
pub fn wall_clock_unix_us() -> i64 {
    let (ms, ns) = read_clock(libc::CLOCK_REALTIME);
    ms * 1000 + (ns / 1000) as i64
}

/// CLOCK_MONOTONIC in ms: the same in every process, unaffected by steps of the wall clock.
pub fn monotonic_ms() -> i64 {
    read_clock(libc::CLOCK_MONOTONIC).0
}

/// CLOCK_BOOTTIME in ms: as [`monotonic_ms`], but counting the time the machine was suspended
/// too (a node suspended for hours must find its registry contact hours old when it resumes).
pub fn boottime_ms() -> i64 {
    read_clock(libc::CLOCK_BOOTTIME).0
}
