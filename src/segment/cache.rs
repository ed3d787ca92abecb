//! The segment cache in shared memory, shared by every backend of the server (DESIGN.md §2–3).
//!
//! * One [`Slot`] per (database, segment name) in use: a lock-free [`DoubleBuffer`] for the hot
//!   path, plus metadata (name, steps, refill state) guarded by the `idgen_segment` LWLock.
//! * One [`Allocator`] entry per database with a running allocator background worker
//!   (`worker.rs`), which alone writes `idgen_segment`.
//! * A small queue of [`Request`]s: loading a segment into the cache, and the admin calls
//!   (create, alter, drop, setval), each run by the allocator in its own transaction.
//! * One condition variable, broadcast whenever a range is installed, a request completes or an
//!   allocator exits; waiters re-check their own condition.
//!
//! Backends keep a process-local map name → [`Entry`] (slot, generation and this session's
//! `segment_currval`) in a thread-local `RefCell` (a backend is one thread; a mutex cost two
//! locked instructions per number), which no other process sees. Entries live as long as the
//! session, so that a call site can keep its entry and skip the lookup (`segment_nextval`).
//!
//! Allocator results carry a fixed-size [`Failure`] (it lives in shared memory): large, but
//! built once per unit of work, never on the hot path.
#![allow(clippy::result_large_err)]

use std::cell::{Cell, RefCell, UnsafeCell};
use std::collections::HashMap;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering::SeqCst};

use pgrx::bgworkers::{BackgroundWorkerBuilder, BgWorkerStartTime};
use pgrx::pg_guard;
use pgrx::pg_sys;
use pgrx::pg_sys::panic::CaughtError;
use rustc_hash::FxBuildHasher;

use super::buffer::{BufferView, DoubleBuffer, Drawn};
use super::range::Range;
use crate::error::Error;
use crate::guc;

/// Segments the shared cache holds per server, over all databases.
pub const MAX_SEGMENTS: usize = 1024;
/// Databases with an allocator worker at the same time.
pub const MAX_ALLOCATORS: usize = 64;
/// Requests waiting for allocators at the same time.
pub const MAX_REQUESTS: usize = 64;
/// An allocator registered this long ago that never reported in is presumed not started.
const ALLOCATOR_START_GRACE_US: i64 = 5_000_000;

/// UTF-8 text of at most `N` bytes, stored inline in shared memory.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct FixedText<const N: usize> {
    len: u16,
    bytes: [u8; N],
}

impl<const N: usize> Default for FixedText<N> {
    fn default() -> Self {
        Self {
            len: 0,
            bytes: [0; N],
        }
    }
}

impl<const N: usize> FixedText<N> {
    /// `text`, cut at a character boundary to fit.
    pub fn new(text: &str) -> Self {
        let mut end = text.len().min(N);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let mut t = Self {
            len: end as u16,
            ..Self::default()
        };
        t.bytes[..end].copy_from_slice(&text.as_bytes()[..end]);
        t
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.bytes[..self.len as usize]).unwrap_or("")
    }
}

/// An error carried from the allocator to the caller that waits for it: SQLSTATE (packed as
/// PostgreSQL's `MAKE_SQLSTATE`), message, detail and hint.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct Failure {
    sqlstate: i32,
    message: FixedText<256>,
    detail: FixedText<256>,
    hint: FixedText<256>,
}

impl Failure {
    /// An idgen error, as raised by [`Error::report`].
    pub fn from_error(e: &Error) -> Self {
        Self {
            sqlstate: e.sqlstate() as i32,
            message: FixedText::new(&e.to_string()),
            detail: FixedText::new(&e.detail().unwrap_or_default()),
            hint: FixedText::new(&e.hint().unwrap_or_default()),
        }
    }

    /// A PostgreSQL error caught in the allocator (a failed SPI statement, say).
    pub fn from_caught(e: &CaughtError) -> Self {
        let report = crate::error::caught_report(e);
        Self {
            sqlstate: report.sql_error_code() as i32,
            message: FixedText::new(report.message()),
            detail: FixedText::new(report.detail().unwrap_or_default()),
            hint: FixedText::new(report.hint().unwrap_or_default()),
        }
    }

    /// The SQLSTATE, packed as PostgreSQL's `MAKE_SQLSTATE`.
    pub fn sqlstate(&self) -> i32 {
        self.sqlstate
    }

    /// The caller's side: the error to raise.
    pub fn to_error(&self) -> Error {
        let opt = |t: &FixedText<256>| Some(t.as_str().to_owned()).filter(|s| !s.is_empty());
        Error::Allocator {
            sqlstate: self.sqlstate,
            message: self.message.as_str().to_owned(),
            detail: opt(&self.detail),
            hint: opt(&self.hint),
        }
    }
}

/// A segment's metadata, guarded by the LWLock.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct SlotMeta {
    /// Database of the segment; `InvalidOid` while the slot is free.
    pub db: pg_sys::Oid,
    /// Segment name.
    pub name: FixedText<64>,
    /// The segment's own step (`idgen_segment.step`): the floor of the dynamic step.
    pub base_step: i64,
    /// Step of the last refill (the dynamic step); 0 before the first.
    pub step: i64,
    /// When the last refill committed (`TimestampTz`, µs); 0 before the first.
    pub last_refill_at: i64,
    /// Refills since the slot was loaded.
    pub refills: u64,
    /// Refill attempts that finished, successful or not; waiters compare it.
    pub attempts: u64,
    /// The allocator should fetch the next range.
    pub refill_wanted: bool,
    /// An admin call (setval, drop, create) is changing the segment: draws wait.
    pub frozen: bool,
    /// The last refill attempt failed with [`SlotMeta::failure`].
    pub failed: bool,
    /// Why the last refill failed.
    pub failure: Failure,
}

