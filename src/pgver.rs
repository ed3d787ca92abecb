//! The PostgreSQL major versions idgen builds for (the pgrx features `pg15` … `pg18`) and every
//! difference between them that idgen's code meets, in this one module: the rest of
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
