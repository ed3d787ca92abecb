//! The registry client: a background worker without a database, one per server with
//! `idgen.registry` set (DESIGN.md §6). It claims this server's worker id from the registry
//! once, then renews the lease every `idgen.registry_renew_interval` (with jitter), and
//! releases it at a clean shutdown with the final reservation. Each grant and renewal moves the
//! generator's fence (`snowflake::lease`); a failure is kept for the callers and the status
//! view, and logged when it changes. It starts once recovery has ended: a standby issues no
//! ids, and a promoted one claims (and so succeeds its primary) as it becomes writable.

use std::ffi::CStr;
use std::time::{Duration, Instant};

use pgrx::bgworkers::{
    BackgroundWorker, BackgroundWorkerBuilder, BgWorkerStartTime, SignalWakeFlags,
};
use pgrx::pg_sys;
use pgrx::prelude::*;

use super::answer;
use super::shared::{self, State};
use crate::failure::{Failure, FixedText};
use crate::guc;
use crate::libpq::{self as conn, Conn, ConnError, Wait};
use crate::snowflake::lease::{self, Grant};

/// How long connecting, and each call, may take before the client gives up and tries again.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// How long the release at shutdown may take: a fast shutdown must finish within seconds
/// whatever the registry does. Without a release the next holder starts above R instead.
const RELEASE_TIMEOUT: Duration = Duration::from_secs(3);

/// Until the first grant, the client retries at most this often.
const CLAIM_RETRY: Duration = Duration::from_secs(1);

/// Registers the registry client. Called from `registry::init` in the postmaster.
pub(super) fn register() {
    BackgroundWorkerBuilder::new("idgen registry client")
        .set_type("idgen registry client")
        .set_library("idgen")
        .set_function("idgen_registry_client_main")
        .enable_shmem_access(None)
        .set_start_time(BgWorkerStartTime::RecoveryFinished)
        .set_restart_time(Some(Duration::from_secs(1)))
        .load();
}

/// Entry point of the registry client (registered by [`register`]). Exits on SIGTERM, after
/// releasing the lease.
// SAFETY: called by PostgreSQL's background worker machinery (bgworker_main) in a new process
// attached to shared memory, with signals blocked until attach_signal_handlers unblocks them;
// #[pg_guard] turns a Rust panic into a PostgreSQL ERROR (the worker exits, and is restarted).
#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn idgen_registry_client_main(_arg: pg_sys::Datum) {
    BackgroundWorker::attach_signal_handlers(SignalWakeFlags::SIGHUP | SignalWakeFlags::SIGTERM);
    conn::install_sigterm_handler();
    let mut client = Client::new();
    loop {
        if conn::terminating() {
            if conn::terminated_by_postmaster() {
                client.release();
                return;
            }
            // A SIGTERM from anything but the postmaster (`kill -TERM` of this process; it has no
            // database session, so pg_terminate_backend cannot reach it): the server goes on, so
            // the lease stays; exit with 1 so the postmaster starts the client again (a worker
            // that exits with 0 is never restarted) and the next one renews the same grant.
            pgrx::log!("idgen registry client: terminated; it restarts and keeps the lease");
            // SAFETY: ends this process as PostgreSQL's own processes do.
            unsafe { pg_sys::proc_exit(1) };
        }
        if BackgroundWorker::sighup_received() {
            // SAFETY: between calls, outside any transaction, on the worker's only thread:
            // where PostgreSQL's own processes apply a reload.
            unsafe { pg_sys::ProcessConfigFile(pg_sys::GucContext::PGC_SIGHUP) };
        }
        let pause = client.step();
        if !conn::terminating() {
            crate::latch::wait(pause);
        }
    }
}

/// Who this server is to the registry.
struct Identity {
    node_name: String,
    system_identifier: String,
    timeline: u32,
    port: i32,
}

/// The registry's answer to a call: its one row, this server's clock offset from the
/// registry's and the bound of that measurement (half the round trip), both in µs.
type Answer = (Vec<Option<String>>, i64, i64);

