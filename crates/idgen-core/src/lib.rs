//! idgen's pure core: decisions without PostgreSQL or pgrx, tested with `cargo test -p
//! idgen-core` in seconds and without root. The extension (`src/` at the repository root) calls
//! it; the registry model (`tests/registry_model.rs`) explores it.

pub mod registry;
pub mod segment;
pub mod serial;
pub mod snowflake;
pub mod time;
