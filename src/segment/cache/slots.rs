//! The slot table: which segment each slot of the shared cache holds, and every change of a
//! slot's state under the LWLock (assign, evict, release, freeze for an admin call, thaw, a new
//! step, a finished refill), plus the rows of `segment_status()`. Drawing from a slot is
//! lock-free (`session::draw`); everything here runs with the LWLock held ([`Guarded`]'s
//! methods) or takes it ([`freeze`], [`unfreeze`]).
//!
//! The cache is not a limit on segment names (DESIGN.md §2): when every slot is in use, loading
//! a segment evicts one that was not drawn from since the clock sweep last passed it
//! (PostgreSQL's buffer replacement, with one usage bit), and its unused numbers are given back
//! to `idgen_segment` or skipped ([`Evicted`]), never handed out again.

use std::sync::atomic::Ordering::SeqCst;

use pgrx::pg_sys;

use super::{
    broadcast, cache_size, lock, slot, Guarded, Lane, NotedFailure, SlotKey, SlotMeta, IDLED,
    NOTED_FAILURES, SWEPT,
};
use crate::error::Error;
use crate::failure::{Failure, FixedText};
use crate::segment::buffer::BufferView;
use crate::segment::range::Range;

/// Whether slot `index` holds a segment (its generation is odd).
fn in_use(index: usize) -> bool {
    slot(index).generation.load(SeqCst) % 2 == 1
}

impl Guarded {
    /// The slot holding segment `name` of database `db`, if it is cached.
    pub(crate) fn find(&self, db: pg_sys::Oid, name: &str) -> Option<usize> {
        self.indexed(&SlotKey::new(db, name)).filter(|&i| {
            let m = &self.metas[i];
            m.db == db && m.name.as_str() == name && in_use(i)
        })
    }

    /// Assigns a slot to segment `name` of `db`, empty and with a refill wanted: a free one, or
    /// else the one the clock sweep evicts (returned, for its numbers to be given back). 54000
    /// when every slot is busy (frozen by an admin call or being refilled).
    ///
    /// The first refill takes `ticket`, the load's own: it goes before every load queued after
    /// this one, so that a burst of loads of more names than the cache has slots does not pin
    /// every slot with a refill queued behind all of them (the later loads then found no slot
    /// to evict and failed with 54000).
    pub(crate) fn assign(
        &mut self,
        db: pg_sys::Oid,
        name: &str,
        base_step: i64,
        cache: u32,
        global: bool,
        ticket: u64,
    ) -> Result<(usize, Option<Evicted>), Error> {
        let (index, evicted) = match self.free_slot() {
            Some(i) => (i, None),
            None => {
                let victim = self
                    .sweep()
                    .ok_or(Error::SegmentCacheFull { max: cache_size() })?;
                (victim, Some(self.take_out(victim)))
            }
        };
        let s = slot(index);
        s.buffers.clear();
        self.metas[index] = SlotMeta {
            db,
            name: FixedText::new(name),
            base_step,
            global,
            issued_base: s.buffers.issued(),
            ..SlotMeta::default()
        };
        // The caller that loads it waits for its first range.
        let m = &mut self.metas[index];
        m.refill_wanted = true;
        m.refill_ticket = ticket;
        s.referenced.store(SWEPT | IDLED, SeqCst);
        s.cache.store(cache, SeqCst);
        s.global.store(global, SeqCst);
        s.generation.fetch_add(1, SeqCst);
        self.used += 1;
        if !self.index_insert(SlotKey::new(db, name), index) {
            // The index has room for every slot: a full one means an entry leaked. The slot
            // still works; `find` falls back to nothing, so it is freed again.
            self.release(index);
            return Err(Error::SegmentCacheFull { max: cache_size() });
        }
        Ok((index, evicted))
    }

    /// A free slot, looked for from the clock hand on, while fewer slots than the cache has
    /// are in use.
    fn free_slot(&mut self) -> Option<usize> {
        let n = cache_size();
        if self.used >= n {
            return None;
        }
        let start = self.hand;
        let found = (0..n).map(|k| (start + k) % n).find(|&i| !in_use(i))?;
        self.hand = (found + 1) % n;
        Some(found)
    }

    /// The clock sweep: the next slot from the hand on that may be evicted (in use, not frozen,
    /// no refill in flight) and was not drawn from since the hand last passed it; clears the
    /// referenced bit of those it passes. At most two turns: `None` when every slot is busy.
    fn sweep(&mut self) -> Option<usize> {
        let n = cache_size();
        for _ in 0..2 * n {
            let i = self.hand;
            self.hand = (i + 1) % n;
            if !self.evictable(i) {
                continue;
            }
            if slot(i).referenced.fetch_and(!SWEPT, SeqCst) & SWEPT == 0 {
                return Some(i);
            }
        }
        None
    }

