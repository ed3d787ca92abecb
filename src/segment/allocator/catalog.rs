//! SPI access to the catalog table `idgen_segment`. Only the allocator background worker
//! writes it (each call here runs inside the allocator's own transaction); backends only read.
//!
//! Names are bound as parameters, never spliced into SQL text; the table is qualified with the
//! extension's schema, operators with `pg_catalog`, and the allocator runs with an empty
//! `search_path`. The one query run in a caller's session ([`exists`]) runs with `search_path`
//! fixed to `pg_catalog`, as if its function were declared `SET search_path = pg_catalog`.

use pgrx::pg_sys;
use pgrx::prelude::*;

use crate::error::Error;

/// The extension's schema, quoted for SQL; `None` when idgen is not installed here.
fn schema() -> Result<Option<String>, Error> {
    Spi::get_one::<String>(
        "SELECT pg_catalog.quote_ident(n.nspname) FROM pg_catalog.pg_extension e \
         JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) e.extnamespace \
         WHERE e.extname OPERATOR(pg_catalog.=) 'idgen'",
    )
    .or_else(no_row_is_none)
}

/// The catalog table as the allocator addresses it.
struct Table {
    /// `schema.idgen_segment`.
    name: String,
    /// Whether it has the column `scope`: not while the extension's SQL predates 0.3.0 (a new
    /// library runs against the old tables until `ALTER EXTENSION idgen UPDATE`, and every
    /// segment there is local).
    scoped: bool,
    /// Whether it has the column `cache` (since idgen 0.7.0): before, every segment has
    /// no per-backend cache (1).
    cached: bool,
}

impl Table {
    /// The SQL expression of a row's scope.
    fn scope(&self) -> &'static str {
        if self.scoped {
            "scope"
        } else {
            "'local'::pg_catalog.text"
        }
    }
}

/// The catalog table. When the allocator cannot see the extension (a caller reached a
/// segment function, so it exists for the caller: its CREATE EXTENSION is not committed yet,
/// or a DROP EXTENSION is), the error says so.
fn table() -> Result<Table, Error> {
    let Some(s) = schema()? else {
        return Err(Error::ExtensionNotVisible);
    };
    let name = format!("{s}.idgen_segment");
    let (scoped, cached) = Spi::get_two_with_args::<bool, bool>(
        "SELECT pg_catalog.bool_or(attname OPERATOR(pg_catalog.=) 'scope'), \
                pg_catalog.bool_or(attname OPERATOR(pg_catalog.=) 'cache') \
         FROM pg_catalog.pg_attribute \
         WHERE attrelid OPERATOR(pg_catalog.=) pg_catalog.to_regclass($1) AND NOT attisdropped",
        &[name.as_str().into()],
    )
    .map_err(internal)?;
    Ok(Table {
        name,
        scoped: scoped.unwrap_or(false),
        cached: cached.unwrap_or(false),
    })
}

/// `Spi::get_one` reports "no row" as an error; here it is `None`.
fn no_row_is_none<T>(e: pgrx::spi::SpiError) -> Result<Option<T>, Error> {
    match e {
        pgrx::spi::SpiError::InvalidPosition => Ok(None),
        e => Err(internal(e)),
    }
}

fn internal(e: pgrx::spi::SpiError) -> Error {
    Error::Relayed {
        sqlstate: PgSqlErrorCode::ERRCODE_INTERNAL_ERROR as i32,
        message: format!("idgen catalog access failed: {e}"),
        detail: None,
        hint: None,
    }
}

/// Whether segment `name` exists (in the caller's snapshot). Runs in the caller's session, with
/// the `search_path` fixed ([`with_catalog_search_path`]).
pub(crate) fn exists(name: &str) -> Result<bool, Error> {
    with_catalog_search_path(|| {
        let Some(s) = schema()? else { return Ok(false) };
        Spi::get_one_with_args::<bool>(
            &format!(
                "SELECT EXISTS (SELECT FROM {s}.idgen_segment WHERE name OPERATOR(pg_catalog.=) $1)"
            ),
            &[name.into()],
        )
        .map(|v| v.unwrap_or(false))
        .map_err(internal)
    })
}

/// Runs `body` with `search_path` set to `pg_catalog` alone, restored afterwards: what a
/// function's `SET search_path` clause does (PostgreSQL's `fmgr_security_definer`:
/// `NewGUCNestLevel`, `set_config_option` with `GUC_ACTION_SAVE`, `AtEOXact_GUC`), for SPI in a
/// caller's session, where the caller chose the `search_path`. On an error the transaction's
/// abort restores it.
fn with_catalog_search_path<T>(body: impl FnOnce() -> T) -> T {
    crate::backend::with_search_path(c"pg_catalog", body)
}

