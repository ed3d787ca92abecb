//! The check hooks of idgen's text settings and the parsing behind them: `idgen.epoch` (a fixed
//! `timestamptz` literal, not in the future), the interleave fences (empty or a bigint),
//! `idgen.worker_id` (`auto` or an integer), `idgen.registry` (a connection string libpq
//! parses) and `idgen.node_name`.
//!
//! A check hook must never raise an ERROR: PostgreSQL also runs it in the postmaster at every
//! reload of postgresql.conf, where an ERROR stops the server. The fences parse in
//! plain Rust; the epoch goes through PostgreSQL's `timestamptz_in` under a catch-all. A refusal
//! sets `GUC_check_errdetail` and returns false: a reload logs "invalid value for parameter" and
//! keeps the old value, `ALTER SYSTEM` fails with 22023.

use std::ffi::{c_char, c_void, CStr, CString};

use pgrx::datetime::TimestampWithTimeZone;
use pgrx::pg_sys;
use pgrx::pg_sys::panic::CaughtError;
use pgrx::prelude::*;

use super::WorkerIdSetting;

/// A string setting's check hook, as PostgreSQL calls it (`GucStringCheckHook`): its
/// implementations here are `#[pg_guard]`ed and refuse rather than raise an ERROR.
pub(super) type Hook = unsafe extern "C-unwind" fn(
    *mut *mut c_char,
    *mut *mut c_void,
    pg_sys::GucSource::Type,
) -> bool;

/// An integer setting's text as PostgreSQL's own GUC parser reads it (`0x10`, ` 7 `, `15min`
/// with unit `flags`, and so on).
pub(super) fn parse_int(text: &str, flags: i32) -> Option<i32> {
    let text = CString::new(text).ok()?;
    let mut value = 0;
    // SAFETY: a NUL-terminated string that outlives the call and a valid out pointer; no hint
    // is requested (NULL), so parse_int allocates nothing and raises no error.
    unsafe { pg_sys::parse_int(text.as_ptr(), &mut value, flags, std::ptr::null_mut()) }
        .then_some(value)
}

/// A boolean setting's text as PostgreSQL's own GUC parser reads it (`on`, `true`, `1`, `yes`
/// and their opposites, any case, a unique prefix).
pub(super) fn parse_bool(text: &str) -> Option<bool> {
    let text = CString::new(text).ok()?;
    let mut value = false;
    // SAFETY: a NUL-terminated string that outlives the call and a valid out pointer;
    // parse_bool allocates nothing and raises no error.
    unsafe { pg_sys::parse_bool(text.as_ptr(), &mut value) }.then_some(value)
}

/// A fence setting's text: empty (or blanks) for none, else a bigint. `Err` is the detail.
pub(super) fn fence_value(text: &str) -> Result<Option<i64>, String> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(None);
    }
    text.parse::<i64>()
        .map(Some)
        .map_err(|_| format!("\"{text}\" is not a bigint (or empty for none)."))
}

/// [`fence_value`] as a yes or no with the detail.
pub(super) fn fence_text(text: &str) -> Result<(), String> {
    fence_value(text).map(|_| ())
}

/// The text of a candidate value, `None` for NULL.
///
/// # Safety
/// `newval` is the pointer PostgreSQL passes to a string setting's check hook.
unsafe fn candidate(newval: *mut *mut c_char) -> Option<String> {
    // SAFETY: the caller's contract: a valid pointer to a C string or NULL, owned by the GUC
    // machinery for the duration of the hook.
    let raw = unsafe { *newval };
    // SAFETY: a non-null candidate is a NUL-terminated C string owned by the GUC machinery.
    (!raw.is_null()).then(|| {
        unsafe { CStr::from_ptr(raw) }
            .to_string_lossy()
            .into_owned()
    })
}

/// A check hook whose check is plain Rust (`parse`): nothing in it can raise an error. NULL
/// (a reset to the boot value) is accepted.
///
/// # Safety
/// `newval` is the pointer PostgreSQL passes to a string setting's check hook.
unsafe fn plain(newval: *mut *mut c_char, parse: fn(&str) -> Result<(), String>) -> bool {
    // SAFETY: the caller's contract.
    match unsafe { candidate(newval) } {
        None => true,
        Some(text) => parse(&text).map_or_else(|detail| fail_check(&detail), |()| true),
    }
}

