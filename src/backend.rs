//! This process's PostgreSQL globals, read safely: the database it is connected to, its pid,
//! its latch, the data directory and settings by name. Each is a plain global that PostgreSQL
//! sets before any idgen code runs in the process and that only this process's one thread
//! writes, so reading it is sound; the `unsafe` is in this file alone.

use std::ffi::CStr;
use std::path::PathBuf;

use pgrx::pg_sys;

/// The database this backend is connected to (`MyDatabaseId`); `InvalidOid` in a process
/// without one (the postmaster, the reservation keeper).
pub(crate) fn database_id() -> pg_sys::Oid {
    // SAFETY: set by InitPostgres before a backend runs SQL, then fixed; read on the process's
    // one thread.
    unsafe { pg_sys::MyDatabaseId }
}

/// This process's pid (`MyProcPid`), as PostgreSQL shows it in `pg_stat_activity`.
pub(crate) fn pid() -> i32 {
    // SAFETY: set at process start (InitProcessGlobals), never changed afterwards.
    unsafe { pg_sys::MyProcPid }
}

/// This process's latch (`MyLatch`), which lives in shared memory for a backend or background
/// worker: another process may set it to wake this one.
pub(crate) fn latch() -> *mut pg_sys::Latch {
    // SAFETY: set at process start (SwitchToSharedLatch for a process with a PGPROC).
    unsafe { pg_sys::MyLatch }
}

/// `max_worker_processes`, for messages.
pub(crate) fn max_worker_processes() -> i32 {
    // SAFETY: a postmaster-context setting: fixed for the server's life.
    unsafe { pg_sys::max_worker_processes }
}

/// `MaxBackends`: every process that may have a PGPROC and use shared memory (connections,
/// autovacuum workers, background workers, WAL senders). Valid from `shmem_request_hook` on
/// (PostgreSQL 15 and later compute it before calling the hook).
pub(crate) fn max_backends() -> usize {
    // SAFETY: set once by the postmaster (InitializeMaxBackends) before shared memory is
    // sized, then fixed for the server's life.
    unsafe { pg_sys::MaxBackends }.max(0) as usize
}

/// The data directory (the current directory of every backend, but named explicitly).
pub(crate) fn data_dir() -> PathBuf {
    // SAFETY: DataDir is set before shared_preload_libraries are loaded and never changes; it
    // is a NUL-terminated string.
    let dir = unsafe { CStr::from_ptr(pg_sys::DataDir) };
    PathBuf::from(dir.to_string_lossy().into_owned())
}

/// The current text of setting `name` (`GetConfigOption`, `SHOW`'s text), or `None` if no such
/// setting or placeholder exists. Also reads a custom setting's placeholder before its
/// definition, as `postgresql.conf` gave it.
pub(crate) fn setting_text(name: &CStr) -> Option<String> {
    // SAFETY: a NUL-terminated name; with missing_ok GetConfigOption returns NULL or a string
    // in GUC storage that stays valid until the next change of the setting, which cannot happen
    // before the copy below (this process's one thread is here).
    unsafe {
        let raw = pg_sys::GetConfigOption(name.as_ptr(), true, false);
        (!raw.is_null()).then(|| CStr::from_ptr(raw).to_string_lossy().into_owned())
    }
}

/// Runs `body` with `search_path` set to `path`, restored afterwards: what a function's `SET
/// search_path` clause does (PostgreSQL's `fmgr_security_definer`: `NewGUCNestLevel`,
/// `set_config_option` with `GUC_ACTION_SAVE`, `AtEOXact_GUC`), for SPI in a caller's session,
/// where the caller chose the `search_path`. On an error the (sub)transaction's abort restores
/// it. Call in a transaction.
pub(crate) fn with_search_path<T>(path: &std::ffi::CStr, body: impl FnOnce() -> T) -> T {
    // SAFETY: in a transaction (the caller's contract); the nest level opened here is closed
    // below, or by the abort of the transaction if `body` raises an error.
    let level = unsafe {
        let level = pg_sys::NewGUCNestLevel();
        pg_sys::set_config_option(
            c"search_path".as_ptr(),
            path.as_ptr(),
            pg_sys::GucContext::PGC_USERSET,
            pg_sys::GucSource::PGC_S_SESSION,
            pg_sys::GucAction::GUC_ACTION_SAVE,
            true,
            0,
            false,
        );
        level
    };
    let result = body();
    // SAFETY: closes the nest level opened above, restoring the caller's search_path.
    unsafe { pg_sys::AtEOXact_GUC(true, level) };
    result
}

/// Sets setting `name` to `value` until the end of the current transaction (`SET LOCAL`).
/// Call in a transaction; a value the setting refuses raises an ERROR.
pub(crate) fn set_local(name: &std::ffi::CStr, value: &std::ffi::CStr) {
    // SAFETY: in a transaction (the caller's contract); GUC_ACTION_LOCAL is undone at its end.
    unsafe {
        pg_sys::set_config_option(
            name.as_ptr(),
            value.as_ptr(),
            pg_sys::GucContext::PGC_USERSET,
            pg_sys::GucSource::PGC_S_SESSION,
            pg_sys::GucAction::GUC_ACTION_LOCAL,
            true,
            0,
            false,
        );
    }
}

/// Sets setting `name` to `value` for the rest of this process, over the configuration files
/// and the database's and role's stored settings (the override source): a background worker's
/// own settings. Call outside a transaction; a value the setting refuses raises an ERROR.
pub(crate) fn set_override(name: &std::ffi::CStr, value: &std::ffi::CStr) {
    // SAFETY: NUL-terminated names and values; SetConfigOption with the override source, which
    // outranks every other source, outside any transaction.
    unsafe {
        pg_sys::SetConfigOption(
            name.as_ptr(),
            value.as_ptr(),
            pg_sys::GucContext::PGC_SUSET,
            pg_sys::GucSource::PGC_S_OVERRIDE,
        )
    }
}
