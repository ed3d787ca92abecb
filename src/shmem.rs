//! idgen's shared memory: the two hooks that request and create it, and [`ShmemStruct`], a typed
//! object in it. Each subsystem declares its own objects and registers one [`Part`] from its
//! `init` ([`register`]); this module only chains the hooks and calls the parts.
//!
//! Only PostgreSQL's primitives live in shared memory: atomics, LWLocks and condition
//! variables. A process-local lock (`std::sync::Mutex`, `parking_lot`) must never be placed
//! there: its waiters park in a per-process table and another backend would never wake them
//! (DESIGN.md §3).

use std::cell::RefCell;
use std::ffi::CStr;
use std::sync::atomic::{AtomicPtr, Ordering};

use pgrx::pg_sys;
use pgrx::prelude::*;

use crate::hooks::HookChain;
use crate::lwlock::LWLockGuard;

/// Pads a value to its own cache line (PostgreSQL's `PG_CACHE_LINE_SIZE`, 128 bytes), so that a
/// counter bumped now and then does not slow down the CAS on the state word next to it.
#[repr(C, align(128))]
#[derive(Default)]
pub(crate) struct CacheLine<T>(pub(crate) T);

/// One subsystem's share of shared memory: `request` runs in `shmem_request_hook` (sizes and
/// LWLock tranches), `attach` in `shmem_startup_hook` (create or find the objects), both in the
/// postmaster, at start and after every crash restart.
#[derive(Clone, Copy)]
pub(crate) struct Part {
    pub(crate) request: fn(),
    pub(crate) attach: fn(),
}

thread_local! {
    /// The registered parts. Written by `_PG_init` and read by the hooks, all in the postmaster,
    /// whose one thread this is; backends inherit a copy they never use.
    static PARTS: RefCell<Vec<Part>> = const { RefCell::new(Vec::new()) };
}

static SHMEM_REQUEST: HookChain<pg_sys::shmem_request_hook_type> = HookChain::new();
static SHMEM_STARTUP: HookChain<pg_sys::shmem_startup_hook_type> = HookChain::new();

/// Installs the two hooks. Called once from `_PG_init`, in the postmaster.
pub(crate) fn init() {
    // SAFETY: _PG_init of the postmaster (idgen refuses to load anywhere else), on its only
    // thread and before any backend exists: HookChain::install's contract.
    unsafe {
        SHMEM_REQUEST.install(&raw mut pg_sys::shmem_request_hook, Some(shmem_request));
        SHMEM_STARTUP.install(&raw mut pg_sys::shmem_startup_hook, Some(shmem_startup));
    }
}

/// Adds a subsystem's part. Called from the subsystems' `init`, in `_PG_init`.
pub(crate) fn register(part: Part) {
    PARTS.with_borrow_mut(|parts| parts.push(part));
}

fn parts() -> Vec<Part> {
    PARTS.with_borrow(Clone::clone)
}

/// `shmem_request_hook`: the previous hook, then every part's requests.
///
/// # Safety
/// Called by PostgreSQL as `shmem_request_hook`, in the postmaster.
#[pg_guard]
unsafe extern "C-unwind" fn shmem_request() {
    if let Some(previous) = SHMEM_REQUEST.previous() {
        // SAFETY: the hook installed before ours, called where PostgreSQL calls ours.
        unsafe { previous() };
    }
    for part in parts() {
        (part.request)();
    }
}

/// `shmem_startup_hook`: the previous hook, then every part's objects, under
/// `AddinShmemInitLock` as PostgreSQL requires of `ShmemInitStruct` callers.
///
/// # Safety
/// Called by PostgreSQL as `shmem_startup_hook`, in the postmaster.
#[pg_guard]
unsafe extern "C-unwind" fn shmem_startup() {
    if let Some(previous) = SHMEM_STARTUP.previous() {
        // SAFETY: the hook installed before ours, called where PostgreSQL calls ours.
        unsafe { previous() };
    }
    // SAFETY: AddinShmemInitLock is main LWLock 21 (lwlocknames.txt), initialized with shared
    // memory before this hook runs.
    let _init = unsafe { LWLockGuard::acquire(&raw mut (*pg_sys::MainLWLockArray.add(21)).lock) };
    for part in parts() {
        (part.attach)();
    }
}

/// One object of type `T` in shared memory, named `name` (`pg_shmem_allocations`), the same
/// in every process. `T` must be valid as all-zero bytes (atomics, plain numbers, `UnsafeCell`s
/// of those): a new object is zeroed, which is its empty state.
pub(crate) struct ShmemStruct<T> {
    name: &'static CStr,
    ptr: AtomicPtr<T>,
}

