//! Every user-facing failure of idgen, and the one place that turns it into a PostgreSQL error:
//! SQLSTATE, lower-case message naming the object, detail and hint.
//!
//! [`Error::to_report`] describes each variant in one arm, as one `ereport(errcode, errmsg,
//! errdetail, errhint)` call of PostgreSQL's C code does; it has no catch-all arm, so a new
//! variant does not compile until its report is written. SQLSTATEs follow PostgreSQL's own
//! choices where it has an equivalent (`currval` before `nextval` is 55000 as in sequence.c; a
//! generator that has run out is 2200H, "sequence generator limit exceeded"). Tests assert the
//! SQLSTATE, never the message text.

use std::fmt;

use pgrx::pg_sys::panic::{CaughtError, ErrorReport, ErrorReportWithLevel};
use pgrx::prelude::*;

/// Declares [`Error`] as written, and, for the tests, `Error::every_variant()`: each variant's
/// name with the variant built from default field values, so that a test can walk them all and
/// a new variant cannot be left out.
macro_rules! declare_error {
    (
        $(#[$attr:meta])*
        $vis:vis enum $name:ident {
            $(
                $(#[$variant_attr:meta])*
                $variant:ident $({ $($field:ident: $ty:ty),* $(,)? })?
            ),* $(,)?
        }
    ) => {
        $(#[$attr])*
        $vis enum $name {
            $(
                $(#[$variant_attr])*
                $variant $({ $($field: $ty),* })?
            ),*
        }

        #[cfg(test)]
        impl $name {
            /// Every variant by name, with default field values.
            fn every_variant() -> Vec<(&'static str, $name)> {
                vec![$(
                    (
                        stringify!($variant),
                        $name::$variant $({ $($field: Default::default()),* })?,
                    )
                ),*]
            }
        }
    };
}

declare_error! {
    /// A user-facing failure. [`Error::report`] raises it as an `ERROR`.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub(crate) enum Error {
        /// `_PG_init` ran outside `shared_preload_libraries` (55000). `line` is the exact setting
        /// to put in `postgresql.conf`.
        NotPreloaded { line: String },
        /// `idgen.worker_id` is still `-1` (55000). `max_worker` is the layout's largest worker id.
        WorkerIdNotSet { max_worker: u64 },
        /// `idgen.registry` is set and the registry has not granted this server a worker id yet
        /// (55000).
        RegistryPending,
        /// The next id would reach the first tick the registry has not confirmed for this server's
        /// lease (55000): renewals failed for a whole lease, or the server is shutting down.
        RegistryFenced {
            worker: u64,
            until_unix_ms: i64,
            reason: String,
        },
        /// A cached range of a global segment or serial counter while the registry's last contact
        /// is a lease old or older (55000): a node cut off from the registry stops at a known time.
        GlobalRangeStale {
            what: String,
            age_ms: i64,
            lease_ms: i64,
        },
        /// The server is in recovery (a standby): it usually carries its primary's worker id
        /// (25006).
        InRecovery,
        /// `snowflake_currval()` before any `snowflake_nextval()` in this session (55000).
        CurrvalNotYetDefined,
        /// A NULL where a value is required (22004).
        NullArgument { argument: &'static str },
        /// A count outside `1..=max` (22023).
        CountOutOfRange { count: i64, max: u64 },
        /// A negative `bigint` given as a Snowflake id (22023).
        NegativeId { id: i64 },
        /// A `bigint` at or above `2^idgen.id_bits` given as a Snowflake id (22023, as a negative
        /// one): this server's layout issues none.
        IdTooWide { id: i64, id_bits: u32 },
        /// A `uuid` given as a Snowflake UUID that is not one of this server's layout (22023):
        /// not version 7 with RFC 9562's variant, or its time not a tick's start.
        NotASnowflakeUuid { uuid: String, why: String },
        /// A worker id that does not fit the layout (22003).
        WorkerOutOfRange { worker: i64, max: u64 },
        /// A sequence that does not fit the layout (22003).
        SequenceOutOfRange { sequence: i64, max: u64 },
        /// A timestamp outside the layout's time range: before the epoch, past its end, or
        /// infinite (22008).
        TimestampOutOfRange { detail: String },
        /// A serial number format or reset that is refused (22023), naming the token.
        InvalidSerialFormat { why: String },
        /// A serial's counter outgrew the padding of its `{seq:0N}` token in this period (22003).
        SerialExhausted { name: String, max: i64 },
        /// A format with `{worker}` on a server without a fitting worker id (55000).
        SerialWorker { detail: String },
        /// No serial of that name, or none this transaction can see (42704).
        UnknownSerial { name: String },
        /// `serial_create` of a name that exists (42710).
        SerialExists { name: String },
        /// `serial_create` of a dropped serial's name with a format, reset or scope that could
        /// print the dropped serial's texts again (42710): the name keeps what it printed.
        SerialNameDropped { name: String, what: &'static str },
        /// `serial_forget` of a name no dropped serial has (42704).
        UnknownDroppedSerial { name: String },
        /// `serial_alter` to a format that could print a text the serial printed (22023).
        SerialFormatChange { why: String },
        /// A gapless `serial_nextval` on a standby (25006): its counter row cannot be written.
        SerialInRecovery,
        /// A draw from a serial the role has no USAGE on (42501), as sequences' "permission
        /// denied".
        SerialPermissionDenied { name: String },
        /// A serial time zone that is not an IANA zone name (22023).
        InvalidSerialTimeZone { zone: String },
        /// Another refused argument of a serial function (22023).
        InvalidSerialArgument { why: String },
        /// A local serial showing `{worker}` on a server whose worker id comes from the registry
        /// (55000): the id can move to another server within a period, whose counter would repeat.
        SerialWorkerMoves,
        /// A text that is not the text form of a Snowflake id (`snowflake_parse`, 22P02).
        InvalidSnowflakeText { why: String },
        /// The wall clock reads before `idgen.epoch` (22008).
        ClockBeforeEpoch { ms: i64 },
        /// A setting in `postgresql.conf` that did not take effect; raised at server start (22023).
        InvalidSetting {
            name: String,
            value: String,
            detail: String,
        },
        /// The configured layout is unusable (22023); raised at server start.
        InvalidLayout { detail: String },
        /// The next id would be stamped further ahead of the wall clock than `idgen.max_drift_ms`,
        /// and the clock would not catch up within `idgen.max_wait_ms` (53400, "configuration limit
        /// exceeded": the limit is the drift bound, which the hint names).
        ClockBehind {
            behind_ms: i64,
            max_drift_ms: u64,
            max_wait_ms: u64,
        },
        /// The reservation file does not parse or its checksum does not match (XX001): generation
        /// stops rather than guessing where the last run ended.
        ReservationCorrupt { path: String, reason: String },
        /// The reservation file could not be read or written (58030).
        ReservationIo { message: String },
        /// The reservation file was written under another layout (55000): ids of the two layouts
        /// could collide.
        LayoutChanged {
            path: String,
            stored: String,
            configured: String,
        },
        /// The time field would overflow: the layout has run out (2200H). Never wrapped.
        TimeExhausted { detail: String },
        /// An empty segment name (42602).
        SegmentNameEmpty,
        /// A segment name longer than 63 bytes (42622). `name` is the name's first 63 bytes at
        /// most: the message never repeats a long argument in full.
        SegmentNameTooLong {
            name: String,
            bytes: usize,
            max: usize,
        },
        /// A segment that does not exist in this database (42704); the hint shows how to create it.
        UnknownSegment { name: String },
        /// `segment_create` of a name that exists (42710).
        SegmentExists { name: String },
        /// A step outside `1..=MAX_STEP` (22023).
        StepOutOfRange { step: i64, max: i32 },
        /// A segment cache outside `0..=max` (22023): 0 adaptive, 1 none, n a block of n.
        CacheOutOfRange { cache: i64, max: i32 },
        /// A per-backend cache asked of a database whose idgen SQL predates 0.7.0 (55000).
        CacheNeedsUpdate,
        /// A `segment_create` start without a predecessor: `-9223372036854775808` (22003).
        StartOutOfRange { start: i64 },
        /// `segment_alter(step => ...)` while several servers share segment names (55000): the step
        /// is the size of the blocks they take in turn.
        InterleavedStepChange { name: String, count: u32 },
        /// A refill reached `idgen.segment_interleave_until` (55000): this server's part of the old
        /// interleave is used up until it switches to the new one (docs: Running on many servers,
        /// growing from N to M servers).
        InterleaveUntilReached { name: String, until: i64 },
        /// `segment_interleave_ready(until)` while the allocator runs with another (or no)
        /// `idgen.segment_interleave_until` (55000).
        InterleaveUntilNotSet { until: i64, in_force: Option<i64> },
        /// `segment_interleave_ready(until)` finds a high-water mark above `until` (55000): numbers
        /// above the fence were reserved under the old interleave.
        InterleavePastUntil {
            name: String,
            max_id: i64,
            until: i64,
        },
        /// `idgen.segment_node_count`/`segment_node_index` changed by a reload without
        /// `idgen.segment_interleave_from` (55000).
        InterleaveChangedWithoutFence {
            started: (i32, i32),
            now: (i32, i32),
        },
        /// The allocator, working in its own transactions, does not see idgen in this database
        /// (55000): the caller's `CREATE EXTENSION idgen` is not committed yet.
        ExtensionNotVisible,
        /// A description longer than allowed (22001).
        DescriptionTooLong { bytes: usize, max: usize },
        /// `segment_setval` below a number that may have been handed out (22003), as sequence.c's
        /// "value is out of bounds": segments only move forward.
        SetvalBackwards {
            name: String,
            value: i64,
            floor: i64,
        },
        /// The high-water mark is `i64::MAX` (2200H), as sequence.c's "reached maximum value".
        SegmentExhausted { name: String },
        /// `segment_currval` before any `segment_nextval` of that name in this session (55000).
        SegmentCurrvalNotYetDefined { name: String },
        /// A generator in a read-only transaction (25006), as `nextval()`: a server fenced
        /// read-only (pg_auto_failover's demotion) must not hand out ids.
        ReadOnlyTransaction { function: &'static str },
        /// Segment functions on a standby (25006): the allocator cannot write there.
        SegmentInRecovery,
        /// The allocator background worker could not be registered (53400).
        AllocatorUnavailable { max_worker_processes: i32 },
        /// No range arrived within `idgen.segment_wait_timeout` (55P03).
        SegmentWaitTimeout { name: String, ms: i32 },
        /// A fast serial's counter got no range within `idgen.segment_wait_timeout` (55P03).
        SerialWaitTimeout { name: String, ms: i32 },
        /// Every slot of the shared cache is busy (refilling, or frozen by an admin call), so none
        /// can be evicted for another segment (54000). Not a limit on segment names.
        SegmentCacheFull { max: usize },
        /// Too many segment requests waiting for the allocator at once (53400).
        RequestQueueFull { max: usize },
        /// `segment_create` or `serial_create` with `scope => 'global'` without `idgen.registry`
        /// (55000). `what`: `segment` or `serial`.
        GlobalWithoutRegistry { what: &'static str },
        /// A scope other than `local` or `global` (22023).
        InvalidScope { scope: String },
        /// `segment_alter`/`segment_setval` of a global segment on a node (0A000): its mark and
        /// step are the registry's.
        GlobalSegmentChange { name: String, what: &'static str },
        /// A failure a background worker reported (the segment allocator for this caller's request,
        /// the registry client for this server's worker id), re-raised as it was; or one a leaf
        /// module describes next to its own code, SQLSTATE, detail and hint in one arm (`sqids`).
        Relayed {
            sqlstate: i32,
            message: String,
            detail: Option<String>,
            hint: Option<String>,
        },
    }
}

/// What PostgreSQL is told of one failure: the fields of its `ereport`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Report {
    pub(crate) sqlstate: PgSqlErrorCode,
    pub(crate) message: String,
    pub(crate) detail: Option<String>,
    pub(crate) hint: Option<String>,
}

impl Report {
    fn new(sqlstate: PgSqlErrorCode, message: impl Into<String>) -> Self {
        Self {
            sqlstate,
            message: message.into(),
            detail: None,
            hint: None,
        }
    }

    /// The DETAIL line: there is more to say than the message.
    fn detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }

    /// The HINT line: the fix is known.
    fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
}

/// The hint of both waits for the allocator, a segment's range and a fast serial's.
const ALLOCATOR_LATE_HINT: &str = "The idgen allocator worker of this database did not deliver in time: check the server log, and raise idgen.segment_wait_timeout if commits are slow.";

impl Error {
    /// The SQLSTATE, message, detail and hint of this failure: one arm per variant.
    pub(crate) fn to_report(&self) -> Report {
        use PgSqlErrorCode::*;
        match self {
            Error::NotPreloaded { line } => Report::new(
                ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                "idgen must be loaded via shared_preload_libraries",
            )
            .hint(format!("Add {line} to postgresql.conf and restart the server.")),
            Error::WorkerIdNotSet { max_worker } => Report::new(
                ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                "idgen.worker_id is not set",
            )
            .hint(format!(
                "Set idgen.worker_id in postgresql.conf to a number from 0 to {max_worker} that no other server uses, or to auto with idgen.registry, then restart the server."
            )),
            Error::RegistryPending => Report::new(
                ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                "this server has no worker id from the registry yet",
            )
            .hint("The registry client claims a worker id as soon as the registry (idgen.registry) answers; see SELECT * FROM idgen_registry_status."),
            Error::RegistryFenced { worker, until_unix_ms, reason } => Report::new(
                ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                format!("snowflake ids of worker id {worker} reached the end of its lease in the registry"),
            )
            .detail(format!(
                "The registry confirmed ids of this server up to Unix time {until_unix_ms} ms; no id past it is issued, so whoever holds the worker id next cannot repeat one. {reason}"
            ))
            .hint("Check the registry (idgen.registry) and SELECT * FROM idgen_registry_status; ids resume by themselves once the registry renews the lease."),
            Error::GlobalRangeStale { what, age_ms, lease_ms } => Report::new(
                ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                format!("{what} is not served: the registry's last contact is older than the lease"),
            )
            .detail(if *age_ms < 0 {
                format!("The registry has not answered this server as an open registry since it started; a cached global range is served only within {lease_ms} ms of the last answer, so that the registry can hand its numbers out again after a recovery that skipped this server.")
            } else {
                format!("The registry last answered a call this server sent {age_ms} ms ago; a cached global range is served only within {lease_ms} ms (idgen.registry_lease, at most the registry's idgen.registry_max_lease) of it, so that the registry can hand its numbers out again after a recovery that skipped this server.")
            })
            .hint("Check the registry (idgen.registry) and SELECT * FROM idgen_registry_client_status(); numbers resume by themselves once the registry answers, or once it has this server's report in an open recovery."),
            Error::InRecovery => Report::new(
                ERRCODE_READ_ONLY_SQL_TRANSACTION,
                "cannot generate snowflake ids during recovery",
            )
            .detail("A standby usually carries its primary's idgen.worker_id; ids drawn here could repeat the primary's.")
            .hint("Draw ids on the primary; after promotion this server can draw them."),
            Error::CurrvalNotYetDefined => Report::new(
                ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                "snowflake_currval is not yet defined in this session",
            ),
            Error::NullArgument { argument } => Report::new(
                ERRCODE_NULL_VALUE_NOT_ALLOWED,
                format!("{argument} must not be null"),
            ),
            Error::CountOutOfRange { count, max } => Report::new(
                ERRCODE_INVALID_PARAMETER_VALUE,
                format!("count must be between 1 and {max}, not {count}"),
            )
            .hint("Draw larger batches with several calls."),
            Error::NegativeId { id } => Report::new(
                ERRCODE_INVALID_PARAMETER_VALUE,
                format!("snowflake id {id} is negative"),
            )
            .hint("Snowflake ids are positive bigints."),
            Error::IdTooWide { id, id_bits } => Report::new(
                ERRCODE_INVALID_PARAMETER_VALUE,
                format!("snowflake id {id} is not below 2^{id_bits}"),
            )
            .detail(format!(
                "idgen.id_bits = {id_bits}: this server's snowflake ids are at most {}.",
                (1u64 << id_bits) - 1
            )),
            Error::NotASnowflakeUuid { uuid, why } => Report::new(
                ERRCODE_INVALID_PARAMETER_VALUE,
                format!("uuid {uuid} is not a snowflake uuid of this server's layout"),
            )
            .detail(why)
            .hint("Snowflake uuids come from snowflake_uuid() or snowflake_uuid_from_id() under the same idgen.epoch and idgen.time_unit_ms."),
            Error::WorkerOutOfRange { worker, max } => Report::new(
                ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
                format!("worker_id {worker} is out of range"),
            )
            .detail(format!("The layout allows worker ids 0 to {max}.")),
            Error::SequenceOutOfRange { sequence, max } => Report::new(
                ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
                format!("sequence {sequence} is out of range"),
            )
            .detail(format!("The layout allows sequences 0 to {max}.")),
            Error::TimestampOutOfRange { detail } => Report::new(
                ERRCODE_DATETIME_FIELD_OVERFLOW,
                "timestamp is out of range for the snowflake layout",
            )
            .detail(detail),
            Error::InvalidSerialFormat { why } => Report::new(
                ERRCODE_INVALID_PARAMETER_VALUE,
                format!("invalid serial format: {why}"),
            ),
            Error::SerialExhausted { name, max } => Report::new(
                ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
                format!("serial \"{name}\" has used all {max} numbers its format shows in this period"),
            )
            .hint("Widen the counter of the format (serial_alter(name, format => ...) with a wider {seq:0N}), or wait for the next period."),
            Error::SerialWorker { detail } => Report::new(
                ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                "serial format shows {worker}, and this server's worker id cannot fill it",
            )
            .detail(detail),
            Error::UnknownSerial { name } => Report::new(
                ERRCODE_UNDEFINED_OBJECT,
                format!("serial \"{name}\" does not exist"),
            )
            .hint("Create it with serial_create(name, format, reset => ...)."),
            Error::SerialExists { name } => Report::new(
                ERRCODE_DUPLICATE_OBJECT,
                format!("serial \"{name}\" already exists"),
            ),
            Error::SerialNameDropped { name, what } => Report::new(
                ERRCODE_DUPLICATE_OBJECT,
                format!("serial \"{name}\" was dropped, and a serial of this {what} under its name could print its texts again"),
            )
            .hint(format!(
                "Create it with the dropped serial's format (its {{seq}} may be wider), reset and scope to go on counting, or use another name; SELECT serial_forget({}) forgets what the dropped serial printed, after which a serial under the name may print those texts again.",
                quote_literal(name)
            )),
            Error::UnknownDroppedSerial { name } => Report::new(
                ERRCODE_UNDEFINED_OBJECT,
                format!("no dropped serial \"{name}\""),
            ),
            Error::SerialFormatChange { why } => Report::new(
                ERRCODE_INVALID_PARAMETER_VALUE,
                why,
            )
            .hint("Only the width of {seq} can change (a wider {seq:0N} for more numbers a period); a serial with another format is a new serial (serial_create under a new name)."),
            Error::SerialInRecovery => Report::new(
                ERRCODE_READ_ONLY_SQL_TRANSACTION,
                "cannot draw from a gapless serial during recovery",
            )
            .hint("Draw serial numbers on the primary."),
            Error::SerialPermissionDenied { name } => Report::new(
                ERRCODE_INSUFFICIENT_PRIVILEGE,
                format!("permission denied for serial \"{name}\""),
            )
            .hint(format!(
                "An idgen_admin member grants it: SELECT serial_grant({}, 'role');",
                quote_literal(name)
            )),
            Error::InvalidSerialTimeZone { zone } => Report::new(
                ERRCODE_INVALID_PARAMETER_VALUE,
                format!("time zone \"{zone}\" is not an IANA time zone name"),
            )
            .hint("Use a name listed in pg_timezone_names, such as 'Europe/Paris' or 'UTC': an abbreviation or a POSIX offset (sign inverted) is read differently by each session's settings."),
            Error::InvalidSerialArgument { why } => Report::new(
                ERRCODE_INVALID_PARAMETER_VALUE,
                why,
            ),
            Error::SerialWorkerMoves => Report::new(
                ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                "a local serial cannot show {worker} on a server whose worker id comes from the registry",
            )
            .hint("Use scope => 'global' (counters from the registry, unique on every server), or a format without {worker}."),
            Error::InvalidSnowflakeText { why } => Report::new(
                ERRCODE_INVALID_TEXT_REPRESENTATION,
                format!("invalid text form of a snowflake id: {why}"),
            ),
            Error::ClockBeforeEpoch { ms } => Report::new(
                ERRCODE_DATETIME_FIELD_OVERFLOW,
                format!("the system clock is {ms} ms before idgen.epoch"),
            )
            .hint("Check the system clock; idgen.epoch must be in the past."),
            Error::InvalidSetting { name, value, detail } => Report::new(
                ERRCODE_INVALID_PARAMETER_VALUE,
                format!("invalid value for parameter \"{name}\": \"{value}\""),
            )
            .detail(detail)
            .hint(format!(
                "Correct {name} in postgresql.conf (or postgresql.auto.conf) and start the server again."
            )),
            Error::InvalidLayout { detail } => Report::new(
                ERRCODE_INVALID_PARAMETER_VALUE,
                "invalid snowflake layout",
            )
            .detail(detail)
            .hint("Correct idgen.id_bits, idgen.worker_bits, idgen.sequence_bits or idgen.time_unit_ms in postgresql.conf and start the server again."),
            Error::ClockBehind { behind_ms, max_drift_ms, max_wait_ms } => Report::new(
                ERRCODE_CONFIGURATION_LIMIT_EXCEEDED,
                format!("the system clock is {behind_ms} ms behind the snowflake generator"),
            )
            .detail(format!(
                "idgen.max_drift_ms allows ids {max_drift_ms} ms ahead of the clock, and the clock would not catch up within idgen.max_wait_ms ({max_wait_ms} ms). No id was issued."
            ))
            .hint("Wait for the clock to catch up (check NTP), or let ids run ahead of it: ALTER SYSTEM SET idgen.max_drift_ms = <ms, or -1 for unbounded>; SELECT pg_reload_conf();"),
            Error::ReservationCorrupt { path, reason } => Report::new(
                ERRCODE_DATA_CORRUPTED,
                format!("snowflake reservation file \"{path}\" is corrupt"),
            )
            .detail(format!(
                "{reason}. The file records the first tick no id of this server has reached; without it a restart could repeat ids."
            ))
            .hint(format!(
                "Restore \"{path}\" from a backup, or remove it once the system clock is past the time of every id this server issued (SELECT snowflake_timestamp(max(id)) over your tables); then call again."
            )),
            Error::ReservationIo { message } => Report::new(
                ERRCODE_IO_ERROR,
                message,
            )
            .hint("Check the data directory's disk space and permissions."),
            Error::LayoutChanged { path, stored, configured } => Report::new(
                ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                "the snowflake layout changed since this server last issued ids",
            )
            .detail(format!("\"{path}\" was written with {stored}; the server now has {configured}."))
            .hint(format!(
                "Restore the previous layout settings and restart. To start a new id space on purpose (ids may repeat those issued under the old layout), remove \"{path}\"."
            )),
            Error::TimeExhausted { detail } => Report::new(
                ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED,
                "snowflake generator has reached the end of its time range",
            )
            .detail(detail)
            .hint("Configure a new epoch or a layout with more time bits, with a worker id range that cannot collide with the old ids."),
            Error::SegmentNameEmpty => Report::new(
                ERRCODE_INVALID_NAME,
                "segment name must not be empty",
            ),
            Error::SegmentNameTooLong { name, bytes, max } => Report::new(
                ERRCODE_NAME_TOO_LONG,
                format!("segment name \"{name}…\" is too long"),
            )
            .detail(format!("Segment names are at most {max} bytes; this one has {bytes}.")),
            Error::UnknownSegment { name } => Report::new(
                ERRCODE_UNDEFINED_OBJECT,
                format!("segment \"{name}\" does not exist"),
            )
            .hint(format!("Create it with: SELECT segment_create({});", quote_literal(name))),
            Error::SegmentExists { name } => Report::new(
                ERRCODE_DUPLICATE_OBJECT,
                format!("segment \"{name}\" already exists"),
            ),
            Error::StepOutOfRange { step, max } => Report::new(
                ERRCODE_INVALID_PARAMETER_VALUE,
                format!("step must be between 1 and {max}, not {step}"),
            ),
            Error::CacheOutOfRange { cache, max } => Report::new(
                ERRCODE_INVALID_PARAMETER_VALUE,
                format!("cache must be between 0 and {max}, not {cache}"),
            )
            .hint("Use 1 for no per-backend cache, n for blocks of n numbers, 0 for blocks that adapt to each session's rate."),
            Error::CacheNeedsUpdate => Report::new(
                ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                "segment caches need idgen 0.7.0 in this database",
            )
            .hint("Run ALTER EXTENSION idgen UPDATE."),
            Error::StartOutOfRange { start } => Report::new(
                ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
                format!("start {start} is out of range"),
            ),
            Error::InterleavedStepChange { name, count } => Report::new(
                ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                format!("cannot change the step of segment \"{name}\" while idgen.segment_node_count is {count}"),
            )
            .detail("Servers sharing a segment name take blocks of step numbers in turn; a different step on one server would make its blocks overlap the others'.")
            .hint("Create a new segment with the new step on every server and move to it."),
            Error::InterleaveUntilReached { name, until } => Report::new(
                ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                format!("segment \"{name}\" reached idgen.segment_interleave_until ({until})"),
            )
            .detail("Numbers above the fence belong to the new interleave, which this server has not switched to yet.")
            .hint("Finish growing the servers: set the new idgen.segment_node_count, idgen.segment_node_index and idgen.segment_interleave_from, then reload."),
            Error::InterleaveUntilNotSet { until, in_force } => Report::new(
                ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                format!("idgen.segment_interleave_until is not {until} on this server"),
            )
            .detail(match in_force {
                Some(f) => format!("This database's allocator runs with idgen.segment_interleave_until = {f}."),
                None => "This database's allocator runs without idgen.segment_interleave_until.".into(),
            })
            .hint(format!(
                "ALTER SYSTEM SET idgen.segment_interleave_until = '{until}'; SELECT pg_reload_conf(); then call this again."
            )),
            Error::InterleavePastUntil { name, max_id, until } => Report::new(
                ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                format!("segment \"{name}\" is already past {until} (its high-water mark is {max_id})"),
            )
            .detail("A refill took numbers above the fence before the setting was in force.")
            .hint("Pick a fence above the highest high-water mark of every server and set it on each again."),
            Error::InterleaveChangedWithoutFence { started, now } => Report::new(
                ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                "idgen.segment_node_count and idgen.segment_node_index changed since the server started, without idgen.segment_interleave_from",
            )
            .detail(format!(
                "The server started as node {} of {}, and is now node {} of {}; the new interleave would hand out numbers the old one has.",
                started.1, started.0, now.1, now.0
            ))
            .hint("Restore the settings, or set idgen.segment_interleave_from as the docs say (Running on many servers, \"Segments on several servers\"), then reload."),
            Error::ExtensionNotVisible => Report::new(
                ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                "the idgen allocator cannot see the idgen extension in this database",
            )
            .detail("Segments are created and advanced by the allocator in transactions of its own, which cannot see a CREATE EXTENSION idgen that is not committed yet.")
            .hint("Commit CREATE EXTENSION idgen first, then call the segment functions (split a migration that does both in one transaction)."),
            Error::DescriptionTooLong { bytes, max } => Report::new(
                ERRCODE_STRING_DATA_RIGHT_TRUNCATION,
                "segment description is too long",
            )
            .detail(format!("Descriptions are at most {max} bytes; this one has {bytes}.")),
            Error::SetvalBackwards { name, value, floor } => Report::new(
                ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE,
                format!("segment_setval: value {value} is below segment \"{name}\"'s numbers already handed out"),
            )
            .detail(format!("Numbers up to {floor} may have been handed out; segments only move forward.")),
            Error::SegmentExhausted { name } => Report::new(
                ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED,
                format!("segment_nextval: reached maximum value of segment \"{name}\" ({})", i64::MAX),
            ),
            Error::SegmentCurrvalNotYetDefined { name } => Report::new(
                ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                format!("segment_currval of segment \"{name}\" is not yet defined in this session"),
            ),
            Error::ReadOnlyTransaction { function } => Report::new(
                ERRCODE_READ_ONLY_SQL_TRANSACTION,
                format!("cannot execute {function} in a read-only transaction"),
            )
            .hint("Draw ids in a read-write transaction on the writable primary; a server kept read-only (default_transaction_read_only, an HA manager's fence) must not issue them."),
            Error::SegmentInRecovery => Report::new(
                ERRCODE_READ_ONLY_SQL_TRANSACTION,
                "cannot use segments during recovery",
            )
            .detail("A standby cannot advance the high-water marks in idgen_segment; numbers drawn here could repeat the primary's.")
            .hint("Draw segment numbers on the primary."),
            Error::AllocatorUnavailable { max_worker_processes } => Report::new(
                ERRCODE_CONFIGURATION_LIMIT_EXCEEDED,
                "could not start the idgen allocator worker for this database",
            )
            .detail(format!(
                "All {max_worker_processes} background worker slots (max_worker_processes) are in use."
            ))
            .hint("Raise max_worker_processes in postgresql.conf (each database that uses segments needs one) and restart the server."),
            Error::SegmentWaitTimeout { name, ms } => Report::new(
                ERRCODE_LOCK_NOT_AVAILABLE,
                format!("timed out after {ms} ms waiting for a range of segment \"{name}\""),
            )
            .hint(ALLOCATOR_LATE_HINT),
            Error::SerialWaitTimeout { name, ms } => Report::new(
                ERRCODE_LOCK_NOT_AVAILABLE,
                format!("timed out after {ms} ms waiting for a range of serial \"{name}\""),
            )
            .hint(ALLOCATOR_LATE_HINT),
            Error::SegmentCacheFull { max } => Report::new(
                ERRCODE_PROGRAM_LIMIT_EXCEEDED,
                "no entry of the segment cache can be freed for another segment now",
            )
            .detail(format!(
                "All {max} entries of the shared segment cache are being refilled or changed by admin calls at this moment."
            ))
            .hint("Retry; if it persists, raise idgen.segment_cache_size (a restart) above the number of segments refilled at once."),
            Error::RequestQueueFull { .. } => Report::new(
                ERRCODE_CONFIGURATION_LIMIT_EXCEEDED,
                "too many segment requests waiting for the allocator",
            )
            .hint("Retry; fewer sessions should create, alter or drop segments at once."),
            Error::GlobalWithoutRegistry { what } => Report::new(
                ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
                format!("global {what}s need idgen.registry"),
            )
            .hint(format!("Set idgen.registry to the registry's connection string (docs: Running on many servers), or create a local {what}.")),
            Error::InvalidScope { scope } => Report::new(
                ERRCODE_INVALID_PARAMETER_VALUE,
                format!("scope must be local or global, not \"{scope}\""),
            ),
            Error::GlobalSegmentChange { name, what } => Report::new(
                ERRCODE_FEATURE_NOT_SUPPORTED,
                format!("segment \"{name}\" is global: {what} it in the registry"),
            )
            .hint("Global segments are changed on the registry (UPDATE idgen_registry_segment); a node only draws from them."),
            Error::Relayed { sqlstate, message, detail, hint } => Report {
                sqlstate: PgSqlErrorCode::from(*sqlstate),
                message: message.clone(),
                detail: detail.clone(),
                hint: hint.clone(),
            },
        }
    }

    /// The SQLSTATE of this failure.
    pub(crate) fn sqlstate(&self) -> PgSqlErrorCode {
        self.to_report().sqlstate
    }

    /// The DETAIL line, where there is more to say than the message.
    pub(crate) fn detail(&self) -> Option<String> {
        self.to_report().detail
    }

    /// The HINT line, where the fix is known.
    pub(crate) fn hint(&self) -> Option<String> {
        self.to_report().hint
    }

    /// Raises this failure as a PostgreSQL `ERROR`; does not return.
    pub(crate) fn report(self) -> ! {
        let Report {
            sqlstate,
            message,
            detail,
            hint,
        } = self.to_report();
        let mut report = ErrorReport::new(sqlstate, message, "idgen");
        if let Some(detail) = detail {
            report = report.set_detail(detail);
        }
        if let Some(hint) = hint {
            report = report.set_hint(hint);
        }
        report.report(PgLogLevel::ERROR);
        unreachable!("ereport(ERROR) returned")
    }
}

/// The message, as PostgreSQL's `errmsg`.
impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_report().message)
    }
}

impl std::error::Error for Error {}

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

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::Error;
    use crate::failure::Failure;

    /// The page, relative to the repository root, whose error table (the one headed
    /// `| SQLSTATE |`) lists every SQLSTATE idgen raises.
    const ERRORS_DOC: &str = "docs/reference/errors.md";

    /// Every variant with its SQLSTATE, as [`Error::to_report`] gives it.
    fn sqlstates() -> Vec<(&'static str, String)> {
        Error::every_variant()
            .into_iter()
            .map(|(variant, e)| (variant, Failure::from_error(&e).sqlstate_text()))
            .collect()
    }

    /// The SQLSTATEs of the first column of `doc`'s error table ("57014 / 57P01" is two).
    fn documented(doc: &str) -> BTreeSet<String> {
        doc.lines()
            .skip_while(|line| !line.starts_with("| SQLSTATE |"))
            .skip(2)
            .take_while(|line| line.starts_with('|'))
            .filter_map(|line| line.split('|').nth(1))
            .flat_map(|cell| cell.split('/'))
            .map(|code| code.trim().to_owned())
            .collect()
    }

    #[test]
    fn every_error_has_a_specific_documented_sqlstate() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(ERRORS_DOC);
        let doc = std::fs::read_to_string(&path).unwrap();
        let table = documented(&doc);
        assert!(!table.is_empty(), "no `| SQLSTATE |` table in {ERRORS_DOC}");
        let mut undocumented = Vec::new();
        for (variant, code) in sqlstates() {
            println!("{variant}: {code}");
            if variant == "Relayed" {
                // Carries the SQLSTATE of the failure it relays.
                continue;
            }
            assert!(
                code != "XX000" && !["00", "01", "02"].contains(&&code[..2]),
                "{variant} has SQLSTATE {code}: an internal error, or no error at all",
            );
            if !table.contains(&code) {
                undocumented.push(format!("{variant} ({code})"));
            }
        }
        assert!(
            undocumented.is_empty(),
            "SQLSTATEs missing from the error table of {ERRORS_DOC}: {undocumented:?}",
        );
    }
}
