//! Changing serials: `serial_create`, `serial_alter`, `serial_drop`, `serial_grant` and
//! `serial_revoke`, each in the caller's transaction (a ROLLBACK undoes it), for idgen_admin.
//! Their commit tells every backend's cache of definitions (`super::cache::note_change`). Each
//! fails with 25006 in a read-only transaction or on a standby, before anything else is read.

use pgrx::pg_sys;
use pgrx::prelude::*;

use super::catalog::{self, Arg};
use super::format::Reset;
use super::{cache, parse, required, worker_id_can_move};
use crate::error::{Error, OrReport};

/// Longest serial name, in bytes (as idgen 0.4.0).
const MAX_NAME_BYTES: usize = 40;
/// Longest description, in bytes.
const MAX_DESCRIPTION_BYTES: usize = 1024;

/// 25006 in a read-only transaction, and so on a standby, as PostgreSQL refuses its own
/// writes there: checked first, before the name's lock (which PostgreSQL refuses during
/// recovery with another code) and before any row is read for update.
fn check_writable(function: &'static str) -> Result<(), Error> {
    if crate::recovery::in_progress() || crate::recovery::read_only_transaction() {
        return Err(Error::ReadOnlyTransaction { function });
    }
    Ok(())
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

/// A description of at most [`MAX_DESCRIPTION_BYTES`]: 22023 otherwise.
fn check_description(description: Option<&str>) -> Result<(), Error> {
    if description.is_some_and(|d| d.len() > MAX_DESCRIPTION_BYTES) {
        return Err(Error::InvalidSerialArgument {
            why: format!("serial description must be at most {MAX_DESCRIPTION_BYTES} bytes"),
        });
    }
    Ok(())
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
    check_writable("serial_create()")?;
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
        return Err(Error::GlobalWithoutRegistry { what: "serial" });
    }
    if !global && f.uses_worker() && worker_id_can_move() {
        return Err(Error::SerialWorkerMoves);
    }
    check_description(description)?;
    let place = catalog::place()?;
    let creator = catalog::current_role();
    let revived = if place.dropped.is_some() {
        carry_over(&place, name, &f, reset_text, scope)?
    } else {
        None
    };
    let rows = catalog::run(
        &place,
        if place.role_oids {
            // A dropped serial's id when the name goes on counting ($9), else a new one.
            "INSERT INTO $S.idgen_serial AS s (name, format, reset, time_zone, gapless, scope,
                                               description, usage_roles, usage_role_oids, id)
             VALUES ($1, $2, $3, $4, $5, $6, $7,
                     ARRAY[(SELECT r.rolname::text FROM pg_catalog.pg_roles r WHERE r.oid = $8)],
                     ARRAY[$8],
                     COALESCE($9, pg_catalog.nextval(pg_catalog.format('%s.idgen_serial_id_seq', $10::pg_catalog.text)::pg_catalog.regclass)))
             ON CONFLICT (name) DO NOTHING RETURNING s.id"
        } else {
            "INSERT INTO $S.idgen_serial AS s (name, format, reset, time_zone, gapless, scope,
                                               description, usage_roles)
             VALUES ($1, $2, $3, $4, $5, $6, $7,
                     ARRAY[(SELECT r.rolname::text FROM pg_catalog.pg_roles r WHERE r.oid = $8)])
             ON CONFLICT (name) DO NOTHING RETURNING s.id"
        },
        &[
            Arg::Text(Some(name)),
            Arg::Text(Some(format_text)),
            Arg::Text(Some(reset_text)),
            Arg::Text(Some(zone)),
            Arg::Bool(gapless),
            Arg::Text(Some(scope)),
            Arg::Text(description),
            Arg::Oid(creator),
            Arg::Int8Null(revived),
            Arg::Text(Some(&place.schema)),
        ][..if place.role_oids { 10 } else { 8 }],
        0,
    );
    cache::note_change();
    if rows.is_empty() {
        return Err(Error::SerialExists { name: name.into() });
    }
    if place.dropped.is_some() && revived.is_none() {
        // A drop of the name that was not committed when the tombstone was looked for: the
        // insert waited for it (its deleted row held the name in the unique index), and its
        // tombstone is visible now. The new serial goes on counting under the dropped one's
        // id, or the call fails (42710) and its insert is undone.
        if let Some(id) = carry_over(&place, name, &f, reset_text, scope)? {
            catalog::run(
                &place,
                "UPDATE $S.idgen_serial s SET id = $2 WHERE s.name = $1",
                &[Arg::Text(Some(name)), Arg::Int8(id)],
                0,
            );
        }
    }
    Ok(())
}

