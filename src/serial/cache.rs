//! A backend's cache of serial definitions, so that a draw reads no table: per name, the
//! definition as the current role may use it (parsed format, resolved time zone, whether the
//! role has USAGE) and where its counter is cached in shared memory. Dropped whenever the serial
//! catalog's generation moves (a transaction that changed a serial or a grant committed, see
//! [`note_change`]), the role changes (`SET ROLE`, a `SECURITY DEFINER` caller), role
//! memberships change (a syscache callback), or this transaction's own change is undone.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;

use pgrx::pg_sys;
use pgrx::prelude::*;

use super::catalog::{self, Arg, Place};
use super::format::{Format, Reset};
use super::shared::{self, Cached};
use super::zone::Zone;
use crate::error::Error;

/// A serial as a draw needs it.
pub(crate) struct Def {
    pub(crate) id: i64,
    pub(crate) name: String,
    pub(crate) format: Format,
    /// The format as written.
    pub(crate) format_text: String,
    pub(crate) reset: Reset,
    pub(crate) zone: Zone,
    pub(crate) gapless: bool,
    pub(crate) global: bool,
    /// The role the cache was filled for may draw from it.
    pub(crate) may_use: bool,
    /// The OID of `idgen_serial` (part of the shared-memory key).
    pub(crate) catalog: pg_sys::Oid,
    /// Where its current period's counter is cached.
    pub(crate) slot: Option<Cached>,
}

struct State {
    generation: u64,
    role: pg_sys::Oid,
    place: Option<Place>,
    defs: HashMap<String, Def>,
}

thread_local! {
    static STATE: RefCell<State> = RefCell::new(State {
        generation: u64::MAX,
        role: pg_sys::InvalidOid,
        place: None,
        defs: HashMap::new(),
    });
    /// This transaction changed a serial or a grant: its commit bumps the generation.
    static CHANGED: Cell<bool> = const { Cell::new(false) };
    static CALLBACKS: Cell<bool> = const { Cell::new(false) };
    /// The cache is to be emptied at its next use (set by callbacks, which may run while it is
    /// in use: invalidations are processed when a lock is taken).
    static STALE: Cell<bool> = const { Cell::new(false) };
    /// `idgen_serial`'s OID as cached: an invalidation of that relation (the extension dropped,
    /// created again elsewhere) empties the cache.
    static SERIALS_OID: Cell<pg_sys::Oid> = const { Cell::new(pg_sys::InvalidOid) };
}

/// Empties this backend's cache (at its next use).
pub(crate) fn clear() {
    STALE.set(true);
}

/// Runs `body` on the definition of serial `name` as the current role sees it. Errors: 42704
/// no such serial; 55000 idgen is not installed here.
pub(crate) fn with_def<R>(
    name: &str,
    body: impl FnOnce(&mut Def, &Place) -> Result<R, Error>,
) -> Result<R, Error> {
    register_callbacks();
    let generation = shared::catalog_generation();
    let role = catalog::current_role();
    STATE.with_borrow_mut(|s| {
        if STALE.replace(false) {
            s.place = None;
            s.generation = u64::MAX;
        }
        if s.generation != generation || s.role != role {
            s.defs.clear();
            s.place = None;
            s.generation = generation;
            s.role = role;
        }
        if s.place.is_none() {
            let place = catalog::place()?;
            SERIALS_OID.set(place.serials);
            s.place = Some(place);
        }
        let place = s.place.as_ref().expect("set above");
        if !s.defs.contains_key(name) {
            let def = load(place, name, role)?;
            s.defs.insert(name.to_owned(), def);
        }
        let def = s.defs.get_mut(name).expect("inserted above");
        body(def, place)
    })
}