/// One cached segment.
#[repr(C)]
pub struct Slot {
    /// The two ranges; drawn from without a lock.
    pub buffers: DoubleBuffer,
    /// Odd while the slot holds a segment, even while free; bumped on every assignment and
    /// release, so a backend's cached (slot, generation) goes stale when the slot is reused.
    pub generation: AtomicU64,
    meta: UnsafeCell<SlotMeta>,
}

/// The allocator background worker of one database.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct Allocator {
    /// The database; `InvalidOid` while the entry is free.
    pub db: pg_sys::Oid,
    /// Process id once the worker has reported in; 0 while starting.
    pub pid: i32,
    /// The worker's latch (`MyLatch`, in shared memory), set to wake it.
    pub latch: usize,
    /// When the worker was registered (`TimestampTz`).
    pub launched_at: i64,
    /// The worker should exit (its database is being dropped).
    pub retire: bool,
}

/// Databases whose allocator may not start for a while: a command that needs the database
/// without other sessions (`CREATE DATABASE ... TEMPLATE`, `ALTER DATABASE ... RENAME`) asked it
/// to leave ([`evict_allocator`]).
pub const MAX_HOLDS: usize = 8;

/// How long a hold lasts at most, in µs, should its command never say it is done.
const HOLD_US: i64 = 30_000_000;

/// How long [`evict_allocator`] waits for the allocator to leave, in µs: PostgreSQL itself
/// waits 5 s for other sessions before it gives up (`CountOtherDBBackends`).
const EVICT_WAIT_US: i64 = 5_000_000;

/// An allocator start held back for database `db` until `until` (`TimestampTz`).
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct Hold {
    db: pg_sys::Oid,
    until: i64,
    /// The backend whose command holds it; its transaction's end ends this hold only.
    pid: i32,
}

/// What a [`Request`] asks of the allocator.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum RequestKind {
    /// Load an existing segment into the cache; the result is its slot index.
    #[default]
    Load,
    /// `segment_create(name, value = start, step, description)`.
    Create,
    /// `segment_alter(name, step, description)`; step 0 keeps the step.
    Alter,
    /// `segment_drop(name)`.
    Drop,
    /// `segment_setval(name, value)`.
    Setval,
    /// `segment_interleave_ready(until = value)`: the allocator reloads the configuration,
    /// checks its `idgen.segment_interleave_until` and every mark against it; the result is the
    /// highest mark.
    InterleaveReady,
}

/// What a request does to the description.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum DescriptionChange {
    /// Keep it (alter without a description).
    #[default]
    Keep,
    /// Set it to [`Request::description`].
    Set,
    /// Set it to NULL.
    Clear,
}

#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
enum RequestState {
    #[default]
    Free,
    Pending,
    Running,
    Done,
    /// The caller stopped waiting (cancelled): whoever finishes it frees it.
    Abandoned,
}

/// A request to the allocator of `db`, with its outcome.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct Request {
    state: RequestState,
    /// Process id of the caller waiting for it; its exit releases the request.
    owner: i32,
    /// What to do.
    pub kind: RequestKind,
    /// The database whose allocator runs it.
    pub db: pg_sys::Oid,
    /// The segment.
    pub name: FixedText<64>,
    /// Create: start; setval: the value.
    pub value: i64,
    /// Create/alter: the step; 0 = keep (alter).
    pub step: i32,
    /// Create/alter: what to do with the description.
    pub description_change: DescriptionChange,
    /// Create/alter: the description text.
    pub description: FixedText<1024>,
    /// Outcome: the result (load: slot index; setval: the value).
    pub result: i64,
    /// Outcome: failed with `failure`.
    pub failed: bool,
    /// Outcome: the error.
    pub failure: Failure,
}

impl Request {
    /// A request of `kind` for segment `name`, with no arguments yet.
    pub fn new(kind: RequestKind, name: &str) -> Self {
        Self {
            kind,
            name: FixedText::new(name),
            ..Self::default()
        }
    }
}

/// Everything segments keep in shared memory (`idgen_segment_cache`).
#[repr(C)]
pub struct SegmentShared {
    cv: UnsafeCell<pg_sys::ConditionVariable>,
    allocators: UnsafeCell<[Allocator; MAX_ALLOCATORS]>,
    holds: UnsafeCell<[Hold; MAX_HOLDS]>,
    requests: UnsafeCell<[Request; MAX_REQUESTS]>,
    slots: [Slot; MAX_SEGMENTS],
}

// SAFETY: every field is an atomic, or behind UnsafeCell and touched only under the LWLock
// (or by ConditionVariable functions, which lock it themselves).
unsafe impl Sync for SegmentShared {}

static SHARED: AtomicPtr<SegmentShared> = AtomicPtr::new(std::ptr::null_mut());
static LOCK: AtomicPtr<pg_sys::LWLock> = AtomicPtr::new(std::ptr::null_mut());
const SHMEM_NAME: &std::ffi::CStr = c"idgen_segment_cache";
const TRANCHE: &std::ffi::CStr = c"idgen_segment";

