//! The hot path's millisecond gate over the wall clock ([`crate::time`] reads the clocks).
//!
//! Every id needs the wall clock's millisecond. Read with `clock_gettime` (the vDSO) that is
//! 21.5 ns here, the largest single cost of `snowflake_nextval()`, although the millisecond
//! changes only once per 4,096 ids of a busy generator. When the kernel itself keeps time with
//! the TSC (clocksource `tsc`: invariant, synchronised across CPUs), [`now_ms`] reads the TSC
//! (8.6 ns) instead and reuses the last millisecond while the TSC says the next millisecond
//! boundary cannot have passed yet: the *gate* is the TSC interval from just before the last
//! real reading to the earliest TSC value the boundary can occur at, computed with a
//! deliberately low TSC rate ([`calibrate`], [`gate_until`]). The millisecond returned is the
//! one `clock_gettime` would have given, never a later one; a clock step is seen at the next
//! boundary, at most 1 ms late. Uniqueness never depends on the clock: the state word only
//! moves forward (DESIGN.md §1).
//!
//! Without the TSC clocksource (or off x86-64) the gate is closed and every call reads the
//! clock, as before. The kernel may stop trusting the TSC while the server runs ("Marking
//! clocksource 'tsc' as unstable", then another clocksource): the reservation keeper watches
//! the clocksource and sets a shared flag ([`attach_gate_switch`]); each process closes its
//! gate for good at its next reading after that, within a millisecond.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicPtr, AtomicU64, Ordering};

use crate::time::{read_clock, wall_clock_unix_ms, NS_PER_MS};

/// TSC cycles per nanosecond, as a fixed-point number with this many fraction bits.
const RATE_FRACTION_BITS: u32 = 32;

/// How much below the measured TSC rate the gate assumes: 1 %. CLOCK_REALTIME may be slewed
/// against the TSC by NTP (at most 0.05 %); the rest is margin.
const RATE_MARGIN_PERCENT: u64 = 1;

/// How long [`calibrate`] measures, in ns: the readings' jitter (tens of ns) is then below
/// 0.01 % of the interval.
const CALIBRATION_NS: u64 = 2_000_000;

/// The TSC rate the gate uses, cycles per ns in 32.32 fixed point; 0 keeps the gate closed.
/// Set once by [`calibrate`] in the postmaster and inherited by every backend.
static RATE: AtomicU64 = AtomicU64::new(0);

/// The shared "gate off" flag ([`attach_gate_switch`]); null until attached.
static GATE_OFF: AtomicPtr<AtomicBool> = AtomicPtr::new(std::ptr::null_mut());

/// Makes every process close its gate once `flag` is set (a flag in shared memory, set when the
/// kernel's clocksource is no longer the TSC). Called in the postmaster, inherited by every
/// backend.
pub fn attach_gate_switch(flag: &'static AtomicBool) {
    GATE_OFF.store(std::ptr::from_ref(flag).cast_mut(), Ordering::Relaxed);
}

/// Whether the gate was switched off for every process.
fn gate_switched_off() -> bool {
    let flag = GATE_OFF.load(Ordering::Relaxed);
    // SAFETY: null, or a flag in shared memory that outlives every process using it.
    !flag.is_null() && unsafe { (*flag).load(Ordering::Relaxed) }
}

/// Whether this process serves milliseconds from the TSC gate (calibrated, not switched off).
pub fn gate_open() -> bool {
    RATE.load(Ordering::Relaxed) != 0 && !gate_switched_off()
}

/// Whether the kernel keeps time with the TSC now (its current clocksource is `tsc`).
pub fn tsc_clocksource() -> bool {
    const SOURCE: &str = "/sys/devices/system/clocksource/clocksource0/current_clocksource";
    std::fs::read_to_string(SOURCE).is_ok_and(|s| s.trim() == "tsc")
}

/// The gate: while `GATE_FROM <= tsc < GATE_UNTIL`, the wall clock's millisecond is
/// `GATE_MS`. Per process (a backend is one thread), so relaxed loads are plain moves.
static GATE_FROM: AtomicU64 = AtomicU64::new(0);
static GATE_UNTIL: AtomicU64 = AtomicU64::new(0);
static GATE_MS: AtomicI64 = AtomicI64::new(0);

/// The wall clock's current Unix millisecond for the generator: [`wall_clock_unix_ms`], served
/// from the gate when the TSC says the millisecond has not changed since the last reading.
#[inline]
pub fn now_ms() -> i64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: RDTSC exists on every x86-64 CPU.
        let tsc = unsafe { core::arch::x86_64::_rdtsc() };
        let from = GATE_FROM.load(Ordering::Relaxed);
        // One comparison for from <= tsc < until; an empty gate (until == from) never holds.
        if tsc.wrapping_sub(from) < GATE_UNTIL.load(Ordering::Relaxed).wrapping_sub(from) {
            return GATE_MS.load(Ordering::Relaxed);
        }
    }
    refresh()
}

