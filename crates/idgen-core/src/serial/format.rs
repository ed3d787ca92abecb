//! The format of a business serial number (business code + date and time + counter), e.g.
//! `INV-{YYYY}{MM}{DD}-{seq:06}` → `INV-20261122-000123`; covered by `#[test]`s and proptest.
//!
//! Literal text plus tokens in braces: `{YYYY}` `{YY}` `{MM}` `{DD}` `{HH24}` `{MI}` `{SS}`
//! `{MS}` (PostgreSQL `to_char`'s names, of the draw's local time), `{seq}` or `{seq:0N}` (the
//! counter, zero-padded to N digits, 1 ≤ N ≤ 18), `{worker}` or `{worker:0N}` (this server's
//! worker id, 4 digits by default); `{{` and `}}` are literal braces. Exactly one counter.

/// Longest format, in bytes.
pub const MAX_FORMAT_BYTES: usize = 256;

/// Digits of `{worker}` without a width: the default layout's largest worker id, 1023.
const WORKER_DIGITS: usize = 4;

/// One piece of a format.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Literal(String),
    Year4,
    Year2,
    Month,
    Day,
    Hour,
    Minute,
    Second,
    Milli,
    /// The counter, zero-padded to the width if any.
    Seq(Option<usize>),
    /// The worker id, zero-padded to the width.
    Worker(usize),
}

/// When a serial's counter starts again at 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reset {
    Day,
    Month,
    Year,
    Never,
}

impl Reset {
    /// Its SQL name, as [`Reset::parse`] reads it.
    pub fn as_str(self) -> &'static str {
        match self {
            Reset::Day => "day",
            Reset::Month => "month",
            Reset::Year => "year",
            Reset::Never => "never",
        }
    }

    /// `'day'`, `'month'`, `'year'` or `'never'`.
    pub fn parse(text: &str) -> Option<Reset> {
        match text {
            "day" => Some(Reset::Day),
            "month" => Some(Reset::Month),
            "year" => Some(Reset::Year),
            "never" => Some(Reset::Never),
            _ => None,
        }
    }
}

/// A parsed format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Format {
    pieces: Vec<Piece>,
}

/// The local time of a draw, in the serial's time zone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalTime {
    pub year: i32,
    pub month: u8,
    pub day: u8,
    pub hour: u8,
    pub minute: u8,
    pub second: u8,
    pub milli: u16,
}

/// Why a format is refused (SQLSTATE 22023), naming the offending token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FormatError {
    TooLong(usize),
    UnknownToken {
        token: String,
        at: usize,
    },
    Unclosed {
        at: usize,
    },
    StrayBrace {
        at: usize,
    },
    BadWidth {
        token: String,
        at: usize,
    },
    NoCounter,
    TwoCounters {
        at: usize,
    },
    /// A counter that restarts each period needs the period in the text.
    MissingPeriod {
        reset: &'static str,
        token: &'static str,
    },
    /// A serial's new format differs from its old one beyond the width of `{seq}`
    /// ([`Format::check_change`]).
    ChangedBeyondWidth,
}

impl std::fmt::Display for FormatError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FormatError::TooLong(n) => {
                write!(f, "format is {n} bytes, more than {MAX_FORMAT_BYTES}")
            }
            FormatError::UnknownToken { token, at } => {
                write!(f, "unknown token \"{token}\" at byte {at}")
            }
            FormatError::Unclosed { at } => write!(f, "unclosed \"{{\" at byte {at}"),
            FormatError::StrayBrace { at } => {
                write!(f, "stray \"}}\" at byte {at} (write \"}}}}\" for a brace)")
            }
            FormatError::BadWidth { token, at } => {
                write!(f, "bad width in token \"{token}\" at byte {at} (write {{seq:06}}: a 0 and 1 to 18 digits)")
            }
            FormatError::NoCounter => write!(f, "format has no {{seq}} token"),
            FormatError::TwoCounters { at } => write!(f, "second {{seq}} token at byte {at}"),
            FormatError::MissingPeriod { reset, token } => {
                write!(
                    f,
                    "format lacks the {token} token that a counter reset every {reset} needs"
                )
            }
            FormatError::ChangedBeyondWidth => write!(
                f,
                "the new format differs from the serial's format in more than the width of {{seq}}, so it could print a text the serial already printed"
            ),
        }
    }
}

