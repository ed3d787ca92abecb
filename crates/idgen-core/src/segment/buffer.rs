//! The lock-free double buffer of one segment (Leaf's `SegmentBuffer`, in shared memory).
//!
//! Two [`RangeBuffer`]s, one of them current, and one atomic state word that says which one is
//! current, what each holds, whether the segment is frozen, and a sequence number. Every
//! writer transition (install, advance, clear, freeze, thaw) is a `compare_exchange` of the
//! state word that bumps the sequence number, so a writer acts only on the exact state it
//! checked: writers are correct even when they race. The caller's lock (the segment's LWLock
//! in the extension's shared memory) is kept for the rest of the slot, not for the buffer's
//! safety.
//!
//! Each buffer is in one phase, kept in the state word:
//!
//! * `EMPTY`: holds nothing (never filled, or cleared); its fields are stale.
//! * `WRITING`: claimed by one installing writer, who alone writes its fields; unreachable to
//!   drawers. `CANCELLED`: the same, after a [`clear`](DoubleBuffer::clear) raced with it:
//!   the writer publishes nothing and its [`install`](DoubleBuffer::install) returns false.
//! * `QUEUED`: holds a range that has never been current (the next range).
//! * `ACTIVE`: the current range, or the drained range that was current before it.
//!
//! The fields of a `QUEUED` or `ACTIVE` buffer never change (only `taken` grows): a range is
//! written only into a claimed buffer, and only the non-current buffer is ever claimed. Ranges
//! enter through the `QUEUED` phase and [`advance`](DoubleBuffer::advance) makes the queued
//! range current. An install is refused unless its range lies above every range held, so since
//! the last clear the successive current ranges increase, and each caller's numbers do too.
//!
//! Drawing is one `fetch_add` on the current buffer's `taken` counter between two loads of the
//! state word (plus three plain loads of the buffer), validated seqlock-style: every offset of
//! a range is given to exactly one `fetch_add`, and a draw that raced with a rewrite of its
//! buffer, a switch or a freeze is thrown away (a gap, never a duplicate). A transition that
//! touches only the other buffer (installing the next range) does not throw draws away.
//!
//! No writer ever waits for another: a failed `compare_exchange` means another transition
//! succeeded, and the writer checks again. An install that finds the other buffer claimed by
//! a concurrent install gives up (returns false: its range is skipped) rather than guess the
//! order of the two ranges. A claimed buffer stays claimed until its writer publishes, a few
//! stores later; a process killed in between makes PostgreSQL reinitialize shared memory.
//!
//! [`highest_taken`](DoubleBuffer::highest_taken) looks at both buffers: a drained range stays
//! `ACTIVE` behind the current one until the next install overwrites it.
//!
//! [`issued`](DoubleBuffer::issued) counts the numbers taken for monitoring without touching
//! the draw: what the `ACTIVE` buffers' `taken` counters say, plus a `retired` count to which
//! the writers that empty an `ACTIVE` buffer (an install over the drained range, a clear) add
//! what it held. No draw writes it.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::SeqCst};

use super::range::{prefetch_offset, Range};

/// Phases of a buffer (3 bits of the state word each; see the module doc).
const EMPTY: u64 = 0;
const WRITING: u64 = 1;
const CANCELLED: u64 = 2;
const QUEUED: u64 = 3;
const ACTIVE: u64 = 4;

/// State word: bits 0-2 the phase of buffer 0, bits 3-5 that of buffer 1, bit 6 frozen, bit 7
/// the current buffer, bits 8-63 a sequence number bumped by every transition (2^56
/// transitions never wrap it in practice, so a state word is never seen twice).
const PHASE_BITS: u32 = 3;
const PHASE_MASK: u64 = (1 << PHASE_BITS) - 1;
const FROZEN: u64 = 1 << 6;
const CUR_SHIFT: u32 = 7;
const SEQ_SHIFT: u32 = 8;

fn cur_of(s: u64) -> usize {
    (s >> CUR_SHIFT) as usize & 1
}

fn phase(s: u64, i: usize) -> u64 {
    (s >> (i as u32 * PHASE_BITS)) & PHASE_MASK
}

fn seq(s: u64) -> u64 {
    s >> SEQ_SHIFT
}

fn with_phase(s: u64, i: usize, p: u64) -> u64 {
    let shift = i as u32 * PHASE_BITS;
    (s & !(PHASE_MASK << shift)) | (p << shift)
}

