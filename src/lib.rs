//! idgen: unique 64-bit ids generated inside PostgreSQL.
//!
//! * Snowflake (`snowflake_nextval()`): time | worker id | sequence, one lock-free generator per
//!   server in shared memory ([`snowflake`]).
//! * Segment (`segment_nextval('orders')`): Leaf-style ranges from durable high-water marks,
//!   cached in shared memory with a double buffer ([`segment`]), allocated by a background
//!   worker per database ([`worker`]).
//!
//! `_PG_init` only orchestrates: refuse to load unless preloaded, then each subsystem's `init`.
//! See `DESIGN.md` for the guarantees and `README.md` for operation.

use std::ffi::CStr;
use std::sync::atomic::{AtomicBool, Ordering};

use pgrx::pg_sys;
use pgrx::prelude::*;

pub mod error;
pub mod guc;
pub mod latch;
pub mod segment;
pub mod shmem;
pub mod snowflake;
pub mod worker;

pgrx::pg_module_magic!();

pgrx::extension_sql_file!("../sql/bootstrap.sql", bootstrap);
pgrx::extension_sql_file!("../sql/finalize.sql", finalize);

/// Library entry point, run once per process that loads idgen. idgen keeps its generator in
/// shared memory and its settings are postmaster-level, so it must be loaded by the postmaster
/// through `shared_preload_libraries`; anywhere else it refuses with SQLSTATE 55000 and the
/// exact line to add as hint (as VectorChord does), before defining any setting.
#[pg_guard]
pub extern "C-unwind" fn _PG_init() {
    // SAFETY: a plain global flag PostgreSQL sets while it loads shared_preload_libraries.
    if !unsafe { pg_sys::process_shared_preload_libraries_in_progress } {
        error::Error::NotPreloaded {
            line: preload_line(),
        }
        .report();
    }
    quiet_backtraces();
    guc::init();
    shmem::init();
    snowflake::server::init();
    snowflake::server::register_keeper();
    segment::init();
}

/// pgrx re-raises every ERROR that passes through Rust (idgen's own, and PostgreSQL's, such
/// as a cancel while a caller waits for a segment range) with a Rust backtrace appended to its
/// DETAIL whenever `RUST_BACKTRACE` is set in the server's environment: a DETAIL line of
/// stack frames, or an empty one, on a user's error. `RUST_LIB_BACKTRACE=0` turns those
/// captures off in every server process while leaving `RUST_BACKTRACE` to Rust's panic
/// messages in the log.
fn quiet_backtraces() {
    // SAFETY: the postmaster is single-threaded while it loads shared_preload_libraries, and
    // nothing has captured a backtrace yet (the setting is read once per process).
    unsafe { std::env::set_var("RUST_LIB_BACKTRACE", "0") };
}

/// The `shared_preload_libraries` line that loads idgen besides whatever is preloaded now.
fn preload_line() -> String {
    // SAFETY: GetConfigOption returns a pointer into GUC storage (or NULL), valid for this call.
    let current = unsafe {
        let raw = pg_sys::GetConfigOption(c"shared_preload_libraries".as_ptr(), true, false);
        (!raw.is_null()).then(|| CStr::from_ptr(raw).to_string_lossy().into_owned())
    };
    match current
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
    {
        Some(libs) => format!("shared_preload_libraries = '{libs},idgen'"),
        None => "shared_preload_libraries = 'idgen'".to_owned(),
    }
}

/// Whether this server is in recovery (a standby, or still replaying WAL after a crash), where
/// neither generator may issue ids. Once PostgreSQL has said no, recovery cannot start again in
/// this process, so the answer is kept: the generators ask per id, and every call into
/// PostgreSQL from Rust costs pgrx a `sigsetjmp` (19 ns per Snowflake id, measured).
#[inline]
pub fn recovery_in_progress() -> bool {
    !RECOVERY_ENDED.load(Ordering::Relaxed) && ask_recovery_in_progress()
}

/// Whether the current transaction is read-only (`BEGIN READ ONLY`,
/// `default_transaction_read_only`, as pg_auto_failover sets on a primary it fences), where
/// neither generator issues ids: as PostgreSQL's `nextval()` refuses there. One load of a
/// global per call.
#[inline]
pub fn read_only_transaction() -> bool {
    // SAFETY: a plain global of this backend, set at transaction start.
    unsafe { pg_sys::XactReadOnly }
}

/// Set once this process has seen recovery end.
static RECOVERY_ENDED: AtomicBool = AtomicBool::new(false);

/// The out-of-line part of [`recovery_in_progress`]: asks PostgreSQL.
#[cold]
#[inline(never)]
fn ask_recovery_in_progress() -> bool {
    // SAFETY: RecoveryInProgress reads shared memory that exists in every backend.
    let in_recovery = unsafe { pg_sys::RecoveryInProgress() };
    if !in_recovery {
        RECOVERY_ENDED.store(true, Ordering::Relaxed);
    }
    in_recovery
}

/// The call floor of the benchmarks (`scripts/bench.sh`): a pgrx function that returns the
/// bigint 0 and does nothing else, so that a benchmark can tell what a call through pgrx's
/// wrapper and PostgreSQL's fmgr costs from what idgen's generators cost. Not part of the
/// extension's SQL (`sql = false`); the benchmark declares it in its own database with
/// `CREATE FUNCTION ... LANGUAGE c AS '$libdir/idgen', 'idgen_call_floor_wrapper'`.
#[pg_extern(sql = false)]
fn idgen_call_floor() -> i64 {
    0
}

/// Helpers for the `#[pg_test]`s of every module.
#[cfg(any(test, feature = "pg_test"))]
pub mod testing {
    use pgrx::prelude::*;

    /// Runs `sql` and asserts that it fails with SQLSTATE `code`: a PL/pgSQL handler catches
    /// exactly that code, so another code, or no error at all, fails the test.
    pub fn assert_sqlstate(sql: &str, code: &str) {
        let block = format!(
            "DO $do$ BEGIN EXECUTE $q${sql}$q$; RAISE EXCEPTION 'no error' USING ERRCODE = 'XX001'; \
             EXCEPTION WHEN SQLSTATE '{code}' THEN NULL; END $do$"
        );
        Spi::run(&block).unwrap_or_else(|e| panic!("{sql}: expected SQLSTATE {code}, got {e}"));
    }

    /// The one bigint `sql` returns.
    pub fn one_i64(sql: &str) -> i64 {
        Spi::get_one::<i64>(sql).unwrap().unwrap()
    }
}

/// Required by `cargo pgrx test`: the settings of its test server.
#[cfg(test)]
pub mod pg_test {
    pub fn setup(_options: Vec<&str>) {}

    /// idgen must be preloaded and needs a worker id to generate.
    #[must_use]
    pub fn postgresql_conf_options() -> Vec<&'static str> {
        vec!["shared_preload_libraries = 'idgen'", "idgen.worker_id = 42"]
    }
}
