//! Pins that bad input fails safe (DESIGN.md §4): every SQL function of idgen × NULLs, empty,
//! overlong and non-ASCII names, names full of SQL punctuation, unknown names, counts of 0, -1
//! and huge, steps of 0, -1 and above the maximum, `segment_setval` backwards and past the
//! bigint maximum, negative ids, and worker ids, sequences and times out of range in
//! `snowflake_compose`. Each case must fail with its own SQLSTATE and a message naming the
//! argument, and leave `idgen_segment`, the segment cache, the Snowflake generator and the
//! session's currvals exactly as they were (compared after every case).
//!
//! Also the text form (`snowflake_format`, `snowflake_parse`: malformed texts, impossible
//! dates, times before the epoch, worker ids out of range) and `idgen_adopt_column` (NULLs,
//! unknown generators, missing or non-bigint columns, a sequence for a table) and the serial
//! functions (NULLs, bad formats naming the token, unknown resets and time zones, unknown and
//! existing serials).
//!
//! The STRICT decoders (`snowflake_decode`, `snowflake_timestamp`, `snowflake_compose`) return
//! NULL for a NULL argument, as PostgreSQL's own functions do, and an id from the future decodes
//! to its time (the decoders are IMMUTABLE: they never read the clock); both are pinned too.

use idgen_cluster_tests::{column, db_error, Cluster, One};
use postgres::Client;

/// One bad call: the SQL, the SQLSTATE it must fail with, and a word its message must contain
/// (the argument's name, or the offending value).
struct Case {
    sql: String,
    code: &'static str,
    names: String,
}

fn case(sql: impl Into<String>, code: &'static str, names: impl Into<String>) -> Case {
    Case {
        sql: sql.into(),
        code,
        names: names.into(),
    }
}

/// Names that are valid data but hostile as SQL text: quotes, spaces, `%`, `;`, comment
/// markers, non-ASCII, and a would-be injection.
const HOSTILE_NAMES: &[&str] = &[
    "it's",
    "two words",
    "100%",
    "a;b",
    "\"quoted\"",
    "x'); DROP TABLE idgen_segment; --",
    "$$ dollar $$",
    "ségment-номер-号段",
    "back\\slash",
    " leading and trailing ",
];

/// `name` as a SQL string literal (standard_conforming_strings is on).
fn literal(name: &str) -> String {
    format!("'{}'", name.replace('\'', "''"))
}

/// A statement built around a (quoted) argument.
type SqlOf = dyn Fn(&str) -> String;