impl Identity {
    /// `idgen.node_name`, else `cluster_name`, else `pg-<system identifier>-<port>`.
    fn of_this_server() -> Self {
        // SAFETY: the control file is in shared memory, read by the startup process before
        // recovery ended (this worker starts after that); PostPortNumber is a postmaster
        // setting inherited by every process.
        let (system_identifier, port) =
            unsafe { (pg_sys::GetSystemIdentifier(), pg_sys::PostPortNumber) };
        // SAFETY: recovery has ended before this worker starts (BgWorkerStart_RecoveryFinished).
        let timeline = unsafe { pg_sys::GetWALInsertionTimeLine() };
        let node_name = guc::node_name()
            .or_else(|| {
                crate::backend::setting_text(c"cluster_name").filter(|n| {
                    !n.is_empty() && n.len() <= crate::guc::MAX_NODE_NAME && plain_name(n)
                })
            })
            .unwrap_or_else(|| format!("pg-{system_identifier}-{port}"));
        Self {
            node_name,
            system_identifier: system_identifier.to_string(),
            timeline,
            port,
        }
    }
}

/// Whether `name` is usable as a node name as it is (`cluster_name` may hold anything).
fn plain_name(name: &str) -> bool {
    name.chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | ':'))
}

/// The client's state between steps.
struct Client {
    identity: Identity,
    conn: Option<Conn>,
    /// The worker id and floor of the grant, once granted.
    grant: Option<(u64, u64)>,
    /// The last failure logged (its SQLSTATE and its message without digits), so that a
    /// failure is logged once per change of state, not at every retry with a new number.
    logged: Option<String>,
    /// The registry's commits were found not synchronous, and that was logged.
    warned_synchronous: bool,
    /// Each standby seen streaming from this server, and when last: a renewal names those seen
    /// within a lease. A standby stops streaming as it is promoted, and its claim may reach the
    /// registry after this server's next renewal: named only while streaming, it would have
    /// lost its succession by then (and claimed another worker id while this server goes on).
    standbys_seen: std::collections::BTreeMap<String, Instant>,
}

impl Client {
    fn new() -> Self {
        let identity = Identity::of_this_server();
        shared::update_texts(|t| t.node_name = FixedText::new(&identity.node_name));
        // A restarted client of a running server: the grant in shared memory is still ours.
        let grant = lease::granted().map(|w| {
            (
                w,
                shared::shared()
                    .floor_tick
                    .load(std::sync::atomic::Ordering::Acquire),
            )
        });
        if grant.is_none() {
            shared::set_state(State::Connecting);
        }
        Self {
            identity,
            conn: None,
            grant,
            logged: None,
            warned_synchronous: false,
            standbys_seen: std::collections::BTreeMap::new(),
        }
    }

    /// One claim or renewal; returns how long to wait before the next. Without a worker id
    /// (`idgen.worker_id` unset, e.g. a server that only draws global segments) nothing is
    /// claimed.
    fn step(&mut self) -> Duration {
        if self.grant.is_none() && guc::worker_id_setting() == guc::WorkerIdSetting::Unset {
            // No worker id to lease; the global segments' marks are still reported.
            shared::set_state(State::Unclaimed);
            match self.report() {
                Ok(()) => self.logged = None,
                Err(f) => self.failed(*f),
            }
            return jittered(Duration::from_millis(guc::registry_renew_interval_ms()));
        }
        let result = match self.grant {
            None => self.claim(),
            Some((worker, _)) => self.renew(worker),
        };
        match result {
            Ok(()) => {
                self.logged = None;
                jittered(Duration::from_millis(guc::registry_renew_interval_ms()))
            }
            Err(failure) => {
                self.failed(*failure);
                let interval = Duration::from_millis(guc::registry_renew_interval_ms());
                if self.grant.is_none() {
                    // A node whose claim is refused still shows its global segments' marks
                    // (its own failure is the one shown).
                    let _ = self.report();
                    jittered(interval.min(CLAIM_RETRY))
                } else {
                    jittered(interval)
                }
            }
        }
    }

