//! The allocator table: which database has which allocator background workers (a local one, and
//! a registry one for work that calls the registry: [`Lane`]), starting one on
//! demand (a dynamic background worker), its reporting in and out, and the holds that keep a
//! database's allocator away while a command needs the database without other sessions
//! (`CREATE DATABASE ... TEMPLATE`, `ALTER DATABASE ... RENAME`). The worker itself is in
//! [`super`].

use std::cell::Cell;
use std::time::Duration;

use pgrx::bgworkers::{BackgroundWorkerBuilder, BgWorkerStartTime};
use pgrx::pg_sys;
use pgrx::prelude::*;

use crate::backend;
use crate::error::Error;
use crate::segment::cache::{attached, broadcast, lock, Allocator, Guarded, Hold, Lane};
use crate::time::now_timestamptz_us;

/// An allocator registered this long ago that never reported in is presumed not started.
const ALLOCATOR_START_GRACE_US: i64 = 5_000_000;

/// How long a hold lasts at most, in µs, should its command never say it is done.
const HOLD_US: i64 = 30_000_000;

/// How long [`evict_allocator`] waits for the allocator to leave, in µs: PostgreSQL itself
/// waits 5 s for other sessions before it gives up (`CountOtherDBBackends`).
const EVICT_WAIT_US: i64 = 5_000_000;

impl Guarded {
    /// Whether allocator starts for `db` are held back now.
    fn held(&self, db: pg_sys::Oid) -> bool {
        let now = now_timestamptz_us();
        self.holds.iter().any(|h| h.db == db && h.until > now)
    }

    /// Starts (or wakes) `db`'s `lane` allocator if work of that lane waits (a request pending
    /// or a refill wanted) and no caller of it may be there to ask (a prefetch asked for during
    /// a hold): on the local allocator's timer, which runs while its database has anything
    /// cached. A failure to start is left to the callers that come (53400).
    pub(crate) fn ensure_lane_with_work(&mut self, db: pg_sys::Oid, lane: Lane) {
        if self.request_pending(db, lane) || self.refill_wanted(db, lane) {
            let _ = self.ensure_lane(db, lane);
        }
    }

    /// Makes sure `db`'s `lane` allocator runs (starting it if needed) and wakes it. Errors with
    /// 53400 when no background worker slot is free (`max_worker_processes`).
    pub(crate) fn ensure_lane(&mut self, db: pg_sys::Oid, lane: Lane) -> Result<(), Error> {
        let now = now_timestamptz_us();
        if self.held(db) {
            return Ok(()); // a database command wants the database alone: callers wait
        }
        if let Some(a) = self
            .allocators
            .iter_mut()
            .find(|a| a.db == db && a.lane == lane)
        {
            if a.pid != 0 || now - a.launched_at < ALLOCATOR_START_GRACE_US {
                wake(a);
                return Ok(());
            }
            *a = Allocator::default();
        }
        // A free entry, or one whose worker never reported in within its grace (it failed to
        // start): the table has one entry per worker slot, and a stale one holds none.
        let Some(entry) = self.allocators.iter_mut().find(|a| {
            a.db == pg_sys::InvalidOid
                || (a.pid == 0 && now - a.launched_at >= ALLOCATOR_START_GRACE_US)
        }) else {
            return Err(unavailable());
        };
        if builder(db, lane).load_dynamic().is_err() {
            return Err(unavailable());
        }
        *entry = Allocator {
            db,
            lane,
            launched_at: now,
            ..Allocator::default()
        };
        Ok(())
    }

    /// Worker side: reports the calling process in as `db`'s `lane` allocator. False if another
    /// allocator of `db` and `lane` already reported in, or `db` is held (this one must exit).
    pub(crate) fn claim_allocator(&mut self, db: pg_sys::Oid, lane: Lane) -> bool {
        if self.held(db) {
            return false;
        }
        let (pid, latch) = (backend::pid(), backend::latch() as usize);
        let entry = match self
            .allocators
            .iter()
            .position(|a| a.db == db && a.lane == lane)
        {
            Some(i) => i,
            None => match self
                .allocators
                .iter()
                .position(|a| a.db == pg_sys::InvalidOid)
            {
                Some(i) => i,
                None => return false,
            },
        };
        let a = &mut self.allocators[entry];
        if a.pid != 0 && a.pid != pid {
            return false;
        }
        *a = Allocator {
            db,
            lane,
            pid,
            latch,
            launched_at: a.launched_at,
            retire: false,
        };
        true
    }

    /// Worker side: whether the calling allocator of `db` has been asked to exit.
    pub(crate) fn retire_requested(&self, db: pg_sys::Oid) -> bool {
        let pid = backend::pid();
        self.allocators
            .iter()
            .any(|a| a.db == db && a.pid == pid && a.retire)
    }

    /// Asks the allocators of `db` to exit (its database is being dropped).
    pub(crate) fn retire_allocator(&mut self, db: pg_sys::Oid) {
        for a in self.allocators.iter_mut().filter(|a| a.db == db) {
            a.retire = true;
            wake(a);
        }
    }

