//! The text form of a Snowflake id (`snowflake_format`, `snowflake_parse`): a serial number of
//! business code + `yyyyMMddHHmmssSSS` + machine + sequence, built from the id itself so that it
//! is unique because the id is. Covered by `#[test]`s and proptest.
//!
//! `prefix`, then the UTC start of the id's tick as `yyyyMMddHHmmssSSS` (17 digits), the worker
//! id and the sequence, each zero-padded to the digits of the layout's largest value (4 and 4
//! for Twitter's 10 and 12 bits). For one layout every part has a fixed width, and the parts are
//! in the id's own order (time, then worker, then sequence), so for one prefix the texts sort
//! bytewise (`COLLATE "C"`) exactly as the ids do, and the id is read back from the last
//! `17 + worker digits + sequence digits` characters, whatever the prefix.

use super::layout::{Layout, LayoutError};

/// Digits of the timestamp part.
const TIME_DIGITS: usize = 17;

/// Why an id has no text form, or a text is not one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TextError {
    /// The layout's own failures: a negative id or one not below `2^id_bits`, a time before the
    /// epoch or past the layout's end, a worker id or sequence out of range.
    Layout(LayoutError),
    /// The tick starts in a year the 4 digits of `yyyy` cannot show (before 0 or after 9999).
    YearOutOfRange(i64),
    /// The text is not the text form of an id; says what is wrong.
    Malformed(String),
}

impl From<LayoutError> for TextError {
    fn from(e: LayoutError) -> Self {
        TextError::Layout(e)
    }
}

/// Digits of `max` in base 10 (at least 1).
fn digits(max: u64) -> usize {
    max.checked_ilog10().map_or(1, |d| d as usize + 1)
}

/// The widths of the worker and sequence parts under `layout`.
fn widths(layout: &Layout) -> (usize, usize) {
    (digits(layout.max_worker()), digits(layout.max_sequence()))
}

/// Days since 1970-01-01 of the proleptic Gregorian date (`year`, `month` 1-12, `day` 1-31).
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month as i64 + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The proleptic Gregorian date (year, month, day) of `days` since 1970-01-01.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(month <= 2), month, day)
}

/// Days in `month` of `year`.
fn days_in_month(year: i64, month: u32) -> u32 {
    let next = if month == 12 {
        days_from_civil(year + 1, 1, 1)
    } else {
        days_from_civil(year, month + 1, 1)
    };
    (next - days_from_civil(year, month, 1)) as u32
}

/// The text form of `id` under `layout`, after `prefix`.
///
/// Errors: [`TextError::Layout`] for a negative id or one not below `2^id_bits`;
/// [`TextError::YearOutOfRange`] when its tick starts after the year 9999 (possible only with a
/// late epoch or long ticks).
pub fn format(layout: &Layout, id: i64, prefix: &str) -> Result<String, TextError> {
    let parts = layout.decode(id)?;
    let ms = layout.unix_ms_of_tick(parts.tick);
    let (days, in_day) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000));
    let (year, month, day) = civil_from_days(days);
    if !(0..=9999).contains(&year) {
        return Err(TextError::YearOutOfRange(year));
    }
    let (wd, sd) = widths(layout);
    Ok(format!(
        "{prefix}{year:04}{month:02}{day:02}{:02}{:02}{:02}{:03}{:0wd$}{:0sd$}",
        in_day / 3_600_000,
        in_day / 60_000 % 60,
        in_day / 1000 % 60,
        in_day % 1000,
        parts.worker,
        parts.sequence,
    ))
}

