//! The lock-free double buffer of one segment (Leaf's `SegmentBuffer`, in shared memory).
//!
//! Two [`RangeBuffer`]s, one of them current. Drawing is one `fetch_add` on the current
//! buffer's `taken` counter, validated seqlock-style by the buffer's `version` and the current
//! index, so it needs no lock and can never return a number twice: every offset of a range is
//! given to exactly one `fetch_add`, and a draw that raced with a rewrite of its buffer is
//! thrown away (a gap, never a duplicate).
//!
//! Writers (installing a range, switching buffers, clearing, freezing) must be serialized by
//! the caller (the segment LWLock in `cache.rs`; a mutex in the tests). No pgrx here.

use std::sync::atomic::{AtomicI64, AtomicU32, AtomicU64, Ordering::SeqCst};

use super::range::{prefetch_offset, Range};

/// One range of numbers and how many of them have been taken. 128-byte aligned so that the
/// two buffers of a segment, and neighbouring segments, do not share a cache line.
#[repr(C, align(128))]
#[derive(Default)]
pub struct RangeBuffer {
    /// Even while stable; odd while a writer rewrites the buffer or while it is frozen.
    version: AtomicU64,
    /// Offsets handed out so far; `>= len` once drained. Grows past `len` harmlessly.
    taken: AtomicU64,
    /// First number of the range.
    first: AtomicI64,
    /// Numbers in the range; 0 when the buffer is empty.
    len: AtomicU64,
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
    fn begin_write(&self) -> u64 {
        let v = self.version.load(SeqCst);
        if v.is_multiple_of(2) {
            self.version.store(v + 1, SeqCst);
        }
        v | 1
    }

    fn end_write(&self, odd: u64) {
        self.version.store(odd + 1, SeqCst);
    }

    fn set(&self, first: i64, len: u64) {
        let odd = self.begin_write();
        self.taken.store(0, SeqCst);
        self.first.store(first, SeqCst);
        self.len.store(len, SeqCst);
        self.end_write(odd);
    }