/// Every case of the matrix. `known` is a segment that exists and has handed out numbers.
fn matrix(known: &str) -> Vec<Case> {
    let k = literal(known);
    let mut cases = Vec::new();

    // Every function that takes a segment name, with the rest of its arguments valid.
    let name_calls: [(&str, &SqlOf); 7] = [
        ("segment_create", &|n| format!("SELECT segment_create({n})")),
        ("segment_alter", &|n| {
            format!("SELECT segment_alter({n}, step => 5)")
        }),
        ("segment_drop", &|n| format!("SELECT segment_drop({n})")),
        ("segment_setval", &|n| {
            format!("SELECT segment_setval({n}, 1000000)")
        }),
        ("segment_nextval", &|n| {
            format!("SELECT segment_nextval({n})")
        }),
        ("segment_nextvals", &|n| {
            format!("SELECT * FROM segment_nextvals({n}, 3)")
        }),
        ("segment_currval", &|n| {
            format!("SELECT segment_currval({n})")
        }),
    ];
    for (function, call) in name_calls {
        cases.push(case(call("NULL"), "22004", "segment name"));
        cases.push(case(call("''"), "42602", "segment name"));
        cases.push(case(call("repeat('x', 64)"), "42622", "segment name"));
        // 32 two-byte characters: 64 bytes although only 32 characters.
        cases.push(case(call("repeat('é', 32)"), "42622", "segment name"));
        cases.push(case(call("repeat('x', 100000)"), "42622", "segment name"));
        if function != "segment_create" {
            cases.push(case(call("'no_such_segment'"), "42704", "no_such_segment"));
            for name in HOSTILE_NAMES {
                cases.push(case(call(&literal(name)), "42704", *name));
            }
        }
    }
    // segment_create of a name that exists.
    cases.push(case(format!("SELECT segment_create({k})"), "42710", known));

    // The other arguments, one at a time.
    cases.extend([
        case("SELECT segment_create('new_seg', NULL)", "22004", "start"),
        case("SELECT segment_create('new_seg', 1, NULL)", "22004", "step"),
        case(
            "SELECT segment_create('new_seg', -9223372036854775808)",
            "22003",
            "start",
        ),
        case(
            "SELECT segment_create('new_seg', description => repeat('d', 1025))",
            "22001",
            "description",
        ),
        case(
            "SELECT segment_create('new_seg', scope => NULL)",
            "22004",
            "scope",
        ),
        case(
            "SELECT segment_create('new_seg', scope => 'Global')",
            "22023",
            "scope",
        ),
        // This server has no registry (idgen.registry).
        case(
            "SELECT segment_create('new_seg', scope => 'global')",
            "55000",
            "idgen.registry",
        ),
        case(
            format!("SELECT segment_alter({k}, description => repeat('d', 1025))"),
            "22001",
            "description",
        ),
        case(
            format!("SELECT segment_setval({k}, NULL)"),
            "22004",
            "value",
        ),
        // Backwards: below numbers already handed out.
        case(format!("SELECT segment_setval({k}, 0)"), "22003", "value"),
        case(
            format!("SELECT segment_setval({k}, -9223372036854775808)"),
            "22003",
            "value",
        ),
        // Past the bigint maximum: PostgreSQL refuses the value before idgen sees it.
        case(
            format!("SELECT segment_setval({k}, 9223372036854775808::numeric::bigint)"),
            "22003",
            "bigint",
        ),
        case(
            format!("SELECT * FROM segment_nextvals({k}, NULL)"),
            "22004",
            "count",
        ),
        case("SELECT snowflake_nextvals(NULL)", "22004", "count"),
    ]);
    for step in ["0", "-1", "1000000001", "2147483647", "-2147483648"] {
        cases.push(case(
            format!("SELECT segment_create('new_seg', 1, {step})"),
            "22023",
            "step",
        ));
        cases.push(case(
            format!("SELECT segment_alter({k}, step => {step})"),
            "22023",
            "step",
        ));
    }
    for count in ["0", "-1", "2147483647", "-2147483648"] {
        cases.push(case(
            format!("SELECT * FROM segment_nextvals({k}, {count})"),
            "22023",
            "count",
        ));
        cases.push(case(
            format!("SELECT * FROM snowflake_nextvals({count})"),
            "22023",
            "count",
        ));
    }

    // Snowflake ids and their parts.
    for id in ["-1", "-9223372036854775808"] {
        cases.push(case(
            format!("SELECT * FROM snowflake_decode({id})"),
            "22023",
            "id",
        ));
        cases.push(case(
            format!("SELECT snowflake_timestamp({id})"),
            "22023",
            "id",
        ));
    }
    for worker in ["-1", "1024", "2147483647", "-2147483648"] {
        cases.push(case(
            format!("SELECT snowflake_compose(now(), {worker})"),
            "22003",
            "worker_id",
        ));
    }
    for sequence in ["-1", "4096", "2147483647"] {
        cases.push(case(
            format!("SELECT snowflake_compose(now(), 0, {sequence})"),
            "22003",
            "sequence",
        ));
    }
    for ts in [
        "'2000-01-01 00:00:00+00'",
        "'2300-01-01 00:00:00+00'",
        "'infinity'",
        "'-infinity'",
    ] {
        cases.push(case(
            format!("SELECT snowflake_compose({ts})"),
            "22008",
            "timestamp",
        ));
    }
    // The text form, adopting a column, serial numbers: SQL expressions, their SQLSTATE and
    // a word of the message. (The table bad_adopt and the serial known_serial, which has
    // handed out a number, are made by the test.)
    const CALLS: &[(&str, &str, &str)] = &[
        ("snowflake_format(-1)", "22023", "id"),
        ("snowflake_format(-1, 'INV')", "22023", "id"),
        ("snowflake_parse('')", "22P02", "text"),
        ("snowflake_parse('INV-2026')", "22P02", "text"),
        (
            "snowflake_parse('2026112208301512300x70042')",
            "22P02",
            "text",
        ),
        (
            "snowflake_parse('2026133108301512300070042')",
            "22P02",
            "month",
        ),
        (
            "snowflake_parse('2026022908301512300070042')",
            "22P02",
            "day",
        ),
        (
            "snowflake_parse('2026112224000000000070042')",
            "22P02",
            "time",
        ),
        (
            "snowflake_parse('ségment-2026112208301512300070042x')",
            "22P02",
            "text",
        ),
        (
            "snowflake_parse('2023123123595999900000000')",
            "22008",
            "timestamp",
        ),
        (
            "snowflake_parse('2026112208301512310240042')",
            "22003",
            "worker_id",
        ),
        ("idgen_adopt_column(NULL, 'id')", "22004", "table_name"),
        (
            "idgen_adopt_column('bad_adopt', NULL)",
            "22004",
            "column_name",
        ),
        (
            "idgen_adopt_column('bad_adopt', 'id', generator => NULL)",
            "22004",
            "generator",
        ),
        (
            "idgen_adopt_column('bad_adopt', 'id', generator => 'uuid')",
            "22023",
            "generator",
        ),
        (
            "idgen_adopt_column('bad_adopt', 'id', segment => 's')",
            "22023",
            "segment",
        ),
        (
            "idgen_adopt_column('bad_adopt', 'id', generator => 'segment', segment => '')",
            "22023",
            "segment",
        ),
        ("idgen_adopt_column('bad_adopt', 'nope')", "42703", "nope"),
        ("idgen_adopt_column('bad_adopt', 'small')", "42804", "small"),
        ("idgen_adopt_column('bad_adopt', 'note')", "42804", "note"),
        (
            "idgen_adopt_column('bad_adopt_id_seq', 'last_value')",
            "42809",
            "bad_adopt_id_seq",
        ),
        ("serial_create(NULL, 'X{seq}')", "22004", "name"),
        ("serial_create('x', NULL)", "22004", "format"),
        (
            "serial_create('x', 'X{seq}', reset => NULL)",
            "22004",
            "reset",
        ),
        (
            "serial_create('x', 'X{seq}', time_zone => NULL)",
            "22004",
            "time_zone",
        ),
        (
            "serial_create('x', 'X{seq}', gapless => NULL)",
            "22004",
            "gapless",
        ),
        ("serial_create('', 'X{seq}')", "22023", "name"),
        ("serial_create(repeat('n', 41), 'X{seq}')", "22023", "name"),
        ("serial_create('x', 'X{YYYYY}{seq}')", "22023", "{YYYYY}"),
        ("serial_create('x', 'X{seq}{seq}')", "22023", "{seq}"),
        ("serial_create('x', 'X{seq:0}')", "22023", "{seq:0}"),
        (
            "serial_create('x', 'X{YYYY}{seq}', reset => 'month')",
            "22023",
            "{MM}",
        ),
        (
            "serial_create('x', 'X{seq}', reset => 'hourly')",
            "22023",
            "hourly",
        ),
        (
            "serial_create('x', 'X{seq}', time_zone => 'Mars/Olympus')",
            "22023",
            "Mars/Olympus",
        ),
        ("serial_create('x', repeat('{seq}', 60))", "22023", "format"),
        (
            "serial_create('x', 'X{seq}', time_zone => 'PST')",
            "22023",
            "PST",
        ),
        (
            "serial_create('x', 'X{seq}', time_zone => 'UTC+99')",
            "22023",
            "UTC+99",
        ),
        (
            "serial_create('x', 'X{seq}', scope => 'planet')",
            "22023",
            "planet",
        ),
        ("serial_create(E'a\\x01b', 'X{seq}')", "22023", "control"),
        (
            "serial_create('x', 'X{seq}', scope => NULL)",
            "22004",
            "scope",
        ),
        (
            "serial_grant('known_serial', 'no_such_role')",
            "42704",
            "no_such_role",
        ),
        (
            "serial_grant('unknown_serial', 'public')",
            "42704",
            "unknown_serial",
        ),
        ("serial_revoke('known_serial', NULL)", "22004", "role"),
        (
            "serial_create('known_serial', 'X{seq}')",
            "42710",
            "known_serial",
        ),
        ("serial_nextval(NULL)", "22004", "name"),
        (
            "serial_nextval('unknown_serial')",
            "42704",
            "unknown_serial",
        ),
        ("serial_alter(NULL)", "22004", "name"),
        (
            "serial_alter('unknown_serial', format => 'X{seq}')",
            "42704",
            "unknown_serial",
        ),
        (
            "serial_alter('known_serial', format => 'X{seq')",
            "22023",
            "unclosed",
        ),
        (
            "serial_alter('known_serial', format => 'Y{seq}')",
            "22023",
            "width of {seq}",
        ),
        ("serial_drop(NULL)", "22004", "name"),
        ("serial_drop('unknown_serial')", "42704", "unknown_serial"),
        ("serial_forget(NULL)", "22004", "name"),
        ("serial_forget('unknown_serial')", "42704", "unknown_serial"),
    ];
    for (call, code, names) in CALLS {
        cases.push(case(format!("SELECT {call}"), code, *names));
    }
    cases
}

