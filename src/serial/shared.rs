//! The counters of fast serials in shared memory (`idgen_serial_cache`): one slot per
//! (database, serial, period) in use, each a lock-free double buffer of ranges as a segment's
//! ([`crate::segment::DoubleBuffer`]), so that a draw is one `fetch_add`. A range is used only
//! after the counter's high-water mark was moved past it in `idgen_serial_counter` by a
//! committed transaction of the allocator (or, for a global serial, in the registry), as a
//! segment's: numbers left in the cache at a restart or an eviction are skipped, never issued
//! again, and a period's counter goes on above its mark whatever the clock does.
//!
//! Also the serial catalog's generation, bumped when a transaction that changed a serial (or
//! its privileges) commits: every backend's cache of definitions ([`super::cache`]) compares it
//! at each draw.
//!
//! The cache has `idgen.serial_cache_size` slots (fixed at start): [`SLOTS`], their [`Meta`]s
//! and an index key → slot, all sized by the setting. When it is full, a new counter takes the
//! slot of one refilled longest ago, preferring a counter of an earlier period than one cached
//! for the same serial (yesterday's counter of a daily serial): the rest of the evicted
//! counter's range is skipped. The evicted counter's step and last refill are remembered (as
//! many as there are slots, the oldest forgotten first), so that it comes back with the step it
//! had, not from the floor of 10.
//!
//! The slots' keys and refill state are under the LWLock `idgen_serial`; a draw takes it only
//! when its backend does not know the slot yet or the slot's ranges are used up.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed, Ordering::SeqCst};
use std::time::Duration;

use pgrx::pg_sys;

use crate::error::Error;
use crate::guc;
use crate::lwlock::{LWLockGuard, NamedLWLock};
use crate::segment::{DoubleBuffer, Range};
use crate::shmem::{Part, ShmemArray, ShmemHash, ShmemStruct};
use crate::time::now_timestamptz_us;

/// The smallest and largest number of values one refill takes.
const MIN_STEP: i64 = 10;
const MAX_STEP: i64 = 100_000;
/// A range used up faster than this doubles the next step; one lasting ten times longer
/// halves it (Leaf's dynamic step, DESIGN.md §2).
const FAST_REFILL_US: i64 = 2_000_000;

/// One cached counter: what a draw touches without the lock.
#[repr(C)]
#[derive(Default)]
pub(crate) struct Slot {
    buffers: DoubleBuffer,
    /// Bumped before and after the slot changes hands, so a backend's cached (slot,
    /// generation) goes stale, and a draw that raced with a change is thrown away (a gap).
    generation: AtomicU64,
}

/// Which counter a slot holds.
#[repr(C)]
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
pub(crate) struct Key {
    pub(crate) db: pg_sys::Oid,
    /// The OID of the database's `idgen_serial` table: serial ids start again at 1 when the
    /// extension is created again (or a dropped database's OID is reused), and such a counter
    /// must not find the old one's cached range.
    pub(crate) catalog: pg_sys::Oid,
    pub(crate) serial: i64,
    pub(crate) period: i32,
}

impl Key {
    /// Whether `other` is a counter of the same serial (of any period).
    fn same_serial(&self, other: &Key) -> bool {
        (self.db, self.catalog, self.serial) == (other.db, other.catalog, other.serial)
    }
}

/// A [`Key`] as the index's key: the same fields without padding bytes (the index compares
/// keys as bytes).
#[repr(C)]
#[derive(Clone, Copy, Default, PartialEq, Eq)]
struct IndexKey {
    db: u32,
    catalog: u32,
    serial: i64,
    period: i32,
    zero: i32,
}

impl From<Key> for IndexKey {
    fn from(k: Key) -> Self {
        Self {
            db: k.db.to_u32(),
            catalog: k.catalog.to_u32(),
            serial: k.serial,
            period: k.period,
            zero: 0,
        }
    }
}

/// An entry of the index: the slot that holds a counter.
#[repr(C)]
#[derive(Clone, Copy)]
struct IndexEntry {
    key: IndexKey,
    index: usize,
}

