//! Short ids for URLs: `sqids_encode(id)` writes a non-negative `bigint` (a Snowflake id, a
//! segment number) as a short text of an alphabet, `sqids_decode(text)` reads it back, with the
//! `sqids` crate (sqids.org, the successor of Hashids): `sqids_encode(1039592034091012096)` is
//! 11 characters of `[a-zA-Z0-9]`.
//!
//! Not encryption: the alphabet's shuffle is public, anyone can decode a sqid, and the ids stay
//! as guessable as the numbers are (README, "Short ids for URLs"). A sqid is only a shorter,
//! less number-like spelling.
//!
//! The encoding is sqids' own, with its default blocklist (so a sqid made here is the one any
//! other sqids implementation makes with the same alphabet and minimum length, and decodes
//! there, and the other way round). Unlike the sqids libraries, which read non-canonical texts
//! and lists of numbers too, `sqids_decode` accepts only the one text that `sqids_encode` makes
//! for a number: otherwise several texts would name one row.
//!
//! The codec (alphabet shuffle, blocklist) costs more to build than an encoding; each backend
//! keeps the last one it built ([`with_codec`]).

use std::cell::RefCell;

use pgrx::prelude::*;
use sqids::Sqids;
use thiserror::Error;

use crate::error::{Error, OrReport};

/// The longest `min_length`: sqids keeps it in a `u8`.
pub(crate) const MAX_MIN_LENGTH: i32 = u8::MAX as i32;

/// Why a number has no sqid, or a text is none. `error.rs` gives each its SQLSTATE.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub(crate) enum SqidsError {
    /// A negative `bigint`: sqids encode non-negative numbers (22023, as a negative Snowflake id).
    #[error("sqids_encode: id {0} is negative")]
    NegativeId(i64),
    /// An alphabet sqids refuses: fewer than 3 characters, a repeated one, a non-ASCII one; or
    /// one whose every encoding of `id` is blocked (22023).
    #[error("invalid sqids alphabet: {0}")]
    Alphabet(String),
    /// `min_length` outside `0..=255` (22023).
    #[error("sqids min_length must be between 0 and {MAX_MIN_LENGTH}, not {0}")]
    MinLength(i32),
    /// A text that is not the canonical sqid of one number under the alphabet and minimum
    /// length: empty, a character outside the alphabet, several numbers, or a spelling that
    /// `sqids_encode` would not make (22P02).
    #[error("invalid sqid: {0}")]
    NotCanonical(String),
    /// The canonical sqid of a number above the largest `bigint` (22003).
    #[error("sqid decodes to {0}, which is out of range for type bigint")]
    OutOfRange(u64),
}

thread_local! {
    /// The codec this backend built last, with the alphabet (`None`: the default) and minimum
    /// length it was built for. A backend is one thread; one entry serves the common case of
    /// one alphabet over many rows.
    static LAST_CODEC: RefCell<Option<(Option<String>, u8, Sqids)>> = const { RefCell::new(None) };
}

/// Runs `f` with the codec of `alphabet` (`None`: sqids' default, `a-z A-Z 0-9`) and
/// `min_length`, built or reused.
///
/// Errors: [`SqidsError::MinLength`] outside `0..=255`, [`SqidsError::Alphabet`] for an
/// alphabet sqids refuses.
fn with_codec<T>(
    alphabet: Option<&str>,
    min_length: i32,
    f: impl FnOnce(&Sqids) -> T,
) -> Result<T, SqidsError> {
    let min = u8::try_from(min_length).map_err(|_| SqidsError::MinLength(min_length))?;
    LAST_CODEC.with(|cell| {
        let mut last = cell.borrow_mut();
        let hit = matches!(&*last, Some((a, m, _)) if a.as_deref() == alphabet && *m == min);
        if !hit {
            let mut builder = Sqids::builder().min_length(min);
            if let Some(alphabet) = alphabet {
                builder = builder.alphabet(alphabet.chars().collect());
            }
            let codec = builder.build().map_err(|e| {
                SqidsError::Alphabet(match e {
                    sqids::Error::AlphabetLength => "it has fewer than 3 characters".into(),
                    sqids::Error::AlphabetUniqueCharacters => "a character repeats".into(),
                    sqids::Error::AlphabetMultibyteCharacters => {
                        "a character is not ASCII (multibyte)".into()
                    }
                    other => other.to_string(),
                })
            })?;
            *last = Some((alphabet.map(str::to_owned), min, codec));
        }
        let (_, _, codec) = last.as_ref().expect("set above");
        Ok(f(codec))
    })
}

