//! Segment (号段) numbers: the SQL surface and the subsystem's `init` (DESIGN.md §2). Dense,
//! increasing numbers per name, handed out from ranges reserved in one committed write each, as
//! Meituan Leaf's segment mode with its double buffer and dynamic step, but inside PostgreSQL.
//!
//! A segment's life, step by step (`a::b` is a function `b` of file `a`, under `src/segment/`
//! unless it starts with `idgen_core::`):
//!
//! | step | where |
//! |---|---|
//! | load (first call in a database) | `session::resolve` → `cache::queue::submit` (`Load`) → `allocator::pick` → `allocator::work::load` → `allocator::catalog::step_and_cache` → `cache::slots::assign` (may evict) |
//! | draw | `call_site::entry_at_call_site` (the `fn_extra` shortcut) → `session::draw` → `idgen_core::segment::buffer::DoubleBuffer::draw` |
//! | block (per-backend cache) | `session::Block`, `session::block_size`; cleared by `idgen_core::segment::buffer` `clears` |
//! | prefetch | `idgen_core::segment::range::prefetch_offset` → `session::ask_for_next_range` → `cache::want_refill` |
//! | refill | `allocator::pick` → `cache::slots::refill_at` → `allocator::work::refill` (or `refill_global`) → `idgen_core::segment::range::next_range`/`next_step` → `allocator::unit::in_transaction` → `allocator::catalog::lock_row`/`set_max_id` (or `allocator::global::take` from the registry) → `idgen_core::segment::buffer::DoubleBuffer::install` → `cache::slots::finish_refill` |
//! | evict | `cache::slots::assign`/`evictable` (clock sweep); `cache::slots::take_out_idle` on the allocator's idle timer → `cache::slots::Evicted` |
//! | give back | `cache::slots::Evicted::unused` → `allocator::work::give_back` → `allocator::catalog::lower_mark_if_unchanged` (local segments only, DESIGN.md §6) |
//! | drop | `hooks` (object access, `release_dropped` at commit) → `allocator::launcher::evict_allocator` for a dropped database |
//!
//! Files: [`args`] the SQL functions' argument checks; [`session`] and [`call_site`] the
//! backend's side; [`cache`] shared memory (layout, LWLock, condition variable) with
//! [`cache::slots`] and [`cache::queue`] (requests to the allocator); [`allocator`] the
//! background worker, with [`allocator::launcher`] (which database has which allocators,
//! holds), [`allocator::unit`] (a unit's transaction, signals, interrupts), [`allocator::work`]
//! (the units), [`allocator::catalog`] (SPI on `idgen_segment`) and [`allocator::global`]
//! (global segments in the registry); [`hooks`] PostgreSQL's commands. The pure arithmetic
//! ([`range`]) and the double buffer ([`buffer`]) are in `idgen_core::segment`.
//!
//! The Rust function of SQL `segment_create` is `segment_create_cached`: its C symbol
//! `segment_create_wrapper` belongs to the 0.2.0 signature, kept in `crate::upgrade`.

mod allocator;
mod args;
mod cache;
mod call_site;
mod hooks;
mod session;

use idgen_core::segment::{buffer, range};
use pgrx::datetime::TimestampWithTimeZone;
use pgrx::pg_sys;
use pgrx::prelude::*;

use crate::error::{Error, OrReport};
use crate::failure::FixedText;
use args::{cache_arg, description_arg, name_arg, step_arg};
use cache::{DescriptionChange, Request, RequestKind};
use call_site::{entry_at_call_site, NameDatum};

/// The lock-free double buffer and its ranges, also the cache of serial counters
/// (`serial::shared`).
pub(crate) use buffer::DoubleBuffer;
pub(crate) use range::Range;

/// Drops every cached range of a global segment, in every database (the registry's hello said
/// a recovery completed without this node's report: those numbers may be handed out again).
/// Their numbers are skipped; a refill in flight is thrown away (its slot's generation
/// changed). Returns how many segments lost their ranges.
pub(crate) fn void_global_ranges() -> usize {
    if !cache::attached() {
        return 0;
    }
    let released = cache::lock().release_global();
    cache::broadcast();
    released
}

