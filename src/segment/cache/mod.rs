//! The segment cache's shared memory (`idgen_segment_cache`): its layout, the LWLock
//! `idgen_segment` that guards everything but the lock-free slots, and the one condition variable
//! every waiter sleeps on (DESIGN.md §2–3). The operations on each table are in their own
//! files: [`self::slots`], [`super::allocator::launcher`] (allocators and holds),
//! [`self::queue`] (requests).
//!
//! * `idgen.segment_cache_size` [`Slot`]s, each holding one (database, segment name) while in
//!   use: a lock-free [`DoubleBuffer`] for the hot path, a generation and a referenced bit (the
//!   clock sweep's); its [`SlotMeta`] (name, steps, refill state, the mark of its last range) is
//!   under the LWLock, and so is the name index, a dynahash table (database, name) → slot.
//! * One [`Allocator`] entry per database with a running allocator background worker, which
//!   alone writes `idgen_segment`, and the [`Hold`]s that keep allocators away for a while.
//! * A queue of [`Request`]s, one entry per process that may wait plus one per allocator, so
//!   that no workload fills it: loading a segment into the cache, and the admin calls
//!   (create, alter, drop, setval, interleave ready), each run by the allocator in its own
//!   transaction.
//! * One condition variable, broadcast whenever a range is installed, a request completes or an
//!   allocator exits; waiters re-check their own condition ([`wait_for`]).

pub(super) mod queue;
pub(super) mod slots;

use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8};

use pgrx::pg_sys;

use super::buffer::DoubleBuffer;
use crate::failure::{Failure, FixedText};
use crate::guc;
use crate::lwlock::{LWLockGuard, NamedLWLock};
use crate::shmem::{Part, ShmemArray, ShmemHash, ShmemStruct};
use crate::time::now_timestamptz_us;

/// Entries of the allocator table: `max_worker_processes`. An entry is a registered allocator
/// worker (one per database and [`Lane`]), running or starting; a worker holds one of
/// `max_worker_processes` while it lives, so no workload fills the table before PostgreSQL
/// refuses the worker itself (53400). An entry whose worker never reported in is reused once
/// its start grace has passed.
fn allocator_entries() -> usize {
    crate::backend::max_worker_processes().max(1) as usize
}

/// Entries of the request queue: `MaxBackends` plus one per allocator entry. A process waits
/// on at most one request of its own at a time (a request it stops waiting for is withdrawn,
/// or, if an allocator is running it, left `Abandoned` until that allocator finishes it), and
/// each allocator runs one request at a time, so at most one abandoned request per allocator.
/// No workload, in one database or many, fills the queue.
fn request_entries() -> usize {
    crate::backend::max_backends() + allocator_entries()
}

/// The clock sweep's bit of [`Slot::referenced`].
pub(crate) const SWEPT: u8 = 1;
/// The idle take-out's bit of [`Slot::referenced`].
pub(crate) const IDLED: u8 = 2;

/// Notes a draw from `s` for both readers of [`Slot::referenced`]: a relaxed load, and a store
/// only when a bit is clear (a busy segment's draws only read the cache line).
#[inline]
pub(crate) fn mark_referenced(s: &Slot) {
    if s.referenced.load(Relaxed) != SWEPT | IDLED {
        s.referenced.store(SWEPT | IDLED, Relaxed);
    }
}

