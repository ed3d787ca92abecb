//! This session's side of segments: the process-local map name → [`Entry`] (slot, generation
//! and the session's `segment_currval`), and [`draw`], the hot path. Backends keep the map in a
//! thread-local `RefCell` (a backend is one thread; a mutex cost two locked instructions per
//! number), which no other process sees (DESIGN.md §3). Entries live as long as the session, so
//! that a call site can keep its entry and skip the lookup (`call_site`).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::atomic::Ordering::{Relaxed, SeqCst};

use pgrx::pg_sys;
use rustc_hash::FxBuildHasher;

use super::buffer::Drawn;
use super::cache::queue::{check_not_in_recovery, submit_until};
use super::cache::{lock, mark_referenced, slot, wait_for, CallDeadline, Request, RequestKind};
use crate::backend;
use crate::error::Error;
use crate::guc;

/// What this session knows about one segment name: where it is cached (slot and generation,
/// checked on every draw) and the session's `currval`. Leaked, one per name the session ever
/// drew from, so that a call site may keep it for the session's life ([`Entry`]); the fields are
/// cells because the map and the call sites share it.
struct Local {
    name: String,
    resolved: Cell<(usize, u64)>,
    currval: Cell<Option<i64>>,
    /// Numbers taken from the shared range and not yet handed out (a segment with a cache).
    block: Cell<Block>,
    /// The adaptive cache's state: the statement (its start, `TimestampTz`) of the last block
    /// taken, and that block's size.
    auto: Cell<(i64, u64)>,
}

/// A block of numbers this session took from the segment's shared range in one `fetch_add`
/// (a segment with `cache` other than 1), handed out here one by one, as a
/// PostgreSQL sequence's `CACHE` is: `left` numbers from `next` on. The numbers are this
/// session's alone (the shared range counts them as taken, so `segment_setval`'s floor and a
/// give-back's mark are above them); they are handed out only while slot `index` holds the
/// same segment (`generation`: not dropped, evicted or recreated) and its buffers were not
/// cleared (`clears`: a `segment_setval`, whose later numbers must be above its value).
/// Otherwise they are dropped, a gap, never handed out again.
#[derive(Clone, Copy, Default)]
struct Block {
    next: i64,
    left: u64,
    index: usize,
    generation: u64,
    clears: u64,
    /// Of a global segment: served only while the registry's contact is fresh.
    global: bool,
}

/// Largest block of the adaptive cache (`cache => 0`): a block doubles with every block a
/// statement uses up, from 1 at the statement's first draw, up to this; what a session can
/// lose at its end is below it.
pub(crate) const AUTO_MAX_BLOCK: u64 = 1024;

/// This session's segments by name (this backend's database only), keyed by the entry's own
/// name, hashed with FxHash: the names are the session's own, and SipHash was a tenth of
/// `segment_nextval()`'s time.
type LocalMap = HashMap<&'static str, &'static Local, FxBuildHasher>;

thread_local! {
    static LOCAL: RefCell<LocalMap> = RefCell::new(LocalMap::default());
}

/// This session's handle on one segment name, valid until the session ends: what a call site
/// keeps (`fn_extra`) to skip the name lookup on the next call.
#[derive(Clone, Copy)]
pub(crate) struct Entry(&'static Local);

/// The session's entry for segment `name`, resolving it (42704 when no such segment exists)
/// on first use, waiting until the call's `deadline`. Only names that resolved get an entry.
pub(crate) fn entry(name: &str, deadline: &mut CallDeadline) -> Result<Entry, Error> {
    if let Some(e) = LOCAL.with_borrow(|local| local.get(name).copied()) {
        return Ok(Entry(e));
    }
    let resolved = resolve(name, deadline)?;
    let e: &'static Local = Box::leak(Box::new(Local {
        name: name.to_owned(),
        resolved: Cell::new(resolved),
        currval: Cell::new(None),
        block: Cell::new(Block::default()),
        auto: Cell::new((0, 0)),
    }));
    LOCAL.with_borrow_mut(|local| local.insert(e.name.as_str(), e));
    Ok(Entry(e))
}

impl Entry {
    /// Whether this is the entry of the segment named by `bytes`.
    pub(crate) fn is_named(&self, bytes: &[u8]) -> bool {
        self.0.name.as_bytes() == bytes
    }
}

