//! The allocator: one background worker per database that uses segments (and a second, the
//! registry allocator, while the database has work that calls the registry: [`Lane`]), started
//! on demand, gone once its database has nothing cached: every
//! `idgen.segment_worker_idle_timeout`, busy or not, the segments not drawn from meanwhile leave
//! the cache and give their unused numbers back; at its exit (a fast shutdown) all do. It alone writes
//! `idgen_segment`, one unit of work at a time ([`self::work`]), each in a transaction of its
//! own ([`self::unit`]), and a failed unit is reported to the waiting caller while the worker
//! goes on, as pg_cron's workers do (DESIGN.md §2).

pub(super) mod catalog;
pub(super) mod global;
pub(super) mod launcher;
pub(super) mod unit;
pub(super) mod work;

use std::time::{Duration, Instant};

use pgrx::bgworkers::BackgroundWorker;
use pgrx::pg_sys;
use pgrx::prelude::*;

use self::unit::{
    check_interrupts_between_units, force_settings, install_signal_handlers, reload_configuration,
};
use self::work::{give_back, run, Work};
use super::cache::{broadcast, lock, Lane};
use crate::error::Error;
use crate::failure::Failure;
use crate::guc;
use crate::worker;

/// Entry point of the allocator; `arg` is the database oid, with the [`Lane`] in bits 32 and up.
///
/// Signals are PostgreSQL's own, as in a regular backend, so that every wait obeys them with
/// `CHECK_FOR_INTERRUPTS` semantics (a latch wait, a lock wait, SPI, the commit's wait for
/// synchronous standbys): SIGTERM (`pg_terminate_backend`, a fast shutdown) is `die`, and the
/// worker exits at the next interrupt check; SIGINT (`pg_cancel_backend`) cancels the unit of
/// work in progress (`unit::in_transaction`); SIGHUP reloads the configuration between units.
// SAFETY: called by PostgreSQL's background worker machinery (bgworker_main) in a new process
// with signals blocked; the handlers are installed before they are unblocked, and #[pg_guard]
// turns a Rust panic into a PostgreSQL ERROR (the worker exits; on_exit runs).
#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn idgen_allocator_main(arg: pg_sys::Datum) {
    let db = pg_sys::Oid::from(arg.value() as u32);
    let lane = Lane::from_bits(arg.value() as u64 >> 32);
    install_signal_handlers();
    // Registered before connecting, so it also runs if the connection fails (database gone),
    // and after PostgreSQL's own cleanup of an open transaction.
    // SAFETY: registers a #[pg_guard]ed callback with the signature PostgreSQL calls, with the
    // database oid as its datum.
    unsafe { pg_sys::before_shmem_exit(Some(on_exit), arg) };
    if !lock().claim_allocator(db, lane) {
        return; // another allocator serves this database and lane
    }
    BackgroundWorker::connect_worker_to_spi_by_oid(Some(db), None);
    force_settings();
    let kind = match lane {
        Lane::Local => "allocator",
        Lane::Registry => "registry allocator",
    };
    log!("idgen {kind} started for database {}", db.to_u32());

    let mut last_work = Instant::now();
    let mut last_take_out = Instant::now();
    loop {
        if worker::terminating() && lane == Lane::Local {
            // A fast shutdown (or pg_terminate_backend): the cached ranges of this database
            // give their unused numbers back before the worker exits below.
            // The LWLock is released before the give-back's transactions: a statement-level
            // `give_back(&lock()...)` would hold it through them.
            let leaving = lock().take_out_idle(db, true);
            give_back(&leaving);
        }
        check_interrupts_between_units();
        reload_configuration();
        if lock().retire_requested(db) {
            break;
        }
        let idle_limit = Duration::from_millis(guc::segment_worker_idle_timeout_ms());
        if lane == Lane::Local && last_take_out.elapsed() >= idle_limit {
            // Every idle timeout, whatever other work there is: segments not drawn from since
            // the last time leave the cache, giving their unused numbers back (a busy database
            // used to keep its cold segments' ranges until eviction or shutdown). The registry
            // allocator gives nothing back (a global segment does not).
            let idle = lock().take_out_idle(db, false);
            give_back(&idle);
            last_take_out = Instant::now();
            // Registry work nobody waits for (a prefetch asked for during a hold, or when the
            // registry allocator could not start) would otherwise keep its slot until some
            // caller of that lane comes: start the registry allocator for it.
            lock().ensure_lane_with_work(db, Lane::Registry);
        }
        let work = take_work(db, lane);
        if let Some(work) = work {
            run(db, lane, work);
            last_work = Instant::now();
            continue;
        }
        let idle = last_work.elapsed();
        if idle >= idle_limit {
            // No work for the idle timeout: the worker leaves once its database has nothing
            // cached; it stays while it has segments, so that they too are given back (at the
            // take-outs above, or at a clean shutdown). The registry allocator leaves once idle.
            let mut g = lock();
            if !g.request_pending(db, lane)
                && !g.refill_wanted(db, lane)
                && (lane == Lane::Registry || !g.caches(db))
            {
                g.leave(db);
                break;
            }
            drop(g);
            last_work = Instant::now();
            continue;
        }
        let mut sleep = idle_limit - idle;
        if lane == Lane::Local {
            sleep = sleep.min(idle_limit.saturating_sub(last_take_out.elapsed()));
        }
        // A refill put off after the registry did not answer is tried again in time.
        if let Some(at) = lock().next_retry(db, lane) {
            let retry = (at - crate::time::now_timestamptz_us()).max(1) as u64;
            sleep = sleep.min(Duration::from_micros(retry));
        }
        // A plain latch wait: interrupts are checked at the top of the loop, with cancels held
        // off (a cancel while idle has nothing to cancel).
        crate::latch::wait(sleep);
    }
}

