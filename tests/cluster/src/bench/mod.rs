//! idgen's benchmark: its generators against PostgreSQL's own, side by side, in one run
//! (`scripts/bench.sh`). Not a pass/fail test: the test suite runs [`Config::quick`]
//! only to keep this code working, and asserts that every cell was measured, never a timing.
//!
//! One server with default durability (fsync and synchronous_commit on) and idgen preloaded.
//! Each round measures every generator once per measurement, A B C A B C ..., so that the
//! machine's drift over the run spreads over all generators alike; a cell is the median over
//! rounds, with min and max. Ratios are taken within a round, then their median is reported.
//!
//! Measurements:
//! * bulk: `SELECT count(g) FROM (SELECT <gen> AS g FROM generate_series(1, N)) t`, in ns per
//!   id; the same over a constant is the floor, over a no-op pgrx function the call floor;
//! * insert: `INSERT ... SELECT` of N rows into a table whose primary key defaults to the
//!   generator: seconds, rows per second, and the primary key's size;
//! * per statement: `pgbench -M prepared` running `SELECT <gen>;`, tps, with `SELECT 1` as the
//!   ceiling;
//! * drift: after the largest bulk statement of `snowflake_nextval()`, how far the last id's
//!   timestamp is ahead of the wall clock.

mod config;
mod generators;
mod model;
mod render;
mod report;
mod run;

pub use config::*;
pub use generators::*;
pub use model::*;
pub use report::median;
pub use run::{host, pgbench, run};