impl<T> ShmemStruct<T> {
    /// The object named `name`, not yet attached.
    pub(crate) const fn new(name: &'static CStr) -> Self {
        Self {
            name,
            ptr: AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    /// Requests its size. Called from a [`Part`]'s `request`.
    pub(crate) fn request(&self) {
        // SAFETY: in shmem_request_hook (Part's contract), where PostgreSQL accepts requests.
        unsafe { pg_sys::RequestAddinShmemSpace(std::mem::size_of::<T>()) };
    }

    /// Creates the object (zeroed, then `init` on it) or finds it, and remembers where it is.
    /// Called from a [`Part`]'s `attach`, in the postmaster; every process inherits the pointer.
    ///
    /// # Safety
    /// All-zero bytes are a valid `T`; `init` leaves it valid.
    pub(crate) unsafe fn attach(&self, init: impl FnOnce(*mut T)) {
        let mut found = false;
        // SAFETY: in shmem_startup_hook under AddinShmemInitLock (see `shmem_startup`), after
        // `request`: ShmemInitStruct returns memory of the requested size, or raises an ERROR.
        let ptr = unsafe {
            pg_sys::ShmemInitStruct(self.name.as_ptr(), std::mem::size_of::<T>(), &mut found)
        }
        .cast::<T>();
        if !found {
            // SAFETY: ptr points to size_of::<T>() writable bytes no other process uses yet;
            // zero bytes are a valid T (the caller's contract).
            unsafe { std::ptr::write_bytes(ptr, 0, 1) };
            init(ptr);
        }
        self.ptr.store(ptr, Ordering::Release);
    }

    /// Whether the object exists in this process (idgen was preloaded and shared memory is set
    /// up; false while hooks run in a process that never attached).
    pub(crate) fn attached(&self) -> bool {
        !self.ptr.load(Ordering::Acquire).is_null()
    }

    /// The object.
    pub(crate) fn get(&self) -> &'static T {
        // SAFETY: null, or set by `attach` to an object of shared memory, which outlives every
        // process that uses it.
        unsafe { self.ptr.load(Ordering::Acquire).as_ref() }
            .expect("idgen is preloaded, so its shared memory exists")
    }
}

/// An array of `T` in shared memory, named `name`, whose length is a postmaster setting read
/// when shared memory is sized (`idgen.segment_cache_size`, say): [`ShmemStruct`] for a length
/// known only at start. `T` must be valid as all-zero bytes; a new array is zeroed.
pub(crate) struct ShmemArray<T> {
    name: &'static CStr,
    ptr: AtomicPtr<T>,
    len: std::sync::atomic::AtomicUsize,
}

impl<T> ShmemArray<T> {
    /// The array named `name`, not yet attached.
    pub(crate) const fn new(name: &'static CStr) -> Self {
        Self {
            name,
            ptr: AtomicPtr::new(std::ptr::null_mut()),
            len: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    fn bytes(len: usize) -> usize {
        std::mem::size_of::<T>()
            .checked_mul(len)
            .expect("the setting's bounds keep the array far below usize::MAX bytes")
    }

    /// Requests room for `len` elements. Called from a [`Part`]'s `request`.
    pub(crate) fn request(&self, len: usize) {
        // SAFETY: in shmem_request_hook (Part's contract), where PostgreSQL accepts requests.
        unsafe { pg_sys::RequestAddinShmemSpace(Self::bytes(len)) };
    }

    /// Creates the array of `len` elements (zeroed) or finds it, and remembers where it is.
    /// Called from a [`Part`]'s `attach`, in the postmaster, with the `len` requested.
    ///
    /// # Safety
    /// All-zero bytes are a valid `T`.
    pub(crate) unsafe fn attach(&self, len: usize) {
        let mut found = false;
        // SAFETY: in shmem_startup_hook under AddinShmemInitLock, after `request(len)`:
        // ShmemInitStruct returns memory of that size (aligned to a cache line), or raises.
        let ptr =
            unsafe { pg_sys::ShmemInitStruct(self.name.as_ptr(), Self::bytes(len), &mut found) }
                .cast::<T>();
        debug_assert!(ptr.align_offset(std::mem::align_of::<T>()) == 0);
        if !found {
            // SAFETY: ptr points to `len` elements' worth of writable bytes no other process
            // uses yet; zero bytes are a valid T (the caller's contract).
            unsafe { std::ptr::write_bytes(ptr, 0, len) };
        }
        self.len.store(len, Ordering::Release);
        self.ptr.store(ptr, Ordering::Release);
    }

    /// Whether the array exists in this process.
    pub(crate) fn attached(&self) -> bool {
        !self.ptr.load(Ordering::Acquire).is_null()
    }

    /// The array's elements as a raw pointer and length: the caller decides how they are
    /// shared (atomics for everyone, plain data under a lock).
    pub(crate) fn raw(&self) -> (*mut T, usize) {
        let ptr = self.ptr.load(Ordering::Acquire);
        assert!(
            !ptr.is_null(),
            "idgen is preloaded, so its shared memory exists"
        );
        (ptr, self.len.load(Ordering::Acquire))
    }
}

impl<T: Sync> ShmemArray<T> {
    /// The array, for a `T` that is safe to share (atomics).
    pub(crate) fn get(&self) -> &'static [T] {
        let (ptr, len) = self.raw();
        // SAFETY: `attach` set ptr to `len` initialized elements of shared memory, which
        // outlives every process that uses it; T: Sync makes shared references sound.
        unsafe { std::slice::from_raw_parts(ptr, len) }
    }
}

/// A hash table in shared memory (PostgreSQL's dynahash, `ShmemInitHash`, as
/// pg_stat_statements keeps its entries), named `name`, of at most a number of entries fixed at
/// start. Entries are `E`, plain data whose first `size_of::<K>()` bytes are the key `K`
/// (compared as bytes: `HASH_BLOBS`, so a key must have no padding). Not synchronized: every
/// method's caller holds the lock that guards the table, exclusively.
pub(crate) struct ShmemHash<K, E> {
    name: &'static CStr,
    table: AtomicPtr<pg_sys::HTAB>,
    _types: std::marker::PhantomData<(K, E)>,
}

// SAFETY: the pointer is set once in the postmaster, before any backend exists; the table it
// points to is used only under its guarding lock (the methods' contract).
unsafe impl<K, E> Sync for ShmemHash<K, E> {}

impl<K: Copy, E: Copy> ShmemHash<K, E> {
    /// The table named `name`, not yet attached.
    pub(crate) const fn new(name: &'static CStr) -> Self {
        Self {
            name,
            table: AtomicPtr::new(std::ptr::null_mut()),
            _types: std::marker::PhantomData,
        }
    }