/// The segment's step and per-backend cache (1 before idgen 0.7.0's column), without locking.
pub(crate) fn settings(name: &str) -> Result<(i64, u32), Error> {
    let table = table()?;
    let t = &table.name;
    let cache = if table.cached { "cache" } else { "1" };
    let row = Spi::connect(|client| {
        let rows = client.select(
            &format!("SELECT step, {cache} FROM {t} WHERE name OPERATOR(pg_catalog.=) $1"),
            Some(1),
            &[name.into()],
        )?;
        if rows.is_empty() {
            return Ok(None);
        }
        rows.first().get_two::<i32, i32>().map(Some)
    })
    .map_err(internal)?;
    step_and_cache(name, row)
}

/// A row's `(step, cache)` as the callers use them; 42704 when there was no row.
fn step_and_cache(
    name: &str,
    row: Option<(Option<i32>, Option<i32>)>,
) -> Result<(i64, u32), Error> {
    match row {
        Some((Some(step), Some(cache))) => Ok((step.into(), cache.max(0) as u32)),
        _ => Err(Error::UnknownSegment { name: name.into() }),
    }
}

/// The marks of this database's global segments as its catalog keeps them (`max_id`, the last
/// number of the last range this server, or the primary it was promoted from, took): each
/// committed before any number of its range was used, and so on every synchronous standby.
/// Empty when the extension predates global segments.
pub(crate) fn global_marks() -> Result<Vec<(String, i64)>, Error> {
    let table = table()?;
    if !table.scoped {
        return Ok(Vec::new());
    }
    let t = &table.name;
    Spi::connect(|client| {
        let rows = client.select(
            &format!(
                "SELECT name, max_id FROM {t} WHERE scope OPERATOR(pg_catalog.=) 'global' \
                 AND max_id OPERATOR(pg_catalog.>) '-9223372036854775808'::pg_catalog.int8"
            ),
            None,
            &[],
        )?;
        let mut out = Vec::new();
        for row in rows {
            if let (Some(name), Some(mark)) = (row.get::<String>(1)?, row.get::<i64>(2)?) {
                out.push((name, mark));
            }
        }
        Ok(out)
    })
    .map_err(internal)
}

/// Whether the segment is global (its ranges come from the registry), without locking; 42704
/// when there is no such segment.
pub(crate) fn is_global(name: &str) -> Result<bool, Error> {
    let table = table()?;
    let (t, scope) = (&table.name, table.scope());
    let row = Spi::connect(|client| {
        let rows = client.select(
            &format!(
                "SELECT {scope} OPERATOR(pg_catalog.=) 'global' FROM {t} \
                 WHERE name OPERATOR(pg_catalog.=) $1"
            ),
            Some(1),
            &[name.into()],
        )?;
        if rows.is_empty() {
            return Ok(None);
        }
        rows.first().get_one::<bool>()
    })
    .map_err(internal)?;
    row.ok_or_else(|| Error::UnknownSegment { name: name.into() })
}

/// The segment's step, without locking.
pub(crate) fn step(name: &str) -> Result<i64, Error> {
    settings(name).map(|(step, _)| step)
}

/// A segment's row as the allocator reads it.
pub(crate) struct Row {
    /// The high-water mark (of a global segment: the registry's, as of the last range).
    pub(crate) max_id: i64,
    /// The segment's own step.
    pub(crate) step: i64,
    /// Global: its ranges come from the registry (DESIGN.md §6).
    pub(crate) global: bool,
}

/// Locks the segment's row for this transaction and returns it.
pub(crate) fn lock_row(name: &str) -> Result<Row, Error> {
    let table = table()?;
    let (t, scope) = (&table.name, table.scope());
    // The lock the row's UPDATE needs, taken now: once a global segment's range is taken in
    // the registry, the local UPDATE must not wait (and time out) for a lock a `SELECT ... FOR
    // UPDATE` did not take.
    Spi::run(&format!("LOCK TABLE {t} IN ROW EXCLUSIVE MODE")).map_err(internal)?;
    let row = Spi::connect(|client| {
        let rows = client.select(
            &format!(
                "SELECT max_id, step, {scope} OPERATOR(pg_catalog.=) 'global' FROM {t} \
                 WHERE name OPERATOR(pg_catalog.=) $1 FOR UPDATE"
            ),
            Some(1),
            &[name.into()],
        )?;
        if rows.is_empty() {
            return Ok(None);
        }
        rows.first().get_three::<i64, i32, bool>().map(Some)
    })
    .map_err(internal)?;
    match row {
        Some((Some(max_id), Some(step), Some(global))) => Ok(Row {
            max_id,
            step: step.into(),
            global,
        }),
        _ => Err(Error::UnknownSegment { name: name.into() }),
    }
}

