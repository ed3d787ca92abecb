//! What shared memory carries as text: [`FixedText`], inline UTF-8 of a bounded length, and
//! [`Failure`], an error travelling from a background worker (the segment allocator, the
//! registry client) to the backends that raise it. Both are plain data of fixed size.

use pgrx::pg_sys::panic::CaughtError;

use crate::error::Error;

/// UTF-8 text of at most `N` bytes, stored inline in shared memory.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct FixedText<const N: usize> {
    len: u16,
    bytes: [u8; N],
}

impl<const N: usize> Default for FixedText<N> {
    fn default() -> Self {
        Self {
            len: 0,
            bytes: [0; N],
        }
    }
}

impl<const N: usize> FixedText<N> {
    /// `text`, cut at a character boundary to fit.
    pub(crate) fn new(text: &str) -> Self {
        let mut end = text.len().min(N);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let mut t = Self {
            len: end as u16,
            ..Self::default()
        };
        t.bytes[..end].copy_from_slice(&text.as_bytes()[..end]);
        t
    }

    /// The text.
    pub(crate) fn as_str(&self) -> &str {
        std::str::from_utf8(&self.bytes[..self.len as usize]).unwrap_or("")
    }
}

/// An error carried from a background worker to the callers that raise it: SQLSTATE (packed as
/// PostgreSQL's `MAKE_SQLSTATE`), message, detail and hint.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct Failure {
    sqlstate: i32,
    message: FixedText<256>,
    detail: FixedText<256>,
    hint: FixedText<256>,
}

impl Failure {
    /// An idgen error, as raised by [`Error::report`].
    pub(crate) fn from_error(e: &Error) -> Self {
        Self {
            sqlstate: e.sqlstate() as i32,
            message: FixedText::new(&e.to_string()),
            detail: FixedText::new(&e.detail().unwrap_or_default()),
            hint: FixedText::new(&e.hint().unwrap_or_default()),
        }
    }

    /// A PostgreSQL error caught in the allocator (a failed SPI statement, say).
    pub(crate) fn from_caught(e: &CaughtError) -> Self {
        let report = crate::error::caught_report(e);
        Self {
            sqlstate: report.sql_error_code() as i32,
            message: FixedText::new(report.message()),
            detail: FixedText::new(report.detail().unwrap_or_default()),
            hint: FixedText::new(report.hint().unwrap_or_default()),
        }
    }

    /// An error with a SQLSTATE given as its five characters (as libpq reports a remote one).
    pub(crate) fn new(
        sqlstate: &str,
        message: &str,
        detail: Option<&str>,
        hint: Option<&str>,
    ) -> Self {
        Self {
            sqlstate: pack_sqlstate(sqlstate),
            message: FixedText::new(message),
            detail: FixedText::new(detail.unwrap_or_default()),
            hint: FixedText::new(hint.unwrap_or_default()),
        }
    }

    /// The message.
    pub(crate) fn message(&self) -> &str {
        self.message.as_str()
    }

    /// The SQLSTATE as its five characters.
    pub(crate) fn sqlstate_text(&self) -> String {
        (0..5)
            .map(|i| char::from(b'0' + ((self.sqlstate >> (6 * i)) & 0x3F) as u8))
            .collect()
    }

    /// The SQLSTATE, packed as PostgreSQL's `MAKE_SQLSTATE`.
    pub(crate) fn sqlstate(&self) -> i32 {
        self.sqlstate
    }

    /// The caller's side: the error to raise.
    pub(crate) fn to_error(self) -> Error {
        let opt = |t: &FixedText<256>| Some(t.as_str().to_owned()).filter(|s| !s.is_empty());
        Error::Relayed {
            sqlstate: self.sqlstate,
            message: self.message.as_str().to_owned(),
            detail: opt(&self.detail),
            hint: opt(&self.hint),
        }
    }
}

/// PostgreSQL's `MAKE_SQLSTATE` of a five-character SQLSTATE (XX000, internal error, for
/// anything else).
fn pack_sqlstate(code: &str) -> i32 {
    let bytes = code.as_bytes();
    if bytes.len() != 5
        || !bytes
            .iter()
            .all(|b| b.is_ascii_digit() || b.is_ascii_uppercase())
    {
        return pack_sqlstate("XX000");
    }
    bytes
        .iter()
        .enumerate()
        .map(|(i, b)| (((b - b'0') & 0x3F) as i32) << (6 * i))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::{pack_sqlstate, Failure};

    #[test]
    fn sqlstates_pack_as_postgresql_does_and_back() {
        // ERRCODE_OBJECT_IN_USE, MAKE_SQLSTATE('5','5','0','0','6') in PostgreSQL's errcodes.h.
        assert_eq!(pack_sqlstate("55006"), 5 | 5 << 6 | 6 << 24);
        for code in ["55006", "08001", "42883", "53400", "XX000", "2200H"] {
            assert_eq!(Failure::new(code, "m", None, None).sqlstate_text(), code);
        }
        assert_eq!(
            Failure::new("bad", "m", None, None).sqlstate_text(),
            "XX000"
        );
    }
}
