//! Global segments (DESIGN.md §6): their high-water marks live in the registry, and a node's
//! segment allocator takes each range there, with one committed `UPDATE ... RETURNING`
//! (`idgen_registry_segment_take`), before caching it in its double buffer: Leaf's original
//! design, with the registry as Leaf's database. Only the database's registry allocator calls
//! the registry (`cache::Lane`), so a registry that answers slowly or never delays no local
//! refill. It keeps one connection, opened at its first global segment and reopened after a
//! failure; its waits obey the allocator's interrupts (PostgreSQL's own signal handlers).
//!
//! A range is used only after the registry answered with it, i.e. after its commit (with the
//! registry's synchronous standbys, if it has them); a lost answer skips the range's numbers,
//! never reissues them.

use std::cell::{Cell, RefCell};
use std::ffi::CStr;
use std::time::{Duration, Instant};

use crate::error::Error;
use crate::failure::Failure;
use crate::libpq::{self, Conn, ConnError, Wait};

/// How long connecting, and each call, may take: a little more than the registry session's
/// statement_timeout (3 s), so that the registry ends a statement first; short, since the
/// database's other global refills wait meanwhile.
const CALL_TIMEOUT: Duration = Duration::from_secs(4);

thread_local! {
    /// The allocator's connection to the registry.
    static CONN: RefCell<Option<Conn>> = const { RefCell::new(None) };
    /// After the registry failed to answer: no call before this time, and how long the last
    /// pause was. A registry that is reachable but silent would otherwise hold the registry
    /// allocator for a whole call timeout at every retry, and every other global refill of the
    /// database would wait behind it.
    static BACKOFF: Cell<(Option<Instant>, Duration)> = const { Cell::new((None, Duration::ZERO)) };
}

/// How long a name the registry did not have is answered "unknown" without asking again
/// (S15: a plain role drawing from many unknown names would otherwise make the registry
/// allocator ask for each, and the global refills wait behind those calls).
const MISS_TTL: Duration = Duration::from_secs(1);
/// At most this many such names are kept.
const MISSES_MAX: usize = 4096;

thread_local! {
    /// Names the registry did not have, and when it said so.
    static MISSES: RefCell<std::collections::HashMap<String, Instant>> =
        RefCell::new(std::collections::HashMap::new());
}

/// Whether the registry said within [`MISS_TTL`] that it has no segment `name`.
fn recently_missing(name: &str) -> bool {
    MISSES.with_borrow(|m| m.get(name).is_some_and(|at| at.elapsed() < MISS_TTL))
}

/// Notes that the registry has no segment `name` (or, `missing` false, that it has one now).
fn note_missing(name: &str, missing: bool) {
    MISSES.with_borrow_mut(|m| {
        if !missing {
            m.remove(name);
            return;
        }
        if m.len() >= MISSES_MAX {
            m.retain(|_, at| at.elapsed() < MISS_TTL);
            if m.len() >= MISSES_MAX {
                m.clear();
            }
        }
        m.insert(name.to_owned(), Instant::now());
    })
}

/// The first pause after a failed call, and the longest.
const BACKOFF_MIN: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(8);

/// Whether this server may serve numbers of a cached global range now: the registry's last
/// contact (`crate::marks::contact`) is younger than this server's lease
/// (`idgen.registry_lease`, at most the registry's `idgen.registry_max_lease`). A node cut
/// off from the registry stops at a known time, as its Snowflake ids do, so a recovery that
/// had to skip it can hand the numbers out again once the lease is over (the registry waits
/// a longest lease after it). `what` names the range for the error. Waits for the next contact
/// up to `idgen.segment_wait_timeout`; 55000 when it does not come.
pub(crate) fn check_contact(what: impl FnOnce() -> String) -> Result<(), Error> {
    // A registry that restarts or fails over is out of contact for a moment: callers wait for
    // the next contact as they wait for a range, up to `idgen.segment_wait_timeout`, and only
    // then fail. Interruptible (a cancel ends the wait).
    let deadline = crate::segment::cache::deadline();
    loop {
        let stale = match contact_stale() {
            None => return Ok(()),
            Some(stale) => stale,
        };
        // No deadline (`idgen.segment_wait_timeout` = 0): until cancelled.
        if deadline.is_some_and(|d| crate::time::now_timestamptz_us() >= d) {
            let (age_ms, lease_ms) = stale;
            return Err(Error::GlobalRangeStale {
                what: what(),
                age_ms,
                lease_ms,
            });
        }
        crate::latch::sleep_interruptibly(Duration::from_millis(10));
    }
}

