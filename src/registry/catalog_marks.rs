//! The databases' catalogs merged into the marks file (DESIGN.md §6 "Revision and recovery"):
//! what a node reports in a recovery comes from durable state that follows it through a
//! failover. The marks file (`crate::marks`) is this server's own and is not replicated; the
//! catalogs are: a global segment's `idgen_segment.max_id` and a global serial counter's
//! `idgen_serial_counter.value` are committed (with the synchronous standbys) before any number
//! of their range is used. So when the registry client starts (a server start, or a standby's
//! promotion), a launcher background worker lists the databases and starts one worker per
//! database, one at a time, each given [`DATABASE_DEADLINE`], that raises the file's marks to its
//! catalog's. The client reports in a recovery only once a merge read every database: a report
//! without a database's marks could let a promoted node's old ranges be handed out again. A
//! merge that failed (no free worker slot, a database that could not be read in time: its
//! owner's settings, a lock) is logged as a WARNING naming the databases and started again
//! [`RETRY`] later, so the node's missing report is visible in `idgen_registry_recovery` and its
//! log says why; no database owner can make it hang (every attempt is bounded).

use pgrx::bgworkers::{BackgroundWorker, BackgroundWorkerBuilder, BgWorkerStartTime};
use pgrx::pg_sys;
use pgrx::prelude::*;

use crate::worker::{self, Sigint, Sigterm};

/// The launcher's argument; a database worker's is its database oid.
const LAUNCHER: u32 = 0;

/// How long the launcher gives one database's worker before it terminates it.
const DATABASE_DEADLINE: std::time::Duration = std::time::Duration::from_secs(30);

/// A merge still running this long is presumed lost (its launcher died), and started again.
const MERGE_LOST_MS: i64 = 600_000;

/// How long after a failed merge the next one starts.
const RETRY: std::time::Duration = std::time::Duration::from_secs(30);

thread_local! {
    /// When the registry client (the only caller of [`merged`]) last started a merge.
    static LAST_LAUNCH: std::cell::Cell<Option<std::time::Instant>> =
        const { std::cell::Cell::new(None) };
}

/// Starts the merge at the registry client's start, unless one runs or has succeeded (a
/// restarted client of a running server).
pub(crate) fn launch_at_start() {
    if matches!(crate::marks::catalog_merge(), 0 | -2) {
        launch();
    }
}

/// Starts the merge (from the registry client). Without a free background worker slot, the
/// merge has failed: the next [`merged`] starts it again.
fn launch() {
    LAST_LAUNCH.set(Some(std::time::Instant::now()));
    crate::marks::set_catalog_merge(crate::marks::contact_clock_ms().max(1));
    if builder(LAUNCHER, "idgen catalog marks")
        .load_dynamic()
        .is_err()
    {
        warning!("idgen registry client: no background worker slot to merge the catalogs' global marks into the marks file (max_worker_processes); tried again in 30 s, and no report in a recovery before it succeeds");
        crate::marks::set_catalog_merge(-2);
    }
}

