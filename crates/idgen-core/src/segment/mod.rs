//! Segments: range and step arithmetic ([`range`]) and the lock-free double buffer
//! ([`buffer`]).

pub mod buffer;
pub mod range;
