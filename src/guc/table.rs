//! The table of idgen's settings: one private static per setting and one named struct per
//! setting (name, descriptions, bounds, context, unit; for text settings the check hook), in
//! the style of pg_search's `gucs.rs`. [`super::init`] defines them; [`super`]'s getters read
//! them. Nothing else touches the statics.

use std::ffi::{CStr, CString};

use pgrx::pg_sys;
use pgrx::{GucContext, GucFlags, GucSetting};

use super::check;

pub(super) static REGISTRY_LEASE: GucSetting<i32> = GucSetting::<i32>::new(60_000);
pub(super) static REGISTRY_RENEW_INTERVAL: GucSetting<i32> = GucSetting::<i32>::new(10_000);
pub(super) static REGISTRY_MAX_CLOCK_OFFSET_MS: GucSetting<i32> = GucSetting::<i32>::new(1000);
pub(super) static REGISTRY_SINGLE_SERVER: GucSetting<bool> = GucSetting::<bool>::new(false);
pub(super) static REGISTRY_MAX_LEASE: GucSetting<i32> = GucSetting::<i32>::new(60_000);
/// `idgen.id_bits`: the width of a whole Snowflake id, in bits; 63 (every positive `bigint`) by
/// default, 53 for ids that a JavaScript `Number` holds exactly (docs: Text forms, "Ids for JavaScript").
/// Time takes what worker and sequence bits leave of it. The bounds are the layout's
/// `MIN_ID_BITS` and `MAX_ID_BITS`, from idgen-core.
pub(super) static ID_BITS: GucSetting<i32> = GucSetting::<i32>::new(63);
pub(super) static WORKER_BITS: GucSetting<i32> = GucSetting::<i32>::new(10);
pub(super) static SEQUENCE_BITS: GucSetting<i32> = GucSetting::<i32>::new(12);
pub(super) static TIME_UNIT_MS: GucSetting<i32> = GucSetting::<i32>::new(1);
pub(super) static MAX_DRIFT_MS: GucSetting<i32> = GucSetting::<i32>::new(1000);
pub(super) static MAX_WAIT_MS: GucSetting<i32> = GucSetting::<i32>::new(5000);
pub(super) static SEQUENCE_JITTER: GucSetting<i32> = GucSetting::<i32>::new(0);
/// `idgen.segment_wait_timeout`'s default, in ms.
pub(super) const SEGMENT_WAIT_TIMEOUT_DEFAULT_MS: i32 = 10_000;
pub(super) static SEGMENT_WAIT_TIMEOUT: GucSetting<i32> =
    GucSetting::<i32>::new(SEGMENT_WAIT_TIMEOUT_DEFAULT_MS);
pub(super) static SEGMENT_REFILL_INTERVAL: GucSetting<i32> = GucSetting::<i32>::new(15 * 60 * 1000);
pub(super) static SEGMENT_MAX_STEP: GucSetting<i32> = GucSetting::<i32>::new(1_000_000);
pub(super) static SEGMENT_WORKER_IDLE_TIMEOUT: GucSetting<i32> = GucSetting::<i32>::new(60_000);
pub(super) static SEGMENT_CACHE_SIZE: GucSetting<i32> = GucSetting::<i32>::new(1024);
/// `idgen.serial_cache_size`: fast-serial counters (database, serial, period) cached in shared
/// memory at once. 4,096 by default, so that a few thousand counters drawn in turn (a serial per
/// tenant or branch) all stay cached: one that leaves the cache skips the rest of its range.
pub(super) static SERIAL_CACHE_SIZE: GucSetting<i32> = GucSetting::<i32>::new(4096);
pub(super) static SEGMENT_NODE_COUNT: GucSetting<i32> = GucSetting::<i32>::new(1);
pub(super) static SEGMENT_NODE_INDEX: GucSetting<i32> = GucSetting::<i32>::new(0);

/// The text of the default epoch.
const DEFAULT_EPOCH: &CStr = c"2024-01-01 00:00:00+00";