/// Moves the segment's high-water mark to `max_id` (the row is locked by [`lock_row`]).
pub(crate) fn set_max_id(name: &str, max_id: i64) -> Result<(), Error> {
    let t = table()?.name;
    Spi::connect_mut(|client| {
        client.update(
            &format!(
                "UPDATE {t} SET max_id = $2, updated_at = pg_catalog.now() \
                 WHERE name OPERATOR(pg_catalog.=) $1"
            ),
            None,
            &[name.into(), max_id.into()],
        )?;
        Ok(())
    })
    .map_err(internal)
}

/// What [`lower_mark_if_unchanged`] did to the local row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GivenBack {
    /// Nothing: the mark moved (or the row is gone, or nothing is unused).
    Nothing,
    /// A local segment's mark was lowered: done.
    Local,
}

/// Gives back the unused numbers of segment `name` (`work::give_back`): if its mark is still
/// `mark`, lowers it to `new_mark`. The row is locked without waiting (55P03 if someone holds
/// it). A local segment's commit is asynchronous (`synchronous_commit = off` for this
/// transaction): a give-back is never needed for uniqueness, so nothing waits for it.
///
/// A global segment gives nothing back (DESIGN.md §6): its mark is the registry's, and a gap
/// in its numbers costs nothing, while lowering a mark other nodes take from is where numbers
/// could be handed out twice.
pub(crate) fn lower_mark_if_unchanged(
    name: &str,
    mark: i64,
    new_mark: i64,
) -> Result<GivenBack, Error> {
    let table = table()?;
    let (t, scope) = (&table.name, table.scope());
    // The locks of the table and of its indexes first, without waiting: the row's NOWAIT below
    // covers neither the table's lock nor its indexes' (`ALTER INDEX ... SET TABLESPACE` locks
    // only the index), and a give-back runs with interrupts held off, where lock_timeout and a
    // cancel cannot end a wait (a session holding one of them, an uncommitted `ALTER EXTENSION
    // idgen UPDATE` say, would stop the allocator until it ends). ROW EXCLUSIVE is what the
    // UPDATE of `set_max_id` takes on each.
    lock_without_waiting(t)?;
    let current = Spi::connect(|client| {
        let rows = client.select(
            &format!(
                "SELECT max_id, {scope} OPERATOR(pg_catalog.=) 'global' FROM {t} \
                 WHERE name OPERATOR(pg_catalog.=) $1 FOR UPDATE NOWAIT"
            ),
            Some(1),
            &[name.into()],
        )?;
        if rows.is_empty() {
            return Ok(None);
        }
        rows.first().get_two::<i64, bool>().map(Some)
    })
    .map_err(internal)?;
    match current {
        Some((Some(m), Some(false))) if m == mark && new_mark < mark => {}
        _ => return Ok(GivenBack::Nothing),
    }
    Spi::run("SET LOCAL synchronous_commit = off").map_err(internal)?;
    set_max_id(name, new_mark)?;
    Ok(GivenBack::Local)
}

/// Takes ROW EXCLUSIVE on table `t` (quoted, qualified) and on each of its indexes if no other
/// session holds a conflicting lock; 55P03 (nothing waited for) otherwise. The locks last until
/// the transaction ends.
fn lock_without_waiting(t: &str) -> Result<(), Error> {
    let relations = Spi::connect(|client| {
        let rows = client.select(
            "SELECT c.oid FROM pg_catalog.pg_class c \
              WHERE c.oid OPERATOR(pg_catalog.=) pg_catalog.to_regclass($1) \
             UNION ALL \
             SELECT i.indexrelid FROM pg_catalog.pg_index i \
              WHERE i.indrelid OPERATOR(pg_catalog.=) pg_catalog.to_regclass($1)",
            None,
            &[t.into()],
        )?;
        rows.map(|r| r.get::<pg_sys::Oid>(1))
            .collect::<Result<Vec<_>, _>>()
    })
    .map_err(internal)?;
    for relid in relations.into_iter().flatten() {
        // SAFETY: in a transaction; a conditional lock never waits and raises no error.
        let locked = unsafe {
            pg_sys::ConditionalLockRelationOid(relid, pg_sys::RowExclusiveLock as pg_sys::LOCKMODE)
        };
        if !locked {
            return Err(Error::Relayed {
                sqlstate: PgSqlErrorCode::ERRCODE_LOCK_NOT_AVAILABLE as i32,
                message: format!("{t} or one of its indexes is locked by another session"),
                detail: None,
                hint: None,
            });
        }
    }
    Ok(())
}

