//! Segment (号段) numbers: the SQL surface (DESIGN.md §2). Dense, increasing numbers per name,
//! handed out from ranges reserved in one committed write each, as Meituan Leaf's segment mode
//! with its double buffer and dynamic step, but inside PostgreSQL.
//!
//! [`range`] is the pure arithmetic, [`buffer`] the lock-free double buffer, [`cache`] the
//! shared-memory cache and the protocol with the allocator (`crate::worker`), [`catalog`] the
//! SPI access to `idgen_segment`.

pub mod buffer;
pub mod cache;
pub mod catalog;
pub mod range;

use pgrx::datetime::TimestampWithTimeZone;
use pgrx::pg_sys;
use pgrx::prelude::*;

use crate::error::{Error, OrReport};
use cache::{DescriptionChange, FixedText, Request, RequestKind};
use range::{check_name, NameError, MAX_DESCRIPTION_BYTES};

/// Most numbers one `segment_nextvals` call returns (the result is materialized).
pub const MAX_BATCH: i32 = 1_000_000;

/// Installs the hooks of the segment cache. Called once from `_PG_init`.
///
/// * `object_access_hook`: when `idgen_segment` (the extension) or a whole database is dropped,
///   that database's cached ranges are forgotten.
/// * `ProcessUtility_hook`: before a command that needs a database without other sessions
///   (`CREATE DATABASE ... TEMPLATE x`, `ALTER DATABASE x RENAME`, `ALTER DATABASE x SET
///   TABLESPACE`), x's allocator is asked to leave, as `DROP DATABASE` already makes it.
pub fn init() {
    // SAFETY: _PG_init runs once in the postmaster before any backend; the previous hooks are
    // kept and called first.
    unsafe {
        PREV_OBJECT_ACCESS_HOOK = pg_sys::object_access_hook;
        pg_sys::object_access_hook = Some(object_access);
        PREV_PROCESS_UTILITY_HOOK = pg_sys::ProcessUtility_hook;
        pg_sys::ProcessUtility_hook = Some(process_utility);
    }
}

static mut PREV_OBJECT_ACCESS_HOOK: pg_sys::object_access_hook_type = None;
static mut PREV_PROCESS_UTILITY_HOOK: pg_sys::ProcessUtility_hook_type = None;

#[pg_guard]
unsafe extern "C-unwind" fn object_access(
    access: pg_sys::ObjectAccessType::Type,
    class_id: pg_sys::Oid,
    object_id: pg_sys::Oid,
    sub_id: i32,
    arg: *mut std::ffi::c_void,
) {
    // SAFETY: the hook chain set up in `init`.
    unsafe {
        if let Some(prev) = PREV_OBJECT_ACCESS_HOOK {
            prev(access, class_id, object_id, sub_id, arg);
        }
    }
    if access == pg_sys::ObjectAccessType::OAT_DROP && sub_id == 0 {
        cache::on_drop(class_id, object_id);
    }
}

