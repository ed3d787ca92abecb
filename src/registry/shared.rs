//! What the registry client shows in `idgen_registry_status`, in shared memory: the registry
//! it reached, its state, the node name, the floor of its grant, and the last renewal's time
//! and clock offset. Written by the client only; read by the status view. The worker id, the
//! fence and the client's failure are the generator's (`snowflake::lease`).

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use crate::failure::FixedText;
use crate::lwlock::NamedLWLock;
use crate::shmem::{Part, ShmemStruct};

/// The client's state as the status view names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum State {
    /// Not started yet, or connecting for the first claim.
    Connecting,
    /// `idgen.worker_id` is unset: no worker id is claimed (global segments still work).
    Unclaimed,
    /// Its claim was refused (the failure says why); it tries again.
    Refused,
    /// It holds a lease and the last renewal succeeded.
    Held,
    /// It holds a lease but the last renewal failed: ids continue up to the fence.
    Renewing,
    /// The registry gave its worker id to another server after the lease expired.
    Lost,
    /// Released at shutdown.
    Released,
    /// The registry is recovering (it lost commits, or was replaced): nothing is granted or
    /// handed out until its operator completes the recovery; a held lease is still renewed.
    Recovering,
}

impl State {
    pub(crate) fn name(self) -> &'static str {
        match self {
            State::Connecting => "connecting",
            State::Unclaimed => "unclaimed",
            State::Refused => "refused",
            State::Held => "held",
            State::Renewing => "renewing",
            State::Lost => "lost",
            State::Released => "released",
            State::Recovering => "recovering",
        }
    }
}

/// Text parts of the client's status, under the LWLock `idgen_registry`.
#[repr(C)]
#[derive(Default, Clone, Copy)]
pub(crate) struct Texts {
    /// `host:port` of the registry server last reached.
    pub(crate) registry: FixedText<256>,
    /// The node name the client claims with.
    pub(crate) node_name: FixedText<64>,
    /// [`State::name`] of the current state; empty before the client started.
    pub(crate) state: FixedText<16>,
}

/// The client's status in shared memory; all zero before the client started.
#[repr(C)]
#[derive(Default)]
pub(crate) struct ClientShared {
    texts: UnsafeCell<Texts>,
    /// The floor tick of the grant (the head start it began with); 0 before a grant.
    pub(crate) floor_tick: AtomicU64,
    /// When the lease expires, as the registry said at the last claim or renewal (Unix ms).
    pub(crate) lease_expires_ms: AtomicI64,
    /// When the last renewal (or the claim) succeeded, on this server's clock (Unix ms).
    pub(crate) last_renewal_ms: AtomicI64,
    /// Successful renewals since start.
    pub(crate) renewals: AtomicU64,
    /// This server's clock minus the registry's at the last measurement, in µs, and the bound
    /// of that measurement (half the round trip), in µs; the bound is 0 before one.
    pub(crate) offset_us: AtomicI64,
    pub(crate) offset_bound_us: AtomicI64,
}

// SAFETY: every field is an atomic, except `texts`, touched only under the LWLock
// `idgen_registry`.
unsafe impl Sync for ClientShared {}

static SHARED: ShmemStruct<ClientShared> = ShmemStruct::new(c"idgen_registry");
static LOCK: NamedLWLock = NamedLWLock::new(c"idgen_registry");

/// The registry client's share of shared memory.
pub(crate) const PART: Part = Part {
    request: || {
        SHARED.request();
        LOCK.request();
    },
    attach: || {
        // SAFETY: ClientShared is atomics and plain bytes, for which all-zero is valid (its
        // Default); nothing else to initialize.
        unsafe { SHARED.attach(|_| {}) };
        LOCK.attach();
    },
};

/// The client's status.
pub(crate) fn shared() -> &'static ClientShared {
    SHARED.get()
}

/// A copy of the text parts.
pub(crate) fn texts() -> Texts {
    let _guard = LOCK.exclusive();
    // SAFETY: `texts` is read and written only under LOCK, held here.
    unsafe { *shared().texts.get() }
}

/// Changes the text parts.
pub(crate) fn update_texts(change: impl FnOnce(&mut Texts)) {
    let _guard = LOCK.exclusive();
    // SAFETY: `texts` is read and written only under LOCK, held here.
    change(unsafe { &mut *shared().texts.get() });
}

/// Sets the state.
pub(crate) fn set_state(state: State) {
    update_texts(|t| t.state = FixedText::new(state.name()));
}

/// Records a clock measurement: `offset_us` (this server minus the registry) within
/// `bound_us`.
pub(crate) fn set_offset(offset_us: i64, bound_us: i64) {
    let s = shared();
    s.offset_us.store(offset_us, Ordering::Relaxed);
    s.offset_bound_us.store(bound_us.max(1), Ordering::Relaxed);
}