/// The marks of this database's global segments in its catalog (`allocator::catalog::global_marks`).
pub(crate) fn global_marks_in_catalog() -> Result<Vec<(String, i64)>, Error> {
    allocator::catalog::global_marks()
}

/// Whether this server may serve numbers of a cached global range now (a global segment's, or
/// a global serial counter's); `what` names it for the error. 55000 when not.
pub(crate) fn check_registry_contact(what: impl FnOnce() -> String) -> Result<(), Error> {
    allocator::global::check_contact(what)
}

/// Runs `sql` on the registry from this database's registry allocator (the serials' global
/// counters, `serial::shared`); the first row, if any. Errors: 08006 unreachable, the
/// registry's own.
pub(crate) fn registry_call(
    sql: &std::ffi::CStr,
    params: &[Option<String>],
) -> Result<Option<Vec<Option<String>>>, Error> {
    allocator::global::call(sql, params)
}

/// Most numbers one `segment_nextvals` call returns (the result is materialized).
const MAX_BATCH: i32 = 1_000_000;

/// Sets up segments. Called once from `_PG_init`, in the postmaster: declares the segment
/// cache's shared memory and installs the hooks of [`hooks`].
pub(crate) fn init() {
    crate::shmem::register(cache::PART);
    hooks::install();
}

/// A job another subsystem has the allocator run (serial counters: `serial::shared`), with the
/// caller's name, text and arguments: called
/// in the allocator of the caller's database, in a transaction of its own that commits (with
/// the synchronous standbys) before the caller sees the result, so that what it writes is not
/// undone by the caller's ROLLBACK, like `nextval`. `name` and `args` are the caller's.
pub(crate) type Job = fn(name: &str, text: &str, args: [i64; 4]) -> Result<i64, Error>;

/// The handler of [`RequestKind::Job`], set once by `_PG_init` (in the postmaster, so that every
/// process it starts has it).
static JOB: std::sync::OnceLock<Job> = std::sync::OnceLock::new();

/// Registers the allocator's job handler. Called once, from `_PG_init`.
pub(crate) fn register_job(job: Job) {
    let _ = JOB.set(job);
}

/// The registered job handler.
pub(crate) fn job_handler() -> Option<Job> {
    JOB.get().copied()
}

/// Has this database's allocator run the registered job with `name`, `text` (up to 1023
/// bytes) and `args` (its registry allocator when `calls_registry`: a registry call never runs
/// where a local refill waits), and waits for its result until `deadline_us` (the caller's
/// call's, a `TimestampTz`; `None`: until done or cancelled), then fails with 55P03. Errors: the job's own, relayed; 25006 on a standby;
/// 53400 no allocator could be started.
pub(crate) fn run_job(
    name: &str,
    text: &str,
    args: [i64; 4],
    calls_registry: bool,
    deadline_us: Option<i64>,
) -> Result<i64, Error> {
    let mut r = Request::new(RequestKind::Job, name);
    r.args = args;
    if calls_registry {
        r.lane = cache::Lane::Registry;
    }
    r.description = crate::failure::FixedText::new(text);
    cache::queue::submit_until(r, deadline_us)
}

/// Runs an admin call through the allocator. Refused in a read-only transaction (25006), as
/// PostgreSQL's `setval()` is: a server kept read-only must not move a high-water mark.
fn admin(request: Request) -> i64 {
    let function = match request.kind {
        RequestKind::Create => Some("segment_create()"),
        RequestKind::Alter => Some("segment_alter()"),
        RequestKind::Drop => Some("segment_drop()"),
        RequestKind::Setval => Some("segment_setval()"),
        RequestKind::Load | RequestKind::InterleaveReady | RequestKind::Job => None,
    };
    if let Some(function) = function {
        if crate::recovery::read_only_transaction() && !crate::recovery::in_progress() {
            Error::ReadOnlyTransaction { function }.report();
        }
    }
    cache::queue::submit(request, false).or_report()
}

