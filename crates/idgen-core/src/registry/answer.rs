//! What the registry client believes of an answer. Every value of a claim or a renewal is
//! range-checked before anything is installed: the registry is another server, whose database's
//! owner, or a man in the middle, may answer what it likes, and a worker id beyond
//! `idgen.worker_bits` shifts into the time bits of the ids (`Layout::compose`), a fence far
//! ahead keeps a node issuing past its lease. An `Err` is the reason, naming the field and its
//! value; the caller refuses the answer with it (08P01) and installs nothing.

/// The server's layout as a claim answer is checked against it.
#[derive(Debug, Clone, Copy)]
pub struct Layout {
    /// The epoch, Unix ms.
    pub epoch_ms: i64,
    pub worker_bits: u32,
    /// A tick's length, ms (at least 1).
    pub tick_ms: u32,
}

/// The lease asked for and the measured clock: what bounds a fence.
#[derive(Debug, Clone, Copy)]
pub struct Lease {
    /// The lease length the call asked for, ms.
    pub lease_ms: u64,
    /// The bound of the clock measurement of the call (half its round trip), µs.
    pub bound_us: i64,
}

/// A claim answer that passed [`claim`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Claim {
    pub worker: u64,
    pub floor: u64,
    pub fence: u64,
    /// The lease's expiry, Unix ms.
    pub expires_ms: i64,
}

/// A non-negative integer column (`bigint`, `integer`): never NULL, never a fraction.
pub fn count(row: &[Option<String>], i: usize, field: &str) -> Result<u64, String> {
    let text = row
        .get(i)
        .cloned()
        .flatten()
        .ok_or_else(|| format!("{field} is NULL"))?;
    let n: i64 = text
        .parse()
        .map_err(|_| format!("{field} is not an integer"))?;
    u64::try_from(n).map_err(|_| format!("{field} {n} is negative"))
}

/// A time column as Unix ms (`extract(epoch FROM ...) * 1000`): never NULL, finite, after 1970.
pub fn unix_ms(row: &[Option<String>], i: usize, field: &str) -> Result<f64, String> {
    let text = row
        .get(i)
        .cloned()
        .flatten()
        .ok_or_else(|| format!("{field} is NULL"))?;
    match text.parse::<f64>() {
        Ok(ms) if (0.0..1e15).contains(&ms) => Ok(ms),
        _ => Err(format!("{field} is not a time")),
    }
}

/// The tick of the layout at Unix ms `ms` (0 before the epoch).
fn tick_at(layout: Layout, ms: f64) -> u64 {
    ((ms - layout.epoch_ms as f64) / f64::from(layout.tick_ms.max(1))).max(0.0) as u64
}

/// `ms` in ticks, rounded up.
fn ticks(layout: Layout, ms: u64) -> u64 {
    ms.div_ceil(u64::from(layout.tick_ms.max(1)))
}

/// The clock measurement's bound in ticks, plus one for the rounding of both sides.
fn slack(layout: Layout, lease: Lease) -> u64 {
    ticks(layout, lease.bound_us.unsigned_abs().div_ceil(1000)) + 1
}

/// Checks the answer of `idgen_registry_claim`: columns registry_now (Unix ms), worker_id,
/// floor_tick, fence_tick, expires_at (Unix ms). The worker id fits the layout; floor <= fence;
/// the floor is not ahead of the registry's clock (a grant starts at it, never ahead) and the
/// fence at most a lease past it, give or take the clock measurement's bound; the expiry at
/// most a lease away.
pub fn claim(row: &[Option<String>], layout: Layout, lease: Lease) -> Result<Claim, String> {
    let now_ms = unix_ms(row, 0, "registry_now")?;
    let worker = count(row, 1, "worker_id")?;
    let floor = count(row, 2, "floor_tick")?;
    let fence = count(row, 3, "fence_tick")?;
    let expires_ms = unix_ms(row, 4, "expires_at")?;
    let max_worker = (1u64 << layout.worker_bits.min(63)) - 1;
    if worker > max_worker {
        return Err(format!(
            "worker_id {worker} is beyond the layout's largest worker id {max_worker} (idgen.worker_bits = {})",
            layout.worker_bits
        ));
    }
    if floor > fence {
        return Err(format!(
            "floor_tick {floor} is above its fence_tick {fence}"
        ));
    }
    let (now_tick, lease_ticks, slack) = (
        tick_at(layout, now_ms),
        ticks(layout, lease.lease_ms),
        slack(layout, lease),
    );
    if floor > now_tick.saturating_add(slack) {
        return Err(format!(
            "floor_tick {floor} is ahead of the registry's clock (tick {now_tick}): a grant starts at the clock"
        ));
    }
    if fence > now_tick.saturating_add(lease_ticks + slack) {
        return Err(format!(
            "fence_tick {fence} is more than a lease ({lease_ticks} ticks) past the registry's clock (tick {now_tick})"
        ));
    }
    if expires_ms > now_ms + lease.lease_ms as f64 + 1000.0 {
        return Err("expires_at is more than a lease past the registry's clock".into());
    }
    Ok(Claim {
        worker,
        floor,
        fence,
        expires_ms: expires_ms as i64,
    })
}

