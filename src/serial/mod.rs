//! Business serial numbers (seed 003, scenario 2; README "Serial numbers"), such as
//! `INV-20261125-000123`: a format ([`format`]), a counter that restarts every day, month or
//! year in the serial's IANA time zone ([`zone`]), and one of three counters per period:
//!
//! * fast (local): a high-water mark in `idgen_serial_counter`, moved up by the segment
//!   allocator in transactions of its own, its ranges cached in shared memory ([`shared`]) as a
//!   segment's: a draw is one `fetch_add`; gaps on rollback and restart, never a repeat;
//! * fast (global, `scope => 'global'`): the same, with the mark in the registry, so that every
//!   server drawing the serial hands out different numbers;
//! * gapless: the period's row of `idgen_serial_counter`, incremented in the caller's
//!   transaction under the serial's lock (callers queue; a rollback leaves no gap).
//!
//! A serial is identified by its id, never by its name: its counters are rows keyed by the id,
//! which is never reused. Definitions and counters are read and written with the rights of the
//! tables' owner after the caller's rights were checked ([`catalog`]): there is no `SECURITY
//! DEFINER` function, and drawing needs USAGE granted per serial (`serial_grant`). Each backend
//! caches the definitions it uses ([`cache`]).
//!
//! Issue 29 rebuilt serials here from idgen 0.4.0's PL/pgSQL (`sql/idgen--0.5.0--0.6.0.sql`
//! moves their state over).

mod cache;
mod catalog;
pub(crate) mod format;
mod shared;
mod zone;

use pgrx::datetime::Timestamp;
use pgrx::pg_sys;
use pgrx::prelude::*;

use catalog::Arg;

use crate::error::{Error, OrReport};
use format::{Format, LocalTime, RenderError, Reset};

/// The parsed format, or 22023 naming the offending token.
fn parse(format: &str) -> Result<Format, Error> {
    Format::parse(format).map_err(|e| Error::InvalidSerialFormat { why: e.to_string() })
}

/// Internal, kept for the upgrade scripts of idgen 0.4.0 (whose PL/pgSQL serials used it;
/// `sql/idgen--0.5.0--0.6.0.sql` drops it): checks `format` for a counter reset every
/// `reset` ('day', 'month', 'year', 'never'). Errors: 22023 an invalid format (naming the
/// token), a format that does not show the period its counter restarts in, or an unknown reset.
#[pg_extern(immutable, parallel_safe)]
fn idgen_serial_check(format: &str, reset: &str) {
    let f = parse(format).or_report();
    let reset = Reset::parse(reset)
        .ok_or_else(|| Error::InvalidSerialFormat {
            why: format!(
                "reset must be 'day', 'month', 'year' or 'never', not '{}'",
                reset.chars().take(20).collect::<String>()
            ),
        })
        .or_report();
    f.check_reset(reset)
        .map_err(|e| Error::InvalidSerialFormat { why: e.to_string() })
        .or_report();
}

/// Internal, kept for the upgrade scripts of idgen 0.4.0 (dropped by 0.6.0): the text of counter value `seq` of serial `name`, drawn at local
/// time `at` (in the serial's time zone). `{worker}` is this server's Snowflake worker id.
/// Errors: 22003 the counter outgrew its padding (the 1,000,000th number of `{seq:06}`); 55000
/// a `{worker}` without a worker id, or one wider than its padding; 22008 a year `{YYYY}`
/// cannot show.
#[pg_extern(stable, parallel_safe)]
fn idgen_serial_render(name: &str, format: &str, at: Timestamp, seq: i64) -> String {
    let f = parse(format).or_report();
    let worker = if f.uses_worker() {
        Some(crate::snowflake::worker_id().or_report() as u32)
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
        // to_hms_micro's microseconds count from the minute, not the second: {MS} showed
        // seconds × 1000 + milliseconds (issue 29).
        milli: ((micro / 1000) % 1000) as u16,
    };
    f.render(&t, seq, worker)
        .map_err(|e| render_error(name, e))
        .or_report()
}