    /// Records and (once per kind of failure) logs `failure`: a failure that differs from the
    /// last one only in its numbers (a clock offset, a lease's age) is not logged again.
    fn failed(&mut self, failure: Failure) {
        let key = format!(
            "{} {}",
            failure.sqlstate_text(),
            failure.message().replace(|c: char| c.is_ascii_digit(), "")
        );
        if self.logged.as_deref() != Some(key.as_str()) {
            pgrx::log!(
                "idgen registry client: {} (SQLSTATE {})",
                failure.message(),
                failure.sqlstate_text()
            );
            self.logged = Some(key);
        }
        lease::fail(failure);
    }

    /// The open connection, connecting first if there is none.
    fn conn(&mut self, deadline: Instant, wait: Wait) -> Result<&mut Conn, Box<Failure>> {
        if self.conn.is_none() {
            let conninfo = guc::registry_conninfo().unwrap_or_default();
            let conn = conn::connect(&conninfo, deadline, wait).map_err(|e| match e {
                ConnError::Remote(r) => remote_failure(&r),
                other => Failure::new(
                    "08001",
                    &format!("could not connect to the registry: {other}"),
                    None,
                    Some("Check idgen.registry, the registry server and ~/.pgpass of the server's operating system user."),
                ),
            })?;
            shared::update_texts(|t| t.registry = FixedText::new(&conn.server()));
            self.conn = Some(conn);
        }
        Ok(self.conn.as_mut().expect("connected above"))
    }

    /// Runs `sql` on the registry, measuring this server's clock against the registry's: the
    /// first column of the single row must be the registry's clock in Unix ms.
    fn call(
        &mut self,
        sql: &CStr,
        params: &[Option<String>],
        wait: Wait,
    ) -> Result<Answer, Box<Failure>> {
        let deadline = Instant::now() + CALL_TIMEOUT;
        let conn = self.conn(deadline, wait)?;
        let t0 = crate::time::wall_clock_unix_us();
        let result = conn.query(sql, params, deadline, wait);
        let t1 = crate::time::wall_clock_unix_us();
        let rows = match result {
            Ok(rows) => rows,
            Err(ConnError::Remote(r)) => {
                // Any error may leave the session unusable (a terminated backend, a registry
                // in recovery, 25006 on a host that turned read-only): the next call connects
                // afresh, which also moves a multi-host string on to a writable host.
                self.conn = None;
                return Err(remote_failure(&r).into());
            }
            Err(e) => {
                self.conn = None;
                return Err(Failure::new(
                    "08006",
                    &format!("the registry connection failed: {e}"),
                    None,
                    None,
                )
                .into());
            }
        };
        let row = rows
            .into_iter()
            .next()
            .ok_or_else(|| refused_answer("the answer has no row"))?;
        let registry_us = answer::unix_ms(&row, 0, "registry_now")
            .map(|ms| (ms * 1000.0) as i64)
            .map_err(|why| refused_answer(&why))?;
        let (offset_us, bound_us) = ((t0 + t1) / 2 - registry_us, (t1 - t0) / 2);
        shared::set_offset(offset_us, bound_us);
        Ok((row, offset_us, bound_us))
    }