/// Shared-memory request hook part: the size of [`SegmentShared`] and one named LWLock.
pub fn request_shmem() {
    // SAFETY: called from shmem_request_hook, where these requests are allowed.
    unsafe {
        pg_sys::RequestAddinShmemSpace(std::mem::size_of::<SegmentShared>());
        pg_sys::RequestNamedLWLockTranche(TRANCHE.as_ptr(), 1);
    }
}

/// Shared-memory startup hook part: creates (zeroed, condition variable initialized) or
/// attaches the cache and remembers where it and its LWLock are. Runs in the postmaster at
/// every (re)creation of shared memory, so a crash restart starts with an empty cache.
pub fn attach_shmem() {
    // SAFETY: called from shmem_startup_hook with AddinShmemInitLock held by the caller; the
    // struct is plain data (all-zero is its empty state) except the condition variable, which
    // is initialized here before anyone can use it.
    unsafe {
        let mut found = false;
        let ptr = pg_sys::ShmemInitStruct(
            SHMEM_NAME.as_ptr(),
            std::mem::size_of::<SegmentShared>(),
            &mut found,
        )
        .cast::<SegmentShared>();
        if !found {
            std::ptr::write_bytes(ptr.cast::<u8>(), 0, std::mem::size_of::<SegmentShared>());
            pg_sys::ConditionVariableInit((*ptr).cv.get());
        }
        SHARED.store(ptr, SeqCst);
        let tranche = pg_sys::GetNamedLWLockTranche(TRANCHE.as_ptr());
        LOCK.store(&raw mut (*tranche).lock, SeqCst);
    }
}

fn shared() -> &'static SegmentShared {
    // SAFETY: set in the postmaster's shmem startup hook before any backend exists; shared
    // memory outlives every backend.
    unsafe { SHARED.load(SeqCst).as_ref() }.expect("idgen is preloaded")
}

/// The slot at `index`.
pub fn slot(index: usize) -> &'static Slot {
    &shared().slots[index]
}

/// The `idgen_segment` LWLock, held exclusively; released on drop (and by PostgreSQL's error
/// cleanup, should an error escape while it is held).
pub struct Locked {
    _private: (),
}

/// Takes the LWLock exclusively. Critical sections are short and never raise errors.
pub fn lock() -> Locked {
    // SAFETY: LOCK points into the main LWLock array, set up before any backend exists.
    unsafe { pg_sys::LWLockAcquire(LOCK.load(SeqCst), pg_sys::LWLockMode::LW_EXCLUSIVE) };
    Locked { _private: () }
}

impl Drop for Locked {
    fn drop(&mut self) {
        // SAFETY: held since `lock`; after an error PostgreSQL may have released it already
        // (LWLockReleaseAll), which LWLockHeldByMe tells.
        unsafe {
            let lock = LOCK.load(SeqCst);
            if pg_sys::LWLockHeldByMe(lock) {
                pg_sys::LWLockRelease(lock);
            }
        }
    }
}

impl Locked {
    /// A slot's metadata.
    pub fn meta(&mut self, index: usize) -> &mut SlotMeta {
        // SAFETY: the LWLock is held exclusively and `&mut self` prevents a second borrow.
        unsafe { &mut *shared().slots[index].meta.get() }
    }

    fn allocators(&mut self) -> &mut [Allocator; MAX_ALLOCATORS] {
        // SAFETY: as in `meta`.
        unsafe { &mut *shared().allocators.get() }
    }

    fn holds(&mut self) -> &mut [Hold; MAX_HOLDS] {
        // SAFETY: as in `meta`.
        unsafe { &mut *shared().holds.get() }
    }

    /// Whether allocator starts for `db` are held back now.
    fn held(&mut self, db: pg_sys::Oid) -> bool {
        let now = now();
        self.holds().iter().any(|h| h.db == db && h.until > now)
    }

    fn requests(&mut self) -> &mut [Request; MAX_REQUESTS] {
        // SAFETY: as in `meta`.
        unsafe { &mut *shared().requests.get() }
    }

    /// The slot holding segment `name` of database `db`, if it is cached.
    pub fn find(&mut self, db: pg_sys::Oid, name: &str) -> Option<usize> {
        (0..MAX_SEGMENTS).find(|&i| {
            let m = self.meta(i);
            m.db == db && m.name.as_str() == name && slot(i).generation.load(SeqCst) % 2 == 1
        })
    }

    /// Assigns a free slot to segment `name` of `db`, empty and with a refill wanted.
    pub fn assign(&mut self, db: pg_sys::Oid, name: &str, base_step: i64) -> Option<usize> {
        let index =
            (0..MAX_SEGMENTS).find(|&i| slot(i).generation.load(SeqCst).is_multiple_of(2))?;
        let s = slot(index);
        s.buffers.clear();
        *self.meta(index) = SlotMeta {
            db,
            name: FixedText::new(name),
            base_step,
            refill_wanted: true,
            ..SlotMeta::default()
        };
        s.generation.fetch_add(1, SeqCst);
        Some(index)
    }

    /// Frees a slot: its cached numbers are skipped, never reissued; backends holding its old
    /// generation look the name up again.
    pub fn release(&mut self, index: usize) {
        let s = slot(index);
        s.buffers.clear();
        *self.meta(index) = SlotMeta::default();
        if s.generation.load(SeqCst) % 2 == 1 {
            s.generation.fetch_add(1, SeqCst);
        }
    }