fn with_cur(s: u64, i: usize) -> u64 {
    (s & !(1 << CUR_SHIFT)) | ((i as u64 & 1) << CUR_SHIFT)
}

/// The word a transition from `s` stores: `s` with the next sequence number.
fn bumped(s: u64) -> u64 {
    s.wrapping_add(1 << SEQ_SHIFT)
}

/// Whether a draw may start in state `s`: the current buffer holds the current range (not
/// emptied, not being written) and the segment is not frozen.
fn drawable(s: u64) -> bool {
    s & FROZEN == 0 && phase(s, cur_of(s)) == ACTIVE
}

/// The `taken` counter of a range, alone on its 128-byte cache-line pair: every draw of every
/// backend writes it, so nothing a draw only reads may share its line (with `first` and `len`
/// beside it, each draw fetched the line shared to read them, then again exclusive for its
/// `fetch_add`: two transfers of the hottest line per number instead of one).
#[repr(C, align(128))]
#[derive(Default)]
struct Taken(AtomicU64);

impl std::ops::Deref for Taken {
    type Target = AtomicU64;

    fn deref(&self) -> &AtomicU64 {
        &self.0
    }
}

/// One range of numbers and how many of them have been taken. 128-byte aligned (the
/// adjacent-line prefetcher's unit) so that the two buffers of a segment, and neighbouring
/// segments, do not share a cache line; `taken`, written by every draw, has a line of its own,
/// and the fields read by every draw (`first`, `len`) stay clean in every core's cache.
#[repr(C, align(128))]
#[derive(Default)]
pub struct RangeBuffer {
    /// Offsets handed out so far; `>= len` once drained. Grows past `len` harmlessly: a draw
    /// on a drained range adds to it before it sees that the range is drained.
    taken: Taken,
    /// First number of the range.
    first: AtomicI64,
    /// Numbers in the range; at least 1 once the buffer has been written.
    len: AtomicU64,
    /// At least the sequence number of the last transition that must throw away the draws in
    /// flight on this buffer: the claim that rewrites it, or a freeze. Read only by a draw
    /// during which the state word changed.
    stamp: AtomicU64,
}

/// A buffer as seen by `segment_status()`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufferView {
    /// The range held.
    pub range: Range,
    /// How many of its numbers have been taken (at most its length).
    pub taken: u64,
}

impl RangeBuffer {
    /// Numbers not yet taken. Meaningful while the buffer is `QUEUED` or `ACTIVE`.
    fn remaining(&self) -> u64 {
        self.len
            .load(SeqCst)
            .saturating_sub(self.taken.load(SeqCst))
    }

    /// The range held and how much of it is taken. Meaningful while `QUEUED` or `ACTIVE`.
    fn view(&self) -> Option<BufferView> {
        let len = self.len.load(SeqCst);
        if len == 0 {
            return None;
        }
        let first = self.first.load(SeqCst);
        Some(BufferView {
            range: Range {
                first,
                last: (first as i128 + len as i128 - 1) as i64,
            },
            taken: self.taken.load(SeqCst).min(len),
        })
    }
}

impl BufferView {
    /// The last number taken from this range, or the number before it when none has been
    /// (`i64::MIN` stands for the number before `i64::MIN`).
    fn last_taken(&self) -> i64 {
        (self.range.first as i128 + self.taken as i128 - 1).max(i64::MIN as i128) as i64
    }
}

/// Numbers drawn by one call of [`DoubleBuffer::draw`]: `first..first + count`, consecutive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Drawn {
    /// The first number drawn.
    pub first: i64,
    /// How many consecutive numbers were drawn (1..=asked).
    pub count: u64,
    /// True for the one draw that crossed 10% of the range: it should ask for the next range.
    pub prefetch: bool,
}

/// The two buffers of a segment, which one is current, and their phases.
#[repr(C)]
#[derive(Default)]
pub struct DoubleBuffer {
    /// The state word (see the module doc). All zero: both buffers empty, not frozen.
    state: AtomicU64,
    /// How many times [`clear`](Self::clear) ran: a backend's block of numbers
    /// (`session::Block`), taken in one clear epoch, is handed out only while the count is
    /// unchanged, so a `segment_setval` (which clears) reaches every session's block. On the
    /// state word's line: read by the same draws, written as rarely.
    clears: AtomicU64,
    /// Numbers taken from ranges no longer `ACTIVE`: an install adds the length of the drained
    /// range it overwrites, a clear what was taken from the ranges it empties. Written by
    /// writers only, beside `clears`; read by [`issued`](Self::issued).
    retired: AtomicU64,
    buffers: [RangeBuffer; 2],
}