/// A counter that left the cache: what its next refill's step depends on.
#[repr(C)]
#[derive(Clone, Copy)]
struct Ghost {
    key: IndexKey,
    step: i64,
    last_refill_at: i64,
    /// Its place in [`GHOST_RING`].
    place: usize,
}

/// A place of [`GHOST_RING`]: the counter remembered there, if `used`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct RingPlace {
    key: IndexKey,
    used: bool,
}

/// A slot's key and refill state, under the LWLock.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct Meta {
    key: Key,
    in_use: bool,
    /// A counter of a later period of the same serial is (or was) cached: this one goes first
    /// when a slot is needed.
    stale: bool,
    /// A global serial's counter: dropped by [`void_global`].
    global: bool,
    /// A backend is taking the next range; others wait for it.
    refilling: bool,
    /// The pid of that backend: its exit clears `refilling` ([`release_at_exit`]), however it
    /// exits (a FATAL from `pg_terminate_backend` unwinds no Rust frame).
    refiller: i32,
    /// Step of the last refill; 0 before the first.
    step: i64,
    /// `step` and `last_refill_at` are those the counter had when it left the cache: its last
    /// range was not used up, so the next step is not doubled.
    resumed: bool,
    /// When the last refill committed (`TimestampTz`, µs).
    last_refill_at: i64,
}

#[repr(C)]
struct SerialShared {
    /// The serial catalog's generation.
    generation: AtomicU64,
    /// The place of [`GHOST_RING`] written next; under the LWLock.
    next_ghost: AtomicU64,
    /// Slots in use; under the LWLock.
    used: AtomicU64,
    /// Where [`assign`] looks for a free slot next, and where its eviction sample starts;
    /// under the LWLock.
    free_hand: AtomicU64,
    evict_hand: AtomicU64,
}

/// Slots an eviction compares at most (from a rotating hand): a miss costs the same whatever
/// the cache's size, as PostgreSQL's clock sweep does, at the price of evicting the best of a
/// sample rather than of all.
const EVICTION_SAMPLE: usize = 256;

static SHARED: ShmemStruct<SerialShared> = ShmemStruct::new(c"idgen_serial_cache");
/// The slots: atomics only, shared by every backend without a lock.
static SLOTS: ShmemArray<Slot> = ShmemArray::new(c"idgen_serial_slots");
/// The slots' keys and refill state: under the LWLock only ([`Locked`]).
static METAS: ShmemArray<Meta> = ShmemArray::new(c"idgen_serial_metas");
/// Counter → slot, for every slot in use: under the LWLock only.
static INDEX: ShmemHash<IndexKey, IndexEntry> = ShmemHash::new(c"idgen_serial_index");
/// Counters that left the cache → their step: under the LWLock only.
static GHOSTS: ShmemHash<IndexKey, Ghost> = ShmemHash::new(c"idgen_serial_ghosts");
/// The counters of [`GHOSTS`] in the order they left: under the LWLock only.
static GHOST_RING: ShmemArray<RingPlace> = ShmemArray::new(c"idgen_serial_ghost_ring");
static LOCK: NamedLWLock = NamedLWLock::new(c"idgen_serial");

/// The serial cache's share of shared memory; empty after every (re)start.
pub(crate) const PART: Part = Part {
    request: || {
        let size = guc::serial_cache_size();
        SHARED.request();
        SLOTS.request(size);
        METAS.request(size);
        INDEX.request(size);
        GHOSTS.request(size);
        GHOST_RING.request(size);
        LOCK.request();
    },
    attach: || {
        let size = guc::serial_cache_size();
        // SAFETY: atomics, plain numbers and bools: all valid as zero bytes.
        unsafe {
            SHARED.attach(|_| {});
            SLOTS.attach(size);
            METAS.attach(size);
            GHOST_RING.attach(size);
        }
        INDEX.attach(size);
        GHOSTS.attach(size);
        LOCK.attach();
    },
};

