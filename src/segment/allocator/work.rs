//! The allocator's units of work, each run in its own transaction (`unit::in_transaction`):
//! a refill (Leaf's dynamic step, or this server's next own block when servers interleave),
//! loading a segment into the cache, and the admin calls (create, alter, drop, setval, the
//! interleave check when growing from N to M servers), run with the segment's cache frozen.
#![allow(clippy::result_large_err)]

use pgrx::pg_sys;
use pgrx::prelude::*;

use super::catalog;
use super::unit::{
    in_transaction, in_unconfirmed_transaction, reload_now, warn, with_interrupts_held, Unfinished,
};
use crate::error::Error;
use crate::failure::Failure;
use crate::guc;
use crate::segment::cache::slots::{freeze, unfreeze, After, Evicted, Refilled};
use crate::segment::cache::{lock, slot, DescriptionChange, Lane, Request, RequestKind, SlotMeta};
use crate::segment::range::{
    fenced_range, max_id_for_start, next_step, Fences, NoRange, Nodes, Range,
};
use crate::time::now_timestamptz_us;

/// One unit of work for an allocator (a copy out of shared memory, taken once per unit).
#[allow(clippy::large_enum_variant)]
pub(crate) enum Work {
    /// Request at this index (a copy; the original is marked running).
    Request(usize, Request),
    /// Refill the slot at `index`, which held `generation` when the work was taken.
    Refill {
        index: usize,
        generation: u64,
        meta: SlotMeta,
    },
}

/// The interleave now in force: `idgen.segment_node_count` and `idgen.segment_node_index`.
///
/// Errors: 22023 when the index is not below the count (checked at start too; a reload can
/// still bring a bad pair); 55000 when either differs from what the server started with while
/// `idgen.segment_interleave_from` is unset: a new interleave over the numbers of the old one
/// hands out numbers other servers have handed out (README, Growing from N to M servers).
fn nodes() -> Result<Nodes, Error> {
    let (count, index) = guc::segment_nodes();
    if index >= count {
        return Err(Error::InvalidSetting {
            name: "idgen.segment_node_index".into(),
            value: index.to_string(),
            detail: guc::node_index_detail(count),
        });
    }
    let started = guc::segment_nodes_at_start();
    if (count, index) != started && fences().from.is_none() {
        return Err(Error::InterleaveChangedWithoutFence {
            started,
            now: (count, index),
        });
    }
    Ok(Nodes {
        count: count.max(1) as u32,
        index: index.max(0) as u32,
    })
}

/// `idgen.segment_interleave_from` and `idgen.segment_interleave_until`.
fn fences() -> Fences {
    let (from, until) = guc::segment_fences();
    Fences { from, until }
}

/// How long a refill that the registry did not answer waits before it is tried again (µs).
const RETRY_US: i64 = 500_000;

/// Runs one unit of work of the `lane` allocator and stores its outcome for the caller (or the
/// cache).
pub(crate) fn run(db: pg_sys::Oid, lane: Lane, work: Work) {
    match work {
        Work::Request(index, request) => {
            let outcome = match request.kind {
                RequestKind::Load => match load(db, lane, &request) {
                    Ok(Loaded::Slot(i)) => Ok(i as i64),
                    // A name this database does not know: the registry allocator looks it up.
                    Ok(Loaded::InRegistry) => match lock().reroute(index, Lane::Registry) {
                        Ok(()) => return,
                        Err(f) => Err(f),
                    },
                    Err(f) => Err(f),
                },
                RequestKind::Create => create(db, &request),
                RequestKind::Alter => alter(db, &request),
                RequestKind::Drop => drop_segment(db, &request),
                RequestKind::Setval => setval(db, &request),
                RequestKind::InterleaveReady => interleave_ready(&request),
                RequestKind::Job => job(&request),
            };
            lock().finish_request(index, outcome);
        }
        Work::Refill {
            index,
            generation,
            meta,
        } => {
            let asked_registry = std::cell::Cell::new(false);
            let outcome = refill(&meta, &asked_registry).map_err(|f| {
                let gone = f.sqlstate() == PgSqlErrorCode::ERRCODE_UNDEFINED_OBJECT as i32;
                (f, gone)
            });
            if let Err((f, _)) = &outcome {
                // Only the registry's failures wait for a retry: a local refill that waited
                // too long for idgen_segment's row (55P03, the units' lock_timeout) fails its
                // callers with that error at once.
                if asked_registry.get() && super::global::unreachable(f) {
                    // The registry of a global segment did not answer: its callers go on
                    // waiting (up to idgen.segment_wait_timeout, then 55P03) while this
                    // refill is tried again in 500 ms, the cached ranges serving meanwhile;
                    // the other segments' refills do not wait for it.
                    warn(&format!("idgen allocator: {}", f.message()));
                    lock().defer_refill(index, generation, now_timestamptz_us() + RETRY_US);
                    return;
                }
            }
            if !lock().finish_refill(index, generation, outcome) {
                warn(&format!(
                    "idgen allocator: a range of segment \"{}\" was committed but not needed; its numbers are skipped",
                    meta.name.as_str()
                ));
            }
        }
    }
}