/// Inserts a segment (`global`: its marks are in the registry); false if the name exists.
/// Before 0.3.0's SQL (no `scope` column) only local segments exist, and the SQL of that
/// version's `segment_create` has no `scope` argument to ask for another.
pub(crate) fn insert(
    name: &str,
    max_id: i64,
    step: i32,
    description: Option<&str>,
    global: bool,
    cache: u32,
) -> Result<bool, Error> {
    let Table {
        name: t,
        scoped,
        cached,
    } = table()?;
    if !cached && cache != 1 {
        return Err(Error::CacheNeedsUpdate);
    }
    let (columns, values) = match (scoped, cached) {
        (true, true) => (", scope, cache", ", $5, $6"),
        (true, false) => (", scope", ", $5"),
        _ => ("", ""),
    };
    let scope = if global { "global" } else { "local" };
    Spi::connect_mut(|client| {
        let rows = client.update(
            &format!(
                "INSERT INTO {t} (name, max_id, step, description{columns}) \
                 VALUES ($1, $2, $3, $4{values}) ON CONFLICT (name) DO NOTHING RETURNING name"
            ),
            None,
            &[
                name.into(),
                max_id.into(),
                step.into(),
                description.into(),
                scope.into(),
                (cache as i32).into(),
            ],
        )?;
        Ok(!rows.is_empty())
    })
    .map_err(internal)
}

/// Changes a segment's step (`None`: keep), description (`None`: keep, `Some(None)`: clear)
/// and per-backend cache (`None`: keep); returns the step and the cache now in force.
pub(crate) fn alter(
    name: &str,
    step: Option<i32>,
    description: Option<Option<&str>>,
    cache: Option<u32>,
) -> Result<(i64, u32), Error> {
    let table = table()?;
    let t = &table.name;
    if !table.cached && cache.is_some_and(|c| c != 1) {
        return Err(Error::CacheNeedsUpdate);
    }
    let (set_cache, cache_out) = if table.cached {
        (", cache = COALESCE($5, cache)", "cache")
    } else {
        ("", "1")
    };
    let row = Spi::connect_mut(|client| {
        let rows = client.update(
            &format!(
                "UPDATE {t} SET step = COALESCE($2, step), \
                 description = CASE WHEN $3 THEN $4 ELSE description END{set_cache}, \
                 updated_at = pg_catalog.now() \
                 WHERE name OPERATOR(pg_catalog.=) $1 RETURNING step, {cache_out}"
            ),
            None,
            &[
                name.into(),
                step.into(),
                description.is_some().into(),
                description.flatten().into(),
                cache.map(|c| c as i32).into(),
            ],
        )?;
        if rows.is_empty() {
            return Ok(None);
        }
        rows.first().get_two::<i32, i32>().map(Some)
    })
    .map_err(internal)?;
    step_and_cache(name, row)
}

/// Deletes a segment; false if it did not exist.
pub(crate) fn delete(name: &str) -> Result<bool, Error> {
    let t = table()?.name;
    Spi::connect_mut(|client| {
        let rows = client.update(
            &format!("DELETE FROM {t} WHERE name OPERATOR(pg_catalog.=) $1 RETURNING name"),
            None,
            &[name.into()],
        )?;
        Ok(!rows.is_empty())
    })
    .map_err(internal)
}

/// The local segment with the highest high-water mark, `(name, max_id)`; `None` without
/// local segments (global ones do not interleave).
pub(crate) fn highest_mark() -> Result<Option<(String, i64)>, Error> {
    let table = table()?;
    let (t, scope) = (&table.name, table.scope());
    Spi::connect(|client| {
        let rows = client.select(
            &format!(
                "SELECT name, max_id FROM {t} WHERE {scope} OPERATOR(pg_catalog.=) 'local' \
                 ORDER BY max_id DESC LIMIT 1"
            ),
            Some(1),
            &[],
        )?;
        if rows.is_empty() {
            return Ok(None);
        }
        rows.first().get_two::<String, i64>().map(Some)
    })
    .map_err(internal)
    .map(|row| match row {
        Some((Some(name), Some(max_id))) => Some((name, max_id)),
        _ => None,
    })
}