/// The serial catalog's generation (0 where idgen's shared memory does not exist).
pub(crate) fn catalog_generation() -> u64 {
    if SHARED.attached() {
        SHARED.get().generation.load(SeqCst)
    } else {
        0
    }
}

/// Bumps the serial catalog's generation: a serial or its privileges changed.
pub(crate) fn bump_catalog_generation() {
    if SHARED.attached() {
        SHARED.get().generation.fetch_add(1, SeqCst);
    }
}

fn slot(index: usize) -> &'static Slot {
    &SLOTS.get()[index]
}

/// The LWLock `idgen_serial`, held exclusively, and through it the metas and the index.
struct Locked {
    _guard: LWLockGuard<'static>,
}

fn lock() -> Locked {
    Locked {
        _guard: LOCK.exclusive(),
    }
}

impl Locked {
    /// The metas, slot by slot.
    fn metas(&mut self) -> &mut [Meta] {
        let (ptr, len) = METAS.raw();
        // SAFETY: `len` initialized Metas in shared memory; the LWLock is held exclusively for
        // as long as `self` lives, and it is not reentrant, so this is the only reference.
        unsafe { std::slice::from_raw_parts_mut(ptr, len) }
    }

    /// The slot that holds counter `key`, if any.
    fn find(&mut self, key: Key) -> Option<usize> {
        // SAFETY: the LWLock is held exclusively (`self`).
        let index = unsafe { INDEX.find(&key.into()) }?.index;
        let m = &self.metas()[index];
        (m.in_use && m.key == key).then_some(index)
    }

    /// Frees slot `index` (its counter leaves the cache, its step remembered), under a new
    /// generation.
    fn clear(&mut self, index: usize) {
        let mut meta = self.metas()[index];
        let s = slot(index);
        if meta.in_use {
            // SAFETY: the LWLock is held exclusively (`self`).
            unsafe { INDEX.remove(&meta.key.into()) };
            if meta.step > 0 {
                // A counter that leaves before using its range up comes back with at least half
                // its step (more if it drew more of it), so that a counter drawn now and then,
                // evicted between its draws, does not skip the whole step a burst grew it to
                // at every stay: the step halves at each such stay down to the floor.
                if let Some(v) = s.buffers.views().0 {
                    let len = v.range.len() as i128;
                    let used = (v.taken as i128).min(len);
                    if used < len {
                        meta.step = (used as i64)
                            .max(meta.step / 2)
                            .max(MIN_STEP)
                            .min(meta.step);
                    }
                }
                self.remember(&meta);
            }
        }
        if meta.in_use {
            SHARED.get().used.fetch_sub(1, Relaxed);
        }
        s.generation.fetch_add(1, SeqCst);
        s.buffers.clear();
        self.metas()[index] = Meta::default();
        s.generation.fetch_add(1, SeqCst);
    }

    /// Remembers the step of a counter that leaves the cache, in the ring's next place (whose
    /// counter, if still remembered there, is forgotten).
    fn remember(&mut self, meta: &Meta) {
        let (ring, len) = GHOST_RING.raw();
        let shared = SHARED.get();
        let place = shared.next_ghost.load(Relaxed) as usize % len;
        shared.next_ghost.store(((place + 1) % len) as u64, Relaxed);
        // SAFETY: `place < len`, an initialized RingPlace of shared memory; the LWLock is held
        // exclusively (`self`), so nothing else reads or writes it, nor the ghosts.
        unsafe {
            let old = *ring.add(place);
            if old.used && GHOSTS.find(&old.key).is_some_and(|g| g.place == place) {
                GHOSTS.remove(&old.key);
            }
            let key = meta.key.into();
            let ghost = Ghost {
                key,
                step: meta.step,
                last_refill_at: meta.last_refill_at,
                place,
            };
            let kept = GHOSTS.insert(&key, ghost);
            *ring.add(place) = RingPlace { key, used: kept };
        }
    }