    /// Claims a worker id: measures the clock offset first (refused beyond
    /// `idgen.registry_max_clock_offset_ms`), then calls `idgen_registry_claim`.
    fn claim(&mut self) -> Result<(), Box<Failure>> {
        let (hello, offset_us, bound_us) = self.call(
            c"SELECT extract(epoch FROM registry_now) OPERATOR(pg_catalog.*) 1000::pg_catalog.numeric, \
              version, NULL, pg_catalog.current_setting('synchronous_standby_names'), \
              (SELECT claims_until FROM @extschema@.idgen_registry_probation()) \
              FROM @extschema@.idgen_registry_hello()",
            &[],
            Wait::Interruptible,
        )?;
        self.warn_unless_synchronous(&hello);
        if let Some(max_ms) = guc::registry_max_clock_offset_ms() {
            let off_us = offset_us
                .unsigned_abs()
                .saturating_sub(bound_us.unsigned_abs());
            if off_us > max_ms * 1000 {
                shared::set_state(State::Refused);
                return Err(Failure::new(
                    "53400",
                    &format!(
                        "this server's clock is {:.1} ms off the registry's (within {:.1} ms), more than idgen.registry_max_clock_offset_ms = {max_ms}",
                        offset_us as f64 / 1000.0,
                        bound_us as f64 / 1000.0
                    ),
                    Some("Uniqueness does not depend on the clocks, but the order of ids across servers does."),
                    Some("Synchronize this server's clock (NTP), or raise idgen.registry_max_clock_offset_ms."),
                ).into());
            }
        }
        let (epoch_ms, worker_bits, sequence_bits, tick_ms) = lease::fleet_layout();
        let wanted = match guc::worker_id_setting() {
            guc::WorkerIdSetting::Fixed(w) => Some(w.to_string()),
            _ => None,
        };
        let id = &self.identity;
        let lease_ms = guc::registry_lease_ms();
        let params = [
            Some(id.node_name.clone()),
            Some(crate::identity::incarnation().to_owned()),
            Some(crate::identity::secret().to_owned()),
            Some(id.system_identifier.clone()),
            Some(id.timeline.to_string()),
            wanted,
            Some(epoch_ms.to_string()),
            Some(worker_bits.to_string()),
            Some(sequence_bits.to_string()),
            Some(tick_ms.to_string()),
            Some(lease_ms.to_string()),
            Some(guc::registry_renew_interval_ms().to_string()),
            Some(format!("{}", offset_us as f64 / 1000.0)),
            Some(id.port.to_string()),
            Some(lease::own_reservation_end().to_string()),
        ];
        let (row, _, bound_us) = self
            .call(
                c"SELECT extract(epoch FROM registry_now) OPERATOR(pg_catalog.*) 1000::pg_catalog.numeric, \
                  worker_id, floor_tick, fence_tick, \
                  extract(epoch FROM expires_at) OPERATOR(pg_catalog.*) 1000::pg_catalog.numeric, previous_holder \
                  FROM @extschema@.idgen_registry_claim($1::pg_catalog.text, $2::pg_catalog.text, \
                  $3::pg_catalog.text, $4::pg_catalog.text, $5::pg_catalog.int4, $6::pg_catalog.int4, \
                  $7::pg_catalog.int8, $8::pg_catalog.int4, $9::pg_catalog.int4, $10::pg_catalog.int4, \
                  $11::pg_catalog.int4, $12::pg_catalog.int4, $13::pg_catalog.float8, $14::pg_catalog.int4, \
                  $15::pg_catalog.int8)",
                &params,
                Wait::Interruptible,
            )
            .inspect_err(|_| shared::set_state(State::Refused))?;
        let layout = answer::Layout {
            epoch_ms,
            worker_bits,
            tick_ms,
        };
        let answer::Claim {
            worker,
            floor,
            fence,
            expires_ms,
        } = answer::claim(&row, layout, answer::Lease { lease_ms, bound_us }).map_err(|why| {
            shared::set_state(State::Refused);
            refused_answer(&format!("idgen_registry_claim: {why}"))
        })?;
        lease::grant(Grant {
            worker,
            floor_tick: floor,
            fence_end: fence + 1,
        });
        let s = shared::shared();
        s.floor_tick
            .store(floor, std::sync::atomic::Ordering::Release);
        self.renewed(expires_ms, false);
        self.grant = Some((worker, floor));
        let previous = row.get(5).cloned().flatten();
        let now_ms = crate::time::wall_clock_unix_ms();
        pgrx::log!(
            "idgen registry client: node {} holds worker id {worker} (incarnation {}){}; ids start {} ms ahead of the clock",
            self.identity.node_name,
            crate::identity::incarnation(),
            previous.map_or(String::new(), |p| format!(", after {p}")),
            lease::head_start_ms(now_ms)
        );
        Ok(())
    }