/// The sqid of `id` under `alphabet` (`None`: the default) and `min_length` (0 to 255
/// characters; a shorter sqid is padded). Pure.
///
/// Errors: [`SqidsError::NegativeId`], [`SqidsError::MinLength`], [`SqidsError::Alphabet`]
/// (also when the blocklist refuses every encoding of `id`, possible only with a tiny alphabet).
pub(crate) fn encode(
    id: i64,
    alphabet: Option<&str>,
    min_length: i32,
) -> Result<String, SqidsError> {
    let n = u64::try_from(id).map_err(|_| SqidsError::NegativeId(id))?;
    with_codec(alphabet, min_length, |codec| codec.encode(&[n]))?.map_err(|_| {
        SqidsError::Alphabet(format!(
            "every encoding of {id} contains a word of sqids' blocklist; use a longer alphabet"
        ))
    })
}

/// The number whose canonical sqid under `alphabet` (`None`: the default) and `min_length` is
/// `text`: the inverse of [`encode`], and nothing else. Pure.
///
/// Errors: [`SqidsError::NotCanonical`] when `text` is not exactly what [`encode`] makes for a
/// number (decoding and re-encoding must give `text` back), [`SqidsError::OutOfRange`] for the
/// sqid of a number above `i64::MAX`, and the codec's errors as [`encode`].
pub(crate) fn decode(
    text: &str,
    alphabet: Option<&str>,
    min_length: i32,
) -> Result<i64, SqidsError> {
    let (numbers, again) = with_codec(alphabet, min_length, |codec| {
        let numbers = codec.decode(text);
        let again = match numbers.as_slice() {
            [n] => codec.encode(&[*n]).ok(),
            _ => None,
        };
        (numbers, again)
    })?;
    let n = match numbers.as_slice() {
        [] => {
            return Err(SqidsError::NotCanonical(
                "it is empty or has a character outside the alphabet".into(),
            ))
        }
        [n] => *n,
        more => {
            return Err(SqidsError::NotCanonical(format!(
                "it encodes {} numbers, not one",
                more.len()
            )))
        }
    };
    if again.as_deref() != Some(text) {
        return Err(SqidsError::NotCanonical(
            "it is not the canonical sqid of the number it decodes to".into(),
        ));
    }
    i64::try_from(n).map_err(|_| SqidsError::OutOfRange(n))
}

/// `id` as a sqid: a short text of `alphabet` (NULL: sqids' default, `a-z A-Z 0-9`) at least
/// `min_length` characters long (0 to 255; NULL: 0), as sqids.org's libraries encode the list
/// `[id]`. `sqids_decode` reads it back. NOT encryption: anyone can decode it.
///
/// Immutable and parallel safe. Not STRICT, so that a NULL alphabet can mean the default: a NULL
/// `id` gives NULL as a strict function would. Errors: 22023 for a negative id, an alphabet
/// sqids refuses (under 3 characters, a repeated or non-ASCII one) and `min_length` outside
/// 0..=255.
#[pg_extern(immutable, parallel_safe)]
fn sqids_encode(
    id: Option<i64>,
    alphabet: default!(Option<&str>, "NULL"),
    min_length: default!(Option<i32>, 0),
) -> Option<String> {
    let id = id?;
    Some(
        encode(id, alphabet, min_length.unwrap_or(0))
            .map_err(Error::from)
            .or_report(),
    )
}

/// The `bigint` whose sqid is `text` under `alphabet` (NULL: the default) and `min_length`
/// (NULL: 0), as `sqids_encode` made it: the inverse of `sqids_encode`.
///
/// Immutable and parallel safe; not STRICT (see `sqids_encode`): a NULL `text` gives NULL.
/// Errors: 22P02 for a text that is not the canonical sqid of one number (empty, a character
/// outside the alphabet, several numbers, padding or spelling `sqids_encode` would not make:
/// decoding and re-encoding must give the text back), 22003 for the sqid of a number past
/// `bigint`, 22023 for a bad alphabet or `min_length` as `sqids_encode`.
#[pg_extern(immutable, parallel_safe)]
fn sqids_decode(
    text: Option<&str>,
    alphabet: default!(Option<&str>, "NULL"),
    min_length: default!(Option<i32>, 0),
) -> Option<i64> {
    let text = text?;
    Some(
        decode(text, alphabet, min_length.unwrap_or(0))
            .map_err(Error::from)
            .or_report(),
    )
}

