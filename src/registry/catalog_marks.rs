//! The databases' catalogs merged into the marks file (DESIGN.md §6 "Revision and recovery"):
//! what a node reports in a recovery comes from durable state that follows it through a
//! failover. The marks file (`crate::marks`) is this server's own and is not replicated; the
//! catalogs are: a global segment's `idgen_segment.max_id` and a global serial counter's
//! `idgen_serial_counter.value` are committed (with the synchronous standbys) before any number
//! of their range is used. So when the registry client starts (a server start, or a standby's
//! promotion), a launcher background worker lists the databases and starts one worker per
//! database, one at a time, that raises the file's marks to its catalog's; the client reports
//! in a recovery only once the merge is done (or has run a minute).

use pgrx::bgworkers::{BackgroundWorker, BackgroundWorkerBuilder, BgWorkerStartTime};
use pgrx::pg_sys;
use pgrx::prelude::*;

/// The launcher's argument; a database worker's is its database oid.
const LAUNCHER: u32 = 0;

/// Starts the merge (from the registry client, at its start). Without a free background
/// worker slot nothing is merged: logged, and the report comes from the marks file alone.
pub(crate) fn launch() {
    crate::marks::set_catalog_merge(crate::time::now_timestamptz_us().max(1));
    if builder(LAUNCHER, "idgen catalog marks")
        .load_dynamic()
        .is_err()
    {
        log!("idgen registry client: no background worker slot to merge the catalogs' global marks into the marks file; a recovery gets the marks file's alone");
        crate::marks::set_catalog_merge(-1);
    }
}

/// Whether the client may report now: the merge is done, or has run a minute (a database worker
/// that cannot connect must not keep the report back for ever).
pub(crate) fn merged() -> bool {
    match crate::marks::catalog_merge() {
        0 | -1 => true,
        started => crate::time::now_timestamptz_us() - started > 60_000_000,
    }
}

fn builder(arg: u32, name: &str) -> BackgroundWorkerBuilder {
    BackgroundWorkerBuilder::new(name)
        .set_type("idgen catalog marks")
        .set_library("idgen")
        .set_function("idgen_catalog_marks_main")
        .set_argument(Some(pg_sys::Datum::from(arg)))
        .enable_spi_access()
        .set_start_time(BgWorkerStartTime::RecoveryFinished)
        .set_restart_time(None)
}

/// Entry point of the launcher (argument 0) and of a database's worker (its oid).
// SAFETY: called by PostgreSQL's background worker machinery in a new process; #[pg_guard]
// turns a Rust panic into a PostgreSQL ERROR (the worker exits).
#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn idgen_catalog_marks_main(arg: pg_sys::Datum) {
    BackgroundWorker::attach_signal_handlers(pgrx::bgworkers::SignalWakeFlags::SIGTERM);
    let arg = arg.value() as u32;
    if arg == LAUNCHER {
        launcher();
    } else {
        merge_database(pg_sys::Oid::from(arg));
    }
}

/// Lists the databases that accept connections (by a scan of the shared catalog
/// `pg_database`, as PostgreSQL's autovacuum launcher does: a worker connected to no database
/// cannot run SQL), then merges each with a worker of its own, one at a time.
fn launcher() {
    BackgroundWorker::connect_worker_to_spi(None, None);
    let databases = BackgroundWorker::transaction(|| {
        let mut out = Vec::new();
        // SAFETY: in a transaction (BackgroundWorker::transaction); pg_database is a shared
        // catalog, opened and scanned with its lock as get_database_list() does, and each
        // tuple's fixed part is a FormData_pg_database.
        unsafe {
            let rel = pg_sys::table_open(
                pg_sys::DatabaseRelationId,
                pg_sys::AccessShareLock as pg_sys::LOCKMODE,
            );
            let scan = pg_sys::table_beginscan_catalog(rel, 0, std::ptr::null_mut());
            loop {
                let tuple = pg_sys::heap_getnext(scan, pg_sys::ScanDirection::ForwardScanDirection);
                if tuple.is_null() {
                    break;
                }
                let db = pg_sys::heap_tuple_get_struct::<pg_sys::FormData_pg_database>(tuple);
                if (*db).datallowconn {
                    out.push((*db).oid.to_u32());
                }
            }
            pg_sys::table_endscan(scan);
            pg_sys::table_close(rel, pg_sys::AccessShareLock as pg_sys::LOCKMODE);
        }
        out
    });
    // SAFETY: MyProcPid is this process's pid, set at its start.
    let me = unsafe { pg_sys::MyProcPid };
    for db in databases {
        if BackgroundWorker::sigterm_received() {
            break;
        }
        let worker = builder(db, &format!("idgen catalog marks for database {db}"))
            .set_notify_pid(me)
            .load_dynamic();
        match worker {
            Ok(w) => {
                let _ = w.wait_for_shutdown();
            }
            Err(_) => log!(
                "idgen catalog marks: no background worker slot for database {db}; its global marks are not merged"
            ),
        }
    }
    crate::marks::set_catalog_merge(-1);
}

/// Raises the marks file's marks to those of database `db`'s catalog (nothing when idgen is not
/// installed there).
fn merge_database(db: pg_sys::Oid) {
    BackgroundWorker::connect_worker_to_spi_by_oid(Some(db), None);
    let marks = BackgroundWorker::transaction(|| {
        let installed = Spi::get_one::<bool>(
            "SELECT EXISTS (SELECT FROM pg_catalog.pg_extension WHERE extname OPERATOR(pg_catalog.=) 'idgen')",
        )
        .ok()
        .flatten()
        .unwrap_or(false);
        if !installed {
            return Ok(Vec::new());
        }
        let mut marks = crate::segment::global_marks_in_catalog()?;
        marks.extend(crate::serial::global_marks_in_catalog()?);
        Ok::<_, crate::error::Error>(marks)
    });
    match marks {
        Ok(marks) if marks.is_empty() => {}
        Ok(marks) => match crate::marks::merge(&marks) {
            Ok(0) => {}
            Ok(raised) => log!(
                "idgen catalog marks: {raised} global marks of database {} raised in the marks file from its catalog",
                db.to_u32()
            ),
            Err(why) => log!(
                "idgen catalog marks: database {}: {why}",
                db.to_u32()
            ),
        },
        Err(e) => log!(
            "idgen catalog marks: database {}: the global marks could not be read: {e}",
            db.to_u32()
        ),
    }
}