    /// Without a worker id: shows the registry this server's global segments' marks, as a
    /// renewal does.
    fn report(&mut self) -> Result<(), Box<Failure>> {
        let (names, marks) = global_marks();
        let params = [
            Some(self.identity.node_name.clone()),
            Some(crate::identity::incarnation().to_owned()),
            Some(names),
            Some(marks),
            Some(guc::registry_renew_interval_ms().to_string()),
        ];
        let (row, _, _) = self.call(
            c"SELECT extract(epoch FROM registry_now) OPERATOR(pg_catalog.*) 1000::pg_catalog.numeric, \
              regression FROM @extschema@.idgen_registry_report($1::pg_catalog.text, $2::pg_catalog.text, \
              $3::pg_catalog.text[], $4::pg_catalog.int8[], $5::pg_catalog.int4)",
            &params,
            Wait::Interruptible,
        )?;
        if let Some(regression) = row.get(1).cloned().flatten() {
            return Err(Failure::new("55000", &regression, None, Some(RESOLVE_HINT)).into());
        }
        Ok(())
    }

    /// Warns (once per start) when the registry's commits are not synchronous: a registry that
    /// can lose a commit (`synchronous_commit` off or local, or no synchronous standby to fail
    /// over to) can rewind fences and marks; nodes detect it and stop (README "A registry that
    /// lost commits"), which is an outage the operator avoids with synchronous replication.
    fn warn_unless_synchronous(&mut self, hello: &[Option<String>]) {
        if self.warned_synchronous {
            return;
        }
        // (Its synchronous_commit is at least `on` in idgen's sessions: `libpq::connect`.)
        let standbys = hello.get(3).cloned().flatten().unwrap_or_default();
        if !standbys.trim().is_empty() {
            return;
        }
        self.warned_synchronous = true;
        pgrx::warning!(
            "idgen registry client: the registry can lose commits: it has no synchronous standby (synchronous_standby_names is empty): a failover loses commits; nodes then stop until an operator resolves it (README \"A registry that lost commits\")"
        );
    }

