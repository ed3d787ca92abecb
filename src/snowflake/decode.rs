//! Conversions between Snowflake ids, ticks and `timestamptz`, for decode, compose and status,
//! and the SQLSTATEs of the layout's failures on arguments. The bit arithmetic (id to parts and
//! back, Unix ms to ticks) is `idgen_core::snowflake::layout`'s; this adds PostgreSQL's time
//! type.

use idgen_core::snowflake::layout::{Layout, LayoutError, Parts};
use idgen_core::snowflake::text::TextError;
use pgrx::datetime::TimestampWithTimeZone;

use crate::error::Error;
use crate::time::{timestamptz_to_unix_ms, unix_ms_to_timestamptz};

/// The time at which `tick` starts.
pub(crate) fn tick_start(layout: &Layout, tick: u64) -> Result<TimestampWithTimeZone, Error> {
    unix_ms_to_timestamptz(layout.unix_ms_of_tick(tick))
}

/// The parts of `id` with its tick as a time. Errors with 22023 for a negative id or one not
/// below `2^idgen.id_bits`.
pub(crate) fn decode(layout: &Layout, id: i64) -> Result<(TimestampWithTimeZone, Parts), Error> {
    let parts = layout.decode(id)?;
    Ok((tick_start(layout, parts.tick)?, parts))
}

/// The id for (time, worker, sequence): the lowest id at `ts` for that worker and sequence.
/// Errors with 22008 for a time outside the layout (or infinite), 22003 for a worker id or
/// sequence that does not fit.
pub(crate) fn compose(
    layout: &Layout,
    ts: TimestampWithTimeZone,
    worker: i64,
    sequence: i64,
) -> Result<i64, Error> {
    if !ts.is_finite() {
        return Err(Error::TimestampOutOfRange {
            detail: "An infinite timestamp has no snowflake id.".into(),
        });
    }
    let tick = layout.tick_at(timestamptz_to_unix_ms(ts))?;
    Ok(layout.compose(tick, worker, sequence)?)
}

/// Layout failures of *arguments* (decode, compose). Generation maps its own: there a
/// `TimeExhausted` is the generator running out, not a bad argument.
impl From<LayoutError> for Error {
    fn from(e: LayoutError) -> Self {
        match e {
            LayoutError::NegativeId(id) => Error::NegativeId { id },
            LayoutError::IdTooWide { id, id_bits } => Error::IdTooWide { id, id_bits },
            LayoutError::WorkerOutOfRange { worker, max } => {
                Error::WorkerOutOfRange { worker, max }
            }
            LayoutError::SequenceOutOfRange { sequence, max } => {
                Error::SequenceOutOfRange { sequence, max }
            }
            LayoutError::BeforeEpoch { ms } => Error::TimestampOutOfRange {
                detail: format!("It is {ms} ms before idgen.epoch."),
            },
            LayoutError::TimeExhausted { tick, max } => Error::TimestampOutOfRange {
                detail: format!("Tick {tick} is past the last tick {max} of the layout."),
            },
            LayoutError::Invalid(detail) => Error::InvalidLayout { detail },
        }
    }
}

/// Failures of the text form (`snowflake_format`, `snowflake_parse`): 22P02 for a text that is
/// not one, 22008 for a year `yyyy` cannot show, the layout's own otherwise.
impl From<TextError> for Error {
    fn from(e: TextError) -> Self {
        match e {
            TextError::Layout(e) => e.into(),
            TextError::YearOutOfRange(year) => Error::TimestampOutOfRange {
                detail: format!("Its tick starts in the year {year}, which yyyy cannot show."),
            },
            TextError::Malformed(why) => Error::InvalidSnowflakeText { why },
        }
    }
}
