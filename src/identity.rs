//! Who this postmaster is to a registry (DESIGN.md §6): its *incarnation*, 16 random bytes in
//! hex made once at start, which the registry shows as the holder of a lease and which tells a
//! restarted server (or a second server with the same node name) from the one that renewed
//! before; and its *holder secret*, 32 more random bytes that only this server knows. The
//! registry keeps only the secret's SHA-256 (`idgen_registry_lease.holder_key`,
//! `idgen_registry_segment.taker_key`) and changes a lease or gives a global segment's numbers
//! back only for a caller that shows the secret: an incarnation is a name, never a credential.
//! The secret is sent on the registry connection only; it is never logged, shown in a view or
//! put in an error.
//!
//! Both are made in the postmaster (`registry::init`) and inherited by every process, so the
//! registry client and the segment allocators speak for the same holder.

use std::sync::OnceLock;

use pgrx::pg_sys;

static INCARNATION: OnceLock<String> = OnceLock::new();
static SECRET: OnceLock<String> = OnceLock::new();

/// `n` random bytes in hex, from the operating system's CSPRNG (`pg_strong_random`). `None`
/// if it failed: a secret must never be guessable, so no weaker fallback.
fn random_hex(n: usize) -> Option<String> {
    let mut bytes = vec![0u8; n];
    // SAFETY: a valid buffer of the given length; pg_strong_random fills it.
    let ok = unsafe { pg_sys::pg_strong_random(bytes.as_mut_ptr().cast(), bytes.len()) };
    ok.then(|| bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Makes the incarnation and the secret. Called once, in the postmaster, from `_PG_init`.
/// Without a strong random source the server refuses to start (the registry's leases would
/// rest on a guessable secret).
pub(crate) fn init() {
    let (Some(incarnation), Some(secret)) = (random_hex(16), random_hex(32)) else {
        pgrx::error!("idgen: could not obtain random bytes for the registry's holder secret");
    };
    let _ = INCARNATION.set(incarnation);
    let _ = SECRET.set(secret);
}

/// This postmaster's incarnation ("" before [`init`], i.e. without a registry).
pub(crate) fn incarnation() -> &'static str {
    INCARNATION.get().map_or("", String::as_str)
}

/// This postmaster's holder secret ("" before [`init`]). Only for the registry connection's
/// parameters: never format it into a message.
pub(crate) fn secret() -> &'static str {
    SECRET.get().map_or("", String::as_str)
}