/// What a serial created as `name` keeps of a dropped serial of that name: its id (so its
/// counters go on, and it prints none of the dropped serial's texts again) when the new
/// definition could print them only that way (the same format but for the width of `{seq}`,
/// the same reset and scope), the tombstone then gone; None when no serial of that name was
/// dropped, or `serial_forget` forgot it. Errors: 42710 any other definition.
fn carry_over(
    place: &catalog::Place,
    name: &str,
    format: &super::format::Format,
    reset: &str,
    scope: &str,
) -> Result<Option<i64>, Error> {
    let rows = catalog::run(
        place,
        "SELECT d.id, d.format, d.reset, d.scope FROM $S.idgen_serial_dropped d
          WHERE d.name = $1 FOR UPDATE",
        &[Arg::Text(Some(name))],
        0,
    );
    let Some(row) = rows.first() else {
        return Ok(None);
    };
    let refused = |what| Error::SerialNameDropped {
        name: name.into(),
        what,
    };
    if row.text(2).as_deref() != Some(reset) {
        return Err(refused("reset"));
    }
    if row.text(3).as_deref() != Some(scope) {
        return Err(refused("scope"));
    }
    let old = row.text(1).and_then(|t| parse(&t).ok());
    if old.is_none_or(|old| old.check_change(format).is_err()) {
        return Err(refused("format"));
    }
    let id = row.int8(0);
    catalog::run(
        place,
        "DELETE FROM $S.idgen_serial_dropped d WHERE d.name = $1",
        &[Arg::Text(Some(name))],
        0,
    );
    Ok(id)
}

/// Changes serial `name`'s format and description (NULL keeps either; '' clears the
/// description). The counters go on, so the new format may differ from the old one only in the
/// width of `{seq}` (widen `{seq:06}` to `{seq:07}`, say): any other change could print a text
/// the serial already printed ([`super::format::Format::check_change`]), and is a new serial.
/// The reset, time zone, mode and scope stay: changing them would restart or repeat counters.
/// Transactional; not executable by PUBLIC (idgen_admin). Errors: 22004 name NULL; 42704 no
/// such serial; 22023 an invalid format, a format that differs in more than the width of
/// `{seq}`, or a description over 1024 bytes.
#[pg_extern(volatile, parallel_unsafe, sql = false)]
fn serial_alter(name: Option<&str>, format: Option<&str>, description: Option<&str>) {
    alter(name, format, description).or_report()
}

