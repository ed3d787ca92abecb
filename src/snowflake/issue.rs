//! The per-id path of the Snowflake generator: [`reserve`] checks that this server and
//! transaction may issue ids, reads the clock, and takes `count` ids with one compare-and-swap
//! of the shared state word (`generator::reserve`); only when that is refused does it extend the
//! durable reservation or wait for the clock (DESIGN.md §1, "Clock policy"). Also this session's
//! `snowflake_currval`, a process static no other process sees (DESIGN.md §3).

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use idgen_core::snowflake::generator::{self, Limits, Outcome, Reservation};
use idgen_core::snowflake::layout::{Layout, LayoutError};
use pgrx::pg_sys;

use super::durable::{extend, low_water_ticks};
use super::lease::worker_id;
use super::shared::{layout, shared, SnowflakeShared};
use super::watch::read_clock;
use crate::error::Error;
use crate::guc;

/// The last id this session drew, for `snowflake_currval()`; [`NO_CURRVAL`] before the first.
/// A backend is one thread, so a relaxed atomic is a plain load and store: a mutex here cost
/// two locked instructions per id.
static CURRVAL: AtomicI64 = AtomicI64::new(NO_CURRVAL);

/// [`CURRVAL`] before the session's first id (ids are never negative).
const NO_CURRVAL: i64 = -1;

/// What [`reserve`] drew: the state words, the worker id to put in them, and the last id.
pub(crate) struct Drawn {
    /// The reserved state words.
    pub(crate) reservation: Reservation,
    /// This server's worker id.
    pub(crate) worker: u64,
    /// The id of `reservation.last`: the only id when one was drawn, and the session's currval.
    pub(crate) last_id: i64,
}

/// The largest batch `snowflake_nextvals` may take under the current drift bound.
pub(crate) fn max_batch() -> u64 {
    let layout = layout();
    generator::max_batch(
        layout,
        generator::max_ahead_ticks(layout, guc::max_drift_ms()),
    )
}

/// Who draws from the generator: the bigint functions set this session's `currval`;
/// `snowflake_uuid()` does not, as `nextval` of one sequence leaves another's `currval` alone.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Caller {
    /// `snowflake_nextval()` (`count` 1) or `snowflake_nextvals()`.
    Ids,
    /// `snowflake_uuid()`.
    Uuid,
}

/// Reserves `count >= 1` consecutive ids (`count <= max_batch()`) for `caller`; for
/// [`Caller::Ids`] sets this session's `currval` to the last id.
///
/// The clock policy (DESIGN.md §1): while the last id stays within `idgen.max_drift_ms` of the
/// wall clock, the call never waits. Beyond it, it sleeps (interruptibly) until the clock has
/// caught up, if that takes at most `idgen.max_wait_ms` in all; otherwise it fails at once.
///
/// Errors: 55000 when `idgen.worker_id` is unset or the reservation file was written under
/// another layout, 25006 during recovery, 22008 when the clock reads before the epoch, 2200H
/// when the layout has run out of time, 53400 when the clock is too far behind, XX001 for a
/// corrupt reservation file, 58030 when it cannot be written.
pub(crate) fn reserve(count: u64, caller: Caller) -> Result<Drawn, Error> {
    // A standby (or a read-only transaction) refuses with 25006 first, as nextval() does: a
    // standby of a node whose worker id comes from the registry has none (its registry client
    // starts at promotion), and 55000's "not yet" would send its users waiting for nothing.
    if crate::recovery::in_progress() {
        return Err(Error::InRecovery);
    }
    if crate::recovery::read_only_transaction() {
        return Err(Error::ReadOnlyTransaction {
            function: match caller {
                Caller::Uuid => "snowflake_uuid()",
                Caller::Ids if count == 1 => "snowflake_nextval()",
                Caller::Ids => "snowflake_nextvals()",
            },
        });
    }
    let worker = worker_id()?;
    let layout = layout();
    let shared = shared();
    let mut waiting_since: Option<Instant> = None;
    // The head start this call has taken as its clock (0: none yet).
    let mut head_start = 0;
    loop {
        let now_ms = read_clock(shared);
        let now_tick = match layout.tick_at(now_ms) {
            Ok(tick) => tick.max(head_start),
            Err(LayoutError::BeforeEpoch { ms }) => return Err(Error::ClockBeforeEpoch { ms }),
            Err(e) => return Err(exhausted(layout, e)),
        };
        let limits = Limits {
            max_ahead_ticks: generator::max_ahead_ticks(layout, guc::max_drift_ms()),
            reserved_end: shared.reserved_end.0.load(Ordering::Acquire),
        };
        let outcome = generator::reserve(
            layout,
            &shared.state.0,
            now_tick,
            count,
            jitter(layout),
            limits,
        )
        .map_err(|e| exhausted(layout, e))?;
        match outcome {
            Outcome::Issued(r) => {
                let counters = &shared.counters.0;
                if r.borrowed_ticks > 0 {
                    counters
                        .borrowed_ticks
                        .fetch_add(r.borrowed_ticks, Ordering::Relaxed);
                }
                let end_tick = layout.state_tick(r.last);
                if end_tick + low_water_ticks(layout) >= limits.reserved_end {
                    // Extend ahead of need, unless another backend is at it. A failure here
                    // costs nothing yet: the caller that really needs the extension reports it.
                    let _ = extend(layout, shared, end_tick, now_ms, false);
                }
                let last_id = layout
                    .id_from_state(r.last, worker)
                    .map_err(|e| exhausted(layout, e))?;
                if caller == Caller::Ids {
                    CURRVAL.store(last_id, Ordering::Relaxed);
                }
                return Ok(Drawn {
                    reservation: r,
                    worker,
                    last_id,
                });
            }
            Outcome::TooFarAhead { .. } if head_start == 0 && head_start_above(now_tick) => {
                // A head start (a promotion or a registry grant, DESIGN.md §1, §6): the floor
                // is above every id the previous holder can have issued, so the generator
                // treats it as its clock until the clock passes it, and issues without waiting.
                head_start = super::lease::head_start_tick();
            }
            blocked => unblock(layout, shared, blocked, limits, now_ms, &mut waiting_since)?,
        }
    }
}