/// What a renewal answered, checked by [`renewal`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Renewed {
    pub fence: u64,
    /// The floor in force: above the node's when the registry granted an expired lease anew.
    pub floor: u64,
    /// The lease's expiry, Unix ms.
    pub expires_ms: i64,
}

/// Checks an `idgen_registry_renew` answer (columns registry_now, fence_tick, floor_tick,
/// expires_at): the fence at most a lease past the registry's clock, give or take the
/// measurement's bound, unless it is the fence this node already had confirmed (`confirmed`);
/// the floor not above the fence, and not ahead of the clock unless it is the node's own
/// (`floor`). A fence below `confirmed` is the caller's to refuse.
pub fn renewal(
    row: &[Option<String>],
    layout: Layout,
    lease: Lease,
    confirmed: u64,
    floor: u64,
) -> Result<Renewed, String> {
    let now_ms = unix_ms(row, 0, "registry_now")?;
    let fence = count(row, 1, "fence_tick")?;
    let new_floor = count(row, 2, "floor_tick")?;
    let expires_ms = unix_ms(row, 3, "expires_at")?;
    let now_tick = tick_at(layout, now_ms);
    let lease_ticks = ticks(layout, lease.lease_ms);
    let slack = slack(layout, lease);
    let most = now_tick.saturating_add(lease_ticks + slack).max(confirmed);
    if fence > most {
        return Err(format!(
            "fence_tick {fence} is more than a lease ({lease_ticks} ticks) past the registry's clock (tick {now_tick})"
        ));
    }
    if new_floor > fence {
        return Err(format!(
            "floor_tick {new_floor} is above its fence_tick {fence}"
        ));
    }
    if new_floor > floor && new_floor > now_tick.saturating_add(slack) {
        return Err(format!(
            "floor_tick {new_floor} is ahead of the registry's clock (tick {now_tick}): a grant starts at the clock"
        ));
    }
    if expires_ms > now_ms + lease.lease_ms as f64 + 1000.0 {
        return Err("expires_at is more than a lease past the registry's clock".into());
    }
    Ok(Renewed {
        fence,
        floor: new_floor,
        expires_ms: expires_ms as i64,
    })
}