/// One cached segment: what the hot path reads without a lock.
#[repr(C)]
pub(crate) struct Slot {
    /// The two ranges; drawn from without a lock.
    pub(crate) buffers: DoubleBuffer,
    /// Odd while the slot holds a segment, even while free; bumped on every assignment and
    /// release, so a backend's cached (slot, generation) goes stale when the slot is reused.
    pub(crate) generation: AtomicU64,
    /// Drawn from since each of two readers last looked: [`SWEPT`], the clock sweep's
    /// (PostgreSQL's buffer usage bit, cleared by the sweep, which evicts a slot it finds
    /// clear), and [`IDLED`], the idle take-out's (cleared by it every
    /// `idgen.segment_worker_idle_timeout`; a slot found clear is given back). Two bits, so that
    /// one reader clearing its own never makes the other take a slot drawn from meanwhile. Set
    /// by draws with a load and a store only when either is clear ([`mark_referenced`]).
    pub(crate) referenced: AtomicU8,
    /// The segment's per-backend cache (`idgen_segment.cache`): 1 for none (every
    /// number from the shared range), n > 1 for blocks of n numbers taken by a backend at once,
    /// 0 for the adaptive mode. Written under the LWLock when the slot is assigned and by
    /// `segment_alter`; read without a lock when a backend takes a block.
    pub(crate) cache: AtomicU32,
    /// The slot holds a global segment: its ranges are served only while the registry's last
    /// contact is younger than the lease (`allocator::global::check_contact`). Written under the
    /// LWLock when the slot is assigned; read without a lock by draws.
    pub(crate) global: AtomicBool,
}

/// A segment's metadata, guarded by the LWLock.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct SlotMeta {
    /// Database of the segment; `InvalidOid` while the slot is free.
    pub(crate) db: pg_sys::Oid,
    /// Segment name.
    pub(crate) name: FixedText<64>,
    /// The segment's own step (`idgen_segment.step`): the floor of the dynamic step.
    pub(crate) base_step: i64,
    /// Step of the last refill (the dynamic step); 0 before the first.
    pub(crate) step: i64,
    /// When the last refill committed (`TimestampTz`, µs); 0 before the first.
    pub(crate) last_refill_at: i64,
    /// Refills since the slot was loaded.
    pub(crate) refills: u64,
    /// [`DoubleBuffer::issued`](crate::segment::buffer::DoubleBuffer::issued) when the slot was
    /// loaded: the numbers issued since are the difference.
    pub(crate) issued_base: u64,
    /// Calls that found both ranges empty and slept for a range since the slot was loaded.
    pub(crate) waits: u64,
    /// Of those, the ones that gave up at `idgen.segment_wait_timeout` (55P03).
    pub(crate) timeouts: u64,
    /// Refill attempts that failed (their callers got the error) since the slot was loaded.
    pub(crate) refill_failures: u64,
    /// Refill attempts that finished, successful or not; waiters compare it.
    pub(crate) attempts: u64,
    /// The high-water mark the last refill committed (the last number of its range), valid
    /// when [`SlotMeta::marked`]: what a give-back expects to find in `idgen_segment`.
    pub(crate) mark: i64,
    /// A refill committed since the slot was loaded, so [`SlotMeta::mark`] is known.
    pub(crate) marked: bool,
    /// A refill that failed because the registry did not answer is not tried again before
    /// this time (`TimestampTz`, µs; 0 for no delay), so that other segments' refills go on.
    pub(crate) retry_at: i64,
    /// The allocator should fetch the next range.
    pub(crate) refill_wanted: bool,
    /// When the refill was first wanted, in [`Guarded::tickets`] order: the allocator serves
    /// refills and requests first come, first served.
    pub(crate) refill_ticket: u64,
    /// An admin call (setval, drop, create) is changing the segment: draws wait.
    pub(crate) frozen: bool,
    /// The last refill attempt failed; why is in [`Guarded::failures`].
    pub(crate) failed: bool,
    /// A global segment: the registry allocator refills it.
    pub(crate) global: bool,
}

impl SlotMeta {
    /// The allocator that refills it.
    pub(crate) fn lane(&self) -> Lane {
        if self.global {
            Lane::Registry
        } else {
            Lane::Local
        }
    }
}

/// Which of a database's two allocators runs a unit of work. The local one runs everything
/// that stays in this server: local segments' refills, loads of known segments, the admin
/// calls, local serial counters. The registry one runs everything that calls the registry:
/// global segments' refills, loads of names this database does not know (a registry lookup),
/// the creation of global segments, global serial counters. So no registry call ever runs
/// where a local refill waits: a registry that refuses, answers slowly or never answers delays
/// only global work (DESIGN.md §2 "Allocators").
#[repr(u8)]
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
pub(crate) enum Lane {
    #[default]
    Local = 0,
    Registry = 1,
}

