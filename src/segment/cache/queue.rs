//! The request queue: a backend asks the allocator of its database to load a segment into the
//! cache or to run an admin call, and waits on the condition variable for the outcome; the
//! allocator takes requests and finishes them. A caller that stops waiting (cancelled, timed
//! out, terminated) gives its request up, so the queue never fills with dead requests.
#![allow(clippy::result_large_err)]

use std::cell::Cell;

use pgrx::pg_sys;
use pgrx::prelude::*;

use super::{cancel_sleep, deadline, lock, wait_for, Guarded, Lane, Request, RequestState};
use crate::backend;
use crate::error::Error;
use crate::failure::Failure;
use crate::guc;

/// 25006 on a standby: segments are advanced by the allocator, which cannot write there.
pub(crate) fn check_not_in_recovery() -> Result<(), Error> {
    if crate::recovery::in_progress() {
        return Err(Error::SegmentInRecovery);
    }
    Ok(())
}

/// Sends `request` to this database's allocator and waits for its result. `timeout`: wait at
/// most `idgen.segment_wait_timeout` (loads, which `segment_nextval` waits for); otherwise
/// until done or cancelled (admin calls, which may already have committed).
pub(crate) fn submit(request: Request, timeout: bool) -> Result<i64, Error> {
    submit_until(request, if timeout { deadline() } else { None })
}

/// [`submit`], waiting until `deadline_us` (a `TimestampTz`; `None`: until done or cancelled):
/// a caller that submits again within one call keeps the call's deadline.
pub(crate) fn submit_until(mut request: Request, deadline_us: Option<i64>) -> Result<i64, Error> {
    check_not_in_recovery()?;
    release_requests_at_exit();
    let db = backend::database_id();
    request.db = db;
    request.state = RequestState::Pending;
    request.owner = backend::pid();
    let index = {
        let mut g = lock();
        let Some(index) = g
            .requests
            .iter()
            .position(|r| r.state == RequestState::Free)
        else {
            let max = g.requests.len();
            return Err(Error::RequestQueueFull { max });
        };
        request.ticket = g.next_ticket();
        g.requests[index] = request;
        // Only the allocator that runs it: the other lane failing to start (no worker slot
        // for the registry allocator) is not this request's failure.
        if let Err(e) = g.ensure_lane(db, request.lane) {
            g.requests[index] = Request::default();
            return Err(e);
        }
        index
    };
    let abandon = AbandonOnUnwind(index);
    let outcome = wait_for(deadline_us, |g| {
        let r = g.requests[index];
        match r.state {
            RequestState::Done => {
                g.requests[index] = Request::default();
                Some(if r.failed {
                    Err(r.failure.to_error())
                } else {
                    Ok(r.result)
                })
            }
            // The allocator may have exited (or never started): start another. If none can
            // start, the request is withdrawn under the same lock hold: the caller is told it
            // failed, so no allocator may run it later.
            RequestState::Pending => g.ensure_lane(db, r.lane).err().map(|e| {
                g.requests[index] = Request::default();
                Err(e)
            }),
            _ => None,
        }
    });
    std::mem::forget(abandon);
    match outcome {
        Ok(result) => result,
        Err(()) => {
            abandon_request(index);
            Err(Error::SegmentWaitTimeout {
                name: request.name.as_str().to_owned(),
                ms: guc::segment_wait_timeout_ms().unwrap_or(0),
            })
        }
    }
}

/// The caller stops waiting: a request not yet started is withdrawn, a running one is left to
/// the allocator (it may still commit), a finished one is freed.
fn abandon_request(index: usize) {
    let mut g = lock();
    let r = &mut g.requests[index];
    match r.state {
        RequestState::Pending | RequestState::Done => *r = Request::default(),
        RequestState::Running => r.state = RequestState::Abandoned,
        RequestState::Free | RequestState::Abandoned => {}
    }
}

/// Makes sure this backend's requests are given up when it exits, however it exits: a caller
/// that dies by FATAL while it waits (`pg_terminate_backend`, a session timeout) unwinds no
/// Rust frame, and its request slot would otherwise stay taken until the server restarts
/// (after as many such deaths as the queue has entries, every admin call and uncached load
/// failed with 53400).
fn release_requests_at_exit() {
    thread_local! {
        static REGISTERED: Cell<bool> = const { Cell::new(false) };
    }
    if !REGISTERED.get() {
        // SAFETY: registers a #[pg_guard]ed callback with the signature PostgreSQL calls, once
        // per process (REGISTERED), with a datum it ignores.
        unsafe { pg_sys::before_shmem_exit(Some(release_own_requests), pg_sys::Datum::from(0)) };
        REGISTERED.set(true);
    }
}