/// Why a number cannot be rendered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RenderError {
    /// The counter has outgrown its padding (the 1,000,000th number of `{seq:06}`): an error,
    /// never a truncation or a silent widening.
    SeqOverflow { max: i64 },
    /// The worker id does not fit its padding, or there is none.
    Worker { worker: Option<u32>, width: usize },
    /// The year does not fit `{YYYY}`.
    Year(i32),
}

/// `{name}` or `{name:0N}`: the name and the width.
fn split_width(inner: &str) -> Option<(&str, Option<&str>)> {
    match inner.split_once(':') {
        Some((name, width)) => Some((name, Some(width))),
        None => Some((inner, None)),
    }
}

/// `0N` with 1 ≤ N ≤ 18.
fn width(text: &str) -> Option<usize> {
    let digits = text.strip_prefix('0')?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) || digits.len() > 2 {
        return None;
    }
    let n: usize = digits.parse().ok()?;
    (1..=18).contains(&n).then_some(n)
}

impl Format {
    /// Parses `text`. Errors name the offending token and its byte position.
    pub fn parse(text: &str) -> Result<Format, FormatError> {
        if text.len() > MAX_FORMAT_BYTES {
            return Err(FormatError::TooLong(text.len()));
        }
        let mut pieces = Vec::new();
        let mut literal = String::new();
        let mut counters = 0;
        let mut rest = text.char_indices().peekable();
        while let Some((at, c)) = rest.next() {
            match c {
                '{' if rest.peek().map(|&(_, n)| n) == Some('{') => {
                    rest.next();
                    literal.push('{');
                }
                '}' if rest.peek().map(|&(_, n)| n) == Some('}') => {
                    rest.next();
                    literal.push('}');
                }
                '}' => return Err(FormatError::StrayBrace { at }),
                '{' => {
                    let close = text[at..].find('}').ok_or(FormatError::Unclosed { at })? + at;
                    let token = &text[at..=close];
                    let inner = &text[at + 1..close];
                    while rest.peek().is_some_and(|&(i, _)| i <= close) {
                        rest.next();
                    }
                    let unknown = || FormatError::UnknownToken {
                        token: token.into(),
                        at,
                    };
                    let bad_width = || FormatError::BadWidth {
                        token: token.into(),
                        at,
                    };
                    let (name, w) = split_width(inner).ok_or_else(unknown)?;
                    let piece = match (name, w) {
                        ("YYYY", None) => Piece::Year4,
                        ("YY", None) => Piece::Year2,
                        ("MM", None) => Piece::Month,
                        ("DD", None) => Piece::Day,
                        ("HH24", None) => Piece::Hour,
                        ("MI", None) => Piece::Minute,
                        ("SS", None) => Piece::Second,
                        ("MS", None) => Piece::Milli,
                        ("seq", w) => {
                            counters += 1;
                            if counters > 1 {
                                return Err(FormatError::TwoCounters { at });
                            }
                            Piece::Seq(w.map(|w| width(w).ok_or_else(bad_width)).transpose()?)
                        }
                        ("worker", w) => Piece::Worker(
                            w.map(|w| width(w).ok_or_else(bad_width))
                                .transpose()?
                                .unwrap_or(WORKER_DIGITS),
                        ),
                        _ => return Err(unknown()),
                    };
                    if !literal.is_empty() {
                        pieces.push(Piece::Literal(std::mem::take(&mut literal)));
                    }
                    pieces.push(piece);
                }
                c => literal.push(c),
            }
        }
        if !literal.is_empty() {
            pieces.push(Piece::Literal(literal));
        }
        if counters == 0 {
            return Err(FormatError::NoCounter);
        }
        Ok(Format { pieces })
    }

