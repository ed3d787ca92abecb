//! The registry client (DESIGN.md §6): with `idgen.registry` set, a background worker of this
//! server leases its Snowflake worker id from a registry (any PostgreSQL database with idgen,
//! `sql/idgen--0.2.0--0.3.0.sql`) and renews the lease; the generator stays local and never
//! talks to the registry ([`crate::snowflake::lease`] is all it reads). This module registers
//! the worker and its shared memory ([`init`]) and serves `idgen_registry_status`; the
//! connection is in [`crate::libpq`], the worker's loop in [`client`], what it believes of an answer in
//! [`idgen_core::registry::answer`] (the idgen-core crate), its status in [`shared`]; what the
//! server keeps of the registry's answers (its seen revision, the marks file) is
//! [`crate::marks`], below the subsystems that take ranges.

mod catalog_marks;
mod client;
mod shared;

use pgrx::datetime::TimestampWithTimeZone;
use pgrx::prelude::*;

use crate::snowflake::lease;
use crate::time::unix_ms_to_timestamptz;

/// Registers the registry client and its shared memory if `idgen.registry` is set. Called from
/// `_PG_init` in the postmaster, after `snowflake::init`.
pub(crate) fn init() {
    if crate::guc::registry_conninfo().is_none() {
        return;
    }
    crate::identity::init();
    crate::shmem::register(shared::PART);
    crate::shmem::register(crate::marks::PART);
    client::register();
}

/// This server's registry client, one row (`idgen_registry_status` selects it): the registry
/// reached (`host:port`), the state (`connecting`, `unclaimed`, `refused`, `held`, `renewing`,
/// `lost`, `released`, `recovering`; NULL columns and state `off` without `idgen.registry`), the worker id granted,
/// the node name and incarnation, when the lease expires, the fence (the last tick the
/// registry confirmed, R, and the end of that tick), the head start (how far the floor of the
/// grant is ahead of the clock now, ms, 0 once the clock passed it), the last renewal and the
/// renewals since start, the clock offset (this server minus the registry, ms, with its bound,
/// half the round trip) and the client's last error. Declared in the registry's SQL file.
#[allow(clippy::type_complexity)]
#[pg_extern(sql = false)]
fn idgen_registry_client_status() -> TableIterator<
    'static,
    (
        name!(registry, Option<String>),
        name!(state, String),
        name!(worker_id, Option<i32>),
        name!(node_name, Option<String>),
        name!(incarnation, Option<String>),
        name!(lease_expires_at, Option<TimestampWithTimeZone>),
        name!(fence_tick, Option<i64>),
        name!(fenced_until, Option<TimestampWithTimeZone>),
        name!(head_start_ms, Option<i64>),
        name!(last_renewal, Option<TimestampWithTimeZone>),
        name!(renewals, Option<i64>),
        name!(clock_offset_ms, Option<f64>),
        name!(clock_offset_bound_ms, Option<f64>),
        name!(last_error, Option<String>),
    ),
> {
    if !lease::registry_mode() {
        return TableIterator::once((
            None,
            "off".into(),
            None,
            None,
            None,
            None,
            None,
            None,
            None,
            None,
            None,
            None,
            None,
            None,
        ));
    }
    use std::sync::atomic::Ordering::Relaxed;
    let s = shared::shared();
    let texts = shared::texts();
    let text = |t: &str| Some(t.to_owned()).filter(|t| !t.is_empty());
    let ms = |v: i64| (v != 0).then(|| unix_ms_to_timestamptz(v).ok()).flatten();
    let fence_end = lease::fence_end();
    let head_start_ms = lease::head_start_ms(crate::time::wall_clock_unix_ms());
    let bound_us = s.offset_bound_us.load(Relaxed);
    let granted = lease::granted();
    TableIterator::once((
        text(texts.registry.as_str()),
        text(texts.state.as_str()).unwrap_or_else(|| "connecting".into()),
        granted.map(|w| w as i32),
        text(texts.node_name.as_str()),
        text(crate::identity::incarnation()),
        ms(s.lease_expires_ms.load(Relaxed)),
        (fence_end > 0).then(|| fence_end as i64 - 1),
        (fence_end > 0)
            .then(|| ms(lease::tick_unix_ms(fence_end)))
            .flatten(),
        granted.map(|_| head_start_ms),
        ms(s.last_renewal_ms.load(Relaxed)),
        Some(s.renewals.load(Relaxed) as i64),
        (bound_us > 0).then(|| s.offset_us.load(Relaxed) as f64 / 1000.0),
        (bound_us > 0).then(|| bound_us as f64 / 1000.0),
        lease::failure().map(|f| format!("{} (SQLSTATE {})", f.message(), f.sqlstate_text())),
    ))
}

/// The calls this server sent the registry since it started (the client's and the segment and
/// serial allocators'), and how many of them failed (an error the registry raised, a timeout, a
/// lost or refused connection), one row; for monitoring (`idgen_metrics_registry_client`).
/// Declared in the registry's SQL file.
#[pg_extern(sql = false)]
fn idgen_registry_calls() -> TableIterator<'static, (name!(calls, i64), name!(failures, i64))> {
    TableIterator::once(crate::marks::calls())
}