    /// Frees every slot of database `db` (its `idgen_segment` or the database is being
    /// dropped) and asks its allocator to exit if the database goes.
    pub fn forget_database(&mut self, db: pg_sys::Oid, retire_allocator: bool) {
        for i in 0..MAX_SEGMENTS {
            if self.meta(i).db == db {
                self.release(i);
            }
        }
        if retire_allocator {
            if let Some(a) = self.allocators().iter_mut().find(|a| a.db == db) {
                a.retire = true;
                wake(a);
            }
        }
    }

    /// Makes sure database `db` has an allocator, registering a dynamic background worker if it
    /// has none (or if one registered long ago never reported in), and wakes it.
    pub fn ensure_allocator(&mut self, db: pg_sys::Oid) -> Result<(), Error> {
        let now = now();
        if self.held(db) {
            return Ok(()); // a database command wants the database alone: callers wait
        }
        if let Some(a) = self.allocators().iter_mut().find(|a| a.db == db) {
            if a.pid != 0 || now - a.launched_at < ALLOCATOR_START_GRACE_US {
                wake(a);
                return Ok(());
            }
            *a = Allocator::default();
        }
        let Some(entry) = self
            .allocators()
            .iter_mut()
            .find(|a| a.db == pg_sys::InvalidOid)
        else {
            return Err(unavailable());
        };
        if !crate::worker::launch(db) {
            return Err(unavailable());
        }
        *entry = Allocator {
            db,
            launched_at: now,
            ..Allocator::default()
        };
        Ok(())
    }

    /// Worker side: reports the calling process in as `db`'s allocator. False if another
    /// allocator of `db` already reported in (this one must exit).
    pub fn claim_allocator(&mut self, db: pg_sys::Oid) -> bool {
        if self.held(db) {
            return false;
        }
        // SAFETY: plain process globals of this backend.
        let (pid, latch) = unsafe { (pg_sys::MyProcPid, pg_sys::MyLatch as usize) };
        let entry = match self.allocators().iter().position(|a| a.db == db) {
            Some(i) => i,
            None => match self
                .allocators()
                .iter()
                .position(|a| a.db == pg_sys::InvalidOid)
            {
                Some(i) => i,
                None => return false,
            },
        };
        let a = &mut self.allocators()[entry];
        if a.pid != 0 && a.pid != pid {
            return false;
        }
        *a = Allocator {
            db,
            pid,
            latch,
            launched_at: a.launched_at,
            retire: false,
        };
        true
    }

    /// Worker side: whether the allocator of `db` has been asked to exit.
    pub fn retire_requested(&mut self, db: pg_sys::Oid) -> bool {
        self.allocators().iter().any(|a| a.db == db && a.retire)
    }

    /// Worker side: the allocator of `db` leaves. Requests it was running fail (their callers
    /// stop waiting), and segments it had frozen mid-change lose their cached numbers: the
    /// change may have committed, so thawing could reissue numbers.
    pub fn allocator_exits(&mut self, db: pg_sys::Oid) {
        // SAFETY: a plain process global.
        let pid = unsafe { pg_sys::MyProcPid };
        let Some(entry) = self
            .allocators()
            .iter_mut()
            .find(|a| a.db == db && a.pid == pid)
        else {
            return; // never reported in (another allocator serves db): nothing of ours to undo
        };
        *entry = Allocator::default();
        let failure = Failure::from_error(&Error::Allocator {
            sqlstate: pgrx::PgSqlErrorCode::ERRCODE_ADMIN_SHUTDOWN as i32,
            message: "the idgen allocator worker exited before finishing the request".into(),
            detail: None,
            hint: Some("Check the server log, then retry.".into()),
        });
        for r in self.requests().iter_mut() {
            if r.db == db && r.state == RequestState::Running {
                r.failed = true;
                r.failure = failure;
                r.state = RequestState::Done;
            } else if r.db == db && r.state == RequestState::Abandoned {
                *r = Request::default(); // nobody waits for it any more
            }
        }
        for i in 0..MAX_SEGMENTS {
            let m = self.meta(i);
            if m.db == db && m.frozen {
                m.frozen = false;
                slot(i).buffers.clear();
            }
        }
        broadcast();
    }

    /// Worker side: true (and the entry is freed) if `db`'s allocator has nothing left to do.
    pub fn retire_if_idle(&mut self, db: pg_sys::Oid) -> bool {
        if self.has_work(db) {
            return false;
        }
        // SAFETY: a plain process global.
        let pid = unsafe { pg_sys::MyProcPid };
        for a in self.allocators().iter_mut() {
            if a.db == db && a.pid == pid {
                *a = Allocator::default();
            }
        }
        true
    }

    fn has_work(&mut self, db: pg_sys::Oid) -> bool {
        self.requests()
            .iter()
            .any(|r| r.db == db && r.state == RequestState::Pending)
            || (0..MAX_SEGMENTS).any(|i| {
                let m = self.meta(i);
                m.db == db && m.refill_wanted
            })
    }

