//! The C symbols that only the SQL of older releases declares, kept for databases whose
//! extension has not been updated yet (`ALTER EXTENSION idgen UPDATE`): a new library serves
//! them until then, and the upgrade scripts replace or drop the functions. None is part of a
//! fresh install (`sql = false`; src/sql.rs orders what is). As VectorChord's `src/upgrade.rs`.
//!
//! Each forwards to the function of today that does the work, with the arguments its old SQL
//! passes and the defaults the old signature lacked.

use pgrx::datetime::Timestamp;
use pgrx::prelude::*;

use crate::error::OrReport;

/// `segment_create` of idgen 0.2.0 and earlier (no scope, no cache): a local segment without
/// a per-backend cache. Errors as `segment_create`.
#[pg_extern(sql = false)]
fn segment_create(
    name: Option<&str>,
    start: default!(Option<i64>, 1),
    step: default!(Option<i32>, 1000),
    description: default!(Option<&str>, "NULL"),
) {
    crate::segment::create(name, start, step, description, false, 1);
}

/// `segment_create` of idgen 0.3.0 to 0.6.0 (no cache): `scope` as today's, no per-backend
/// cache. Errors as `segment_create`.
#[pg_extern(sql = false)]
fn segment_create_scoped(
    name: Option<&str>,
    start: default!(Option<i64>, 1),
    step: default!(Option<i32>, 1000),
    description: default!(Option<&str>, "NULL"),
    scope: default!(Option<&str>, "'local'"),
) {
    crate::segment::create(
        name,
        start,
        step,
        description,
        crate::segment::scope_arg(scope),
        1,
    );
}

/// `segment_alter` of idgen 0.1.0 to 0.6.0 (no cache): the cache is kept. Errors as
/// `segment_alter`.
#[pg_extern(sql = false)]
fn segment_alter(
    name: Option<&str>,
    step: default!(Option<i32>, "NULL"),
    description: default!(Option<&str>, "NULL"),
) {
    crate::segment::alter(name, step, description, -1);
}

/// Internal function of idgen 0.4.0's PL/pgSQL serials (0.6.0 drops it): checks `format` for
/// a counter reset every `reset`. Errors: 22023 naming the offending token or reset.
#[pg_extern(immutable, parallel_safe, sql = false)]
fn idgen_serial_check(format: &str, reset: &str) {
    crate::serial::check_format(format, reset).or_report()
}

/// Internal function of idgen 0.4.0's PL/pgSQL serials (0.6.0 drops it): the text of counter
/// value `seq` of serial `name` drawn at local time `at`. Errors: 22003, 55000, 22008 as
/// `serial_nextval`'s rendering.
#[pg_extern(stable, parallel_safe, sql = false)]
fn idgen_serial_render(name: &str, format: &str, at: Timestamp, seq: i64) -> String {
    crate::serial::render_at(name, format, at, seq).or_report()
}