/// Draws `n >= 1` numbers of the entry's segment, passing each run of consecutive numbers to
/// `run(first, count)` in increasing order, the counts summing to `n`. The hot path is one
/// `fetch_add` on the cached range; a caller waits only when both ranges are empty, until the
/// call's `deadline` (`idgen.segment_wait_timeout` from its first wait, shared with the
/// [`entry`] that resolved the name in the same call).
///
/// Refused in a read-only transaction (25006), as `nextval()` is.
pub(crate) fn draw(
    entry: Entry,
    n: u64,
    deadline: &mut CallDeadline,
    mut run: impl FnMut(i64, u64),
) -> Result<(), Error> {
    if crate::recovery::read_only_transaction() {
        // Every transaction of a standby is read-only: say why it really refuses.
        check_not_in_recovery()?;
        return Err(Error::ReadOnlyTransaction {
            function: "segment_nextval()",
        });
    }
    let e = entry.0;
    let mut left = n;
    // This session's block first: its numbers are below every number the shared range gives
    // from now on, so the session's numbers keep increasing.
    let b = e.block.get();
    if b.left > 0 {
        let s = slot(b.index);
        // A global segment's contact is checked before its slot's generation: a void of the
        // cached global ranges (`void_global_ranges`) precedes the contact that follows it.
        if b.global {
            check_contact(&e.name)?;
        }
        if s.generation.load(SeqCst) == b.generation && s.buffers.clears() == b.clears {
            let count = b.left.min(left);
            mark_referenced(s);
            e.block.set(Block {
                // Wraps only when the block's last number, i64::MAX, was just taken (then
                // `left` is 0 and `next` is never read).
                next: b.next.wrapping_add(count as i64),
                left: b.left - count,
                ..b
            });
            e.currval.set(Some(b.next + (count as i64 - 1)));
            run(b.next, count);
            left -= count;
        } else {
            e.block.set(Block::default()); // a gap, never handed out again
        }
    }
    while left > 0 {
        let (index, generation) = match e.resolved.get() {
            (i, g) if slot(i).generation.load(SeqCst) == g => (i, g),
            // Evicted, or dropped and created again: find it anew (the currval stays).
            _ => {
                let r = resolve(&e.name, deadline)?;
                e.resolved.set(r);
                r
            }
        };
        let s = slot(index);
        let global = s.global.load(Relaxed);
        let (want, auto) = block_size(e, s.cache.load(Relaxed), left);
        // Read before the draw: a clear after this read drops the block at its next use (a
        // gap), and none between the draw and this read can leave it in use.
        let clears = if want > left { s.buffers.clears() } else { 0 };
        match s.buffers.draw(want) {
            Some(Drawn {
                first,
                count,
                prefetch,
            }) => {
                // Checked once the numbers are taken (a first draw waits for its range, then for
                // the contact if need be); refused, they are skipped, a gap. Before the
                // generation: a void of the cached global ranges precedes the contact after it.
                if global {
                    check_contact(&e.name)?;
                }
                if s.generation.load(SeqCst) != generation {
                    continue; // the slot was reused meanwhile: drop the numbers, look up again
                }
                if prefetch {
                    ask_for_next_range(index, generation);
                }
                // The clock sweep's usage bit: written only when clear, so a busy segment's
                // draws only read it (its cache line is the generation's, read anyway).
                mark_referenced(s);
                // The adaptive state moves only with a block taken: a draw that had to wait
                // for a range comes round again with the same size.
                if let Some(auto) = auto {
                    e.auto.set(auto);
                }
                let given = count.min(left);
                if count > given {
                    e.block.set(Block {
                        next: first + given as i64,
                        left: count - given,
                        index,
                        generation,
                        clears,
                        global,
                    });
                }
                e.currval.set(Some(first + (given as i64 - 1)));
                run(first, given);
                left -= given;
            }
            None => wait_for_range(&e.name, index, generation, deadline.get())?,
        }
    }
    Ok(())
}

/// A global segment's numbers are served only while the registry's last contact is younger
/// than the lease (55000 otherwise: `super::allocator::global::check_contact`).
fn check_contact(name: &str) -> Result<(), Error> {
    super::allocator::global::check_contact(|| format!("global segment \"{name}\""))
}

/// How many numbers to take from the shared range for `left` numbers asked for, given the
/// segment's cache (`Slot::cache`): `left` without a cache; with one, a block of `cache`
/// numbers (the rest stays with this session); in the adaptive mode (0), a block that starts
/// at 1 with each statement and doubles with every block the statement uses up, up to
/// [`AUTO_MAX_BLOCK`], so that a session drawing one number per statement takes one number at
/// a time, and a bulk statement few blocks. The second value is the adaptive state to keep once
/// the block is taken (`Local::auto`), `None` outside the adaptive mode.
fn block_size(e: &Local, cache: u32, left: u64) -> (u64, Option<(i64, u64)>) {
    match cache {
        1 => (left, None),
        0 => {
            // SAFETY: reads a variable of this backend's xact.c, set when a statement starts.
            let statement = unsafe { pg_sys::GetCurrentStatementStartTimestamp() };
            let (last_statement, last) = e.auto.get();
            let size = if last_statement == statement {
                last.saturating_mul(2).clamp(1, AUTO_MAX_BLOCK)
            } else {
                1
            };
            (left.max(size), Some((statement, size)))
        }
        n => (left.max(u64::from(n)), None),
    }
}

