//! The slot table: which segment each slot of the shared cache holds, and every change of a
//! slot's state under the LWLock (assign, release, freeze for an admin call, thaw, a new step, a
//! finished refill), plus the rows of `segment_status()`. Drawing from a slot is lock-free
//! (`session::draw`); everything here runs with the LWLock held ([`Guarded`]'s methods) or
//! takes it ([`freeze`], [`unfreeze`]).

use std::sync::atomic::Ordering::SeqCst;

use pgrx::pg_sys;

use super::buffer::BufferView;
use super::range::Range;
use super::shared::{broadcast, lock, slot, Guarded, SlotMeta, MAX_SEGMENTS};
use crate::failure::{Failure, FixedText};

/// Whether slot `index` holds a segment (its generation is odd).
fn in_use(index: usize) -> bool {
    slot(index).generation.load(SeqCst) % 2 == 1
}

impl Guarded {
    /// The slot holding segment `name` of database `db`, if it is cached.
    pub(crate) fn find(&self, db: pg_sys::Oid, name: &str) -> Option<usize> {
        (0..MAX_SEGMENTS).find(|&i| {
            let m = &self.metas[i];
            m.db == db && m.name.as_str() == name && in_use(i)
        })
    }

    /// Assigns a free slot to segment `name` of `db`, empty and with a refill wanted.
    pub(crate) fn assign(&mut self, db: pg_sys::Oid, name: &str, base_step: i64) -> Option<usize> {
        let index = (0..MAX_SEGMENTS).find(|&i| !in_use(i))?;
        let s = slot(index);
        s.buffers.clear();
        self.metas[index] = SlotMeta {
            db,
            name: FixedText::new(name),
            base_step,
            refill_wanted: true,
            ..SlotMeta::default()
        };
        s.generation.fetch_add(1, SeqCst);
        Some(index)
    }

    /// Frees a slot: its cached numbers are skipped, never reissued; backends holding its old
    /// generation look the name up again.
    pub(crate) fn release(&mut self, index: usize) {
        let s = slot(index);
        s.buffers.clear();
        self.metas[index] = SlotMeta::default();
        if in_use(index) {
            s.generation.fetch_add(1, SeqCst);
        }
    }

    /// Frees every slot of database `db` (its `idgen_segment` or the database is being dropped).
    pub(crate) fn release_database(&mut self, db: pg_sys::Oid) {
        for i in 0..MAX_SEGMENTS {
            if self.metas[i].db == db {
                self.release(i);
            }
        }
    }

    /// After `db`'s allocator exited: segments it had frozen mid-change lose their cached
    /// numbers (the change may have committed, so thawing could reissue numbers).
    pub(crate) fn clear_frozen(&mut self, db: pg_sys::Oid) {
        for i in 0..MAX_SEGMENTS {
            let m = &mut self.metas[i];
            if m.db == db && m.frozen {
                m.frozen = false;
                slot(i).buffers.clear();
            }
        }
    }

    /// A new step of segment `name` of `db` (`segment_alter`): the dynamic step starts again
    /// from it.
    pub(crate) fn set_step(&mut self, db: pg_sys::Oid, name: &str, step: i64) {
        if let Some(i) = self.find(db, name) {
            let m = &mut self.metas[i];
            m.base_step = step;
            m.step = 0;
        }
    }

    /// Whether a segment of `db` wants a refill.
    pub(crate) fn refill_wanted(&self, db: pg_sys::Oid) -> bool {
        self.metas.iter().any(|m| m.db == db && m.refill_wanted)
    }

    /// The next refill for `db`'s allocator: a slot that wants one and is not frozen, with its
    /// generation and a copy of its metadata.
    pub(crate) fn take_refill(&self, db: pg_sys::Oid) -> Option<(usize, u64, SlotMeta)> {
        let index = (0..MAX_SEGMENTS).find(|&i| {
            let m = &self.metas[i];
            m.db == db && m.refill_wanted && !m.frozen
        })?;
        Some((
            index,
            slot(index).generation.load(SeqCst),
            self.metas[index],
        ))
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
                }
                Err((failure, gone)) => {
                    m.failed = true;
                    m.failure = failure;
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

    /// Rows for `segment_status()`: the cached segments of database `db`.
    pub(crate) fn status(&self, db: pg_sys::Oid) -> Vec<CacheStatus> {
        (0..MAX_SEGMENTS)
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
                }
            })
            .collect()
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
