//! Tests of the double buffer: single-threaded cases, racing writers and readers on real
//! threads, and a proptest model of every transition.

use super::*;
use parking_lot::Mutex;
use proptest::prelude::*;
use std::collections::HashSet;
use std::sync::atomic::{AtomicI64, AtomicUsize};
use std::time::{Duration, Instant};

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
fn issued_counts_the_numbers_of_overwritten_and_cleared_ranges() {
    let d = DoubleBuffer::default();
    assert_eq!(d.issued(), 0);
    d.install(r(1, 3));
    d.draw(2);
    assert_eq!(d.issued(), 2);
    d.install(r(4, 5));
    d.draw(3); // 3, then nothing: the draw stops at the end of the range
    assert!(d.advance());
    d.draw(1); // 4
    assert_eq!(d.issued(), 4);
    // Overwrites the drained 1..=3: its three numbers stay counted.
    assert!(d.install(r(6, 9)));
    assert_eq!(d.issued(), 4);
    d.clear(); // 5..=9 were never taken: only the 4 taken stay counted
    assert_eq!(d.issued(), 4);
    d.install(r(10, 10));
    d.draw(1);
    assert_eq!(d.issued(), 5);
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
                        let mut max_id = writer.lock();
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
    assert!(*seen.iter().max().unwrap() <= *writer.lock());
}

/// Writers race here, as they would without the segment LWLock: six threads each draw,
/// and whoever finds nothing switches or installs a range taken from a shared high-water
/// counter (so ranges can arrive late and out of order), while a seventh thread freezes,
/// samples `highest_taken`, then thaws or clears. No number twice; each thread's numbers
/// strictly increase between clears; `highest_taken` sampled while frozen is at least
/// every number handed out since the last clear. Twelve rounds, each bounded by 5 s (the
/// whole test takes about 0.2 s in release, 1.5 s in debug).
#[test]
fn racing_writers_never_repeat_reorder_or_under_report() {
    for round in 0..12 {
        race(round);
    }
}