/// `None` while a cached global range may be served; else the contact's age (ms, -1 for none
/// since the server started) and the lease it is compared with (ms).
fn contact_stale() -> Option<(i64, i64)> {
    let (contact_ms, registry_max_lease_ms) = crate::marks::contact();
    let mut lease_ms = crate::guc::registry_lease_ms() as i64;
    if registry_max_lease_ms > 0 {
        lease_ms = lease_ms.min(registry_max_lease_ms);
    }
    let now = crate::marks::contact_clock_ms();
    // No contact yet since the server started: nothing is served.
    if contact_ms > 0 && idgen_core::registry::range_usable(now, contact_ms, lease_ms) {
        return None;
    }
    Some((
        if contact_ms == 0 {
            -1
        } else {
            now - contact_ms
        },
        lease_ms,
    ))
}

/// Whether this server has a registry (`idgen.registry`).
pub(crate) fn configured() -> bool {
    crate::guc::registry_conninfo().is_some()
}

/// A range of a global segment: `first..=last`, and the segment's own step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Taken {
    pub(crate) first: i64,
    pub(crate) last: i64,
    pub(crate) base_step: i32,
    /// The registry's revision the take was answered with.
    pub(crate) revision: i64,
}

/// Creates global segment `name` in the registry, or finds it there; returns whether it was
/// created and its step in force.
pub(crate) fn create(
    name: &str,
    start: i64,
    step: i32,
    description: Option<&str>,
) -> Result<(bool, i32), Error> {
    let row = call(
        c"SELECT created, step FROM @extschema@.idgen_registry_segment_create($1::pg_catalog.text, \
          $2::pg_catalog.int8, $3::pg_catalog.int4, $4::pg_catalog.text)",
        &[
            Some(name.into()),
            Some(start.to_string()),
            Some(step.to_string()),
            description.map(str::to_owned),
        ],
    )?
    .ok_or_else(|| malformed("idgen_registry_segment_create"))?;
    let created = match row.first().cloned().flatten().as_deref() {
        Some("t") => true,
        Some("f") => false,
        _ => {
            return Err(refused(
                "idgen_registry_segment_create",
                "created is not a boolean",
            ))
        }
    };
    note_missing(name, false);
    Ok((created, step_of(&row, 1, "idgen_registry_segment_create")?))
}

/// The step and the mark of global segment `name`, if the registry has it. A name the
/// registry did not have is answered "none" again for a second without asking.
pub(crate) fn find(name: &str) -> Result<Option<(i32, i64)>, Error> {
    if recently_missing(name) {
        return Ok(None);
    }
    let found = call(
        c"SELECT step, max_id FROM @extschema@.idgen_registry_segment_get($1::pg_catalog.text)",
        &[Some(name.into())],
    )?
    .map(|row| {
        Ok::<_, Error>((
            step_of(&row, 0, "idgen_registry_segment_get")?,
            number(&row, 1, "idgen_registry_segment_get", "max_id")?,
        ))
    })
    .transpose()?;
    note_missing(name, found.is_none());
    Ok(found)
}