/// Takes the next range of a cached segment: Leaf's dynamic step (or, with
/// `idgen.segment_node_count > 1`, this server's next own block), one committed UPDATE; of a
/// global segment, in the registry (DESIGN.md §6).
///
/// `asked_registry` is set while the registry is asked for a range (a global segment): only
/// then is a failure the registry's.
fn refill(meta: &SlotMeta, asked_registry: &std::cell::Cell<bool>) -> Result<Refilled, Failure> {
    let name = meta.name.as_str();
    let since_ms = if meta.last_refill_at == 0 {
        0
    } else {
        (now_timestamptz_us() - meta.last_refill_at) / 1000
    };
    let previous = (meta.step > 0).then_some(meta.step);
    let nodes = nodes().map_err(|e| Failure::from_error(&e))?;
    let fences = fences();
    let dynamic = |base_step| {
        next_step(
            previous,
            base_step,
            guc::segment_max_step(),
            since_ms,
            guc::segment_refill_interval_ms(),
        )
    };
    // An unconfirmed commit fails the refill: its range is never installed (numbers skipped).
    let mut done = in_transaction(|| {
        let row = catalog::lock_row(name)?;
        if row.global {
            return refill_global(name, dynamic(row.step), row.max_id, asked_registry);
        }
        // Interleaved servers take one own block of the segment's step per refill: blocks must
        // be the same size on every server, so the dynamic step does not apply.
        let step = if nodes.interleaved() {
            row.step
        } else {
            dynamic(row.step)
        };
        let range = fenced_range(row.max_id, step, nodes, fences).map_err(|e| match e {
            NoRange::Exhausted => Error::SegmentExhausted { name: name.into() },
            NoRange::Until(until) => Error::InterleaveUntilReached {
                name: name.into(),
                until,
            },
        })?;
        catalog::set_max_id(name, range.last)?;
        Ok(Refilled {
            range,
            base_step: row.step,
            step,
            at: 0,
        })
    })?;
    done.at = now_timestamptz_us();
    Ok(done)
}

/// A range of global segment `name` from the registry: used only once the registry has
/// answered with it (its commit); the local row keeps the registry's mark for `segment_status`.
///
/// `asked_registry` is set while the registry is asked, and only then: a failure after its
/// answer (the local row's UPDATE) is this server's, and is not retried as the registry's (a
/// retry would take, and skip, another range each time).
fn refill_global(
    name: &str,
    step: i64,
    known_mark: i64,
    asked_registry: &std::cell::Cell<bool>,
) -> Result<Refilled, Error> {
    asked_registry.set(true);
    let taken = super::global::take(name, step, known_mark)?;
    asked_registry.set(false);
    // Durable before any number of it is used: reported in a recovery, even after a restart.
    crate::marks::record(name, taken.last, taken.revision)?;
    catalog::set_max_id(name, taken.last)?;
    Ok(Refilled {
        range: Range {
            first: taken.first,
            last: taken.last,
        },
        base_step: taken.base_step.into(),
        step: taken.last - taken.first + 1,
        at: 0,
    })
}

/// What a load found.
enum Loaded {
    /// The segment's slot.
    Slot(usize),
    /// This database does not know the name and has a registry: the registry allocator looks
    /// it up (a registry call, which never runs in the local allocator).
    InRegistry,
}