/// `before_shmem_exit` callback: abandons every request of this process (see
/// [`abandon_request`]) and leaves the condition variable's wait list.
///
/// # Safety
/// Called by PostgreSQL at process exit, before shared memory is detached; it only takes the
/// LWLock and writes plain data.
#[pg_guard]
unsafe extern "C-unwind" fn release_own_requests(_code: i32, _arg: pg_sys::Datum) {
    cancel_sleep(); // before taking the LWLock
    let pid = backend::pid();
    let mine: Vec<usize> = {
        let g = lock();
        (0..g.requests.len())
            .filter(|&i| g.requests[i].owner == pid && g.requests[i].state != RequestState::Free)
            .collect()
    };
    for index in mine {
        abandon_request(index);
    }
}

/// If the caller is cancelled while waiting, its request is handed over to the allocator.
struct AbandonOnUnwind(usize);

impl Drop for AbandonOnUnwind {
    fn drop(&mut self) {
        abandon_request(self.0);
    }
}

impl Guarded {
    /// The pending requests of `db` for its `lane` allocator, as (index, ticket).
    pub(crate) fn pending_requests(
        &self,
        db: pg_sys::Oid,
        lane: Lane,
    ) -> impl Iterator<Item = (usize, u64)> + '_ {
        self.requests
            .iter()
            .enumerate()
            .filter(move |(_, r)| r.db == db && r.lane == lane && r.state == RequestState::Pending)
            .map(|(i, r)| (i, r.ticket))
    }

    /// Worker side: request `i` (a copy; the original is marked running).
    pub(crate) fn take_request(&mut self, i: usize) -> (usize, Request) {
        let r = &mut self.requests[i];
        r.state = RequestState::Running;
        (i, *r)
    }

    /// Whether a request of `db` waits for its `lane` allocator.
    pub(crate) fn request_pending(&self, db: pg_sys::Oid, lane: Lane) -> bool {
        self.requests
            .iter()
            .any(|r| r.db == db && r.lane == lane && r.state == RequestState::Pending)
    }

    /// Worker side: hands request `index`, running here, to `db`'s `lane` allocator instead
    /// (the local allocator's load of a name this database does not know: a registry lookup),
    /// keeping its ticket; starts that allocator if needed. Errors: 53400 (no worker slot), for
    /// the caller.
    pub(crate) fn reroute(&mut self, index: usize, lane: Lane) -> Result<(), Failure> {
        let r = &mut self.requests[index];
        if r.state == RequestState::Abandoned {
            *r = Request::default();
            return Ok(());
        }
        let db = r.db;
        r.lane = lane;
        r.state = RequestState::Pending;
        self.ensure_lane(db, lane).map_err(|e| {
            // Still this allocator's, to finish with the error.
            let r = &mut self.requests[index];
            r.lane = Lane::Local;
            r.state = RequestState::Running;
            Failure::from_error(&e)
        })
    }

    /// After `db`'s `lane` allocator exited: the requests it was running fail with `failure`
    /// (their callers stop waiting), and abandoned ones are freed.
    pub(crate) fn fail_running(&mut self, db: pg_sys::Oid, lane: Lane, failure: Failure) {
        for r in self
            .requests
            .iter_mut()
            .filter(|r| r.db == db && r.lane == lane)
        {
            match r.state {
                RequestState::Running => {
                    r.failed = true;
                    r.failure = failure;
                    r.state = RequestState::Done;
                }
                RequestState::Abandoned => *r = Request::default(), // nobody waits for it
                _ => {}
            }
        }
    }

    /// Worker side: stores the outcome of request `index` and wakes its caller.
    pub(crate) fn finish_request(&mut self, index: usize, outcome: Result<i64, Failure>) {
        let r = &mut self.requests[index];
        if r.state == RequestState::Abandoned {
            *r = Request::default();
        } else {
            match outcome {
                Ok(v) => r.result = v,
                Err(f) => {
                    r.failed = true;
                    r.failure = f;
                }
            }
            r.state = RequestState::Done;
        }
        super::broadcast();
    }
}
