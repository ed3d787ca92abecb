//! Business serial numbers (README "Serial numbers"), such as `INV-20261125-000123`: a format
//! ([`format`], in `idgen_core::serial`), a counter that restarts every day, month or year in
//! the serial's IANA time zone ([`zone`]), and one of three counters per period:
//!
//! * fast (local): a high-water mark in `idgen_serial_counter`, moved up by the segment
//!   allocator in transactions of its own, its ranges cached in shared memory ([`shared`]) as a
//!   segment's: a draw is one `fetch_add`; gaps on rollback and restart, never a repeat;
//! * fast (global, `scope => 'global'`): the same, with the mark in the registry ([`global`]),
//!   so that every server drawing the serial hands out different numbers;
//! * gapless: the period's row of `idgen_serial_counter`, incremented in the caller's
//!   transaction under the serial's lock (callers queue; a rollback leaves no gap).
//!
//! A serial is identified by its id, never by its name: its counters are rows keyed by the id,
//! which is never reused. Definitions and counters are read and written with the rights of the
//! tables' owner after the caller's rights were checked ([`catalog`]; changes in [`admin`]):
//! there is no `SECURITY
//! DEFINER` function, and drawing needs USAGE granted per serial (`serial_grant`). Each backend
//! caches the definitions it uses ([`cache`]).

mod admin;
mod cache;
mod catalog;
mod global;
mod shared;
mod zone;

use pgrx::datetime::Timestamp;
use pgrx::pg_sys;
use pgrx::prelude::*;

use catalog::Arg;
use idgen_core::serial::format;

use crate::error::{Error, OrReport};
use format::{Format, LocalTime, RenderError, Reset};

/// The parsed format, or 22023 naming the offending token.
fn parse(format: &str) -> Result<Format, Error> {
    Format::parse(format).map_err(|e| Error::InvalidSerialFormat { why: e.to_string() })
}

/// Drops every cached range of a global serial's counter (`shared::void_global`).
pub(crate) fn void_global_ranges() -> usize {
    shared::void_global()
}

/// The marks of this database's global serials' counters in its catalog, by their marks file
/// names (`global::marks_in_catalog`).
pub(crate) fn global_marks_in_catalog() -> Result<Vec<(String, i64)>, Error> {
    global::marks_in_catalog()
}

/// Checks `format` for a counter reset every `reset` ('day', 'month', 'year', 'never'), for
/// `crate::upgrade::idgen_serial_check`. Errors: 22023 an invalid format (naming the token), a
/// format that does not show the period its counter restarts in, or an unknown reset.
pub(crate) fn check_format(format: &str, reset: &str) -> Result<(), Error> {
    let f = parse(format)?;
    let reset = Reset::parse(reset).ok_or_else(|| Error::InvalidSerialFormat {
        why: format!(
            "reset must be 'day', 'month', 'year' or 'never', not '{}'",
            reset.chars().take(20).collect::<String>()
        ),
    })?;
    f.check_reset(reset)
        .map_err(|e| Error::InvalidSerialFormat { why: e.to_string() })
}

/// The text of counter value `seq` of serial `name` drawn at local time `at` (in the serial's
/// time zone), for `crate::upgrade::idgen_serial_render`. `{worker}` is this server's Snowflake
/// worker id. Errors: 22003 the counter outgrew its padding; 55000 a `{worker}` without a
/// worker id, or one wider than its padding; 22008 a year `{YYYY}` cannot show.
pub(crate) fn render_at(
    name: &str,
    format: &str,
    at: Timestamp,
    seq: i64,
) -> Result<String, Error> {
    let f = parse(format)?;
    let worker = if f.uses_worker() {
        Some(crate::snowflake::worker_id()? as u32)
    } else {
        None
    };
    let (hour, minute, second, micro) = at.to_hms_micro();
    let t = LocalTime {
        year: at.year(),
        month: at.month(),
        day: at.day(),
        hour,
        minute,
        second,
        // to_hms_micro's microseconds count from the minute, not the second.
        milli: ((micro / 1000) % 1000) as u16,
    };
    f.render(&t, seq, worker).map_err(|e| render_error(name, e))
}

/// Sets up serials. Called once from `_PG_init`, in the postmaster: the counters' shared
/// memory, and the allocator job that moves a counter's mark (every process inherits both).
pub(crate) fn init() {
    crate::shmem::register(shared::PART);
    crate::segment::register_job(global::take_in_allocator);
}

fn required<'a>(value: Option<&'a str>, argument: &'static str) -> Result<&'a str, Error> {
    value.ok_or(Error::NullArgument { argument })
}

/// Whether this server's worker id comes from a registry: it can then move to another server
/// within a period.
fn worker_id_can_move() -> bool {
    crate::guc::registry_conninfo().is_some()
}

/// The next number of serial `name`, as text, in the period of the draw's local time
/// (`clock_timestamp()` in the serial's time zone: a draw at 23:59:59.999 belongs to that day,
/// one at 00:00:00.000 to the next). Needs USAGE on the serial (`serial_grant`).
///
/// Errors: 22004 NULL; 42704 no such serial; 42501 no USAGE on it (nothing is advanced or
/// locked); 22003 the counter outgrew its `{seq:0N}` in this period (never a truncated or
/// repeated number); 55000 `{worker}` without a worker id, or of a local serial on a server
/// whose worker id comes from the registry; 25006 a fast serial in a read-only transaction or
/// on a standby (a gapless one: 25006 too, on a standby from idgen, in a read-only
/// transaction PostgreSQL's own); 55P03 no range within
/// `idgen.segment_wait_timeout`; a global serial's registry errors (08006, 55P03, 55000).
#[pg_extern(volatile, parallel_unsafe, sql = false)]
fn serial_nextval(name: Option<&str>) -> String {
    let name = required(name, "name").or_report();
    cache::with_def(name, draw).or_report()
}