/// Takes the next range of global segment `name`, `step` numbers (fewer at the bigint
/// maximum), as this node (its incarnation and secret, `crate::identity`). `known_mark` is this
/// node's mark of the segment as of its last range (or its declaration): a range at or below it
/// would repeat numbers, so none such is used. The registry's revision in the answer raises
/// the one this server shows at its next hello (`crate::marks::note_revision`). Errors: the
/// registry's (42704 no such segment, 2200H run out, 55000 not durable or recovering, 55P03
/// its wait after a new epoch), 55000 a range below `known_mark`, 08006 when it cannot be
/// reached.
pub(crate) fn take(name: &str, step: i64, known_mark: i64) -> Result<Taken, Error> {
    let step = step.clamp(1, i64::from(i32::MAX));
    let row = call(
        c"SELECT first_id, last_id, base_step, revision \
          FROM @extschema@.idgen_registry_segment_take($1::pg_catalog.text, $2::pg_catalog.int4, \
          $3::pg_catalog.text, $4::pg_catalog.text)",
        &[
            Some(name.into()),
            Some(step.to_string()),
            Some(crate::identity::incarnation().to_owned()),
            Some(crate::identity::secret().to_owned()),
        ],
    )?
    .ok_or_else(|| malformed("idgen_registry_segment_take"))?;
    const TAKE: &str = "idgen_registry_segment_take";
    let taken = Taken {
        first: number(&row, 0, TAKE, "first_id")?,
        last: number(&row, 1, TAKE, "last_id")?,
        base_step: step_of(&row, 2, TAKE)?,
        revision: number(&row, 3, TAKE, "revision")?,
    };
    if let Err(why) = range_fits(taken.first, taken.last, step) {
        return Err(refused(TAKE, &why));
    }
    crate::marks::note_revision(taken.revision);
    if taken.first <= known_mark {
        // A registry that lost commits (restored, failed over to an asynchronous standby)
        // before its recovery opened: never used.
        return Err(Failure::new(
            "55000",
            &format!(
                "the registry handed out global segment \"{name}\"'s numbers from {}, not above {known_mark}, this node's mark: the registry has lost commits",
                taken.first
            ),
            Some("No range is taken from it: numbers could repeat."),
            Some("On the registry: SELECT idgen_registry_begin_recovery(); then complete it (docs: Running on many servers, \"Recovering a registry\")."),
        )
        .to_error());
    }
    // Not a contact: only the registry client's hello is (it first drops the cached ranges a
    // recovery made void, which a take knows nothing of).
    Ok(taken)
}

/// Whether `f` says the registry could not serve the call now (SQLSTATE class 08: not reached;
/// 55P03: a lock or the registry's wait after a new epoch; 57014: a statement timeout): the
/// allocator tries the refill again later, its callers waiting, instead of failing them at once.
/// Not an answer refused (08P01, [`refused`]): a retry would take, and skip, another range.
pub(crate) fn unreachable(f: &Failure) -> bool {
    let s = f.sqlstate_text();
    (s.starts_with("08") && s != "08P01") || s == "55P03" || s == "57014"
}

/// Runs `sql` on the registry; the first row, if any. Reconnects when there is no connection.
pub(crate) fn call(
    sql: &CStr,
    params: &[Option<String>],
) -> Result<Option<Vec<Option<String>>>, Error> {
    call_within(sql, params, CALL_TIMEOUT)
}

/// [`call`], connecting and answering within `timeout`.
fn call_within(
    sql: &CStr,
    params: &[Option<String>],
    timeout: Duration,
) -> Result<Option<Vec<Option<String>>>, Error> {
    if let (Some(until), _) = BACKOFF.get() {
        if Instant::now() < until {
            return Err(lost(ConnError::Failed(
                "it did not answer a moment ago; the next try is after a pause".into(),
            )));
        }
    }
    let result = CONN.with_borrow_mut(|slot| {
        let deadline = Instant::now() + timeout;
        // A connection kept from an earlier call may have been closed meanwhile (the registry
        // restarted or failed over): a call that fails on it with a lost connection is tried
        // once more on a new one. A take the registry committed before the connection was lost
        // is only skipped (its answer never came): a gap, never a number twice.
        let mut reused = slot.is_some();
        loop {
            if slot.is_none() {
                let conninfo = crate::guc::registry_conninfo().unwrap_or_default();
                *slot = Some(
                    libpq::connect(&conninfo, deadline, Wait::Interrupts).map_err(|e| match e {
                        // The registry answered (idgen is not installed there): not a lost
                        // registry.
                        ConnError::Remote(r) => remote(&r),
                        other => lost(other),
                    })?,
                );
            }
            let conn = slot.as_mut().expect("connected above");
            match conn.query(sql, params, deadline, Wait::Interrupts) {
                Ok(rows) => return Ok(rows.into_iter().next()),
                Err(ConnError::Remote(r)) => {
                    // Any error may leave the session unusable: the next call connects afresh.
                    *slot = None;
                    return Err(remote(&r));
                }
                Err(e) => {
                    *slot = None;
                    if reused && Instant::now() < deadline {
                        reused = false;
                        continue;
                    }
                    return Err(lost(e));
                }
            }
        }
    });
    crate::marks::note_call(result.is_ok());
    match &result {
        Err(e) if Failure::from_error(e).sqlstate_text().starts_with("08") => {
            let (_, last) = BACKOFF.get();
            let pause = (last * 2).clamp(BACKOFF_MIN, BACKOFF_MAX);
            BACKOFF.set((Some(Instant::now() + pause), pause));
        }
        _ => BACKOFF.set((None, Duration::ZERO)),
    }
    result
}