    /// Worker side: the next unit of work for `db`'s allocator: a pending request first (its
    /// state becomes running), else a segment that wants a refill.
    pub fn take_work(&mut self, db: pg_sys::Oid) -> Option<Work> {
        if let Some(i) = self
            .requests()
            .iter()
            .position(|r| r.db == db && r.state == RequestState::Pending)
        {
            let r = &mut self.requests()[i];
            r.state = RequestState::Running;
            return Some(Work::Request(i, *r));
        }
        let index = (0..MAX_SEGMENTS).find(|&i| {
            let m = self.meta(i);
            m.db == db && m.refill_wanted && !m.frozen
        })?;
        Some(Work::Refill {
            index,
            generation: slot(index).generation.load(SeqCst),
            meta: *self.meta(index),
        })
    }

    /// Worker side: stores the outcome of request `index` and wakes its caller.
    pub fn finish_request(&mut self, index: usize, outcome: Result<i64, Failure>) {
        let r = &mut self.requests()[index];
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
        broadcast();
    }

    /// Worker side: stores the outcome of a refill of slot `index` (if it still holds the same
    /// segment) and wakes waiters. Returns false if a committed range could not be used.
    pub fn finish_refill(
        &mut self,
        index: usize,
        generation: u64,
        outcome: Result<Refilled, (Failure, bool)>,
    ) -> bool {
        let mut used = true;
        if slot(index).generation.load(SeqCst) == generation {
            match outcome {
                Ok(done) => {
                    used = slot(index).buffers.install(done.range);
                    let m = self.meta(index);
                    m.base_step = done.base_step;
                    m.step = done.step;
                    m.last_refill_at = done.at;
                    m.refills += 1;
                    m.attempts += 1;
                    m.failed = false;
                    m.refill_wanted = false;
                }
                Err((failure, gone)) => {
                    let m = self.meta(index);
                    m.attempts += 1;
                    m.failed = true;
                    m.failure = failure;
                    m.refill_wanted = false;
                    if gone {
                        self.release(index);
                    }
                }
            }
        } else if outcome.is_ok() {
            used = false;
        }
        broadcast();
        used
    }

    /// Rows for `segment_status()`: the cached segments of database `db`.
    pub fn status(&mut self, db: pg_sys::Oid) -> Vec<CacheStatus> {
        let cached: Vec<usize> = (0..MAX_SEGMENTS)
            .filter(|&i| self.meta(i).db == db && slot(i).generation.load(SeqCst) % 2 == 1)
            .collect();
        cached
            .into_iter()
            .map(|i| {
                let (current, next) = slot(i).buffers.views();
                let m = *self.meta(i);
                CacheStatus {
                    name: m.name.as_str().to_owned(),
                    step: m.step,
                    current,
                    next,
                    refills: m.refills,
                    last_refill_at: m.last_refill_at,
                    refill_pending: m.refill_wanted,
                }
            })
            .collect()
    }
}

/// Asks the allocator of database `db` to leave and waits (up to 5 s, interruptibly) until it
/// has, holding back new allocator starts for `db` until the caller's transaction ends (or
/// 30 s at most). For
/// the commands that refuse to run while another session is connected to `db` (SQLSTATE 55006):
/// `CREATE DATABASE ... TEMPLATE db`, `ALTER DATABASE db RENAME`, `ALTER DATABASE db SET
/// TABLESPACE`. An allocator in the middle of a unit of work finishes it first; callers that
/// need the allocator meanwhile wait (`idgen.segment_wait_timeout`). Its cached ranges stay.
pub fn evict_allocator(db: pg_sys::Oid) {
    if SHARED.load(SeqCst).is_null() {
        return;
    }
    let started = now();
    {
        // SAFETY: a plain process global.
        let pid = unsafe { pg_sys::MyProcPid };
        let mut g = lock();
        let free = g
            .holds()
            .iter()
            .position(|h| (h.db == db && h.pid == pid) || h.until <= started);
        match free {
            Some(i) => {
                g.holds()[i] = Hold {
                    db,
                    until: started + HOLD_US,
                    pid,
                }
            }
            None => return, // too many at once: the command waits as PostgreSQL makes it
        }
        hold_until_transaction_end();
        if let Some(a) = g.allocators().iter_mut().find(|a| a.db == db) {
            if a.pid == 0 {
                *a = Allocator::default(); // not started yet: it will find the hold and leave
            } else {
                a.retire = true;
                wake(a);
            }
        }
    }
    while now() - started < EVICT_WAIT_US {
        if !lock().allocators().iter().any(|a| a.db == db) {
            return;
        }
        crate::latch::sleep_interruptibly(std::time::Duration::from_millis(10));
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
        // SAFETY: a #[pg_guard]ed callback, registered once per process.
        unsafe { pg_sys::RegisterXactCallback(Some(end_holds), std::ptr::null_mut()) };
        REGISTERED.set(true);
    }
    HOLDING.set(true);
}

/// Transaction callback: at commit or abort, the holds this backend put on databases end
/// (their allocators may start again) and waiting callers are woken.
#[pg_guard]
unsafe extern "C-unwind" fn end_holds(event: pg_sys::XactEvent::Type, _arg: *mut std::ffi::c_void) {
    use pg_sys::XactEvent::*;
    if !matches!(
        event,
        XACT_EVENT_COMMIT | XACT_EVENT_ABORT | XACT_EVENT_PREPARE
    ) {
        return;
    }
    if !HOLDING.replace(false) || SHARED.load(SeqCst).is_null() {
        return;
    }
    // SAFETY: a plain process global.
    let pid = unsafe { pg_sys::MyProcPid };
    let mut g = lock();
    for h in g.holds().iter_mut().filter(|h| h.pid == pid) {
        *h = Hold::default();
    }
    drop(g);
    broadcast(); // waiting callers ask for an allocator again
}

