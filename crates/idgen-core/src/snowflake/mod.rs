//! Snowflake: the bit layout ([`mod@layout`]), the state word ([`generator`]), the clock gate
//! ([`clock`]), the reservation file ([`reservation`]) and the text form ([`text`]). The
//! extension's `src/snowflake/` holds them in shared memory and serves them to SQL.

pub mod clock;
pub mod generator;
pub mod layout;
pub mod reservation;
pub mod text;
pub mod uuid;