/// Reads the clock and, when the gate is calibrated, reopens it up to the next millisecond
/// boundary. About once per millisecond on a busy generator.
#[inline(never)]
fn refresh() -> i64 {
    let mut rate = RATE.load(Ordering::Relaxed);
    if rate != 0 && gate_switched_off() {
        // The kernel no longer trusts the TSC: closed for good in this process.
        RATE.store(0, Ordering::Relaxed);
        GATE_UNTIL.store(GATE_FROM.load(Ordering::Relaxed), Ordering::Relaxed);
        rate = 0;
    }
    #[cfg(target_arch = "x86_64")]
    if rate != 0 {
        // The TSC before the reading: the boundary is at least `to_boundary` ns after it.
        let from = tsc_ordered();
        let (ms, ns_in_ms) = read_clock(libc::CLOCK_REALTIME);
        GATE_FROM.store(from, Ordering::Relaxed);
        GATE_UNTIL.store(gate_until(from, ns_in_ms, rate), Ordering::Relaxed);
        GATE_MS.store(ms, Ordering::Relaxed);
        return ms;
    }
    let _ = rate;
    wall_clock_unix_ms()
}

/// The first TSC value at which the millisecond read `ns_in_ms` ns into it, with the TSC at
/// `from` before the reading, may have ended: `from + (1 ms - ns_in_ms) × rate`. A low `rate`
/// ends the gate early, which only costs a reading; it never serves a millisecond that ended.
pub fn gate_until(from: u64, ns_in_ms: u64, rate: u64) -> u64 {
    let to_boundary = NS_PER_MS - ns_in_ms.min(NS_PER_MS - 1);
    let cycles = (u128::from(to_boundary) * u128::from(rate)) >> RATE_FRACTION_BITS;
    from.saturating_add(cycles as u64)
}

/// A clock reading between two TSC readings: the TSC was in `before..=after` when the clock
/// read `ns`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bracket {
    /// TSC just before the clock reading.
    pub before: u64,
    /// The clock, in ns.
    pub ns: u64,
    /// TSC just after the clock reading.
    pub after: u64,
}

/// The gate's TSC rate from two brackets of CLOCK_MONOTONIC_RAW, in 32.32 fixed-point cycles
/// per ns: the least number of cycles that can have passed (`end.before - start.after`) over
/// the interval, less `RATE_MARGIN_PERCENT` (1 %). `None` when the brackets are unusable: out of
/// order, too short, too wide (the process was preempted inside one: a retry is needed), or
/// a rate outside 0.1–20 GHz.
pub fn rate_from(start: Bracket, end: Bracket) -> Option<u64> {
    let ns = end.ns.checked_sub(start.ns)?;
    let least = end.before.checked_sub(start.after)?;
    let most = end.after.checked_sub(start.before)?;
    if ns < CALIBRATION_NS / 2 || most - least > least / 1000 {
        return None;
    }
    let ghz_min = (ns / 10) as u128; // 0.1 cycles per ns
    let ghz_max = ns as u128 * 20;
    let cycles = u128::from(least);
    if cycles < ghz_min || cycles > ghz_max {
        return None;
    }
    let rate = (cycles << RATE_FRACTION_BITS) / u128::from(ns);
    Some((rate * u128::from(100 - RATE_MARGIN_PERCENT) / 100) as u64)
}

/// Calibrates the gate, once, in the postmaster (`_PG_init`): measures the TSC against
/// CLOCK_MONOTONIC_RAW over about 2 ms. Leaves the gate closed unless the kernel's clocksource
/// is `tsc`, or when three measurements are all unusable. Returns whether the gate is open.
pub fn calibrate() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        if tsc_clocksource() {
            // A clock that does not advance must not hold up the postmaster: give up after
            // 50 ms (by CLOCK_MONOTONIC), leaving the gate closed.
            let give_up = std::time::Instant::now() + std::time::Duration::from_millis(50);
            for _ in 0..3 {
                let start = bracket();
                while raw_ns() < start.ns + CALIBRATION_NS {
                    if std::time::Instant::now() > give_up {
                        return false;
                    }
                    std::hint::spin_loop();
                }
                if let Some(rate) = rate_from(start, bracket()) {
                    RATE.store(rate, Ordering::Relaxed);
                    return true;
                }
            }
        }
    }
    false
}

/// CLOCK_MONOTONIC_RAW in ns: the TSC scaled, without NTP's slewing or steps.
#[cfg(target_arch = "x86_64")]
fn raw_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid out pointer; CLOCK_MONOTONIC_RAW exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_RAW, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(target_arch = "x86_64")]
fn bracket() -> Bracket {
    let before = tsc_ordered();
    let ns = raw_ns();
    let after = tsc_ordered();
    Bracket { before, ns, after }
}