    /// Whether slot `index` holds a segment that may leave the cache now.
    fn evictable(&self, index: usize) -> bool {
        let m = &self.metas[index];
        in_use(index) && !m.frozen && !m.refill_wanted
    }

    /// Takes a segment out of the cache: freezes its buffers (draws in flight are thrown away),
    /// notes the last number taken and the mark of its last refill, and frees the slot.
    fn take_out(&mut self, index: usize) -> Evicted {
        let s = slot(index);
        s.buffers.freeze();
        let m = self.metas[index];
        let evicted = Evicted {
            db: m.db,
            name: m.name,
            mark: m.marked.then_some(m.mark),
            highest_taken: s.buffers.highest_taken(),
        };
        self.release(index);
        evicted
    }

    /// Takes out of the cache every segment of `db` that, unless `all`, was not drawn from
    /// since the last call and wants no refill: what an idle allocator, or one that is exiting
    /// (`all`), gives back. Called by `db`'s allocator between units of work, where no refill or
    /// admin call of `db` is in flight (only that allocator runs them), so a refill still wanted
    /// is only a request: an exiting allocator drops it (its callers look the segment up again).
    pub(crate) fn take_out_idle(&mut self, db: pg_sys::Oid, all: bool) -> Vec<Evicted> {
        let mut out = Vec::new();
        for i in 0..cache_size() {
            let m = &self.metas[i];
            if m.db != db || !in_use(i) || m.frozen || (m.refill_wanted && !all) {
                continue;
            }
            if slot(i).referenced.fetch_and(!IDLED, SeqCst) & IDLED != 0 && !all {
                continue;
            }
            out.push(self.take_out(i));
        }
        out
    }

    /// Whether any slot holds a segment of `db`.
    pub(crate) fn caches(&self, db: pg_sys::Oid) -> bool {
        (0..cache_size()).any(|i| self.metas[i].db == db && in_use(i))
    }

    /// Frees a slot: its cached numbers are skipped, never reissued; backends holding its old
    /// generation look the name up again.
    pub(crate) fn release(&mut self, index: usize) {
        let s = slot(index);
        s.buffers.clear();
        let m = self.metas[index];
        if in_use(index) {
            let key = SlotKey::new(m.db, m.name.as_str());
            if self.indexed(&key) == Some(index) {
                self.index_remove(&key);
            }
            s.generation.fetch_add(1, SeqCst);
            self.used -= 1;
        }
        self.metas[index] = SlotMeta::default();
    }

    /// Frees every slot that holds a global segment (all databases): their cached ranges are
    /// skipped. Returns how many.
    pub(crate) fn release_global(&mut self) -> usize {
        let mut released = 0;
        for i in 0..cache_size() {
            if in_use(i) && self.metas[i].global {
                self.release(i);
                released += 1;
            }
        }
        released
    }

    /// Frees every slot of database `db` (its `idgen_segment` or the database is being dropped).
    pub(crate) fn release_database(&mut self, db: pg_sys::Oid) {
        for i in 0..cache_size() {
            if self.metas[i].db == db {
                self.release(i);
            }
        }
    }

    /// After `db`'s allocator exited: segments it had frozen mid-change lose their cached
    /// numbers (the change may have committed, so thawing could reissue numbers).
    pub(crate) fn clear_frozen(&mut self, db: pg_sys::Oid) {
        for i in 0..cache_size() {
            let m = &mut self.metas[i];
            if m.db == db && m.frozen {
                m.frozen = false;
                slot(i).buffers.clear();
            }
        }
    }

    /// The step and per-backend cache of segment `name` of `db` after `segment_alter`: the
    /// dynamic step starts again from the step; a new cache applies to the next block each
    /// backend takes (blocks held are handed out first, as PostgreSQL's `ALTER SEQUENCE ...
    /// CACHE` leaves sessions' cached values).
    pub(crate) fn set_step(&mut self, db: pg_sys::Oid, name: &str, step: i64, cache: u32) {
        if let Some(i) = self.find(db, name) {
            let m = &mut self.metas[i];
            if m.base_step != step {
                m.base_step = step;
                m.step = 0;
            }
            slot(i).cache.store(cache, SeqCst);
        }
    }

    /// Whether a segment of `db` wants a refill by its `lane` allocator.
    pub(crate) fn refill_wanted(&self, db: pg_sys::Oid, lane: Lane) -> bool {
        self.metas
            .iter()
            .any(|m| m.db == db && m.refill_wanted && m.lane() == lane)
    }

