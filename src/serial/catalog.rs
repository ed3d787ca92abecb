//! SQL on the serial tables (`idgen_serial`, `idgen_serial_counter`), run with the rights of
//! their owner (the extension's owner) for a caller the SQL functions have already checked,
//! with `search_path` pinned to `pg_catalog, pg_temp` and every table qualified with the
//! extension's schema: no object of a schema a user can write takes part (PostgreSQL's
//! "Security Considerations for Extension Scripts"; the escalation through an overload of
//! `segment_create` that idgen 0.4.0's `SECURITY DEFINER` PL/pgSQL allowed).
//!
//! Statements read and write with the newest snapshot (`GetLatestSnapshot`), as PostgreSQL's
//! catalogs are read: a serial created or dropped after a REPEATABLE READ transaction's
//! snapshot is seen as it is now, and a gapless counter is incremented from its last committed
//! value once the serial's lock is held (so such a transaction neither misses a serial nor
//! fails with a serialization error on the counter).

use std::ffi::CString;

use pgrx::pg_sys;
use pgrx::prelude::*;
use pgrx::{FromDatum, IntoDatum};

use crate::error::Error;

/// A value bound to a statement parameter.
pub(crate) enum Arg<'a> {
    Int8(i64),
    /// A bigint that may be NULL.
    Int8Null(Option<i64>),
    Oid(pg_sys::Oid),
    Text(Option<&'a str>),
    Bool(bool),
}

impl Arg<'_> {
    fn type_oid(&self) -> pg_sys::Oid {
        match self {
            Arg::Int8(_) | Arg::Int8Null(_) => pg_sys::INT8OID,
            Arg::Oid(_) => pg_sys::OIDOID,
            Arg::Text(_) => pg_sys::TEXTOID,
            Arg::Bool(_) => pg_sys::BOOLOID,
        }
    }

    fn datum(&self) -> Option<pg_sys::Datum> {
        match self {
            Arg::Int8(v) => v.into_datum(),
            Arg::Int8Null(v) => v.and_then(|v| v.into_datum()),
            // Not `into_datum`, which binds InvalidOid (PUBLIC's 0) as NULL.
            Arg::Oid(v) => Some(pg_sys::Datum::from(v.to_u32())),
            Arg::Text(v) => v.and_then(|t| t.into_datum()),
            Arg::Bool(v) => v.into_datum(),
        }
    }
}

thread_local! {
    /// This backend's prepared statements, by their text (the schema substituted).
    static PLANS: std::cell::RefCell<std::collections::HashMap<CString, pg_sys::SPIPlanPtr>> =
        std::cell::RefCell::new(std::collections::HashMap::new());
}

/// One result row, its columns read by [`Row::int8`] and friends.
pub(crate) struct Row(Vec<Option<Value>>);

#[derive(Clone)]
enum Value {
    Int8(i64),
    Text(String),
    Bool(bool),
}

impl Row {
    pub(crate) fn int8(&self, i: usize) -> Option<i64> {
        match self.0.get(i)?.as_ref()? {
            Value::Int8(v) => Some(*v),
            _ => None,
        }
    }

    pub(crate) fn text(&self, i: usize) -> Option<String> {
        match self.0.get(i)?.as_ref()? {
            Value::Text(v) => Some(v.clone()),
            _ => None,
        }
    }

    pub(crate) fn bool(&self, i: usize) -> Option<bool> {
        match self.0.get(i)?.as_ref()? {
            Value::Bool(v) => Some(*v),
            _ => None,
        }
    }
}

/// Where the serial tables are: the extension's schema (quoted) and the tables' owner.
pub(crate) struct Place {
    pub(crate) schema: String,
    pub(crate) owner: pg_sys::Oid,
    /// `idgen_serial`'s OID: the class of the serials' object locks.
    pub(crate) serials: pg_sys::Oid,
    /// Whether `idgen_serial` has `usage_role_oids` (idgen 0.8.0): until the database's
    /// `ALTER EXTENSION idgen UPDATE`, grants are kept and matched by name only, as before.
    pub(crate) role_oids: bool,
    /// `idgen_serial_dropped`'s OID (idgen 0.9.0), the table of the extension (a member of it,
    /// not merely a relation of that name: before the update, the database owner could create
    /// one in idgen's schema, and serial functions write it as the extension's owner). None
    /// until the database's
    /// `ALTER EXTENSION idgen UPDATE`: a drop then keeps nothing of the name, as before.
    pub(crate) dropped: Option<pg_sys::Oid>,
}

