//! Watching the wall clock: every reading of the generator is compared with the highest reading
//! any process has seen, and a clock that stepped back is counted and logged (rate-limited);
//! the reservation keeper watches the kernel's clocksource and closes every process's TSC gate
//! when it is no longer the TSC. Uniqueness never depends on the clock (DESIGN.md §1): this is
//! for the operator.

use std::sync::atomic::Ordering;

use idgen_core::snowflake::clock;
use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;

use super::shared::{shared, SnowflakeShared};
use crate::guc;

/// A wall-clock reading this far below an earlier one counts as a regression. Readings are
/// ordered (a caller loads the highest reading before it reads the clock), so only a clock that
/// really stepped back falls below; 1 ms absorbs rounding to milliseconds.
pub(crate) const REGRESSION_TOLERANCE_MS: i64 = 1;

/// At most one clock-regression WARNING per this many ms, per server.
const WARNING_INTERVAL_MS: i64 = 10_000;

/// Reads the wall clock and notes a regression: a reading below the highest one any caller
/// has seen. The highest reading is loaded *before* the clock is read, so a clock that did not
/// step back can never read below it.
#[inline]
pub(crate) fn read_clock(shared: &SnowflakeShared) -> i64 {
    let seen = shared.clock_seen_ms.0.load(Ordering::Acquire);
    let now_ms = clock::now_ms();
    if now_ms > seen {
        shared.clock_seen_ms.0.fetch_max(now_ms, Ordering::AcqRel);
    } else if now_ms < seen - REGRESSION_TOLERANCE_MS
        && shared
            .clock_seen_ms
            .0
            .compare_exchange(seen, now_ms, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
    {
        // The one caller whose CAS lowered the mark counts this regression.
        regression(shared, seen - now_ms, "moved backwards");
    }
    now_ms
}

/// Counts a clock regression of `by_ms` and logs it as a WARNING, at most one per
/// [`WARNING_INTERVAL_MS`] per server.
#[cold]
pub(crate) fn regression(shared: &SnowflakeShared, by_ms: i64, how: &str) {
    let counters = &shared.counters.0;
    let total = counters.regressions.fetch_add(1, Ordering::Relaxed) + 1;
    let now = crate::time::monotonic_ms();
    let last = counters.last_warning_ms.load(Ordering::Relaxed);
    let due = last == 0 || now - last >= WARNING_INTERVAL_MS;
    if due
        && counters
            .last_warning_ms
            .compare_exchange(last, now.max(1), Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    {
        let drift = match guc::max_drift_ms() {
            Some(ms) => format!("{ms} ms"),
            None => "unbounded".into(),
        };
        ErrorReport::new(
            PgSqlErrorCode::ERRCODE_WARNING,
            format!("idgen: the system clock {how} by {by_ms} ms"),
            "idgen",
        )
        .set_detail(format!(
            "Snowflake ids keep increasing: within idgen.max_drift_ms ({drift}) the generator stamps ids ahead of the clock; beyond it calls wait up to idgen.max_wait_ms ({} ms) and then fail with SQLSTATE 53400. Regressions since start: {total}.",
            guc::max_wait_ms()
        ))
        .set_hint("Check the time synchronisation of this machine (NTP steps, VM migration).")
        .report(PgLogLevel::WARNING);
    }
}

/// The reservation keeper's look at the clocksource, about once a second: when the kernel no
/// longer keeps time with the TSC (it marked it unstable), switches every process's TSC gate
/// off for good and says so in the log. The gate was calibrated once, at start.
pub(crate) fn watch_clocksource() {
    let off = &shared().counters.0.tsc_gate_off;
    if clock::gate_open() && !clock::tsc_clocksource() && !off.swap(true, Ordering::Relaxed) {
        pgrx::log!(
            "idgen: the kernel's clocksource is no longer tsc; snowflake_nextval() reads the clock for every id from now on"
        );
    }
}
