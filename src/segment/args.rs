//! The checks of the segment functions' arguments, each a PostgreSQL error with its own
//! SQLSTATE that changes nothing: NULL (22004), a bad name (42602, 42622), a step out of range
//! (22023), a cache out of range (22023), a description too long (22001).

use super::range::{self, check_name, NameError, MAX_DESCRIPTION_BYTES};
use crate::error::Error;
use crate::failure::FixedText;

/// A segment name that is not NULL (22004).
pub(super) fn non_null_name<T>(name: Option<T>) -> T {
    // let-else, not `ok_or`: an eagerly built error is dropped on every call.
    let Some(name) = name else {
        Error::NullArgument {
            argument: "segment name",
        }
        .report()
    };
    name
}

/// A checked segment name: not NULL (22004), not empty (42602), at most 63 bytes (42622).
pub(super) fn name_arg(name: Option<&str>) -> &str {
    let name = non_null_name(name);
    match check_name(name) {
        Ok(()) => name,
        Err(NameError::Empty) => Error::SegmentNameEmpty.report(),
        Err(NameError::TooLong(bytes)) => Error::SegmentNameTooLong {
            name: name[..name.floor_char_boundary(range::MAX_NAME_BYTES)].into(),
            bytes,
            max: range::MAX_NAME_BYTES,
        }
        .report(),
    }
}

pub(super) fn step_arg(step: i32) -> i32 {
    if !(1..=range::MAX_STEP).contains(&step) {
        Error::StepOutOfRange {
            step: step.into(),
            max: range::MAX_STEP,
        }
        .report();
    }
    step
}

pub(super) fn description_arg(description: &str) -> FixedText<1024> {
    if description.len() > MAX_DESCRIPTION_BYTES {
        Error::DescriptionTooLong {
            bytes: description.len(),
            max: MAX_DESCRIPTION_BYTES,
        }
        .report();
    }
    FixedText::new(description)
}

/// Largest per-backend cache of a segment (`cache => n`), as `segment_nextvals`' batch.
pub(super) const MAX_CACHE: i32 = 1_000_000;

/// A segment's per-backend cache: 0 (adaptive), 1 (none) or a block size up to [`MAX_CACHE`]
/// (22023 otherwise).
pub(super) fn cache_arg(cache: i32) -> i32 {
    if !(0..=MAX_CACHE).contains(&cache) {
        Error::CacheOutOfRange {
            cache: cache.into(),
            max: MAX_CACHE,
        }
        .report();
    }
    cache
}