/// The `ProcessUtility_hook`. Not `#[pg_guard]`ed: the command runs in PostgreSQL's own error
/// handling, and an ERROR it raises passes through this frame (which owns nothing to drop)
/// untouched, with every field of the report. Only the look at the statement is Rust.
#[allow(clippy::too_many_arguments)]
unsafe extern "C-unwind" fn process_utility(
    pstmt: *mut pg_sys::PlannedStmt,
    query_string: *const std::ffi::c_char,
    read_only_tree: bool,
    context: pg_sys::ProcessUtilityContext::Type,
    params: pg_sys::ParamListInfo,
    query_env: *mut pg_sys::QueryEnvironment,
    dest: *mut pg_sys::DestReceiver,
    qc: *mut pg_sys::QueryCompletion,
) {
    // SAFETY: PostgreSQL passes a valid planned utility statement.
    unsafe { before_utility(pstmt) };
    // SAFETY: the hook chain set up in `init`, with the arguments PostgreSQL gave us; the
    // standard function is PostgreSQL's own symbol, not pgrx's guarded wrapper.
    unsafe {
        let next = PREV_PROCESS_UTILITY_HOOK.unwrap_or(standard_ProcessUtility);
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
}

extern "C-unwind" {
    fn standard_ProcessUtility(
        pstmt: *mut pg_sys::PlannedStmt,
        query_string: *const std::ffi::c_char,
        read_only_tree: bool,
        context: pg_sys::ProcessUtilityContext::Type,
        params: pg_sys::ParamListInfo,
        query_env: *mut pg_sys::QueryEnvironment,
        dest: *mut pg_sys::DestReceiver,
        qc: *mut pg_sys::QueryCompletion,
    );
}

/// Before a utility command: evicts the allocator of the database the command needs alone;
/// the hold on new allocators ends with the command's transaction ([`cache::end_holds`]).
#[pg_guard]
unsafe extern "C-unwind" fn before_utility(pstmt: *mut pg_sys::PlannedStmt) {
    // SAFETY: the caller's valid statement.
    let Some(db) = (unsafe { database_needed_alone((*pstmt).utilityStmt) }) else {
        return;
    };
    // Only for the database's owner (or a superuser), who may run these commands at all: a
    // command that fails its own permission check later must not keep anybody's allocator
    // away. Others get PostgreSQL's behaviour unchanged (55006 while the allocator is there).
    // SAFETY: a catalog lookup by oid and this backend's current user.
    if unsafe { pg_sys::pg_database_ownercheck(db, pg_sys::GetUserId()) } {
        cache::evict_allocator(db);
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
    let name: *const std::ffi::c_char = unsafe {
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
unsafe fn option_string(
    options: *mut pg_sys::List,
    name: &std::ffi::CStr,
) -> Option<*const std::ffi::c_char> {
    // SAFETY: the caller's list of DefElem pointers.
    let options = unsafe { pgrx::PgList::<pg_sys::DefElem>::from_pg(options) };
    let found = options.iter_ptr().find_map(|def| {
        // SAFETY: DefElem pointers from the list; names are NUL-terminated.
        unsafe {
            if (*def).defname.is_null() || std::ffi::CStr::from_ptr((*def).defname) != name {
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

/// A checked segment name: not NULL (22004), not empty (42602), at most 63 bytes (42622).
fn name_arg(name: Option<&str>) -> &str {
    // let-else, not `ok_or`: an eagerly built error is dropped on every call.
    let Some(name) = name else {
        Error::NullArgument {
            argument: "segment name",
        }
        .report()
    };
    match check_name(name) {
        Ok(()) => name,
        Err(NameError::Empty) => Error::SegmentNameEmpty.report(),
        Err(NameError::TooLong(bytes)) => Error::SegmentNameTooLong {
            name: name[..name.floor_char_boundary(range::MAX_NAME_BYTES)].into(),
            bytes,
        }
        .report(),
    }
}

fn step_arg(step: i32) -> i32 {
    if !(1..=range::MAX_STEP).contains(&step) {
        Error::StepOutOfRange { step: step.into() }.report();
    }
    step
}

fn description_arg(description: &str) -> FixedText<1024> {
    if description.len() > MAX_DESCRIPTION_BYTES {
        Error::DescriptionTooLong {
            bytes: description.len(),
            max: MAX_DESCRIPTION_BYTES,
        }
        .report();
    }
    FixedText::new(description)
}

/// Runs an admin call through the allocator. Refused in a read-only transaction (25006), as
/// PostgreSQL's `setval()` is: a server kept read-only must not move a high-water mark.
fn admin(request: Request) -> i64 {
    let function = match request.kind {
        RequestKind::Create => Some("segment_create()"),
        RequestKind::Alter => Some("segment_alter()"),
        RequestKind::Drop => Some("segment_drop()"),
        RequestKind::Setval => Some("segment_setval()"),
        RequestKind::Load | RequestKind::InterleaveReady => None,
    };
    if let Some(function) = function {
        if crate::read_only_transaction() && !crate::recovery_in_progress() {
            Error::ReadOnlyTransaction { function }.report();
        }
    }
    cache::submit(request, false).or_report()
}

/// Creates segment `name`, whose first number is `start`, refilled `step` numbers at a time
/// (the floor of the dynamic step). Run by the allocator in its own transaction: not undone by
/// the caller's ROLLBACK, like `nextval`. Not executable by PUBLIC.
///
/// Errors: 22004 NULL argument, 42602/42622 bad name, 22023 step <= 0, 22003 start is the
/// bigint minimum, 22001 description over 1024 bytes, 42710 the name exists, 25006 standby,
/// 53400 no background worker slot.
#[pg_extern(volatile, parallel_unsafe)]
fn segment_create(
    name: Option<&str>,
    start: default!(Option<i64>, 1),
    step: default!(Option<i32>, 1000),
    description: default!(Option<&str>, "NULL"),
) {
    let name = name_arg(name);
    let start = start
        .ok_or(Error::NullArgument { argument: "start" })
        .or_report();
    let step = step_arg(
        step.ok_or(Error::NullArgument { argument: "step" })
            .or_report(),
    );
    if range::max_id_for_start(start).is_none() {
        Error::StartOutOfRange { start }.report();
    }
    let (description_change, description) = match description {
        Some(d) => (DescriptionChange::Set, description_arg(d)),
        None => (DescriptionChange::Clear, FixedText::default()),
    };
    let mut r = Request::new(RequestKind::Create, name);
    r.value = start;
    r.step = step;
    r.description_change = description_change;
    r.description = description;
    admin(r);
}

/// The next number of segment `name`: greater than every number this session drew from it,
/// never handed out before by this server. Lock-free: one `fetch_add` on the shared cached
/// range; waits (at most `idgen.segment_wait_timeout`) only when both cached ranges are empty.
///
/// Errors: 22004/42602/42622 bad name, 42704 unknown segment (hint: the `segment_create` call),
/// 2200H past the bigint maximum, 55P03 no range in time, 25006 standby, 53400 no worker slot.
#[pg_extern(volatile, parallel_restricted)]
fn segment_nextval(name: Option<NameDatum<'_>>, fcinfo: pg_sys::FunctionCallInfo) -> i64 {
    // SAFETY: this call's own fcinfo, from PostgreSQL's function manager.
    let entry = unsafe { entry_at_call_site(name, fcinfo) };
    let mut value = 0;
    cache::draw(entry, 1, |first, _| value = first).or_report();
    value
}

/// What one call site of `segment_nextval` (one `FmgrInfo`, e.g. one expression of one plan)
/// remembers in `fn_extra`: the session's entry of the name it drew from last. A call with the
/// same name then skips pgrx's detoasting (a guarded FFI call), the name checks and the hash
/// lookup: on a bulk statement that was a third of the time above a no-op function.
/// Allocated zeroed in `fn_mcxt`, so it starts empty and goes with the plan.
struct CallSite {
    entry: Option<cache::Entry>,
}

/// The session's entry for `name`, through the call site's memory when it names the same
/// segment. Errors as [`name_arg`] and 42704 (unknown segment), as a PostgreSQL error.
///
/// # Safety
/// `fcinfo` is the current call's, and the function is not set-returning (pgrx keeps a
/// set-returning function's state in `fn_extra`).
unsafe fn entry_at_call_site(
    name: Option<NameDatum<'_>>,
    fcinfo: pg_sys::FunctionCallInfo,
) -> cache::Entry {
    let Some(name) = name else {
        Error::NullArgument {
            argument: "segment name",
        }
        .report()
    };
    // SAFETY: the caller's contract; fn_extra is ours, and a CallSite when not null.
    let site = unsafe {
        let flinfo = (*fcinfo).flinfo;
        if (*flinfo).fn_extra.is_null() {
            (*flinfo).fn_extra =
                pg_sys::MemoryContextAllocZero((*flinfo).fn_mcxt, size_of::<CallSite>());
        }
        &mut *(*flinfo).fn_extra.cast::<CallSite>()
    };
    if let (Some(entry), Some(bytes)) = (site.entry, name.inline_bytes()) {
        if entry.is_named(bytes) {
            return entry;
        }
    }
    let entry = cache::entry(name_arg(Some(name.as_str()))).or_report();
    site.entry = Some(entry);
    entry
}

/// A `text` argument borrowed as PostgreSQL passed it, not yet detoasted: the call-site check
/// of [`segment_nextval`] compares its bytes in place.
pub struct NameDatum<'fcx> {
    varlena: *const pg_sys::varlena,
    _call: std::marker::PhantomData<&'fcx pg_sys::varlena>,
}

impl<'fcx> NameDatum<'fcx> {
    /// The bytes, when the datum holds them in line and uncompressed (1- or 4-byte header), as
    /// a constant or a short column value does; `None` for a toasted or compressed datum.
    fn inline_bytes(&self) -> Option<&'fcx [u8]> {
        let v = self.varlena;
        // SAFETY: a valid text datum of the current call; the header tells its layout.
        unsafe {
            if pgrx::varlena::varatt_is_1b_e(v) || pgrx::varlena::varatt_is_4b_c(v) {
                return None;
            }
            Some(std::slice::from_raw_parts(
                pgrx::varlena::vardata_any(v).cast(),
                pgrx::varlena::varsize_any_exhdr(v),
            ))
        }
    }

    /// The text, detoasted and converted as pgrx converts every `&str` argument.
    fn as_str(&self) -> &'fcx str {
        // SAFETY: a valid, non-null text datum of the current call.
        unsafe {
            <&str as FromDatum>::from_datum(pg_sys::Datum::from(self.varlena), false)
                .expect("a non-null text datum")
        }
    }
}

impl FromDatum for NameDatum<'_> {
    unsafe fn from_polymorphic_datum(
        datum: pg_sys::Datum,
        is_null: bool,
        _typoid: pg_sys::Oid,
    ) -> Option<Self> {
        (!is_null && !datum.is_null()).then(|| NameDatum {
            varlena: datum.cast_mut_ptr(),
            _call: std::marker::PhantomData,
        })
    }
}

// SAFETY: unboxed from a `text` argument only (the SQL type below).
unsafe impl<'fcx> pgrx::callconv::ArgAbi<'fcx> for NameDatum<'fcx> {
    unsafe fn unbox_arg_unchecked(arg: pgrx::callconv::Arg<'_, 'fcx>) -> Self {
        // SAFETY: as the trait requires of the caller.
        unsafe { arg.unbox_arg_using_from_datum() }.expect("a non-null segment name")
    }

    unsafe fn unbox_nullable_arg(
        arg: pgrx::callconv::Arg<'_, 'fcx>,
    ) -> pgrx::nullable::Nullable<Self> {
        // SAFETY: as the trait requires of the caller.
        unsafe { arg.unbox_arg_using_from_datum() }.into()
    }
}

// SAFETY: the argument is SQL `text`, as `&str`'s.
unsafe impl pgrx::pgrx_sql_entity_graph::metadata::SqlTranslatable for NameDatum<'_> {
    const TYPE_IDENT: &'static str =
        <str as pgrx::pgrx_sql_entity_graph::metadata::SqlTranslatable>::TYPE_IDENT;
    const TYPE_ORIGIN: pgrx::pgrx_sql_entity_graph::metadata::TypeOrigin =
        pgrx::pgrx_sql_entity_graph::metadata::TypeOrigin::External;
    const ARGUMENT_SQL: Result<
        pgrx::pgrx_sql_entity_graph::metadata::SqlMappingRef,
        pgrx::pgrx_sql_entity_graph::metadata::ArgumentError,
    > = <str as pgrx::pgrx_sql_entity_graph::metadata::SqlTranslatable>::ARGUMENT_SQL;
    const RETURN_SQL: Result<
        pgrx::pgrx_sql_entity_graph::metadata::ReturnsRef,
        pgrx::pgrx_sql_entity_graph::metadata::ReturnsError,
    > = <str as pgrx::pgrx_sql_entity_graph::metadata::SqlTranslatable>::RETURN_SQL;
}

/// `count` numbers of segment `name` (1 to 1,000,000), increasing; consecutive within a range.
/// Errors: those of [`segment_nextval`], 22004 NULL count, 22023 count out of range.
#[pg_extern(volatile, parallel_restricted)]
fn segment_nextvals(name: Option<&str>, count: Option<i32>) -> SetOfIterator<'static, i64> {
    let name = name_arg(name);
    let count = count
        .ok_or(Error::NullArgument { argument: "count" })
        .or_report();
    if !(1..=MAX_BATCH).contains(&count) {
        Error::CountOutOfRange {
            count: count.into(),
            max: MAX_BATCH as u64,
        }
        .report();
    }
    let entry = cache::entry(name).or_report();
    let mut runs = Vec::new();
    cache::draw(entry, count as u64, |first, n| runs.push((first, n))).or_report();
    SetOfIterator::new(
        runs.into_iter()
            .flat_map(|(first, n)| (0..n as i64).map(move |i| first + i)),
    )
}

/// The number `segment_nextval(name)` last returned in this session, as `currval`.
/// Errors: 55000 before the first in this session, 42704 unknown segment.
#[pg_extern(volatile, parallel_restricted)]
fn segment_currval(name: Option<&str>) -> i64 {
    let name = name_arg(name);
    if let Some(v) = cache::currval(name) {
        return v;
    }
    if catalog::exists(name).or_report() {
        Error::SegmentCurrvalNotYetDefined { name: name.into() }.report()
    }
    Error::UnknownSegment { name: name.into() }.report()
}

/// Moves segment `name` forward: later numbers are greater than `value`, the next is
/// `value + 1`. Returns `value`. Numbers still cached are skipped. Not executable by PUBLIC.
///
/// Errors: 22003 when `value` is below a number this server may have handed out (segments
/// never move back), 42704 unknown segment, 22004 NULL.
#[pg_extern(volatile, parallel_unsafe)]
fn segment_setval(name: Option<&str>, value: Option<i64>) -> i64 {
    let name = name_arg(name);
    let value = value
        .ok_or(Error::NullArgument { argument: "value" })
        .or_report();
    let mut r = Request::new(RequestKind::Setval, name);
    r.value = value;
    admin(r)
}

/// Step 1 of growing from N to M servers under traffic (README, "Growing from N to M
/// servers"): confirms that this database's allocator now runs with
/// `idgen.segment_interleave_until = until` (it reloads the configuration first), so that no
/// refill goes past `until` any more, and that no segment of the database has gone past it
/// already. Returns the highest high-water mark of the database (the bigint minimum without
/// segments). Run it in every database that has segments, on every server, before any server
/// switches to the new interleave. Not executable by PUBLIC.
///
/// Errors: 55000 when the setting in force is not `until` (not set, or not reloaded), or a
/// mark is above `until` (pick a higher fence); 22004 NULL; 25006 on a standby.
#[pg_extern(volatile, parallel_unsafe)]
fn segment_interleave_ready(until: Option<i64>) -> i64 {
    let until = until
        .ok_or(Error::NullArgument { argument: "until" })
        .or_report();
    let mut r = Request::new(RequestKind::InterleaveReady, "");
    r.value = until;
    admin(r)
}

/// Changes the step (NULL keeps it) and the description (NULL keeps it, `''` clears it) of
/// segment `name`. The dynamic step starts again from the new step. Not executable by PUBLIC.
/// Errors: 42704 unknown segment, 22023 step <= 0, 22001 description too long, 55000 a new
/// step while `idgen.segment_node_count > 1` (the step is the block size all servers share).
#[pg_extern(volatile, parallel_unsafe)]
fn segment_alter(
    name: Option<&str>,
    step: default!(Option<i32>, "NULL"),
    description: default!(Option<&str>, "NULL"),
) {
    let name = name_arg(name);
    let step = step.map(step_arg).unwrap_or(0);
    let (description_change, description) = match description {
        None => (DescriptionChange::Keep, FixedText::default()),
        Some("") => (DescriptionChange::Clear, FixedText::default()),
        Some(d) => (DescriptionChange::Set, description_arg(d)),
    };
    let mut r = Request::new(RequestKind::Alter, name);
    r.step = step;
    r.description_change = description_change;
    r.description = description;
    admin(r);
}

/// Drops segment `name`; its cached numbers are discarded. Not undone by ROLLBACK. Not
/// executable by PUBLIC. Errors: 42704 unknown segment.
#[pg_extern(volatile, parallel_unsafe)]
fn segment_drop(name: Option<&str>) {
    let name = name_arg(name);
    admin(Request::new(RequestKind::Drop, name));
}

/// This database's segments as the shared cache holds them (internal; `segment_status()` joins
/// it with `idgen_segment`). One row per cached segment.
#[pg_extern(volatile, parallel_restricted)]
fn segment_cache_status() -> TableIterator<
    'static,
    (
        name!(name, String),
        name!(cached_step, i64),
        name!(current_first, Option<i64>),
        name!(current_last, Option<i64>),
        name!(current_used, Option<i64>),
        name!(next_first, Option<i64>),
        name!(next_last, Option<i64>),
        name!(refills, i64),
        name!(last_refill_at, Option<TimestampWithTimeZone>),
        name!(refill_pending, bool),
    ),
> {
    // SAFETY: a plain process global.
    let db = unsafe { pg_sys::MyDatabaseId };
    let rows = cache::lock().status(db);
    TableIterator::new(rows.into_iter().map(|s| {
        let at = (s.last_refill_at != 0)
            .then(|| TimestampWithTimeZone::try_from(s.last_refill_at).ok())
            .flatten();
        (
            s.name,
            s.step,
            s.current.map(|v| v.range.first),
            s.current.map(|v| v.range.last),
            s.current.map(|v| v.taken as i64),
            s.next.map(|v| v.range.first),
            s.next.map(|v| v.range.last),
            s.refills as i64,
            at,
            s.refill_pending,
        )
    }))
}

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    use crate::testing::{assert_sqlstate, one_i64};
    use pgrx::prelude::*;

    // Segment changes are committed by the allocator, not rolled back with a test: each test
    // uses names of its own.

    #[pg_test]
    fn nextval_counts_from_start_and_currval_follows() {
        Spi::run("SELECT segment_create('pgt_count', start => 41, step => 100)").unwrap();
        assert_sqlstate("SELECT segment_currval('pgt_count')", "55000");
        assert_eq!(one_i64("SELECT segment_nextval('pgt_count')"), 41);
        assert_eq!(one_i64("SELECT segment_nextval('pgt_count')"), 42);
        assert_eq!(one_i64("SELECT segment_currval('pgt_count')"), 42);
        let batch =
            Spi::get_one::<Vec<i64>>("SELECT array_agg(n) FROM segment_nextvals('pgt_count', 3) n")
                .unwrap()
                .unwrap();
        assert_eq!(batch, [43, 44, 45]);
        assert_eq!(
            one_i64("SELECT max_id FROM idgen_segment WHERE name = 'pgt_count'"),
            140
        );
    }

    /// One call site (one expression of one plan) drawing from different names row by row: the
    /// site's remembered segment must follow the name, inline or toasted, and a name that only
    /// shares a prefix must not match.
    #[pg_test]
    fn one_call_site_follows_the_name_of_each_row() {
        Spi::run("SELECT segment_create('pgt_site_a', start => 1, step => 10)").unwrap();
        Spi::run("SELECT segment_create('pgt_site_ab', start => 1000, step => 10)").unwrap();
        let drawn = Spi::get_one::<Vec<String>>(
            "SELECT array_agg(n || '=' || segment_nextval(n) ORDER BY o)
               FROM (VALUES (1, 'pgt_site_a'), (2, 'pgt_site_ab'), (3, 'pgt_site_a'),
                            (4, 'pgt_site_a'), (5, 'pgt_site_ab')) v(o, n)",
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            drawn,
            [
                "pgt_site_a=1",
                "pgt_site_ab=1000",
                "pgt_site_a=2",
                "pgt_site_a=3",
                "pgt_site_ab=1001"
            ]
        );
        assert_eq!(one_i64("SELECT segment_currval('pgt_site_a')"), 3);
        assert_eq!(one_i64("SELECT segment_currval('pgt_site_ab')"), 1001);
        // A name stored compressed (pglz) reaches the call as a compressed datum: it takes
        // pgrx's detoasting path, and is refused by its length.
        Spi::run("CREATE TEMP TABLE pgt_site_names (o int, n text)").unwrap();
        Spi::run(
            "INSERT INTO pgt_site_names VALUES (1, 'pgt_site_a'), (2, repeat('pgt_site_a', 500))",
        )
        .unwrap();
        assert_sqlstate(
            "SELECT segment_nextval(n) FROM pgt_site_names ORDER BY o",
            "42622",
        );
        assert_eq!(one_i64("SELECT segment_currval('pgt_site_a')"), 4);
    }

    #[pg_test]
    fn setval_moves_forward_only() {
        Spi::run("SELECT segment_create('pgt_setval', step => 10)").unwrap();
        assert_eq!(one_i64("SELECT segment_nextval('pgt_setval')"), 1);
        assert_eq!(one_i64("SELECT segment_setval('pgt_setval', 100)"), 100);
        assert_eq!(one_i64("SELECT segment_nextval('pgt_setval')"), 101);
        assert_sqlstate("SELECT segment_setval('pgt_setval', 50)", "22003");
        assert_eq!(one_i64("SELECT segment_nextval('pgt_setval')"), 102);
    }

    #[pg_test]
    fn bad_names_and_arguments_have_their_own_sqlstates() {
        Spi::run("SELECT segment_create('pgt_args')").unwrap();
        for (sql, code) in [
            ("SELECT segment_nextval(NULL)", "22004"),
            ("SELECT segment_nextval('')", "42602"),
            ("SELECT segment_nextval(repeat('x', 64))", "42622"),
            ("SELECT segment_nextval(repeat('号', 22))", "42622"),
            ("SELECT segment_nextval('pgt_missing')", "42704"),
            ("SELECT segment_currval('pgt_missing')", "42704"),
            ("SELECT segment_drop('pgt_missing')", "42704"),
            ("SELECT segment_alter('pgt_missing', step => 2)", "42704"),
            ("SELECT segment_create('pgt_args')", "42710"),
            ("SELECT segment_create('pgt_bad', step => 0)", "22023"),
            ("SELECT segment_create('pgt_bad', start => NULL)", "22004"),
            (
                "SELECT segment_create('pgt_bad', start => -9223372036854775808)",
                "22003",
            ),
            (
                "SELECT segment_create('pgt_bad', description => repeat('d', 1025))",
                "22001",
            ),
            ("SELECT segment_nextvals('pgt_args', 0)", "22023"),
            ("SELECT segment_nextvals('pgt_args', NULL)", "22004"),
            ("SELECT segment_setval('pgt_args', NULL)", "22004"),
        ] {
            assert_sqlstate(sql, code);
        }
        assert_eq!(
            one_i64("SELECT count(*) FROM idgen_segment WHERE name LIKE 'pgt_bad%'"),
            0
        );
    }

    #[pg_test]
    fn the_last_range_stops_at_the_bigint_maximum() {
        Spi::run("SELECT segment_create('pgt_edge', start => 9223372036854775806, step => 10)")
            .unwrap();
        assert_eq!(one_i64("SELECT segment_nextval('pgt_edge')"), i64::MAX - 1);
        assert_eq!(one_i64("SELECT segment_nextval('pgt_edge')"), i64::MAX);
        assert_sqlstate("SELECT segment_nextval('pgt_edge')", "2200H");
    }
}