fn race(round: usize) {
    const THREADS: usize = 6;
    const PER_THREAD: usize = 20_000;
    const EPOCHS: usize = 1 << 14;
    let deadline = Instant::now() + Duration::from_secs(5);
    let d = DoubleBuffer::default();
    let high_water = AtomicI64::new(0);
    // Even while no clear is in progress: bumped before and after each clear, so a draw that
    // reads the same even value before and after itself fell within epoch `clears / 2`.
    let clears = AtomicU64::new(0);
    // The highest number handed out in each epoch (between two clears).
    let highest_in: Vec<AtomicI64> = (0..EPOCHS).map(|_| AtomicI64::new(i64::MIN)).collect();
    let finished = AtomicUsize::new(0);
    let (d, high_water, clears, highest_in, finished) =
        (&d, &high_water, &clears, &highest_in, &finished);
    let all: Vec<Vec<i64>> = std::thread::scope(|s| {
        s.spawn(move || {
            let mut samples = 0usize;
            while finished.load(SeqCst) < THREADS && Instant::now() < deadline {
                d.freeze();
                let epoch = clears.load(SeqCst);
                let reported = d.highest_taken();
                let handed_out = highest_in[epoch as usize / 2].load(SeqCst);
                if handed_out != i64::MIN && reported < Some(handed_out) {
                    d.clear(); // let the drawers run into their deadline
                    panic!(
                        "round {round}: highest_taken {reported:?} below {handed_out}, \
                         handed out before the freeze"
                    );
                }
                samples += 1;
                if samples.is_multiple_of(3) && (epoch as usize / 2) + 1 < EPOCHS {
                    clears.fetch_add(1, SeqCst);
                    d.clear();
                    clears.fetch_add(1, SeqCst);
                } else {
                    d.thaw();
                }
                for _ in 0..20 {
                    std::thread::yield_now();
                }
            }
        });
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                s.spawn(move || {
                    let step = 3 + t as i64;
                    let n = 1 + (t as u64 % 3);
                    let mut mine = Vec::with_capacity(PER_THREAD + 3);
                    let mut last: Option<(u64, i64)> = None; // (epoch word, last number)
                    while mine.len() < PER_THREAD && Instant::now() < deadline {
                        let before = clears.load(SeqCst);
                        let Some(x) = d.draw(n) else {
                            if !d.advance() {
                                let first = high_water.fetch_add(step, SeqCst) + 1;
                                d.install(r(first, first + step - 1));
                            }
                            continue;
                        };
                        let after = clears.load(SeqCst);
                        let top = x.first + (x.count as i64 - 1);
                        mine.extend(x.first..=top);
                        if before != after || !before.is_multiple_of(2) {
                            last = None; // may straddle a clear: order not promised
                            continue;
                        }
                        if let Some((epoch, prev)) = last {
                            assert!(
                                epoch != before || x.first > prev,
                                "round {round}: thread {t} drew {} after {prev}",
                                x.first
                            );
                        }
                        last = Some((before, top));
                        highest_in[before as usize / 2].fetch_max(top, SeqCst);
                    }
                    finished.fetch_add(1, SeqCst);
                    mine
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut every: Vec<i64> = all.concat();
    let drawn = every.len();
    every.sort_unstable();
    if let Some(w) = every.windows(2).find(|w| w[0] == w[1]) {
        panic!("round {round}: {} was drawn twice", w[0]);
    }
    assert!(every.last() <= Some(&high_water.load(SeqCst)));
    assert!(
        drawn >= THREADS * PER_THREAD,
        "round {round}: only {drawn} numbers drawn before the deadline"
    );
}

/// An operation of [`sequential_operations_match_the_model`].
#[derive(Debug, Clone)]
enum Op {
    Draw(u64),
    /// Installs the next range above the high-water mark, `gap` numbers above it.
    Install {
        gap: i64,
        len: i64,
    },
    /// Installs a range ending `back` numbers below the high-water mark (a late refill).
    InstallLate {
        back: i64,
        len: i64,
    },
    Advance,
    Clear,
    Freeze,
    Thaw,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (1u64..5).prop_map(Op::Draw),
        3 => (0i64..3, 1i64..12).prop_map(|(gap, len)| Op::Install { gap, len }),
        1 => (0i64..30, 1i64..12).prop_map(|(back, len)| Op::InstallLate { back, len }),
        2 => Just(Op::Advance),
        1 => Just(Op::Clear),
        1 => Just(Op::Freeze),
        1 => Just(Op::Thaw),
    ]
}

/// The double buffer as a plain sequential value: the current range (first, len, taken),
/// the next one (first, len), frozen.
#[derive(Debug, Default)]
struct Model {
    current: Option<(i64, u64, u64)>,
    next: Option<(i64, u64)>,
    frozen: bool,
}

impl Model {
    fn draw(&mut self, n: u64) -> Option<Drawn> {
        let (first, len, taken) = self.current.as_mut()?;
        if self.frozen || *taken >= *len {
            return None;
        }
        let (offset, count, at) = (*taken, n.min(*len - *taken), prefetch_offset(*len));
        *taken += count;
        Some(Drawn {
            first: *first + offset as i64,
            count,
            prefetch: offset <= at && at < offset + count,
        })
    }

    fn advance(&mut self) -> bool {
        if matches!(self.current, Some((_, len, taken)) if taken < len) {
            return true;
        }
        match self.next.take() {
            Some((first, len)) => {
                self.current = Some((first, len, 0));
                true
            }
            None => false,
        }
    }

    fn install(&mut self, range: Range) -> bool {
        self.advance();
        let held_last = [
            self.current.map(|(f, l, _)| f + l as i64 - 1),
            self.next.map(|(f, l)| f + l as i64 - 1),
        ];
        if self.next.is_some() || held_last.iter().flatten().any(|&l| range.first <= l) {
            return false;
        }
        self.next = Some((range.first, range.len()));
        self.advance();
        true
    }

    fn highest_taken(&self) -> Option<i64> {
        self.current
            .map(|(first, _, taken)| first + taken as i64 - 1)
    }

    fn views(&self) -> (Option<BufferView>, Option<BufferView>) {
        let view = |first: i64, len: u64, taken| BufferView {
            range: r(first, first + len as i64 - 1),
            taken,
        };
        (
            self.current.map(|(f, l, t)| view(f, l, t)),
            self.next.map(|(f, l)| view(f, l, 0)),
        )
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    /// Any sequence of operations by one writer behaves as the model: same draws, same
    /// install and advance outcomes, same views, next_remaining and highest_taken after
    /// every step. A late (lower) range is refused while higher numbers are held, and an
    /// install does not thaw a frozen segment. `issued` is every number drawn so far, across
    /// installs over drained ranges and clears.
    #[test]
    fn sequential_operations_match_the_model(ops in proptest::collection::vec(op(), 1..60)) {
        let d = DoubleBuffer::default();
        let mut m = Model::default();
        let mut high_water = 100i64;
        let mut drawn = 0u64;
        for (step, op) in ops.iter().enumerate() {
            match *op {
                Op::Draw(n) => {
                    let got = d.draw(n);
                    prop_assert_eq!(got, m.draw(n), "step {}", step);
                    drawn += got.map_or(0, |x| x.count);
                }
                Op::Install { gap, len } => {
                    let range = r(high_water + 1 + gap, high_water + gap + len);
                    high_water = range.last;
                    prop_assert_eq!(d.install(range), m.install(range), "step {}", step);
                }
                Op::InstallLate { back, len } => {
                    let range = r(high_water - back - len + 1, high_water - back);
                    prop_assert_eq!(d.install(range), m.install(range), "step {}", step);
                }
                Op::Advance => prop_assert_eq!(d.advance(), m.advance(), "step {}", step),
                Op::Clear => {
                    d.clear();
                    m = Model::default();
                }
                Op::Freeze => {
                    d.freeze();
                    m.frozen = true;
                }
                Op::Thaw => {
                    d.thaw();
                    m.frozen = false;
                }
            }
            prop_assert_eq!(d.views(), m.views(), "views after step {}", step);
            prop_assert_eq!(
                d.next_remaining(),
                m.next.map_or(0, |(_, l)| l),
                "next_remaining after step {}", step
            );
            prop_assert_eq!(d.highest_taken(), m.highest_taken(), "highest_taken after step {}", step);
            prop_assert_eq!(d.issued(), drawn, "issued after step {}", step);
        }
    }
}

/// A block stamped with the clear count read before its draw never comes from a range of an
/// earlier clear epoch: a session that read count c drew from a range installed after the
/// c-th clear (counting before the clear's compare_exchange would let a block drawn from the
/// old range carry the new count). A clearing thread clears and installs the next range,
/// without freezing, while a drawing thread stamps blocks.
#[test]
fn a_block_stamped_with_a_clear_count_comes_from_that_epochs_ranges() {
    const LEN: i64 = 1_000_000;
    let d = DoubleBuffer::default();
    assert!(d.install(r(1, LEN)));
    // floors[c]: the last number of every range installed before the c-th clear.
    let floors = Mutex::new(vec![i64::MIN]);
    let stop = std::sync::atomic::AtomicBool::new(false);
    let stamped = std::thread::scope(|s| {
        let drawer = s.spawn(|| {
            let mut stamped = Vec::new();
            while !stop.load(SeqCst) {
                let c = d.clears();
                if let Some(x) = d.draw(10) {
                    stamped.push((c, x.first));
                }
            }
            stamped
        });
        let deadline = Instant::now() + Duration::from_millis(500);
        let mut last = LEN;
        while Instant::now() < deadline {
            let mut f = floors.lock();
            d.clear();
            f.push(last);
            drop(f);
            assert!(d.install(r(last + 1, last + LEN)));
            last += LEN;
            std::thread::yield_now();
        }
        stop.store(true, SeqCst);
        drawer.join().unwrap()
    });
    let floors = floors.into_inner();
    assert!(floors.len() > 10, "{} clears", floors.len() - 1);
    for (c, first) in stamped {
        let floor = floors[c as usize];
        assert!(
            first > floor,
            "a block stamped after clear {c} came from an earlier range ({first} <= {floor})"
        );
    }
}