/// Finds the extension's schema and the owner of `idgen_serial`. Errors: 55000 idgen is not
/// installed in this database (or the caller's transaction cannot see it yet).
pub(crate) fn place() -> Result<Place, Error> {
    let row = Spi::connect(|client| {
        client
            .select(
                "SELECT pg_catalog.quote_ident(n.nspname)::text, c.relowner, c.oid,
                        EXISTS (SELECT FROM pg_catalog.pg_attribute a
                                 WHERE a.attrelid OPERATOR(pg_catalog.=) c.oid
                                   AND a.attname OPERATOR(pg_catalog.=) 'usage_role_oids'::pg_catalog.name
                                   AND NOT a.attisdropped),
                        (SELECT d.oid FROM pg_catalog.pg_class d
                           JOIN pg_catalog.pg_depend x
                             ON x.classid OPERATOR(pg_catalog.=) 1259::pg_catalog.oid
                            AND x.objid OPERATOR(pg_catalog.=) d.oid
                            AND x.objsubid OPERATOR(pg_catalog.=) 0
                            AND x.refclassid OPERATOR(pg_catalog.=) 3079::pg_catalog.oid
                            AND x.refobjid OPERATOR(pg_catalog.=) e.oid
                            AND x.deptype OPERATOR(pg_catalog.=) 'e'::pg_catalog.\"char\"
                          WHERE d.relnamespace OPERATOR(pg_catalog.=) n.oid
                            AND d.relname OPERATOR(pg_catalog.=) 'idgen_serial_dropped'::pg_catalog.name
                            AND d.relkind OPERATOR(pg_catalog.=) 'r'::pg_catalog.\"char\")
                   FROM pg_catalog.pg_extension e
                   JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) e.extnamespace
                   JOIN pg_catalog.pg_class c ON c.relnamespace OPERATOR(pg_catalog.=) n.oid
                        AND c.relname OPERATOR(pg_catalog.=) 'idgen_serial'::pg_catalog.name
                  WHERE e.extname OPERATOR(pg_catalog.=) 'idgen'::pg_catalog.name",
                None,
                &[],
            )
            .and_then(|t| {
                let mut out = None;
                for r in t {
                    out = Some((
                        r.get::<String>(1)?,
                        r.get::<pg_sys::Oid>(2)?,
                        r.get::<pg_sys::Oid>(3)?,
                        r.get::<bool>(4)?,
                        r.get::<pg_sys::Oid>(5)?,
                    ));
                }
                Ok(out)
            })
    })
    .map_err(|e| Error::Relayed {
        sqlstate: PgSqlErrorCode::ERRCODE_INTERNAL_ERROR as i32,
        message: format!("idgen: reading the extension's schema failed: {e}"),
        detail: None,
        hint: None,
    })?;
    match row {
        Some((Some(schema), Some(owner), Some(serials), Some(role_oids), dropped)) => Ok(Place {
            schema,
            owner,
            serials,
            role_oids,
            dropped,
        }),
        _ => Err(Error::ExtensionNotVisible),
    }
}