/// Brings an existing segment into the shared cache. In the registry allocator, a name this
/// database does not know is looked up in the registry and declared here when it is a global
/// segment there.
fn load(db: pg_sys::Oid, lane: Lane, request: &Request) -> Result<Loaded, Failure> {
    let name = request.name.as_str();
    if let Some(i) = lock().find(db, name) {
        return Ok(Loaded::Slot(i));
    }
    let found = in_transaction(|| match catalog::settings(name) {
        Err(Error::UnknownSegment { .. }) if super::global::configured() => match lane {
            Lane::Local => Ok(None),
            Lane::Registry => declare_global(name).map(|step| Some((step, 1, true))),
        },
        Err(e) => Err(e),
        Ok((step, cache)) => Ok(Some((step, cache, catalog::is_global(name)?))),
    })?;
    let Some((base_step, cache, global)) = found else {
        return Ok(Loaded::InRegistry);
    };
    let mut g = lock();
    if let Some(i) = g.find(db, name) {
        return Ok(Loaded::Slot(i));
    }
    let (index, evicted) = g
        .assign(db, name, base_step, cache, global, request.ticket)
        .map_err(|e| Failure::from_error(&e))?;
    if global {
        // Its first refill is the registry allocator's: started now, not when the caller asks.
        let _ = g.ensure_lane(db, Lane::Registry);
    }
    drop(g);
    // A segment of this database evicted to make room gives its unused numbers back; one of
    // another database skips them (only that database's allocator may write its table).
    if let Some(e) = evicted.filter(|e| e.db == db) {
        give_back(&[e]);
    }
    Ok(Loaded::Slot(index))
}

/// Gives back the unused numbers of segments of this database taken out of the cache (evicted,
/// idle, or at the allocator's exit): one compare-and-set per segment, each in a transaction of
/// its own, so that a restart or a reload does not skip them. Never needed
/// for uniqueness, so never waited for: the row lock is taken `NOWAIT`, the commit is
/// asynchronous (a give-back lost in a crash leaves a gap), and interrupts are held off so that
/// a termination request (a fast shutdown) lets it finish. A global segment gives nothing back
/// (`catalog::lower_mark_if_unchanged`). Returns how many segments gave numbers back.
pub(crate) fn give_back(evicted: &[Evicted]) -> usize {
    /// The whole give-back's time: a shutdown never waits longer for it (a lost give-back is
    /// only a gap).
    const GIVE_BACK_DEADLINE: std::time::Duration = std::time::Duration::from_secs(3);
    let mut given = 0;
    let deadline = std::time::Instant::now() + GIVE_BACK_DEADLINE;
    for e in evicted {
        let Some((mark, new_mark)) = e.unused() else {
            continue;
        };
        if std::time::Instant::now() >= deadline {
            warn("idgen allocator: the give-back ran out of time; the unused numbers of the remaining segments are skipped");
            break;
        }
        let name = e.name.as_str();
        let local = with_interrupts_held(|| {
            in_unconfirmed_transaction(|| catalog::lower_mark_if_unchanged(name, mark, new_mark))
        });
        match local {
            Ok(catalog::GivenBack::Nothing) => {}
            Ok(catalog::GivenBack::Local) => given += 1,
            Err(f) => warn(&format!(
                "idgen allocator: the unused numbers of segment \"{name}\" are skipped: {}",
                f.to_error()
            )),
        }
    }
    given
}

/// A name this database does not know may be a global segment of the registry: declared here
/// (a local row of scope global) when it is. Returns its step.
fn declare_global(name: &str) -> Result<i64, Error> {
    let Some((step, _)) = super::global::find(name)? else {
        return Err(Error::UnknownSegment { name: name.into() });
    };
    // No mark seen yet: the registry's mark now may belong to another node's range, which
    // that node may still give back below it; only this node's own ranges set what it shows
    // the registry (`global::take`).
    catalog::insert(name, i64::MIN, step, None, true, 1)?;
    Ok(step.into())
}

/// Runs an admin call with the segment's cache frozen; `after` says what becomes of the cache
/// when it committed.
fn frozen_call(
    db: pg_sys::Oid,
    name: &str,
    after: After,
    body: impl FnOnce(Option<i64>) -> Result<i64, Error>,
) -> Result<i64, Failure> {
    let frozen = freeze(db, name);
    let highest = frozen
        .as_ref()
        .and_then(|f| slot(f.index).buffers.highest_taken());
    match in_transaction(|| body(highest)) {
        Ok(v) => {
            unfreeze(frozen, after);
            Ok(v)
        }
        Err(Unfinished::Failed(f)) => {
            unfreeze(frozen, After::Keep);
            Err(f)
        }
        // Committed here, perhaps not on the standbys: the cache must not outlive the change
        // (a setval that moved the mark below the cached range, say), nor the caller trust it.
        Err(Unfinished::Unconfirmed(f)) => {
            unfreeze(frozen, after);
            Err(f)
        }
    }
}