/// Creates segment `name`, whose first number is `start`, refilled `step` numbers at a time
/// (the floor of the dynamic step). Run by the allocator in its own transaction: not undone by
/// the caller's ROLLBACK, like `nextval`. Not executable by PUBLIC.
///
/// `scope => 'global'` (with `idgen.registry`) creates it in the registry, where its
/// high-water mark lives: every node of the registry draws from the same numbers, by name
/// (DESIGN.md §6). A global segment that exists in the registry already is kept as it is (its
/// start and step win) and is declared here.
///
/// Errors: 22004 NULL argument, 42602/42622 bad name, 22023 step <= 0 or a scope other than
/// `local`/`global`, 22003 start is the bigint minimum, 22001 description over 1024 bytes,
/// 42710 the name exists here, 55000 `global` without `idgen.registry`, 25006 standby, 53400
/// no background worker slot, and the registry's errors (08006 unreachable, ...).
///
/// `cache` is the segment's per-backend cache, as a sequence's `CACHE`: 1 (the
/// default) for none, every number from the shared range; n > 1 for blocks of n numbers a
/// backend takes at once and hands out itself (unique, increasing within a session, not
/// ordered across sessions; a block's unused numbers are skipped when the session ends); 0 for
/// the adaptive mode, blocks that grow within a statement from 1 to
/// [`session::AUTO_MAX_BLOCK`] (a session drawing one number per statement takes one at a
/// time). 22023 outside 0 to 1,000,000.
#[pg_extern(volatile, parallel_unsafe, name = "segment_create")]
fn segment_create_cached(
    name: Option<&str>,
    start: default!(Option<i64>, 1),
    step: default!(Option<i32>, 1000),
    description: default!(Option<&str>, "NULL"),
    scope: default!(Option<&str>, "'local'"),
    cache: default!(Option<i32>, 1),
) {
    let cache = cache_arg(
        cache
            .ok_or(Error::NullArgument { argument: "cache" })
            .or_report(),
    );
    create(name, start, step, description, scope_arg(scope), cache);
}

/// `scope` of `segment_create`: `local` or `global` (with `idgen.registry`).
pub(crate) fn scope_arg(scope: Option<&str>) -> bool {
    match scope {
        Some("local") => false,
        Some("global") if allocator::global::configured() => true,
        Some("global") => Error::GlobalWithoutRegistry { what: "segment" }.report(),
        Some(other) => Error::InvalidScope {
            scope: other.into(),
        }
        .report(),
        None => Error::NullArgument { argument: "scope" }.report(),
    }
}