/// The id whose text form under `layout` is `text`, for any prefix: the inverse of [`format()`].
///
/// Errors: [`TextError::Malformed`] when the text is too short, its last `17 + worker digits +
/// sequence digits` characters are not all ASCII digits, the date or time is not a real one, or
/// the time is not the start of a tick (no id has that text); [`TextError::Layout`] for a time
/// before the epoch or past the layout's end, a worker id or sequence out of range.
pub fn parse(layout: &Layout, text: &str) -> Result<i64, TextError> {
    let (wd, sd) = widths(layout);
    let tail = TIME_DIGITS + wd + sd;
    let bytes = text.as_bytes();
    if bytes.len() < tail {
        return Err(TextError::Malformed(format!(
            "it has {} bytes, fewer than the {tail} digits of an id's time, worker id and sequence",
            bytes.len()
        )));
    }
    let start = bytes.len() - tail;
    if let Some(at) = bytes[start..].iter().position(|b| !b.is_ascii_digit()) {
        return Err(TextError::Malformed(format!(
            "byte {} is not a digit (the last {tail} must be)",
            start + at + 1
        )));
    }
    // All ASCII digits from `start` on: slicing at these offsets is on character boundaries.
    let field = |from: usize, len: usize| -> u64 {
        text[start + from..start + from + len]
            .parse()
            .expect("ASCII digits, at most 19 of them")
    };
    let (year, month, day) = (field(0, 4) as i64, field(4, 2) as u32, field(6, 2) as u32);
    let (hour, minute, second, milli) = (field(8, 2), field(10, 2), field(12, 2), field(14, 3));
    if !(1..=12).contains(&month) {
        return Err(TextError::Malformed(format!(
            "month {month:02} does not exist"
        )));
    }
    if day == 0 || day > days_in_month(year, month) {
        return Err(TextError::Malformed(format!(
            "day {day:02} does not exist in {year:04}-{month:02}"
        )));
    }
    if hour > 23 || minute > 59 || second > 59 {
        return Err(TextError::Malformed(format!(
            "time {hour:02}:{minute:02}:{second:02} does not exist"
        )));
    }
    let ms = days_from_civil(year, month, day) * 86_400_000
        + ((hour * 60 + minute) * 60 + second) as i64 * 1000
        + milli as i64;
    let tick = layout.tick_at(ms)?;
    if layout.unix_ms_of_tick(tick) != ms {
        return Err(TextError::Malformed(format!(
            "the time is not the start of a tick of {} ms",
            layout.time_unit_ms()
        )));
    }
    let worker = field(TIME_DIGITS, wd).min(i64::MAX as u64) as i64;
    let sequence = field(TIME_DIGITS + wd, sd).min(i64::MAX as u64) as i64;
    Ok(layout.compose(tick, worker, sequence)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// 2024-01-01 00:00:00 UTC, the default epoch.
    const EPOCH: i64 = 1_704_067_200_000;

    fn twitter() -> Layout {
        Layout::new(EPOCH, 10, 12, 1).unwrap()
    }

    #[test]
    fn the_worked_example_has_fixed_widths() {
        let l = twitter();
        // 2026-11-22 08:30:15.123 UTC, worker 7, sequence 42.
        let ms = days_from_civil(2026, 11, 22) * 86_400_000 + 30_615_123;
        let id = l.compose(l.tick_at(ms).unwrap(), 7, 42).unwrap();
        assert_eq!(
            format(&l, id, "ORD").unwrap(),
            "ORD2026112208301512300070042"
        );
        assert_eq!(parse(&l, "ORD2026112208301512300070042").unwrap(), id);
        assert_eq!(parse(&l, "2026112208301512300070042").unwrap(), id);
        // The epoch itself: id 0.
        assert_eq!(format(&l, 0, "").unwrap(), "2024010100000000000000000");
    }

    #[test]
    fn calendar_arithmetic_matches_known_days() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(civil_from_days(19_723), (2024, 1, 1));
        assert_eq!(days_in_month(2024, 2), 29);
        assert_eq!(days_in_month(2100, 2), 28);
        assert_eq!(days_in_month(2000, 2), 29);
    }

    #[test]
    fn malformed_texts_are_refused_saying_why() {
        let l = twitter();
        let cases = [
            ("2026", "fewer than the 25 digits"),
            ("x20261122083015123000700a2", "byte 25 is not a digit"),
            ("2026132208301512300070042", "month 13"),
            (
                "2026022908301512300070042",
                "day 29 does not exist in 2026-02",
            ),
            ("2026112224301512300070042", "time 24:30:15"),
        ];
        for (text, why) in cases {
            match parse(&l, text) {
                Err(TextError::Malformed(m)) => assert!(m.contains(why), "{text}: {m}"),
                other => panic!("{text}: {other:?}"),
            }
        }
        // Worker 1024 does not fit 10 bits; a time before the epoch has no id.
        assert!(matches!(
            parse(&l, "2026112208301512310240042"),
            Err(TextError::Layout(LayoutError::WorkerOutOfRange { .. }))
        ));
        assert!(matches!(
            parse(&l, "2023123123595999900000000"),
            Err(TextError::Layout(LayoutError::BeforeEpoch { .. }))
        ));
        assert!(matches!(
            format(&l, -1, ""),
            Err(TextError::Layout(LayoutError::NegativeId(-1)))
        ));
        // With 10 ms ticks, a millisecond inside a tick is no id's text.
        let sonyflake = Layout::new(EPOCH, 16, 8, 10).unwrap();
        let text = format(&sonyflake, 12_345 << 24, "").unwrap();
        let mut inside = text.clone().into_bytes();
        inside[16] = b'1';
        let inside = String::from_utf8(inside).unwrap();
        assert!(
            matches!(parse(&sonyflake, &inside), Err(TextError::Malformed(m)) if m.contains("start of a tick"))
        );
        assert_eq!(parse(&sonyflake, &text).unwrap(), 12_345 << 24);
    }

    /// Under 53 id bits the text form covers exactly the ids below 2^53: the last one reads
    /// back, the next bigint has none, and a time past the layout's end is no id's text.
    #[test]
    fn a_53_bit_layout_formats_and_parses_its_ids_only() {
        let l = Layout::within(53, EPOCH, 6, 6, 1).unwrap();
        let top = (1i64 << 53) - 1;
        let text = format(&l, top, "").unwrap();
        assert_eq!(text, "209309061547355516363");
        assert_eq!(parse(&l, &text), Ok(top));
        assert!(matches!(
            format(&l, top + 1, ""),
            Err(TextError::Layout(LayoutError::IdTooWide {
                id_bits: 53,
                ..
            }))
        ));
        assert!(matches!(
            parse(&l, "209309061547355520000"),
            Err(TextError::Layout(LayoutError::TimeExhausted { .. }))
        ));
    }

    #[test]
    fn a_year_past_9999_has_no_text_form() {
        // Hour-long ticks from 2024 run past the year 9999.
        let l = Layout::new(EPOCH, 0, 0, 3_600_000).unwrap();
        let tick = l
            .tick_at(days_from_civil(10_000, 1, 1) * 86_400_000)
            .unwrap();
        assert_eq!(
            format(&l, tick as i64, ""),
            Err(TextError::YearOutOfRange(10_000))
        );
    }

    /// Layouts of 53 to 63 id bits, with up to 15 worker and 15 sequence bits where the id
    /// bits leave room for them (at least 32 time bits).
    fn layouts() -> impl Strategy<Value = Layout> {
        (53u32..=63)
            .prop_flat_map(|id_bits| (Just(id_bits), 0u32..=15.min(id_bits - 32)))
            .prop_flat_map(|(id_bits, w)| {
                (
                    Just(id_bits),
                    Just(w),
                    0u32..=15.min(id_bits - 32 - w),
                    prop_oneof![Just(1u32), Just(10), Just(1000)],
                    0i64..=2_000_000_000_000,
                )
            })
            .prop_map(|(id_bits, w, s, unit, epoch)| {
                Layout::within(id_bits, epoch, w, s, unit).unwrap()
            })
    }

    /// Valid ids of `layout` whose tick starts before the year 10000.
    fn id_in(layout: Layout, raw: u64) -> i64 {
        let last = layout
            .tick_at(days_from_civil(9999, 12, 31) * 86_400_000)
            .unwrap_or(layout.max_tick())
            .min(layout.max_tick());
        let bits = layout.worker_bits() + layout.sequence_bits();
        let low = raw & ((1u64 << bits) - 1);
        let tick = (raw >> bits) % (last + 1);
        ((tick << bits) | low) as i64
    }

    proptest! {
        #[test]
        fn parse_inverts_format(layout in layouts(), raw in any::<u64>(), prefix in "[A-Z-]{0,6}") {
            let id = id_in(layout, raw);
            let text = format(&layout, id, &prefix).unwrap();
            prop_assert_eq!(parse(&layout, &text).unwrap(), id);
            prop_assert!(text.starts_with(&prefix));
        }

        #[test]
        fn texts_sort_as_the_ids_do(layout in layouts(), a in any::<u64>(), b in any::<u64>()) {
            let (a, b) = (id_in(layout, a), id_in(layout, b));
            let (ta, tb) = (format(&layout, a, "INV").unwrap(), format(&layout, b, "INV").unwrap());
            prop_assert_eq!(ta.len(), tb.len());
            prop_assert_eq!(a.cmp(&b), ta.as_bytes().cmp(tb.as_bytes()));
        }

        #[test]
        fn parse_never_panics(text in "\\PC{0,40}") {
            let _ = parse(&twitter(), &text);
        }
    }
}