/// The next unit of work for `db`'s `lane` allocator, by [`pick`]: a request (its state
/// becomes running) or a refill.
fn take_work(db: pg_sys::Oid, lane: Lane) -> Option<Work> {
    let mut g = lock();
    match pick(g.pending_requests(db, lane), g.refill_candidates(db, lane))? {
        Next::Request(i) => {
            let (index, request) = g.take_request(i);
            Some(Work::Request(index, request))
        }
        Next::Refill(i) => {
            let (index, generation, meta) = g.refill_at(i);
            Some(Work::Refill {
                index,
                generation,
                meta,
            })
        }
    }
}

/// A unit of work [`pick`] chose: a request or a slot's refill, by index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Next {
    Request(usize),
    Refill(usize),
}

/// The allocator's order: requests and refills (a prefetch of the next range, or a range a
/// caller waits for), first come, first served, by ticket.
///
/// A slot wants at most one refill and a caller waits for one unit at a time, so a unit has at
/// most one unit per cache slot and per request ahead of it, whatever else keeps coming. (Requests
/// used to go first, and each kind by its index: under churn through many segment names a
/// draw's refill waited behind a stream of loads until `idgen.segment_wait_timeout` failed it
/// with 55P03. Prefetches are not put last either: a slot whose prefetch waits cannot be
/// evicted, and a stream of loads then filled a small cache with them (54000).)
///
/// `requests`: (index, ticket); `refills`: (slot, ticket).
pub(crate) fn pick(
    requests: impl Iterator<Item = (usize, u64)>,
    refills: impl Iterator<Item = (usize, u64)>,
) -> Option<Next> {
    let requests = requests.map(|(i, t)| (t, Next::Request(i)));
    let refills = refills.map(|(i, t)| (t, Next::Refill(i)));
    requests
        .chain(refills)
        .min_by_key(|&(t, _)| t)
        .map(|(_, next)| next)
}

/// `before_shmem_exit` callback of the allocator: leaves the allocator table; if it had reported in,
/// the requests it was running fail (their callers stop waiting) and segments it had frozen
/// mid-change lose their cached numbers (the change may have committed, so thawing could
/// reissue numbers).
///
/// # Safety
/// Called by PostgreSQL at process exit, with the database oid registered as `arg`; it only
/// takes the LWLock and writes plain data.
#[pg_guard]
unsafe extern "C-unwind" fn on_exit(_code: i32, arg: pg_sys::Datum) {
    let db = pg_sys::Oid::from(arg.value() as u32);
    let lane = Lane::from_bits(arg.value() as u64 >> 32);
    let mut g = lock();
    if g.leave(db) {
        let failure = Failure::from_error(&Error::Relayed {
            sqlstate: PgSqlErrorCode::ERRCODE_ADMIN_SHUTDOWN as i32,
            message: "the idgen allocator worker exited before finishing the request".into(),
            detail: None,
            hint: Some("Check the server log, then retry.".into()),
        });
        g.fail_running(db, lane, failure);
        g.clear_frozen(db);
    }
    drop(g);
    broadcast();
}

#[cfg(test)]
mod tests {
    use super::{pick, Next};

    #[test]
    fn a_refill_goes_before_a_later_request() {
        // The old order ran every request first: a draw's refill waited behind each load.
        assert_eq!(
            pick([(0, 7)].into_iter(), [(200, 5)].into_iter()),
            Some(Next::Refill(200))
        );
        assert_eq!(
            pick([(3, 4)].into_iter(), [(200, 5)].into_iter()),
            Some(Next::Request(3))
        );
    }

    #[test]
    fn requests_and_refills_are_served_by_ticket_not_by_index() {
        // The old order took the lowest index: a caller in a high one could wait for ever
        // behind callers that kept taking the low ones again.
        assert_eq!(
            pick([(0, 9), (5, 2), (1, 6)].into_iter(), [].into_iter()),
            Some(Next::Request(5))
        );
        assert_eq!(
            pick([].into_iter(), [(0, 8), (250, 3), (1, 6)].into_iter()),
            Some(Next::Refill(250))
        );
        assert_eq!(pick([].into_iter(), [].into_iter()), None);
    }
}