/// `idgen.worker_id`: this server's Snowflake worker id, `0..=2^worker_bits - 1` (0..=1023 by
/// default; checked against the layout at start), or `auto` (claimed from `idgen.registry`).
/// The default `-1` means "not set": `snowflake_nextval()` fails (SQLSTATE 55000) until the DBA
/// picks one. There is deliberately no valid default, as in pgEdge snowflake: two servers sharing
/// a worker id issue duplicate ids, the field's most common production failure.
pub(super) static WORKER_ID: GucSetting<Option<CString>> =
    GucSetting::<Option<CString>>::new(Some(c"-1"));
/// `idgen.registry`: the libpq connection string of the registry, empty for none.
pub(super) static REGISTRY: GucSetting<Option<CString>> =
    GucSetting::<Option<CString>>::new(Some(c""));
/// `idgen.node_name`: this server's name in the registry, empty for the default.
pub(super) static NODE_NAME: GucSetting<Option<CString>> =
    GucSetting::<Option<CString>>::new(Some(c""));
/// `idgen.epoch`: the instant at which Snowflake tick 0 starts, as a `timestamptz` literal.
pub(super) static EPOCH: GucSetting<Option<CString>> =
    GucSetting::<Option<CString>>::new(Some(DEFAULT_EPOCH));
pub(super) static SEGMENT_INTERLEAVE_FROM: GucSetting<Option<CString>> =
    GucSetting::<Option<CString>>::new(Some(c""));
pub(super) static SEGMENT_INTERLEAVE_UNTIL: GucSetting<Option<CString>> =
    GucSetting::<Option<CString>>::new(Some(c""));

/// The unit of an integer setting, as `SHOW` and `postgresql.conf` spell it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Unit {
    None,
    Milliseconds,
}

/// When an integer setting can change: at server start only, at a reload, or per session.
#[derive(Clone, Copy)]
pub(super) enum Context {
    Postmaster,
    Sighup,
    Userset,
}

impl Context {
    pub(super) fn guc(self) -> GucContext {
        match self {
            Context::Postmaster => GucContext::Postmaster,
            Context::Sighup => GucContext::Sighup,
            Context::Userset => GucContext::Userset,
        }
    }
}

/// One integer setting: everything `DefineCustomIntVariable` takes, by name.
pub(super) struct IntSetting {
    pub(super) name: &'static CStr,
    pub(super) short: &'static CStr,
    pub(super) long: &'static CStr,
    pub(super) value: &'static GucSetting<i32>,
    pub(super) min: i32,
    pub(super) max: i32,
    pub(super) context: Context,
    pub(super) unit: Unit,
}

impl IntSetting {
    pub(super) fn flags(&self) -> GucFlags {
        match self.unit {
            Unit::None => GucFlags::empty(),
            Unit::Milliseconds => GucFlags::UNIT_MS,
        }
    }
}

