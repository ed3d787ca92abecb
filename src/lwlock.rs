//! PostgreSQL LWLocks held by a guard: idgen's named LWLocks (one tranche of one lock each,
//! requested at server start) and the main LWLock `AddinShmemInitLock`. A guard releases its
//! lock when dropped; should an ERROR escape while it is held, PostgreSQL's error cleanup has
//! released every LWLock already (`LWLockReleaseAll`), which the guard checks.

use std::ffi::CStr;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicPtr, Ordering};

use pgrx::pg_sys;

/// A named LWLock of idgen: requested in the shared-memory request hook ([`Self::request`]),
/// found in the startup hook ([`Self::attach`]), then taken by any process.
pub(crate) struct NamedLWLock {
    tranche: &'static CStr,
    lock: AtomicPtr<pg_sys::LWLock>,
}

impl NamedLWLock {
    /// The LWLock of tranche `tranche` (shown as `wait_event` in `pg_stat_activity`).
    pub(crate) const fn new(tranche: &'static CStr) -> Self {
        Self {
            tranche,
            lock: AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    /// Requests the tranche. Called from `shmem_request_hook` only.
    pub(crate) fn request(&self) {
        // SAFETY: in shmem_request_hook (the caller's contract, see `shmem`), where PostgreSQL
        // accepts tranche requests; the name is a 'static C string.
        unsafe { pg_sys::RequestNamedLWLockTranche(self.tranche.as_ptr(), 1) };
    }

    /// Finds the lock of the requested tranche. Called from `shmem_startup_hook` only, in the
    /// postmaster: every process inherits the pointer.
    pub(crate) fn attach(&self) {
        // SAFETY: in shmem_startup_hook, after `request` (the caller's contract): the tranche
        // exists, and GetNamedLWLockTranche returns its array of one lock.
        let lock = unsafe { &raw mut (*pg_sys::GetNamedLWLockTranche(self.tranche.as_ptr())).lock };
        self.lock.store(lock, Ordering::Release);
    }

    /// Whether [`Self::attach`] has run (idgen's shared memory exists in this process).
    pub(crate) fn attached(&self) -> bool {
        !self.lock.load(Ordering::Acquire).is_null()
    }

    fn raw(&self) -> *mut pg_sys::LWLock {
        let lock = self.lock.load(Ordering::Acquire);
        assert!(!lock.is_null(), "idgen is preloaded, so its LWLocks exist");
        lock
    }

    /// Takes the lock exclusively, waiting for it.
    pub(crate) fn exclusive(&self) -> LWLockGuard<'_> {
        // SAFETY: a lock of the main LWLock array (shared memory set up before any backend).
        unsafe { LWLockGuard::acquire(self.raw()) }
    }

    /// Takes the lock exclusively if it is free now; `None` if another process holds it.
    pub(crate) fn try_exclusive(&self) -> Option<LWLockGuard<'_>> {
        let lock = self.raw();
        // SAFETY: a lock of the main LWLock array (shared memory set up before any backend);
        // the conditional acquire never waits and takes it only if it returns true.
        unsafe { pg_sys::LWLockConditionalAcquire(lock, pg_sys::LWLockMode::LW_EXCLUSIVE) }
            .then_some(LWLockGuard {
                lock,
                _lifetime: PhantomData,
            })
    }
}

/// An LWLock held exclusively by this process; released on drop.
pub(crate) struct LWLockGuard<'a> {
    lock: *mut pg_sys::LWLock,
    _lifetime: PhantomData<&'a NamedLWLock>,
}

impl LWLockGuard<'_> {
    /// Takes `lock` exclusively, waiting for it.
    ///
    /// # Safety
    /// `lock` is an initialized LWLock in shared memory that outlives the guard.
    pub(crate) unsafe fn acquire(lock: *mut pg_sys::LWLock) -> Self {
        // SAFETY: `lock` is an initialized LWLock in shared memory (this function's contract);
        // LWLockAcquire waits for it without raising an error.
        unsafe { pg_sys::LWLockAcquire(lock, pg_sys::LWLockMode::LW_EXCLUSIVE) };
        Self {
            lock,
            _lifetime: PhantomData,
        }
    }
}

impl Drop for LWLockGuard<'_> {
    fn drop(&mut self) {
        // SAFETY: the lock was acquired by this guard; after an ERROR, PostgreSQL's cleanup may
        // have released it already (LWLockReleaseAll), which LWLockHeldByMe tells.
        unsafe {
            if pg_sys::LWLockHeldByMe(self.lock) {
                pg_sys::LWLockRelease(self.lock);
            }
        }
    }
}