    /// The step and last refill of counter `key` when it left the cache, if remembered
    /// (forgotten here: the counter is back).
    fn recall(&mut self, key: Key) -> Option<Ghost> {
        let key = key.into();
        // SAFETY: the LWLock is held exclusively (`self`). The ring place left behind is
        // skipped when it comes round (its ghost is gone).
        unsafe {
            let ghost = GHOSTS.find(&key)?;
            GHOSTS.remove(&key);
            Some(ghost)
        }
    }
}

/// A backend's note of where a counter is cached: slot and the generation it had.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Cached {
    pub(crate) key: Key,
    index: usize,
    generation: u64,
}

/// The largest step for a format whose counter shows at most `max_seq` (a crash skips up to
/// two ranges, which must stay small next to what a period can hold).
pub(crate) fn max_step(max_seq: Option<i64>) -> i64 {
    match max_seq {
        Some(m) => (m / 100).clamp(1, MAX_STEP),
        None => MAX_STEP,
    }
}

/// Draws the next number of counter `key` (a global serial's when `global`). `cached` is the
/// caller's note of its slot (updated here); `take(step, deadline)` moves the counter's durable
/// mark up by `step` numbers and returns the new mark (the allocator's job, or the registry's),
/// waiting until `deadline` (the call's, a `TimestampTz`) at most, after which its range is
/// used; `usable()` is asked after each number is taken and before it is
/// handed out (a global counter's range is served only while the registry's contact is fresh):
/// asked before the slot's generation is checked again, so that a [`void_global`] followed by
/// a fresh contact never lets a voided number through.
///
/// Waiting for another backend's refill (or for a slot) is bounded by the caller's
/// `idgen.segment_wait_timeout`, counted from the start of the call: past it the draw fails with
/// [`Error::SerialWaitTimeout`] (55P03), as a segment draw does. `name` is the serial's (for
/// the error).
pub(crate) fn draw(
    name: &str,
    key: Key,
    cached: &mut Option<Cached>,
    max_step: i64,
    global: bool,
    take: impl Fn(i64, Option<i64>) -> Result<i64, Error>,
    usable: impl Fn() -> Result<(), Error>,
) -> Result<i64, Error> {
    // One deadline for the whole call: every wait and the refill's job share it.
    let deadline =
        guc::segment_wait_timeout_ms().map(|ms| (now_timestamptz_us() + i64::from(ms) * 1000, ms));
    let timed_out = |ms| Error::SerialWaitTimeout {
        name: name.to_owned(),
        ms,
    };
    loop {
        if let Some(c) = cached.filter(|c| c.key == key) {
            let s = slot(c.index);
            if s.generation.load(SeqCst) == c.generation {
                if let Some(d) = s.buffers.draw(1) {
                    // Refused, the number is skipped (a gap).
                    usable()?;
                    if s.generation.load(SeqCst) == c.generation {
                        return Ok(d.first);
                    }
                    // The slot changed hands during the draw: a gap of the other counter.
                    continue;
                }
            } else {
                *cached = None;
            }
        }
        // Slow path: find or assign the slot; refill it, or wait for whoever refills it.
        let refill = {
            let mut locked = lock();
            let index = match locked.find(key) {
                Some(i) => i,
                None => match assign(&mut locked, key, global) {
                    Some(i) => i,
                    None => {
                        drop(locked);
                        wait(deadline).map_err(timed_out)?;
                        continue;
                    }
                },
            };
            let m = locked.metas();
            let s = slot(index);
            *cached = Some(Cached {
                key,
                index,
                generation: s.generation.load(SeqCst),
            });
            if m[index].refilling {
                None
            } else if drawable(s) || s.buffers.next_remaining() > 0 {
                // Refilled meanwhile (or the next range is queued): draw again.
                Some(None)
            } else {
                let meta = &mut m[index];
                let step = next_step(meta, max_step);
                meta.refilling = true;
                meta.refiller = crate::backend::pid();
                Some(Some((index, step, s.generation.load(SeqCst))))
            }
        };
        match refill {
            // Another backend is taking the next range.
            None => wait(deadline).map_err(timed_out)?,
            Some(None) => {}
            Some(Some((index, step, generation))) => {
                release_at_exit();
                REFILLING.set(Some((index, generation)));
                let guard = Refilling(index, generation);
                let mark = take(step, deadline.map(|(at, _)| at)).map_err(|e| match e {
                    Error::SegmentWaitTimeout { ms, .. } => timed_out(ms),
                    e => e,
                })?;
                std::mem::forget(guard);
                let mut locked = lock();
                REFILLING.set(None);
                let m = locked.metas();
                let s = slot(index);
                // A slot that changed hands meanwhile (a void, an eviction) is another
                // counter's now: its refilling flag is its new refiller's.
                if s.generation.load(SeqCst) == generation {
                    m[index].refilling = false;
                    m[index].resumed = false;
                    m[index].step = step;
                    m[index].last_refill_at = now_timestamptz_us();
                    let first = mark.saturating_sub(step - 1).max(1);
                    // Refused only if the range is not above what the slot holds (never, as
                    // marks only grow): its numbers are then skipped, never issued.
                    s.buffers.install(Range { first, last: mark });
                }
            }
        }
    }
}

