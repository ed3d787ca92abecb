//! The registry protocol's decisions (DESIGN.md §6 "Fault model" and "Protocol"): who may hold
//! a worker id, from which tick a new holder starts, how far a fence moves, which range a take
//! hands out, when a node may serve from a cached global range, and what a recovery raises.
//!
//! Pure arithmetic on plain values: the registry's SQL and the node's client do the reading and
//! writing, these functions decide. The model in `tests/registry_model.rs` explores the same
//! functions with crashes, partitions, lost answers, clock skew and registry rollbacks, so what
//! it proves is what the extension runs.
//!
//! Units: a *tick* is the unit of a Snowflake id's time field in the node's layout (1 ms by
//! default), counted on the registry's clock; a *mark* is the last number of a global segment
//! or serial counter handed out in a range (the next range starts at mark + 1).
//!
//! Sources: etcd's leases (a TTL on the server's clock, a revision that never decreases);
//! Kleppmann's fencing tokens ("How to do distributed locking", 2016), here the tick R past which
//! a holder issues nothing; Meituan Leaf's segment mode (one committed `UPDATE ... RETURNING`
//! per range).

pub mod answer;

/// A tick of the registry's clock in the node's id layout.
pub type Tick = i64;

/// The longest lease a registry can be set to grant (`idgen.registry_max_lease`), ms. A node
/// asking for more than its registry's setting is refused (22023); the registry's wait after
/// each new epoch (see [`epoch_wait_over`]) is its setting long.
pub const MAX_LEASE_MS: i64 = 120_000;

/// The shortest lease a registry grants, ms.
pub const MIN_LEASE_MS: i64 = 100;

/// How far the registry's clock may step back across an operator event (a restore on another
/// machine, a failover to a standby whose clock is behind), ms. Part of the wait after an epoch.
pub const CLOCK_STEP_MS: i64 = 1_000;

/// The largest step a global take hands out (a range of at most this many numbers): the
/// registry's `step_size integer`, 2^31 - 1.
pub const MAX_STEP: i64 = i32::MAX as i64;

/// Why the registry refuses a call. Each maps to one SQLSTATE in the registry's SQL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// A lease length or step outside the registry's bounds (22023).
    OutOfBounds,
    /// The registry cannot show that it keeps acknowledged commits (55000): no synchronous
    /// standby streaming, `synchronous_commit` below `on`, or `fsync` off, and its operator has
    /// not declared it a single durable server.
    NotDurable,
    /// The registry lost commits or was replaced, and its operator has not completed the
    /// recovery (55000): it grants and hands out nothing new.
    Recovering,
    /// Not yet (55P03): the wait after the registry's epoch, or a worker id whose last holder
    /// reserved ticks the registry's clock has not passed. Tried again.
    Waiting,
    /// The worker id is held by another holder whose lease has not expired (55006).
    HeldByAnother,
    /// The caller is not the lease's or the node name's holder (42501).
    NotTheHolder,
    /// The segment's numbers are used up (2200H).
    Exhausted,
}

/// What the registry can see of its own durability, read at each call that grants or hands out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Durability {
    /// `fsync` is on.
    pub fsync: bool,
    /// `synchronous_commit` is `on` or `remote_apply` in the calling session.
    pub synchronous_commit: bool,
    /// How many synchronous (or quorum) standbys are streaming now.
    pub synchronous_standbys: u32,
    /// The operator declared this registry a single durable server
    /// (`idgen.registry_single_server = on` in the registry's configuration).
    pub declared_single_server: bool,
}

/// Whether the registry may grant and hand out: it must keep every commit it acknowledged
/// through a restart, a crash and a failover to a synchronous standby.
pub fn durable(d: Durability) -> Result<(), Refusal> {
    let replicated = d.synchronous_standbys > 0 || d.declared_single_server;
    if d.fsync && d.synchronous_commit && replicated {
        Ok(())
    } else {
        Err(Refusal::NotDurable)
    }
}

/// The registry's own state, one row: the revision and where the current epoch began.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Registry {
    /// Raised by every change the registry commits; never lowered by an honest registry. A node
    /// showing a revision above it proves the registry lost commits.
    pub revision: u64,
    /// The registry's clock, in ticks, when it first answered as the server it is now (a
    /// restart, a failover, a restore or a reinstall begins a new epoch). Every commit the
    /// registry may have lost was made before it.
    pub epoch: Tick,
    /// A recovery is open: nothing is granted or handed out until the operator completes it.
    pub recovering: bool,
}