impl Lane {
    /// The lane a worker's argument names (`allocator::launcher::builder`).
    pub(crate) fn from_bits(bits: u64) -> Lane {
        if bits == Lane::Registry as u64 {
            Lane::Registry
        } else {
            Lane::Local
        }
    }
}

/// An allocator background worker of one database, of one [`Lane`].
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct Allocator {
    /// The database; `InvalidOid` while the entry is free.
    pub(crate) db: pg_sys::Oid,
    /// Which work it runs.
    pub(crate) lane: Lane,
    /// Process id once the worker has reported in; 0 while starting.
    pub(crate) pid: i32,
    /// The worker's latch (`MyLatch`, in shared memory), set to wake it.
    pub(crate) latch: usize,
    /// When the worker was registered (`TimestampTz`).
    pub(crate) launched_at: i64,
    /// The worker should exit (its database is being dropped).
    pub(crate) retire: bool,
}

/// Databases whose allocator may not start for a while: a command that needs the database
/// without other sessions (`CREATE DATABASE ... TEMPLATE`, `ALTER DATABASE ... RENAME`) asked it
/// to leave (`allocator::launcher::evict_allocator`).
pub(crate) const MAX_HOLDS: usize = 8;

/// An allocator start held back for database `db` until `until` (`TimestampTz`).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct Hold {
    pub(crate) db: pg_sys::Oid,
    pub(crate) until: i64,
    /// The backend whose command holds it; its transaction's end ends this hold only.
    pub(crate) pid: i32,
}

/// What a [`Request`] asks of the allocator.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) enum RequestKind {
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
    /// Another subsystem's job ([`super::Job`]), with [`Request::args`] and the name: the
    /// allocator runs the handler registered by [`super::register_job`] in a transaction of
    /// its own; the result is the handler's.
    Job,
}

/// What a request does to the description.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) enum DescriptionChange {
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
pub(crate) enum RequestState {
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
pub(crate) struct Request {
    pub(crate) state: RequestState,
    /// Process id of the caller waiting for it; its exit releases the request.
    pub(crate) owner: i32,
    /// What to do.
    pub(crate) kind: RequestKind,
    /// The database whose allocator runs it.
    pub(crate) db: pg_sys::Oid,
    /// The segment.
    pub(crate) name: FixedText<64>,
    /// Create: start; setval: the value.
    pub(crate) value: i64,
    /// Create/alter: the step; 0 = keep (alter).
    pub(crate) step: i32,
    /// Create/alter: what to do with the description.
    pub(crate) description_change: DescriptionChange,
    /// Create/alter: the description text.
    pub(crate) description: FixedText<1024>,
    /// Create: a global segment, whose mark is in the registry (DESIGN.md §6).
    pub(crate) global: bool,
    /// Create: the per-backend cache (0 adaptive, 1 none, n); alter: the same, or -1 to keep.
    pub(crate) cache: i32,
    /// Job: its arguments.
    pub(crate) args: [i64; 4],
    /// The allocator that runs it: [`Lane::Registry`] when it calls the registry.
    pub(crate) lane: Lane,
    /// When it was submitted, in [`Guarded::tickets`] order.
    pub(crate) ticket: u64,
    /// Outcome: the result (load: slot index; setval: the value).
    pub(crate) result: i64,
    /// Outcome: failed with `failure`.
    pub(crate) failed: bool,
    /// Outcome: the error.
    pub(crate) failure: Failure,
}

impl Guarded {
    /// The next ticket: what was asked for later gets a larger one.
    pub(crate) fn next_ticket(&mut self) -> u64 {
        self.tickets += 1;
        self.tickets
    }