fn lost(e: ConnError) -> Error {
    Failure::new(
        "08006",
        &format!("the registry cannot be reached: {e}"),
        None,
        Some(
            "Cached ranges keep serving; new ones come once the registry (idgen.registry) answers.",
        ),
    )
    .to_error()
}

/// An error the registry raised, as it raised it.
fn remote(r: &libpq::Remote) -> Error {
    Failure::new(
        &r.sqlstate,
        &format!("the registry refused: {}", r.message),
        r.detail.as_deref(),
        r.hint.as_deref(),
    )
    .to_error()
}

/// An answer of `function` outside what it can answer (08P01, protocol violation), refused
/// with `why` (the field and its value): nothing of it is used.
fn refused(function: &str, why: &str) -> Error {
    Failure::new(
        "08P01",
        &format!("the registry's answer is refused: {function}: {why}"),
        Some("Nothing of it was used."),
        Some("Check the registry's idgen functions (a registry database's owner or a superuser may have replaced them) and that idgen.registry reaches the registry (sslmode=verify-full)."),
    )
    .to_error()
}

fn malformed(function: &str) -> Error {
    refused(function, "the answer has no row")
}

/// Column `i` of `function`'s answer, `field`: a bigint, never NULL.
fn number(row: &[Option<String>], i: usize, function: &str, field: &str) -> Result<i64, Error> {
    let text = row
        .get(i)
        .cloned()
        .flatten()
        .ok_or_else(|| refused(function, &format!("{field} is NULL")))?;
    text.parse()
        .map_err(|_| refused(function, &format!("{field} is not an integer")))
}

/// A segment's step in column `i` of `function`'s answer: 1 to 2^31 - 1, as the registry's
/// table allows.
fn step_of(row: &[Option<String>], i: usize, function: &str) -> Result<i32, Error> {
    let step = number(row, i, function, "step")?;
    i32::try_from(step).ok().filter(|s| *s >= 1).ok_or_else(|| {
        refused(
            function,
            &format!("step {step} is not a step (1 to 2147483647)"),
        )
    })
}

/// Whether `first..=last` is a range a take of `step` numbers can answer: not empty and not
/// longer than asked (shorter only at the bigint maximum).
fn range_fits(first: i64, last: i64, step: i64) -> Result<(), String> {
    if last < first {
        return Err(format!("last_id {last} is below first_id {first}"));
    }
    let count = i128::from(last) - i128::from(first) + 1;
    if count > i128::from(step) {
        return Err(format!(
            "a range of {count} numbers ({first} to {last}), more than the {step} asked for"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_range_longer_than_asked_or_empty_is_refused() {
        use super::range_fits;
        assert_eq!(range_fits(101, 200, 100), Ok(()));
        assert_eq!(range_fits(i64::MAX - 9, i64::MAX, 100), Ok(()));
        assert_eq!(range_fits(5, 5, 1), Ok(()));
        assert!(range_fits(101, 201, 100)
            .unwrap_err()
            .contains("101 numbers"));
        assert!(range_fits(101, 100, 100)
            .unwrap_err()
            .contains("last_id 100"));
        assert!(range_fits(i64::MIN, i64::MAX, i64::from(i32::MAX)).is_err());
    }
}
