//! Every user-facing failure of idgen, and the one place that turns it into a PostgreSQL error:
//! SQLSTATE, lower-case message naming the object, detail and hint.
//!
//! SQLSTATEs follow PostgreSQL's own choices where it has an equivalent (`currval` before
//! `nextval` is 55000 as in sequence.c; a generator that has run out is 2200H, "sequence
//! generator limit exceeded"). Tests assert the SQLSTATE, never the message text.

use pgrx::pg_sys::panic::ErrorReport;
use pgrx::prelude::*;
use thiserror::Error;

use crate::snowflake::layout::LayoutError;

/// A user-facing failure. [`Error::report`] raises it as an `ERROR`.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Error {
    /// `_PG_init` ran outside `shared_preload_libraries` (55000). `line` is the exact setting
    /// to put in `postgresql.conf`.
    #[error("idgen must be loaded via shared_preload_libraries")]
    NotPreloaded { line: String },
    /// `idgen.worker_id` is still `-1` (55000).
    #[error("idgen.worker_id is not set")]
    WorkerIdNotSet,
    /// The server is in recovery (a standby): it usually carries its primary's worker id (25006).
    #[error("cannot generate snowflake ids during recovery")]
    InRecovery,
    /// `snowflake_currval()` before any `snowflake_nextval()` in this session (55000).
    #[error("snowflake_currval is not yet defined in this session")]
    CurrvalNotYetDefined,
    /// A NULL where a value is required (22004).
    #[error("{argument} must not be null")]
    NullArgument { argument: &'static str },
    /// A count outside `1..=max` (22023).
    #[error("count must be between 1 and {max}, not {count}")]
    CountOutOfRange { count: i64, max: u64 },
    /// A negative `bigint` given as a Snowflake id (22023).
    #[error("snowflake id {id} is negative")]
    NegativeId { id: i64 },
    /// A worker id that does not fit the layout (22003).
    #[error("worker_id {worker} is out of range")]
    WorkerOutOfRange { worker: i64, max: u64 },
    /// A sequence that does not fit the layout (22003).
    #[error("sequence {sequence} is out of range")]
    SequenceOutOfRange { sequence: i64, max: u64 },
    /// A timestamp outside the layout's time range: before the epoch, past its end, or
    /// infinite (22008).
    #[error("timestamp is out of range for the snowflake layout")]
    TimestampOutOfRange { detail: String },
    /// The wall clock reads before `idgen.epoch` (22008).
    #[error("the system clock is {ms} ms before idgen.epoch")]
    ClockBeforeEpoch { ms: i64 },
    /// A setting in `postgresql.conf` that did not take effect; raised at server start (22023).
    #[error("invalid value for parameter \"{name}\": \"{value}\"")]
    InvalidSetting {
        name: String,
        value: String,
        detail: String,
    },
    /// The configured layout is unusable (22023); raised at server start.
    #[error("invalid snowflake layout")]
    InvalidLayout { detail: String },
    /// The time field would overflow: the layout has run out (2200H). Never wrapped.
    #[error("snowflake generator has reached the end of its time range")]
    TimeExhausted { detail: String },
}

impl Error {
    /// The SQLSTATE of this failure.
    pub fn sqlstate(&self) -> PgSqlErrorCode {
        use PgSqlErrorCode::*;
        match self {
            Error::NotPreloaded { .. } | Error::WorkerIdNotSet | Error::CurrvalNotYetDefined => {
                ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE
            }
            Error::InRecovery => ERRCODE_READ_ONLY_SQL_TRANSACTION,
            Error::NullArgument { .. } => ERRCODE_NULL_VALUE_NOT_ALLOWED,
            Error::CountOutOfRange { .. }
            | Error::NegativeId { .. }
            | Error::InvalidLayout { .. }
            | Error::InvalidSetting { .. } => ERRCODE_INVALID_PARAMETER_VALUE,
            Error::WorkerOutOfRange { .. } | Error::SequenceOutOfRange { .. } => {
                ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE
            }
            Error::TimestampOutOfRange { .. } | Error::ClockBeforeEpoch { .. } => {
                ERRCODE_DATETIME_FIELD_OVERFLOW
            }
            Error::TimeExhausted { .. } => ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED,
        }
    }

    /// The DETAIL line, where there is more to say than the message.
    pub fn detail(&self) -> Option<String> {
        match self {
            Error::WorkerOutOfRange { max, .. } => Some(format!("The layout allows worker ids 0 to {max}.")),
            Error::SequenceOutOfRange { max, .. } => Some(format!("The layout allows sequences 0 to {max}.")),
            Error::TimestampOutOfRange { detail }
            | Error::TimeExhausted { detail }
            | Error::InvalidLayout { detail }
            | Error::InvalidSetting { detail, .. } => Some(detail.clone()),
            Error::InRecovery => Some(
                "A standby usually carries its primary's idgen.worker_id; ids drawn here could repeat the primary's."
                    .into(),
            ),
            _ => None,
        }
    }

    /// The HINT line, where the fix is known.
    pub fn hint(&self) -> Option<String> {
        match self {
            Error::NotPreloaded { line } => Some(format!("Add {line} to postgresql.conf and restart the server.")),
            Error::InvalidSetting { name, .. } => {
                Some(format!("Correct {name} in postgresql.conf (or postgresql.auto.conf) and start the server again."))
            }
            Error::WorkerIdNotSet => Some(
                "Set idgen.worker_id in postgresql.conf to a number from 0 to 1023 that no other server uses, then restart the server."
                    .into(),
            ),
            Error::InRecovery => Some("Draw ids on the primary; after promotion this server can draw them.".into()),
            Error::CountOutOfRange { .. } => Some("Draw larger batches with several calls.".into()),
            Error::NegativeId { .. } => Some("Snowflake ids are positive bigints.".into()),
            Error::ClockBeforeEpoch { .. } => {
                Some("Check the system clock; idgen.epoch must be in the past.".into())
            }
            Error::TimeExhausted { .. } => Some(
                "Configure a new epoch or a layout with more time bits, with a worker id range that cannot collide with the old ids."
                    .into(),
            ),
            _ => None,
        }
    }

    /// Raises this failure as a PostgreSQL `ERROR`; does not return.
    pub fn report(self) -> ! {
        let mut report = ErrorReport::new(self.sqlstate(), self.to_string(), "idgen");
        if let Some(detail) = self.detail() {
            report = report.set_detail(detail);
        }
        if let Some(hint) = self.hint() {
            report = report.set_hint(hint);
        }
        report.report(PgLogLevel::ERROR);
        unreachable!("ereport(ERROR) returned")
    }
}

/// Layout failures of *arguments* (decode, compose). Generation maps its own: there a
/// `TimeExhausted` is the generator running out, not a bad argument.
impl From<LayoutError> for Error {
    fn from(e: LayoutError) -> Self {
        match e {
            LayoutError::NegativeId(id) => Error::NegativeId { id },
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

/// `result?`-style helper for SQL functions: the value, or the error raised.
pub trait OrReport<T> {
    /// Unwraps, raising the error as a PostgreSQL `ERROR` on failure.
    fn or_report(self) -> T;
}

impl<T, E: Into<Error>> OrReport<T> for Result<T, E> {
    fn or_report(self) -> T {
        match self {
            Ok(v) => v,
            Err(e) => e.into().report(),
        }
    }
}