    /// Slot `index` wants its next range: a ticket if it did not already want one (a caller
    /// that comes to wait for a prefetch already wanted keeps its earlier ticket).
    pub(crate) fn want_refill(&mut self, index: usize) {
        if !self.metas[index].refill_wanted {
            let ticket = self.next_ticket();
            let m = &mut self.metas[index];
            m.refill_wanted = true;
            m.refill_ticket = ticket;
        }
    }
}

impl Request {
    /// A request of `kind` for segment `name`, with no arguments yet.
    pub(crate) fn new(kind: RequestKind, name: &str) -> Self {
        Self {
            kind,
            name: FixedText::new(name),
            cache: if kind == RequestKind::Alter { -1 } else { 1 },
            ..Self::default()
        }
    }
}

/// Why a refill of slot `index` (holding `generation`) failed at its attempt `attempts`: the
/// error its waiting callers raise. Kept for the last few failures only, not per slot: a
/// `Failure` is 780 bytes, and the cache may have a million slots.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct NotedFailure {
    pub(crate) index: usize,
    pub(crate) generation: u64,
    pub(crate) attempts: u64,
    pub(crate) failure: Failure,
}

/// Refill failures remembered at once (see [`NotedFailure`]).
pub(crate) const NOTED_FAILURES: usize = 32;

/// The key of the name index: a database and a segment name, zero-padded (a name never holds
/// a zero byte: it is `text`), so equal names have equal bytes. No padding between fields.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct SlotKey {
    db: u32,
    name: [u8; 64],
}

impl SlotKey {
    pub(crate) fn new(db: pg_sys::Oid, name: &str) -> Self {
        let mut key = Self {
            db: db.to_u32(),
            name: [0; 64],
        };
        let bytes = name.as_bytes();
        let n = bytes.len().min(64);
        key.name[..n].copy_from_slice(&bytes[..n]);
        key
    }
}

/// An entry of the name index.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct IndexEntry {
    pub(crate) key: SlotKey,
    pub(crate) index: usize,
}

/// The slots' metadata, an array in shared memory whose length is `idgen.segment_cache_size`:
/// reachable only as [`Guarded::metas`], so only with the LWLock held.
#[repr(C)]
pub(crate) struct Metas {
    _only_in_guarded: [u8; 0],
}

impl Deref for Metas {
    type Target = [SlotMeta];

    fn deref(&self) -> &[SlotMeta] {
        let (ptr, len) = METAS.raw();
        // SAFETY: `len` initialized SlotMetas in shared memory; a Metas is reached only through
        // a `Locked` (the LWLock held exclusively), so nothing writes them meanwhile.
        unsafe { std::slice::from_raw_parts(ptr, len) }
    }
}

impl DerefMut for Metas {
    fn deref_mut(&mut self) -> &mut [SlotMeta] {
        let (ptr, len) = METAS.raw();
        // SAFETY: as in `deref`; `&mut self` comes from `&mut Locked`, the only borrow.
        unsafe { std::slice::from_raw_parts_mut(ptr, len) }
    }
}

/// The allocator table, an array in shared memory of [`allocator_entries`] entries: reachable
/// only as [`Guarded::allocators`], so only with the LWLock held.
#[repr(C)]
pub(crate) struct Allocators {
    _only_in_guarded: [u8; 0],
}

/// The request queue, an array in shared memory of [`request_entries`] entries: reachable only
/// as [`Guarded::requests`], so only with the LWLock held.
#[repr(C)]
pub(crate) struct Requests {
    _only_in_guarded: [u8; 0],
}

/// `Deref` and `DerefMut` to the slice of `$array` for a zero-sized field of [`Guarded`].
macro_rules! guarded_slice {
    ($field:ty, $array:ident, $elem:ty) => {
        impl Deref for $field {
            type Target = [$elem];

            fn deref(&self) -> &[$elem] {
                let (ptr, len) = $array.raw();
                // SAFETY: `len` initialized elements in shared memory; the field is reached
                // only through a `Locked` (the LWLock held exclusively), so nothing writes
                // them meanwhile.
                unsafe { std::slice::from_raw_parts(ptr, len) }
            }
        }

        impl DerefMut for $field {
            fn deref_mut(&mut self) -> &mut [$elem] {
                let (ptr, len) = $array.raw();
                // SAFETY: as in `deref`; `&mut self` comes from `&mut Locked`, the only borrow.
                unsafe { std::slice::from_raw_parts_mut(ptr, len) }
            }
        }
    };
}

guarded_slice!(Allocators, ALLOCATORS, Allocator);
guarded_slice!(Requests, REQUESTS, Request);