    /// The refills `db`'s `lane` allocator may run now: slots that want one, are not frozen
    /// and are not waiting to retry a refill the registry did not answer, as (slot, ticket).
    pub(crate) fn refill_candidates(
        &self,
        db: pg_sys::Oid,
        lane: Lane,
    ) -> impl Iterator<Item = (usize, u64)> + '_ {
        let now = crate::time::now_timestamptz_us();
        (0..cache_size()).filter_map(move |i| {
            let m = &self.metas[i];
            (m.db == db && m.lane() == lane && m.refill_wanted && !m.frozen && m.retry_at <= now)
                .then_some((i, m.refill_ticket))
        })
    }

    /// The refill of slot `index`, for the allocator: its generation and a copy of its
    /// metadata.
    pub(crate) fn refill_at(&self, index: usize) -> (usize, u64, SlotMeta) {
        (
            index,
            slot(index).generation.load(SeqCst),
            self.metas[index],
        )
    }

    /// Puts off the refill of slot `index` (if it still holds the same segment) until `until`
    /// (`TimestampTz`): the registry did not answer; the refill stays wanted, its callers go on
    /// waiting, and other segments' refills run meanwhile.
    pub(crate) fn defer_refill(&mut self, index: usize, generation: u64, until: i64) {
        if slot(index).generation.load(SeqCst) == generation {
            self.metas[index].retry_at = until;
        }
    }

    /// The earliest time a deferred refill of `db` by its `lane` allocator may be tried again,
    /// if one is waiting.
    pub(crate) fn next_retry(&self, db: pg_sys::Oid, lane: Lane) -> Option<i64> {
        self.metas
            .iter()
            .filter(|m| m.db == db && m.lane() == lane && m.refill_wanted && m.retry_at > 0)
            .map(|m| m.retry_at)
            .min()
    }

    /// Stores the outcome of a refill of slot `index` (if it still holds the same segment) and
    /// wakes waiters. `Err((failure, gone))`: the refill failed; `gone` when the segment no longer
    /// exists (its slot is freed). Returns false if a committed range could not be used.
    pub(crate) fn finish_refill(
        &mut self,
        index: usize,
        generation: u64,
        outcome: Result<Refilled, (Failure, bool)>,
    ) -> bool {
        let mut used = true;
        if slot(index).generation.load(SeqCst) == generation {
            let m = &mut self.metas[index];
            m.attempts += 1;
            m.refill_wanted = false;
            match outcome {
                Ok(done) => {
                    used = slot(index).buffers.install(done.range);
                    m.base_step = done.base_step;
                    m.step = done.step;
                    m.last_refill_at = done.at;
                    m.refills += 1;
                    m.failed = false;
                    // Committed whether installed or not: what idgen_segment holds now.
                    m.mark = done.range.last;
                    m.marked = true;
                    m.retry_at = 0;
                }
                Err((failure, gone)) => {
                    m.failed = true;
                    m.refill_failures += 1;
                    let attempts = m.attempts;
                    self.note_failure(index, generation, attempts, failure);
                    if gone {
                        self.release(index);
                    }
                }
            }
        } else if outcome.is_ok() {
            used = false;
        }
        broadcast();
        used
    }

    /// Remembers why refill attempt `attempts` of slot `index` (holding `generation`) failed.
    fn note_failure(&mut self, index: usize, generation: u64, attempts: u64, failure: Failure) {
        let at = self.next_failure % NOTED_FAILURES;
        self.failures[at] = NotedFailure {
            index,
            generation,
            attempts,
            failure,
        };
        self.next_failure = (at + 1) % NOTED_FAILURES;
    }

    /// Why refill attempt `attempts` of slot `index` (holding `generation`) failed: the noted
    /// failure, or a general one if so many failed since that it was overwritten.
    pub(crate) fn failure(&self, index: usize, generation: u64, attempts: u64) -> Failure {
        self.failures
            .iter()
            .find(|f| f.index == index && f.generation == generation && f.attempts == attempts)
            .map(|f| f.failure)
            .unwrap_or_else(|| {
                Failure::new(
                    "XX000",
                    "the idgen allocator could not refill the segment",
                    None,
                    Some("The server log has the error."),
                )
            })
    }

    /// Rows for `segment_status()`: the cached segments of database `db`.
    pub(crate) fn status(&self, db: pg_sys::Oid) -> Vec<CacheStatus> {
        (0..cache_size())
            .filter(|&i| self.metas[i].db == db && in_use(i))
            .map(|i| {
                let (current, next) = slot(i).buffers.views();
                let m = &self.metas[i];
                CacheStatus {
                    name: m.name.as_str().to_owned(),
                    step: m.step,
                    current,
                    next,
                    refills: m.refills,
                    last_refill_at: m.last_refill_at,
                    refill_pending: m.refill_wanted,
                    // Under the LWLock, which every install and clear holds: never decreases.
                    issued: slot(i).buffers.issued().saturating_sub(m.issued_base),
                    waits: m.waits,
                    timeouts: m.timeouts,
                    refill_failures: m.refill_failures,
                }
            })
            .collect()
    }
}