/// Reads serial `name` for `role`.
fn load(place: &Place, name: &str, role: pg_sys::Oid) -> Result<Def, Error> {
    // A grant counts while its role has the name and the OID recorded (an entry restored
    // without its OID counts for nobody); before the 0.8.0 update, by name.
    let sql = if place.role_oids {
        "SELECT s.id, s.format, s.reset, s.time_zone, s.gapless, s.scope = 'global',
                $2 OR s.usage_public
                   OR EXISTS (SELECT FROM ROWS FROM (pg_catalog.unnest(s.usage_roles),
                                                     pg_catalog.unnest(s.usage_role_oids)) g(n, o)
                                JOIN pg_catalog.pg_roles r ON r.oid = g.o AND r.rolname = g.n
                               WHERE pg_catalog.pg_has_role($3, r.oid, 'USAGE'))
           FROM $S.idgen_serial s WHERE s.name = $1"
    } else {
        "SELECT s.id, s.format, s.reset, s.time_zone, s.gapless, s.scope = 'global',
                $2 OR s.usage_public
                   OR EXISTS (SELECT FROM pg_catalog.unnest(s.usage_roles) g
                                JOIN pg_catalog.pg_roles r ON r.rolname = g
                               WHERE pg_catalog.pg_has_role($3, r.oid, 'USAGE'))
           FROM $S.idgen_serial s WHERE s.name = $1"
    };
    let rows = catalog::run(
        place,
        sql,
        &[
            Arg::Text(Some(name)),
            Arg::Bool(catalog::is_superuser(role)),
            Arg::Oid(role),
        ],
        1,
    );
    let Some(row) = rows.first() else {
        return Err(Error::UnknownSerial {
            name: name.chars().take(40).collect(),
        });
    };
    let corrupt = || Error::InvalidSerialArgument {
        why: format!("serial \"{name}\" has an invalid definition"),
    };
    let format_text = row.text(1).ok_or_else(corrupt)?;
    let format = Format::parse(&format_text).map_err(|_| corrupt())?;
    let reset = Reset::parse(&row.text(2).ok_or_else(corrupt)?).ok_or_else(corrupt)?;
    Ok(Def {
        id: row.int8(0).ok_or_else(corrupt)?,
        name: name.to_owned(),
        format,
        format_text,
        reset,
        zone: Zone::resolve(&row.text(3).ok_or_else(corrupt)?)?,
        gapless: row.bool(4).ok_or_else(corrupt)?,
        global: row.bool(5).ok_or_else(corrupt)?,
        may_use: row.bool(6).unwrap_or(false),
        catalog: place.serials,
        slot: None,
    })
}

/// This transaction changed a serial or a grant: the backend's own cache is dropped now (its
/// next draw sees the change) and every backend's when the transaction commits.
pub(crate) fn note_change() {
    register_callbacks();
    CHANGED.set(true);
    clear();
}

fn register_callbacks() {
    if CALLBACKS.get() {
        return;
    }
    // SAFETY: registers callbacks with the signatures PostgreSQL calls, once per process; they
    // touch only this process's statics and shared memory's atomics, and raise no error.
    unsafe {
        pg_sys::RegisterXactCallback(Some(on_xact), std::ptr::null_mut());
        pg_sys::RegisterSubXactCallback(Some(on_subxact), std::ptr::null_mut());
        pg_sys::CacheRegisterSyscacheCallback(
            pg_sys::SysCacheIdentifier::AUTHMEMROLEMEM as i32,
            Some(on_roles),
            pg_sys::Datum::from(0),
        );
        pg_sys::CacheRegisterSyscacheCallback(
            pg_sys::SysCacheIdentifier::AUTHOID as i32,
            Some(on_roles),
            pg_sys::Datum::from(0),
        );
        // A renamed schema: the cached place names it in SQL.
        pg_sys::CacheRegisterSyscacheCallback(
            pg_sys::SysCacheIdentifier::NAMESPACEOID as i32,
            Some(on_roles),
            pg_sys::Datum::from(0),
        );
        pg_sys::CacheRegisterRelcacheCallback(Some(on_relation), pg_sys::Datum::from(0));
    }
    CALLBACKS.set(true);
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn on_xact(event: pg_sys::XactEvent::Type, _arg: *mut std::ffi::c_void) {
    use pg_sys::XactEvent::*;
    if !CHANGED.get() {
        return;
    }
    match event {
        // The other backends' caches are told at the commit, in this backend: a prepared
        // transaction is committed elsewhere, later.
        XACT_EVENT_PRE_PREPARE => {
            pgrx::ereport!(
                ERROR,
                PgSqlErrorCode::ERRCODE_FEATURE_NOT_SUPPORTED,
                "cannot PREPARE a transaction that changed idgen serials"
            );
        }
        XACT_EVENT_COMMIT | XACT_EVENT_PARALLEL_COMMIT => {
            CHANGED.set(false);
            shared::bump_catalog_generation();
            clear();
        }
        XACT_EVENT_ABORT | XACT_EVENT_PARALLEL_ABORT => {
            CHANGED.set(false);
            clear();
        }
        _ => {}
    }
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn on_subxact(
    event: pg_sys::SubXactEvent::Type,
    _my: pg_sys::SubTransactionId,
    _parent: pg_sys::SubTransactionId,
    _arg: *mut std::ffi::c_void,
) {
    if CHANGED.get() && event == pg_sys::SubXactEvent::SUBXACT_EVENT_ABORT_SUB {
        clear();
    }
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn on_relation(_arg: pg_sys::Datum, relid: pg_sys::Oid) {
    if relid == pg_sys::InvalidOid || relid == SERIALS_OID.get() {
        clear();
    }
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn on_roles(_arg: pg_sys::Datum, _cache: i32, _hash: u32) {
    clear();
}