fn draw(def: &mut cache::Def, place: &catalog::Place) -> Result<String, Error> {
    if !def.may_use {
        return Err(Error::SerialPermissionDenied {
            name: def.name.clone(),
        });
    }
    let worker = if def.format.uses_worker() {
        if !def.global && worker_id_can_move() {
            return Err(Error::SerialWorkerMoves);
        }
        Some(crate::snowflake::worker_id()? as u32)
    } else {
        None
    };
    if def.gapless {
        // Checked here, not left to the counter's lock: PostgreSQL refuses that lock during
        // recovery with 55000, and clients route on 25006 ("go to the primary").
        if crate::recovery::in_progress() {
            return Err(Error::SerialInRecovery);
        }
    } else {
        if crate::recovery::in_progress() {
            return Err(Error::InRecovery);
        }
        if crate::recovery::read_only_transaction() {
            return Err(Error::ReadOnlyTransaction {
                function: "serial_nextval()",
            });
        }
    }
    // SAFETY: reads the clock (clock_timestamp()).
    let now = unsafe { pg_sys::GetCurrentTimestamp() };
    let local = def.zone.local(now)?;
    let period = zone::period_key(def.reset, &local);
    let seq = if def.gapless {
        let period_text = zone::period_text(def.reset, period);
        catalog::lock_serial(place, def.id);
        let rows = catalog::run(
            place,
            "INSERT INTO $S.idgen_serial_counter AS c (serial, period, value)
             SELECT s.id, $2, 1 FROM $S.idgen_serial s WHERE s.id = $1
             ON CONFLICT (serial, period) DO UPDATE SET value = c.value + 1
             RETURNING c.value",
            &[Arg::Int8(def.id), Arg::Text(Some(&period_text))],
            0,
        );
        rows.first()
            .and_then(|r| r.int8(0))
            .ok_or_else(|| Error::UnknownSerial {
                name: def.name.clone(),
            })?
    } else {
        let key = shared::Key {
            db: crate::backend::database_id(),
            catalog: def.catalog,
            serial: def.id,
            period,
        };
        let (id, global, reset) = (def.id, def.global, def.reset);
        let (name, format_text) = (&def.name, &def.format_text);
        let seq = shared::draw(
            name,
            key,
            &mut def.slot,
            shared::max_step(def.format.max_seq()),
            global,
            |step, deadline_us| {
                // Only when a range is taken: the period's text, and for a global serial its
                // name and definition (which the registry compares with the other nodes').
                let period_text = zone::period_text(reset, period);
                let (job_name, definition) = if global {
                    (
                        format!("{period_text}:{name}"),
                        format!(
                            "{}|{}",
                            reset.as_str(),
                            global::registry_format(format_text)
                        ),
                    )
                } else {
                    (period_text, String::new())
                };
                crate::segment::run_job(
                    &job_name,
                    &definition,
                    [i64::from(global), id, i64::from(period), step],
                    global,
                    deadline_us,
                )
            },
            // A global counter's range is served only while the registry's contact is fresh:
            // checked once the number is taken (after its range, the contact is waited for if
            // need be); refused, it is skipped, a gap.
            || {
                if global {
                    crate::segment::check_registry_contact(|| format!("global serial \"{name}\""))
                } else {
                    Ok(())
                }
            },
        )?;
        seq
    };
    def.format
        .render(&local, seq, worker)
        .map_err(|e| render_error(&def.name, e))
}

fn render_error(name: &str, e: RenderError) -> Error {
    match e {
        RenderError::SeqOverflow { max } => Error::SerialExhausted {
            name: name.into(),
            max,
        },
        RenderError::Worker { worker, width } => Error::SerialWorker {
            detail: match worker {
                Some(w) => format!("Worker id {w} is wider than the {width} digits of its token."),
                None => "This server has no worker id.".into(),
            },
        },
        RenderError::Year(year) => Error::TimestampOutOfRange {
            detail: format!("The year {year} does not fit {{YYYY}}."),
        },
    }
}

/// Internal (`idgen_metrics_serial`): the largest counter `format` shows in full, `10^N - 1`
/// for `{seq:0N}`; NULL without a width or for a format that does not parse.
#[pg_extern(immutable, parallel_safe, sql = false)]
fn idgen_serial_max_seq(format: &str) -> Option<i64> {
    Format::parse(format).ok()?.max_seq()
}

/// Internal (`idgen_serials`): the current period of a serial with `reset` in `time_zone`, as
/// its counter row names it ('20261125', '202611', '2026', or '' for reset never); NULL for a
/// zone that cannot be loaded.
#[pg_extern(volatile, parallel_safe, sql = false)]
fn idgen_serial_period(reset: &str, time_zone: &str) -> Option<String> {
    let reset = Reset::parse(reset)?;
    let zone = zone::Zone::resolve(time_zone).ok()?;
    // SAFETY: reads the clock.
    let now = unsafe { pg_sys::GetCurrentTimestamp() };
    let local = zone.local(now).ok()?;
    Some(zone::period_text(reset, zone::period_key(reset, &local)))
}