/// Whether a node's call shows that the registry lost commits: the node saw a revision (in an
/// answer the registry signed) above the registry's own.
pub fn shows_rollback(registry: Registry, seen_revision: u64) -> bool {
    seen_revision > registry.revision
}

/// The gate of every call that grants a worker id or hands out numbers.
pub fn may_hand_out(registry: Registry, durability: Durability) -> Result<(), Refusal> {
    if registry.recovering {
        return Err(Refusal::Recovering);
    }
    durable(durability)
}

/// A lease length asked for, checked against the registry's bounds, in ms.
pub fn lease_ms(asked_ms: i64) -> Result<i64, Refusal> {
    if (MIN_LEASE_MS..=MAX_LEASE_MS).contains(&asked_ms) {
        Ok(asked_ms)
    } else {
        Err(Refusal::OutOfBounds)
    }
}

/// What the registry recorded of a worker id's last holder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Previous {
    /// Never leased.
    Never,
    /// Leased: the holder issues nothing past `fence` (R), and the lease ends after it.
    Leased { fence: Tick },
    /// Released cleanly: the holder issued nothing at or past `final_tick` (the first tick its
    /// reservation never reached) and extends nothing.
    Released { final_tick: Tick },
}

/// Whether the wait after the registry's epoch is over at `now`: `now` is past the epoch's tick
/// plus `wait` (grants: the longest lease plus [`CLOCK_STEP_MS`], rounded up to ticks; ranges
/// half of it). Strictly past: a commit made at the epoch's tick and lost may have set a fence
/// of that tick plus a lease, and a grant starts at `now`.
///
/// The epoch begins at a start, a failover, a change of identity or a recovery; every commit the
/// registry may have lost was made before it. A holder never issues past a lease after its last
/// confirmed renewal, so once the grants' wait is over no tick a lost grant or renewal allowed is
/// at or above the clock, where every grant starts ([`grant`]); and every live node has shown
/// the registry its revision (it renews or says hello every third of a lease) before a range is
/// handed out.
pub fn epoch_wait_over(now: Tick, epoch: Tick, wait: Tick) -> Result<(), Refusal> {
    if now <= epoch.saturating_add(wait) {
        Err(Refusal::Waiting)
    } else {
        Ok(())
    }
}

/// Whether a claimant may be granted an id whose last holder is `previous`, at `now`: a lease
/// lives until the registry's clock passes its fence, and a released id is free once the clock
/// reaches its final tick (no grant starts ahead of the clock).
pub fn claimable(previous: Previous, now: Tick) -> Result<(), Refusal> {
    match previous {
        Previous::Leased { fence } if now <= fence => Err(Refusal::HeldByAnother),
        Previous::Released { final_tick } if now < final_tick => Err(Refusal::Waiting),
        _ => Ok(()),
    }
}

/// A grant: the first tick the holder may use (its *floor*, inclusive) and the last (its fence,
/// R).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Grant {
    pub floor: Tick,
    pub fence: Tick,
}

/// A grant at `now` of a claimable id ([`claimable`], after [`epoch_wait_over`]): it starts at
/// the registry's clock, never ahead of it, and lasts a lease.
pub fn grant(now: Tick, lease_ticks: Tick) -> Grant {
    Grant {
        floor: now,
        fence: now.saturating_add(lease_ticks),
    }
}

/// The fence (R) a renewal at `now` sets: a lease past the registry's clock, never below the
/// fence already recorded.
pub fn fence(recorded: Tick, now: Tick, lease_ticks: Tick) -> Tick {
    recorded.max(now.saturating_add(lease_ticks))
}

/// What a renewal answers its holder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Renewal {
    /// The new fence R; the lease ends after it.
    pub fence: Tick,
    /// When the lease had expired before this renewal: the floor the holder must jump to, as for
    /// a new grant. The registry cannot tell whether a commit it lost granted the id to another
    /// node meanwhile, so an expired lease renewed is a new grant (and waits as one:
    /// [`renewal_is_grant`]).
    pub floor: Option<Tick>,
}

/// Whether a renewal at `now` of a lease whose recorded fence is `recorded_fence` is a new
/// grant: the lease expired.
pub fn renewal_is_grant(recorded_fence: Tick, now: Tick) -> bool {
    now > recorded_fence
}