    /// Checks that a counter restarting on `reset` cannot repeat a text: the text shows the
    /// period (a year, and the month, and the day, as the reset needs). `{YY}` counts as a year
    /// (its texts repeat after a century).
    pub fn check_reset(&self, reset: Reset) -> Result<(), FormatError> {
        let has = |p: &Piece| self.pieces.contains(p);
        let year = has(&Piece::Year4) || has(&Piece::Year2);
        let (name, needs): (&'static str, &[(bool, &'static str)]) = match reset {
            Reset::Never => return Ok(()),
            Reset::Year => ("year", &[(year, "{YYYY}")]),
            Reset::Month => ("month", &[(year, "{YYYY}"), (has(&Piece::Month), "{MM}")]),
            Reset::Day => (
                "day",
                &[
                    (year, "{YYYY}"),
                    (has(&Piece::Month), "{MM}"),
                    (has(&Piece::Day), "{DD}"),
                ],
            ),
        };
        match needs.iter().find(|(present, _)| !present) {
            Some(&(_, token)) => Err(FormatError::MissingPeriod { reset: name, token }),
            None => Ok(()),
        }
    }

    /// Checks that a serial whose format changes from `self` to `new` (its counters going on)
    /// cannot print a text `self` printed: `new` must be `self` with only the width of `{seq}`
    /// changed (or none). Why that suffices: every other token has a fixed width, so two texts
    /// of the two formats are equal only if their pieces are, piece by piece: the same period
    /// fields (the same period, as [`Format::check_reset`] makes the text show it) and the same
    /// counter value (decimal digits with leading zeros name one number). In one period the
    /// counter goes on above every value the old format printed, so no pair is equal. Any
    /// other change (a literal, a token moved, swapped or added) can line two texts up (`A1{seq:03}`
    /// → `A{seq:04}` prints `A1001` again after 1,000 draws; `{DD}{MM}` → `{MM}{DD}` prints
    /// 4 March's texts again on 3 April) and is refused: such a format is a new serial.
    pub fn check_change(&self, new: &Format) -> Result<(), FormatError> {
        let shape = |f: &Format| -> Vec<Piece> {
            f.pieces
                .iter()
                .map(|p| match p {
                    Piece::Seq(_) => Piece::Seq(None),
                    other => other.clone(),
                })
                .collect()
        };
        if shape(self) == shape(new) {
            Ok(())
        } else {
            Err(FormatError::ChangedBeyondWidth)
        }
    }

    /// The largest counter the padding shows (`10^N - 1` for `{seq:0N}`), `None` unpadded.
    pub fn max_seq(&self) -> Option<i64> {
        self.pieces.iter().find_map(|p| match p {
            Piece::Seq(Some(n)) => Some(10i64.pow(*n as u32) - 1),
            _ => None,
        })
    }

    /// Whether the format shows the worker id.
    pub fn uses_worker(&self) -> bool {
        self.pieces.iter().any(|p| matches!(p, Piece::Worker(_)))
    }

    /// The text of counter value `seq` (≥ 1) drawn at local time `t` by worker `worker`.
    pub fn render(
        &self,
        t: &LocalTime,
        seq: i64,
        worker: Option<u32>,
    ) -> Result<String, RenderError> {
        if let Some(max) = self.max_seq() {
            if seq > max {
                return Err(RenderError::SeqOverflow { max });
            }
        }
        use std::fmt::Write;
        // Writing into a String cannot fail.
        let mut out = String::with_capacity(32);
        for p in &self.pieces {
            let _ = match p {
                Piece::Literal(l) => {
                    out.push_str(l);
                    Ok(())
                }
                Piece::Year4 if (0..=9999).contains(&t.year) => write!(out, "{:04}", t.year),
                Piece::Year4 => return Err(RenderError::Year(t.year)),
                Piece::Year2 => write!(out, "{:02}", t.year.rem_euclid(100)),
                Piece::Month => write!(out, "{:02}", t.month),
                Piece::Day => write!(out, "{:02}", t.day),
                Piece::Hour => write!(out, "{:02}", t.hour),
                Piece::Minute => write!(out, "{:02}", t.minute),
                Piece::Second => write!(out, "{:02}", t.second),
                Piece::Milli => write!(out, "{:03}", t.milli),
                Piece::Seq(None) => write!(out, "{seq}"),
                Piece::Seq(Some(n)) => write!(out, "{seq:0n$}", n = *n),
                Piece::Worker(n) => match worker {
                    Some(w) if w.checked_ilog10().map_or(1, |d| d as usize + 1) <= *n => {
                        write!(out, "{w:0n$}", n = *n)
                    }
                    _ => return Err(RenderError::Worker { worker, width: *n }),
                },
            };
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const T: LocalTime = LocalTime {
        year: 2026,
        month: 11,
        day: 22,
        hour: 8,
        minute: 5,
        second: 9,
        milli: 7,
    };

    #[test]
    fn the_invoice_example() {
        let f = Format::parse("INV-{YYYY}{MM}{DD}-{seq:06}").unwrap();
        assert_eq!(f.render(&T, 123, None).unwrap(), "INV-20261122-000123");
        assert_eq!(f.max_seq(), Some(999_999));
        assert!(f.check_reset(Reset::Day).is_ok());
        assert_eq!(
            f.render(&T, 1_000_000, None),
            Err(RenderError::SeqOverflow { max: 999_999 })
        );
        let all =
            Format::parse("{{{YY}/{HH24}:{MI}:{SS}.{MS}}} #{seq} w{worker} {worker:02}").unwrap();
        assert_eq!(
            all.render(&T, 5, Some(7)).unwrap(),
            "{26/08:05:09.007} #5 w0007 07"
        );
        assert!(all.uses_worker());
        assert_eq!(
            all.render(&T, 5, Some(100)),
            Err(RenderError::Worker {
                worker: Some(100),
                width: 2
            })
        );
    }

    #[test]
    fn bad_formats_name_the_token() {
        let cases = [
            ("A-{YYYYY}-{seq}", "unknown token \"{YYYYY}\" at byte 2"),
            ("{seq", "unclosed \"{\" at byte 0"),
            ("{seq}}x", "stray \"}\" at byte 5"),
            ("{}{seq}", "unknown token \"{}\" at byte 0"),
            ("{seq:6}", "bad width in token \"{seq:6}\""),
            ("{seq:00}", "bad width"),
            ("{seq:019}", "bad width"),
            ("{yyyy}{seq}", "unknown token \"{yyyy}\""),
            ("INV-{YYYY}", "no {seq} token"),
            ("{seq}-{seq:02}", "second {seq} token at byte 6"),
        ];
        for (format, message) in cases {
            let e = Format::parse(format).unwrap_err().to_string();
            assert!(e.contains(message), "{format}: {e}");
        }
        assert!(Format::parse(&"x".repeat(257))
            .unwrap_err()
            .to_string()
            .contains("257 bytes"));
        let missing = Format::parse("INV-{YYYY}{MM}-{seq}")
            .unwrap()
            .check_reset(Reset::Day);
        assert_eq!(
            missing.unwrap_err().to_string(),
            "format lacks the {DD} token that a counter reset every day needs"
        );
        assert!(Format::parse("{seq}")
            .unwrap()
            .check_reset(Reset::Year)
            .is_err());
        assert!(Format::parse("{seq}")
            .unwrap()
            .check_reset(Reset::Never)
            .is_ok());
        assert!(Format::parse("{YY}{seq}")
            .unwrap()
            .check_reset(Reset::Year)
            .is_ok());
    }

    fn times() -> impl Strategy<Value = LocalTime> {
        (
            0i32..=9999,
            1u8..=12,
            1u8..=28,
            0u8..24,
            0u8..60,
            0u8..60,
            0u16..1000,
        )
            .prop_map(
                |(year, month, day, hour, minute, second, milli)| LocalTime {
                    year,
                    month,
                    day,
                    hour,
                    minute,
                    second,
                    milli,
                },
            )
    }

    /// The period key of `t` for `reset`: what must differ for the counter to restart.
    fn period(t: &LocalTime, reset: Reset) -> (i32, u8, u8) {
        match reset {
            Reset::Day => (t.year, t.month, t.day),
            Reset::Month => (t.year, t.month, 0),
            Reset::Year => (t.year, 0, 0),
            Reset::Never => (0, 0, 0),
        }
    }

    /// Four days in four months of four years, a few hours: dates repeat often.
    fn near_times() -> impl Strategy<Value = LocalTime> {
        (2025i32..2029, 1u8..=4, 1u8..=4, 0u8..3).prop_map(|(year, month, day, hour)| LocalTime {
            year,
            month,
            day,
            hour,
            minute: 0,
            second: 0,
            milli: 0,
        })
    }

    fn resets() -> impl Strategy<Value = Reset> {
        prop_oneof![
            1 => Just(Reset::Day),
            1 => Just(Reset::Month),
            1 => Just(Reset::Year),
            3 => Just(Reset::Never)
        ]
    }

    /// The pieces formats are made of here: short literals of digits and a letter, so that a
    /// literal can pass for a counter's or a date's digits.
    const ELEMENTS: [&str; 9] = [
        "A", "1", "0", "-", "{YYYY}", "{YY}", "{MM}", "{DD}", "{HH24}",
    ];

    fn seq_token() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("{seq}".to_owned()),
            (1usize..=5).prop_map(|n| format!("{{seq:0{n}}}"))
        ]
    }

    /// A format: up to six elements with one counter among them.
    fn format_texts() -> impl Strategy<Value = String> {
        (
            proptest::collection::vec(0usize..ELEMENTS.len(), 0..6),
            seq_token(),
            0usize..6,
        )
            .prop_map(|(elements, seq, at)| {
                let mut parts: Vec<String> =
                    elements.iter().map(|&i| ELEMENTS[i].to_owned()).collect();
                parts.insert(at.min(parts.len()), seq);
                parts.concat()
            })
    }

    /// How a DBA might change a format: the counter's width, an element added, removed or
    /// replaced, two neighbours swapped, or a format made anew.
    #[derive(Debug, Clone)]
    enum Edit {
        Width(String),
        Insert(usize, usize),
        Remove(usize),
        Replace(usize, usize),
        Swap(usize),
        Anew(String),
    }

    fn format_edits() -> impl Strategy<Value = Edit> {
        prop_oneof![
            3 => seq_token().prop_map(Edit::Width),
            1 => (0usize..8, 0usize..ELEMENTS.len()).prop_map(|(a, e)| Edit::Insert(a, e)),
            1 => (0usize..8).prop_map(Edit::Remove),
            1 => (0usize..8, 0usize..ELEMENTS.len()).prop_map(|(a, e)| Edit::Replace(a, e)),
            1 => (0usize..8).prop_map(Edit::Swap),
            1 => format_texts().prop_map(Edit::Anew),
        ]
    }

    impl Edit {
        fn apply(&self, old: &str) -> String {
            // The format's elements: tokens whole, literal characters one by one.
            let mut parts: Vec<String> = Vec::new();
            let mut rest = old;
            while !rest.is_empty() {
                let n = if rest.starts_with('{') {
                    rest.find('}').map_or(rest.len(), |i| i + 1)
                } else {
                    1
                };
                parts.push(rest[..n].to_owned());
                rest = &rest[n..];
            }
            let len = parts.len();
            let is_seq = |p: &String| p.starts_with("{seq");
            match self {
                Edit::Width(seq) => {
                    for p in parts.iter_mut().filter(|p| is_seq(p)) {
                        p.clone_from(seq);
                    }
                }
                Edit::Insert(at, e) => parts.insert(at % (len + 1), ELEMENTS[*e].to_owned()),
                Edit::Remove(at) if !is_seq(&parts[at % len]) => {
                    parts.remove(at % len);
                }
                Edit::Remove(_) => {}
                Edit::Replace(at, e) if !is_seq(&parts[at % len]) => {
                    parts[at % len] = ELEMENTS[*e].to_owned();
                }
                Edit::Replace(_, _) => {}
                Edit::Swap(at) if len > 1 => parts.swap(at % (len - 1), at % (len - 1) + 1),
                Edit::Swap(_) => {}
                Edit::Anew(text) => return text.clone(),
            }
            parts.concat()
        }
    }

    #[test]
    fn a_format_change_keeps_every_piece_but_the_counters_width() {
        let change = |old: &str, new: &str| {
            Format::parse(old)
                .unwrap()
                .check_change(&Format::parse(new).unwrap())
        };
        assert!(change("INV-{YYYY}{MM}{DD}-{seq:06}", "INV-{YYYY}{MM}{DD}-{seq:07}").is_ok());
        assert!(change("A{seq}", "A{seq:04}").is_ok());
        assert!(change("A{seq:05}", "A{seq:03}").is_ok());
        // Two that each print an old text again, shown here by rendering.
        assert!(change("A1{seq:03}", "A{seq:04}").is_err());
        let (old, new) = (
            Format::parse("A1{seq:03}").unwrap(),
            Format::parse("A{seq:04}").unwrap(),
        );
        assert_eq!(old.render(&T, 1, None), new.render(&T, 1001, None));
        let (dm, md) = (
            Format::parse("INV-{DD}{MM}{YYYY}-{seq:04}").unwrap(),
            Format::parse("INV-{MM}{DD}{YYYY}-{seq:04}").unwrap(),
        );
        assert!(dm.check_change(&md).is_err());
        let day = |month, day| LocalTime { month, day, ..T };
        assert_eq!(
            dm.render(&day(3, 4), 1, None),
            md.render(&day(4, 3), 1, None)
        );
        assert!(change("{seq}", "{seq}-{worker}").is_err());
        assert!(change("{worker:02}{seq}", "{worker:03}{seq}").is_err());
        assert!(change("X{seq}", "X{{{seq}").is_err());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4096))]

        /// Within one period, different counters give different texts, in counter order when
        /// padded.
        #[test]
        fn texts_of_one_period_differ_and_sort(t in times(), a in 1i64..999_999, b in 1i64..999_999) {
            let f = Format::parse("X{YYYY}{MM}{DD}-{seq:06}").unwrap();
            let (ta, tb) = (f.render(&t, a, None).unwrap(), f.render(&t, b, None).unwrap());
            prop_assert_eq!(a == b, ta == tb);
            prop_assert_eq!(a.cmp(&b), ta.cmp(&tb));
        }

        /// A format that passes check_reset never gives two (period, counter) pairs the same
        /// text (within the 4-digit years).
        #[test]
        fn accepted_formats_never_repeat_across_periods(
            t1 in times(), t2 in times(), a in 1i64..99_999, b in 1i64..99_999,
            which in 0usize..4,
        ) {
            let (format, reset) = [
                ("D{YYYY}{MM}{DD}{seq}", Reset::Day),
                ("M{MM}/{YYYY}-{seq:05}", Reset::Month),
                ("Y{seq}@{YYYY}", Reset::Year),
                ("N{seq}", Reset::Never),
            ][which];
            let f = Format::parse(format).unwrap();
            prop_assert!(f.check_reset(reset).is_ok());
            let (ta, tb) = (f.render(&t1, a, None).unwrap(), f.render(&t2, b, None).unwrap());
            if (period(&t1, reset), a) != (period(&t2, reset), b) {
                prop_assert_ne!(ta, tb);
            }
        }

        /// A format change that check_change accepts never prints a text of the old format:
        /// old and new formats (the new one often the old one edited), any reset both pass,
        /// any old draw (t1, c1) and new draw (t2, c2), where in one period the counter went on
        /// (c2 > c1) and in another it is anything. Small sets of dates and counters make
        /// equal texts likely wherever the check would let one through.
        #[test]
        fn accepted_format_changes_never_print_an_old_text(
            old in format_texts(), edit in format_edits(), reset in resets(),
            t1 in near_times(), t2 in near_times(), c1 in 1i64..120,
        ) {
            let new_text = edit.apply(&old);
            let (Ok(old), Ok(new)) = (Format::parse(&old), Format::parse(&new_text)) else {
                return Ok(());
            };
            if old.check_reset(reset).is_err() || new.check_reset(reset).is_err()
                || old.check_change(&new).is_err() {
                return Ok(());
            }
            let Ok(printed) = old.render(&t1, c1, None) else {
                return Ok(());
            };
            // Every counter the new format can show at t2: above c1 in c1's period.
            let first = if period(&t1, reset) == period(&t2, reset) { c1 + 1 } else { 1 };
            for c2 in first..first + 1200 {
                if let Ok(text) = new.render(&t2, c2, None) {
                    prop_assert_ne!(&printed, &text, "{} at {:?} then {} {}", c1, t1, new_text, c2);
                }
            }
        }

        #[test]
        fn parsing_never_panics(text in "\\PC{0,60}") {
            let _ = Format::parse(&text);
        }
    }
}
