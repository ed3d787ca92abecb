//! Where a call of `segment_nextval` keeps its segment: the call site's memory (`fn_extra`),
//! and [`NameDatum`], the `text` argument as PostgreSQL passed it, so that a call with the same
//! name as the last one skips pgrx's detoasting, the name checks and the hash lookup (on a bulk
//! statement that was a third of the time above a no-op function). The FFI of that shortcut is
//! all here.

use pgrx::pg_sys;
use pgrx::prelude::*;

use super::args::{name_arg, non_null_name};
use super::cache::CallDeadline;
use super::session::{self, Entry};
use crate::error::OrReport;

/// What one call site of `segment_nextval` (one `FmgrInfo`, e.g. one expression of one plan)
/// remembers in `fn_extra`: the session's entry of the name it drew from last. A call with the
/// same name then skips pgrx's detoasting (a guarded FFI call), the name checks and the hash
/// lookup: on a bulk statement that was a third of the time above a no-op function.
/// Allocated zeroed in `fn_mcxt`, so it starts empty and goes with the plan.
struct CallSite {
    entry: Option<Entry>,
}

/// The session's entry for `name`, through the call site's memory when it names the same
/// segment. Errors as [`name_arg`] and 42704 (unknown segment), as a PostgreSQL error.
///
/// # Safety
/// `fcinfo` is the current call's, and the function is not set-returning (pgrx keeps a
/// set-returning function's state in `fn_extra`).
pub(super) unsafe fn entry_at_call_site(
    name: Option<NameDatum<'_>>,
    fcinfo: pg_sys::FunctionCallInfo,
    deadline: &mut CallDeadline,
) -> Entry {
    let name = non_null_name(name);
    // SAFETY: the caller's contract; fn_extra is ours, and a CallSite when not null.
    let site = unsafe {
        let flinfo = (*fcinfo).flinfo;
        if (*flinfo).fn_extra.is_null() {
            (*flinfo).fn_extra =
                pg_sys::MemoryContextAllocZero((*flinfo).fn_mcxt, size_of::<CallSite>());
        }
        &mut *(*flinfo).fn_extra.cast::<CallSite>()
    };
    if let (Some(entry), Some(bytes)) = (site.entry, name.inline_bytes()) {
        if entry.is_named(bytes) {
            return entry;
        }
    }
    let entry = session::entry(name_arg(Some(name.as_str())), deadline).or_report();
    site.entry = Some(entry);
    entry
}

/// A `text` argument borrowed as PostgreSQL passed it, not yet detoasted: the call-site check
/// of `segment_nextval` compares its bytes in place.
pub(crate) struct NameDatum<'fcx> {
    varlena: *const pg_sys::varlena,
    _call: std::marker::PhantomData<&'fcx pg_sys::varlena>,
}

impl<'fcx> NameDatum<'fcx> {
    /// The bytes, when the datum holds them in line and uncompressed (1- or 4-byte header), as
    /// a constant or a short column value does; `None` for a toasted or compressed datum.
    fn inline_bytes(&self) -> Option<&'fcx [u8]> {
        let v = self.varlena;
        // SAFETY: a valid text datum of the current call; the header tells its layout.
        unsafe {
            if pgrx::varlena::varatt_is_1b_e(v) || pgrx::varlena::varatt_is_4b_c(v) {
                return None;
            }
            Some(std::slice::from_raw_parts(
                pgrx::varlena::vardata_any(v).cast(),
                pgrx::varlena::varsize_any_exhdr(v),
            ))
        }
    }

    /// The text, detoasted and converted as pgrx converts every `&str` argument.
    fn as_str(&self) -> &'fcx str {
        // SAFETY: a valid, non-null text datum of the current call.
        unsafe {
            <&str as FromDatum>::from_datum(pg_sys::Datum::from(self.varlena), false)
                .expect("a non-null text datum")
        }
    }
}

impl FromDatum for NameDatum<'_> {
    /// # Safety
    /// `datum` is a `text` argument of the current call (or NULL): it is not read here, only
    /// kept for the call's lifetime `'fcx`.
    unsafe fn from_polymorphic_datum(
        datum: pg_sys::Datum,
        is_null: bool,
        _typoid: pg_sys::Oid,
    ) -> Option<Self> {
        (!is_null && !datum.is_null()).then(|| NameDatum {
            varlena: datum.cast_mut_ptr(),
            _call: std::marker::PhantomData,
        })
    }
}

// SAFETY: unboxed from a `text` argument only (the SQL type below).
unsafe impl<'fcx> pgrx::callconv::ArgAbi<'fcx> for NameDatum<'fcx> {
    unsafe fn unbox_arg_unchecked(arg: pgrx::callconv::Arg<'_, 'fcx>) -> Self {
        // SAFETY: pgrx calls this with the current call's argument, which it checked to be
        // non-NULL; from_polymorphic_datum only stores the pointer.
        unsafe { arg.unbox_arg_using_from_datum() }.expect("a non-null segment name")
    }

    unsafe fn unbox_nullable_arg(
        arg: pgrx::callconv::Arg<'_, 'fcx>,
    ) -> pgrx::nullable::Nullable<Self> {
        // SAFETY: pgrx calls this with the current call's argument, NULL or not;
        // from_polymorphic_datum turns NULL into None and only stores a pointer otherwise.
        unsafe { arg.unbox_arg_using_from_datum() }.into()
    }
}

// SAFETY: the argument is SQL `text`, as `&str`'s.
unsafe impl pgrx::pgrx_sql_entity_graph::metadata::SqlTranslatable for NameDatum<'_> {
    const TYPE_IDENT: &'static str =
        <str as pgrx::pgrx_sql_entity_graph::metadata::SqlTranslatable>::TYPE_IDENT;
    const TYPE_ORIGIN: pgrx::pgrx_sql_entity_graph::metadata::TypeOrigin =
        pgrx::pgrx_sql_entity_graph::metadata::TypeOrigin::External;
    const ARGUMENT_SQL: Result<
        pgrx::pgrx_sql_entity_graph::metadata::SqlMappingRef,
        pgrx::pgrx_sql_entity_graph::metadata::ArgumentError,
    > = <str as pgrx::pgrx_sql_entity_graph::metadata::SqlTranslatable>::ARGUMENT_SQL;
    const RETURN_SQL: Result<
        pgrx::pgrx_sql_entity_graph::metadata::ReturnsRef,
        pgrx::pgrx_sql_entity_graph::metadata::ReturnsError,
    > = <str as pgrx::pgrx_sql_entity_graph::metadata::SqlTranslatable>::RETURN_SQL;
}
