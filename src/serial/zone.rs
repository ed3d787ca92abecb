//! A serial's time zone: an IANA zone, resolved by PostgreSQL's own time zone code (`pg_tzset`,
//! the zone files `pg_timezone_names` lists), so that the period and the printed time of a
//! draw do not depend on the session: an abbreviation (`PST`) is read through each session's
//! `timezone_abbreviations`, and a POSIX offset (`UTC+3`) has the sign the other way round
//! from ISO 8601, so both are refused.

use std::ffi::CString;

use pgrx::pg_sys;

use super::format::{LocalTime, Reset};
use crate::error::Error;

/// A resolved zone: PostgreSQL's `pg_tz`, which `pg_tzset` keeps for the life of the process.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Zone(*mut pg_sys::pg_tz);

impl Zone {
    /// Resolves `name`, which [`super::catalog::check_zone`] accepted when the serial was
    /// created. Errors: 22023 when PostgreSQL cannot load it (its zone file went away).
    pub(crate) fn resolve(name: &str) -> Result<Zone, Error> {
        let invalid = || Error::InvalidSerialTimeZone {
            zone: name.chars().take(64).collect(),
        };
        let c = CString::new(name).map_err(|_| invalid())?;
        // SAFETY: a NUL-terminated name; pg_tzset returns NULL or a zone cached for the life of
        // the process, and raises no error.
        let tz = unsafe { pg_sys::pg_tzset(c.as_ptr()) };
        if tz.is_null() {
            return Err(invalid());
        }
        Ok(Zone(tz))
    }

    /// The local time of `at` (a `TimestampTz`, µs since 2000-01-01 UTC) in this zone, to the
    /// millisecond (truncated). Errors: 22008 a time PostgreSQL cannot show.
    pub(crate) fn local(self, at: i64) -> Result<LocalTime, Error> {
        let mut tm = pg_sys::pg_tm::default();
        let mut fsec: pg_sys::fsec_t = 0;
        let mut offset: i32 = 0;
        // SAFETY: plain out-parameters; timestamp2tm reads the zone, returns -1 for a time out
        // of range, and raises no error.
        let rc = unsafe {
            pg_sys::timestamp2tm(
                at,
                &mut offset,
                &mut tm,
                &mut fsec,
                std::ptr::null_mut(),
                self.0,
            )
        };
        if rc != 0 {
            return Err(Error::TimestampOutOfRange {
                detail: "The draw's time cannot be shown in the serial's time zone.".into(),
            });
        }
        Ok(LocalTime {
            year: tm.tm_year,
            month: tm.tm_mon as u8,
            day: tm.tm_mday as u8,
            hour: tm.tm_hour as u8,
            minute: tm.tm_min as u8,
            second: tm.tm_sec as u8,
            // fsec: microseconds within the second, 0..=999_999.
            milli: (fsec / 1000) as u16,
        })
    }
}

/// The period a local time falls in, as a number (`YYYYMMDD`, `YYYYMM`, `YYYY`, or 0 for a
/// counter that never restarts): the key of its counter in shared memory.
pub(crate) fn period_key(reset: Reset, t: &LocalTime) -> i32 {
    let (y, m, d) = (t.year, i32::from(t.month), i32::from(t.day));
    match reset {
        Reset::Day => y * 10_000 + m * 100 + d,
        Reset::Month => y * 100 + m,
        Reset::Year => y,
        Reset::Never => 0,
    }
}

/// The period as stored in `idgen_serial_counter.period` (as idgen 0.4.0 wrote it: `YYYYMMDD`,
/// `YYYYMM`, `YYYY`, or '' for a counter that never restarts).
pub(crate) fn period_text(reset: Reset, key: i32) -> String {
    match reset {
        Reset::Day => format!("{key:08}"),
        Reset::Month => format!("{key:06}"),
        Reset::Year => format!("{key:04}"),
        Reset::Never => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(year: i32, month: u8, day: u8) -> LocalTime {
        LocalTime {
            year,
            month,
            day,
            hour: 23,
            minute: 59,
            second: 59,
            milli: 999,
        }
    }

    #[test]
    fn periods_are_keys_and_texts_of_the_reset() {
        let at = t(2026, 11, 5);
        assert_eq!(period_key(Reset::Day, &at), 20261105);
        assert_eq!(period_key(Reset::Month, &at), 202611);
        assert_eq!(period_key(Reset::Year, &at), 2026);
        assert_eq!(period_key(Reset::Never, &at), 0);
        assert_eq!(period_text(Reset::Day, 20261105), "20261105");
        assert_eq!(period_text(Reset::Month, 202611), "202611");
        assert_eq!(period_text(Reset::Year, 2026), "2026");
        assert_eq!(period_text(Reset::Never, 0), "");
    }
}