/// GUC check hook of the fence settings ([`fence_text`]).
///
/// # Safety
/// Called by PostgreSQL as a string setting's check hook.
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn fence(
    newval: *mut *mut c_char,
    _extra: *mut *mut c_void,
    _source: pg_sys::GucSource::Type,
) -> bool {
    // SAFETY: PostgreSQL calls this as a check hook, with its candidate value.
    unsafe { plain(newval, fence_text) }
}

/// GUC check hook of `idgen.worker_id` ([`worker_id_text`]).
///
/// # Safety
/// Called by PostgreSQL as a string setting's check hook.
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn worker_id(
    newval: *mut *mut c_char,
    _extra: *mut *mut c_void,
    _source: pg_sys::GucSource::Type,
) -> bool {
    // SAFETY: PostgreSQL calls this as a check hook, with its candidate value.
    unsafe { plain(newval, worker_id_text) }
}

/// GUC check hook of `idgen.registry` ([`conninfo_text`]).
///
/// # Safety
/// Called by PostgreSQL as a string setting's check hook.
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn conninfo(
    newval: *mut *mut c_char,
    _extra: *mut *mut c_void,
    _source: pg_sys::GucSource::Type,
) -> bool {
    // SAFETY: PostgreSQL calls this as a check hook, with its candidate value.
    match unsafe { candidate(newval) } {
        None => true,
        Some(text) => conninfo_text(&text).map_or_else(
            |detail| {
                // PostgreSQL's own message would repeat the value, and a password with it.
                set_check_message(
                    "invalid value for parameter \"idgen.registry\" (not shown: it may hold a password)",
                );
                fail_check(&detail)
            },
            |()| true,
        ),
    }
}

/// GUC check hook of `idgen.node_name` ([`node_name_text`]).
///
/// # Safety
/// Called by PostgreSQL as a string setting's check hook.
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn node_name(
    newval: *mut *mut c_char,
    _extra: *mut *mut c_void,
    _source: pg_sys::GucSource::Type,
) -> bool {
    // SAFETY: PostgreSQL calls this as a check hook, with its candidate value.
    unsafe { plain(newval, node_name_text) }
}

/// `idgen.worker_id`'s text: `auto` (any case), or an integer from -1 as PostgreSQL's GUC
/// parser reads it (`7`, `0x7`). `Err` is the detail.
pub(super) fn worker_id_value(text: &str) -> Result<WorkerIdSetting, String> {
    if text.trim().eq_ignore_ascii_case("auto") {
        return Ok(WorkerIdSetting::Auto);
    }
    match parse_int(text, 0) {
        Some(-1) => Ok(WorkerIdSetting::Unset),
        Some(n) if n >= 0 => Ok(WorkerIdSetting::Fixed(n as u64)),
        _ => Err(format!(
            "\"{text}\" is neither auto nor an integer from -1 (unset) to {}.",
            i32::MAX
        )),
    }
}

/// [`worker_id_value`] as a yes or no with the detail.
pub(super) fn worker_id_text(text: &str) -> Result<(), String> {
    worker_id_value(text).map(|_| ())
}

/// `idgen.registry`'s text: empty, or a connection string libpq's `PQconninfoParse` accepts
/// (key=value or URI). Only parsed, never connected to. `Err` is libpq's message.
pub(super) fn conninfo_text(text: &str) -> Result<(), String> {
    if text.trim().is_empty() {
        return Ok(());
    }
    crate::libpq::parse(text)
}

/// The longest node name, in bytes: a PostgreSQL identifier (NAMEDATALEN - 1).
pub(crate) const MAX_NODE_NAME: usize = 63;

