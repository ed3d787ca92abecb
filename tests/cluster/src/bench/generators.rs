//! The generators measured side by side: idgen's two, PostgreSQL's own, and the floors.

/// One generator, and how each measurement uses it (`None`: not applicable).
#[derive(Debug, Clone, Copy)]
pub struct Generator {
    /// Its name in the report.
    pub name: &'static str,
    /// The expression of the bulk statement.
    pub bulk: Option<&'static str>,
    /// The primary key column of the insert table (`id <this>`); `None` with `insert_keys`.
    pub column: Option<&'static str>,
    /// The insert supplies the keys itself (`SELECT g, g`): the floor of the insert.
    pub insert_keys: bool,
    /// The pgbench statement.
    pub statement: Option<&'static str>,
    /// Bulk and insert sizes are capped at [`Config::ticket_cap`].
    pub capped: bool,
    /// The first `server_version_num` that has it (`None`: every supported version).
    pub since: Option<i32>,
}

impl Generator {
    /// Whether a server of `server_version_num` has it.
    pub fn available(&self, server_version_num: i32) -> bool {
        self.since.is_none_or(|v| server_version_num >= v)
    }
}

/// The generators a server of `server_version_num` has, in report order.
pub fn available(server_version_num: i32) -> impl Iterator<Item = &'static Generator> {
    GENERATORS
        .iter()
        .filter(move |g| g.available(server_version_num))
}

/// `nextval` CACHE 1, the reference of the "÷ nextval CACHE 1" column.
pub const NEXTVAL_CACHE_1: &str = "nextval CACHE 1";
/// The bulk floor (a constant) and the per-statement ceiling (`SELECT 1`).
pub const CONSTANT: &str = "constant (floor / SELECT 1)";
/// The no-op pgrx function.
pub const CALL_FLOOR: &str = "no-op pgrx function";
/// idgen's generators.
pub const SNOWFLAKE: &str = "snowflake_nextval()";
/// idgen's version-7 uuid from the Snowflake generator.
pub const SNOWFLAKE_UUID: &str = "snowflake_uuid()";
/// idgen's segment generator.
pub const SEGMENT: &str = "segment_nextval('s')";
/// The insert reference of the targets.
pub const BIGSERIAL: &str = "bigserial";
/// PostgreSQL 18's time-ordered UUID.
pub const UUIDV7: &str = "uuidv7()";
/// `nextval` CACHE 1000.
pub const NEXTVAL_CACHE_1000: &str = "nextval CACHE 1000";

/// The generators, in report order.
pub const GENERATORS: &[Generator] = &[
    Generator {
        name: SNOWFLAKE,
        bulk: Some("snowflake_nextval()"),
        column: Some("bigint PRIMARY KEY DEFAULT snowflake_nextval()"),
        insert_keys: false,
        statement: Some("SELECT snowflake_nextval();"),
        capped: false,
        since: None,
    },
    Generator {
        name: SNOWFLAKE_UUID,
        bulk: Some("snowflake_uuid()"),
        column: Some("uuid PRIMARY KEY DEFAULT snowflake_uuid()"),
        insert_keys: false,
        statement: Some("SELECT snowflake_uuid();"),
        capped: false,
        since: None,
    },
    Generator {
        name: SEGMENT,
        bulk: Some("segment_nextval('s')"),
        column: Some("bigint PRIMARY KEY DEFAULT segment_nextval('s')"),
        insert_keys: false,
        statement: Some("SELECT segment_nextval('s');"),
        capped: false,
        since: None,
    },
    Generator {
        name: NEXTVAL_CACHE_1,
        bulk: Some("nextval('bench_cache_1')"),
        column: Some("bigint PRIMARY KEY DEFAULT nextval('bench_cache_1')"),
        insert_keys: false,
        statement: Some("SELECT nextval('bench_cache_1');"),
        capped: false,
        since: None,
    },
    Generator {
        name: NEXTVAL_CACHE_1000,
        bulk: Some("nextval('bench_cache_1000')"),
        column: Some("bigint PRIMARY KEY DEFAULT nextval('bench_cache_1000')"),
        insert_keys: false,
        statement: Some("SELECT nextval('bench_cache_1000');"),
        capped: false,
        since: None,
    },
    Generator {
        name: BIGSERIAL,
        bulk: Some("nextval('bench_serial_id_seq')"),
        column: Some("bigserial PRIMARY KEY"),
        insert_keys: false,
        statement: Some("SELECT nextval('bench_serial_id_seq');"),
        capped: false,
        since: None,
    },
    Generator {
        name: "gen_random_uuid()",
        bulk: Some("gen_random_uuid()"),
        column: Some("uuid PRIMARY KEY DEFAULT gen_random_uuid()"),
        insert_keys: false,
        statement: Some("SELECT gen_random_uuid();"),
        capped: false,
        since: None,
    },
    Generator {
        name: UUIDV7,
        bulk: Some("uuidv7()"),
        column: Some("uuid PRIMARY KEY DEFAULT uuidv7()"),
        insert_keys: false,
        statement: Some("SELECT uuidv7();"),
        capped: false,
        since: Some(180000),
    },
    Generator {
        name: "ticket table (UPDATE ... RETURNING)",
        bulk: Some("bench_ticket_next()"),
        column: Some("bigint PRIMARY KEY DEFAULT bench_ticket_next()"),
        insert_keys: false,
        statement: Some("UPDATE bench_ticket SET v = v + 1 WHERE id = 1 RETURNING v;"),
        capped: true,
        since: None,
    },
    Generator {
        name: CONSTANT,
        bulk: Some("1::bigint"),
        column: None,
        insert_keys: true,
        statement: Some("SELECT 1;"),
        capped: false,
        since: None,
    },
    Generator {
        name: CALL_FLOOR,
        bulk: Some("bench_call_floor()"),
        column: None,
        insert_keys: false,
        statement: Some("SELECT bench_call_floor();"),
        capped: false,
        since: None,
    },
];