/// A cached segment as `segment_status()` shows it.
pub struct CacheStatus {
    /// Segment name.
    pub name: String,
    /// Dynamic step of the last refill (0 before the first).
    pub step: i64,
    /// The range being drawn from.
    pub current: Option<BufferView>,
    /// The range fetched ahead.
    pub next: Option<BufferView>,
    /// Refills since the segment was loaded into the cache.
    pub refills: u64,
    /// When the last refill committed (`TimestampTz`), 0 if none.
    pub last_refill_at: i64,
    /// A refill has been asked for and not yet done.
    pub refill_pending: bool,
}

/// A refill that committed: the range, and the steps it was taken with.
pub struct Refilled {
    /// The new range, durable in `idgen_segment`.
    pub range: Range,
    /// `idgen_segment.step` at the time.
    pub base_step: i64,
    /// The dynamic step used.
    pub step: i64,
    /// Commit time (`TimestampTz`).
    pub at: i64,
}

/// One unit of work for an allocator (a copy out of shared memory, taken once per unit).
#[allow(clippy::large_enum_variant)]
pub enum Work {
    /// Request at this index (a copy; the original is marked running).
    Request(usize, Request),
    /// Refill the slot at `index`, which held `generation` when the work was taken.
    Refill {
        index: usize,
        generation: u64,
        meta: SlotMeta,
    },
}

fn unavailable() -> Error {
    // SAFETY: a plain GUC variable.
    Error::AllocatorUnavailable {
        max_worker_processes: unsafe { pg_sys::max_worker_processes },
    }
}

fn wake(a: &Allocator) {
    if a.latch != 0 {
        // SAFETY: the latch of a live PGPROC (cleared from the entry before that process exits).
        unsafe { pg_sys::SetLatch(a.latch as *mut pg_sys::Latch) };
    }
}

/// Wakes everyone waiting on the cache.
pub fn broadcast() {
    // SAFETY: the condition variable lives in shared memory and was initialized at startup.
    unsafe { pg_sys::ConditionVariableBroadcast(shared().cv.get()) };
}

/// Current time as `TimestampTz` (µs since 2000-01-01).
pub fn now() -> i64 {
    // SAFETY: reads the clock.
    unsafe { pg_sys::GetCurrentTimestamp() }
}

/// Waits until `ready` returns `Some` (checked under the LWLock), the deadline passes (`Err`)
/// or the query is cancelled (the error propagates). `deadline_us` is a `TimestampTz`.
fn wait_for<T>(
    deadline_us: Option<i64>,
    mut ready: impl FnMut(&mut Locked) -> Option<T>,
) -> Result<T, ()> {
    let cv = shared().cv.get();
    let _cancel = CancelSleep;
    loop {
        if let Some(v) = ready(&mut lock()) {
            return Ok(v);
        }
        let timeout = match deadline_us {
            Some(d) => {
                let left_us = d - now();
                if left_us <= 0 {
                    return Err(());
                }
                // Rounded up: a wait never ends before its deadline (rounding down gave up to
                // 1 ms early, and `idgen.segment_wait_timeout = 300ms` waited 299 ms).
                (left_us + 999).div_euclid(1000).min(1000)
            }
            None => 1000,
        };
        // SAFETY: an initialized shared condition variable; the wait checks for interrupts.
        unsafe {
            pg_sys::ConditionVariableTimedSleep(cv, timeout, pg_sys::PG_WAIT_EXTENSION);
        }
    }
}

/// Leaves the condition variable's wait list however the wait ends.
struct CancelSleep;

impl Drop for CancelSleep {
    fn drop(&mut self) {
        // SAFETY: harmless when not prepared to sleep.
        unsafe { pg_sys::ConditionVariableCancelSleep() };
    }
}

fn deadline() -> Option<i64> {
    guc::segment_wait_timeout_ms().map(|ms| now() + i64::from(ms) * 1000)
}

fn my_database() -> pg_sys::Oid {
    // SAFETY: a plain process global, set when the backend connected.
    unsafe { pg_sys::MyDatabaseId }
}

fn check_not_in_recovery() -> Result<(), Error> {
    if crate::recovery_in_progress() {
        return Err(Error::SegmentInRecovery);
    }
    Ok(())
}