fn alter(name: Option<&str>, format: Option<&str>, description: Option<&str>) -> Result<(), Error> {
    let name = required(name, "name")?;
    check_writable("serial_alter()")?;
    check_description(description)?;
    let place = catalog::place()?;
    let rows = catalog::run(
        &place,
        "SELECT s.reset, s.format FROM $S.idgen_serial s WHERE s.name = $1 FOR UPDATE",
        &[Arg::Text(Some(name))],
        0,
    );
    let Some((reset, old)) = rows.first().and_then(|r| Some((r.text(0)?, r.text(1)?))) else {
        return Err(Error::UnknownSerial {
            name: name.chars().take(MAX_NAME_BYTES).collect(),
        });
    };
    if let Some(f) = format {
        let reset = Reset::parse(&reset).ok_or_else(|| Error::InvalidSerialFormat {
            why: "the serial's reset is invalid".into(),
        })?;
        let new = parse(f)?;
        new.check_reset(reset)
            .map_err(|e| Error::InvalidSerialFormat { why: e.to_string() })?;
        // The counters go on under the new format: it must not print an old text.
        parse(&old)?
            .check_change(&new)
            .map_err(|e| Error::SerialFormatChange { why: e.to_string() })?;
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
/// Its counters stay in `idgen_serial_counter` under its id, and the name keeps what it
/// printed (a row of `idgen_serial_dropped`): a serial created under the name again with the
/// same format (its `{seq}` may be wider), reset and scope goes on counting where this one
/// stopped; another definition is refused (42710) until `serial_forget(name)`. Not executable
/// by PUBLIC (idgen_admin). Errors: 22004 NULL; 42704 no such serial.
#[pg_extern(volatile, parallel_unsafe, sql = false)]
fn serial_drop(name: Option<&str>) {
    drop_serial(name).or_report()
}

fn drop_serial(name: Option<&str>) -> Result<(), Error> {
    let name = required(name, "name")?;
    check_writable("serial_drop()")?;
    let place = catalog::place()?;
    let rows = catalog::run(
        &place,
        if place.dropped.is_some() {
            "WITH d AS (DELETE FROM $S.idgen_serial s WHERE s.name = $1
                        RETURNING s.name, s.id, s.format, s.reset, s.scope)
             INSERT INTO $S.idgen_serial_dropped AS t (name, id, format, reset, scope)
             SELECT d.name, d.id, d.format, d.reset, d.scope FROM d
             ON CONFLICT (name) DO UPDATE
                SET id = EXCLUDED.id, format = EXCLUDED.format, reset = EXCLUDED.reset,
                    scope = EXCLUDED.scope, dropped_at = EXCLUDED.dropped_at
             RETURNING t.id"
        } else {
            "DELETE FROM $S.idgen_serial s WHERE s.name = $1 RETURNING s.id"
        },
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

/// Forgets what dropped serial `name` printed: a serial created under the name afterwards is
/// another serial, counts from 1 and may print the dropped serial's texts again. The dropped
/// serial's counters stay in `idgen_serial_counter` (under an id no serial gets again).
/// Transactional; not executable by PUBLIC (idgen_admin). Errors: 22004 NULL; 42704 no dropped
/// serial of that name.
#[pg_extern(volatile, parallel_unsafe, sql = false)]
fn serial_forget(name: Option<&str>) {
    forget(name).or_report()
}

fn forget(name: Option<&str>) -> Result<(), Error> {
    let name = required(name, "name")?;
    check_writable("serial_forget()")?;
    let place = catalog::place()?;
    let rows = if place.dropped.is_some() {
        catalog::run(
            &place,
            "DELETE FROM $S.idgen_serial_dropped d WHERE d.name = $1 RETURNING d.id",
            &[Arg::Text(Some(name))],
            0,
        )
    } else {
        Vec::new()
    };
    if rows.is_empty() {
        return Err(Error::UnknownDroppedSerial {
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
    check_writable(if grant {
        "serial_grant()"
    } else {
        "serial_revoke()"
    })?;
    let role = match catalog::role_oid(role_name) {
        Ok(role) => role,
        // A dropped role's name is still revoked (a role created under it would get the
        // grant otherwise).
        Err(e) if !grant => return revoke_name(name, role_name, e),
        Err(e) => return Err(e),
    };
    let place = catalog::place()?;
    // PUBLIC is a flag. A role is kept by name and OID, side by side in usage_roles and
    // usage_role_oids: the name for dumps and reading, the OID so that a role created later
    // under a dropped role's name gets nothing. A grant replaces an entry of the same name
    // (a stale one), a revoke removes entries of either.
    let sql = match (role == pg_sys::InvalidOid, grant) {
        // Before the 0.8.0 update: by name, as that release did.
        (false, true) if !place.role_oids => {
            "UPDATE $S.idgen_serial s
                SET usage_roles = CASE WHEN r.rolname::text = ANY (s.usage_roles)
                                       THEN s.usage_roles
                                       ELSE s.usage_roles || r.rolname::text END,
                    updated_at = now()
               FROM pg_catalog.pg_roles r
              WHERE s.name = $1 AND r.oid = $2 RETURNING s.id"
        }
        (false, false) if !place.role_oids => {
            "UPDATE $S.idgen_serial s
                SET usage_roles = pg_catalog.array_remove(s.usage_roles, r.rolname::text),
                    updated_at = now()
               FROM pg_catalog.pg_roles r
              WHERE s.name = $1 AND r.oid = $2 RETURNING s.id"
        }
        (true, true) => "UPDATE $S.idgen_serial s SET usage_public = true, updated_at = now()
                          WHERE s.name = $1 AND $2 = 0 RETURNING s.id",
        (true, false) => "UPDATE $S.idgen_serial s SET usage_public = false, updated_at = now()
                           WHERE s.name = $1 AND $2 = 0 RETURNING s.id",
        (false, true) => "UPDATE $S.idgen_serial s
                             SET (usage_roles, usage_role_oids) =
                                 (SELECT pg_catalog.array_agg(g.n ORDER BY g.i),
                                         pg_catalog.array_agg(g.o ORDER BY g.i)
                                    FROM (SELECT u.n, u.o, u.i
                                            FROM ROWS FROM (pg_catalog.unnest(s.usage_roles), pg_catalog.unnest(s.usage_role_oids))
                                                 WITH ORDINALITY AS u(n, o, i)
                                           WHERE u.n IS DISTINCT FROM r.rolname::text
                                             AND u.o IS DISTINCT FROM r.oid
                                          UNION ALL
                                          SELECT r.rolname::text, r.oid, 9223372036854775807) g),
                                 updated_at = now()
                            FROM pg_catalog.pg_roles r
                           WHERE s.name = $1 AND r.oid = $2 RETURNING s.id",
        (false, false) => "UPDATE $S.idgen_serial s
                              SET (usage_roles, usage_role_oids) =
                                  (SELECT COALESCE(pg_catalog.array_agg(u.n ORDER BY u.i), '{}'),
                                          COALESCE(pg_catalog.array_agg(u.o ORDER BY u.i), '{}')
                                     FROM ROWS FROM (pg_catalog.unnest(s.usage_roles), pg_catalog.unnest(s.usage_role_oids))
                                          WITH ORDINALITY AS u(n, o, i)
                                    WHERE u.n IS DISTINCT FROM r.rolname::text
                                      AND u.o IS DISTINCT FROM r.oid),
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
    let place = catalog::place()?;
    let sql = if place.role_oids {
        "UPDATE $S.idgen_serial s
            SET (usage_roles, usage_role_oids) =
                (SELECT COALESCE(pg_catalog.array_agg(u.n ORDER BY u.i), '{}'),
                        COALESCE(pg_catalog.array_agg(u.o ORDER BY u.i), '{}')
                   FROM ROWS FROM (pg_catalog.unnest(s.usage_roles), pg_catalog.unnest(s.usage_role_oids))
                        WITH ORDINALITY AS u(n, o, i)
                  WHERE u.n IS DISTINCT FROM $2),
                updated_at = now()
          WHERE s.name = $1 AND $2 = ANY (s.usage_roles) RETURNING s.id"
    } else {
        "UPDATE $S.idgen_serial s
            SET usage_roles = pg_catalog.array_remove(s.usage_roles, $2), updated_at = now()
          WHERE s.name = $1 AND $2 = ANY (s.usage_roles) RETURNING s.id"
    };
    let rows = catalog::run(
        &place,
        sql,
        &[Arg::Text(Some(name)), Arg::Text(Some(role_name))],
        0,
    );
    cache::note_change();
    if rows.is_empty() {
        return Err(e);
    }
    Ok(())
}