/// A renewal by the lease's holder at `now`. The holder is checked by the caller (its secret),
/// and so is the wait of a renewal that is a grant ([`renewal_is_grant`]).
pub fn renew(recorded_fence: Tick, now: Tick, lease_ticks: Tick) -> Renewal {
    if renewal_is_grant(recorded_fence, now) {
        let g = grant(now, lease_ticks);
        Renewal {
            fence: g.fence,
            floor: Some(g.floor),
        }
    } else {
        Renewal {
            fence: fence(recorded_fence, now, lease_ticks),
            floor: None,
        }
    }
}

/// A range handed out by a take: `first..=last`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Range {
    pub first: i64,
    pub last: i64,
}

/// The range a take of `step` numbers hands out above `mark`, and the new mark (`last`).
/// Refused beyond `max_value` (2200H) or for a step outside 1..=[`MAX_STEP`] (22023).
pub fn take(mark: i64, step: i64, max_value: i64) -> Result<Range, Refusal> {
    if !(1..=MAX_STEP).contains(&step) {
        return Err(Refusal::OutOfBounds);
    }
    let first = mark.checked_add(1).ok_or(Refusal::Exhausted)?;
    if first > max_value {
        return Err(Refusal::Exhausted);
    }
    let last = mark.saturating_add(step).min(max_value);
    Ok(Range { first, last })
}

/// Whether a node may hand out numbers from a global range it holds at `now` (its own clock,
/// ms): only while its last registry contact, `last_contact` (its clock when it sent the call
/// an open registry answered: an answer delayed in the network proves nothing about later), is
/// younger than its lease, and not ahead of its clock. A partitioned node stops at a known
/// time, as its Snowflake ids stop at the fence. Used by the extension's draws of global
/// segments and serials (`segment::global::check_contact`) and by the model.
pub fn range_usable(now_ms: i64, last_contact_ms: i64, lease_ms: i64) -> bool {
    now_ms >= last_contact_ms && now_ms - last_contact_ms < lease_ms
}

/// A recovery's new mark for one segment or serial counter: above what the registry has and
/// above every mark a node reported from its durable state.
pub fn recovered_mark(mark: i64, reported: impl IntoIterator<Item = i64>) -> i64 {
    reported.into_iter().fold(mark, i64::max)
}

/// A recovery's new revision: above the registry's and above every revision a node showed, so
/// that no node's memory is above the registry after it.
pub fn recovered_revision(revision: u64, shown: impl IntoIterator<Item = u64>) -> u64 {
    shown.into_iter().fold(revision, u64::max).saturating_add(1)
}