/// `idgen.node_name`'s text: empty (the default name), or 1 to [`MAX_NODE_NAME`] bytes of ASCII
/// letters, digits and `.` `_` `-` `:`. `Err` is the detail.
pub(super) fn node_name_text(text: &str) -> Result<(), String> {
    if text.is_empty() {
        return Ok(());
    }
    if text.len() > MAX_NODE_NAME {
        return Err(format!(
            "A node name has at most {MAX_NODE_NAME} bytes; this one has {}.",
            text.len()
        ));
    }
    match text
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | ':')))
    {
        Some(c) => Err(format!(
            "{c:?} is not allowed in a node name: use ASCII letters, digits and . _ - :"
        )),
        None => Ok(()),
    }
}

/// GUC check hook for `idgen.epoch`: the text must parse, must name a fixed instant and must not
/// be in the future (a future epoch would make every current tick negative). Runs at server
/// start, for `ALTER SYSTEM`, and in every process (the postmaster included) at each reload of
/// postgresql.conf, so a bad value is refused before it can take effect.
///
/// Whatever goes wrong while checking is caught and becomes a refusal.
///
/// # Safety
/// Called by PostgreSQL as a string setting's check hook.
#[pg_guard]
pub(super) unsafe extern "C-unwind" fn epoch(
    newval: *mut *mut c_char,
    _extra: *mut *mut c_void,
    _source: pg_sys::GucSource::Type,
) -> bool {
    // SAFETY: PostgreSQL calls this as a check hook, with its candidate value.
    let text = unsafe { candidate(newval) };
    PgTryBuilder::new(|| match &text {
        None => fail_check("idgen.epoch must be set to a timestamptz literal"),
        Some(text) => epoch_text(text).map_or_else(|detail| fail_check(&detail), |()| true),
    })
    .catch_others(|e| {
        fail_check(&format!(
            "idgen.epoch could not be checked: {}",
            caught_message(e)
        ))
    })
    .execute()
}

/// The epoch's text checked as the hook checks it: a fixed instant, not in the future.
pub(super) fn epoch_text(text: &str) -> Result<(), String> {
    match epoch_value(text) {
        Ok(ms) if ms > crate::time::wall_clock_unix_ms() => {
            Err(format!("The epoch \"{text}\" is in the future."))
        }
        Ok(_) => Ok(()),
        Err(detail) => Err(detail),
    }
}

/// Parses a `timestamptz` literal with PostgreSQL's own input function and returns Unix ms.
/// `Err` carries the detail for the "invalid value for parameter" message.
///
/// Never raises an ERROR. Refuses the words that make a literal relative to the moment it is
/// read (`now`, `today`, ...): the postmaster, where the layout is built, and a backend running
/// `ALTER SYSTEM` would read different instants.
pub(super) fn epoch_value(text: &str) -> Result<i64, String> {
    if let Some(word) = relative_word(text) {
        return Err(format!(
            "\"{word}\" names no fixed instant: the epoch would depend on when it is read. Give a date and time with an explicit UTC offset."
        ));
    }
    let ts = timestamptz_in(text).map_err(|e| format!("\"{text}\" is not a timestamptz: {e}"))?;
    if !ts.is_finite() {
        return Err("the epoch must be a finite time".into());
    }
    Ok(crate::time::timestamptz_to_unix_ms(ts))
}

/// The first word of `text` that makes a `timestamptz` literal relative to the moment it is
/// read (PostgreSQL's special inputs `now`, `today`, `tomorrow` and `yesterday`, any case), if
/// any. Pure.
fn relative_word(text: &str) -> Option<&str> {
    const RELATIVE: [&str; 4] = ["now", "today", "tomorrow", "yesterday"];
    text.split(|c: char| !c.is_ascii_alphabetic())
        .find(|word| RELATIVE.iter().any(|r| word.eq_ignore_ascii_case(r)))
}