/// Sleeps a moment while another backend refills; `Err(ms)` once `deadline` (a `TimestampTz`,
/// and `idgen.segment_wait_timeout` in ms) has passed.
fn wait(deadline: Option<(i64, i32)>) -> Result<(), i32> {
    if let Some((at, ms)) = deadline {
        if now_timestamptz_us() >= at {
            return Err(ms);
        }
    }
    crate::latch::sleep_interruptibly(Duration::from_millis(1));
    Ok(())
}

/// Whether the slot's current range still has numbers (a racing refill installed one).
fn drawable(s: &Slot) -> bool {
    s.buffers
        .views()
        .0
        .is_some_and(|v| (v.taken as i128) < v.range.len() as i128)
}

/// The step of the next refill: doubled when the last range went fast (unless the counter left
/// the cache before using it up), halved when it lasted long, within
/// `MIN_STEP.min(max_step)..=max_step`.
fn next_step(meta: &Meta, max_step: i64) -> i64 {
    let floor = MIN_STEP.min(max_step);
    if meta.step == 0 {
        return floor;
    }
    let since = now_timestamptz_us() - meta.last_refill_at;
    let step = if since < FAST_REFILL_US && !meta.resumed {
        meta.step.saturating_mul(2)
    } else if since > 10 * FAST_REFILL_US {
        meta.step / 2
    } else {
        meta.step
    };
    step.clamp(floor, max_step)
}

/// Assigns a slot to `key`: a free one (found from a rotating hand), else, among a sample of
/// [`EVICTION_SAMPLE`] slots from another hand, one not being refilled whose counter is of an
/// earlier period than another of its serial, else the one refilled longest ago. The sample
/// also marks the counters of earlier periods of `key`'s serial it meets. None when every
/// slot is being refilled. A counter that was cached before comes back with the step it had.
fn assign(locked: &mut Locked, key: Key, global: bool) -> Option<usize> {
    let shared = SHARED.get();
    let len = locked.metas().len();
    let mut newer = false;
    let index = if (shared.used.load(Relaxed) as usize) < len {
        let start = shared.free_hand.load(Relaxed) as usize % len;
        let metas = locked.metas();
        let i = (0..len)
            .map(|k| (start + k) % len)
            .find(|&i| !metas[i].in_use)?;
        shared.free_hand.store(((i + 1) % len) as u64, Relaxed);
        i
    } else {
        let start = shared.evict_hand.load(Relaxed) as usize % len;
        let mut victim: Option<(usize, (bool, i64))> = None;
        let mut looked = 0;
        for k in 0..len {
            let i = (start + k) % len;
            let x = &mut locked.metas()[i];
            if x.key.same_serial(&key) {
                if x.key.period < key.period {
                    x.stale = true;
                } else if x.key.period > key.period {
                    newer = true;
                }
            }
            if x.refilling {
                continue;
            }
            let rank = (!x.stale, x.last_refill_at);
            if victim.is_none_or(|(_, r)| rank < r) {
                victim = Some((i, rank));
            }
            looked += 1;
            if looked == EVICTION_SAMPLE.min(len) {
                break;
            }
        }
        let (i, _) = victim?;
        shared.evict_hand.store(((i + 1) % len) as u64, Relaxed);
        i
    };
    // Under new generations: a backend's note of the slot is stale, its ranges are gone.
    locked.clear(index);
    let ghost = locked.recall(key);
    shared.used.fetch_add(1, Relaxed);
    locked.metas()[index] = Meta {
        key,
        in_use: true,
        stale: newer,
        global,
        step: ghost.map_or(0, |g| g.step),
        last_refill_at: ghost.map_or(0, |g| g.last_refill_at),
        resumed: ghost.is_some(),
        ..Meta::default()
    };
    // SAFETY: the LWLock is held exclusively (`locked`). The index has room for every slot.
    let indexed = unsafe {
        INDEX.insert(
            &key.into(),
            IndexEntry {
                key: key.into(),
                index,
            },
        )
    };
    debug_assert!(indexed);
    Some(index)
}