/// The TSC, read after every earlier instruction has completed (LFENCE; RDTSC, as the kernel's
/// `rdtsc_ordered`), so that it is not taken later than it appears.
#[cfg(target_arch = "x86_64")]
fn tsc_ordered() -> u64 {
    // SAFETY: LFENCE and RDTSC exist on every x86-64 CPU.
    unsafe {
        core::arch::x86_64::_mm_lfence();
        core::arch::x86_64::_rdtsc()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2.5 cycles per ns in 32.32.
    const RATE_2_5: u64 = 5 << 31;

    #[test]
    fn gate_ends_no_later_than_the_boundary_at_the_given_rate() {
        // 400,000 ns into the ms: 600,000 ns to go = 1,500,000 cycles at 2.5 per ns.
        assert_eq!(gate_until(1_000, 400_000, RATE_2_5), 1_501_000);
        // At the boundary's last ns, one ns to go.
        assert_eq!(gate_until(0, 999_999, RATE_2_5), 2);
        // Right at a boundary, a whole ms.
        assert_eq!(gate_until(0, 0, RATE_2_5), 2_500_000);
        // Never wraps.
        assert_eq!(gate_until(u64::MAX - 1, 0, RATE_2_5), u64::MAX);
    }

    fn b(before: u64, ns: u64, after: u64) -> Bracket {
        Bracket { before, ns, after }
    }

    #[test]
    fn rate_is_the_least_cycles_over_the_interval_less_the_margin() {
        // 2 ms at exactly 2.5 GHz, readings 40 cycles wide.
        let start = b(1_000, 10_000_000, 1_040);
        let end = b(5_001_040, 12_000_000, 5_001_080);
        let rate = rate_from(start, end).expect("usable");
        let exact = 5_000_000.0 / 2_000_000.0 * (1u64 << 32) as f64;
        let got = rate as f64;
        assert!(
            got < exact * 0.99 + 1.0 && got > exact * 0.989,
            "{got} vs {exact}"
        );
        // The gate's rate then ends every gate before the true boundary.
        assert!(gate_until(0, 0, rate) < 2_500_000);
    }

    #[test]
    fn unusable_brackets_are_refused() {
        let start = b(1_000, 10_000_000, 1_040);
        // Preempted inside the end bracket: 1 ms of cycles between before and after.
        assert_eq!(rate_from(start, b(5_000_000, 12_000_000, 7_500_000)), None);
        // Too short an interval.
        assert_eq!(rate_from(start, b(2_000, 10_100_000, 2_040)), None);
        // Clock or TSC out of order.
        assert_eq!(rate_from(start, b(5_001_040, 9_000_000, 5_001_080)), None);
        assert_eq!(rate_from(start, b(500, 12_000_000, 540)), None);
        // 100 GHz is not a TSC.
        assert_eq!(
            rate_from(start, b(200_001_040, 12_000_000, 200_001_080)),
            None
        );
    }

    /// The gate is per process (a backend is one thread): its tests take turns (a failed one
    /// leaves the lock poisoned, which the next ignores).
    static GATE_TESTS: std::sync::Mutex<()> = std::sync::Mutex::new(());

    /// Once the shared flag is set, the next reading closes the gate for good and every later
    /// millisecond comes from the clock itself.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_switch_closes_the_gate_at_the_next_reading() {
        static OFF: AtomicBool = AtomicBool::new(false);
        let _alone = GATE_TESTS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        calibrate();
        attach_gate_switch(&OFF);
        let opened = gate_open();
        assert_eq!(
            opened,
            tsc_clocksource(),
            "calibrated with the tsc clocksource only"
        );
        OFF.store(true, Ordering::Relaxed);
        assert!(!gate_open());
        // Past the current gate (at most a millisecond), the next reading closes it.
        std::thread::sleep(std::time::Duration::from_millis(2));
        let before = wall_clock_unix_ms();
        let now = now_ms();
        assert!(now >= before);
        assert_eq!(
            RATE.load(Ordering::Relaxed),
            0,
            "the gate stayed calibrated"
        );
        assert_eq!(
            GATE_UNTIL.load(Ordering::Relaxed),
            GATE_FROM.load(Ordering::Relaxed),
            "the gate still holds"
        );
        OFF.store(false, Ordering::Relaxed);
        GATE_OFF.store(std::ptr::null_mut(), Ordering::Relaxed);
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn now_ms_is_the_clock_millisecond_bracketed_by_real_readings() {
        let _alone = GATE_TESTS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        calibrate();
        for _ in 0..200_000 {
            let before = wall_clock_unix_ms();
            let now = now_ms();
            let after = wall_clock_unix_ms();
            assert!(
                before <= now && now <= after,
                "{before} <= {now} <= {after}"
            );
        }
    }
}
