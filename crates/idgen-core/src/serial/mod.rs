//! Serial numbers: the format and its periods ([`format`](mod@format)).

pub mod format;