/// Clears the way for a reservation that `outcome` refused under `limits`: extends the durable
/// reservation (BeyondReservation), or sleeps until the clock has caught up with the generator
/// (TooFarAhead) if all the waiting of this call, `waiting_since`, stays within
/// `idgen.max_wait_ms`; else fails with 53400. Out of line: the per-id path never comes here.
#[cold]
#[inline(never)]
fn unblock(
    layout: &Layout,
    shared: &SnowflakeShared,
    outcome: Outcome,
    limits: Limits,
    now_ms: i64,
    waiting_since: &mut Option<Instant>,
) -> Result<(), Error> {
    match outcome {
        Outcome::Issued(_) => Ok(()),
        Outcome::BeyondReservation { end_tick } => extend(layout, shared, end_tick, now_ms, true),
        Outcome::TooFarAhead {
            ahead_ticks,
            end_tick,
        } => {
            let max_ahead = limits.max_ahead_ticks.unwrap_or(ahead_ticks);
            let catch_up_ms = (layout.unix_ms_of_tick(end_tick - max_ahead) - now_ms).max(1) as u64;
            let waited_ms = waiting_since.map_or(0, |t| t.elapsed().as_millis() as u64);
            if waited_ms + catch_up_ms > guc::max_wait_ms() {
                shared
                    .counters
                    .0
                    .clock_failures
                    .fetch_add(1, Ordering::Relaxed);
                return Err(Error::ClockBehind {
                    behind_ms: layout.unix_ms_of_tick(end_tick) - now_ms,
                    max_drift_ms: guc::max_drift_ms().unwrap_or(0),
                    max_wait_ms: guc::max_wait_ms(),
                });
            }
            if waiting_since.is_none() {
                *waiting_since = Some(Instant::now());
                shared.counters.0.waits.fetch_add(1, Ordering::Relaxed);
            }
            crate::latch::sleep_interruptibly(Duration::from_millis(catch_up_ms));
            Ok(())
        }
    }
}

/// Whether a head start above `now_tick` is in force. Out of line: only a reservation refused as
/// too far ahead of the clock asks.
#[cold]
#[inline(never)]
fn head_start_above(now_tick: u64) -> bool {
    super::lease::head_start_tick() > now_tick
}

/// The random sequence start of a new tick (`idgen.sequence_jitter`), below the bound and below
/// the layout's sequence range; 0 when jitter is off.
fn jitter(layout: &Layout) -> u64 {
    let setting = guc::sequence_jitter();
    if setting == 0 {
        return 0;
    }
    let bound = setting.min(layout.max_sequence() + 1);
    if bound <= 1 {
        return 0;
    }
    // SAFETY: pg_global_prng_state is this process's PRNG state, seeded at process start
    // (InitProcessGlobals) and used by this thread alone; the bounds are ordered (bound >= 2).
    unsafe { pg_sys::pg_prng_uint64_range(&raw mut pg_sys::pg_global_prng_state, 0, bound - 1) }
}

#[cold]
fn exhausted(layout: &Layout, e: LayoutError) -> Error {
    Error::TimeExhausted {
        detail: format!(
            "{e}; the layout's {} time bits (of {} id bits) of {} ms end at Unix time {} ms.",
            layout.time_bits(),
            layout.id_bits(),
            layout.time_unit_ms(),
            layout.exhausted_at_unix_ms()
        ),
    }
}

/// Forgets this session's last id (`DISCARD SEQUENCES`, `DISCARD ALL`): `snowflake_currval()`
/// raises 55000 again, as `currval` does after them.
pub(crate) fn discard_currval() {
    CURRVAL.store(NO_CURRVAL, Ordering::Relaxed);
}

/// This session's last id. Errors with 55000 before the first one, as `currval` does.
pub(crate) fn currval() -> Result<i64, Error> {
    match CURRVAL.load(Ordering::Relaxed) {
        NO_CURRVAL => Err(Error::CurrvalNotYetDefined),
        id => Ok(id),
    }
}