impl DoubleBuffer {
    /// Draws up to `n` consecutive numbers (`n >= 1`) from the current range, without a lock.
    /// `None` when the current range is drained, empty, frozen or being rewritten: the caller
    /// takes the slow path.
    pub fn draw(&self, n: u64) -> Option<Drawn> {
        debug_assert!(n >= 1);
        loop {
            let s1 = self.state.load(SeqCst);
            if !drawable(s1) {
                return None;
            }
            let cur = cur_of(s1);
            let buffer = &self.buffers[cur];
            let len = buffer.len.load(SeqCst);
            // No load of `taken` first: reading the hot line before writing it costs a second
            // transfer of it. A draw on a drained range overshoots `taken`, which is
            // harmless (`view` and `remaining` clamp it).
            let offset = buffer.taken.fetch_add(n, SeqCst);
            let first = buffer.first.load(SeqCst);
            // SAFETY (ordering): the offset counts only if, from `s1` to `s2`, the buffer stayed
            // current and drawable, was not rewritten and the segment was not frozen. Then
            // `len` and `first` are those of the range the `fetch_add` hit (an ACTIVE buffer's
            // fields change only after a claim), the offset is unique in it (`taken` was reset
            // before the range was published, which was before `s1`), and any later freeze
            // comes after the `fetch_add` in the single SeqCst order, so `highest_taken` sees
            // it. With `s2 == s1` no transition happened at all; see `survived` otherwise.
            let s2 = self.state.load(SeqCst);
            if s2 != s1 && !self.survived(s1, s2, cur) {
                continue; // the offset is a gap, never a duplicate
            }
            if offset >= len {
                return None;
            }
            let count = n.min(len - offset);
            let at = prefetch_offset(len);
            return Some(Drawn {
                first: (first as i128 + offset as i128) as i64,
                count,
                prefetch: offset <= at && at < offset + count,
            });
        }
    }

    /// Whether a draw on buffer `cur` that began in state `s1` and ended in state `s2 != s1`
    /// counts: transitions touching only the other buffer (an install behind the current
    /// range) do not throw away draws.
    ///
    /// SAFETY (ordering): a buffer is current again after a switch only once it was claimed,
    /// rewritten and queued again, and every claim and freeze raises the buffer's `stamp` to
    /// its own sequence number before its `compare_exchange`. If one happened after `s1` and
    /// before `s2`, that `fetch_max` precedes the load of `s2`, which precedes the load of the
    /// stamp here (all SeqCst), so the stamp read is above `seq(s1)`. A clear in between
    /// leaves the buffer EMPTY (not drawable) unless it was claimed since, which stamps it.
    #[cold]
    fn survived(&self, s1: u64, s2: u64, cur: usize) -> bool {
        drawable(s2) && cur_of(s2) == cur && self.buffers[cur].stamp.load(SeqCst) <= seq(s1)
    }

    /// How many times the buffers were cleared: a block of numbers taken under one count is
    /// handed out only while the count is the same (see [`DoubleBuffer::clears`]).
    #[inline]
    pub fn clears(&self) -> u64 {
        self.clears.load(SeqCst)
    }

    /// Numbers left in the range after the current one.
    pub fn next_remaining(&self) -> u64 {
        self.read_consistent(|s| {
            let next = cur_of(s) ^ 1;
            if phase(s, next) == QUEUED {
                self.buffers[next].remaining()
            } else {
                0
            }
        })
    }

    /// Numbers taken from this double buffer since it was created: from the `ACTIVE` ranges
    /// and from every range an install or a clear emptied (a draw thrown away after its
    /// `fetch_add` counts too, so this is an upper bound by at most the draws in flight). For
    /// monitoring: no draw writes anything for it. It never decreases as long as the reader
    /// and the writers (install, clear) are serialized, as the extension's LWLock does; with a
    /// racing writer a read may be off by that writer's range.
    pub fn issued(&self) -> u64 {
        self.read_consistent(|s| self.retired.load(SeqCst) + self.taken_in(s))
    }

    /// Numbers taken from the ranges `ACTIVE` (or `QUEUED`, none) in state `s`.
    fn taken_in(&self, s: u64) -> u64 {
        (0..2)
            .filter(|&i| matches!(phase(s, i), QUEUED | ACTIVE))
            .map(|i| {
                let b = &self.buffers[i];
                b.taken.load(SeqCst).min(b.len.load(SeqCst))
            })
            .sum()
    }