/// A segment taken out of the cache (evicted, idle, or its allocator exiting): what giving its
/// unused numbers back needs. If `idgen_segment` still holds `mark` (no one moved it since the
/// slot's last refill), the mark may go down to `highest_taken`: every number above that was
/// never handed out (the buffers were frozen before it was read, so a draw racing with the
/// eviction is either counted or thrown away).
#[derive(Clone, Copy)]
pub(crate) struct Evicted {
    /// Database of the segment.
    pub(crate) db: pg_sys::Oid,
    /// Segment name.
    pub(crate) name: FixedText<64>,
    /// The mark the slot's last refill committed; `None` if it had none.
    pub(crate) mark: Option<i64>,
    /// The last number handed out from its ranges (or the one before its current range, if
    /// none was); `None` if it held no range.
    pub(crate) highest_taken: Option<i64>,
}

impl Evicted {
    /// The numbers above the last one handed out, when there are any: `(expected mark, new mark)`
    /// for [`crate::segment::allocator::work::give_back`].
    pub(crate) fn unused(&self) -> Option<(i64, i64)> {
        match (self.mark, self.highest_taken) {
            (Some(mark), Some(highest)) if highest < mark => Some((mark, highest)),
            _ => None,
        }
    }
}

/// A cached segment made undrawable while an admin call changes it.
pub(crate) struct Frozen {
    pub(crate) index: usize,
    generation: u64,
}

/// Freezes segment `name` of `db` if it is cached: draws wait until [`unfreeze`].
pub(crate) fn freeze(db: pg_sys::Oid, name: &str) -> Option<Frozen> {
    let mut g = lock();
    let index = g.find(db, name)?;
    g.metas[index].frozen = true;
    let s = slot(index);
    s.buffers.freeze();
    Some(Frozen {
        index,
        generation: s.generation.load(SeqCst),
    })
}

/// What becomes of a frozen segment's cache after its admin call.
pub(crate) enum After {
    /// Thaw the cached ranges unchanged (the call failed).
    Keep,
    /// Skip their numbers (the high-water mark moved).
    Clear,
    /// Free the slot (the segment was dropped or created anew).
    Release,
}

/// Ends a [`freeze`] (if the slot still holds the same segment) and wakes waiters.
pub(crate) fn unfreeze(frozen: Option<Frozen>, after: After) {
    let Some(f) = frozen else { return };
    let mut g = lock();
    let s = slot(f.index);
    if s.generation.load(SeqCst) == f.generation {
        match after {
            After::Keep => s.buffers.thaw(),
            After::Clear => s.buffers.clear(),
            After::Release => g.release(f.index),
        }
        g.metas[f.index].frozen = false;
    }
    drop(g);
    broadcast();
}

/// A cached segment as `segment_status()` shows it.
pub(crate) struct CacheStatus {
    /// Segment name.
    pub(crate) name: String,
    /// Dynamic step of the last refill (0 before the first).
    pub(crate) step: i64,
    /// The range being drawn from.
    pub(crate) current: Option<BufferView>,
    /// The range fetched ahead.
    pub(crate) next: Option<BufferView>,
    /// Refills since the segment was loaded into the cache.
    pub(crate) refills: u64,
    /// When the last refill committed (`TimestampTz`), 0 if none.
    pub(crate) last_refill_at: i64,
    /// A refill has been asked for and not yet done.
    pub(crate) refill_pending: bool,
    /// Numbers taken from its ranges since it was loaded (a backend's block counts when taken).
    pub(crate) issued: u64,
    /// Calls that slept for a range since it was loaded.
    pub(crate) waits: u64,
    /// Of those, the ones that failed with 55P03.
    pub(crate) timeouts: u64,
    /// Refill attempts that failed since it was loaded.
    pub(crate) refill_failures: u64,
}

/// A refill that committed: the range, and the steps it was taken with.
pub(crate) struct Refilled {
    /// The new range, durable in `idgen_segment`.
    pub(crate) range: Range,
    /// `idgen_segment.step` at the time.
    pub(crate) base_step: i64,
    /// The dynamic step used.
    pub(crate) step: i64,
    /// Commit time (`TimestampTz`).
    pub(crate) at: i64,
}
