//! Serial numbers: the format and its periods.
