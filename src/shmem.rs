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
