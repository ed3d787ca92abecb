//! Every user-facing failure of idgen, and the one place that turns it into a PostgreSQL error:
//! SQLSTATE, lower-case message naming the object, detail and hint.
//!
//! SQLSTATEs follow PostgreSQL's own choices where it has an equivalent (`currval` before
//! `nextval` is 55000 as in sequence.c; a generator that has run out is 2200H, "sequence
//! generator limit exceeded"). Tests assert the SQLSTATE, never the message text.

use pgrx::pg_sys::panic::{CaughtError, ErrorReport, ErrorReportWithLevel};
use pgrx::prelude::*;
use thiserror::Error;

/// A user-facing failure. [`Error::report`] raises it as an `ERROR`.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub(crate) enum Error {
    /// `_PG_init` ran outside `shared_preload_libraries` (55000). `line` is the exact setting
    /// to put in `postgresql.conf`.
    #[error("idgen must be loaded via shared_preload_libraries")]
    NotPreloaded { line: String },
    /// `idgen.worker_id` is still `-1` (55000). `max_worker` is the layout's largest worker id.
    #[error("idgen.worker_id is not set")]
    WorkerIdNotSet { max_worker: u64 },
    /// `idgen.registry` is set and the registry has not granted this server a worker id yet
    /// (55000).
    #[error("this server has no worker id from the registry yet")]
    RegistryPending,
    /// The next id would reach the first tick the registry has not confirmed for this server's
    /// lease (55000): renewals failed for a whole lease, or the server is shutting down.
    #[error("snowflake ids of worker id {worker} reached the end of its lease in the registry")]
    RegistryFenced {
        worker: u64,
        until_unix_ms: i64,
        reason: String,
    },
    /// A cached range of a global segment or serial counter while the registry's last contact
    /// is a lease old or older (55000): a node cut off from the registry stops at a known time.
    #[error("{what} is not served: the registry's last contact is older than the lease")]
    GlobalRangeStale {
        what: String,
        age_ms: i64,
        lease_ms: i64,
    },
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
    /// A `bigint` at or above `2^idgen.id_bits` given as a Snowflake id (22023, as a negative
    /// one): this server's layout issues none.
    #[error("snowflake id {id} is not below 2^{id_bits}")]
    IdTooWide { id: i64, id_bits: u32 },
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
    /// A serial number format or reset that is refused (22023), naming the token.
    #[error("invalid serial format: {why}")]
    InvalidSerialFormat { why: String },
    /// A serial's counter outgrew the padding of its `{seq:0N}` token in this period (22003).
    #[error("serial \"{name}\" has used all {max} numbers its format shows in this period")]
    SerialExhausted { name: String, max: i64 },
    /// A format with `{worker}` on a server without a fitting worker id (55000).
    #[error("serial format shows {{worker}}, and this server's worker id cannot fill it")]
    SerialWorker { detail: String },
    /// No serial of that name, or none this transaction can see (42704).
    #[error("serial \"{name}\" does not exist")]
    UnknownSerial { name: String },
    /// `serial_create` of a name that exists (42710).
    #[error("serial \"{name}\" already exists")]
    SerialExists { name: String },
    /// `serial_create` of a dropped serial's name with a format, reset or scope that could
    /// print the dropped serial's texts again (42710): the name keeps what it printed.
    #[error("serial \"{name}\" was dropped, and a serial of this {what} under its name could print its texts again")]
    SerialNameDropped { name: String, what: &'static str },
    /// `serial_forget` of a name no dropped serial has (42704).
    #[error("no dropped serial \"{name}\"")]
    UnknownDroppedSerial { name: String },
    /// `serial_alter` to a format that could print a text the serial printed (22023).
    #[error("{why}")]
    SerialFormatChange { why: String },
    /// A gapless `serial_nextval` on a standby (25006): its counter row cannot be written.
    #[error("cannot draw from a gapless serial during recovery")]
    SerialInRecovery,
    /// A draw from a serial the role has no USAGE on (42501), as sequences' "permission denied".
    #[error("permission denied for serial \"{name}\"")]
    SerialPermissionDenied { name: String },
    /// A serial time zone that is not an IANA zone name (22023).
    #[error("time zone \"{zone}\" is not an IANA time zone name")]
    InvalidSerialTimeZone { zone: String },
    /// Another refused argument of a serial function (22023).
    #[error("{why}")]
    InvalidSerialArgument { why: String },
    /// A local serial showing `{worker}` on a server whose worker id comes from the registry
    /// (55000): the id can move to another server within a period, whose counter would repeat.
    #[error(
        "a local serial cannot show {{worker}} on a server whose worker id comes from the registry"
    )]
    SerialWorkerMoves,
    /// A text that is not the text form of a Snowflake id (`snowflake_parse`, 22P02).
    #[error("invalid text form of a snowflake id: {why}")]
    InvalidSnowflakeText { why: String },
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
    /// The next id would be stamped further ahead of the wall clock than `idgen.max_drift_ms`,
    /// and the clock would not catch up within `idgen.max_wait_ms` (53400, "configuration limit
    /// exceeded": the limit is the drift bound, which the hint names).
    #[error("the system clock is {behind_ms} ms behind the snowflake generator")]
    ClockBehind {
        behind_ms: i64,
        max_drift_ms: u64,
        max_wait_ms: u64,
    },
    /// The reservation file does not parse or its checksum does not match (XX001): generation
    /// stops rather than guessing where the last run ended.
    #[error("snowflake reservation file \"{path}\" is corrupt")]
    ReservationCorrupt { path: String, reason: String },
    /// The reservation file could not be read or written (58030).
    #[error("{message}")]
    ReservationIo { message: String },
    /// The reservation file was written under another layout (55000): ids of the two layouts
    /// could collide.
    #[error("the snowflake layout changed since this server last issued ids")]
    LayoutChanged {
        path: String,
        stored: String,
        configured: String,
    },
    /// The time field would overflow: the layout has run out (2200H). Never wrapped.
    #[error("snowflake generator has reached the end of its time range")]
    TimeExhausted { detail: String },
    /// An empty segment name (42602).
    #[error("segment name must not be empty")]
    SegmentNameEmpty,
    /// A segment name longer than 63 bytes (42622). `name` is the name's first 63 bytes at
    /// most: the message never repeats a long argument in full.
    #[error("segment name \"{name}…\" is too long")]
    SegmentNameTooLong {
        name: String,
        bytes: usize,
        max: usize,
    },
    /// A segment that does not exist in this database (42704); the hint shows how to create it.
    #[error("segment \"{name}\" does not exist")]
    UnknownSegment { name: String },
    /// `segment_create` of a name that exists (42710).
    #[error("segment \"{name}\" already exists")]
    SegmentExists { name: String },
    /// A step outside `1..=MAX_STEP` (22023).
    #[error("step must be between 1 and {max}, not {step}")]
    StepOutOfRange { step: i64, max: i32 },
    /// A segment cache outside `0..=max` (22023): 0 adaptive, 1 none, n a block of n.
    #[error("cache must be between 0 and {max}, not {cache}")]
    CacheOutOfRange { cache: i64, max: i32 },
    /// A per-backend cache asked of a database whose idgen SQL predates 0.7.0 (55000).
    #[error("segment caches need idgen 0.7.0 in this database")]
    CacheNeedsUpdate,
    /// A `segment_create` start without a predecessor: `-9223372036854775808` (22003).
    #[error("start {start} is out of range")]
    StartOutOfRange { start: i64 },
    /// `segment_alter(step => ...)` while several servers share segment names (55000): the step
    /// is the size of the blocks they take in turn.
    #[error(
        "cannot change the step of segment \"{name}\" while idgen.segment_node_count is {count}"
    )]
    InterleavedStepChange { name: String, count: u32 },
    /// A refill reached `idgen.segment_interleave_until` (55000): this server's part of the old
    /// interleave is used up until it switches to the new one (README, Growing from N to M
    /// servers).
    #[error("segment \"{name}\" reached idgen.segment_interleave_until ({until})")]
    InterleaveUntilReached { name: String, until: i64 },
    /// `segment_interleave_ready(until)` while the allocator runs with another (or no)
    /// `idgen.segment_interleave_until` (55000).
    #[error("idgen.segment_interleave_until is not {until} on this server")]
    InterleaveUntilNotSet { until: i64, in_force: Option<i64> },
    /// `segment_interleave_ready(until)` finds a high-water mark above `until` (55000): numbers
    /// above the fence were reserved under the old interleave.
    #[error("segment \"{name}\" is already past {until} (its high-water mark is {max_id})")]
    InterleavePastUntil {
        name: String,
        max_id: i64,
        until: i64,
    },
    /// `idgen.segment_node_count`/`segment_node_index` changed by a reload without
    /// `idgen.segment_interleave_from` (55000).
    #[error("idgen.segment_node_count and idgen.segment_node_index changed since the server started, without idgen.segment_interleave_from")]
    InterleaveChangedWithoutFence {
        started: (i32, i32),
        now: (i32, i32),
    },
    /// The allocator, working in its own transactions, does not see idgen in this database
    /// (55000): the caller's `CREATE EXTENSION idgen` is not committed yet.
    #[error("the idgen allocator cannot see the idgen extension in this database")]
    ExtensionNotVisible,
    /// A description longer than allowed (22001).
    #[error("segment description is too long")]
    DescriptionTooLong { bytes: usize, max: usize },
    /// `segment_setval` below a number that may have been handed out (22003), as sequence.c's
    /// "value is out of bounds": segments only move forward.
    #[error(
        "segment_setval: value {value} is below segment \"{name}\"'s numbers already handed out"
    )]
    SetvalBackwards {
        name: String,
        value: i64,
        floor: i64,
    },
    /// The high-water mark is `i64::MAX` (2200H), as sequence.c's "reached maximum value".
    #[error("segment_nextval: reached maximum value of segment \"{name}\" ({max})", max = i64::MAX)]
    SegmentExhausted { name: String },
    /// `segment_currval` before any `segment_nextval` of that name in this session (55000).
    #[error("segment_currval of segment \"{name}\" is not yet defined in this session")]
    SegmentCurrvalNotYetDefined { name: String },
    /// A generator in a read-only transaction (25006), as `nextval()`: a server fenced
    /// read-only (pg_auto_failover's demotion) must not hand out ids.
    #[error("cannot execute {function} in a read-only transaction")]
    ReadOnlyTransaction { function: &'static str },
    /// Segment functions on a standby (25006): the allocator cannot write there.
    #[error("cannot use segments during recovery")]
    SegmentInRecovery,
    /// The allocator background worker could not be registered (53400).
    #[error("could not start the idgen allocator worker for this database")]
    AllocatorUnavailable { max_worker_processes: i32 },
    /// No range arrived within `idgen.segment_wait_timeout` (55P03).
    #[error("timed out after {ms} ms waiting for a range of segment \"{name}\"")]
    SegmentWaitTimeout { name: String, ms: i32 },
    /// A fast serial's counter got no range within `idgen.segment_wait_timeout` (55P03).
    #[error("timed out after {ms} ms waiting for a range of serial \"{name}\"")]
    SerialWaitTimeout { name: String, ms: i32 },
    /// Every slot of the shared cache is busy (refilling, or frozen by an admin call), so none
    /// can be evicted for another segment (54000). Not a limit on segment names.
    #[error("no entry of the segment cache can be freed for another segment now")]
    SegmentCacheFull { max: usize },
    /// Too many segment requests waiting for the allocator at once (53400).
    #[error("too many segment requests waiting for the allocator")]
    RequestQueueFull { max: usize },
    /// `segment_create(..., scope => 'global')` without `idgen.registry` (55000).
    #[error("global segments need idgen.registry")]
    GlobalWithoutRegistry,
    /// A scope other than `local` or `global` (22023).
    #[error("scope must be local or global, not \"{scope}\"")]
    InvalidScope { scope: String },
    /// `segment_alter`/`segment_setval` of a global segment on a node (0A000): its mark and
    /// step are the registry's.
    #[error("segment \"{name}\" is global: {what} it in the registry")]
    GlobalSegmentChange { name: String, what: &'static str },
    /// A failure a background worker reported (the segment allocator for this caller's request,
    /// the registry client for this server's worker id), re-raised as it was; or one a leaf
    /// module describes next to its own code, SQLSTATE, detail and hint in one arm (`sqids`).
    #[error("{message}")]
    Relayed {
        sqlstate: i32,
        message: String,
        detail: Option<String>,
        hint: Option<String>,
    },
}

impl Error {
    /// The SQLSTATE of this failure.
    pub(crate) fn sqlstate(&self) -> PgSqlErrorCode {
        use PgSqlErrorCode::*;
        match self {
            Error::NotPreloaded { .. }
            | Error::WorkerIdNotSet { .. }
            | Error::RegistryPending
            | Error::GlobalWithoutRegistry
            | Error::RegistryFenced { .. }
            | Error::GlobalRangeStale { .. }
            | Error::CurrvalNotYetDefined
            | Error::LayoutChanged { .. }
            | Error::InterleavedStepChange { .. }
            | Error::InterleaveUntilReached { .. }
            | Error::InterleaveUntilNotSet { .. }
            | Error::InterleavePastUntil { .. }
            | Error::InterleaveChangedWithoutFence { .. }
            | Error::ExtensionNotVisible => ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            Error::InRecovery => ERRCODE_READ_ONLY_SQL_TRANSACTION,
            Error::NullArgument { .. } => ERRCODE_NULL_VALUE_NOT_ALLOWED,
            Error::CountOutOfRange { .. }
            | Error::NegativeId { .. }
            | Error::IdTooWide { .. }
            | Error::InvalidLayout { .. }
            | Error::InvalidSetting { .. } => ERRCODE_INVALID_PARAMETER_VALUE,
            Error::WorkerOutOfRange { .. } | Error::SequenceOutOfRange { .. } => {
                ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE
            }
            Error::TimestampOutOfRange { .. } | Error::ClockBeforeEpoch { .. } => {
                ERRCODE_DATETIME_FIELD_OVERFLOW
            }
            Error::InvalidSnowflakeText { .. } => ERRCODE_INVALID_TEXT_REPRESENTATION,
            Error::InvalidSerialFormat { .. } => ERRCODE_INVALID_PARAMETER_VALUE,
            Error::SerialExhausted { .. } => ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
            Error::SerialWorker { .. } | Error::SerialWorkerMoves => {
                ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE
            }
            Error::UnknownSerial { .. } => ERRCODE_UNDEFINED_OBJECT,
            Error::SerialExists { .. } | Error::SerialNameDropped { .. } => {
                ERRCODE_DUPLICATE_OBJECT
            }
            Error::UnknownDroppedSerial { .. } => ERRCODE_UNDEFINED_OBJECT,
            Error::SerialFormatChange { .. } => ERRCODE_INVALID_PARAMETER_VALUE,
            Error::SerialInRecovery => ERRCODE_READ_ONLY_SQL_TRANSACTION,
            Error::SerialPermissionDenied { .. } => ERRCODE_INSUFFICIENT_PRIVILEGE,
            Error::InvalidSerialTimeZone { .. } | Error::InvalidSerialArgument { .. } => {
                ERRCODE_INVALID_PARAMETER_VALUE
            }
            Error::TimeExhausted { .. } | Error::SegmentExhausted { .. } => {
                ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED
            }
            Error::SegmentNameEmpty => ERRCODE_INVALID_NAME,
            Error::SegmentNameTooLong { .. } => ERRCODE_NAME_TOO_LONG,
            Error::UnknownSegment { .. } => ERRCODE_UNDEFINED_OBJECT,
            Error::SegmentExists { .. } => ERRCODE_DUPLICATE_OBJECT,
            Error::StepOutOfRange { .. }
            | Error::InvalidScope { .. }
            | Error::CacheOutOfRange { .. } => ERRCODE_INVALID_PARAMETER_VALUE,
            Error::CacheNeedsUpdate => ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            Error::GlobalSegmentChange { .. } => ERRCODE_FEATURE_NOT_SUPPORTED,
            Error::StartOutOfRange { .. } | Error::SetvalBackwards { .. } => {
                ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE
            }
            Error::DescriptionTooLong { .. } => ERRCODE_STRING_DATA_RIGHT_TRUNCATION,
            Error::SegmentCurrvalNotYetDefined { .. } => ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
            Error::SegmentInRecovery | Error::ReadOnlyTransaction { .. } => {
                ERRCODE_READ_ONLY_SQL_TRANSACTION
            }
            Error::AllocatorUnavailable { .. } | Error::RequestQueueFull { .. } => {
                ERRCODE_CONFIGURATION_LIMIT_EXCEEDED
            }
            Error::SegmentWaitTimeout { .. } | Error::SerialWaitTimeout { .. } => {
                ERRCODE_LOCK_NOT_AVAILABLE
            }
            Error::ClockBehind { .. } => ERRCODE_CONFIGURATION_LIMIT_EXCEEDED,
            Error::ReservationCorrupt { .. } => ERRCODE_DATA_CORRUPTED,
            Error::ReservationIo { .. } => ERRCODE_IO_ERROR,
            Error::SegmentCacheFull { .. } => ERRCODE_PROGRAM_LIMIT_EXCEEDED,
            Error::Relayed { sqlstate, .. } => PgSqlErrorCode::from(*sqlstate),
        }
    }

    /// The DETAIL line, where there is more to say than the message.
    pub(crate) fn detail(&self) -> Option<String> {
        match self {
            Error::WorkerOutOfRange { max, .. } => Some(format!("The layout allows worker ids 0 to {max}.")),
            Error::SequenceOutOfRange { max, .. } => Some(format!("The layout allows sequences 0 to {max}.")),
            Error::IdTooWide { id_bits, .. } => Some(format!(
                "idgen.id_bits = {id_bits}: this server's snowflake ids are at most {}.",
                (1u64 << id_bits) - 1
            )),
            Error::TimestampOutOfRange { detail }
            | Error::SerialWorker { detail }
            | Error::TimeExhausted { detail }
            | Error::InvalidLayout { detail }
            | Error::InvalidSetting { detail, .. } => Some(detail.clone()),
            Error::ClockBehind { max_drift_ms, max_wait_ms, .. } => Some(format!(
                "idgen.max_drift_ms allows ids {max_drift_ms} ms ahead of the clock, and the clock would not catch up within idgen.max_wait_ms ({max_wait_ms} ms). No id was issued."
            )),
            Error::ReservationCorrupt { reason, .. } => Some(format!(
                "{reason}. The file records the first tick no id of this server has reached; without it a restart could repeat ids."
            )),
            Error::LayoutChanged { path, stored, configured } => Some(format!(
                "\"{path}\" was written with {stored}; the server now has {configured}."
            )),
            Error::RegistryFenced { until_unix_ms, reason, .. } => Some(format!(
                "The registry confirmed ids of this server up to Unix time {until_unix_ms} ms; no id past it is issued, so whoever holds the worker id next cannot repeat one. {reason}"
            )),
            Error::GlobalRangeStale { age_ms, lease_ms, .. } => Some(if *age_ms < 0 {
                format!("The registry has not answered this server as an open registry since it started; a cached global range is served only within {lease_ms} ms of the last answer, so that the registry can hand its numbers out again after a recovery that skipped this server.")
            } else {
                format!("The registry last answered a call this server sent {age_ms} ms ago; a cached global range is served only within {lease_ms} ms (idgen.registry_lease, at most the registry's idgen.registry_max_lease) of it, so that the registry can hand its numbers out again after a recovery that skipped this server.")
            }),
            Error::InRecovery => Some(
                "A standby usually carries its primary's idgen.worker_id; ids drawn here could repeat the primary's."
                    .into(),
            ),
            Error::SegmentNameTooLong { bytes, max, .. } => Some(format!(
                "Segment names are at most {max} bytes; this one has {bytes}."
            )),
            Error::DescriptionTooLong { bytes, max } => {
                Some(format!("Descriptions are at most {max} bytes; this one has {bytes}."))
            }
            Error::SetvalBackwards { floor, .. } => Some(format!(
                "Numbers up to {floor} may have been handed out; segments only move forward."
            )),
            Error::SegmentInRecovery => Some(
                "A standby cannot advance the high-water marks in idgen_segment; numbers drawn here could repeat the primary's."
                    .into(),
            ),
            Error::AllocatorUnavailable { max_worker_processes } => Some(format!(
                "All {max_worker_processes} background worker slots (max_worker_processes) are in use."
            )),
            Error::SegmentCacheFull { max } => Some(format!(
                "All {max} entries of the shared segment cache are being refilled or changed by admin calls at this moment."
            )),
            Error::ExtensionNotVisible => Some(
                "Segments are created and advanced by the allocator in transactions of its own, which cannot see a CREATE EXTENSION idgen that is not committed yet."
                    .into(),
            ),
            Error::InterleavedStepChange { .. } => Some(
                "Servers sharing a segment name take blocks of step numbers in turn; a different step on one server would make its blocks overlap the others'."
                    .into(),
            ),
            Error::InterleaveUntilReached { .. } => Some(
                "Numbers above the fence belong to the new interleave, which this server has not switched to yet."
                    .into(),
            ),
            Error::InterleaveUntilNotSet { in_force, .. } => Some(match in_force {
                Some(f) => format!("This database's allocator runs with idgen.segment_interleave_until = {f}."),
                None => "This database's allocator runs without idgen.segment_interleave_until.".into(),
            }),
            Error::InterleavePastUntil { .. } => Some(
                "A refill took numbers above the fence before the setting was in force.".into(),
            ),
            Error::InterleaveChangedWithoutFence { started, now } => Some(format!(
                "The server started as node {} of {}, and is now node {} of {}; the new interleave would hand out numbers the old one has.",
                started.1, started.0, now.1, now.0
            )),
            Error::Relayed { detail, .. } => detail.clone(),
            _ => None,
        }
    }

    /// The HINT line, where the fix is known.
    pub(crate) fn hint(&self) -> Option<String> {
        match self {
            Error::UnknownSerial { .. } => Some("Create it with serial_create(name, format, reset => ...).".into()),
            Error::SerialNameDropped { name, .. } => Some(format!(
                "Create it with the dropped serial's format (its {{seq}} may be wider), reset and scope to go on counting, or use another name; SELECT serial_forget('{}') forgets what the dropped serial printed, after which a serial under the name may print those texts again.",
                name.replace('\'', "''")
            )),
            Error::SerialFormatChange { .. } => Some(
                "Only the width of {seq} can change (a wider {seq:0N} for more numbers a period); a serial with another format is a new serial (serial_create under a new name).".into(),
            ),
            Error::SerialInRecovery => Some("Draw serial numbers on the primary.".into()),
            Error::SerialPermissionDenied { name } => Some(format!(
                "An idgen_admin member grants it: SELECT serial_grant('{}', 'role');",
                name.replace('\'', "''")
            )),
            Error::InvalidSerialTimeZone { .. } => Some(
                "Use a name listed in pg_timezone_names, such as 'Europe/Paris' or 'UTC': an abbreviation or a POSIX offset (sign inverted) is read differently by each session's settings.".into(),
            ),
            Error::SerialWorkerMoves => Some(
                "Use scope => 'global' (counters from the registry, unique on every server), or a format without {worker}.".into(),
            ),
            Error::SerialExhausted { .. } => Some(
                "Widen the counter of the format (serial_alter(name, format => ...) with a wider {seq:0N}), or wait for the next period."
                    .into(),
            ),
            Error::NotPreloaded { line } => Some(format!("Add {line} to postgresql.conf and restart the server.")),
            Error::InvalidSetting { name, .. } => {
                Some(format!("Correct {name} in postgresql.conf (or postgresql.auto.conf) and start the server again."))
            }
            Error::WorkerIdNotSet { max_worker } => Some(format!(
                "Set idgen.worker_id in postgresql.conf to a number from 0 to {max_worker} that no other server uses, or to auto with idgen.registry, then restart the server."
            )),
            Error::GlobalWithoutRegistry => Some(
                "Set idgen.registry to the registry's connection string (README, Many servers with a registry), or create a local segment."
                    .into(),
            ),
            Error::GlobalSegmentChange { .. } => Some(
                "Global segments are changed on the registry (UPDATE idgen_registry_segment); a node only draws from them."
                    .into(),
            ),
            Error::RegistryPending => Some(
                "The registry client claims a worker id as soon as the registry (idgen.registry) answers; see SELECT * FROM idgen_registry_status."
                    .into(),
            ),
            Error::RegistryFenced { .. } => Some(
                "Check the registry (idgen.registry) and SELECT * FROM idgen_registry_status; ids resume by themselves once the registry renews the lease."
                    .into(),
            ),
            Error::GlobalRangeStale { .. } => Some(
                "Check the registry (idgen.registry) and SELECT * FROM idgen_registry_client_status(); numbers resume by themselves once the registry answers, or once it has this server's report in an open recovery."
                    .into(),
            ),
            Error::InRecovery => Some("Draw ids on the primary; after promotion this server can draw them.".into()),
            Error::ReadOnlyTransaction { .. } => Some(
                "Draw ids in a read-write transaction on the writable primary; a server kept read-only (default_transaction_read_only, an HA manager's fence) must not issue them."
                    .into(),
            ),
            Error::CountOutOfRange { .. } => Some("Draw larger batches with several calls.".into()),
            Error::NegativeId { .. } => Some("Snowflake ids are positive bigints.".into()),
            Error::ClockBeforeEpoch { .. } => {
                Some("Check the system clock; idgen.epoch must be in the past.".into())
            }
            Error::ClockBehind { .. } => Some(
                "Wait for the clock to catch up (check NTP), or let ids run ahead of it: ALTER SYSTEM SET idgen.max_drift_ms = <ms, or -1 for unbounded>; SELECT pg_reload_conf();"
                    .into(),
            ),
            Error::ReservationCorrupt { path, .. } => Some(format!(
                "Restore \"{path}\" from a backup, or remove it once the system clock is past the time of every id this server issued (SELECT snowflake_timestamp(max(id)) over your tables); then call again."
            )),
            Error::ReservationIo { .. } => Some("Check the data directory's disk space and permissions.".into()),
            Error::LayoutChanged { path, .. } => Some(format!(
                "Restore the previous layout settings and restart. To start a new id space on purpose (ids may repeat those issued under the old layout), remove \"{path}\"."
            )),
            Error::InvalidLayout { .. } => Some(
                "Correct idgen.id_bits, idgen.worker_bits, idgen.sequence_bits or idgen.time_unit_ms in postgresql.conf and start the server again."
                    .into(),
            ),
            Error::TimeExhausted { .. } => Some(
                "Configure a new epoch or a layout with more time bits, with a worker id range that cannot collide with the old ids."
                    .into(),
            ),
            Error::UnknownSegment { name } => Some(format!(
                "Create it with: SELECT segment_create({});",
                quote_literal(name)
            )),
            Error::SegmentInRecovery => {
                Some("Draw segment numbers on the primary.".into())
            }
            Error::AllocatorUnavailable { .. } => Some(
                "Raise max_worker_processes in postgresql.conf (each database that uses segments needs one) and restart the server."
                    .into(),
            ),
            Error::SegmentWaitTimeout { .. } | Error::SerialWaitTimeout { .. } => Some(
                "The idgen allocator worker of this database did not deliver in time: check the server log, and raise idgen.segment_wait_timeout if commits are slow."
                    .into(),
            ),
            Error::ExtensionNotVisible => Some(
                "Commit CREATE EXTENSION idgen first, then call the segment functions (split a migration that does both in one transaction)."
                    .into(),
            ),
            Error::InterleavedStepChange { .. } => Some(
                "Create a new segment with the new step on every server and move to it.".into(),
            ),
            Error::CacheOutOfRange { .. } => Some(
                "Use 1 for no per-backend cache, n for blocks of n numbers, 0 for blocks that adapt to each session's rate."
                    .into(),
            ),
            Error::CacheNeedsUpdate => Some("Run ALTER EXTENSION idgen UPDATE.".into()),
            Error::SegmentCacheFull { .. } => Some(
                "Retry; if it persists, raise idgen.segment_cache_size (a restart) above the number of segments refilled at once.".into(),
            ),
            Error::InterleaveUntilReached { .. } => Some(
                "Finish growing the servers: set the new idgen.segment_node_count, idgen.segment_node_index and idgen.segment_interleave_from, then reload."
                    .into(),
            ),
            Error::InterleaveUntilNotSet { until, .. } => Some(format!(
                "ALTER SYSTEM SET idgen.segment_interleave_until = '{until}'; SELECT pg_reload_conf(); then call this again."
            )),
            Error::InterleavePastUntil { .. } => Some(
                "Pick a fence above the highest high-water mark of every server and set it on each again.".into(),
            ),
            Error::InterleaveChangedWithoutFence { .. } => Some(
                "Restore the settings, or set idgen.segment_interleave_from as README \"Growing from N to M servers\" says, then reload."
                    .into(),
            ),
            Error::RequestQueueFull { .. } => Some("Retry; fewer sessions should create, alter or drop segments at once.".into()),
            Error::Relayed { hint, .. } => hint.clone(),
            _ => None,
        }
    }

    /// Raises this failure as a PostgreSQL `ERROR`; does not return.
    pub(crate) fn report(self) -> ! {
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

/// The report of an ERROR or a panic caught by `PgTryBuilder`, whichever kind it is.
pub(crate) fn caught_report(e: &CaughtError) -> &ErrorReportWithLevel {
    match e {
        CaughtError::PostgresError(r)
        | CaughtError::ErrorReport(r)
        | CaughtError::RustPanic { ereport: r, .. } => r,
    }
}

/// `text` as an SQL string literal, for hints that show a statement to run.
pub(crate) fn quote_literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// `result?`-style helper for SQL functions: the value, or the error raised.
pub(crate) trait OrReport<T> {
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