/// The global serials' counters this server took in the registry, with its newest mark of
/// each, as the registry client shows them at every renewal (with the global segments'
/// marks): `(name, mark)`, named `chr(1) || 'serial' || chr(1) || serial || chr(1) || period`,
/// the form `idgen_registry_check_marks` reads (control characters: no serial has them, and
/// the registry leaves out a name that is a global segment's).
pub(crate) fn registry_marks() -> Vec<(String, i64)> {
    shared::registry_marks()
        .into_iter()
        .map(|(serial, period, mark)| (format!("\u{1}serial\u{1}{serial}\u{1}{period}"), mark))
        .collect()
}

/// Sets up serials. Called once from `_PG_init`, in the postmaster: the counters' shared
/// memory, and the allocator job that moves a counter's mark (every process inherits both).
pub(crate) fn init() {
    crate::shmem::register(shared::PART);
    crate::segment::register_job(take_in_allocator);
}

/// Longest serial name, in bytes (as idgen 0.4.0).
const MAX_NAME_BYTES: usize = 40;
/// Longest description, in bytes.
const MAX_DESCRIPTION_BYTES: usize = 1024;

fn required<'a>(value: Option<&'a str>, argument: &'static str) -> Result<&'a str, Error> {
    value.ok_or(Error::NullArgument { argument })
}

fn check_name(name: &str) -> Result<(), Error> {
    if name.chars().any(char::is_control) {
        return Err(Error::InvalidSerialArgument {
            why: "serial name must not contain control characters".into(),
        });
    }
    if name.is_empty() || name.len() > MAX_NAME_BYTES {
        return Err(Error::InvalidSerialArgument {
            why: format!(
                "serial name must be 1 to {MAX_NAME_BYTES} bytes, not {}",
                name.len()
            ),
        });
    }
    Ok(())
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
/// on a standby (a gapless one: PostgreSQL's own 25006); 55P03 no range within
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
    if !def.gapless {
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
        shared::draw(
            key,
            &mut def.slot,
            shared::max_step(def.format.max_seq()),
            |step| {
                // Only when a range is taken: the period's text, and for a global serial its
                // name and definition (which the registry compares with the other nodes').
                let period_text = zone::period_text(reset, period);
                let (job_name, definition) = if global {
                    (
                        format!("{period_text}:{name}"),
                        format!("{}|{}", reset_name(reset), registry_format(format_text)),
                    )
                } else {
                    (period_text, String::new())
                };
                crate::segment::run_job(
                    &job_name,
                    &definition,
                    [i64::from(global), id, i64::from(period), step],
                )
            },
        )?
    };
    def.format
        .render(&local, seq, worker)
        .map_err(|e| render_error(&def.name, e))
}