/// Runs `sql` (with `$S` standing for the extension's schema) as the owner of the serial
/// tables, with `search_path` pinned and the newest snapshot, binding `args` to `$1...`;
/// returns its rows (at most `limit`, 0 for all). A PostgreSQL error propagates as usual (the
/// user id, security context and `search_path` are restored by the transaction's or
/// subtransaction's abort).
pub(crate) fn run(place: &Place, sql: &str, args: &[Arg<'_>], limit: i64) -> Vec<Row> {
    let sql = CString::new(sql.replace("$S", &place.schema)).expect("no NUL in idgen's SQL");
    let types: Vec<pg_sys::Oid> = args.iter().map(Arg::type_oid).collect();
    let datums: Vec<Option<pg_sys::Datum>> = args.iter().map(Arg::datum).collect();
    let mut values: Vec<pg_sys::Datum> = datums
        .iter()
        .map(|d| d.unwrap_or(pg_sys::Datum::from(0)))
        .collect();
    let nulls: Vec<std::ffi::c_char> = datums
        .iter()
        .map(|d| if d.is_some() { b' ' } else { b'n' } as std::ffi::c_char)
        .collect();
    as_owner(place.owner, || {
        // SAFETY: SPI used as documented, in a transaction: connect, prepare, execute with a
        // snapshot, copy the rows out, finish. An error raised inside unwinds through here;
        // PostgreSQL's abort cleans SPI up (AtEOXact_SPI / AtEOSubXact_SPI).
        unsafe {
            if pg_sys::SPI_connect() != pg_sys::SPI_OK_CONNECT as i32 {
                pgrx::error!("idgen: SPI_connect failed");
            }
            let plan = match PLANS.with_borrow(|p| p.get(&sql).copied()) {
                Some(plan) => plan,
                None => {
                    let plan = pg_sys::SPI_prepare(
                        sql.as_ptr(),
                        types.len() as i32,
                        types.as_ptr() as *mut pg_sys::Oid,
                    );
                    if plan.is_null() {
                        pgrx::error!("idgen: SPI_prepare failed");
                    }
                    // Kept for the life of the backend: a draw does not parse and plan its
                    // statement again (PostgreSQL's plan cache replans it when a table changes).
                    if pg_sys::SPI_keepplan(plan) != 0 {
                        pgrx::error!("idgen: SPI_keepplan failed");
                    }
                    PLANS.with_borrow_mut(|p| p.insert(sql.clone(), plan));
                    plan
                }
            };
            let rc = pg_sys::SPI_execute_snapshot(
                plan,
                values.as_mut_ptr(),
                nulls.as_ptr(),
                pg_sys::GetLatestSnapshot(),
                std::ptr::null_mut(),
                false,
                false,
                limit,
            );
            if rc < 0 {
                pgrx::error!("idgen: SPI_execute_snapshot failed: {rc}");
            }
            let rows = copy_rows();
            pg_sys::SPI_finish();
            rows
        }
    })
}

/// Copies the rows of the last SPI statement out of SPI's memory.
///
/// SAFETY: called right after a successful SPI execution, before `SPI_finish`.
unsafe fn copy_rows() -> Vec<Row> {
    let table = pg_sys::SPI_tuptable;
    if table.is_null() {
        return Vec::new();
    }
    let desc = (*table).tupdesc;
    let natts = (*desc).natts as usize;
    let n = pg_sys::SPI_processed as usize;
    let mut rows = Vec::with_capacity(n);
    for i in 0..n {
        let tuple = *(*table).vals.add(i);
        let mut row = Vec::with_capacity(natts);
        for col in 1..=natts {
            let mut isnull = false;
            let datum = pg_sys::SPI_getbinval(tuple, desc, col as i32, &mut isnull);
            let typ = pg_sys::SPI_gettypeid(desc, col as i32);
            let value = if isnull {
                None
            } else if typ == pg_sys::INT8OID {
                i64::from_datum(datum, false).map(Value::Int8)
            } else if typ == pg_sys::BOOLOID {
                bool::from_datum(datum, false).map(Value::Bool)
            } else if typ == pg_sys::TEXTOID {
                String::from_datum(datum, false).map(Value::Text)
            } else {
                None
            };
            row.push(value);
        }
        rows.push(Row(row));
    }
    rows
}

/// Runs `body` as `owner` (`SECURITY_LOCAL_USERID_CHANGE | SECURITY_RESTRICTED_OPERATION`,
/// what PostgreSQL's maintenance commands do) with `search_path = pg_catalog, pg_temp`; both
/// restored afterwards, and by the abort of the (sub)transaction on an error.
fn as_owner<T>(owner: pg_sys::Oid, body: impl FnOnce() -> T) -> T {
    let mut saved_user = pg_sys::InvalidOid;
    let mut saved_context = 0;
    // SAFETY: in a transaction (SQL functions are); the user id and security context changed
    // here are restored below, or by the (sub)transaction's abort on an error
    // (AbortTransaction / AbortSubTransaction reset both).
    unsafe {
        pg_sys::GetUserIdAndSecContext(&mut saved_user, &mut saved_context);
        pg_sys::SetUserIdAndSecContext(
            owner,
            saved_context
                | pg_sys::SECURITY_LOCAL_USERID_CHANGE as i32
                | pg_sys::SECURITY_RESTRICTED_OPERATION as i32,
        );
    }
    let result = crate::backend::with_search_path(c"pg_catalog, pg_temp", body);
    // SAFETY: restores what was changed above.
    unsafe { pg_sys::SetUserIdAndSecContext(saved_user, saved_context) };
    result
}

/// Checks a serial's time zone: an IANA zone name exactly as `pg_timezone_names` lists it.
/// Errors: 22023 anything else (an abbreviation, a POSIX offset, a name in another case).
pub(crate) fn check_zone(zone: &str) -> Result<(), Error> {
    let found = Spi::get_one_with_args::<bool>(
        "SELECT EXISTS (SELECT FROM pg_catalog.pg_timezone_names z
                         WHERE z.name OPERATOR(pg_catalog.=) $1)",
        &[zone.into()],
    )
    .ok()
    .flatten()
    .unwrap_or(false);
    if found && super::zone::Zone::resolve(zone).is_ok() {
        Ok(())
    } else {
        Err(Error::InvalidSerialTimeZone {
            zone: zone.chars().take(64).collect(),
        })
    }
}

