//! The segment cache's hooks into PostgreSQL's commands (DESIGN.md §2):
//!
//! * `object_access_hook`: when `idgen_segment` (the extension) or a whole database is dropped,
//!   that database's cached ranges are forgotten as the drop commits (and a dropped database's
//!   allocator retired at once), so a re-created segment can never hand out numbers cached from
//!   the old table; a drop that fails or rolls back keeps them.
//! * `ProcessUtility_hook`: before a command that needs a database without other sessions
//!   (`CREATE DATABASE ... TEMPLATE x`, `ALTER DATABASE x RENAME`, `ALTER DATABASE x SET
//!   TABLESPACE`), x's allocator is asked to leave, as `DROP DATABASE` already makes it; after
//!   `DISCARD SEQUENCES` or `DISCARD ALL`, this session's blocks and `segment_currval`s (and
//!   `snowflake_currval()`) are forgotten, as a sequence's are.

use std::cell::{Cell, RefCell};
use std::ffi::{c_char, c_void, CStr};

use pgrx::pg_sys;
use pgrx::prelude::*;

use super::allocator::launcher::evict_allocator;
use super::cache::{attached, lock};
use crate::backend;
use crate::hooks::HookChain;

static OBJECT_ACCESS: HookChain<pg_sys::object_access_hook_type> = HookChain::new();
static PROCESS_UTILITY: HookChain<pg_sys::ProcessUtility_hook_type> = HookChain::new();

/// Installs both hooks. Called once from `_PG_init`, in the postmaster.
pub(crate) fn install() {
    // SAFETY: _PG_init of the postmaster (idgen refuses to load anywhere else), on its only
    // thread and before any backend exists: HookChain::install's contract.
    unsafe {
        OBJECT_ACCESS.install(&raw mut pg_sys::object_access_hook, Some(object_access));
        PROCESS_UTILITY.install(&raw mut pg_sys::ProcessUtility_hook, Some(process_utility));
    }
}

/// The `object_access_hook`: the previous hook, then [`on_drop`] for a dropped object.
///
/// # Safety
/// Called by PostgreSQL as `object_access_hook`, with a valid object address.
#[pg_guard]
unsafe extern "C-unwind" fn object_access(
    access: pg_sys::ObjectAccessType::Type,
    class_id: pg_sys::Oid,
    object_id: pg_sys::Oid,
    sub_id: i32,
    arg: *mut c_void,
) {
    if let Some(previous) = OBJECT_ACCESS.previous() {
        // SAFETY: the hook installed before ours, with the arguments PostgreSQL gave ours.
        unsafe { previous(access, class_id, object_id, sub_id, arg) };
    }
    if access == pg_sys::ObjectAccessType::OAT_DROP && sub_id == 0 {
        on_drop(class_id, object_id);
    }
}

/// The `ProcessUtility_hook`. Not `#[pg_guard]`ed: the command runs in PostgreSQL's own error
/// handling, and an ERROR it raises passes through this frame (which owns nothing to drop)
/// untouched, with every field of the report. Only the look at the statement is Rust.
///
/// # Safety
/// Called by PostgreSQL as `ProcessUtility_hook`, with the arguments of `standard_ProcessUtility`.
#[allow(clippy::too_many_arguments)]
unsafe extern "C-unwind" fn process_utility(
    pstmt: *mut pg_sys::PlannedStmt,
    query_string: *const c_char,
    read_only_tree: bool,
    context: pg_sys::ProcessUtilityContext::Type,
    params: pg_sys::ParamListInfo,
    query_env: *mut pg_sys::QueryEnvironment,
    dest: *mut pg_sys::DestReceiver,
    qc: *mut pg_sys::QueryCompletion,
) {
    // SAFETY: PostgreSQL passes the hook a valid planned utility statement.
    unsafe { before_utility(pstmt) };
    // SAFETY: the hook installed before ours (or PostgreSQL's own standard function, its symbol
    // rather than pgrx's guarded wrapper), with the arguments PostgreSQL gave ours.
    unsafe {
        let next = PROCESS_UTILITY
            .previous()
            .unwrap_or(standard_ProcessUtility);
        next(
            pstmt,
            query_string,
            read_only_tree,
            context,
            params,
            query_env,
            dest,
            qc,
        );
    }
    // SAFETY: the same statement, after it ran without an error.
    unsafe { after_utility(pstmt) };
}