    /// Renews the lease of `worker`: moves the fence up. Shows the registry the fence this
    /// server has confirmed (a registry below it has lost commits) and the node names of this
    /// server's streaming standbys (the ones that may succeed it by promotion). A refusal
    /// (55006) means the registry gave the worker id to another server after this one's lease
    /// expired: the state becomes `lost`, and ids stay below the last fence until the server
    /// restarts. A registry that lost commits (the answer's regression) is not believed: the
    /// fence stays, state `regressed`, until an operator resolves it on the registry.
    fn renew(&mut self, worker: u64) -> Result<(), Box<Failure>> {
        let confirmed = lease::fence_end().saturating_sub(1);
        // SAFETY: in the registry client, attached to shared memory, between calls.
        let mut standbys = unsafe { crate::pgver::streaming_standby_names() };
        // A standby streaming under this server's own name (a copied cluster_name) is not
        // vouched for: a restored copy of this server would carry the same name.
        standbys.retain(|n| *n != self.identity.node_name);
        let lease_ms = guc::registry_lease_ms();
        let now = Instant::now();
        for name in standbys {
            self.standbys_seen.insert(name, now);
        }
        let lease = Duration::from_millis(lease_ms);
        self.standbys_seen
            .retain(|_, seen| now.duration_since(*seen) <= lease);
        let standbys: Vec<String> = self.standbys_seen.keys().cloned().collect();
        let (names, marks) = global_marks();
        let params = [
            Some(worker.to_string()),
            Some(crate::identity::incarnation().to_owned()),
            Some(crate::identity::secret().to_owned()),
            Some(lease_ms.to_string()),
            Some(guc::registry_renew_interval_ms().to_string()),
            Some(format!(
                "{}",
                shared::shared()
                    .offset_us
                    .load(std::sync::atomic::Ordering::Relaxed) as f64
                    / 1000.0
            )),
            Some(confirmed.to_string()),
            Some(text_array(&standbys)),
            Some(names),
            Some(marks),
        ];
        let result = self.call(
            c"SELECT extract(epoch FROM registry_now) OPERATOR(pg_catalog.*) 1000::pg_catalog.numeric, \
              fence_tick, extract(epoch FROM expires_at) OPERATOR(pg_catalog.*) 1000::pg_catalog.numeric, \
              regression FROM @extschema@.idgen_registry_renew($1::pg_catalog.int4, $2::pg_catalog.text, \
              $3::pg_catalog.text, $4::pg_catalog.int4, $5::pg_catalog.int4, $6::pg_catalog.float8, \
              $7::pg_catalog.int8, $8::pg_catalog.text[], $9::pg_catalog.text[], $10::pg_catalog.int8[])",
            &params,
            Wait::Interruptible,
        );
        let (row, bound_us) = match result {
            Ok((row, _, bound_us)) => (row, bound_us),
            Err(f) => {
                let lost = f.sqlstate_text() == "55006";
                shared::set_state(if lost { State::Lost } else { State::Renewing });
                return Err(f);
            }
        };
        if let Some(regression) = row.get(3).cloned().flatten() {
            shared::set_state(State::Regressed);
            return Err(Failure::new(
                "55000",
                &regression,
                Some("Ids continue only below the fence this server had confirmed."),
                Some(RESOLVE_HINT),
            )
            .into());
        }
        let (epoch_ms, worker_bits, _, tick_ms) = lease::fleet_layout();
        let layout = answer::Layout {
            epoch_ms,
            worker_bits,
            tick_ms,
        };
        let (fence, expires) = answer::renewal(
            &row,
            layout,
            answer::Lease { lease_ms, bound_us },
            confirmed,
        )
        .map_err(|why| {
            shared::set_state(State::Renewing);
            refused_answer(&format!("idgen_registry_renew: {why}"))
        })?;
        if fence < confirmed {
            // Cannot happen with a registry of this version (it never answers below what the
            // node showed it); never believed if it does.
            shared::set_state(State::Regressed);
            return Err(Failure::new(
                "55000",
                &format!("the registry renewed the lease up to tick {fence}, below tick {confirmed} that it had confirmed: the registry has lost commits"),
                None,
                None,
            )
            .into());
        }
        lease::renewed(fence + 1);
        self.renewed(expires, true);
        Ok(())
    }

    /// Notes a successful claim or renewal.
    fn renewed(&self, expires_ms: i64, renewal: bool) {
        use std::sync::atomic::Ordering::Relaxed;
        let s = shared::shared();
        s.lease_expires_ms.store(expires_ms, Relaxed);
        s.last_renewal_ms
            .store(crate::time::wall_clock_unix_ms(), Relaxed);
        if renewal {
            s.renewals.fetch_add(1, Relaxed);
        }
        shared::set_state(State::Held);
    }

    /// At shutdown: ends the lease locally (no id past the reservation in force) and records
    /// the final reservation in the registry, within [`RELEASE_TIMEOUT`], on the connection in
    /// hand only: a shutdown never connects (or reconnects after an interrupted call), it
    /// leaves the lease to expire instead.
    fn release(&mut self) {
        let Some((worker, floor)) = self.grant else {
            return;
        };
        let final_tick = lease::release(floor);
        shared::set_state(State::Released);
        let Some(conn) = self.conn.as_mut() else {
            pgrx::log!(
                "idgen registry client: worker id {worker} not released (no connection to the registry); its next holder starts above the lease's end instead"
            );
            return;
        };
        let deadline = Instant::now() + RELEASE_TIMEOUT;
        let params = [
            Some(worker.to_string()),
            Some(crate::identity::incarnation().to_owned()),
            Some(crate::identity::secret().to_owned()),
            Some(final_tick.to_string()),
        ];
        let released = conn.query(
            c"SELECT @extschema@.idgen_registry_release($1::pg_catalog.int4, $2::pg_catalog.text, \
              $3::pg_catalog.text, $4::pg_catalog.int8)",
            &params,
            deadline,
            Wait::UntilDeadline,
        );
        let released =
            released.map(|rows| answer::boolean(rows.first().map(Vec::as_slice), "released"));
        match released {
            Ok(Ok(true)) => {
                pgrx::log!("idgen registry client: released worker id {worker} at tick {final_tick}")
            }
            Ok(Ok(false)) => pgrx::log!(
                "idgen registry client: worker id {worker} was not released: the registry no longer has it leased to this server"
            ),
            Ok(Err(why)) => pgrx::log!(
                "idgen registry client: the registry's answer to idgen_registry_release is refused: {why}; worker id {worker} may not be released, its next holder starts above the lease's end instead"
            ),
            Err(e) => pgrx::log!(
                "idgen registry client: could not release worker id {worker} ({e}); its next holder starts above the lease's end instead"
            ),
        }
    }
}