    /// Runs `read` on the buffers as they are in one state, retrying if a transition happened
    /// meanwhile (the fields of a buffer being claimed may be torn).
    fn read_consistent<T>(&self, read: impl Fn(u64) -> T) -> T {
        loop {
            let s = self.state.load(SeqCst);
            let value = read(s);
            if self.state.load(SeqCst) == s {
                return value;
            }
        }
    }

    /// Whether buffer `i` holds numbers not yet taken in state `s`.
    fn holds_numbers(&self, s: u64, i: usize) -> bool {
        matches!(phase(s, i), QUEUED | ACTIVE) && self.buffers[i].remaining() > 0
    }

    /// Whether a range starting at `first` lies above the range buffer `i` holds in state `s`.
    fn is_above(&self, s: u64, i: usize, first: i64) -> bool {
        if !matches!(phase(s, i), QUEUED | ACTIVE) {
            return true;
        }
        let b = &self.buffers[i];
        let last = b.first.load(SeqCst) as i128 + b.len.load(SeqCst) as i128 - 1;
        first as i128 > last
    }

    /// Writer: stores a freshly allocated range, as the current range if that is drained (after
    /// switching to the next one if that holds numbers), else as the next one. Returns true
    /// once it is stored; false (and stores nothing: the caller skips the range) when both
    /// buffers still hold numbers, when the range does not lie above every range held (ranges
    /// must be installed in increasing order between clears; a late one is refused rather
    /// than drawn after higher numbers), when another writer is installing at the same
    /// moment, or when a [`clear`](Self::clear) raced with this install.
    pub fn install(&self, range: Range) -> bool {
        let (first, len) = (range.first, range.len());
        // Claim: one compare_exchange from the exact state all checks were made in.
        let target = loop {
            self.advance();
            let s = self.state.load(SeqCst);
            let cur = cur_of(s);
            let next = cur ^ 1;
            match phase(s, next) {
                WRITING | CANCELLED => return false,
                QUEUED if self.holds_numbers(s, next) && !self.holds_numbers(s, cur) => {
                    continue; // the current range is drained: switch first
                }
                _ if self.holds_numbers(s, next) => return false,
                _ => {}
            }
            if !self.is_above(s, cur, first) || !self.is_above(s, next, first) {
                return false;
            }
            // A drained range behind the current one (it holds no numbers, checked above): all
            // of it was taken. Its fields are stable while it is ACTIVE.
            let retiring = if phase(s, next) == ACTIVE {
                self.buffers[next].len.load(SeqCst)
            } else {
                0
            };
            let claimed = bumped(with_phase(s, next, WRITING));
            self.buffers[next].stamp.fetch_max(seq(claimed), SeqCst);
            // SAFETY (ordering): success means no transition since `s`, so the phases and the
            // ranges checked above are still those (a QUEUED or ACTIVE buffer's fields are
            // stable), and from here on this writer alone owns `next`: no other writer claims
            // a WRITING or CANCELLED buffer, and drawers never draw from it (it is not current,
            // and it becomes current only through QUEUED, after the publication below).
            if self
                .state
                .compare_exchange(s, claimed, SeqCst, SeqCst)
                .is_ok()
            {
                self.retired.fetch_add(retiring, SeqCst);
                break next;
            }
        };
        let b = &self.buffers[target];
        b.taken.store(0, SeqCst);
        b.first.store(first, SeqCst);
        b.len.store(len, SeqCst);
        // Publish: the fields above are stored before this compare_exchange, so every reader
        // that sees the buffer QUEUED (and later ACTIVE) sees them.
        loop {
            let s = self.state.load(SeqCst);
            let (to, stored) = if phase(s, target) == WRITING {
                (QUEUED, true)
            } else {
                (EMPTY, false) // CANCELLED by a clear
            };
            if self
                .state
                .compare_exchange(s, bumped(with_phase(s, target, to)), SeqCst, SeqCst)
                .is_ok()
            {
                if stored {
                    self.advance();
                }
                return stored;
            }
        }
    }

