//! What the segment cache's shared memory carries as text: [`FixedText`], inline UTF-8 of a
//! bounded length, and [`Failure`], an error travelling from the allocator to the caller that
//! waits for it. Both are plain data of fixed size.

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

/// An error carried from the allocator to the caller that waits for it: SQLSTATE (packed as
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

    /// The SQLSTATE, packed as PostgreSQL's `MAKE_SQLSTATE`.
    pub(crate) fn sqlstate(&self) -> i32 {
        self.sqlstate
    }

    /// The caller's side: the error to raise.
    pub(crate) fn to_error(self) -> Error {
        let opt = |t: &FixedText<256>| Some(t.as_str().to_owned()).filter(|s| !s.is_empty());
        Error::Allocator {
            sqlstate: self.sqlstate,
            message: self.message.as_str().to_owned(),
            detail: opt(&self.detail),
            hint: opt(&self.hint),
        }
    }
}