fn create(db: pg_sys::Oid, r: &Request) -> Result<i64, Failure> {
    let name = r.name.as_str();
    let description =
        (r.description_change == DescriptionChange::Set).then(|| r.description.as_str());
    // A slot still cached under this name is stale (its row was removed behind idgen's back):
    // its numbers must not be mixed with the new segment's.
    frozen_call(db, name, After::Release, |_| {
        let max_id = max_id_for_start(r.value).ok_or(Error::StartOutOfRange { start: r.value })?;
        match catalog::step(name) {
            Ok(_) => return Err(Error::SegmentExists { name: name.into() }),
            Err(Error::UnknownSegment { .. }) => {}
            Err(e) => return Err(e),
        }
        // A global segment: in the registry first (kept if it exists there), then declared here.
        // A global one takes the registry's step (the segment may exist there with another
        // start) and no mark: only this node's own ranges set the mark it shows the registry.
        let (step, max_id) = if r.global {
            let (_, step) = super::global::create(name, r.value, r.step, description)?;
            (step, i64::MIN)
        } else {
            (r.step, max_id)
        };
        if !catalog::insert(name, max_id, step, description, r.global, r.cache as u32)? {
            return Err(Error::SegmentExists { name: name.into() });
        }
        Ok(r.value)
    })
}

fn alter(db: pg_sys::Oid, r: &Request) -> Result<i64, Failure> {
    let name = r.name.as_str();
    let description = match r.description_change {
        DescriptionChange::Keep => None,
        DescriptionChange::Set => Some(Some(r.description.as_str())),
        DescriptionChange::Clear => Some(None),
    };
    let nodes = nodes().map_err(|e| Failure::from_error(&e))?;
    let step = in_transaction(|| {
        let row = catalog::lock_row(name)?;
        if row.global && r.step != 0 {
            return Err(Error::GlobalSegmentChange {
                name: name.into(),
                what: "change the step of",
            });
        }
        if r.step != 0 && nodes.interleaved() && !row.global {
            // The step is the block size every server interleaves by: it cannot change here.
            let current = row.step;
            if current != i64::from(r.step) {
                return Err(Error::InterleavedStepChange {
                    name: name.into(),
                    count: nodes.count,
                });
            }
        }
        catalog::alter(
            name,
            (r.step != 0).then_some(r.step),
            description,
            (r.cache >= 0).then_some(r.cache as u32),
        )
    })?;
    lock().set_step(db, name, step.0, step.1);
    Ok(step.0)
}

fn drop_segment(db: pg_sys::Oid, r: &Request) -> Result<i64, Failure> {
    let name = r.name.as_str();
    frozen_call(db, name, After::Release, |_| {
        if !catalog::delete(name)? {
            return Err(Error::UnknownSegment { name: name.into() });
        }
        Ok(0)
    })
}

/// Forward only: the new high-water mark must not be below any number this server may have
/// handed out (the last taken number of the cached range, else the stored mark).
fn setval(db: pg_sys::Oid, r: &Request) -> Result<i64, Failure> {
    let name = r.name.as_str();
    let value = r.value;
    frozen_call(db, name, After::Clear, |highest| {
        let row = catalog::lock_row(name)?;
        if row.global {
            return Err(Error::GlobalSegmentChange {
                name: name.into(),
                what: "move",
            });
        }
        let floor = highest.unwrap_or(row.max_id);
        if value < floor {
            return Err(Error::SetvalBackwards {
                name: name.into(),
                value,
                floor,
            });
        }
        catalog::set_max_id(name, value)?;
        Ok(value)
    })
}

/// Another subsystem's job (`crate::segment::register_job`), in a transaction of its own.
fn job(r: &Request) -> Result<i64, Failure> {
    let Some(handler) = crate::segment::job_handler() else {
        return Err(Failure::from_error(&Error::ExtensionNotVisible));
    };
    in_transaction(|| handler(r.name.as_str(), r.description.as_str(), r.args))
        .map_err(Failure::from)
}

/// The check of the fence when growing from N to M servers: after a configuration reload (so
/// that it cannot lag behind the caller's `pg_reload_conf()`), this allocator runs with
/// `idgen.segment_interleave_until` = `r.value`, so no refill from now on goes past it, and no
/// segment of the database is past it already (a refill before the reload may have gone past
/// it). Units of work run one at a time: once this one has run, both hold for good.
fn interleave_ready(r: &Request) -> Result<i64, Failure> {
    reload_now();
    let until = r.value;
    let in_force = fences().until;
    if in_force != Some(until) {
        return Err(Failure::from_error(&Error::InterleaveUntilNotSet {
            until,
            in_force,
        }));
    }
    let highest = in_transaction(catalog::highest_mark)?;
    match highest {
        Some((name, max_id)) if max_id > until => {
            Err(Failure::from_error(&Error::InterleavePastUntil {
                name,
                max_id,
                until,
            }))
        }
        Some((_, max_id)) => Ok(max_id),
        None => Ok(i64::MIN),
    }
}