/// The role `name` ('public': every role) as an OID (0 for PUBLIC).
/// Errors: 42704 no such role.
pub(crate) fn role_oid(name: &str) -> Result<pg_sys::Oid, Error> {
    // As PostgreSQL's privilege functions read a role given as text: only 'public' exactly is
    // PUBLIC ("Public" may be a role).
    if name == "public" {
        return Ok(pg_sys::InvalidOid);
    }
    let c = CString::new(name).map_err(|_| Error::InvalidSerialArgument {
        why: "a role name cannot contain NUL".into(),
    })?;
    // SAFETY: a NUL-terminated name; missing_ok = true returns InvalidOid instead of raising.
    let oid = unsafe { pg_sys::get_role_oid(c.as_ptr(), true) };
    if oid == pg_sys::InvalidOid {
        return Err(Error::Relayed {
            sqlstate: PgSqlErrorCode::ERRCODE_UNDEFINED_OBJECT as i32,
            message: format!(
                "role \"{}\" does not exist",
                name.chars().take(64).collect::<String>()
            ),
            detail: None,
            hint: None,
        });
    }
    Ok(oid)
}

/// Whether `role` is a superuser.
pub(crate) fn is_superuser(role: pg_sys::Oid) -> bool {
    // SAFETY: a syscache lookup by OID; raises no error for a missing role (false).
    unsafe { pg_sys::superuser_arg(role) }
}

/// The role the SQL functions act for: the current user (`GetUserId`), as privilege checks
/// of PostgreSQL's own objects use.
pub(crate) fn current_role() -> pg_sys::Oid {
    // SAFETY: reads a backend global.
    unsafe { pg_sys::GetUserId() }
}

/// Takes the serial's lock (an object lock on (`idgen_serial`, `id`), held to the end of the
/// transaction): gapless draws of one serial queue on it in arrival order, so none fails for
/// contention; cancellable, and the deadlock detector sees it.
pub(crate) fn lock_serial(place: &Place, id: i64) {
    // SAFETY: in a transaction; LockDatabaseObject waits interruptibly and raises on deadlock.
    unsafe {
        pg_sys::LockDatabaseObject(
            place.serials,
            pg_sys::Oid::from(id as u32),
            (id >> 32) as u16,
            pg_sys::ExclusiveLock as i32,
        )
    };
}

/// Quotes `s` as an SQL literal (for messages only).
pub(crate) fn literal(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}