/// Every integer setting. None may silently fall back to its default (see [`init`]).
pub(super) static INT_SETTINGS: [IntSetting; 19] = [
    IntSetting {
        name: c"idgen.id_bits",
        short: c"Width of a whole Snowflake id, in bits: every id is below 2^id_bits.",
        long: c"63 (the default) uses every positive bigint; 53 keeps ids exact in JavaScript numbers. Only the time field shrinks: never lower it on a running fleet.",
        value: &ID_BITS,
        min: idgen_core::snowflake::layout::MIN_ID_BITS as i32,
        max: idgen_core::snowflake::layout::MAX_ID_BITS as i32,
        context: Context::Postmaster,
        unit: Unit::None,
    },
    IntSetting {
        name: c"idgen.worker_bits",
        short: c"Width of the worker id field of a Snowflake id, in bits.",
        long: c"Time bits are what is left of idgen.id_bits (63) after worker and sequence bits; at least 32 must be left.",
        value: &WORKER_BITS,
        min: 0,
        max: 31,
        context: Context::Postmaster,
        unit: Unit::None,
    },
    IntSetting {
        name: c"idgen.sequence_bits",
        short: c"Width of the sequence field of a Snowflake id, in bits.",
        long: c"2^sequence_bits ids per tick before the generator borrows the next tick.",
        value: &SEQUENCE_BITS,
        min: 0,
        max: 31,
        context: Context::Postmaster,
        unit: Unit::None,
    },
    IntSetting {
        name: c"idgen.time_unit_ms",
        short: c"Length of one tick of the Snowflake time field.",
        long: c"1 ms as Twitter's Snowflake; 10 ms as Sonyflake.",
        value: &TIME_UNIT_MS,
        min: 1,
        max: 86_400_000,
        context: Context::Postmaster,
        unit: Unit::Milliseconds,
    },
    IntSetting {
        name: c"idgen.max_drift_ms",
        short: c"How far ahead of the wall clock Snowflake ids may be stamped.",
        long: c"Within it calls never wait; beyond it they wait up to idgen.max_wait_ms for the clock. -1 means unbounded.",
        value: &MAX_DRIFT_MS,
        min: -1,
        max: i32::MAX,
        context: Context::Sighup,
        unit: Unit::Milliseconds,
    },
    IntSetting {
        name: c"idgen.max_wait_ms",
        short: c"How long a Snowflake call beyond idgen.max_drift_ms waits for the clock.",
        long: c"A call that cannot be served within it fails with SQLSTATE 53400. 0 never waits.",
        value: &MAX_WAIT_MS,
        min: 0,
        max: i32::MAX,
        context: Context::Sighup,
        unit: Unit::Milliseconds,
    },
    IntSetting {
        name: c"idgen.sequence_jitter",
        short: c"The first Snowflake id of a new tick starts at a random sequence below this bound.",
        long: c"0 (the default) starts at 0. Spreads low-traffic ids over id % N shards, as Leaf does with 100.",
        value: &SEQUENCE_JITTER,
        min: 0,
        max: i32::MAX,
        context: Context::Sighup,
        unit: Unit::None,
    },
    IntSetting {
        name: c"idgen.segment_wait_timeout",
        short: c"How long a segment_nextval waits for a range when both cached ranges are empty.",
        long: c"In milliseconds; 0 waits until cancelled. Past it the call fails with SQLSTATE 55P03.",
        value: &SEGMENT_WAIT_TIMEOUT,
        min: 0,
        max: i32::MAX,
        context: Context::Userset,
        unit: Unit::Milliseconds,
    },
    IntSetting {
        name: c"idgen.segment_refill_interval",
        short: c"Target lifetime of a cached segment range (Leaf's dynamic step).",
        long: c"A range used up faster doubles the next step; one lasting twice as long halves it.",
        value: &SEGMENT_REFILL_INTERVAL,
        min: 1,
        max: i32::MAX,
        context: Context::Sighup,
        unit: Unit::Milliseconds,
    },
    IntSetting {
        name: c"idgen.segment_max_step",
        short: c"Largest step the dynamic step of a segment grows to.",
        long: c"A segment whose own step is larger keeps its own step.",
        value: &SEGMENT_MAX_STEP,
        min: 1,
        max: idgen_core::segment::range::MAX_STEP,
        context: Context::Sighup,
        unit: Unit::None,
    },
    IntSetting {
        name: c"idgen.segment_node_count",
        short: c"How many servers share segment names, each taking its own blocks of numbers.",
        long: c"1 (the default): this server takes every block. Set the same count on every server, and the same step for each segment.",
        value: &SEGMENT_NODE_COUNT,
        min: 1,
        max: 1024,
        context: Context::Sighup,
        unit: Unit::None,
    },
    IntSetting {
        name: c"idgen.segment_node_index",
        short: c"This server's 0-based place among idgen.segment_node_count servers.",
        long: c"Server i takes the blocks of step numbers whose block number is i modulo the count. Unique per server.",
        value: &SEGMENT_NODE_INDEX,
        min: 0,
        max: 1023,
        context: Context::Sighup,
        unit: Unit::None,
    },
    IntSetting {
        name: c"idgen.segment_worker_idle_timeout",
        short: c"How long an idle idgen allocator worker stays before it exits.",
        long: c"In milliseconds. The next call that needs the worker starts it again.",
        value: &SEGMENT_WORKER_IDLE_TIMEOUT,
        min: 1,
        max: i32::MAX,
        context: Context::Sighup,
        unit: Unit::Milliseconds,
    },
    IntSetting {
        name: c"idgen.segment_cache_size",
        short: c"How many segments the shared cache of ranges holds at once, over all databases.",
        long: c"Not a limit on segment names: when the cache is full, the least recently used segment leaves it, giving its unused numbers back. About 1 kB of shared memory each.",
        value: &SEGMENT_CACHE_SIZE,
        min: 16,
        max: 1_000_000,
        context: Context::Postmaster,
        unit: Unit::None,
    },
    IntSetting {
        name: c"idgen.serial_cache_size",
        short: c"How many fast serial counters the shared cache holds at once, over all databases.",
        long: c"One counter per serial and period in use. Not a limit on serials: when the cache is full, the counter refilled longest ago (one of a past period first) leaves it, skipping the rest of its range; it comes back with the step it had. About 1 kB of shared memory each.",
        value: &SERIAL_CACHE_SIZE,
        min: 16,
        max: 1_000_000,
        context: Context::Postmaster,
        unit: Unit::None,
    },
    IntSetting {
        name: c"idgen.registry_lease",
        short: c"How long a worker id lease lasts past its last renewal in the registry.",
        long: c"A node whose renewals fail keeps issuing Snowflake ids up to the tick its lease was last confirmed to; a crashed node's successor starts above it, up to this far ahead of the clock. At most 120 s, the longest lease a registry grants.",
        value: &REGISTRY_LEASE,
        min: idgen_core::registry::MIN_LEASE_MS as i32,
        max: idgen_core::registry::MAX_LEASE_MS as i32,
        context: Context::Sighup,
        unit: Unit::Milliseconds,
    },
    IntSetting {
        name: c"idgen.registry_renew_interval",
        short: c"How often the registry client renews this server's worker id lease (with 20 % jitter).",
        long: c"At most a third of idgen.registry_lease is used, so that a registry hears from every live node within half a lease.",
        value: &REGISTRY_RENEW_INTERVAL,
        min: 10,
        max: idgen_core::registry::MAX_LEASE_MS as i32,
        context: Context::Sighup,
        unit: Unit::Milliseconds,
    },
    IntSetting {
        name: c"idgen.registry_max_lease",
        short: c"On a registry: the longest worker id lease it grants.",
        long: c"Set on the registry server (idgen in its shared_preload_libraries). Nodes asking for longer leases are refused. After each start, failover or recovery the registry grants no worker id for this long, and hands out no range for half of it.",
        value: &REGISTRY_MAX_LEASE,
        min: idgen_core::registry::MIN_LEASE_MS as i32,
        max: idgen_core::registry::MAX_LEASE_MS as i32,
        context: Context::Sighup,
        unit: Unit::Milliseconds,
    },
    IntSetting {
        name: c"idgen.registry_max_clock_offset_ms",
        short: c"Largest offset between this server's clock and the registry's at which a worker id is claimed.",
        long: c"Uniqueness never depends on it; the order of ids across servers does. -1 claims whatever the offset.",
        value: &REGISTRY_MAX_CLOCK_OFFSET_MS,
        min: -1,
        max: i32::MAX,
        context: Context::Sighup,
        unit: Unit::Milliseconds,
    },
];