/// After a utility command: `DISCARD SEQUENCES` and `DISCARD ALL` forget this session's
/// segment blocks, `segment_currval`s and `snowflake_currval()`, as they forget sequences'
/// cached values and `currval`s (PostgreSQL's `ResetSequenceCaches`): a pooler that resets a
/// session with `DISCARD ALL` never shows its next client the previous client's values.
///
/// # Safety
/// `pstmt` is the valid planned statement PostgreSQL passed to the hook.
#[pg_guard]
unsafe extern "C-unwind" fn after_utility(pstmt: *mut pg_sys::PlannedStmt) {
    // SAFETY: `pstmt` is the planned statement PostgreSQL passed to the hook; its utilityStmt
    // is a parse node or NULL, and its tag says which struct it is.
    let discards = unsafe {
        let stmt = (*pstmt).utilityStmt;
        !stmt.is_null()
            && (*stmt).type_ == pg_sys::NodeTag::T_DiscardStmt
            && matches!(
                (*stmt.cast::<pg_sys::DiscardStmt>()).target,
                pg_sys::DiscardMode::DISCARD_ALL | pg_sys::DiscardMode::DISCARD_SEQUENCES
            )
    };
    if discards {
        super::session::discard();
        crate::snowflake::discard_currval();
    }
}

extern "C-unwind" {
    fn standard_ProcessUtility(
        pstmt: *mut pg_sys::PlannedStmt,
        query_string: *const c_char,
        read_only_tree: bool,
        context: pg_sys::ProcessUtilityContext::Type,
        params: pg_sys::ParamListInfo,
        query_env: *mut pg_sys::QueryEnvironment,
        dest: *mut pg_sys::DestReceiver,
        qc: *mut pg_sys::QueryCompletion,
    );
}

/// Before a utility command: evicts the allocator of the database the command needs alone;
/// the hold on new allocators ends with the command's transaction (`allocators::end_holds`).
///
/// # Safety
/// `pstmt` is the valid planned statement PostgreSQL passed to the hook.
#[pg_guard]
unsafe extern "C-unwind" fn before_utility(pstmt: *mut pg_sys::PlannedStmt) {
    // SAFETY: `pstmt` is the planned statement PostgreSQL passed to the hook (this function's
    // contract); its utilityStmt is a parse node or NULL.
    let Some(db) = (unsafe { database_needed_alone((*pstmt).utilityStmt) }) else {
        return;
    };
    // Only for the database's owner (or a superuser), who may run these commands at all: a
    // command that fails its own permission check later must not keep anybody's allocator
    // away. Others get PostgreSQL's behaviour unchanged (55006 while the allocator is there).
    // SAFETY: a catalog lookup by oid and this backend's current user.
    if unsafe { crate::pgver::owns_database(db, pg_sys::GetUserId()) } {
        evict_allocator(db);
    }
}

/// The existing database that `stmt` needs without other sessions, if any: the template of
/// `CREATE DATABASE`, the database `ALTER DATABASE ... RENAME` renames or `ALTER DATABASE ...
/// SET TABLESPACE` moves. The command itself reports every error; this only looks.
///
/// # Safety
/// `stmt` is a valid parse node (or NULL).
unsafe fn database_needed_alone(stmt: *mut pg_sys::Node) -> Option<pg_sys::Oid> {
    if stmt.is_null() {
        return None;
    }
    // SAFETY: the node's tag says which struct it is.
    let name: *const c_char = unsafe {
        match (*stmt).type_ {
            pg_sys::NodeTag::T_CreatedbStmt => {
                let s = stmt.cast::<pg_sys::CreatedbStmt>();
                option_string((*s).options, c"template")?
            }
            pg_sys::NodeTag::T_AlterDatabaseStmt => {
                let s = stmt.cast::<pg_sys::AlterDatabaseStmt>();
                option_string((*s).options, c"tablespace")?;
                (*s).dbname
            }
            pg_sys::NodeTag::T_RenameStmt => {
                let s = stmt.cast::<pg_sys::RenameStmt>();
                if (*s).renameType != pg_sys::ObjectType::OBJECT_DATABASE {
                    return None;
                }
                (*s).subname
            }
            _ => return None,
        }
    };
    if name.is_null() {
        return None;
    }
    // SAFETY: a NUL-terminated name; missing_ok, so an unknown name is InvalidOid, not an error.
    let db = unsafe { pg_sys::get_database_oid(name, true) };
    (db != pg_sys::InvalidOid).then_some(db)
}

/// The string value of option `name` in a list of `DefElem`s, if given as a plain string or
/// identifier.
///
/// # Safety
/// `options` is a valid `List` of `DefElem` (or NULL).
unsafe fn option_string(options: *mut pg_sys::List, name: &CStr) -> Option<*const c_char> {
    // SAFETY: `options` is a List of DefElem pointers or NULL (this function's contract);
    // PgList only reads it.
    let options = unsafe { pgrx::PgList::<pg_sys::DefElem>::from_pg(options) };
    let found = options.iter_ptr().find_map(|def| {
        // SAFETY: DefElem pointers from the list; names are NUL-terminated.
        unsafe {
            if (*def).defname.is_null() || CStr::from_ptr((*def).defname) != name {
                return None;
            }
            let arg = (*def).arg;
            if arg.is_null() || (*arg).type_ != pg_sys::NodeTag::T_String {
                return None;
            }
            Some((*arg.cast::<pg_sys::String>()).sval.cast_const())
        }
    });
    found
}