/// Every `segment_create` (this one and the C symbols of older SQL, `crate::upgrade`): checks the arguments, then asks the allocator.
pub(crate) fn create(
    name: Option<&str>,
    start: Option<i64>,
    step: Option<i32>,
    description: Option<&str>,
    global: bool,
    cache: i32,
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
    r.global = global;
    if global {
        r.lane = cache::Lane::Registry;
    }
    r.cache = cache;
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
    // One timeout for the whole call: the first load of the name and the draw.
    let mut deadline = cache::CallDeadline::default();
    // SAFETY: this call's own fcinfo, from PostgreSQL's function manager.
    let entry = unsafe { entry_at_call_site(name, fcinfo, &mut deadline) };
    let mut value = 0;
    session::draw(entry, 1, &mut deadline, |first, _| value = first).or_report();
    value
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
    let mut deadline = cache::CallDeadline::default();
    let entry = session::entry(name, &mut deadline).or_report();
    let mut runs = Vec::new();
    session::draw(entry, count as u64, &mut deadline, |first, n| {
        runs.push((first, n))
    })
    .or_report();
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
    if let Some(v) = session::currval(name) {
        return v;
    }
    if allocator::catalog::exists(name).or_report() {
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
///
/// `cache` (NULL keeps it) changes the per-backend cache (see `segment_create`): each backend
/// hands out the block it holds, then takes blocks of the new size, as with PostgreSQL's
/// `ALTER SEQUENCE ... CACHE`. 22023 outside 0 to 1,000,000.
#[pg_extern(volatile, parallel_unsafe, name = "segment_alter")]
fn segment_alter_cached(
    name: Option<&str>,
    step: default!(Option<i32>, "NULL"),
    description: default!(Option<&str>, "NULL"),
    cache: default!(Option<i32>, "NULL"),
) {
    alter(name, step, description, cache.map(cache_arg).unwrap_or(-1));
}

/// Every `segment_alter` (this one and `crate::upgrade`'s); `cache` -1 keeps it.
pub(crate) fn alter(name: Option<&str>, step: Option<i32>, description: Option<&str>, cache: i32) {
    let name = name_arg(name);
    let step = step.map(step_arg).unwrap_or(0);
    let (description_change, description) = match description {
        None => (DescriptionChange::Keep, FixedText::default()),
        Some("") => (DescriptionChange::Clear, FixedText::default()),
        Some(d) => (DescriptionChange::Set, description_arg(d)),
    };
    let mut r = Request::new(RequestKind::Alter, name);
    r.cache = cache;
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
// The return type is the SQL signature: pgrx reads the column names from `name!` in place,
// so it cannot be a type alias.
#[allow(clippy::type_complexity)]
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
    let rows = cache::lock().status(crate::backend::database_id());
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

/// This database's cached segments' counters since each was loaded into the shared cache
/// (internal; the view `idgen_metrics_segment` reads it), one row per cached segment: `refills`
/// (ranges fetched), `issued` (numbers taken from its ranges, a backend's block counted when
/// taken), `waits` (calls that slept for a range), `timeouts` (those that gave up at
/// `idgen.segment_wait_timeout`, 55P03) and `refill_failures` (refill attempts that failed, their
/// waiting callers getting the error: a lock wait, the registry). Counted on the slow paths and read from the counters draws already keep: nothing is
/// added to a draw.
#[allow(clippy::type_complexity)]
#[pg_extern(volatile, parallel_restricted)]
fn segment_cache_counters() -> TableIterator<
    'static,
    (
        name!(name, String),
        name!(refills, i64),
        name!(issued, i64),
        name!(waits, i64),
        name!(timeouts, i64),
        name!(refill_failures, i64),
    ),
> {
    let rows = cache::lock().status(crate::backend::database_id());
    TableIterator::new(rows.into_iter().map(|s| {
        (
            s.name,
            s.refills as i64,
            s.issued as i64,
            s.waits as i64,
            s.timeouts as i64,
            s.refill_failures as i64,
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

    /// A cache of 10: the session takes 10 numbers at once and hands them out itself; the
    /// shared range moves by the block, `segment_status` shows the cache, `segment_nextvals`
    /// and `segment_currval` follow the block.
    #[pg_test]
    fn a_cached_segment_hands_out_its_block() {
        Spi::run("SELECT segment_create('pgt_block', step => 100, cache => 10)").unwrap();
        assert_eq!(
            one_i64("SELECT cache FROM segment_status() WHERE name = 'pgt_block'"),
            10
        );
        assert_eq!(one_i64("SELECT segment_nextval('pgt_block')"), 1);
        assert_eq!(
            one_i64("SELECT current_used FROM segment_status() WHERE name = 'pgt_block'"),
            10
        );
        assert_eq!(one_i64("SELECT segment_nextval('pgt_block')"), 2);
        let batch = Spi::get_one::<Vec<i64>>(
            "SELECT array_agg(n) FROM segment_nextvals('pgt_block', 12) n",
        )
        .unwrap()
        .unwrap();
        assert_eq!(batch, (3..=14).collect::<Vec<_>>());
        assert_eq!(one_i64("SELECT segment_currval('pgt_block')"), 14);
        // 3..=10 from the block, 11..=20 a new one (4 of it used).
        assert_eq!(
            one_i64("SELECT current_used FROM segment_status() WHERE name = 'pgt_block'"),
            20
        );
        // A new cache takes effect at the next block; the block held is handed out first.
        Spi::run("SELECT segment_alter('pgt_block', cache => 1)").unwrap();
        assert_eq!(
            one_i64("SELECT cache FROM segment_status() WHERE name = 'pgt_block'"),
            1
        );
        for expected in 15..=21 {
            assert_eq!(one_i64("SELECT segment_nextval('pgt_block')"), expected);
        }
        assert_eq!(
            one_i64("SELECT current_used FROM segment_status() WHERE name = 'pgt_block'"),
            21
        );
    }

    /// `segment_setval` reaches the session's block: the next number is the value's next.
    #[pg_test]
    fn setval_drops_the_block() {
        Spi::run("SELECT segment_create('pgt_block_setval', step => 100, cache => 50)").unwrap();
        assert_eq!(one_i64("SELECT segment_nextval('pgt_block_setval')"), 1);
        assert_sqlstate("SELECT segment_setval('pgt_block_setval', 49)", "22003");
        assert_eq!(one_i64("SELECT segment_setval('pgt_block_setval', 50)"), 50);
        assert_eq!(one_i64("SELECT segment_nextval('pgt_block_setval')"), 51);
    }

    /// `DISCARD SEQUENCES` forgets the block and the currval, as it does a sequence's.
    #[pg_test]
    fn discard_sequences_forgets_the_block_and_currval() {
        Spi::run("SELECT segment_create('pgt_block_discard', step => 100, cache => 5)").unwrap();
        assert_eq!(one_i64("SELECT segment_nextval('pgt_block_discard')"), 1);
        Spi::run("DISCARD SEQUENCES").unwrap();
        assert_sqlstate("SELECT segment_currval('pgt_block_discard')", "55000");
        assert_eq!(one_i64("SELECT segment_nextval('pgt_block_discard')"), 6);
    }

    /// The adaptive cache takes one number at a time for a statement that draws one, and
    /// growing blocks within a statement that draws many.
    #[pg_test]
    fn the_adaptive_cache_grows_within_a_statement() {
        Spi::run("SELECT segment_create('pgt_block_auto', step => 10000, cache => 0)").unwrap();
        assert_eq!(one_i64("SELECT segment_nextval('pgt_block_auto')"), 1);
        assert_eq!(
            one_i64("SELECT current_used FROM segment_status() WHERE name = 'pgt_block_auto'"),
            1
        );
        // Blocks of 1, 2, 4, 8 for 10 numbers drawn in one statement (a #[pg_test] is one
        // statement of its own, so the first block may already be 2): at most 16 taken.
        assert_eq!(
            one_i64("SELECT max(segment_nextval('pgt_block_auto')) FROM generate_series(1, 10)"),
            11
        );
        let used =
            one_i64("SELECT current_used FROM segment_status() WHERE name = 'pgt_block_auto'");
        assert!((15..=16).contains(&used), "{used} numbers taken");
    }

    #[pg_test]
    fn a_cache_out_of_range_changes_nothing() {
        for (sql, code) in [
            (
                "SELECT segment_create('pgt_cache_bad', cache => -1)",
                "22023",
            ),
            (
                "SELECT segment_create('pgt_cache_bad', cache => 1000001)",
                "22023",
            ),
            (
                "SELECT segment_create('pgt_cache_bad', cache => NULL)",
                "22004",
            ),
        ] {
            assert_sqlstate(sql, code);
        }
        assert_eq!(
            one_i64("SELECT count(*) FROM idgen_segment WHERE name = 'pgt_cache_bad'"),
            0
        );
        Spi::run("SELECT segment_create('pgt_cache_alter', cache => 7)").unwrap();
        assert_sqlstate(
            "SELECT segment_alter('pgt_cache_alter', cache => -5)",
            "22023",
        );
        assert_eq!(
            one_i64("SELECT cache FROM idgen_segment WHERE name = 'pgt_cache_alter'"),
            7
        );
    }

    #[pg_test]
    fn the_last_range_stops_at_the_bigint_maximum() {
        Spi::run("SELECT segment_create('pgt_edge', start => 9223372036854775806, step => 10)")
            .unwrap();
        assert_eq!(one_i64("SELECT segment_nextval('pgt_edge')"), i64::MAX - 1);
        assert_eq!(one_i64("SELECT segment_nextval('pgt_edge')"), i64::MAX);
        assert_sqlstate("SELECT segment_nextval('pgt_edge')", "2200H");
        // A block that ends at the bigint maximum hands out its last number.
        Spi::run(
            "SELECT segment_create('pgt_edge_block', start => 9223372036854775806, step => 10, \
             cache => 10)",
        )
        .unwrap();
        assert_eq!(
            one_i64("SELECT segment_nextval('pgt_edge_block')"),
            i64::MAX - 1
        );
        assert_eq!(
            one_i64("SELECT segment_nextval('pgt_edge_block')"),
            i64::MAX
        );
        assert_sqlstate("SELECT segment_nextval('pgt_edge_block')", "2200H");
    }
}