/// PostgreSQL's `timestamptz_in` on `text`, with every ERROR it raises (22007 bad syntax, 22008
/// out of range, 22009 an offset beyond 15:59, 22023 an unknown zone, ...) caught and returned as
/// its message. pgrx's `TimestampWithTimeZone::from_str` catches only three of these SQLSTATEs
/// and lets 22009 through. Nothing is held across the call (it only pallocs in the current
/// context), so no cleanup beyond PostgreSQL's error state, which the catch flushes, is due.
fn timestamptz_in(text: &str) -> Result<TimestampWithTimeZone, String> {
    let text = CString::new(text).map_err(|_| "it contains a NUL byte".to_string())?;
    PgTryBuilder::new(|| {
        // SAFETY: timestamptz_in takes a NUL-terminated string that outlives the call, a type
        // oid it ignores, and typmod -1 (no rounding); it returns a non-NULL timestamptz.
        unsafe {
            pgrx::direct_function_call::<TimestampWithTimeZone>(
                pg_sys::timestamptz_in,
                &[
                    Some(pg_sys::Datum::from(text.as_ptr())),
                    pg_sys::InvalidOid.into_datum(),
                    (-1i32).into_datum(),
                ],
            )
        }
        .ok_or_else(|| "the input function returned NULL".to_string())
    })
    .catch_others(|e| Err(caught_message(e)))
    .execute()
}

/// The message of a caught PostgreSQL ERROR or Rust panic.
fn caught_message(e: CaughtError) -> String {
    crate::error::caught_report(&e).message().to_owned()
}

/// Sets the message of a GUC check failure (PostgreSQL's GUC_check_errmsg), instead of its own
/// "invalid value for parameter ...: <value>".
fn set_check_message(message: &str) {
    let message = CString::new(message.replace('\0', "")).expect("NUL bytes were removed");
    // SAFETY: only called from a check hook, where PostgreSQL reads (and frees) the palloc'd
    // message after the hook returns false; pstrdup copies into the current memory context.
    unsafe { pg_sys::GUC_check_errmsg_string = pg_sys::pstrdup(message.as_ptr()) };
}

/// Sets the detail of a GUC check failure and returns `false` (PostgreSQL's GUC_check_errdetail).
fn fail_check(detail: &str) -> bool {
    let detail = CString::new(detail.replace('\0', "")).expect("NUL bytes were removed");
    // SAFETY: only called from a check hook, where PostgreSQL reads (and frees) the palloc'd
    // detail after the hook returns false; pstrdup copies into the current memory context.
    unsafe {
        pg_sys::GUC_check_errcode(PgSqlErrorCode::ERRCODE_INVALID_PARAMETER_VALUE as i32);
        pg_sys::GUC_check_errdetail_string = pg_sys::pstrdup(detail.as_ptr());
    }
    false
}

#[cfg(test)]
mod tests {
    use super::{fence_value, node_name_text, relative_word};

    #[test]
    fn relative_words_are_found_in_any_case_and_only_as_whole_words() {
        assert_eq!(relative_word("now"), Some("now"));
        assert_eq!(relative_word(" NOW "), Some("NOW"));
        assert_eq!(relative_word("Today"), Some("Today"));
        assert_eq!(relative_word("yesterday 12:00+00"), Some("yesterday"));
        assert_eq!(relative_word("2024-01-01 tomorrow"), Some("tomorrow"));
        // Fixed instants, including PostgreSQL's own 'epoch' and zone names that contain a
        // relative word inside a longer one.
        assert_eq!(relative_word("2024-01-01 00:00:00+00"), None);
        assert_eq!(relative_word("epoch"), None);
        assert_eq!(relative_word("2024-01-01 00:00:00 America/Noronha"), None);
        assert_eq!(relative_word("Jan 1 2024 nowhere"), None);
        assert_eq!(relative_word(""), None);
    }

    #[test]
    fn fences_are_empty_or_a_bigint() {
        assert_eq!(fence_value(""), Ok(None));
        assert_eq!(fence_value("  "), Ok(None));
        assert_eq!(fence_value(" 42 "), Ok(Some(42)));
        assert_eq!(fence_value("-9223372036854775808"), Ok(Some(i64::MIN)));
        assert!(fence_value("9223372036854775808").is_err());
        assert!(fence_value("1e6").is_err());
    }

    #[test]
    fn node_names_are_short_plain_ascii() {
        assert!(node_name_text("").is_ok());
        assert!(node_name_text("db-7.eu_west:5432").is_ok());
        assert!(node_name_text(&"n".repeat(63)).is_ok());
        assert!(node_name_text(&"n".repeat(64)).is_err());
        assert!(node_name_text("two words").is_err());
        assert!(node_name_text("naïve").is_err());
        assert!(node_name_text("a'b").is_err());
    }
}
