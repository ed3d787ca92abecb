//! The registry client: a background worker without a database, one per server with
//! `idgen.registry` set (DESIGN.md §6). It claims this server's worker id from the registry
//! once, then renews the lease every `idgen.registry_renew_interval` (with jitter), and
//! releases it at a clean shutdown with the final reservation. Each grant and renewal moves the
//! generator's fence (`snowflake::lease`); a failure is kept for the callers and the status
//! view, and logged when it changes. Every step begins with a hello, which shows the registry
//! the highest revision this server saw (one above the registry's own opens its recovery) and
//! says whether a recovery is open; in one, the client reports this server's worker id,
//! reservation and global marks. It starts once recovery has ended: a standby issues no ids,
//! and a promoted one claims like any other server as it becomes writable.

use std::ffi::CStr;
use std::time::{Duration, Instant};

use idgen_core::registry::answer;
use pgrx::bgworkers::{BackgroundWorkerBuilder, BgWorkerStartTime};
use pgrx::pg_sys;
use pgrx::prelude::*;

use super::shared::{self, State};
use crate::failure::{Failure, FixedText};
use crate::guc;
use crate::libpq::{self, Conn, ConnError, Remote, Wait};
use crate::snowflake::lease::{self, Grant};
use crate::worker::{self, Sigint, Sigterm};

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
/// releasing the lease if the postmaster sent it (a shutdown).
///
/// SIGTERM is a flag that notes its sender ([`Sigterm::Flag`]), not `die`: a call in flight
/// ends at once ([`Wait::Interruptible`]), and the loop then tells a shutdown (release the
/// lease, within [`RELEASE_TIMEOUT`]) from a `kill -TERM` (keep it). SIGHUP reloads the
/// configuration between steps.
// SAFETY: called by PostgreSQL's background worker machinery (bgworker_main) in a new process
// attached to shared memory, with signals blocked until install_signal_handlers unblocks them;
// #[pg_guard] turns a Rust panic into a PostgreSQL ERROR (the worker exits, and is restarted).
#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn idgen_registry_client_main(_arg: pg_sys::Datum) {
    worker::install_signal_handlers(Sigterm::Flag, Sigint::Unchanged);
    let mut client = Client::new();
    loop {
        if worker::terminating() {
            if worker::terminated_by_postmaster() {
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
        worker::reload_if_pending();
        let pause = client.step();
        if !worker::terminating() {
            worker::wait(pause);
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
    /// The registry no longer leases the granted worker id to this server (55006 at a
    /// renewal): the next step claims that id again, and only that one.
    lost: bool,
    /// The last failure logged (its SQLSTATE and its message without digits), so that a
    /// failure is logged once per change of state, not at every retry with a new number.
    logged: Option<String>,
    /// The registry's longest lease (`idgen.registry_max_lease` there), as its last hello said:
    /// the client says hello at least every third of it, so that the registry hears from every
    /// live node within its ranges' wait after an epoch, whatever this node's own settings.
    registry_max_lease_ms: Option<u64>,
}

/// What a hello answered.
struct Hello {
    /// The registry's recovery, if one is open.
    recovery: Option<String>,
    /// This node has reported in the open recovery.
    reported: bool,
    /// This server's clock offset from the registry's, and its bound, µs.
    offset_us: i64,
    bound_us: i64,
}

impl Client {
    fn new() -> Self {
        let identity = Identity::of_this_server();
        shared::update_texts(|t| t.node_name = FixedText::new(&identity.node_name));
        crate::marks::set_node_name(&identity.node_name);
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
        // The catalogs' marks into the marks file, for a recovery's report.
        super::catalog_marks::launch_at_start();
        // The highest revision a take of this server was answered with, before its restart: a
        // registry that lost those takes is found at the first hello.
        match crate::marks::recorded() {
            Ok(r) if r.node == identity.node_name => {
                crate::marks::note_revision(r.revision);
            }
            Ok(_) => {}
            Err(why) => pgrx::log!("idgen registry client: {why}"),
        }
        Self {
            identity,
            conn: None,
            grant,
            lost: false,
            logged: None,
            registry_max_lease_ms: None,
        }
    }

    /// One hello, then one claim or renewal; returns how long to wait before the next. Without
    /// a worker id (`idgen.worker_id` unset, e.g. a server that only draws global segments)
    /// nothing is claimed, and the hello is the contact.
    fn step(&mut self) -> Duration {
        let interval = Duration::from_millis(
            self.registry_max_lease_ms
                .map_or(u64::MAX, |m| (m / 3).max(1))
                .min(guc::registry_renew_interval_ms()),
        );
        let hello = match self.hello() {
            Ok(hello) => hello,
            Err(failure) => {
                if self.grant.is_some() && !self.lost {
                    shared::set_state(State::Renewing);
                }
                self.failed(*failure);
                // Soon again: after a registry's restart or failover the hello is how this node
                // shows the registry what it saw, within the registry's wait for ranges.
                return jittered(interval.min(CLAIM_RETRY));
            }
        };
        // The report waits for the catalogs' marks (a promoted standby's marks file lacks its
        // old primary's ranges; its catalogs have them).
        if hello.recovery.is_some() && !hello.reported && super::catalog_marks::merged() {
            if let Err(failure) = self.report_marks() {
                self.failed(*failure);
            }
        }
        let result =
            if self.grant.is_none() && guc::worker_id_setting() == guc::WorkerIdSetting::Unset {
                shared::set_state(State::Unclaimed);
                Ok(())
            } else {
                match self.grant {
                    Some((worker, _)) if !self.lost => self.renew(worker),
                    _ => self.claim(&hello),
                }
            };
        match result {
            Ok(()) => {
                self.logged = None;
                if let Some(recovery) = hello.recovery {
                    // A lease is still renewed; nothing new is granted or handed out.
                    shared::set_state(State::Recovering);
                    lease::fail(Failure::new(
                        "55000",
                        &format!("the registry refused: {recovery}"),
                        Some("Held leases are renewed; no worker id is granted and no range handed out until its operator completes the recovery."),
                        Some(RECOVER_HINT),
                    ));
                }
                jittered(interval)
            }
            Err(failure) => {
                self.failed(*failure);
                jittered(if self.grant.is_none() {
                    interval.min(CLAIM_RETRY)
                } else {
                    interval
                })
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
            let conn = libpq::connect(&conninfo, deadline, wait).map_err(|e| match e {
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
    /// first column of the single row must be the registry's clock in Unix ms. Counted, with
    /// its outcome, for monitoring (`crate::marks::note_call`).
    fn call(
        &mut self,
        sql: &CStr,
        params: &[Option<String>],
        wait: Wait,
    ) -> Result<Answer, Box<Failure>> {
        let result = self.call_uncounted(sql, params, wait);
        crate::marks::note_call(result.is_ok());
        result
    }

    /// [`Client::call`] without counting it.
    fn call_uncounted(
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

    /// The hello that begins every step (`idgen_registry_hello`, a statement of its own, so
    /// that what it records commits whatever the claim or renewal after it does): shows the
    /// registry this server's node name and the highest revision it saw, and learns whether a
    /// recovery is open.
    fn hello(&mut self) -> Result<Hello, Box<Failure>> {
        let seen = crate::marks::seen_revision();
        let params = [
            Some(self.identity.node_name.clone()),
            Some(crate::identity::incarnation().to_owned()),
            Some(seen.to_string()),
            Some(self.identity.port.to_string()),
        ];
        let asked_at = crate::marks::contact_clock_ms();
        let (row, offset_us, bound_us) = self.call(
            c"SELECT extract(epoch FROM registry_now) OPERATOR(pg_catalog.*) 1000::pg_catalog.numeric, \
              version, revision, recovery, reported, max_lease_ms, \
              (extract(epoch FROM recovered_at) OPERATOR(pg_catalog.*) 1000::pg_catalog.numeric)::pg_catalog.int8, \
              ranges_kept \
              FROM @extschema@.idgen_registry_hello($1::pg_catalog.text, $2::pg_catalog.text, \
              $3::pg_catalog.int8, $4::pg_catalog.int4)",
            &params,
            Wait::Interruptible,
        )?;
        let revision = answer::count(&row, 2, "revision")
            .map_err(|why| refused_answer(&format!("idgen_registry_hello: {why}")))?;
        crate::marks::note_revision(revision as i64);
        let reported = answer::boolean(Some(&row[4..]), "reported")
            .map_err(|why| refused_answer(&format!("idgen_registry_hello: {why}")))?;
        let max_lease_ms = answer::count(&row, 5, "max_lease_ms")
            .map_err(|why| refused_answer(&format!("idgen_registry_hello: {why}")))?;
        self.registry_max_lease_ms = Some(max_lease_ms.max(1));
        crate::marks::note_registry_max_lease(max_lease_ms.max(1) as i64);
        let recovery = row.get(3).cloned().flatten();
        let recovered_at_ms = match row.get(6).cloned().flatten() {
            None => 0,
            Some(text) => text
                .parse::<i64>()
                .map_err(|_| refused_answer("idgen_registry_hello: recovered_at is not a time"))?,
        };
        let ranges_kept = answer::boolean(Some(&row[7..]), "ranges_kept")
            .map_err(|why| refused_answer(&format!("idgen_registry_hello: {why}")))?;
        // A recovery completed since the last hello, without this node's report used in it
        // (skipped, or cut off the whole time): its numbers may be handed out again, so every
        // cached global range is dropped before this hello counts as a contact.
        if recovered_at_ms != crate::marks::recovered_at_seen() {
            if !ranges_kept {
                let segments = crate::segment::void_global_ranges();
                let counters = crate::serial::void_global_ranges();
                if segments + counters > 0 {
                    pgrx::log!(
                        "idgen registry client: the registry completed a recovery without this node's report; the cached ranges of {segments} global segment(s) and {counters} global serial counter(s) are dropped"
                    );
                }
            }
            crate::marks::note_recovered_at(recovered_at_ms);
        }
        // An open registry, or one whose recovery has this node's report: cached global ranges
        // go on serving (`crate::segment::check_registry_contact`). A recovery without it does
        // not renew them: an operator who completes it skipping this node finds its ranges
        // stopped, and dropped at its next hello.
        if recovery.is_none() || reported {
            crate::marks::note_contact(asked_at);
        }
        Ok(Hello {
            recovery,
            reported,
            offset_us,
            bound_us,
        })
    }

    /// In an open recovery: reports what this server holds (`idgen_registry_report_marks`):
    /// its worker id and the first tick its reservation never reached (the reservation file,
    /// which survives restarts), the marks of its global segments and global serials' counters,
    /// and the highest revision it saw.
    fn report_marks(&mut self) -> Result<(), Box<Failure>> {
        let (names, marks) = global_marks()?;
        let worker = self.grant.map(|(w, _)| w);
        let params = [
            Some(self.identity.node_name.clone()),
            Some(crate::identity::incarnation().to_owned()),
            worker.map(|w| w.to_string()),
            worker.map(|_| lease::own_reservation_end().to_string()),
            Some(names),
            Some(marks),
            Some(crate::marks::seen_revision().to_string()),
        ];
        self.call(
            c"SELECT extract(epoch FROM pg_catalog.clock_timestamp()) OPERATOR(pg_catalog.*) 1000::pg_catalog.numeric, \
              @extschema@.idgen_registry_report_marks($1::pg_catalog.text, $2::pg_catalog.text, \
              $3::pg_catalog.int4, $4::pg_catalog.int8, $5::pg_catalog.text[], $6::pg_catalog.int8[], \
              $7::pg_catalog.int8)",
            &params,
            Wait::Interruptible,
        )?;
        pgrx::log!(
            "idgen registry client: reported worker id {} and the marks of this server to the registry's recovery",
            worker.map_or("(none)".to_owned(), |w| w.to_string())
        );
        Ok(())
    }

    /// Claims a worker id (`idgen_registry_claim`), refused here beyond
    /// `idgen.registry_max_clock_offset_ms` as the step's hello measured it. After the registry
    /// stopped leasing the granted id to this server, only that id is claimed again: the
    /// generator goes on with its worker id, above the new floor.
    fn claim(&mut self, hello: &Hello) -> Result<(), Box<Failure>> {
        if let Some(max_ms) = guc::registry_max_clock_offset_ms() {
            let off_us = hello
                .offset_us
                .unsigned_abs()
                .saturating_sub(hello.bound_us.unsigned_abs());
            if off_us > max_ms * 1000 {
                shared::set_state(State::Refused);
                return Err(Failure::new(
                    "53400",
                    &format!(
                        "this server's clock is {:.1} ms off the registry's (within {:.1} ms), more than idgen.registry_max_clock_offset_ms = {max_ms}",
                        hello.offset_us as f64 / 1000.0,
                        hello.bound_us as f64 / 1000.0
                    ),
                    Some("Uniqueness does not depend on the clocks, but the order of ids across servers does."),
                    Some("Synchronize this server's clock (NTP), or raise idgen.registry_max_clock_offset_ms."),
                ).into());
            }
        }
        let (epoch_ms, worker_bits, sequence_bits, tick_ms) = lease::fleet_layout();
        let again = self.grant.filter(|_| self.lost).map(|(w, _)| w);
        let wanted = match (again, guc::worker_id_setting()) {
            (Some(w), _) => Some(w.to_string()),
            (None, guc::WorkerIdSetting::Fixed(w)) => Some(w.to_string()),
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
            Some(format!("{}", hello.offset_us as f64 / 1000.0)),
            Some(id.port.to_string()),
        ];
        let lost = self.lost;
        let (row, _, bound_us) = self
            .call(
                c"SELECT extract(epoch FROM registry_now) OPERATOR(pg_catalog.*) 1000::pg_catalog.numeric, \
                  worker_id, floor_tick, fence_tick, \
                  extract(epoch FROM expires_at) OPERATOR(pg_catalog.*) 1000::pg_catalog.numeric, previous_holder, \
                  revision \
                  FROM @extschema@.idgen_registry_claim($1::pg_catalog.text, $2::pg_catalog.text, \
                  $3::pg_catalog.text, $4::pg_catalog.text, $5::pg_catalog.int4, $6::pg_catalog.int4, \
                  $7::pg_catalog.int8, $8::pg_catalog.int4, $9::pg_catalog.int4, $10::pg_catalog.int4, \
                  $11::pg_catalog.int4, $12::pg_catalog.int4, $13::pg_catalog.float8, $14::pg_catalog.int4)",
                &params,
                Wait::Interruptible,
            )
            .inspect_err(|_| shared::set_state(if lost { State::Lost } else { State::Refused }))?;
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
            shared::set_state(if lost { State::Lost } else { State::Refused });
            refused_answer(&format!("idgen_registry_claim: {why}"))
        })?;
        if again.is_some_and(|w| w != worker) {
            shared::set_state(State::Lost);
            return Err(refused_answer(&format!(
                "idgen_registry_claim: worker_id {worker} is not the worker id {} this server claimed again",
                again.unwrap_or_default()
            )));
        }
        if let Ok(revision) = answer::count(&row, 6, "revision") {
            crate::marks::note_revision(revision as i64);
        }
        lease::grant(Grant {
            worker,
            floor_tick: floor,
            fence_end: fence + 1,
        });
        let s = shared::shared();
        s.floor_tick
            .fetch_max(floor, std::sync::atomic::Ordering::AcqRel);
        self.renewed(expires_ms, false);
        self.grant = Some((worker, floor));
        self.lost = false;
        let previous = row.get(5).cloned().flatten();
        let now_ms = crate::time::wall_clock_unix_ms();
        pgrx::log!(
            "idgen registry client: node {} holds worker id {worker} (incarnation {}){}{}; ids start {} ms ahead of the clock",
            self.identity.node_name,
            crate::identity::incarnation(),
            previous.map_or(String::new(), |p| format!(", after {p}")),
            if again.is_some() { ", claimed again" } else { "" },
            lease::head_start_ms(now_ms)
        );
        Ok(())
    }

    /// Renews the lease of `worker`: moves the fence up, and the floor when the registry granted
    /// an expired lease anew. A refusal (55006) means the registry no longer leases the id to
    /// this server (another server took it after this one's lease expired, or the registry has
    /// no lease of it): state `lost`, ids stay below the last fence, and the next step claims
    /// that same id again.
    fn renew(&mut self, worker: u64) -> Result<(), Box<Failure>> {
        let confirmed = lease::fence_end().saturating_sub(1);
        let lease_ms = guc::registry_lease_ms();
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
        ];
        let result = self.call(
            c"SELECT extract(epoch FROM registry_now) OPERATOR(pg_catalog.*) 1000::pg_catalog.numeric, \
              fence_tick, floor_tick, extract(epoch FROM expires_at) OPERATOR(pg_catalog.*) 1000::pg_catalog.numeric, \
              revision FROM @extschema@.idgen_registry_renew($1::pg_catalog.int4, $2::pg_catalog.text, \
              $3::pg_catalog.text, $4::pg_catalog.int4, $5::pg_catalog.int4, $6::pg_catalog.float8)",
            &params,
            Wait::Interruptible,
        );
        let (row, bound_us) = match result {
            Ok((row, _, bound_us)) => (row, bound_us),
            Err(f) => {
                let lost = f.sqlstate_text() == "55006";
                self.lost = lost;
                shared::set_state(if lost { State::Lost } else { State::Renewing });
                return Err(f);
            }
        };
        let (epoch_ms, worker_bits, _, tick_ms) = lease::fleet_layout();
        let layout = answer::Layout {
            epoch_ms,
            worker_bits,
            tick_ms,
        };
        let own_floor = self.grant.map_or(0, |(_, f)| f);
        let renewed = answer::renewal(
            &row,
            layout,
            answer::Lease { lease_ms, bound_us },
            confirmed,
            own_floor,
        )
        .map_err(|why| {
            shared::set_state(State::Renewing);
            refused_answer(&format!("idgen_registry_renew: {why}"))
        })?;
        if renewed.fence < confirmed {
            // Never from a registry of this version (a fence never moves back); never believed.
            shared::set_state(State::Renewing);
            return Err(Failure::new(
                "55000",
                &format!("the registry renewed the lease up to tick {}, below tick {confirmed} that it had confirmed: the registry has lost commits", renewed.fence),
                Some("Ids continue only below the fence this server had confirmed."),
                Some(RECOVER_HINT),
            )
            .into());
        }
        if let Ok(revision) = answer::count(&row, 4, "revision") {
            crate::marks::note_revision(revision as i64);
        }
        if renewed.floor > own_floor {
            // The lease had expired: granted anew from the registry's clock.
            lease::grant(Grant {
                worker,
                floor_tick: renewed.floor,
                fence_end: renewed.fence + 1,
            });
            shared::shared()
                .floor_tick
                .fetch_max(renewed.floor, std::sync::atomic::Ordering::AcqRel);
            self.grant = Some((worker, renewed.floor));
        } else {
            lease::renewed(renewed.fence + 1);
        }
        self.renewed(renewed.expires_ms, true);
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
fn remote_failure(r: &Remote) -> Failure {
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

/// What an operator does about a registry that is recovering.
const RECOVER_HINT: &str = "On the registry: SELECT * FROM idgen_registry_recovery; then, as a superuser, SELECT * FROM idgen_registry_recover(); (docs: Running on many servers, \"Recovering a registry\").";

/// The global segments' and global serials' counters' marks this server recorded
/// ([`crate::marks`]), as two PostgreSQL array literals (names: `{"a","b"}`, marks: `{1,2}`).
fn global_marks() -> Result<(String, String), Box<Failure>> {
    let recorded = crate::marks::recorded().map_err(|why| {
        Box::new(Failure::new(
            "58030",
            &format!("the marks of this server's global ranges cannot be read: {why}"),
            Some("Nothing is reported to the registry's recovery."),
            None,
        ))
    })?;
    let marks = recorded.marks;
    let names: Vec<String> = marks
        .keys()
        .map(|n| format!("\"{}\"", n.replace('\\', "\\\\").replace('"', "\\\"")))
        .collect();
    let values: Vec<String> = marks.values().map(|m| m.to_string()).collect();
    Ok((
        format!("{{{}}}", names.join(",")),
        format!("{{{}}}", values.join(",")),
    ))
}

/// `d` give or take 20 %, so that many nodes started together do not renew in step.
fn jittered(d: Duration) -> Duration {
    // SAFETY: pg_global_prng_state is this process's PRNG state, seeded at process start and
    // used by this thread alone.
    let r = unsafe { pg_sys::pg_prng_double(&raw mut pg_sys::pg_global_prng_state) };
    d.mul_f64(0.8 + 0.4 * r)
}