/// The failure of an error the registry raised, as it raised it; 42883 (no idgen functions)
/// and 42501 (no privilege) get a hint of what to do on the registry.
fn remote_failure(r: &conn::Remote) -> Failure {
    let hint = match r.sqlstate.as_str() {
        "42883" => {
            Some("Run CREATE EXTENSION idgen in the registry database named by idgen.registry.")
        }
        "42501" => {
            Some("On the registry: GRANT idgen_registry TO <the role idgen.registry connects as>.")
        }
        _ => r.hint.as_deref(),
    };
    Failure::new(
        &r.sqlstate,
        &format!("the registry refused: {}", r.message),
        r.detail.as_deref(),
        hint,
    )
}

/// A PostgreSQL array literal of `names` (node names: ASCII letters, digits and `._-:`; any
/// other name is left out, the registry would refuse it as a node name anyway).
fn text_array(names: &[String]) -> String {
    let kept: Vec<&str> = names
        .iter()
        .map(String::as_str)
        .filter(|n| !n.is_empty() && n.len() <= guc::MAX_NODE_NAME && plain_name(n))
        .collect();
    format!("{{{}}}", kept.join(","))
}

/// An answer of the registry outside what its functions can answer (08P01, protocol
/// violation), refused with `why` (the field and its value, [`answer`]): nothing of it is
/// installed.
fn refused_answer(why: &str) -> Box<Failure> {
    Failure::new(
        "08P01",
        &format!("the registry's answer is refused: {why}"),
        Some("Nothing of it was installed."),
        Some("Check the registry's idgen functions (a registry database's owner or a superuser may have replaced them) and that idgen.registry reaches the registry (sslmode=verify-full)."),
    )
    .into()
}

/// What an operator does about a registry that lost commits.
const RESOLVE_HINT: &str = "On the registry, as a superuser, once every node has renewed: SELECT * FROM idgen_registry_resolve(); (README \"A registry that lost commits\").";

/// The global segments cached on this server and their marks, and the marks of the global
/// serials' counters it took, as two PostgreSQL array literals (names: `{"a","b"}`, marks:
/// `{1,2}`).
fn global_marks() -> (String, String) {
    let mut marks = crate::segment::global_marks();
    marks.extend(crate::serial::registry_marks());
    let names: Vec<String> = marks
        .iter()
        .map(|(n, _)| format!("\"{}\"", n.replace('\\', "\\\\").replace('"', "\\\"")))
        .collect();
    let values: Vec<String> = marks.iter().map(|(_, m)| m.to_string()).collect();
    (
        format!("{{{}}}", names.join(",")),
        format!("{{{}}}", values.join(",")),
    )
}

/// `d` give or take 20 %, so that many nodes started together do not renew in step.
fn jittered(d: Duration) -> Duration {
    // SAFETY: pg_global_prng_state is this process's PRNG state, seeded at process start and
    // used by this thread alone.
    let r = unsafe { pg_sys::pg_prng_double(&raw mut pg_sys::pg_global_prng_state) };
    d.mul_f64(0.8 + 0.4 * r)
}