/// A global serial's format as the registry compares it across nodes: with `{seq:0N}` written
/// `{seq}`, so that widening the counter on every node (the hint of 22003) one node at a time
/// keeps them drawing.
fn registry_format(format: &str) -> String {
    let mut out = String::with_capacity(format.len());
    let mut rest = format;
    while let Some(i) = rest.find("{seq:0") {
        out.push_str(&rest[..i]);
        match rest[i..].find('}') {
            Some(j) => {
                out.push_str("{seq}");
                rest = &rest[i + j + 1..];
            }
            None => {
                out.push_str(&rest[i..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

fn reset_name(reset: Reset) -> &'static str {
    match reset {
        Reset::Day => "day",
        Reset::Month => "month",
        Reset::Year => "year",
        Reset::Never => "never",
    }
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

/// The allocator's job (`segment::register_job`): moves the mark of a fast serial's counter
/// up by `step` and returns the new mark, in the allocator's own committed transaction
/// (local), or in the registry (global: the mark is also kept locally, and shown the registry
/// at the next take). `args`: [global, serial id, period key, step]; `name`: the period's
/// text, and for a global serial ':' and the serial's name; `definition`: a global serial's
/// reset and format ('day|INV-...'), which must be the same on every node.
fn take_in_allocator(name: &str, definition: &str, args: [i64; 4]) -> Result<i64, Error> {
    let [global, id, _period, step] = args;
    let place = catalog::place()?;
    if global != 0 {
        let (period, serial) = name.split_once(':').unwrap_or((name, ""));
        let (reset, format) = definition.split_once('|').unwrap_or(("", definition));
        // The last mark this server took for the counter, kept in its own idgen_serial_counter
        // (committed with this transaction before any number of the new range is used): a
        // registry below it has lost commits, and its range would repeat texts.
        let known: i64 = catalog::run(
            &place,
            "SELECT c.value FROM $S.idgen_serial_counter c WHERE c.serial = $1 AND c.period = $2",
            &[Arg::Int8(id), Arg::Text(Some(period))],
            1,
        )
        .first()
        .and_then(|r| r.int8(0))
        .unwrap_or(0);
        let row = crate::segment::registry_call(
            c"SELECT mark, regression FROM idgen_registry_serial_take($1, $2, $3::bigint, $4, $5, $6, $7, $8::bigint)",
            &[
                Some(serial.to_owned()),
                Some(period.to_owned()),
                Some(step.to_string()),
                Some(crate::identity::incarnation().to_owned()),
                Some(crate::identity::secret().to_owned()),
                Some(reset.to_owned()),
                Some(format.to_owned()),
                Some(known.to_string()),
            ],
        )?;
        let malformed = || Error::Relayed {
            sqlstate: PgSqlErrorCode::ERRCODE_INTERNAL_ERROR as i32,
            message: "idgen_registry_serial_take returned no mark".into(),
            detail: None,
            hint: None,
        };
        let row = row.ok_or_else(malformed)?;
        if let Some(regression) = row.get(1).cloned().flatten() {
            return Err(Error::Relayed {
                sqlstate: PgSqlErrorCode::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE as i32,
                message: regression,
                detail: Some("No range is taken from it: texts could repeat.".into()),
                hint: Some("On the registry, as a superuser: SELECT * FROM idgen_registry_resolve(); after moving the counter in idgen_registry_serial_counter above every number handed out (README \"A registry that lost commits\").".into()),
            });
        }
        let mark: i64 = row
            .first()
            .cloned()
            .flatten()
            .and_then(|t| t.parse().ok())
            .ok_or_else(malformed)?;
        if mark <= known {
            return Err(malformed());
        }
        // Shown to the registry at every renewal from now on, with the global segments' marks:
        // a registry that lost the counter is found before it hands its numbers out again.
        shared::note_registry_mark(serial, period, mark);
        catalog::run(
            &place,
            "INSERT INTO $S.idgen_serial_counter AS c (serial, period, value) VALUES ($1, $2, $3)
             ON CONFLICT (serial, period) DO UPDATE SET value = greatest(c.value, EXCLUDED.value)",
            &[Arg::Int8(id), Arg::Text(Some(period)), Arg::Int8(mark)],
            0,
        );
        return Ok(mark);
    }
    let rows = catalog::run(
        &place,
        "INSERT INTO $S.idgen_serial_counter AS c (serial, period, value) VALUES ($1, $2, $3)
         ON CONFLICT (serial, period) DO UPDATE SET value = c.value + EXCLUDED.value
         RETURNING c.value",
        &[Arg::Int8(id), Arg::Text(Some(name)), Arg::Int8(step)],
        0,
    );
    rows.first()
        .and_then(|r| r.int8(0))
        .ok_or(Error::UnknownSerial {
            name: format!("#{id}"),
        })
}

/// Creates serial `name`: texts like `format` ('INV-{YYYY}{MM}{DD}-{seq:06}'), its counter
/// restarting every `reset` ('day', 'month', 'year', 'never') in IANA zone `time_zone`;
/// `gapless` counts in the caller's transaction; `scope => 'global'` takes the counter's
/// ranges from the registry (unique on every server of the registry; not with gapless). The
/// creating role gets USAGE on it. Transactional. Not executable by PUBLIC (idgen_admin).
///
/// Errors: 22004 a NULL argument; 22023 an invalid format (naming the token), a format that
/// does not show the period its counter restarts in, an unknown reset or scope, a time zone
/// that is not an IANA name (abbreviations and POSIX offsets), a name of 0 or more than 40
/// bytes, a description over 1024 bytes, a global gapless serial; 55000 scope global without
/// `idgen.registry`, or a local serial showing `{worker}` on a server whose worker id comes
/// from the registry; 42710 the serial exists.
#[allow(clippy::too_many_arguments)]
#[pg_extern(volatile, parallel_unsafe, sql = false)]
fn serial_create(
    name: Option<&str>,
    format: Option<&str>,
    reset: Option<&str>,
    time_zone: Option<&str>,
    gapless: Option<bool>,
    description: Option<&str>,
    scope: Option<&str>,
) {
    create(name, format, reset, time_zone, gapless, description, scope).or_report()
}

#[allow(clippy::too_many_arguments)]
fn create(
    name: Option<&str>,
    format: Option<&str>,
    reset: Option<&str>,
    time_zone: Option<&str>,
    gapless: Option<bool>,
    description: Option<&str>,
    scope: Option<&str>,
) -> Result<(), Error> {
    let name = required(name, "name")?;
    let format_text = required(format, "format")?;
    let reset_text = required(reset, "reset")?;
    let zone = required(time_zone, "time_zone")?;
    let gapless = gapless.ok_or(Error::NullArgument {
        argument: "gapless",
    })?;
    let scope = required(scope, "scope")?;
    check_name(name)?;
    let f = parse(format_text)?;
    let reset = Reset::parse(reset_text).ok_or_else(|| Error::InvalidSerialFormat {
        why: format!(
            "reset must be 'day', 'month', 'year' or 'never', not '{}'",
            reset_text.chars().take(20).collect::<String>()
        ),
    })?;
    f.check_reset(reset)
        .map_err(|e| Error::InvalidSerialFormat { why: e.to_string() })?;
    catalog::check_zone(zone)?;
    let global = match scope {
        "local" => false,
        "global" => true,
        other => {
            return Err(Error::InvalidSerialArgument {
                why: format!(
                    "scope must be 'local' or 'global', not {}",
                    catalog::literal(&other.chars().take(20).collect::<String>())
                ),
            })
        }
    };
    if global && gapless {
        return Err(Error::InvalidSerialArgument {
            why: "a global serial cannot be gapless: its counter is in the registry, outside the caller's transaction".into(),
        });
    }
    if global && !worker_id_can_move() {
        return Err(Error::GlobalWithoutRegistry);
    }
    if !global && f.uses_worker() && worker_id_can_move() {
        return Err(Error::SerialWorkerMoves);
    }
    if description.is_some_and(|d| d.len() > MAX_DESCRIPTION_BYTES) {
        return Err(Error::InvalidSerialArgument {
            why: format!("serial description must be at most {MAX_DESCRIPTION_BYTES} bytes"),
        });
    }
    let place = cache::place()?;
    let creator = catalog::current_role();
    let rows = catalog::run(
        &place,
        "INSERT INTO $S.idgen_serial AS s (name, format, reset, time_zone, gapless, scope, description, usage_roles)
         VALUES ($1, $2, $3, $4, $5, $6, $7,
                 ARRAY[(SELECT r.rolname::text FROM pg_catalog.pg_roles r WHERE r.oid = $8)])
         ON CONFLICT (name) DO NOTHING RETURNING s.id",
        &[
            Arg::Text(Some(name)),
            Arg::Text(Some(format_text)),
            Arg::Text(Some(reset_text)),
            Arg::Text(Some(zone)),
            Arg::Bool(gapless),
            Arg::Text(Some(scope)),
            Arg::Text(description),
            Arg::Oid(creator),
        ],
        0,
    );
    cache::note_change();
    if rows.is_empty() {
        return Err(Error::SerialExists { name: name.into() });
    }
    Ok(())
}

/// Changes serial `name`'s format (checked as at creation: widen `{seq:06}` to `{seq:07}`, say)
/// and description (NULL keeps either; '' clears the description). The reset, time zone, mode
/// and scope stay: changing them would restart or repeat counters. Transactional; not
/// executable by PUBLIC (idgen_admin). Errors: 22004 name NULL; 42704 no such serial; 22023 an
/// invalid format or a description over 1024 bytes.
#[pg_extern(volatile, parallel_unsafe, sql = false)]
fn serial_alter(name: Option<&str>, format: Option<&str>, description: Option<&str>) {
    alter(name, format, description).or_report()
}

fn alter(name: Option<&str>, format: Option<&str>, description: Option<&str>) -> Result<(), Error> {
    let name = required(name, "name")?;
    if description.is_some_and(|d| d.len() > MAX_DESCRIPTION_BYTES) {
        return Err(Error::InvalidSerialArgument {
            why: format!("serial description must be at most {MAX_DESCRIPTION_BYTES} bytes"),
        });
    }
    let place = cache::place()?;
    let rows = catalog::run(
        &place,
        "SELECT s.reset FROM $S.idgen_serial s WHERE s.name = $1 FOR UPDATE",
        &[Arg::Text(Some(name))],
        0,
    );
    let Some(reset) = rows.first().and_then(|r| r.text(0)) else {
        return Err(Error::UnknownSerial {
            name: name.chars().take(MAX_NAME_BYTES).collect(),
        });
    };
    if let Some(f) = format {
        let reset = Reset::parse(&reset).ok_or_else(|| Error::InvalidSerialFormat {
            why: "the serial's reset is invalid".into(),
        })?;
        parse(f)?
            .check_reset(reset)
            .map_err(|e| Error::InvalidSerialFormat { why: e.to_string() })?;
    }
    catalog::run(
        &place,
        "UPDATE $S.idgen_serial s
            SET format = coalesce($2, s.format),
                description = CASE WHEN $3 IS NULL THEN s.description ELSE nullif($3, '') END,
                updated_at = now()
          WHERE s.name = $1",
        &[
            Arg::Text(Some(name)),
            Arg::Text(format),
            Arg::Text(description),
        ],
        0,
    );
    cache::note_change();
    Ok(())
}

/// Drops serial `name`. Transactional: a ROLLBACK keeps it, and its counters, as they were.
/// Its counters stay in `idgen_serial_counter` under its id, which no serial gets again (a
/// serial created with the same name is another serial and counts from 1). Not executable by
/// PUBLIC (idgen_admin). Errors: 22004 NULL; 42704 no such serial.
#[pg_extern(volatile, parallel_unsafe, sql = false)]
fn serial_drop(name: Option<&str>) {
    drop_serial(name).or_report()
}

fn drop_serial(name: Option<&str>) -> Result<(), Error> {
    let name = required(name, "name")?;
    let place = cache::place()?;
    let rows = catalog::run(
        &place,
        "DELETE FROM $S.idgen_serial s WHERE s.name = $1 RETURNING s.id",
        &[Arg::Text(Some(name))],
        0,
    );
    cache::note_change();
    if rows.is_empty() {
        return Err(Error::UnknownSerial {
            name: name.chars().take(MAX_NAME_BYTES).collect(),
        });
    }
    Ok(())
}

/// Lets `role` ('public' for every role) draw from serial `name` (USAGE, as on a sequence).
/// Transactional; not executable by PUBLIC (idgen_admin). Errors: 22004 NULL; 42704 no such
/// serial or role.
#[pg_extern(volatile, parallel_unsafe, sql = false)]
fn serial_grant(name: Option<&str>, role: Option<&str>) {
    change_grant(name, role, true).or_report()
}

/// Takes USAGE on serial `name` back from `role` ('public' for the grant to every role; the
/// name of a role dropped since is taken out too); a
/// role may still draw through another grant (to PUBLIC, or to a role it is a member of).
/// Transactional; not executable by PUBLIC (idgen_admin). Errors: 22004 NULL; 42704 no such
/// serial or role.
#[pg_extern(volatile, parallel_unsafe, sql = false)]
fn serial_revoke(name: Option<&str>, role: Option<&str>) {
    change_grant(name, role, false).or_report()
}

fn change_grant(name: Option<&str>, role: Option<&str>, grant: bool) -> Result<(), Error> {
    let name = required(name, "name")?;
    let role_name = required(role, "role")?;
    let role = match catalog::role_oid(role_name) {
        Ok(role) => role,
        // A dropped role's name is still revoked (a role created under it would get the
        // grant otherwise: found by issue 29's third review).
        Err(e) if !grant => return revoke_name(name, role_name, e),
        Err(e) => return Err(e),
    };
    let place = cache::place()?;
    // PUBLIC is a flag; a role is kept by name (its OID would mean another role after a
    // restore elsewhere).
    let sql = match (role == pg_sys::InvalidOid, grant) {
        (true, true) => "UPDATE $S.idgen_serial s SET usage_public = true, updated_at = now()
                          WHERE s.name = $1 AND $2 = 0 RETURNING s.id",
        (true, false) => "UPDATE $S.idgen_serial s SET usage_public = false, updated_at = now()
                           WHERE s.name = $1 AND $2 = 0 RETURNING s.id",
        (false, true) => "UPDATE $S.idgen_serial s
                             SET usage_roles = CASE WHEN r.rolname::text = ANY (s.usage_roles)
                                                    THEN s.usage_roles
                                                    ELSE s.usage_roles || r.rolname::text END,
                                 updated_at = now()
                            FROM pg_catalog.pg_roles r
                           WHERE s.name = $1 AND r.oid = $2 RETURNING s.id",
        (false, false) => "UPDATE $S.idgen_serial s
                              SET usage_roles = pg_catalog.array_remove(s.usage_roles, r.rolname::text),
                                  updated_at = now()
                             FROM pg_catalog.pg_roles r
                            WHERE s.name = $1 AND r.oid = $2 RETURNING s.id",
    };
    let rows = catalog::run(&place, sql, &[Arg::Text(Some(name)), Arg::Oid(role)], 0);
    cache::note_change();
    if rows.is_empty() {
        return Err(Error::UnknownSerial {
            name: name.chars().take(MAX_NAME_BYTES).collect(),
        });
    }
    Ok(())
}

/// Takes a role's name out of serial `name`'s grants when no role has that name any more; `e`
/// (42704) when it is not there either.
fn revoke_name(name: &str, role_name: &str, e: Error) -> Result<(), Error> {
    let place = cache::place()?;
    let rows = catalog::run(
        &place,
        "UPDATE $S.idgen_serial s
            SET usage_roles = pg_catalog.array_remove(s.usage_roles, $2), updated_at = now()
          WHERE s.name = $1 AND $2 = ANY (s.usage_roles) RETURNING s.id",
        &[Arg::Text(Some(name)), Arg::Text(Some(role_name))],
        0,
    );
    cache::note_change();
    if rows.is_empty() {
        return Err(e);
    }
    Ok(())
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

// The objects of idgen 0.4.0 (serials, the text form of a Snowflake id, idgen_adopt_column, the
// registry's give-back): the upgrade script from 0.3.0 is also part of every fresh install,
// after 0.3.0's and after pgrx has created the new functions, so that both end with the same
// objects.
pgrx::extension_sql_file!(
    "../../sql/idgen--0.3.0--0.4.0.sql",
    name = "v0_4_0",
    requires = [
        "registry",
        idgen_serial_check,
        idgen_serial_render,
        snowflake::snowflake_format,
        snowflake::snowflake_parse
    ]
);

// The serials of idgen 0.6.0 (issue 29): the upgrade script from 0.5.0, which replaces 0.4.0's
// PL/pgSQL serials with the functions above (created by the script itself, `sql = false`: in
// a fresh install, 0.4.0's functions of the same names exist until it drops them) and moves
// their counters over, is also part of every fresh install.
pgrx::extension_sql_file!(
    "../../sql/idgen--0.5.0--0.6.0.sql",
    name = "v0_6_0",
    requires = [
        "v0_5_0",
        sqids::sqids_encode,
        sqids::sqids_decode,
        status::snowflake_status
    ]
);

#[cfg(any(test, feature = "pg_test"))]
#[pgrx::pg_schema]
mod tests {
    #[test]
    fn the_registry_compares_formats_without_the_counters_padding() {
        assert_eq!(
            super::registry_format("INV-{YYYY}-{seq:06}"),
            "INV-{YYYY}-{seq}"
        );
        assert_eq!(super::registry_format("A{seq}B"), "A{seq}B");
        assert_eq!(super::registry_format("{seq:012}x"), "{seq}x");
        assert_eq!(super::registry_format("x{seq:0"), "x{seq:0");
    }
}