    /// Numbers not yet taken.
    fn remaining(&self) -> u64 {
        self.len
            .load(SeqCst)
            .saturating_sub(self.taken.load(SeqCst))
    }

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

/// The two buffers of a segment and which one is current.
#[repr(C)]
#[derive(Default)]
pub struct DoubleBuffer {
    current: AtomicU32,
    buffers: [RangeBuffer; 2],
}

impl DoubleBuffer {
    /// Draws up to `n` consecutive numbers (`n >= 1`) from the current range, without a lock.
    /// `None` when the current range is drained, empty, frozen or being rewritten: the caller
    /// takes the slow path.
    pub fn draw(&self, n: u64) -> Option<Drawn> {
        debug_assert!(n >= 1);
        loop {
            let cur = self.current.load(SeqCst);
            let buffer = &self.buffers[cur as usize & 1];
            let v1 = buffer.version.load(SeqCst);
            if v1 % 2 == 1 {
                return None;
            }
            let len = buffer.len.load(SeqCst);
            if len == 0 || buffer.taken.load(SeqCst) >= len {
                return None;
            }
            let offset = buffer.taken.fetch_add(n, SeqCst);
            let first = buffer.first.load(SeqCst);
            // Both unchanged: the fetch_add hit this range while it was current. Otherwise the
            // offset is thrown away (a gap) and the draw starts again.
            if buffer.version.load(SeqCst) != v1 || self.current.load(SeqCst) != cur {
                continue;
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

    /// Numbers left in the range after the current one.
    pub fn next_remaining(&self) -> u64 {
        self.buffers[(self.current.load(SeqCst) as usize + 1) & 1].remaining()
    }

    /// Writer: stores a freshly allocated range, as the current range if that is drained (after
    /// switching to the next one if that holds numbers), else as the next one. Ranges are
    /// allocated in increasing order, so the current range always holds the lower numbers.
    /// Returns false (and stores nothing) when both still hold numbers.
    pub fn install(&self, range: Range) -> bool {
        self.advance();
        let cur = self.current.load(SeqCst) as usize & 1;
        let target = if self.buffers[cur].remaining() == 0 {
            cur
        } else if self.buffers[cur ^ 1].remaining() == 0 {
            cur ^ 1
        } else {
            return false;
        };
        self.buffers[target].set(range.first, range.len());
        true
    }

    /// Writer: when the current range is drained and the next one holds numbers, makes the
    /// next one current. Returns whether the current range now holds numbers.
    pub fn advance(&self) -> bool {
        let cur = self.current.load(SeqCst) as usize & 1;
        if self.buffers[cur].remaining() > 0 {
            return true;
        }
        if self.buffers[cur ^ 1].remaining() == 0 {
            return false;
        }
        self.current.store((cur ^ 1) as u32, SeqCst);
        self.buffers[cur].set(0, 0);
        true
    }

    /// Writer: empties both buffers; the numbers left in them are skipped, never reissued.
    pub fn clear(&self) {
        for b in &self.buffers {
            b.set(0, 0);
        }
    }

    /// Writer: makes every draw fail (and go to the slow path) until [`thaw`](Self::thaw) or
    /// [`clear`](Self::clear). While frozen, [`highest_taken`](Self::highest_taken) is stable.
    pub fn freeze(&self) {
        for b in &self.buffers {
            b.begin_write();
        }
    }

    /// Writer: undoes [`freeze`](Self::freeze); the ranges are drawn from again as they were.
    pub fn thaw(&self) {
        for b in &self.buffers {
            let v = b.version.load(SeqCst);
            if v % 2 == 1 {
                b.end_write(v);
            }
        }
    }

    /// An upper bound of the numbers this double buffer has handed out since its current range
    /// was installed: the last taken number, or the number before the current range when none
    /// has been taken yet. `None` when the current buffer is empty (the caller then falls back
    /// to the high-water mark). Exact only while frozen.
    pub fn highest_taken(&self) -> Option<i64> {
        let view = self.buffers[self.current.load(SeqCst) as usize & 1].view()?;
        Some((view.range.first as i128 + view.taken as i128 - 1) as i64)
    }

    /// The current range and the next one, for `segment_status()`.
    pub fn views(&self) -> (Option<BufferView>, Option<BufferView>) {
        let cur = self.current.load(SeqCst) as usize & 1;
        (self.buffers[cur].view(), self.buffers[cur ^ 1].view())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::sync::Mutex;

    fn r(first: i64, last: i64) -> Range {
        Range { first, last }
    }

    #[test]
    fn empty_buffers_draw_nothing() {
        let d = DoubleBuffer::default();
        assert_eq!(d.draw(1), None);
        assert!(!d.advance());
        assert_eq!(d.highest_taken(), None);
    }

    #[test]
    fn draws_in_order_then_switches_to_the_next_range() {
        let d = DoubleBuffer::default();
        assert!(d.install(r(1, 3)));
        assert!(d.install(r(11, 12)));
        assert!(!d.install(r(21, 30)), "both buffers hold numbers");
        let got: Vec<i64> = (0..3).map(|_| d.draw(1).unwrap().first).collect();
        assert_eq!(got, [1, 2, 3]);
        assert_eq!(d.draw(1), None);
        assert!(d.advance());
        assert_eq!(d.draw(1).unwrap().first, 11);
        assert_eq!(d.views().0.map(|v| v.range.len() - v.taken), Some(1));
        assert_eq!(d.next_remaining(), 0);
    }

    #[test]
    fn installing_behind_a_drained_current_range_keeps_the_order() {
        let d = DoubleBuffer::default();
        d.install(r(1, 2));
        d.install(r(3, 4));
        d.draw(2);
        // Drained current, full next: the new range must queue behind 3..=4.
        assert!(d.install(r(5, 6)));
        let got: Vec<i64> = std::iter::from_fn(|| {
            d.draw(1)
                .or_else(|| d.advance().then(|| d.draw(1)).flatten())
        })
        .map(|x| x.first)
        .collect();
        assert_eq!(got, [3, 4, 5, 6]);
    }

    #[test]
    fn a_batch_is_cut_at_the_end_of_the_range() {
        let d = DoubleBuffer::default();
        d.install(r(100, 104));
        assert_eq!(d.draw(3).map(|x| (x.first, x.count)), Some((100, 3)));
        assert_eq!(d.draw(3).map(|x| (x.first, x.count)), Some((103, 2)));
        assert_eq!(d.draw(1), None);
    }

    #[test]
    fn exactly_one_draw_asks_for_the_next_range() {
        let d = DoubleBuffer::default();
        d.install(r(1, 1000));
        let asked: Vec<i64> = (0..1000)
            .filter_map(|_| d.draw(1))
            .filter(|x| x.prefetch)
            .map(|x| x.first)
            .collect();
        assert_eq!(asked, [101]);
        let d = DoubleBuffer::default();
        d.install(r(1, 1000));
        d.draw(50);
        assert!(
            d.draw(100).unwrap().prefetch,
            "a batch covering offset 100 asks"
        );
    }

    #[test]
    fn frozen_buffers_refuse_draws_and_thaw_unchanged() {
        let d = DoubleBuffer::default();
        d.install(r(1, 10));
        d.draw(4);
        d.freeze();
        assert_eq!(d.draw(1), None);
        assert_eq!(d.highest_taken(), Some(4));
        d.thaw();
        assert_eq!(d.draw(1).unwrap().first, 5);
        d.freeze();
        d.clear();
        assert_eq!(d.draw(1), None);
        assert_eq!(d.highest_taken(), None);
        assert!(d.install(r(50, 60)));
        assert_eq!(d.highest_taken(), Some(49));
        assert_eq!(d.draw(1).unwrap().first, 50);
    }

    #[test]
    fn ranges_at_the_bigint_maximum() {
        let d = DoubleBuffer::default();
        d.install(r(i64::MAX - 1, i64::MAX));
        assert_eq!(
            d.draw(5).map(|x| (x.first, x.count)),
            Some((i64::MAX - 1, 2))
        );
        assert_eq!(d.draw(1), None);
    }

    /// 8 threads draw while whoever finds both buffers drained refills them under a mutex, as
    /// backends and the allocator do: no number twice, each thread strictly increasing.
    #[test]
    fn concurrent_draws_and_refills_never_repeat_a_number() {
        const THREADS: usize = 8;
        const PER_THREAD: usize = 50_000;
        let d = DoubleBuffer::default();
        let writer = Mutex::new(0i64); // high-water mark
        let step = 37;
        let all: Vec<Vec<i64>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..THREADS)
                .map(|t| {
                    let (d, writer) = (&d, &writer);
                    s.spawn(move || {
                        let mut mine = Vec::with_capacity(PER_THREAD);
                        while mine.len() < PER_THREAD {
                            let n = 1 + (t as u64 % 3);
                            if let Some(x) = d.draw(n) {
                                mine.extend((0..x.count as i64).map(|i| x.first + i));
                                continue;
                            }
                            let mut max_id = writer.lock().unwrap();
                            if !d.advance() {
                                while d.install(r(*max_id + 1, *max_id + step)) {
                                    *max_id += step;
                                }
                            }
                        }
                        mine
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut seen = HashSet::new();
        for mine in &all {
            assert!(
                mine.windows(2).all(|w| w[0] < w[1]),
                "a thread went backwards"
            );
            for &v in mine {
                assert!(seen.insert(v), "{v} was drawn twice");
            }
        }
        assert!(seen.len() >= THREADS * PER_THREAD);
        assert!(*seen.iter().max().unwrap() <= *writer.lock().unwrap());
    }
}
