//! The worker id lease: what the registry granted this server (DESIGN.md §6) as the Snowflake
//! generator sees it. The registry client (`crate::registry`) writes it; the generator reads
//! it: the worker id ([`granted_worker`]), and the *fence*, the first tick the registry has not
//! confirmed (its recorded bound R, plus one). No id at or past the fence is issued: the durable
//! reservation is never extended past it (`durable::extend`), and the hot path already stops
//! at the reserved end. So whatever the clocks do, this server's ids stay below the R the
//! registry recorded, and whoever takes the worker id next starts above it.
//!
//! Without `idgen.registry` nothing here is used and there is no fence.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;

use idgen_core::snowflake::layout::Layout;
use idgen_core::snowflake::reservation;

use super::shared::{advance_state_to, layout, raise_head_start, shared, RESERVATION_LOCK};
use crate::error::Error;
use crate::failure::Failure;
use crate::guc;
use crate::shmem::{CacheLine, Part, ShmemStruct};

/// The lease in shared memory. All zero: nothing granted, no fence confirmed, no failure.
#[repr(C)]
#[derive(Default)]
pub(crate) struct LeaseShared {
    /// The granted worker id plus one; 0 until the registry granted one. Set once per server
    /// start: a worker id never changes while the server runs.
    granted: AtomicU64,
    /// The first tick the registry has not confirmed: R + 1. Only grows, except that a release
    /// lowers it to the final reservation (under the LWLock).
    fence_end: AtomicU64,
    /// The lease was released at shutdown: the fence is final.
    released: AtomicBool,
    /// The registry client's last failure (a refused claim, a lost lease, no answer); valid
    /// while `failed` is set. Written and read under `RESERVATION_LOCK`.
    failure: UnsafeCell<Failure>,
    /// `failure` holds the client's current failure.
    failed: AtomicBool,
}

// SAFETY: every field is an atomic, except `failure`, which is touched only under the LWLock
// `idgen_snowflake` (`RESERVATION_LOCK`).
unsafe impl Sync for LeaseShared {}

/// Whether this server takes its worker id from a registry (`idgen.registry` is set), fixed in
/// the postmaster at start.
static REGISTRY_MODE: OnceLock<bool> = OnceLock::new();

/// Fixes [`registry_mode`]. Called from `snowflake::init` in the postmaster.
pub(crate) fn init() {
    let _ = REGISTRY_MODE.set(crate::guc::registry_conninfo().is_some());
}

/// Whether the worker id and the fence come from a registry.
pub(crate) fn registry_mode() -> bool {
    REGISTRY_MODE.get().copied().unwrap_or(false)
}

/// `idgen_snowflake_lease` in shared memory: zeroed at start and after a crash.
static LEASE: ShmemStruct<CacheLine<LeaseShared>> = ShmemStruct::new(c"idgen_snowflake_lease");

/// The lease's share of shared memory (registered by `snowflake::init`).
pub(crate) const PART: Part = Part {
    request: || LEASE.request(),
    // SAFETY: LeaseShared is atomics and a Failure of plain bytes, for which all-zero is valid
    // (its Default); nothing else to initialize.
    attach: || unsafe { LEASE.attach(|_| {}) },
};

fn lease() -> &'static LeaseShared {
    &LEASE.get().0
}

/// This process's copy of the server's worker id once known ([`NO_WORKER`] before): the
/// setting's, or the one the registry granted, which never changes until the server restarts
/// (DESIGN.md §6). A process static, so the per-id path reads no shared memory for it.
static WORKER: AtomicU64 = AtomicU64::new(NO_WORKER);

/// [`WORKER`] before the worker id is known.
const NO_WORKER: u64 = u64::MAX;

/// This server's worker id for an id: `idgen.worker_id`, or the one the registry granted.
/// Errors: 55000 while it is unset (the hint names the layout's range) or the registry has not
/// granted one yet; the registry's refusal (e.g. 55006, the id is held by another node).
#[inline]
pub(crate) fn worker_id() -> Result<u64, Error> {
    match WORKER.load(Ordering::Relaxed) {
        NO_WORKER => worker_id_first(),
        worker => Ok(worker),
    }
}

