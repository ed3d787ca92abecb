//! Helpers for the `#[pg_test]`s of every module: SQLSTATE assertions and one-value queries.

use pgrx::prelude::*;

/// Runs `sql` and asserts that it fails with SQLSTATE `code`: a PL/pgSQL handler catches
/// exactly that code, so another code, or no error at all, fails the test.
pub(crate) fn assert_sqlstate(sql: &str, code: &str) {
    let block = format!(
        "DO $do$ BEGIN EXECUTE $q${sql}$q$; RAISE EXCEPTION 'no error' USING ERRCODE = 'XX001'; \
         EXCEPTION WHEN SQLSTATE '{code}' THEN NULL; END $do$"
    );
    Spi::run(&block).unwrap_or_else(|e| panic!("{sql}: expected SQLSTATE {code}, got {e}"));
}

/// The one bigint `sql` returns.
pub(crate) fn one_i64(sql: &str) -> i64 {
    Spi::get_one::<i64>(sql).unwrap().unwrap()
}