/// Each failure's SQLSTATE, message, detail and hint in one arm.
impl From<SqidsError> for Error {
    fn from(e: SqidsError) -> Self {
        use PgSqlErrorCode::*;
        let (sqlstate, detail, hint): (_, Option<&str>, Option<&str>) = match &e {
            SqidsError::NegativeId(_) => (
                ERRCODE_INVALID_PARAMETER_VALUE,
                None,
                Some("Sqids encode non-negative numbers."),
            ),
            SqidsError::Alphabet(_) => (
                ERRCODE_INVALID_PARAMETER_VALUE,
                None,
                Some("An alphabet has at least 3 distinct ASCII characters; NULL means sqids' default (a-z, A-Z, 0-9)."),
            ),
            SqidsError::MinLength(_) => (ERRCODE_INVALID_PARAMETER_VALUE, None, None),
            SqidsError::NotCanonical(_) => (
                ERRCODE_INVALID_TEXT_REPRESENTATION,
                None,
                Some("Decode with the alphabet and min_length it was encoded with."),
            ),
            SqidsError::OutOfRange(_) => (ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE, None, None),
        };
        Error::Relayed {
            sqlstate: sqlstate as i32,
            message: e.to_string(),
            detail: detail.map(str::to_owned),
            hint: hint.map(str::to_owned),
        }
    }
}

/// Plain tests of the pure functions (the `#[pg_test]`s are in [`tests`]).
#[cfg(test)]
mod unit {
    use super::*;
    use proptest::prelude::*;

    const DEFAULT: Option<&str> = None;

    #[test]
    fn known_encodings_of_the_sqids_spec() {
        // sqids-spec's encoding tests (default alphabet, default blocklist).
        assert_eq!(encode(0, DEFAULT, 0).unwrap(), "bM");
        assert_eq!(encode(1, DEFAULT, 0).unwrap(), "Uk");
        assert_eq!(decode("bM", DEFAULT, 0), Ok(0));
        assert_eq!(encode(0, DEFAULT, 10).unwrap().len(), 10);
        let max = encode(i64::MAX, DEFAULT, 0).unwrap();
        assert_eq!(decode(&max, DEFAULT, 0), Ok(i64::MAX));
        assert!(max.len() <= 12, "{max}");
    }

    #[test]
    fn negative_ids_are_refused() {
        assert_eq!(encode(-1, DEFAULT, 0), Err(SqidsError::NegativeId(-1)));
        assert_eq!(
            encode(i64::MIN, DEFAULT, 0),
            Err(SqidsError::NegativeId(i64::MIN))
        );
    }

    #[test]
    fn bad_alphabets_are_refused() {
        for alphabet in ["", "ab", "abca", "abcé", "ab☃"] {
            assert!(
                matches!(encode(1, Some(alphabet), 0), Err(SqidsError::Alphabet(_))),
                "{alphabet:?}"
            );
            assert!(
                matches!(
                    decode("ab", Some(alphabet), 0),
                    Err(SqidsError::Alphabet(_))
                ),
                "{alphabet:?}"
            );
        }
        assert!(encode(1, Some("abc"), 0).is_ok());
    }

    #[test]
    fn min_length_outside_0_to_255_is_refused() {
        for bad in [-1, 256, i32::MIN, i32::MAX] {
            assert_eq!(encode(1, DEFAULT, bad), Err(SqidsError::MinLength(bad)));
            assert_eq!(decode("Uk", DEFAULT, bad), Err(SqidsError::MinLength(bad)));
        }
        assert_eq!(encode(1, DEFAULT, 255).unwrap().len(), 255);
    }

    #[test]
    fn texts_that_are_not_canonical_sqids_are_refused() {
        let not = |text: &str, min_length: i32| {
            matches!(
                decode(text, DEFAULT, min_length),
                Err(SqidsError::NotCanonical(_))
            )
        };
        assert!(not("", 0));
        assert!(not("bM!", 0)); // a character outside the alphabet
        assert!(not("bM ", 0));
        // Two numbers, as sqids.org libraries encode [1, 2].
        let pair = with_codec(DEFAULT, 0, |c| c.encode(&[1, 2]).unwrap()).unwrap();
        assert_eq!(with_codec(DEFAULT, 0, |c| c.decode(&pair)).unwrap(), [1, 2]);
        assert!(not(&pair, 0));
        // Padded for min_length 10: canonical only with that min_length.
        let padded = encode(7, DEFAULT, 10).unwrap();
        assert_eq!(decode(&padded, DEFAULT, 10), Ok(7));
        assert!(not(&padded, 0));
        assert!(not(&encode(7, DEFAULT, 0).unwrap(), 10));
        // Of all two-character texts, only canonical ones decode, each to its own number.
        let mut found = 0;
        for a in DEFAULT_ALPHABET_CHARS.chars() {
            for b in DEFAULT_ALPHABET_CHARS.chars() {
                let text = format!("{a}{b}");
                if let Ok(n) = decode(&text, DEFAULT, 0) {
                    assert_eq!(encode(n, DEFAULT, 0).unwrap(), text);
                    found += 1;
                }
            }
        }
        assert!(found > 0 && found < 62 * 62, "{found}");
        // Digits past u64 decode to nothing (sqids drops an overflowing number).
        assert!(not(&"Z".repeat(40), 0));
    }