    /// Requests room for `max` entries. Called from a [`Part`]'s `request`.
    pub(crate) fn request(&self, max: usize) {
        // SAFETY: in shmem_request_hook (Part's contract); hash_estimate_size only computes.
        unsafe {
            pg_sys::RequestAddinShmemSpace(pg_sys::hash_estimate_size(
                max as std::ffi::c_long,
                std::mem::size_of::<E>(),
            ))
        };
    }

    /// Creates the table for `max` entries or finds it. Called from a [`Part`]'s `attach`, in
    /// the postmaster (backends inherit the process-local handle PostgreSQL returns).
    pub(crate) fn attach(&self, max: usize) {
        assert!(std::mem::size_of::<K>() <= std::mem::size_of::<E>());
        let mut info = pg_sys::HASHCTL {
            keysize: std::mem::size_of::<K>(),
            entrysize: std::mem::size_of::<E>(),
            ..Default::default()
        };
        // SAFETY: in shmem_startup_hook under AddinShmemInitLock, after `request(max)`:
        // ShmemInitHash creates or finds the table with these sizes, or raises an ERROR.
        let table = unsafe {
            pg_sys::ShmemInitHash(
                self.name.as_ptr(),
                max as std::ffi::c_long,
                max as std::ffi::c_long,
                &mut info,
                (pg_sys::HASH_ELEM | pg_sys::HASH_BLOBS) as std::ffi::c_int,
            )
        };
        self.table.store(table, Ordering::Release);
    }

    fn search(&self, key: &K, action: pg_sys::HASHACTION::Type) -> (*mut E, bool) {
        let table = self.table.load(Ordering::Acquire);
        assert!(
            !table.is_null(),
            "idgen is preloaded, so its shared memory exists"
        );
        let mut found = false;
        // SAFETY: a table created by `attach` with keys of size_of::<K>(); `key` points to one.
        // The caller holds the guarding lock (the methods' contract). HASH_ENTER_NULL returns
        // null when the table is full instead of raising.
        let entry =
            unsafe { pg_sys::hash_search(table, (key as *const K).cast(), action, &mut found) };
        (entry.cast(), found)
    }

    /// The entry of `key`, if any.
    ///
    /// # Safety
    /// The caller holds the table's guarding lock exclusively.
    pub(crate) unsafe fn find(&self, key: &K) -> Option<E> {
        let (entry, found) = self.search(key, pg_sys::HASHACTION::HASH_FIND);
        // SAFETY: a found entry is a live E of the table, read under the lock.
        found.then(|| unsafe { *entry })
    }

    /// Stores `entry` under `key` (replacing an entry of that key); false when the table is
    /// full.
    ///
    /// # Safety
    /// The caller holds the table's guarding lock exclusively; `entry` begins with `key`.
    pub(crate) unsafe fn insert(&self, key: &K, entry: E) -> bool {
        let (slot, _) = self.search(key, pg_sys::HASHACTION::HASH_ENTER_NULL);
        if slot.is_null() {
            return false;
        }
        // SAFETY: dynahash returned room for one E, its key already copied in; the whole entry
        // (which begins with the same key) is written under the lock.
        unsafe { slot.write(entry) };
        true
    }

    /// Removes the entry of `key`, if any.
    ///
    /// # Safety
    /// The caller holds the table's guarding lock exclusively.
    pub(crate) unsafe fn remove(&self, key: &K) {
        self.search(key, pg_sys::HASHACTION::HASH_REMOVE);
    }
}