/// Forgets this session's blocks and `currval`s (`DISCARD SEQUENCES`, `DISCARD ALL`): the
/// blocks' numbers are skipped, as a sequence's cached values are.
pub(crate) fn discard() {
    LOCAL.with_borrow(|local| {
        for e in local.values() {
            e.block.set(Block::default());
            e.currval.set(None);
            e.auto.set((0, 0));
        }
    });
}

/// This session's last number of segment `name`, if it drew one.
pub(crate) fn currval(name: &str) -> Option<i64> {
    LOCAL.with_borrow(|local| local.get(name)?.currval.get())
}

/// The slot and generation of segment `name` of this database, loading it into the cache
/// through the allocator if no backend has yet, waiting until the call's `deadline`.
fn resolve(name: &str, deadline: &mut CallDeadline) -> Result<(usize, u64), Error> {
    let db = backend::database_id();
    loop {
        if let Some(i) = lock().find(db, name) {
            return Ok((i, slot(i).generation.load(SeqCst)));
        }
        submit_until(Request::new(RequestKind::Load, name), deadline.get())?;
    }
}

/// Asks for the range after the current one, in the background (the caller does not wait).
fn ask_for_next_range(index: usize, generation: u64) {
    let mut g = lock();
    if slot(index).generation.load(SeqCst) != generation {
        return;
    }
    let m = &mut g.metas[index];
    if m.frozen || m.refill_wanted || slot(index).buffers.next_remaining() > 0 {
        return;
    }
    let (db, lane) = (m.db, m.lane());
    g.want_refill(index);
    // Failing to start the allocator is not this caller's problem yet: the current range still
    // has numbers. The caller that finds both empty reports it.
    if g.ensure_lane(db, lane).is_err() {
        g.metas[index].refill_wanted = false;
    }
}

/// Slow path: both ranges are empty (or the segment is frozen by an admin call). Switches to
/// the next range if it has arrived, else asks the allocator and waits. Returns once the slot
/// has numbers or is no longer the caller's (the caller draws or looks up again). Waits until
/// `deadline_us` (the call's, a `TimestampTz`; `None`: until cancelled).
fn wait_for_range(
    name: &str,
    index: usize,
    generation: u64,
    deadline_us: Option<i64>,
) -> Result<(), Error> {
    check_not_in_recovery()?;
    let mut asked_at: Option<u64> = None;
    let mut counted = false;
    let outcome = wait_for(deadline_us, |g| {
        let s = slot(index);
        if s.generation.load(SeqCst) != generation {
            return Some(Ok(()));
        }
        let m = g.metas[index];
        if m.frozen {
            // An admin call is changing the segment: this call sleeps until it is done.
            if !counted {
                counted = true;
                g.metas[index].waits += 1;
            }
            return None;
        }
        if s.buffers.advance() {
            return Some(Ok(()));
        }
        match asked_at {
            Some(a) if m.attempts > a && m.failed => {
                return Some(Err(g.failure(index, generation, m.attempts).to_error()))
            }
            Some(a) if m.attempts > a => asked_at = None, // filled and drained again: ask anew
            _ => {}
        }
        if asked_at.is_none() {
            asked_at = Some(m.attempts);
        }
        // A prefetch already wanted keeps its earlier ticket.
        g.want_refill(index);
        if let Err(e) = g.ensure_lane(m.db, m.lane()) {
            // No allocator to run it: a refill left wanted would keep the slot from being
            // evicted until one runs (as in `ask_for_next_range`).
            g.metas[index].refill_wanted = false;
            return Some(Err(e));
        }
        // This call sleeps: counted once, for monitoring (segment_status().waits).
        if !counted {
            counted = true;
            g.metas[index].waits += 1;
        }
        None
    });
    match outcome {
        Ok(r) => r,
        Err(()) => {
            let mut g = lock();
            if slot(index).generation.load(SeqCst) == generation {
                g.metas[index].timeouts += 1;
            }
            drop(g);
            Err(Error::SegmentWaitTimeout {
                name: name.to_owned(),
                ms: guc::segment_wait_timeout_ms().unwrap_or(0),
            })
        }
    }
}
