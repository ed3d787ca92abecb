pub mod buffer;
pub mod range;