/// Everything under the LWLock `idgen_segment`.
#[repr(C)]
pub(crate) struct Guarded {
    /// The metadata of slot `i` ([`slot`]).
    pub(crate) metas: Metas,
    /// Slots in use.
    pub(crate) used: usize,
    /// The clock sweep's hand: the slot it looks at next.
    pub(crate) hand: usize,
    /// The last refill failures, a ring written at `next_failure`.
    pub(crate) failures: [NotedFailure; NOTED_FAILURES],
    pub(crate) next_failure: usize,
    /// The allocators, one entry per database and lane with one.
    pub(crate) allocators: Allocators,
    /// Databases whose allocators are held back.
    pub(crate) holds: [Hold; MAX_HOLDS],
    /// The request queue.
    pub(crate) requests: Requests,
    /// The last ticket handed out to a request or a wanted refill: the order the allocator
    /// serves them in ([`super::allocator`]'s `take_work`).
    pub(crate) tickets: u64,
}

/// Everything segments keep in shared memory. All zero is its empty state, but for the
/// condition variable, which [`PART`] initializes in place.
#[repr(C)]
pub(crate) struct SegmentShared {
    cv: UnsafeCell<pg_sys::ConditionVariable>,
    guarded: UnsafeCell<Guarded>,
}

// SAFETY: every field is behind UnsafeCell and touched only under the LWLock (`Locked`), or by
// ConditionVariable functions, which take its spinlock themselves.
unsafe impl Sync for SegmentShared {}

static SHARED: ShmemStruct<SegmentShared> = ShmemStruct::new(c"idgen_segment_cache");
/// The slots: atomics only, shared by every backend without a lock.
static SLOTS: ShmemArray<Slot> = ShmemArray::new(c"idgen_segment_slots");
/// The slots' metadata: under the LWLock only ([`Metas`]).
static METAS: ShmemArray<SlotMeta> = ShmemArray::new(c"idgen_segment_metas");
/// The allocator table: under the LWLock only ([`Allocators`]).
static ALLOCATORS: ShmemArray<Allocator> = ShmemArray::new(c"idgen_segment_allocators");
/// The request queue: under the LWLock only ([`Requests`]).
static REQUESTS: ShmemArray<Request> = ShmemArray::new(c"idgen_segment_requests");
/// The name index (database, name) → slot: under the LWLock only.
static INDEX: ShmemHash<SlotKey, IndexEntry> = ShmemHash::new(c"idgen_segment_index");
static LOCK: NamedLWLock = NamedLWLock::new(c"idgen_segment");

/// The segment cache's share of shared memory. Created at every (re)creation of shared memory,
/// so a crash restart starts with an empty cache.
pub(crate) const PART: Part = Part {
    request: || {
        let size = guc::segment_cache_size();
        SHARED.request();
        SLOTS.request(size);
        METAS.request(size);
        ALLOCATORS.request(allocator_entries());
        REQUESTS.request(request_entries());
        INDEX.request(size);
        LOCK.request();
    },
    attach: || {
        let size = guc::segment_cache_size();
        // SAFETY: SegmentShared, Slot, SlotMeta, Allocator and Request are atomics and plain
        // numbers (their enums' zero is a variant: Lane::Local, RequestState::Free, ...), valid
        // as zero bytes, but for the condition variable, which is initialized here before any process
        // can use it.
        unsafe {
            SHARED.attach(|fresh| pg_sys::ConditionVariableInit((*fresh).cv.get()));
            SLOTS.attach(size);
            METAS.attach(size);
            ALLOCATORS.attach(allocator_entries());
            REQUESTS.attach(request_entries());
        }
        INDEX.attach(size);
        LOCK.attach();
    },
};

/// Whether the cache exists in this process (false in a process where idgen was not preloaded,
/// where its hooks still run).
pub(crate) fn attached() -> bool {
    SHARED.attached()
        && SLOTS.attached()
        && ALLOCATORS.attached()
        && REQUESTS.attached()
        && LOCK.attached()
}

/// How many segments the cache holds at once, over all databases (`idgen.segment_cache_size`
/// at start).
pub(crate) fn cache_size() -> usize {
    SLOTS.raw().1
}

