//! idgen: unique 64-bit ids generated inside PostgreSQL.
//!
//! * Snowflake (`snowflake_nextval()`): time | worker id | sequence, one lock-free generator per
//!   server in shared memory (`snowflake`).
//! * Segment (`segment_nextval('orders')`): Leaf-style ranges from durable high-water marks,
//!   cached in shared memory with a double buffer, allocated by a background worker per
//!   database (`segment`).
//!
//! `_PG_init` only orchestrates: refuse to load unless preloaded, then each subsystem's `init`
//! in order (`guc` → `snowflake` → `segment`), and the shared-memory hooks that call the parts
//! the subsystems registered. Below the subsystems, leaves that call no subsystem: `error`,
//! `time`, `recovery`, `backend`, `lwlock`, `hooks`, `latch`, `shmem`, and `sqids` (short ids
//! for URLs: SQL functions with no state). See DESIGN.md for the guarantees and the module map,
//! README.md for operation.

mod backend;
mod error;
mod failure;
mod guc;
mod hooks;
mod identity;
mod latch;
mod libpq;
mod lwlock;
mod marks;
mod pgver;
mod recovery;
mod registry;
mod segment;
mod serial;
mod shmem;
mod snowflake;
mod sqids;
mod sql;
mod time;
mod upgrade;
mod worker;

use pgrx::pg_sys;
use pgrx::prelude::*;

pgrx::pg_module_magic!();

/// Library entry point, run once per process that loads idgen. idgen keeps its generator in
/// shared memory and its settings are postmaster-level, so it must be loaded by the postmaster
/// through `shared_preload_libraries`; anywhere else it refuses with SQLSTATE 55000 and the
/// exact line to add as hint (as VectorChord does), before defining any setting.
#[pg_guard]
pub extern "C-unwind" fn _PG_init() {
    // SAFETY: a plain bool of this process that PostgreSQL sets while it loads
    // shared_preload_libraries, read on its only thread.
    if !unsafe { pg_sys::process_shared_preload_libraries_in_progress } {
        error::Error::NotPreloaded {
            line: preload_line(),
        }
        .report();
    }
    quiet_backtraces();
    guc::init();
    snowflake::init();
    segment::init();
    serial::init();
    registry::init();
    shmem::init();
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
    match backend::setting_text(c"shared_preload_libraries")
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
    {
        Some(libs) => format!("shared_preload_libraries = '{libs},idgen'"),
        None => "shared_preload_libraries = 'idgen'".to_owned(),
    }
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
mod testing;

/// Required by `cargo pgrx test`: the settings of its test server.
#[cfg(test)]
pub(crate) mod pg_test {
    pub(crate) fn setup(_options: Vec<&str>) {}

    /// idgen must be preloaded and needs a worker id to generate.
    #[must_use]
    pub(crate) fn postgresql_conf_options() -> Vec<&'static str> {
        vec!["shared_preload_libraries = 'idgen'", "idgen.worker_id = 42"]
    }
}