/// Everything a bad call must not change: the catalog rows, the shared cache (ranges and how
/// much of them is used), the Snowflake generator's last id and this session's currvals.
fn state(client: &mut Client, known: &str) -> String {
    client.one_with("SELECT (SELECT pg_catalog.json_agg(s ORDER BY s.name)::text FROM idgen_segment s)
                 || ' | ' || (SELECT pg_catalog.json_agg(c ORDER BY c.name)::text FROM segment_status() c)
                 || ' | ' || (SELECT last_id::text FROM snowflake_status())
                 || ' | ' || (SELECT pg_catalog.json_agg(s ORDER BY s.name)::text FROM idgen_serial s)
                 || ' | ' || snowflake_currval()::text
                 || ' | ' || segment_currval($1)::text", &[&known])
}

/// Waits until the allocator has nothing in flight (no refill pending), so that the state
/// compared around each case can only change because of the case.
fn settle(client: &mut Client, known: &str) -> String {
    let mut last = state(client, known);
    for _ in 0..100 {
        std::thread::sleep(std::time::Duration::from_millis(50));
        let pending: bool = client
            .query_one(
                "SELECT pg_catalog.bool_or(refill_pending) FROM segment_status()",
                &[],
            )
            .unwrap()
            .get::<_, Option<bool>>(0)
            .unwrap_or(false);
        let now = state(client, known);
        if !pending && now == last {
            return now;
        }
        last = now;
    }
    panic!("the segment cache did not settle: {last}");
}

#[test]
fn every_bad_call_fails_with_its_sqlstate_and_changes_nothing() {
    let c = Cluster::with_idgen("bad-input", 5, &[]);
    let mut client = c.connect("postgres");
    let known = "orders";
    client
        .batch_execute(&format!(
            "SELECT segment_create({}, step => 10);
             SELECT segment_nextval({0}) FROM generate_series(1, 25);
             SELECT snowflake_nextval();
             CREATE TABLE bad_adopt (id bigserial PRIMARY KEY, small serial, note text);
             SELECT serial_create('known_serial', 'K{{seq:04}}');
             SELECT serial_nextval('known_serial');",
            literal(known)
        ))
        .unwrap();
    let mut before = settle(&mut client, known);
    let cases = matrix(known);
    for Case { sql, code, names } in &cases {
        let err = db_error(client.batch_execute(sql));
        assert_eq!(err.code().code(), *code, "{sql}: {err:?}");
        assert!(
            err.message().contains(names.as_str()),
            "{sql}: the message does not name {names:?}: {}",
            err.message()
        );
        assert!(
            err.message().len() <= 200,
            "{sql}: the message repeats a long argument: {} bytes",
            err.message().len()
        );
        let after = state(&mut client, known);
        assert_eq!(after, before, "{sql} changed the state");
        before = after;
    }
    // Every refused adoption left the table as it was.
    let default: String = client.one(
        "SELECT pg_get_expr(adbin, adrelid) FROM pg_attrdef WHERE adrelid = 'bad_adopt'::regclass AND adnum = 1",
    );
    assert_eq!(default, "nextval('bad_adopt_id_seq'::regclass)");
    // STRICT decoders: NULL in, NULL out, as PostgreSQL's own functions.
    for sql in [
        "SELECT snowflake_format(NULL)",
        "SELECT snowflake_format(1, NULL)",
        "SELECT snowflake_parse(NULL)::text",
        "SELECT snowflake_timestamp(NULL)::text",
        "SELECT ts::text FROM snowflake_decode(NULL) d(ts)",
        "SELECT snowflake_compose(NULL)::text",
        "SELECT snowflake_compose(now(), NULL)::text",
        "SELECT snowflake_compose(now(), 1, NULL)::text",
    ] {
        let rows = client.query(sql, &[]).unwrap();
        let values: Vec<Option<String>> = rows.iter().map(|r| r.get(0)).collect();
        assert!(values.iter().all(Option::is_none), "{sql}: {values:?}");
        assert_eq!(state(&mut client, known), before, "{sql} changed the state");
    }
    // An id from the future (another server's faster clock, or ids borrowed ahead) is a valid
    // id: the decoders are IMMUTABLE functions of the id, usable in indexes and partition
    // bounds, never of the clock, so it decodes to its own time instead of failing.
    let future: bool = client.one(
        "SELECT snowflake_timestamp(snowflake_compose(t, 1023, 4095)) = t
               FROM (SELECT date_trunc('milliseconds', now() + interval '10 years') t) s",
    );
    assert!(future);
    // The table the would-be injection names is still there, with its one row.
    let rows: i64 = client.one("SELECT count(*) FROM idgen_segment WHERE name NOT LIKE 'serial:%'");
    assert_eq!(rows, 1);
    eprintln!("{} bad calls, none changed the state", cases.len());
}

/// The positive control of the matrix: names that are hostile as SQL text are ordinary data.
/// Each can be created, drawn from, found in `segment_status()` under its exact spelling,
/// altered and dropped, and never touches another segment.
#[test]
fn hostile_names_are_data() {
    let c = Cluster::with_idgen("hostile-names", 5, &[]);
    let mut client = c.connect("postgres");
    for (i, name) in HOSTILE_NAMES.iter().enumerate() {
        let start = 1000 * (i as i64 + 1);
        client
            .query(
                "SELECT segment_create($1, start => $2, step => 5)",
                &[name, &start],
            )
            .unwrap();
    }
    for (i, name) in HOSTILE_NAMES.iter().enumerate() {
        let start = 1000 * (i as i64 + 1);
        // Through a parameter and through a literal in the SQL text: the same segment.
        let a: i64 = client.one_with("SELECT segment_nextval($1)", &[name]);
        let b: i64 = client
            .query_one(&format!("SELECT segment_nextval({})", literal(name)), &[])
            .unwrap()
            .get(0);
        assert_eq!((a, b), (start, start + 1), "{name:?}");
        let listed: i64 = client.one_with(
            "SELECT count(*) FROM segment_status() WHERE name = $1 AND step = 5",
            &[name],
        );
        assert_eq!(listed, 1, "{name:?}");
        client
            .query("SELECT segment_alter($1, step => 7)", &[name])
            .unwrap();
    }
    let names: Vec<String> = column(&mut client, "SELECT name FROM idgen_segment ORDER BY name");
    let mut expected: Vec<String> = HOSTILE_NAMES.iter().map(|n| n.to_string()).collect();
    expected.sort();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(sorted, expected);
    for name in HOSTILE_NAMES {
        client.query("SELECT segment_drop($1)", &[name]).unwrap();
    }
    let left: i64 = client.one("SELECT count(*) FROM idgen_segment");
    assert_eq!(left, 0);
}