/// Sends `request` to this database's allocator and waits for its result. `timeout`: wait at
/// most `idgen.segment_wait_timeout` (loads, which `segment_nextval` waits for); otherwise
/// until done or cancelled (admin calls, which may already have committed).
pub fn submit(mut request: Request, timeout: bool) -> Result<i64, Error> {
    check_not_in_recovery()?;
    release_requests_at_exit();
    let db = my_database();
    request.db = db;
    request.state = RequestState::Pending;
    // SAFETY: a plain process global.
    request.owner = unsafe { pg_sys::MyProcPid };
    let index = {
        let mut g = lock();
        let Some(index) = g
            .requests()
            .iter()
            .position(|r| r.state == RequestState::Free)
        else {
            return Err(Error::RequestQueueFull { max: MAX_REQUESTS });
        };
        g.requests()[index] = request;
        if let Err(e) = g.ensure_allocator(db) {
            g.requests()[index] = Request::default();
            return Err(e);
        }
        index
    };
    let abandon = AbandonOnUnwind(index);
    let outcome = wait_for(if timeout { deadline() } else { None }, |g| {
        let r = g.requests()[index];
        match r.state {
            RequestState::Done => {
                g.requests()[index] = Request::default();
                Some(if r.failed {
                    Err(r.failure.to_error())
                } else {
                    Ok(r.result)
                })
            }
            // The allocator may have exited (or never started): start another.
            RequestState::Pending => g.ensure_allocator(db).err().map(Err),
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
    let r = &mut g.requests()[index];
    match r.state {
        RequestState::Pending | RequestState::Done => *r = Request::default(),
        RequestState::Running => r.state = RequestState::Abandoned,
        RequestState::Free | RequestState::Abandoned => {}
    }
}

/// Makes sure this backend's requests are given up when it exits, however it exits: a caller
/// that dies by FATAL while it waits (`pg_terminate_backend`, a session timeout) unwinds no
/// Rust frame, and its request slot would otherwise stay taken until the server restarts
/// (after [`MAX_REQUESTS`] such deaths, every admin call and uncached load failed with 53400).
fn release_requests_at_exit() {
    thread_local! {
        static REGISTERED: Cell<bool> = const { Cell::new(false) };
    }
    if !REGISTERED.get() {
        // SAFETY: a #[pg_guard]ed callback with no argument, registered once per process.
        unsafe { pg_sys::before_shmem_exit(Some(release_own_requests), pg_sys::Datum::from(0)) };
        REGISTERED.set(true);
    }
}

/// `before_shmem_exit` callback: abandons every request of this process (see
/// [`abandon_request`]) and leaves the condition variable's wait list.
#[pg_guard]
unsafe extern "C-unwind" fn release_own_requests(_code: i32, _arg: pg_sys::Datum) {
    // SAFETY: harmless when not prepared to sleep; done before taking the LWLock.
    unsafe { pg_sys::ConditionVariableCancelSleep() };
    // SAFETY: a plain process global.
    let pid = unsafe { pg_sys::MyProcPid };
    let mine: Vec<usize> = {
        let mut g = lock();
        (0..MAX_REQUESTS)
            .filter(|&i| {
                g.requests()[i].owner == pid && g.requests()[i].state != RequestState::Free
            })
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

/// What this session knows about one segment name: where it is cached (slot and generation,
/// checked on every draw) and the session's `currval`. Leaked, one per name the session ever
/// drew from, so that a call site may keep it for the session's life ([`Entry`]); the fields are
/// cells because the map and the call sites share it.
struct Local {
    name: String,
    resolved: Cell<(usize, u64)>,
    currval: Cell<Option<i64>>,
}

/// This session's segments by name (this backend's database only), keyed by the entry's own
/// name, hashed with FxHash: the names are the session's own, and SipHash was a tenth of
/// `segment_nextval()`'s time.
type LocalMap = HashMap<&'static str, &'static Local, FxBuildHasher>;

thread_local! {
    static LOCAL: RefCell<LocalMap> = RefCell::new(LocalMap::default());
}

/// This session's handle on one segment name, valid until the session ends: what a call site
/// keeps (`fn_extra`) to skip the name lookup on the next call.
#[derive(Clone, Copy)]
pub struct Entry(&'static Local);

/// The session's entry for segment `name`, resolving it (42704 when no such segment exists)
/// on first use. Only names that resolved get an entry.
pub fn entry(name: &str) -> Result<Entry, Error> {
    if let Some(e) = LOCAL.with_borrow(|local| local.get(name).copied()) {
        return Ok(Entry(e));
    }
    let resolved = resolve(name)?;
    let e: &'static Local = Box::leak(Box::new(Local {
        name: name.to_owned(),
        resolved: Cell::new(resolved),
        currval: Cell::new(None),
    }));
    LOCAL.with_borrow_mut(|local| local.insert(e.name.as_str(), e));
    Ok(Entry(e))
}

impl Entry {
    /// Whether this is the entry of the segment named by `bytes`.
    pub fn is_named(&self, bytes: &[u8]) -> bool {
        self.0.name.as_bytes() == bytes
    }
}

/// Draws `n >= 1` numbers of the entry's segment, passing each run of consecutive numbers to
/// `run(first, count)` in increasing order, the counts summing to `n`. The hot path is one
/// `fetch_add` on the cached range; a caller waits only when both ranges are empty, at most
/// `idgen.segment_wait_timeout`.
///
/// Refused in a read-only transaction (25006), as `nextval()` is.
pub fn draw(entry: Entry, n: u64, mut run: impl FnMut(i64, u64)) -> Result<(), Error> {
    if crate::read_only_transaction() {
        // Every transaction of a standby is read-only: say why it really refuses.
        check_not_in_recovery()?;
        return Err(Error::ReadOnlyTransaction {
            function: "segment_nextval()",
        });
    }
    let e = entry.0;
    let mut left = n;
    while left > 0 {
        let (index, generation) = match e.resolved.get() {
            (i, g) if slot(i).generation.load(SeqCst) == g => (i, g),
            // Evicted, or dropped and created again: find it anew (the currval stays).
            _ => {
                let r = resolve(&e.name)?;
                e.resolved.set(r);
                r
            }
        };
        let s = slot(index);
        match s.buffers.draw(left) {
            Some(Drawn {
                first,
                count,
                prefetch,
            }) => {
                if s.generation.load(SeqCst) != generation {
                    continue; // the slot was reused meanwhile: drop the numbers, look up again
                }
                if prefetch {
                    ask_for_next_range(index, generation);
                }
                e.currval.set(Some(first + (count as i64 - 1)));
                run(first, count);
                left -= count;
            }
            None => wait_for_range(&e.name, index, generation)?,
        }
    }
    Ok(())
}

/// This session's last number of segment `name`, if it drew one.
pub fn currval(name: &str) -> Option<i64> {
    LOCAL.with_borrow(|local| local.get(name)?.currval.get())
}

/// The slot and generation of segment `name` of this database, loading it into the cache
/// through the allocator if no backend has yet.
fn resolve(name: &str) -> Result<(usize, u64), Error> {
    let db = my_database();
    loop {
        if let Some(i) = lock().find(db, name) {
            return Ok((i, slot(i).generation.load(SeqCst)));
        }
        submit(Request::new(RequestKind::Load, name), true)?;
    }
}

/// Asks for the range after the current one, in the background (the caller does not wait).
fn ask_for_next_range(index: usize, generation: u64) {
    let mut g = lock();
    if slot(index).generation.load(SeqCst) != generation {
        return;
    }
    let m = g.meta(index);
    if m.frozen || m.refill_wanted || slot(index).buffers.next_remaining() > 0 {
        return;
    }
    m.refill_wanted = true;
    let db = m.db;
    // Failing to start the allocator is not this caller's problem yet: the current range still
    // has numbers. The caller that finds both empty reports it.
    if g.ensure_allocator(db).is_err() {
        g.meta(index).refill_wanted = false;
    }
}

/// Slow path: both ranges are empty (or the segment is frozen by an admin call). Switches to
/// the next range if it has arrived, else asks the allocator and waits. Returns once the slot
/// has numbers or is no longer the caller's (the caller draws or looks up again).
fn wait_for_range(name: &str, index: usize, generation: u64) -> Result<(), Error> {
    check_not_in_recovery()?;
    let mut asked_at: Option<u64> = None;
    let outcome = wait_for(deadline(), |g| {
        let s = slot(index);
        if s.generation.load(SeqCst) != generation {
            return Some(Ok(()));
        }
        let m = *g.meta(index);
        if m.frozen {
            return None;
        }
        if s.buffers.advance() {
            return Some(Ok(()));
        }
        match asked_at {
            Some(a) if m.attempts > a && m.failed => return Some(Err(m.failure.to_error())),
            Some(a) if m.attempts > a => asked_at = None, // filled and drained again: ask anew
            _ => {}
        }
        if asked_at.is_none() {
            asked_at = Some(m.attempts);
            g.meta(index).refill_wanted = true;
        }
        if let Err(e) = g.ensure_allocator(m.db) {
            return Some(Err(e));
        }
        None
    });
    match outcome {
        Ok(r) => r,
        Err(()) => Err(Error::SegmentWaitTimeout {
            name: name.to_owned(),
            ms: guc::segment_wait_timeout_ms().unwrap_or(0),
        }),
    }
}

/// `object_access_hook` part: when `idgen_segment` (the extension) or a whole database is
/// dropped, that database's cached ranges are forgotten, so a re-created segment can never
/// hand out numbers cached from the old table.
pub fn on_drop(class_id: pg_sys::Oid, object_id: pg_sys::Oid) {
    if SHARED.load(SeqCst).is_null() {
        return;
    }
    if class_id == pg_sys::DatabaseRelationId {
        lock().forget_database(object_id, true);
    } else if class_id == pg_sys::RelationRelationId && is_the_catalog(object_id) {
        lock().forget_database(my_database(), false);
    }
}

/// Whether relation `relid` is idgen's own `idgen_segment`: named so and a member of the idgen
/// extension (a user's table or temporary table of the same name is not).
fn is_the_catalog(relid: pg_sys::Oid) -> bool {
    // SAFETY: get_rel_name returns a palloc'd copy or NULL.
    let name = unsafe { pg_sys::get_rel_name(relid) };
    // SAFETY: non-null, NUL-terminated.
    if name.is_null() || unsafe { std::ffi::CStr::from_ptr(name) } != c"idgen_segment" {
        return false;
    }
    // SAFETY: catalog lookups by oid and name; missing_ok, so no error for no extension.
    unsafe {
        let extension = pg_sys::get_extension_oid(c"idgen".as_ptr(), true);
        extension != pg_sys::InvalidOid
            && pg_sys::getExtensionOfObject(pg_sys::RelationRelationId, relid) == extension
    }
}

/// Builds the allocator's registration: one dynamic background worker for `db`, shown in
/// `pg_stat_activity` with backend_type and application_name `idgen allocator`. No catalog
/// access here: it runs under the LWLock.
pub fn allocator_builder(db: pg_sys::Oid) -> BackgroundWorkerBuilder {
    BackgroundWorkerBuilder::new(&format!("idgen allocator for database {}", db.to_u32()))
        .set_type("idgen allocator")
        .set_library("idgen")
        .set_function("idgen_allocator_main")
        .set_argument(Some(pg_sys::Datum::from(db.to_u32())))
        .enable_spi_access()
        .set_start_time(BgWorkerStartTime::RecoveryFinished)
        .set_restart_time(None)
}