/// Drops every cached range of a global serial's counter (all databases): the registry's
/// hello said a recovery completed without this node's report, so those numbers may be handed
/// out again. Their numbers are skipped; a refill in flight is thrown away (its generation
/// changed). Returns how many were dropped.
pub(crate) fn void_global() -> usize {
    if !SHARED.attached() {
        return 0;
    }
    let mut locked = lock();
    let mut dropped = 0;
    for index in 0..locked.metas().len() {
        let meta = locked.metas()[index];
        if meta.in_use && meta.global {
            locked.clear(index);
            dropped += 1;
        }
    }
    dropped
}

/// Clears the refilling flag of a slot whose refill failed (an error unwinds through here),
/// so that the next caller tries again.
struct Refilling(usize, u64);

impl Drop for Refilling {
    fn drop(&mut self) {
        let mut locked = lock();
        REFILLING.set(None);
        // Only while the slot still holds the counter this backend was refilling.
        if slot(self.0).generation.load(SeqCst) == self.1 {
            locked.metas()[self.0].refilling = false;
        }
    }
}

thread_local! {
    /// The slot (and its generation) this backend is refilling, if any: a backend refills one
    /// counter at a time, so its exit looks at that slot only, not at every slot.
    static REFILLING: std::cell::Cell<Option<(usize, u64)>> = const { std::cell::Cell::new(None) };
}

/// Makes sure this backend's refills are given up when it exits, however it exits: a backend
/// terminated while it waits for the allocator dies by FATAL, which unwinds no Rust frame, and
/// its slot would stay `refilling`, every later draw of the counter waiting for it.
fn release_at_exit() {
    thread_local! {
        static REGISTERED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }
    if !REGISTERED.get() {
        // SAFETY: registers a #[pg_guard]ed callback with the signature PostgreSQL calls, once
        // per process, with a datum it ignores.
        unsafe { pg_sys::before_shmem_exit(Some(release_own_refills), pg_sys::Datum::from(0)) };
        REGISTERED.set(true);
    }
}

#[pgrx::pg_guard]
unsafe extern "C-unwind" fn release_own_refills(_code: i32, _arg: pg_sys::Datum) {
    // This callback may run before PostgreSQL's own cleanup releases the LWLocks this process
    // holds (callbacks run in reverse order of registration): release them first, or taking
    // idgen_serial below would wait for ourselves.
    pg_sys::LWLockReleaseAll();
    let Some((index, generation)) = REFILLING.take() else {
        return;
    };
    let pid = crate::backend::pid();
    let mut locked = lock();
    let m = &mut locked.metas()[index];
    if slot(index).generation.load(SeqCst) == generation && m.refilling && m.refiller == pid {
        m.refilling = false;
    }
}