/// [`worker_id`] the first time in this process, and until it is known.
#[cold]
#[inline(never)]
fn worker_id_first() -> Result<u64, Error> {
    let worker = match guc::worker_id_setting() {
        guc::WorkerIdSetting::Unset => {
            return Err(Error::WorkerIdNotSet {
                max_worker: layout().max_worker(),
            })
        }
        guc::WorkerIdSetting::Fixed(worker) if !registry_mode() => worker,
        _ => granted_worker()?,
    };
    WORKER.store(worker, Ordering::Relaxed);
    Ok(worker)
}

/// The server's worker id if known, without an error: `snowflake_status()`, the keeper.
pub(crate) fn known_worker_id() -> Option<u64> {
    worker_id().ok()
}

/// What the registry granted: the worker id, the floor (the first tick this server may use:
/// above the previous holder's R, or at its final reservation after a clean release), and
/// the fence (R + 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Grant {
    pub(crate) worker: u64,
    pub(crate) floor_tick: u64,
    pub(crate) fence_end: u64,
}

/// Installs a grant: the generator continues at the floor (a head start when the floor is
/// ahead of the clock: issued at once, no waiting), the fence is set and the worker id becomes
/// visible to every backend, in that order.
pub(crate) fn grant(g: Grant) {
    let (layout, shared, lease) = (layout(), shared(), lease());
    advance_state_to(layout, shared, g.floor_tick);
    raise_head_start(shared, g.floor_tick);
    lease.fence_end.fetch_max(g.fence_end, Ordering::AcqRel);
    lease.granted.store(g.worker + 1, Ordering::Release);
    clear_failure();
}

/// A renewal confirmed ticks up to `fence_end - 1`.
pub(crate) fn renewed(fence_end: u64) {
    let lease = lease();
    if !lease.released.load(Ordering::Acquire) {
        lease.fence_end.fetch_max(fence_end, Ordering::AcqRel);
    }
    clear_failure();
}

/// The worker id the registry granted, if any.
pub(crate) fn granted() -> Option<u64> {
    lease().granted.load(Ordering::Acquire).checked_sub(1)
}

/// The granted worker id, or why there is none: the registry client's failure (its SQLSTATE),
/// or 55000 while it has not heard from the registry yet.
pub(crate) fn granted_worker() -> Result<u64, Error> {
    granted().ok_or_else(|| match failure() {
        Some(f) => f.to_error(),
        None => Error::RegistryPending,
    })
}

/// The first tick no id may reach: the fence, or `u64::MAX` without a registry.
pub(crate) fn fence_end() -> u64 {
    if registry_mode() {
        lease().fence_end.load(Ordering::Acquire)
    } else {
        u64::MAX
    }
}

/// The error of a reservation that would reach the fence at `fence_end`. Takes the LWLock
/// `idgen_snowflake`: never call it while holding that.
#[cold]
pub(crate) fn fenced(layout: &Layout, fence_end: u64) -> Error {
    let lease = lease();
    Error::RegistryFenced {
        worker: granted().unwrap_or(0),
        until_unix_ms: layout.unix_ms_of_tick(fence_end),
        reason: if lease.released.load(Ordering::Acquire) {
            "The lease was released: the server is shutting down.".into()
        } else {
            failure().map_or_else(
                || "The registry has not renewed the lease yet.".into(),
                |f| format!("The registry client's last failure: {}", f.message()),
            )
        },
    }
}

/// Records the registry client's failure, for callers and the status view.
pub(crate) fn fail(f: Failure) {
    let lease = lease();
    let _guard = RESERVATION_LOCK.exclusive();
    // SAFETY: `failure` is written and read only under RESERVATION_LOCK, held here.
    unsafe { *lease.failure.get() = f };
    lease.failed.store(true, Ordering::Release);
}