/// The tick a Snowflake generator issues next, or `None` when it must stop (the fence).
/// `clock` is the node's clock in ticks (any skew), `last` the last tick it issued, `floor` its
/// grant's floor (the first tick it may use: a node whose clock is behind the registry's starts
/// there).
pub fn next_tick(clock: Tick, last: Tick, floor: Tick, fence: Tick) -> Option<Tick> {
    let tick = clock.max(last.saturating_add(1)).max(floor);
    (tick <= fence).then_some(tick)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: Durability = Durability {
        fsync: true,
        synchronous_commit: true,
        synchronous_standbys: 1,
        declared_single_server: false,
    };

    #[test]
    fn a_registry_is_durable_only_with_fsync_synchronous_commit_and_a_standby_or_a_declaration() {
        assert_eq!(durable(ALL), Ok(()));
        let single = Durability {
            synchronous_standbys: 0,
            declared_single_server: true,
            ..ALL
        };
        assert_eq!(durable(single), Ok(()));
        for bad in [
            Durability {
                fsync: false,
                ..ALL
            },
            Durability {
                synchronous_commit: false,
                ..ALL
            },
            Durability {
                synchronous_standbys: 0,
                ..ALL
            },
            Durability {
                synchronous_commit: false,
                ..single
            },
        ] {
            assert_eq!(durable(bad), Err(Refusal::NotDurable), "{bad:?}");
        }
    }

    #[test]
    fn a_recovering_registry_hands_out_nothing() {
        let r = Registry {
            revision: 1,
            epoch: 0,
            recovering: true,
        };
        assert_eq!(may_hand_out(r, ALL), Err(Refusal::Recovering));
        assert_eq!(
            may_hand_out(
                Registry {
                    recovering: false,
                    ..r
                },
                ALL
            ),
            Ok(())
        );
    }

    #[test]
    fn a_lease_outside_the_bounds_is_refused() {
        assert_eq!(lease_ms(MAX_LEASE_MS), Ok(MAX_LEASE_MS));
        assert_eq!(lease_ms(MIN_LEASE_MS), Ok(MIN_LEASE_MS));
        assert_eq!(lease_ms(MAX_LEASE_MS + 1), Err(Refusal::OutOfBounds));
        assert_eq!(lease_ms(i32::MAX as i64), Err(Refusal::OutOfBounds));
        assert_eq!(lease_ms(0), Err(Refusal::OutOfBounds));
    }

    #[test]
    fn grants_wait_out_the_epoch_and_start_at_the_clock() {
        assert_eq!(epoch_wait_over(160, 100, 60), Err(Refusal::Waiting));
        assert_eq!(epoch_wait_over(161, 100, 60), Ok(()));
        assert_eq!(
            grant(500, 60),
            Grant {
                floor: 500,
                fence: 560
            }
        );
    }

    #[test]
    fn a_fence_never_moves_back() {
        assert_eq!(fence(1000, 10, 60), 1000);
        assert_eq!(fence(10, 1000, 60), 1060);
    }

    #[test]
    fn renewing_an_expired_lease_is_a_new_grant_from_the_clock() {
        assert_eq!(
            renew(100, 90, 60),
            Renewal {
                fence: 150,
                floor: None
            }
        );
        assert!(renewal_is_grant(100, 120));
        assert_eq!(
            renew(100, 120, 60),
            Renewal {
                fence: 180,
                floor: Some(120)
            }
        );
    }

    #[test]
    fn a_live_lease_is_not_claimable_until_it_expires_nor_a_release_ahead_of_the_clock() {
        let p = Previous::Leased { fence: 100 };
        assert_eq!(claimable(p, 100), Err(Refusal::HeldByAnother));
        assert_eq!(claimable(p, 101), Ok(()));
        let r = Previous::Released { final_tick: 5 };
        assert_eq!(claimable(r, 4), Err(Refusal::Waiting));
        assert_eq!(claimable(r, 5), Ok(()));
        assert_eq!(claimable(Previous::Never, 0), Ok(()));
    }

    #[test]
    fn a_take_hands_out_the_step_above_the_mark_and_stops_at_the_maximum() {
        assert_eq!(take(0, 10, 100), Ok(Range { first: 1, last: 10 }));
        assert_eq!(
            take(95, 10, 100),
            Ok(Range {
                first: 96,
                last: 100
            })
        );
        assert_eq!(take(100, 10, 100), Err(Refusal::Exhausted));
        assert_eq!(take(i64::MAX, 1, i64::MAX), Err(Refusal::Exhausted));
        assert_eq!(take(0, 0, 100), Err(Refusal::OutOfBounds));
        assert_eq!(take(0, MAX_STEP + 1, i64::MAX), Err(Refusal::OutOfBounds));
    }

    #[test]
    fn a_range_serves_only_within_a_lease_of_the_last_contact() {
        assert!(range_usable(1000, 1000, 60_000));
        assert!(range_usable(60_999, 1000, 60_000));
        assert!(!range_usable(61_000, 1000, 60_000));
        // A clock that stepped back before the contact serves nothing.
        assert!(!range_usable(999, 1000, 60_000));
    }

    #[test]
    fn a_recovery_raises_marks_and_the_revision_above_every_report() {
        assert_eq!(recovered_mark(10, [5, 30, 20]), 30);
        assert_eq!(recovered_mark(40, [5, 30]), 40);
        assert_eq!(recovered_revision(7, [9, 3]), 10);
        assert_eq!(recovered_revision(7, []), 8);
        assert!(shows_rollback(
            Registry {
                revision: 7,
                epoch: 0,
                recovering: false
            },
            8
        ));
        assert!(!shows_rollback(
            Registry {
                revision: 7,
                epoch: 0,
                recovering: false
            },
            7
        ));
    }

    #[test]
    fn the_generator_issues_between_its_floor_and_its_fence() {
        assert_eq!(next_tick(10, 0, 0, 100), Some(10));
        assert_eq!(next_tick(10, 20, 0, 100), Some(21));
        assert_eq!(next_tick(10, 0, 50, 100), Some(50));
        assert_eq!(next_tick(100, 100, 0, 100), None);
        assert_eq!(next_tick(101, 0, 0, 100), None);
    }
}