    #[test]
    fn a_canonical_sqid_past_bigint_is_out_of_range() {
        let text = with_codec(DEFAULT, 0, |c| c.encode(&[u64::MAX]).unwrap()).unwrap();
        assert_eq!(
            decode(&text, DEFAULT, 0),
            Err(SqidsError::OutOfRange(u64::MAX))
        );
        let just_past = with_codec(DEFAULT, 0, |c| c.encode(&[1 << 63]).unwrap()).unwrap();
        assert_eq!(
            decode(&just_past, DEFAULT, 0),
            Err(SqidsError::OutOfRange(1 << 63))
        );
    }

    #[test]
    fn the_codec_is_reused_only_for_the_same_alphabet_and_min_length() {
        let a = encode(123_456_789, DEFAULT, 0).unwrap();
        let b = encode(123_456_789, Some("abcdefghijklmnopqrstuvwxyz"), 0).unwrap();
        let c = encode(123_456_789, Some("abcdefghijklmnopqrstuvwxyz"), 12).unwrap();
        assert!(b.chars().all(|ch| ch.is_ascii_lowercase()), "{b}");
        assert_eq!(c.len(), 12);
        assert_ne!(a, b);
        assert_eq!(encode(123_456_789, DEFAULT, 0).unwrap(), a);
        assert_eq!(
            decode(&c, Some("abcdefghijklmnopqrstuvwxyz"), 12),
            Ok(123_456_789)
        );
    }

    /// The characters of sqids' default alphabet.
    const DEFAULT_ALPHABET_CHARS: &str = sqids::DEFAULT_ALPHABET;

    fn alphabets() -> impl Strategy<Value = Option<String>> {
        prop_oneof![
            Just(None),
            Just(Some("0123456789abcdefghijklmnopqrstuvwxyz".to_owned())),
            Just(Some("abcdefghijklmnopqrstuvwxyz".to_owned())),
            Just(Some("0123456789".to_owned())),
            Just(Some("xyz".to_owned())),
            // URL-safe base64 characters, shuffled.
            Just(Some(
                "Q5-vJ3kT_aZr8m0nYcL1bWxE7uDfS9oHgR2iAzKpV6ytC4hNjIeOwsXqBFMlUdPG".to_owned()
            )),
        ]
    }

    proptest! {
        #[test]
        fn every_non_negative_bigint_round_trips(
            id in 0i64..=i64::MAX,
            alphabet in alphabets(),
            min_length in prop_oneof![Just(0i32), Just(1), Just(8), Just(22), 0i32..=255],
        ) {
            let alphabet = alphabet.as_deref();
            let text = encode(id, alphabet, min_length).unwrap();
            prop_assert!(text.len() >= min_length as usize);
            prop_assert!(text.chars().all(|c| alphabet.unwrap_or(sqids::DEFAULT_ALPHABET).contains(c)));
            prop_assert_eq!(decode(&text, alphabet, min_length), Ok(id));
        }

        #[test]
        fn small_ids_round_trip(id in 0i64..100_000, alphabet in alphabets()) {
            let alphabet = alphabet.as_deref();
            let text = encode(id, alphabet, 0).unwrap();
            prop_assert_eq!(decode(&text, alphabet, 0), Ok(id));
        }

        #[test]
        fn decode_accepts_only_what_encode_makes(text in "[a-zA-Z0-9]{0,14}|\\PC{0,14}") {
            match decode(&text, None, 0) {
                Ok(id) => prop_assert_eq!(encode(id, None, 0).unwrap(), text),
                Err(e) => prop_assert!(matches!(e, SqidsError::NotCanonical(_) | SqidsError::OutOfRange(_)), "{e:?}"),
            }
        }
    }
}