fn clear_failure() {
    lease().failed.store(false, Ordering::Release);
}

/// The registry client's current failure, if any.
pub(crate) fn failure() -> Option<Failure> {
    let lease = lease();
    if !lease.failed.load(Ordering::Acquire) {
        return None;
    }
    let _guard = RESERVATION_LOCK.exclusive();
    // SAFETY: `failure` is written and read only under RESERVATION_LOCK, held here.
    Some(unsafe { *lease.failure.get() })
}

/// Ends the lease at shutdown: from now on no id reaches past the durable reservation in force,
/// which is returned as the final reservation the registry records (every id this server issued
/// is below it). Under the LWLock, so no extension of the reservation races with it. `floor` is
/// the floor of the grant, for a server that issued nothing since it started.
pub(crate) fn release(floor_tick: u64) -> u64 {
    let (shared, lease) = (shared(), lease());
    let _guard = RESERVATION_LOCK.exclusive();
    lease.released.store(true, Ordering::Release);
    let reserved_end = shared.reserved_end.0.load(Ordering::Acquire);
    let stored_end = if reserved_end == 0 {
        // Nothing issued since start: the file's reservation (if any) still bounds the ids.
        own_reservation_end()
    } else {
        reserved_end
    };
    let final_end = stored_end.max(floor_tick);
    lease.fence_end.store(final_end, Ordering::Release);
    final_end
}

/// The first tick this server's own reservation file says it never reached (0 without one):
/// a claim shows it to the registry, which never starts this node's next grant of the same
/// worker id below it.
/// A file written under another layout counts its ticks differently: it says nothing here (0),
/// as the generator itself refuses it (`durable::extend`).
pub(crate) fn own_reservation_end() -> u64 {
    reservation::read(&reservation::path_in(&crate::backend::data_dir()))
        .ok()
        .flatten()
        .filter(|s| s.layout.counts_ticks_as(layout()))
        .map_or(0, |s| s.reserved_end)
}

/// The head start in force: the floor tick the generator treats as its clock while the clock
/// is below it.
pub(crate) fn head_start_tick() -> u64 {
    shared().counters.0.head_start_tick.load(Ordering::Acquire)
}

/// How far the head start is ahead of the clock at `now_ms`, in ms (0 once the clock passed it).
pub(crate) fn head_start_ms(now_ms: i64) -> i64 {
    match head_start_tick() {
        0 => 0,
        tick => (layout().unix_ms_of_tick(tick) - now_ms).max(0),
    }
}

/// The start of tick `tick` of the server's layout, Unix ms.
pub(crate) fn tick_unix_ms(tick: u64) -> i64 {
    layout().unix_ms_of_tick(tick)
}

/// The server's layout as the registry records it: (epoch Unix ms, worker bits, sequence bits,
/// tick length ms). The registry refuses a node whose values differ from the fleet's, since
/// ids of two such layouts can collide.
///
/// `idgen.id_bits` is deliberately not among them, and the registry's functions are unchanged
/// by it. It does not change how an id is composed (`tick << (worker_bits + sequence_bits) |
/// worker << sequence_bits | sequence`) nor what a tick is, only the last tick the time field
/// holds (`Layout::counts_ticks_as`): nodes of one fleet that differ only in `id_bits` issue
/// ids that are equal only for equal (tick, worker id, sequence), which leases keep apart, and
/// the fences the registry hands out are ticks that mean the same to both. The narrower node
/// merely runs out of time sooner, loudly (2200H). Keeping a whole fleet below 2^53 is a
/// deployment rule (README, "Ids for JavaScript"), not a uniqueness one; `snowflake_status()`
/// shows each node's `id_bits`.
pub(crate) fn fleet_layout() -> (i64, u32, u32, u32) {
    let l = layout();
    (
        l.epoch_unix_ms(),
        l.worker_bits(),
        l.sequence_bits(),
        l.time_unit_ms(),
    )
}