fn shared() -> &'static SegmentShared {
    SHARED.get()
}

/// The slot at `index`.
pub(crate) fn slot(index: usize) -> &'static Slot {
    &SLOTS.get()[index]
}

impl Guarded {
    /// The slot the index gives for `key`, if any.
    pub(crate) fn indexed(&self, key: &SlotKey) -> Option<usize> {
        // SAFETY: `&self` is reachable only through `Locked`: the LWLock is held exclusively.
        unsafe { INDEX.find(key) }.map(|e| e.index)
    }

    /// Records in the index that `key` is cached in slot `index`; false when the index is full
    /// (it has room for every slot, so only if an entry leaked).
    pub(crate) fn index_insert(&mut self, key: SlotKey, index: usize) -> bool {
        // SAFETY: the LWLock is held exclusively (`&mut self` comes from `Locked`).
        unsafe { INDEX.insert(&key, IndexEntry { key, index }) }
    }

    /// Removes `key` from the index.
    pub(crate) fn index_remove(&mut self, key: &SlotKey) {
        // SAFETY: the LWLock is held exclusively (`&mut self` comes from `Locked`).
        unsafe { INDEX.remove(key) }
    }
}

/// The LWLock `idgen_segment`, held exclusively, and through it everything it guards; released
/// on drop (and by PostgreSQL's error cleanup, should an error escape while it is held).
/// Critical sections are short and never raise errors.
pub(crate) struct Locked {
    _guard: LWLockGuard<'static>,
}

/// Takes the LWLock exclusively.
pub(crate) fn lock() -> Locked {
    Locked {
        _guard: LOCK.exclusive(),
    }
}

impl Deref for Locked {
    type Target = Guarded;

    fn deref(&self) -> &Guarded {
        // SAFETY: the LWLock is held exclusively, so no other process touches the data, and an
        // LWLock is not reentrant, so this process holds at most one `Locked`.
        unsafe { &*shared().guarded.get() }
    }
}

impl DerefMut for Locked {
    fn deref_mut(&mut self) -> &mut Guarded {
        // SAFETY: the LWLock is held exclusively and is not reentrant (see `deref`), and
        // `&mut self` rules out a second borrow through this guard.
        unsafe { &mut *shared().guarded.get() }
    }
}

/// Waits until `ready` returns `Some` (checked under the LWLock), the deadline passes (`Err`)
/// or the query is cancelled (the error propagates). `deadline_us` is a `TimestampTz`.
pub(crate) fn wait_for<T>(
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
                let left_us = d - now_timestamptz_us();
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
        cancel_sleep();
    }
}

/// Takes this process off the condition variable's wait list, if it is on it.
pub(crate) fn cancel_sleep() {
    // SAFETY: ConditionVariableCancelSleep touches only this process's own entry of the wait
    // list it prepared to sleep on (under that list's spinlock), and does nothing when it did
    // not prepare to sleep; it raises no error.
    unsafe { pg_sys::ConditionVariableCancelSleep() };
}

/// The deadline of a caller's wait for a range, `idgen.segment_wait_timeout` from now.
pub(crate) fn deadline() -> Option<i64> {
    guc::segment_wait_timeout_ms().map(|ms| now_timestamptz_us() + i64::from(ms) * 1000)
}

/// One call's deadline for every wait it makes, `idgen.segment_wait_timeout` from its first
/// wait: read from the clock only when first needed (the hot path never waits), then kept, so
/// that a call that has to wait again (its slot evicted, its new range drained by others, its
/// load to be done again) does not start a fresh timeout each time.
#[derive(Default)]
pub(crate) struct CallDeadline(Option<Option<i64>>);

impl CallDeadline {
    /// The deadline (`TimestampTz`), `None` to wait until cancelled.
    pub(crate) fn get(&mut self) -> Option<i64> {
        *self.0.get_or_insert_with(deadline)
    }
}

/// Wakes everyone waiting on the cache.
pub(crate) fn broadcast() {
    // SAFETY: the condition variable lives in shared memory and was initialized at startup.
    unsafe { pg_sys::ConditionVariableBroadcast(shared().cv.get()) };
}