    /// Worker side: the allocator of `db` (the calling process) leaves the table. False if it
    /// had never reported in (another allocator serves `db`): then it has nothing to undo.
    pub(crate) fn leave(&mut self, db: pg_sys::Oid) -> bool {
        let pid = backend::pid();
        let mut left = false;
        for a in self.allocators.iter_mut() {
            if a.db == db && a.pid == pid {
                *a = Allocator::default();
                left = true;
            }
        }
        left
    }
}

/// The allocator's registration: one dynamic background worker for `db` and `lane`, shown in
/// `pg_stat_activity` with backend_type `idgen allocator` (local) or `idgen registry
/// allocator`. Its argument is the database oid, with the lane in bits 32 and up. No catalog
/// access here: it runs under the LWLock.
fn builder(db: pg_sys::Oid, lane: Lane) -> BackgroundWorkerBuilder {
    let kind = match lane {
        Lane::Local => "idgen allocator",
        Lane::Registry => "idgen registry allocator",
    };
    BackgroundWorkerBuilder::new(&format!("{kind} for database {}", db.to_u32()))
        .set_type(kind)
        .set_library("idgen")
        .set_function("idgen_allocator_main")
        .set_argument(Some(pg_sys::Datum::from(
            u64::from(db.to_u32()) | ((lane as u64) << 32),
        )))
        .enable_spi_access()
        .set_start_time(BgWorkerStartTime::RecoveryFinished)
        .set_restart_time(None)
}

fn unavailable() -> Error {
    Error::AllocatorUnavailable {
        max_worker_processes: backend::max_worker_processes(),
    }
}

fn wake(a: &Allocator) {
    if a.latch != 0 {
        // SAFETY: the latch of a live PGPROC in shared memory: an allocator clears its entry
        // (under the LWLock, held by our caller) before its process exits.
        unsafe { pg_sys::SetLatch(a.latch as *mut pg_sys::Latch) };
    }
}

/// Asks the allocator of database `db` to leave and waits (up to 5 s, interruptibly) until it
/// has, holding back new allocator starts for `db` until the caller's transaction ends (or
/// 30 s at most). For the commands that refuse to run while another session is connected to
/// `db` (SQLSTATE 55006): `CREATE DATABASE ... TEMPLATE db`, `ALTER DATABASE db RENAME`,
/// `ALTER DATABASE db SET TABLESPACE`. An allocator in the middle of a unit of work finishes it
/// first; callers that need the allocator meanwhile wait (`idgen.segment_wait_timeout`). Its
/// cached ranges stay.
pub(crate) fn evict_allocator(db: pg_sys::Oid) {
    if !attached() {
        return;
    }
    let started = now_timestamptz_us();
    {
        let pid = backend::pid();
        let mut g = lock();
        let free = g
            .holds
            .iter()
            .position(|h| (h.db == db && h.pid == pid) || h.until <= started);
        match free {
            Some(i) => {
                g.holds[i] = Hold {
                    db,
                    until: started + HOLD_US,
                    pid,
                }
            }
            None => return, // too many at once: the command waits as PostgreSQL makes it
        }
        hold_until_transaction_end();
        for a in g.allocators.iter_mut().filter(|a| a.db == db) {
            if a.pid == 0 {
                *a = Allocator::default(); // not started yet: it will find the hold and leave
            } else {
                a.retire = true;
                wake(a);
            }
        }
    }
    while now_timestamptz_us() - started < EVICT_WAIT_US {
        if !lock().allocators.iter().any(|a| a.db == db) {
            return;
        }
        crate::latch::sleep_interruptibly(Duration::from_millis(10));
    }
}

thread_local! {
    /// This backend holds some allocator away (its holds carry its pid) until its transaction
    /// ends: the transaction callback needs the LWLock only then.
    static HOLDING: Cell<bool> = const { Cell::new(false) };
}

/// Makes this backend's holds end with its transaction (commit or abort).
fn hold_until_transaction_end() {
    thread_local! {
        static REGISTERED: Cell<bool> = const { Cell::new(false) };
    }
    if !REGISTERED.get() {
        // SAFETY: registers a #[pg_guard]ed callback with the signature PostgreSQL calls, once
        // per process (REGISTERED), with no argument.
        unsafe { pg_sys::RegisterXactCallback(Some(end_holds), std::ptr::null_mut()) };
        REGISTERED.set(true);
    }
    HOLDING.set(true);
}

/// Transaction callback: at commit or abort, the holds this backend put on databases end
/// (their allocators may start again) and waiting callers are woken.
///
/// # Safety
/// Called by PostgreSQL as a transaction callback (`RegisterXactCallback`); it only takes the
/// LWLock and writes plain data, so it cannot fail mid-commit.
#[pg_guard]
unsafe extern "C-unwind" fn end_holds(event: pg_sys::XactEvent::Type, _arg: *mut std::ffi::c_void) {
    use pg_sys::XactEvent::*;
    if !matches!(
        event,
        XACT_EVENT_COMMIT | XACT_EVENT_ABORT | XACT_EVENT_PREPARE
    ) {
        return;
    }
    if !HOLDING.replace(false) || !attached() {
        return;
    }
    let pid = backend::pid();
    let mut g = lock();
    for h in g.holds.iter_mut().filter(|h| h.pid == pid) {
        *h = Hold::default();
    }
    drop(g);
    broadcast(); // waiting callers ask for an allocator again
}