    /// Writer: when the current range is drained and the next one holds numbers, makes the
    /// next one current. Returns whether the current range now holds numbers.
    pub fn advance(&self) -> bool {
        loop {
            let s = self.state.load(SeqCst);
            let cur = cur_of(s);
            if self.holds_numbers(s, cur) {
                return true;
            }
            let next = cur ^ 1;
            if phase(s, next) != QUEUED || !self.holds_numbers(s, next) {
                return false;
            }
            // The drained range stays ACTIVE behind the new current one, for `highest_taken`
            // (an EMPTY current buffer stays EMPTY).
            let switched = bumped(with_phase(with_cur(s, next), next, ACTIVE));
            if self
                .state
                .compare_exchange(s, switched, SeqCst, SeqCst)
                .is_ok()
            {
                return true;
            }
        }
    }

    /// Writer: empties both buffers and thaws; the numbers left in them are skipped, never
    /// reissued. An install in progress is cancelled (it returns false).
    pub fn clear(&self) {
        loop {
            let s = self.state.load(SeqCst);
            let mut cleared = s & !FROZEN;
            let retiring = self.taken_in(s);
            for i in 0..2 {
                let to = match phase(s, i) {
                    WRITING | CANCELLED => CANCELLED,
                    _ => EMPTY,
                };
                cleared = with_phase(cleared, i, to);
            }
            if self
                .state
                .compare_exchange(s, bumped(cleared), SeqCst, SeqCst)
                .is_ok()
            {
                self.retired.fetch_add(retiring, SeqCst);
                // After the state word changed: a block is stamped with the count read before
                // its draw, so a block drawn before this clear carries the old count (if read
                // before this increment) and is dropped at its next use; one read after it was
                // drawn after the clear (the draw's own state check orders it). Counting before
                // the compare_exchange let a block drawn from the old range carry the new count.
                // Every clear's caller returns after this, so a draw that starts later sees it.
                self.clears.fetch_add(1, SeqCst);
                return;
            }
        }
    }

    /// Writer: makes every draw fail (and go to the slow path) until [`thaw`](Self::thaw) or
    /// [`clear`](Self::clear), including the draws in flight. While frozen,
    /// [`highest_taken`](Self::highest_taken) is stable. Installs and switches still work.
    pub fn freeze(&self) {
        loop {
            let s = self.state.load(SeqCst);
            if s & FROZEN != 0 {
                return;
            }
            let frozen = bumped(s | FROZEN);
            // SAFETY (ordering): stamped before the compare_exchange, so a draw whose `fetch_add`
            // may follow the freeze is thrown away even if a thaw comes before its second load
            // of the state word (see `survived`).
            for b in &self.buffers {
                b.stamp.fetch_max(seq(frozen), SeqCst);
            }
            if self
                .state
                .compare_exchange(s, frozen, SeqCst, SeqCst)
                .is_ok()
            {
                return;
            }
        }
    }

    /// Writer: undoes [`freeze`](Self::freeze); the ranges are drawn from again as they were.
    pub fn thaw(&self) {
        loop {
            let s = self.state.load(SeqCst);
            if s & FROZEN == 0
                || self
                    .state
                    .compare_exchange(s, bumped(s & !FROZEN), SeqCst, SeqCst)
                    .is_ok()
            {
                return;
            }
        }
    }

    /// An upper bound of every number this double buffer has handed out since the last
    /// [`clear`](Self::clear), from either half: the highest last taken number of the ACTIVE
    /// buffers (the current range and the drained one before it), or the number before the
    /// current range when none of it has been taken yet. `None` when nothing is current (the
    /// caller then falls back to the high-water mark). Exact only while frozen.
    ///
    /// A range is overwritten only while the other buffer is current and ACTIVE, and that one
    /// lies above it, so the numbers of every earlier range since the clear are below the
    /// current range's first number; a queued range has handed out nothing.
    pub fn highest_taken(&self) -> Option<i64> {
        self.read_consistent(|s| {
            (0..2)
                .filter(|&i| phase(s, i) == ACTIVE)
                .filter_map(|i| self.buffers[i].view())
                .map(|v| v.last_taken())
                .max()
        })
    }

    /// The current range and the next one, for `segment_status()`.
    pub fn views(&self) -> (Option<BufferView>, Option<BufferView>) {
        self.read_consistent(|s| {
            let cur = cur_of(s);
            let current = (phase(s, cur) == ACTIVE)
                .then(|| self.buffers[cur].view())
                .flatten();
            let next = (phase(s, cur ^ 1) == QUEUED)
                .then(|| self.buffers[cur ^ 1].view())
                .flatten();
            (current, next)
        })
    }
}

#[cfg(test)]
mod tests;