#[cfg(any(test, feature = "pg_test"))]
#[pg_schema]
mod tests {
    use crate::testing::{assert_sqlstate, one_i64};
    use pgrx::prelude::*;

    fn one_text(query: &str) -> Option<String> {
        Spi::get_one::<String>(query).unwrap()
    }

    #[pg_test]
    fn sqids_round_trip_through_sql() {
        assert_eq!(one_text("SELECT sqids_encode(0)").as_deref(), Some("bM"));
        assert_eq!(one_i64("SELECT sqids_decode('bM')"), 0);
        let same: bool = Spi::get_one(
            "SELECT bool_and(sqids_decode(sqids_encode(id)) = id \
                AND sqids_decode(sqids_encode(id, 'abcdefghijklmnopqrstuvwxyz', 8), 'abcdefghijklmnopqrstuvwxyz', 8) = id \
                AND length(sqids_encode(id, min_length => 8)) >= 8) \
             FROM (SELECT snowflake_nextval() AS id FROM generate_series(1, 100) \
                   UNION ALL VALUES (0), (9223372036854775807)) ids",
        )
        .unwrap()
        .unwrap();
        assert!(same);
        // Named arguments, and NULL options meaning the defaults.
        assert_eq!(
            one_text("SELECT sqids_encode(1, alphabet => NULL, min_length => NULL)"),
            one_text("SELECT sqids_encode(1)")
        );
        assert_eq!(
            one_i64("SELECT sqids_decode(sqids_encode(42, 'xyz'), alphabet => 'xyz')"),
            42
        );
        // NULL in, NULL out.
        assert_eq!(one_text("SELECT sqids_encode(NULL)"), None);
        assert_eq!(
            Spi::get_one::<i64>("SELECT sqids_decode(NULL)").unwrap(),
            None
        );
    }

    #[pg_test]
    fn sqids_refusals_have_their_sqlstates() {
        assert_sqlstate("SELECT sqids_encode(-1)", "22023");
        assert_sqlstate("SELECT sqids_encode(1, 'ab')", "22023");
        assert_sqlstate("SELECT sqids_encode(1, '')", "22023");
        assert_sqlstate("SELECT sqids_encode(1, 'abca')", "22023");
        assert_sqlstate("SELECT sqids_encode(1, 'abcé')", "22023");
        assert_sqlstate("SELECT sqids_encode(1, min_length => -1)", "22023");
        assert_sqlstate("SELECT sqids_encode(1, min_length => 256)", "22023");
        assert_sqlstate("SELECT sqids_decode('')", "22P02");
        assert_sqlstate("SELECT sqids_decode('bM!')", "22P02");
        assert_sqlstate(
            "SELECT sqids_decode(sqids_encode(7, min_length => 10))",
            "22P02",
        );
        assert_sqlstate("SELECT sqids_decode('bM', 'ab')", "22023");
        assert_sqlstate("SELECT sqids_decode('bM', min_length => 300)", "22023");
        // The canonical sqid of 2^64 - 1 (sqids.org's libraries encode it): past bigint.
        let text = super::with_codec(None, 0, |c| c.encode(&[u64::MAX]).unwrap()).unwrap();
        assert_sqlstate(&format!("SELECT sqids_decode('{text}')"), "22003");
    }

    #[pg_test]
    fn sqids_functions_are_immutable_and_parallel_safe() {
        let n = Spi::get_one::<i64>(
            "SELECT count(*) FROM pg_proc WHERE proname IN ('sqids_encode', 'sqids_decode') \
             AND provolatile = 'i' AND proparallel = 's' AND NOT proisstrict",
        )
        .unwrap();
        assert_eq!(n, Some(2));
        let args = Spi::get_two::<String, String>(
            "SELECT pg_get_function_arguments('sqids_encode'::regproc), \
                    pg_get_function_arguments('sqids_decode'::regproc)",
        )
        .unwrap();
        assert_eq!(
            args,
            (
                Some(
                    "id bigint, alphabet text DEFAULT NULL::text, min_length integer DEFAULT 0"
                        .into()
                ),
                Some(
                    "text text, alphabet text DEFAULT NULL::text, min_length integer DEFAULT 0"
                        .into()
                )
            )
        );
        let comments = Spi::get_one::<i64>(
            "SELECT count(obj_description(oid, 'pg_proc')) FROM pg_proc \
             WHERE proname IN ('sqids_encode', 'sqids_decode')",
        )
        .unwrap();
        assert_eq!(comments, Some(2));
    }
}