/// Whether the client may report now: a merge read every database. One that never started is
/// started now; a failed one [`RETRY`] after the last start; a lost one again.
pub(crate) fn merged() -> bool {
    match crate::marks::catalog_merge() {
        -1 => true,
        0 => {
            launch();
            false
        }
        -2 => {
            if LAST_LAUNCH.get().is_none_or(|at| at.elapsed() >= RETRY) {
                launch();
            }
            false
        }
        started => {
            if crate::marks::contact_clock_ms() - started > MERGE_LOST_MS {
                launch();
            }
            false
        }
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
// SAFETY: called by PostgreSQL's background worker machinery in a new process, with signals
// blocked until the handlers are installed; #[pg_guard] turns a Rust panic into a PostgreSQL
// ERROR (the worker exits).
#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn idgen_catalog_marks_main(arg: pg_sys::Datum) {
    // PostgreSQL's own handlers, as the allocator's: SIGTERM is `die`, so a lock wait or the
    // launcher's wait for a database worker ends at a fast shutdown.
    worker::install_signal_handlers(Sigterm::Die, Sigint::Cancel);
    let arg = arg.value() as u32;
    if arg == LAUNCHER {
        launcher();
    } else {
        merge_database(pg_sys::Oid::from(arg));
    }
}

/// Lists the databases (by a scan of the shared catalog `pg_database`, as PostgreSQL's
/// autovacuum launcher does: a worker connected to no database cannot run SQL), then merges
/// each with a worker of its own, one at a time. Every database is merged, also one that
/// refuses connections (its owner's `ALLOW_CONNECTIONS false` must not keep its marks out),
/// except one a `DROP DATABASE` left invalid.
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
                // -2: DATCONNLIMIT_INVALID_DB, a database an interrupted DROP DATABASE left.
                if (*db).datconnlimit != -2 {
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
    let mut failed = Vec::new();
    for db in databases {
        crate::marks::set_catalog_merged_db(0);
        let worker = builder(db, &format!("idgen catalog marks for database {db}"))
            .set_notify_pid(me)
            .load_dynamic();
        let done = match worker {
            Ok(w) => wait_or_terminate(w),
            Err(_) => false,
        };
        if !done || crate::marks::catalog_merged_db() != i64::from(db) {
            failed.push(db);
        }
    }
    if failed.is_empty() {
        crate::marks::set_catalog_merge(-1);
    } else {
        warning!(
            "idgen catalog marks: the global marks of database(s) {failed:?} could not be merged into the marks file (see the log above; max_worker_processes, or a database's settings or locks): the registry client reports in a recovery only after a merge that reads them, tried again in 30 s"
        );
        crate::marks::set_catalog_merge(-2);
    }
}

/// Waits for a database's worker to exit, at most [`DATABASE_DEADLINE`]; past it, terminates
/// it (a wait it cannot leave by itself: a lock, a safe snapshot, a settings trap). Whether it
/// exited by itself.
fn wait_or_terminate(worker: pgrx::bgworkers::DynamicBackgroundWorker) -> bool {
    let deadline = std::time::Instant::now() + DATABASE_DEADLINE;
    loop {
        match worker.pid() {
            Err(pgrx::bgworkers::BackgroundWorkerStatus::Stopped)
            | Err(pgrx::bgworkers::BackgroundWorkerStatus::PostmasterDied) => return true,
            _ if std::time::Instant::now() >= deadline => {
                let _ = worker.terminate().wait_for_shutdown();
                return false;
            }
            _ => crate::latch::sleep_interruptibly(std::time::Duration::from_millis(50)),
        }
    }
}

/// This worker's own settings, over whatever the database's and the role's stored settings
/// say (a database owner may set them): no schema a user can write is searched, the session's
/// own role (a superuser), a read-only READ COMMITTED transaction that waits for no safe
/// snapshot, and lock waits bounded (the launcher bounds the whole worker: a background
/// worker's statements have no `statement_timeout`).
fn force_settings() {
    use crate::backend::set_override as set;
    set(c"search_path", c"");
    set(c"role", c"none");
    set(c"lock_timeout", c"10s");
    set(c"default_transaction_read_only", c"on");
    set(c"default_transaction_isolation", c"read committed");
    set(c"default_transaction_deferrable", c"off");
    set(c"application_name", c"idgen catalog marks");
}

/// Raises the marks file's marks to those of database `db`'s catalog (nothing when idgen is not
/// installed there), and says it did ([`crate::marks::set_catalog_merged_db`]).
fn merge_database(db: pg_sys::Oid) {
    // SAFETY: called once, at the start of a background worker with database access; the
    // flag lets it connect to a database whose owner refuses connections.
    unsafe {
        pg_sys::BackgroundWorkerInitializeConnectionByOid(
            db,
            pg_sys::InvalidOid,
            pg_sys::BGWORKER_BYPASS_ALLOWCONN,
        )
    };
    force_settings();
    let marks = BackgroundWorker::transaction(|| {
        // The bootstrap superuser, whatever the database's stored settings say (a stored
        // session_authorization): a merge as anyone else could read forged tables.
        // SAFETY: in a transaction; superuser() reads the current user's pg_authid row.
        if !unsafe { pg_sys::superuser() } {
            return Err(crate::error::Error::Relayed {
                sqlstate: PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE as i32,
                message:
                    "the merge does not run as a superuser here (the database's stored settings?)"
                        .into(),
                detail: None,
                hint: None,
            });
        }
        let installed = Spi::get_one::<bool>(
            "SELECT EXISTS (SELECT FROM pg_catalog.pg_extension \
              WHERE extname OPERATOR(pg_catalog.=) 'idgen'::pg_catalog.name)",
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
    let merged = match marks {
        Ok(marks) if marks.is_empty() => true,
        Ok(marks) => match crate::marks::merge(&marks) {
            Ok(raised) => {
                if raised > 0 {
                    log!(
                        "idgen catalog marks: {raised} global marks of database {} raised in the marks file from its catalog",
                        db.to_u32()
                    );
                }
                true
            }
            Err(why) => {
                log!("idgen catalog marks: database {}: {why}", db.to_u32());
                false
            }
        },
        Err(e) => {
            log!(
                "idgen catalog marks: database {}: the global marks could not be read: {e}",
                db.to_u32()
            );
            false
        }
    };
    if merged {
        crate::marks::set_catalog_merged_db(i64::from(db.to_u32()));
    }
}