/// One text setting, defined with a check hook that refuses a bad value (pgrx offers no
/// string GUC with a check hook, hence `DefineCustomStringVariable` directly).
pub(super) struct TextSetting {
    pub(super) name: &'static CStr,
    pub(super) short: &'static CStr,
    pub(super) long: &'static CStr,
    pub(super) value: &'static GucSetting<Option<CString>>,
    pub(super) boot: &'static CStr,
    pub(super) context: pg_sys::GucContext::Type,
    pub(super) check: check::Hook,
    /// The check of [`init`] (the hook's, as plain Rust): `Err` is the detail of the refusal.
    pub(super) parse: fn(&str) -> Result<(), String>,
    /// The value may hold a secret (a password in a connection string): superuser-only
    /// (`GUC_SUPERUSER_ONLY`: not in `SHOW` or `pg_settings` for others, as
    /// `primary_conninfo`), and never repeated in a message.
    pub(super) secret: bool,
}

/// Every text setting.
pub(super) static TEXT_SETTINGS: [TextSetting; 6] = [
    TextSetting {
        name: c"idgen.epoch",
        short: c"Instant at which Snowflake tick 0 starts (a timestamptz literal).",
        long: c"Fixed at server start; must not be in the future. Give an explicit UTC offset.",
        value: &EPOCH,
        boot: DEFAULT_EPOCH,
        context: pg_sys::GucContext::PGC_POSTMASTER,
        check: check::epoch,
        parse: check::epoch_text,
        secret: false,
    },
    TextSetting {
        name: c"idgen.segment_interleave_from",
        short: c"The current segment interleave hands out numbers above this one only (growing from N to M servers).",
        long: c"A bigint, or empty for none. See the docs: Running on many servers, Segments on several servers.",
        value: &SEGMENT_INTERLEAVE_FROM,
        boot: c"",
        context: pg_sys::GucContext::PGC_SIGHUP,
        check: check::fence,
        parse: check::fence_text,
        secret: false,
    },
    TextSetting {
        name: c"idgen.segment_interleave_until",
        short: c"The current segment interleave hands out numbers up to this one only (growing from N to M servers).",
        long: c"A bigint, or empty for none. See the docs: Running on many servers, Segments on several servers.",
        value: &SEGMENT_INTERLEAVE_UNTIL,
        boot: c"",
        context: pg_sys::GucContext::PGC_SIGHUP,
        check: check::fence,
        parse: check::fence_text,
        secret: false,
    },
    TextSetting {
        name: c"idgen.worker_id",
        short: c"Snowflake worker id of this server, unique among all servers sharing an id space, or auto.",
        long: c"From 0 to 2^idgen.worker_bits - 1 (1023 by default), or auto to claim one from idgen.registry. -1 (the default) means unset: snowflake_nextval() fails until it is set.",
        value: &WORKER_ID,
        boot: c"-1",
        context: pg_sys::GucContext::PGC_POSTMASTER,
        check: check::worker_id,
        parse: check::worker_id_text,
        secret: false,
    },
    TextSetting {
        name: c"idgen.registry",
        short: c"libpq connection string of the idgen registry that leases worker ids (empty: none).",
        long: c"key=value or URI; multi-host with target_session_attrs=read-write follows a registry failover. See the docs: Running on many servers.",
        value: &REGISTRY,
        boot: c"",
        context: pg_sys::GucContext::PGC_POSTMASTER,
        check: check::conninfo,
        parse: check::conninfo_text,
        secret: true,
    },
    TextSetting {
        name: c"idgen.node_name",
        short: c"This server's name in the idgen registry (empty: cluster_name, else one made from the system identifier and port).",
        long: c"1 to 63 bytes of letters, digits and . _ - : ; unique per live server.",
        value: &NODE_NAME,
        boot: c"",
        context: pg_sys::GucContext::PGC_POSTMASTER,
        check: check::node_name,
        parse: check::node_name_text,
        secret: false,
    },
];

/// One boolean setting: everything `DefineCustomBoolVariable` takes, by name.
pub(super) struct BoolSetting {
    pub(super) name: &'static CStr,
    pub(super) short: &'static CStr,
    pub(super) long: &'static CStr,
    pub(super) value: &'static GucSetting<bool>,
    pub(super) context: Context,
}

/// Every boolean setting.
pub(super) static BOOL_SETTINGS: [BoolSetting; 1] = [BoolSetting {
    name: c"idgen.registry_single_server",
    short: c"Declares this server, as a registry, a single durable server: it grants worker ids and hands out global ranges without a synchronous standby.",
    long: c"Without it a registry grants and hands out only while a synchronous standby streams; fsync = on and synchronous_commit = on are required either way. Read by the registry's functions, never by a node.",
    value: &REGISTRY_SINGLE_SERVER,
    context: Context::Sighup,
}];