/// A boolean answer (`idgen_registry_release`): true or
/// false, nothing else.
pub fn boolean(row: Option<&[Option<String>]>, field: &str) -> Result<bool, String> {
    match row.and_then(|r| r.first().cloned().flatten()).as_deref() {
        Some("t") => Ok(true),
        Some("f") => Ok(false),
        Some(_) => Err(format!("{field} is not a boolean")),
        None => Err(format!("{field} is NULL")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LAYOUT: Layout = Layout {
        epoch_ms: 1_000_000,
        worker_bits: 10,
        tick_ms: 1,
    };
    const LEASE: Lease = Lease {
        lease_ms: 2000,
        bound_us: 500,
    };
    /// The registry's clock in the answers below: tick 100 000.
    const NOW: &str = "1100000.5";

    fn row(values: &[Option<&str>]) -> Vec<Option<String>> {
        values.iter().map(|v| v.map(str::to_owned)).collect()
    }

    fn claim_of(worker: &str, floor: &str, fence: &str) -> Result<Claim, String> {
        claim(
            &row(&[
                Some(NOW),
                Some(worker),
                Some(floor),
                Some(fence),
                Some("1102000.5"),
            ]),
            LAYOUT,
            LEASE,
        )
    }

    #[test]
    fn a_claim_from_the_registry_as_it_answers_is_believed() {
        // A grant from the clock, one whose answer was lost and is given again (its floor
        // earlier), and the largest worker id.
        for (w, floor, fence) in [
            ("0", "100000", "102000"),
            ("1023", "100001", "102001"),
            ("7", "0", "102002"),
            ("9", "99000", "101000"),
        ] {
            let c = claim_of(w, floor, fence).unwrap();
            assert_eq!(c.fence, fence.parse::<u64>().unwrap());
        }
    }

    #[test]
    fn a_claim_outside_the_protocol_is_refused_naming_the_field() {
        for (w, floor, fence, field) in [
            ("1024", "100000", "102000", "worker_id 1024 is beyond"),
            ("-1", "100000", "102000", "worker_id -1 is negative"),
            ("1.5", "100000", "102000", "worker_id is not an integer"),
            (
                "3",
                "102001",
                "102000",
                "floor_tick 102001 is above its fence_tick",
            ),
            (
                "3",
                "100000",
                "102003",
                "fence_tick 102003 is more than a lease",
            ),
            (
                "3",
                "100003",
                "102000",
                "floor_tick 100003 is ahead of the registry's clock",
            ),
            ("3", "104000", "106000", "floor_tick 104000 is ahead"),
            ("3", "-5", "102000", "floor_tick -5 is negative"),
        ] {
            let e = claim_of(w, floor, fence).unwrap_err();
            assert!(e.contains(field), "{w} {floor} {fence}: {e}");
        }
        let nulls = claim(&row(&[Some(NOW), None, None, None, None]), LAYOUT, LEASE);
        assert_eq!(nulls.unwrap_err(), "worker_id is NULL");
        let no_clock = claim(
            &row(&[Some("NaN"), Some("1"), Some("1"), Some("2"), Some("1")]),
            LAYOUT,
            LEASE,
        );
        assert_eq!(no_clock.unwrap_err(), "registry_now is not a time");
        let far_expiry = claim(
            &row(&[
                Some(NOW),
                Some("1"),
                Some("100000"),
                Some("102000"),
                Some("9999999"),
            ]),
            LAYOUT,
            LEASE,
        );
        assert!(far_expiry.unwrap_err().contains("expires_at"));
    }

    #[test]
    fn a_renewal_moves_the_fence_at_most_a_lease_past_the_registrys_clock() {
        let renew = |fence: &str, floor: &str, confirmed: u64, own_floor: u64| {
            renewal(
                &row(&[Some(NOW), Some(fence), Some(floor), Some("1102000.5")]),
                LAYOUT,
                LEASE,
                confirmed,
                own_floor,
            )
        };
        assert_eq!(renew("102000", "5", 101000, 5).unwrap().fence, 102000);
        // The fence confirmed before stays believed.
        assert_eq!(renew("105000", "5", 105000, 5).unwrap().fence, 105000);
        // An expired lease granted anew: the floor moves to the clock.
        assert_eq!(renew("102000", "100000", 99000, 5).unwrap().floor, 100000);
        assert!(renew("102003", "5", 101000, 5)
            .unwrap_err()
            .contains("fence_tick 102003"));
        assert!(renew("105001", "5", 105000, 5)
            .unwrap_err()
            .contains("fence_tick 105001"));
        assert!(renew("102000", "101000", 101000, 5)
            .unwrap_err()
            .contains("floor_tick 101000 is ahead"));
        assert!(renew("102000", "102001", 101000, 5)
            .unwrap_err()
            .contains("above its fence_tick"));
        assert_eq!(
            renewal(&row(&[Some(NOW), None, None, None]), LAYOUT, LEASE, 0, 0).unwrap_err(),
            "fence_tick is NULL"
        );
    }

    #[test]
    fn a_boolean_answer_is_true_or_false() {
        let t = row(&[Some("t")]);
        assert_eq!(boolean(Some(&t), "released"), Ok(true));
        assert_eq!(boolean(Some(&row(&[Some("f")])), "released"), Ok(false));
        assert!(boolean(Some(&row(&[Some("yes")])), "released").is_err());
        assert!(boolean(Some(&row(&[None])), "released").is_err());
        assert!(boolean(None, "released").is_err());
    }
}