/// `object_access_hook` part: when `idgen_segment` (the extension) or a whole database is
/// dropped, that database's cached ranges are forgotten once the drop commits, so a re-created
/// segment can never hand out numbers cached from the old table. The hook runs before the
/// command's own checks (PostgreSQL's `dropdb` calls it before "being accessed by other users"
/// and "cannot drop a template database"), and a transaction that drops the extension may roll
/// back: either way the database and its ranges stay, so only a commit releases them
/// ([`release_dropped`]). A dropped database's allocator is asked to leave at once, as
/// `DROP DATABASE` needs: it starts again on demand should the drop fail.
fn on_drop(class_id: pg_sys::Oid, object_id: pg_sys::Oid) {
    if !attached() {
        return;
    }
    if class_id == pg_sys::DatabaseRelationId {
        release_at_commit(object_id);
        lock().retire_allocator(object_id);
    } else if class_id == pg_sys::RelationRelationId && is_the_catalog(object_id) {
        release_at_commit(backend::database_id());
    }
}

thread_local! {
    /// Databases whose cached ranges this backend's transaction released by dropping them or
    /// their `idgen_segment`: released when it commits, forgotten when it aborts.
    static DROPPED: RefCell<Vec<pg_sys::Oid>> = const { RefCell::new(Vec::new()) };
}

/// Makes the commit of this backend's transaction release `db`'s cached ranges.
fn release_at_commit(db: pg_sys::Oid) {
    thread_local! {
        static REGISTERED: Cell<bool> = const { Cell::new(false) };
    }
    if !REGISTERED.get() {
        // SAFETY: registers a #[pg_guard]ed callback with the signature PostgreSQL calls, once
        // per process (REGISTERED), with no argument.
        unsafe { pg_sys::RegisterXactCallback(Some(release_dropped), std::ptr::null_mut()) };
        REGISTERED.set(true);
    }
    DROPPED.with_borrow_mut(|dropped| {
        if !dropped.contains(&db) {
            dropped.push(db);
        }
    });
}

/// Transaction callback: before the commit (or the PREPARE) of a transaction that dropped a
/// database or `idgen_segment`, releases that database's cached ranges; an abort releases
/// nothing. Before, not after: once the commit is visible, another session may create the
/// extension and the segment again, and must not find the old ranges cached. Should the
/// commit then fail, the ranges are only skipped (a gap). A drop in a subtransaction rolled
/// back to a savepoint still releases at the top-level commit: a gap, never a repeat.
///
/// # Safety
/// Called by PostgreSQL as a transaction callback (`RegisterXactCallback`); it only takes the
/// LWLock and writes plain data, so it cannot fail mid-commit.
#[pg_guard]
unsafe extern "C-unwind" fn release_dropped(
    event: pg_sys::XactEvent::Type,
    _arg: *mut std::ffi::c_void,
) {
    use pg_sys::XactEvent::*;
    match event {
        XACT_EVENT_PRE_COMMIT | XACT_EVENT_PARALLEL_PRE_COMMIT | XACT_EVENT_PRE_PREPARE => {
            let dropped = DROPPED.take();
            if dropped.is_empty() || !attached() {
                return;
            }
            let mut g = lock();
            for db in dropped {
                g.release_database(db);
            }
        }
        XACT_EVENT_ABORT | XACT_EVENT_PARALLEL_ABORT => DROPPED.with_borrow_mut(Vec::clear),
        _ => {}
    }
}

/// Whether relation `relid` is idgen's own `idgen_segment`: named so and a member of the idgen
/// extension (a user's table or temporary table of the same name is not).
fn is_the_catalog(relid: pg_sys::Oid) -> bool {
    // SAFETY: get_rel_name returns a palloc'd copy or NULL.
    let name = unsafe { pg_sys::get_rel_name(relid) };
    // SAFETY: non-null, NUL-terminated.
    if name.is_null() || unsafe { CStr::from_ptr(name) } != c"idgen_segment" {
        return false;
    }
    // SAFETY: catalog lookups by oid and name; missing_ok, so no error for no extension.
    unsafe {
        let extension = pg_sys::get_extension_oid(c"idgen".as_ptr(), true);
        extension != pg_sys::InvalidOid
            && pg_sys::getExtensionOfObject(pg_sys::RelationRelationId, relid) == extension
    }
}
