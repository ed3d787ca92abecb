//! The PostgreSQL major versions idgen builds for (the pgrx features `pg15` … `pg18`) and every
//! difference between them that idgen's code meets, in this one module (issue 20): the rest of
//! the code calls these functions and never names a version.
//!
//! Found so far by building against each version's headers: 16 replaced
//! `pg_database_ownercheck` with `object_ownercheck`; 18 renamed a backend's `pqsignal` to
//! `pqsignal_be` (a macro in C) and made it return nothing.

use pgrx::pg_sys;

/// Installs `handler` for signal `signo` in this process (PostgreSQL's `pqsignal`).
///
/// # Safety
/// As `pqsignal`: `handler` must be async-signal-safe and fit the signal; called before the
/// process unblocks signals or where changing the handler is safe.
pub(crate) unsafe fn set_signal_handler(signo: i32, handler: pg_sys::pqsigfunc) {
    #[cfg(any(feature = "pg15", feature = "pg16", feature = "pg17"))]
    // SAFETY: the caller's contract is pqsignal's.
    unsafe {
        pg_sys::pqsignal(signo, handler);
    }
    #[cfg(feature = "pg18")]
    // SAFETY: the caller's contract is pqsignal's (pqsignal_be is its backend name from 18 on).
    unsafe {
        pg_sys::pqsignal_be(signo, handler);
    }
}

/// Whether `role` owns database `db` (or is a superuser): `pg_database_ownercheck` in 15,
/// `object_ownercheck(DatabaseRelationId, ...)` from 16 on.
///
/// # Safety
/// In a transaction, where a catalog lookup may run.
pub(crate) unsafe fn owns_database(db: pg_sys::Oid, role: pg_sys::Oid) -> bool {
    #[cfg(feature = "pg15")]
    // SAFETY: a catalog lookup by oid, in a transaction (the caller's contract).
    unsafe {
        pg_sys::pg_database_ownercheck(db, role)
    }
    #[cfg(not(feature = "pg15"))]
    // SAFETY: as above.
    unsafe {
        pg_sys::object_ownercheck(pg_sys::DatabaseRelationId, db, role)
    }
}

/// The application names of this server's WAL senders that are streaming (a standby's
/// `application_name`, which is its `cluster_name` unless `primary_conninfo` says otherwise):
/// `pg_stat_replication`'s `application_name` where `state = 'streaming'`. The backend status
/// snapshot is read afresh: `pgstat_fetch_stat_local_beentry` in 15,
/// `pgstat_get_local_beentry_by_index` from 16 on (both 1-based).
///
/// # Safety
/// In a process attached to shared memory, outside a critical section (it allocates the
/// snapshot in its own memory context).
pub(crate) unsafe fn streaming_standby_names() -> Vec<String> {
    // SAFETY: WalSndCtl points into shared memory for max_wal_senders entries once attached;
    // pid and state are plain words read without the spinlock (a stale read only delays an
    // attestation by one renewal); the status snapshot belongs to this process until cleared.
    unsafe {
        if pg_sys::WalSndCtl.is_null() {
            return Vec::new();
        }
        let senders = (*pg_sys::WalSndCtl)
            .walsnds
            .as_slice(pg_sys::max_wal_senders.max(0) as usize);
        let streaming: Vec<i32> = senders
            .iter()
            .filter(|w| w.pid != 0 && w.state == pg_sys::WalSndState::WALSNDSTATE_STREAMING)
            .map(|w| w.pid)
            .collect();
        if streaming.is_empty() {
            return Vec::new();
        }
        pg_sys::pgstat_clear_backend_activity_snapshot();
        let n = pg_sys::pgstat_fetch_stat_numbackends();
        let mut names = Vec::new();
        for i in 1..=n {
            #[cfg(feature = "pg15")]
            let entry = pg_sys::pgstat_fetch_stat_local_beentry(i);
            #[cfg(not(feature = "pg15"))]
            let entry = pg_sys::pgstat_get_local_beentry_by_index(i);
            if entry.is_null() {
                continue;
            }
            let status = &(*entry).backendStatus;
            if status.st_backendType == pg_sys::BackendType::B_WAL_SENDER
                && streaming.contains(&status.st_procpid)
                && !status.st_appname.is_null()
            {
                let name = std::ffi::CStr::from_ptr(status.st_appname)
                    .to_string_lossy()
                    .into_owned();
                if !name.is_empty() {
                    names.push(name);
                }
            }
        }
        pg_sys::pgstat_clear_backend_activity_snapshot();
        names
    }
}
