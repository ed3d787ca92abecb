//! One way to chain PostgreSQL's hooks: a [`HookChain`] keeps the hook that was installed before
//! idgen's (another extension's, or none) for idgen's hook to call, so that every library in
//! `shared_preload_libraries` keeps its hooks.

use std::sync::OnceLock;

/// The previous value of one PostgreSQL hook variable (`shmem_request_hook`,
/// `ProcessUtility_hook`, ...), set when idgen's hook is installed. `T` is the hook's type, an
/// `Option` of a C function pointer.
pub(crate) struct HookChain<T: Copy + Send + Sync + 'static>(OnceLock<T>);

impl<T: Copy + Send + Sync + 'static> HookChain<T> {
    /// An empty chain, for a `static`.
    pub(crate) const fn new() -> Self {
        Self(OnceLock::new())
    }

    /// Installs `ours` in PostgreSQL's hook variable `hook`, keeping the value it had.
    ///
    /// # Safety
    /// `hook` points to a PostgreSQL hook variable of type `T`, and this runs in `_PG_init`
    /// of the postmaster: before any backend exists and on its only thread, so nothing reads
    /// the variable meanwhile. Panics if this chain was installed already.
    pub(crate) unsafe fn install(&self, hook: *mut T, ours: T) {
        // SAFETY: the caller's contract: a valid hook variable nobody else reads or writes now.
        let previous = unsafe { hook.read() };
        assert!(self.0.set(previous).is_ok(), "a hook is installed once");
        // SAFETY: the same hook variable, still read and written by nobody else.
        unsafe { hook.write(ours) };
    }

    /// The hook that was installed before idgen's (`None`: there was none): idgen's hook calls
    /// it first, or instead of PostgreSQL's standard function where the hook replaces one.
    pub(crate) fn previous(&self) -> T {
        *self
            .0
            .get()
            .expect("idgen's hook runs only after it was installed")
    }
}
