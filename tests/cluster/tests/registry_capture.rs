//! The node's registry session trusts nothing of the registry database (DESIGN.md §6), and the
//! registry's own functions trust no member of `idgen_registry` beyond its grants, against real
//! servers:
//!
//! * a registry database owned by a role that is not a superuser (`app`) captures nothing:
//!   after `CREATE EXTENSION idgen`, `app` plants pass-through functions with the exact
//!   signatures of every registry function the nodes call, in a schema named after the nodes'
//!   role (`"$user"`) and in a schema `evil` that `ALTER DATABASE ... SET search_path` puts
//!   before `pg_catalog`, look-alikes in `evil` of the catalog functions the registry's and the
//!   client's SQL name, and an operator `*(numeric, integer)` (the registry clock's
//!   `extract(...) * 1000`) in `evil` and in `public`. Two nodes with `idgen.worker_id = auto`
//!   say hello, claim, renew, draw Snowflake ids, take global segment and global serial ranges,
//!   report to a recovery the operator opens and completes (in a session with that
//!   `search_path`) and release at a clean stop: no decoy runs (their call sequence is untouched
//!   and no holder secret is stored), the nodes hold different worker ids and no id repeats;
//! * a claim answer outside the protocol (a worker id beyond the layout, a floor above the
//!   fence), here from a superuser who replaced the real `idgen_registry_claim`, is refused
//!   with a logged reason (08P01) and nothing is installed: no worker id, no id issued;
//! * a failing call never logs the holder secret;
//! * privileges: PUBLIC calls no registry function and reads nothing of the registry; a member
//!   of `idgen_registry` calls the node's functions only (not `idgen_registry_begin_recovery`,
//!   `idgen_registry_recover` or an internal helper) and reads no table, view or the revision
//!   sequence; `pg_monitor` reads the recovery's view and tables but writes nothing (42501 each);
//!   the functions 0.9.0 removed are gone (42883);
//! * a member that knows no node's secret cannot change what a recovery raises: it cannot
//!   replace another node's report, a report under a name the registry never saw raises nothing,
//!   no reported revision leaves the recovery unable to complete or the registry unable to count
//!   on, it cannot hide a node's lost ranges by naming the node's incarnation in a take, and it
//!   cannot take the name of a node that holds a live lease after the update from 0.8.0;
//! * a failover to an asynchronous standby that lost a node's ranges shows in that node's next
//!   hello (the recovery opens before another node takes the numbers again).

use std::process::Command;
use std::time::{Duration, Instant};

use idgen_cluster_tests::registry::{
    auto_fast, direct_hello, draw, draw_segment, failure_text, held_worker, intruder,
    nothing_issued, registry, repeated, restore, segment_mark, snapshot, state_of,
};
use idgen_cluster_tests::{as_postgres, column, db_error, sqlstate, wait_for, Cluster, One};
use postgres::Client;

/// The registry functions a node calls: name, argument types, result, and the position of
/// the holder secret among the arguments (if it carries one).
const CALLED: &[(&str, &str, &str, Option<usize>)] = &[
    (
        "idgen_registry_hello",
        "text, text, bigint, integer",
        "TABLE (registry_now timestamptz, version text, revision bigint, recovery text, \
         reported boolean, grants_from timestamptz, ranges_from timestamptz)",
        None,
    ),
    (
        "idgen_registry_claim",
        "text, text, text, text, integer, integer, bigint, integer, integer, integer, integer, \
         integer, double precision, integer",
        "TABLE (worker_id integer, floor_tick bigint, fence_tick bigint, expires_at timestamptz, \
         registry_now timestamptz, previous_holder text, revision bigint)",
        Some(3),
    ),
    (
        "idgen_registry_renew",
        "integer, text, text, integer, integer, double precision",
        "TABLE (fence_tick bigint, floor_tick bigint, expires_at timestamptz, \
         registry_now timestamptz, revision bigint)",
        Some(3),
    ),
    (
        "idgen_registry_release",
        "integer, text, text, bigint",
        "boolean",
        Some(3),
    ),
    (
        "idgen_registry_report_marks",
        "text, text, integer, bigint, text[], bigint[], bigint",
        "boolean",
        None,
    ),
    (
        "idgen_registry_segment_create",
        "text, bigint, integer, text",
        "TABLE (created boolean, step integer)",
        None,
    ),
    (
        "idgen_registry_segment_get",
        "text",
        "TABLE (step integer, max_id bigint)",
        None,
    ),
    (
        "idgen_registry_segment_take",
        "text, integer, text, text",
        "TABLE (first_id bigint, last_id bigint, base_step integer, revision bigint)",
        Some(4),
    ),
    (
        "idgen_registry_serial_take",
        "text, text, bigint, text, text, text, text",
        "TABLE (mark bigint, revision bigint)",
        Some(5),
    ),
];

/// Catalog functions the registry's function bodies (hello, claim, renew, report_marks,
/// recover) and the client's queries name without a schema, planted in `evil` with the exact
/// signature an unqualified call would bind (an exact match beats pg_catalog's polymorphic or
/// variadic one; `evil` comes before pg_catalog on the database's path): name, arguments and
/// result; the decoy answers what pg_catalog's function would. (`extract(... FROM ...)` is
/// not among them: the grammar binds it to pg_catalog's.)
const LOOKALIKES: &[(&str, &str, &str)] = &[
    ("clock_timestamp", "", "timestamptz"),
    ("pg_postmaster_start_time", "", "timestamptz"),
    ("inet_client_addr", "", "inet"),
    ("host", "inet", "text"),
    ("octet_length", "text", "integer"),
    ("cardinality", "text[]", "integer"),
    ("array_to_string", "text[], text", "text"),
    ("array_position", "text[], text", "integer"),
    ("split_part", "text, text, integer", "text"),
    ("string_to_array", "text, text", "text[]"),
    ("chr", "integer", "text"),
    ("format", "text, text, text", "text"),
    ("format", "text, text, bigint, bigint", "text"),
    ("make_interval", "secs numeric", "interval"),
];

/// `CREATE FUNCTION schema.name(...)` passing through to `public.name(...)` (idgen's, the
/// extension being in `public`), after counting the call in `public.decoy_calls` (a sequence:
/// it survives a rollback) and storing the holder secret it received in `public.loot`.
fn decoy(schema: &str, name: &str, args: &str, returns: &str, secret: Option<usize>) -> String {
    let n = if args.is_empty() {
        0
    } else {
        args.split(", ").count()
    };
    let positional = (1..=n)
        .map(|i| format!("${i}"))
        .collect::<Vec<_>>()
        .join(", ");
    let secret = secret.map_or("NULL".to_owned(), |i| format!("${i}"));
    let ret = if returns.starts_with("TABLE") {
        format!("RETURN QUERY SELECT * FROM public.{name}({positional});")
    } else {
        format!("RETURN public.{name}({positional});")
    };
    format!(
        "CREATE FUNCTION {schema}.{name}({args}) RETURNS {returns} LANGUAGE plpgsql AS $f$
         BEGIN
           PERFORM pg_catalog.nextval('public.decoy_calls'::pg_catalog.regclass);
           INSERT INTO public.loot VALUES ('{schema}.{name}', {secret});
           {ret}
         END $f$;"
    )
}

/// An operator `schema.*(numeric, integer)` that counts its calls and multiplies.
fn decoy_operator(schema: &str) -> String {
    format!(
        "CREATE FUNCTION {schema}.times(numeric, integer) RETURNS numeric LANGUAGE plpgsql AS $f$
         BEGIN
           PERFORM pg_catalog.nextval('public.decoy_calls'::pg_catalog.regclass);
           RETURN $1 OPERATOR(pg_catalog.*) $2::pg_catalog.numeric;
         END $f$;
         CREATE OPERATOR {schema}.* (LEFTARG = numeric, RIGHTARG = integer, FUNCTION = {schema}.times);"
    )
}

/// The number of arguments in an argument list of [`CALLED`] or [`LOOKALIKES`].
fn arity(args: &str) -> usize {
    if args.is_empty() {
        0
    } else {
        args.split(", ").count()
    }
}

/// `CREATE FUNCTION evil.name(...)`, a look-alike of pg_catalog's function (see
/// [`LOOKALIKES`]) that counts its call in `public.decoy_calls`, then answers as pg_catalog's.
fn lookalike(name: &str, args: &str, returns: &str) -> String {
    let call = if name == "make_interval" {
        "pg_catalog.make_interval(secs => $1::pg_catalog.float8)".to_owned()
    } else {
        let positional = (1..=arity(args))
            .map(|i| format!("${i}"))
            .collect::<Vec<_>>()
            .join(", ");
        format!("pg_catalog.{name}({positional})")
    };
    format!(
        "CREATE FUNCTION evil.{name}({args}) RETURNS {returns} LANGUAGE plpgsql
         SET search_path = pg_catalog, pg_temp AS $f$
         BEGIN
           PERFORM pg_catalog.nextval('public.decoy_calls'::pg_catalog.regclass);
           RETURN {call};
         END $f$;"
    )
}

/// A call of `name` with typed NULLs (`args` as in [`CALLED`] / [`LOOKALIKES`]), without a
/// schema: what an unqualified call on the hostile path binds.
fn null_call(name: &str, args: &str) -> String {
    if name == "make_interval" {
        return "SELECT make_interval(secs => NULL::numeric)".to_owned();
    }
    let nulls = if args.is_empty() {
        String::new()
    } else {
        args.split(", ")
            .map(|t| format!("NULL::{t}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!("SELECT * FROM {name}({nulls})")
}

/// The registry server and its database `ids`, owned by `app` (not a superuser), with idgen
/// created by the superuser and the nodes' role `idgen_node` (a member of `idgen_registry`);
/// then `app`'s plants. Checks that the trap is armed: unqualified calls resolve to every
/// decoy (a session of `idgen_node` resolves `"$user"` first, a superuser's `evil`), and each
/// counts itself; then the count starts again at 0.
fn hostile_registry(tag: &str) -> Cluster {
    let reg = registry(tag);
    let mut su = reg.connect("postgres");
    su.batch_execute("CREATE ROLE app LOGIN").unwrap();
    su.batch_execute("CREATE DATABASE ids OWNER app").unwrap();
    su.batch_execute("CREATE ROLE idgen_node LOGIN; GRANT idgen_registry TO idgen_node")
        .unwrap();
    let mut installer = reg.connect("ids");
    installer.batch_execute("CREATE EXTENSION idgen").unwrap();
    // The decoys copy idgen's signatures: each must be one of idgen's functions.
    for (name, args, _, _) in CALLED {
        let real: bool = installer.one(&format!(
            "SELECT to_regprocedure('public.{name}({args})') IS NOT NULL"
        ));
        assert!(real, "public.{name}({args}) is not idgen's: update CALLED");
    }
    drop(installer);
    let mut plant = String::from(
        "CREATE SEQUENCE public.decoy_calls;
         GRANT USAGE, SELECT, UPDATE ON SEQUENCE public.decoy_calls TO PUBLIC;
         CREATE TABLE public.loot(via text, secret text);
         GRANT INSERT ON public.loot TO PUBLIC;
         CREATE SCHEMA idgen_node; GRANT USAGE ON SCHEMA idgen_node TO PUBLIC;
         CREATE SCHEMA evil; GRANT USAGE ON SCHEMA evil TO PUBLIC;
         ALTER DATABASE ids SET search_path = \"$user\", evil, pg_catalog, public;",
    );
    for schema in ["idgen_node", "evil"] {
        for (name, args, returns, secret) in CALLED {
            plant.push_str(&decoy(schema, name, args, returns, *secret));
        }
    }
    for (name, args, returns) in LOOKALIKES {
        plant.push_str(&lookalike(name, args, returns));
    }
    plant.push_str(&decoy_operator("evil"));
    plant.push_str(&decoy_operator("public"));
    reg.connect_as("ids", "app").batch_execute(&plant).unwrap();

    // Armed: the nodes' role resolves its own schema first, a superuser (no schema of its own)
    // `evil`; each unqualified call below runs one decoy (the pass-through may then fail on
    // its NULLs: the count survives).
    let mut node_role = reg.connect_as("ids", "idgen_node");
    let schemas: String = node_role.one("SELECT pg_catalog.current_schemas(false)::text");
    assert!(
        schemas.starts_with("{idgen_node,evil,pg_catalog"),
        "{schemas}"
    );
    let mut su = reg.connect("ids");
    let schemas: String = su.one("SELECT pg_catalog.current_schemas(false)::text");
    assert!(schemas.starts_with("{evil,pg_catalog"), "{schemas}");
    let mut armed = 0;
    for (name, args, _, _) in CALLED {
        let _ = node_role.batch_execute(&null_call(name, args));
        let _ = su.batch_execute(&null_call(name, args));
        armed += 2;
    }
    for (name, args, _) in LOOKALIKES {
        let _ = node_role.batch_execute(&null_call(name, args));
        armed += 1;
    }
    let _ = node_role.batch_execute("SELECT NULL::numeric * NULL::integer");
    let _ = node_role.batch_execute("SELECT NULL::numeric OPERATOR(public.*) NULL::integer");
    armed += 2;
    assert_eq!(
        decoy_calls(&reg),
        armed,
        "not every decoy is reachable by an unqualified call: the trap is not armed"
    );
    su.batch_execute(
        "SELECT pg_catalog.setval('public.decoy_calls'::pg_catalog.regclass, 1, false);
         TRUNCATE public.loot",
    )
    .unwrap();
    reg
}

/// How many times a decoy ran.
fn decoy_calls(reg: &Cluster) -> i64 {
    reg.connect("ids")
        .one("SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM public.decoy_calls")
}

/// A started node of the registry database `ids` (as `idgen_node`), worker id auto, the
/// quick lease, idgen created.
fn ids_node(reg: &Cluster, tag: &str) -> Cluster {
    let setting = format!(
        "idgen.registry = 'host=127.0.0.1 port={} dbname=ids user=idgen_node'",
        reg.port()
    );
    let mut all = vec!["shared_preload_libraries = 'idgen'", setting.as_str()];
    all.extend(auto_fast(&[]));
    let c = Cluster::start(tag, &all);
    c.create_db_with_idgen("postgres");
    c
}

/// Waits until the node has renewed its lease at least `n` times.
fn renewed(node: &Cluster, n: i64) {
    let mut client = node.connect("postgres");
    wait_for("renewals", Duration::from_secs(30), || {
        let r: Option<i64> = client.one("SELECT renewals FROM idgen_registry_status");
        (r.unwrap_or(0) >= n).then_some(())
    });
}

/// The first column of `sql`'s rows on `node`, tried again (for at most 20 s) while it fails:
/// after a recovery the registry hands out no range for half a longest lease.
fn rows_retrying<T>(node: &Cluster, sql: &str) -> Vec<T>
where
    T: for<'a> postgres::types::FromSql<'a>,
{
    let mut last = String::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        match node.connect("postgres").query(sql, &[]) {
            Ok(rows) => return rows.iter().map(|r| r.get(0)).collect(),
            Err(e) => last = failure_text(&e),
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!("{sql} kept failing: {last}");
}

/// A capture attempt, with the recovery of 0.9.0: no planted function or
/// operator of the registry database's owner runs in a node's registry session or in the
/// registry's functions; the nodes say hello, claim, renew, draw, take, report to the
/// recovery that the operator opens and completes in a session whose `search_path` puts
/// `evil` first, draw on and release with idgen's own functions, and nothing repeats.
#[test]
fn the_registry_databases_owner_captures_no_registry_call() {
    let reg = hostile_registry("capture_reg");
    let a = ids_node(&reg, "capture_a");
    let wa = held_worker(&a, Duration::from_secs(30));
    let b = ids_node(&reg, "capture_b");
    let wb = held_worker(&b, Duration::from_secs(30));
    renewed(&a, 3);
    renewed(&b, 3);

    let mut ids = draw(&a, 2000);
    ids.extend(draw(&b, 2000));

    a.connect("postgres")
        .batch_execute(
            "SELECT segment_create('g', step => 100, scope => 'global');
             SELECT serial_create('inv', 'INV-{seq}', scope => 'global')",
        )
        .unwrap();
    b.connect("postgres")
        .batch_execute("SELECT serial_create('inv', 'INV-{seq}', scope => 'global')")
        .unwrap();
    let mut numbers = draw_segment(&a, "g", 150);
    numbers.extend(draw_segment(&b, "g", 150));
    numbers.extend(draw_segment(&a, "g", 20));
    let serial = "SELECT serial_nextval('inv') FROM generate_series(1, 50)";
    let mut texts: Vec<String> = column(&mut a.connect("postgres"), serial);
    texts.extend(column::<String>(&mut b.connect("postgres"), serial));

    // The operator opens a recovery, in a session on the database's hostile search_path; both
    // nodes report (their hello shows it); the operator completes it there.
    let mut operator = reg.connect("ids");
    let mut check = reg.connect("ids");
    check
        .batch_execute("SET search_path = pg_catalog, public")
        .unwrap();
    operator
        .batch_execute("SELECT public.idgen_registry_begin_recovery('the capture test')")
        .unwrap();
    wait_for("both nodes' reports", Duration::from_secs(30), || {
        let reported: i64 =
            check.one("SELECT count(*) FROM public.idgen_registry_recovery WHERE reported");
        (reported == 2).then_some(())
    });
    let raised: Vec<String> = column(
        &mut operator,
        "SELECT subject FROM public.idgen_registry_recover()",
    );
    assert!(
        raised.iter().any(|s| s == "revision"),
        "the recovery raised {raised:?}"
    );
    let open: i64 = check.one("SELECT count(*) FROM public.idgen_registry_recovery");
    assert_eq!(open, 0, "the recovery is still open");

    // After it: ids, numbers and texts go on (ranges again once the registry's wait is over).
    ids.extend(draw(&a, 500));
    ids.extend(draw(&b, 500));
    numbers.extend(rows_retrying::<i64>(
        &b,
        "SELECT segment_nextval('g') FROM generate_series(1, 150)",
    ));
    texts.extend(rows_retrying::<String>(
        &a,
        "SELECT serial_nextval('inv') FROM generate_series(1, 20)",
    ));
    assert_eq!(state_of(&a).1, Some(wa), "a lost its worker id");
    assert_eq!(state_of(&b).1, Some(wb), "b lost its worker id");

    // A clean stop releases the leases.
    a.stop("fast");
    b.stop("fast");

    let mut r = reg.connect("ids");
    r.batch_execute("SET search_path = pg_catalog, public")
        .unwrap();
    let loot: Vec<String> = column(
        &mut r,
        "SELECT via || ' got ' || coalesce(length(secret)::text, 'no') || ' secret' FROM public.loot",
    );
    let calls = decoy_calls(&reg);
    assert!(
        calls == 0 && loot.is_empty(),
        "the registry database's owner captured the nodes' registry calls: {calls} decoy calls; \
         {loot:?}"
    );
    let released: i64 =
        r.one("SELECT count(*) FROM public.idgen_registry_lease WHERE released_tick IS NOT NULL");
    assert_eq!(released, 2, "both leases released at the clean stop");
    assert_ne!(wa, wb, "two nodes hold one worker id");
    for (what, twice) in [
        ("Snowflake ids", repeated(&ids).len()),
        ("segment numbers", repeated(&numbers).len()),
    ] {
        assert_eq!(twice, 0, "{what} repeated");
    }
    let mut sorted = texts.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(
        sorted.len(),
        texts.len(),
        "serial texts repeated: {texts:?}"
    );
}

/// A forged claim answer: `idgen_registry_claim` replaced by a superuser of the registry with
/// one answering `worker`, `floor` and `fence` (SQL expressions over its arguments: `$7` the
/// layout's epoch, `$8` worker bits, `$10` the tick, `$11` the lease, and `now_tick`).
fn forge_claim(reg: &Cluster, worker: &str, floor: &str, fence: &str) {
    reg.connect("postgres")
        .batch_execute(&format!(
            "CREATE OR REPLACE FUNCTION public.idgen_registry_claim(
                 node text, incarnation_id text, holder_secret text, system_id text,
                 on_timeline integer, wanted_worker integer, epoch_ms bigint,
                 worker_bit_count integer, sequence_bit_count integer, tick_ms integer,
                 lease_length_ms integer, renew_every_ms integer, offset_ms double precision,
                 node_port integer)
             RETURNS TABLE (worker_id integer, floor_tick bigint, fence_tick bigint,
                            expires_at timestamptz, registry_now timestamptz, previous_holder text,
                            revision bigint)
             LANGUAGE sql AS $f$
               SELECT {worker}, {floor}, {fence},
                      pg_catalog.clock_timestamp() + pg_catalog.make_interval(secs => $11 / 1000.0),
                      pg_catalog.clock_timestamp(), NULL::text, 1::bigint
                 FROM (SELECT ((extract(epoch FROM pg_catalog.clock_timestamp()) * 1000)::bigint - $7)
                              / $10 AS now_tick) t
             $f$"
        ))
        .unwrap();
}

/// Waits until the node's log says `reason`, with the node refused and holding no worker id,
/// and `snowflake_nextval()` failing with 08P01.
fn refused_with(node: &Cluster, reason: &str) {
    wait_for(reason, Duration::from_secs(20), || {
        node.log().contains(reason).then_some(())
    });
    let (state, worker, error) = state_of(node);
    assert_eq!(state, "refused", "{error:?}");
    assert_eq!(worker, None, "a worker id was installed: {error:?}");
    let e = db_error(
        node.connect("postgres")
            .query_one("SELECT snowflake_nextval()", &[]),
    );
    assert_eq!(e.code().code(), "08P01", "{e:?}");
    assert!(nothing_issued(node));
}

/// A claim answered with a worker id beyond the layout (1 << worker_bits), then with a floor
/// above the fence: both refused, logged, nothing installed.
#[test]
fn a_claim_answer_outside_the_protocol_is_refused_and_nothing_installed() {
    let reg = registry("capture_forged_reg");
    forge_claim(&reg, "(1 << $8)", "t.now_tick", "t.now_tick + $11 / $10");
    let setting = format!(
        "idgen.registry = 'host=127.0.0.1 port={} dbname=postgres user=postgres'",
        reg.port()
    );
    let mut all = vec!["shared_preload_libraries = 'idgen'", setting.as_str()];
    all.extend(auto_fast(&[]));
    let n = Cluster::start("capture_forged_n", &all);
    n.create_db_with_idgen("postgres");
    refused_with(&n, "worker_id 1024 is beyond");

    forge_claim(&reg, "0", "t.now_tick + 10", "t.now_tick");
    refused_with(&n, "is above its fence_tick");
}

/// The nodes' role may raise `log_parameter_max_length_on_error` for itself (it is user-level):
/// a renewal that fails then logs its bind parameters, the holder secret among them, unless
/// the registry session sets it back to 0 (which it does).
#[test]
fn a_failing_registry_call_never_logs_the_holder_secret() {
    let reg = registry("capture-logsecret");
    reg.append_settings(&["log_min_error_statement = error"]);
    reg.connect("postgres")
        .batch_execute(
            "SELECT pg_reload_conf();
             CREATE ROLE idgen_node LOGIN; GRANT idgen_registry TO idgen_node;
             ALTER ROLE idgen_node SET log_parameter_max_length_on_error = -1",
        )
        .unwrap();
    let setting = format!(
        "idgen.registry = 'host=127.0.0.1 port={} dbname=postgres user=idgen_node'",
        reg.port()
    );
    let mut all = vec!["shared_preload_libraries = 'idgen'", setting.as_str()];
    all.extend(auto_fast(&[]));
    let node = Cluster::start("capture-logsecret-node", &all);
    node.create_db_with_idgen("postgres");
    held_worker(&node, Duration::from_secs(30));
    // Renewals wait 2 s for the lease table's lock, then fail (55P03) and are logged.
    let mut holder = reg.connect("postgres");
    holder
        .batch_execute("BEGIN; LOCK TABLE idgen_registry_lease IN ACCESS EXCLUSIVE MODE")
        .unwrap();
    wait_for("a renewal that failed", Duration::from_secs(30), || {
        reg.log().contains("idgen_registry_renew").then_some(())
    });
    holder.batch_execute("ROLLBACK").unwrap();
    let key: String = reg
        .connect("postgres")
        .one("SELECT holder_key FROM idgen_registry_lease LIMIT 1");
    let log = reg.log();
    for word in log.split(|c: char| !c.is_ascii_hexdigit()) {
        if word.len() == 64 {
            let out = Command::new("sh")
                .arg("-c")
                .arg(format!("printf %s {word} | sha256sum"))
                .output()
                .unwrap();
            let hash = String::from_utf8_lossy(&out.stdout);
            assert!(
                !hash.starts_with(&key),
                "a node's holder secret is in the registry's log"
            );
        }
    }
    assert!(
        !log.contains("parameters: $1"),
        "a failing call logged its parameters:\n{log}"
    );
}

// ---------------------------------------------------------------------------------------------
// Privileges
// ---------------------------------------------------------------------------------------------

/// Every registry function of this release (a new one fails
/// [`no_role_reaches_past_its_grants_and_the_recovery_is_the_operators`] until it is placed
/// here and in the grants below).
const REGISTRY_FUNCTIONS: &[&str] = &[
    "idgen_registry_begin_recovery",
    "idgen_registry_bind_node",
    "idgen_registry_calls",
    "idgen_registry_check_durable",
    "idgen_registry_check_incarnation",
    "idgen_registry_check_lease",
    "idgen_registry_check_node",
    "idgen_registry_check_open",
    "idgen_registry_claim",
    "idgen_registry_client_status",
    "idgen_registry_epoch",
    "idgen_registry_grants_wait_over",
    "idgen_registry_hello",
    "idgen_registry_identity",
    "idgen_registry_key",
    "idgen_registry_max_lease_ms",
    "idgen_registry_next_revision",
    "idgen_registry_recover",
    "idgen_registry_release",
    "idgen_registry_renew",
    "idgen_registry_report_marks",
    "idgen_registry_revision_now",
    "idgen_registry_segment_create",
    "idgen_registry_segment_get",
    "idgen_registry_segment_take",
    "idgen_registry_serial_take",
    "idgen_registry_timeline",
    "idgen_registry_wait_lease_ms",
];

/// What a member of `idgen_registry` may call: the node's side of the protocol.
const MEMBER_CALLS: &[&str] = &[
    "idgen_registry_claim",
    "idgen_registry_hello",
    "idgen_registry_release",
    "idgen_registry_renew",
    "idgen_registry_report_marks",
    "idgen_registry_segment_create",
    "idgen_registry_segment_get",
    "idgen_registry_segment_take",
    "idgen_registry_serial_take",
];

/// What `pg_monitor` may call.
const MONITOR_CALLS: &[&str] = &["idgen_registry_calls", "idgen_registry_client_status"];

/// The registry's tables, and those `pg_monitor` reads.
const TABLES: &[&str] = &[
    "idgen_registry_fleet",
    "idgen_registry_incarnation",
    "idgen_registry_install",
    "idgen_registry_lease",
    "idgen_registry_node",
    "idgen_registry_recovery_report",
    "idgen_registry_regression",
    "idgen_registry_segment",
    "idgen_registry_serial",
    "idgen_registry_serial_counter",
    "idgen_registry_server",
];
const MONITOR_TABLES: &[&str] = &[
    "idgen_registry_node",
    "idgen_registry_recovery_report",
    "idgen_registry_regression",
    "idgen_registry_segment",
    "idgen_registry_server",
];

/// The registry's views (all of them `pg_monitor`'s).
const VIEWS: &[&str] = &[
    "idgen_registry_recovery",
    "idgen_registry_status",
    "idgen_registry_workers",
];

/// Calls of the functions 0.9.0 removed (with the argument types they had).
const REMOVED: &[&str] = &[
    "SELECT * FROM idgen_registry_probation()",
    "SELECT idgen_registry_note_lease(NULL::integer, NULL::integer)",
    "SELECT * FROM idgen_registry_report(NULL::text, NULL::text, NULL::text[], NULL::bigint[], NULL::integer)",
    "SELECT idgen_registry_report_regression(NULL::integer, NULL::text, NULL::bigint, NULL::bigint, NULL::text, NULL::text)",
    "SELECT idgen_registry_report_serial_regression(NULL::text, NULL::text, NULL::bigint, NULL::bigint, NULL::text, NULL::text)",
    "SELECT idgen_registry_check_marks(NULL::text[], NULL::bigint[], NULL::text, NULL::text)",
    "SELECT idgen_registry_check_regressions()",
    "SELECT * FROM idgen_registry_resolve()",
    "SELECT * FROM idgen_registry_resolve(NULL::bigint[])",
    "SELECT * FROM idgen_registry_hello()",
    "SELECT * FROM idgen_registry_segment_give_back(NULL::text, NULL::text, NULL::text, NULL::bigint, NULL::bigint)",
    "SELECT * FROM idgen_registry_claim(NULL::text, NULL::text, NULL::text, NULL::text, NULL::integer, \
     NULL::integer, NULL::bigint, NULL::integer, NULL::integer, NULL::integer, NULL::integer, \
     NULL::integer, NULL::double precision, NULL::integer, NULL::bigint)",
    "SELECT * FROM idgen_registry_renew(NULL::integer, NULL::text, NULL::text, NULL::integer, \
     NULL::integer, NULL::double precision, NULL::bigint, NULL::text[], NULL::text[], NULL::bigint[])",
    "SELECT * FROM idgen_registry_segment_take(NULL::text, NULL::integer, NULL::text, NULL::text, NULL::bigint)",
    "SELECT * FROM idgen_registry_serial_take(NULL::text, NULL::text, NULL::bigint, NULL::text, \
     NULL::text, NULL::text, NULL::text, NULL::bigint)",
];

/// `Ok` or the SQLSTATE of `sql` run on `client`.
fn outcome(client: &mut Client, sql: &str) -> String {
    match client.batch_execute(sql) {
        Ok(()) => "ok".to_owned(),
        Err(e) => e
            .code()
            .map(|c| c.code().to_owned())
            .unwrap_or_else(|| format!("no SQLSTATE: {e}")),
    }
}

/// The revision and the open recovery as the registry has them (a superuser reads them).
fn revision_and_recovery(reg: &Cluster) -> (i64, Option<String>) {
    let row = reg
        .connect("postgres")
        .query_one(
            "SELECT (SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM idgen_registry_revision),
                    (SELECT recovery_reason FROM idgen_registry_server)",
            &[],
        )
        .unwrap();
    (row.get(0), row.get(1))
}

/// The privileges of the registry of 0.9.0, each attempt refused with 42501: a role with LOGIN
/// only (PUBLIC's rights) calls none of the registry's functions and reads none of its tables,
/// views or its revision; a member of `idgen_registry` calls the node's functions only (its
/// calls of them with NULLs get past the privilege check, to 22023 or an answer), not
/// `idgen_registry_begin_recovery`, `idgen_registry_recover` or any internal helper, and reads
/// or writes no table, view or the revision sequence; a member of `pg_monitor` reads the
/// recovery's view, the known nodes, the reports and the server's record, writes none of them,
/// and calls nothing but the client's status and its call counters. The functions 0.9.0 removed are gone (42883).
/// None of the refused attempts opened a recovery or moved the revision.
#[test]
fn no_role_reaches_past_its_grants_and_the_recovery_is_the_operators() {
    let reg = registry("capture_grants_reg");
    let mut su = reg.connect("postgres");
    su.batch_execute(
        "CREATE ROLE plain LOGIN;
         CREATE ROLE member LOGIN IN ROLE idgen_registry;
         CREATE ROLE monitor LOGIN IN ROLE pg_monitor",
    )
    .unwrap();
    // The registry's record and a known node, so that there is something to read and change.
    direct_hello(&mut su, "n0");
    let before = revision_and_recovery(&reg);
    assert_eq!(before.1, None, "a recovery is open before the test");

    // Each argument a NULL the planner cannot fold: a STRICT function's call with a constant
    // NULL is replaced by NULL before its privilege is checked.
    let functions: Vec<(String, String)> = su
        .query(
            "SELECT p.proname::text,
                    'SELECT * FROM ' || p.proname || '(' || coalesce(array_to_string(ARRAY(
                        SELECT '(SELECT NULL::' || format_type(a.t, NULL) || ')'
                          FROM unnest(p.proargtypes::oid[]) WITH ORDINALITY a(t, n) ORDER BY a.n), ', '), '') || ')'
               FROM pg_proc p
               JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
               JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'idgen'
              WHERE p.proname LIKE 'idgen\\_registry\\_%'
              ORDER BY 1",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    let names: Vec<&str> = functions.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names, REGISTRY_FUNCTIONS,
        "the registry's functions changed: place each new one in the grants of this test"
    );
    let columns: Vec<(String, String)> = su
        .query(
            "SELECT DISTINCT ON (c.relname) c.relname::text, a.attname::text FROM pg_class c
               JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
                AND a.attidentity = '' AND a.attgenerated = ''
              WHERE c.relname = ANY ($1::text[]) AND c.relnamespace = 'public'::regnamespace
              ORDER BY c.relname, a.attnum",
            &[&TABLES],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(columns.len(), TABLES.len(), "{columns:?}");

    let mut wrong = Vec::new();
    let mut expect = |role: &str, client: &mut Client, sql: &str, allowed: bool| {
        let got = outcome(client, sql);
        let fine = if allowed {
            got != "42501"
        } else {
            got == "42501"
        };
        if !fine {
            wrong.push(format!(
                "{role}: {sql} -> {got} (expected {})",
                if allowed {
                    "past the privilege check"
                } else {
                    "42501"
                }
            ));
        }
    };
    for role in ["plain", "member", "monitor"] {
        let mut c = reg.connect_as("postgres", role);
        for (name, call) in &functions {
            let allowed = match role {
                "member" => MEMBER_CALLS.contains(&name.as_str()),
                "monitor" => MONITOR_CALLS.contains(&name.as_str()),
                _ => false,
            };
            expect(role, &mut c, call, allowed);
        }
        // The operator's two, as an operator would call them.
        for sql in [
            "SELECT idgen_registry_begin_recovery('opened by a role that may not')",
            "SELECT * FROM idgen_registry_recover()",
            "SELECT * FROM idgen_registry_recover(skip_nodes => ARRAY['n0'])",
        ] {
            expect(role, &mut c, sql, false);
        }
        for (table, first) in &columns {
            let reads = role == "monitor" && MONITOR_TABLES.contains(&table.as_str());
            expect(role, &mut c, &format!("SELECT * FROM {table}"), reads);
            for write in [
                format!("INSERT INTO {table} DEFAULT VALUES"),
                format!("UPDATE {table} SET {first} = {first}"),
                format!("DELETE FROM {table}"),
                format!("TRUNCATE {table}"),
            ] {
                expect(role, &mut c, &write, false);
            }
        }
        for view in VIEWS {
            expect(
                role,
                &mut c,
                &format!("SELECT * FROM {view}"),
                role == "monitor",
            );
        }
        for sql in [
            "SELECT last_value FROM idgen_registry_revision",
            "SELECT nextval('idgen_registry_revision')",
            "SELECT setval('idgen_registry_revision', 1)",
            "SELECT currval('idgen_registry_revision')",
        ] {
            expect(role, &mut c, sql, false);
        }
    }
    for sql in REMOVED {
        let got = outcome(&mut su, sql);
        if got != "42883" {
            wrong.push(format!(
                "superuser: {sql} -> {got} (expected 42883: removed)"
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "privileges of the registry:\n  {}",
        wrong.join("\n  ")
    );
    assert_eq!(
        revision_and_recovery(&reg),
        before,
        "a refused attempt moved the revision or opened a recovery"
    );
    // The positive control: the operator may.
    su.batch_execute("SELECT idgen_registry_begin_recovery('the operator')")
        .unwrap();
    assert_eq!(
        revision_and_recovery(&reg).1.as_deref(),
        Some("the operator")
    );
}

// ---------------------------------------------------------------------------------------------
// What a member that knows no node's secret can do to a recovery
// ---------------------------------------------------------------------------------------------

/// A member of `idgen_registry` named `role` (LOGIN), connected to the registry's `postgres`.
fn member(reg: &Cluster, role: &str) -> Client {
    reg.connect("postgres")
        .batch_execute(&format!("CREATE ROLE {role} LOGIN IN ROLE idgen_registry"))
        .unwrap();
    reg.connect_as("postgres", role)
}

/// `idgen_registry_segment_take` of `step` numbers of `segment` as `incarnation` with
/// `secret`: the first and last number and the revision.
fn take(
    c: &mut Client,
    segment: &str,
    step: i32,
    incarnation: &str,
    secret: &str,
) -> Result<(i64, i64, i64), postgres::Error> {
    c.query_one(
        "SELECT first_id, last_id, revision FROM idgen_registry_segment_take($1::text, $2::integer, \
         $3::text, $4::text)",
        &[&segment, &step, &incarnation, &secret],
    )
    .map(|r| (r.get(0), r.get(1), r.get(2)))
}

/// [`take`], tried again while the registry waits after a new epoch (55P03), for at most 15 s.
fn take_when_open(
    c: &mut Client,
    segment: &str,
    step: i32,
    incarnation: &str,
    secret: &str,
) -> Result<(i64, i64, i64), postgres::Error> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        match take(c, segment, step, incarnation, secret) {
            Err(e) if e.code().map(|c| c.code()) == Some("55P03") && Instant::now() < deadline => {
                if e.as_db_error()
                    .is_some_and(|d| d.message().contains("said hello"))
                {
                    // A node's client says hello at every step: after the registry's new epoch
                    // (a recovery) too. (The test's nodes are named as their incarnations.)
                    let _ = c.query(
                        "SELECT * FROM idgen_registry_hello($1::text, $1::text, 0, 5432)",
                        &[&incarnation],
                    );
                }
                std::thread::sleep(Duration::from_millis(200));
            }
            other => return other,
        }
    }
}

/// `idgen_registry_report_marks` as node `node` (incarnation `incarnation`, no worker id): the
/// marks `marks` of `names`, and the highest revision it saw.
fn report(
    c: &mut Client,
    node: &str,
    incarnation: &str,
    names: &[&str],
    marks: &[i64],
    revision: i64,
) -> Result<bool, postgres::Error> {
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    c.query_one(
        "SELECT idgen_registry_report_marks($1::text, $2::text, $3::integer, $4::bigint, \
         $5::text[], $6::bigint[], $7::bigint)",
        &[
            &node,
            &incarnation,
            &None::<i32>,
            &None::<i64>,
            &names,
            &marks,
            &revision,
        ],
    )
    .map(|r| r.get(0))
}

/// A failed call's SQLSTATE and message, or its answer.
fn told<T: std::fmt::Debug>(r: &Result<T, postgres::Error>) -> String {
    match r {
        Ok(v) => format!("accepted ({v:?})"),
        Err(e) => failure_text(e),
    }
}

/// The name of a global serial's counter in a report: `\x01serial\x01<serial>\x01<period>`.
fn serial_counter(serial: &str, period: &str) -> String {
    format!("\u{1}serial\u{1}{serial}\u{1}{period}")
}

/// A restore of the registry lost node a's last range of global segment `g` (101..200): the
/// operator opens the recovery, a reports its mark 200, every known node has reported, and the
/// recovery raises `g` to at least 200, so that no number of a's is handed out again. A second
/// member of `idgen_registry` that knows no secret of a's files a report under a's name, with
/// no marks, after a's own: it must change nothing (refused with 42501, or not used). (The
/// first 0.9.0 draft failed this: `idgen_registry_report_marks` took no credential and a node
/// name's later report replaced its earlier one, so the operator's view said a reported, the
/// recovery raised nothing, and the next range handed out 101..200 again.)
#[test]
fn a_member_cannot_replace_another_nodes_recovery_report() {
    let reg = registry("capture_report_reg");
    let mut a = member(&reg, "node_a");
    drop(intruder(&reg));
    let secret = "a".repeat(40);
    direct_hello(&mut a, "a");
    a.batch_execute("SELECT * FROM idgen_registry_segment_create('g', 1, 100, NULL)")
        .unwrap();
    assert_eq!(take(&mut a, "g", 100, "a", &secret).unwrap().1, 100);
    let snap = snapshot(&reg, "capture_report_snap");
    let (first, last, seen) = take(&mut a, "g", 100, "a", &secret).unwrap();
    assert_eq!((first, last), (101, 200));
    drop(a);
    restore(&reg, &snap);
    assert_eq!(segment_mark(&reg, "g"), 100, "the restore lost a's range");

    // The operator's word (a restore), then a's report, then the forged one.
    let mut su = reg.connect("postgres");
    su.batch_execute("SELECT idgen_registry_begin_recovery('restored from a backup')")
        .unwrap();
    let mut a = reg.connect_as("postgres", "node_a");
    let _ = a
        .query_one(
            "SELECT * FROM idgen_registry_hello('a', 'a', $1::bigint, 5432)",
            &[&seen],
        )
        .unwrap();
    assert!(report(&mut a, "a", "a", &["g"], &[200], seen).unwrap());
    let mut intruder = reg.connect_as("postgres", "intruder");
    let forged = report(&mut intruder, "a", "intruder-incarnation", &[], &[], 0);
    let seen_by_operator: Vec<String> = column(
        &mut su,
        "SELECT node_name || ' reported ' || reported || ' by ' || coalesce(reported_by, '-') \
         || ' with ' || coalesce(marks, 0) || ' marks' FROM idgen_registry_recovery",
    );
    let raised: Vec<String> = column(
        &mut su,
        "SELECT subject || ': ' || raised_from || ' -> ' || raised_to FROM idgen_registry_recover()",
    );
    let mark = segment_mark(&reg, "g");
    let next = take_when_open(
        &mut intruder,
        "g",
        100,
        "intruder-incarnation",
        &"i".repeat(40),
    );
    let repeats = matches!(next, Ok((first, _, _)) if first <= 200);
    assert!(
        mark >= 200 && !repeats,
        "a member without a's secret changed what the recovery raised: its report under a's \
         name was {}; the operator saw {seen_by_operator:?}; the recovery raised {raised:?}; \
         g's mark is {mark} (a holds up to 200); the next range is {} (a's numbers again: \
         {repeats})",
        told(&forged),
        told(&next)
    );
}

/// In an open recovery, a member files a report under a node name no hello ever showed the
/// registry ("ghost"), with the largest marks there are for global segment `g` and global
/// serial `inv`. The operator's view (`idgen_registry_recovery`) lists only known nodes, so
/// the operator neither sees the report nor can know to skip it: it must raise nothing (the
/// report refused, or not used), and after the recovery `g` and `inv` hand out their next
/// numbers above the known node's marks. (The first 0.9.0 draft failed this:
/// `idgen_registry_recover` used every report of the recovery, so `g`'s mark became 2^63 - 1
/// (2200H, run out) and `inv`'s counter was left a few numbers below overflow.)
#[test]
fn a_report_under_a_name_the_registry_never_saw_raises_nothing() {
    let reg = registry("capture_ghost_reg");
    let mut a = member(&reg, "node_a");
    let mut intruder = intruder(&reg);
    let secret = "a".repeat(40);
    direct_hello(&mut a, "a");
    a.batch_execute("SELECT * FROM idgen_registry_segment_create('g', 1, 100, NULL)")
        .unwrap();
    let (_, mark, seen) = take(&mut a, "g", 100, "a", &secret).unwrap();
    let row = a
        .query_one(
            "SELECT mark, revision FROM idgen_registry_serial_take('inv', '', 10, 'a', $1, 'never', 'I{seq}')",
            &[&secret],
        )
        .unwrap();
    let (counter, seen): (i64, i64) = (row.get(0), row.get::<_, i64>(1).max(seen));
    let mut su = reg.connect("postgres");
    su.batch_execute("SELECT idgen_registry_begin_recovery('the ghost test')")
        .unwrap();
    let inv = serial_counter("inv", "");
    assert!(report(&mut a, "a", "a", &["g", &inv], &[mark, counter], seen).unwrap());
    let ghost = report(
        &mut intruder,
        "ghost",
        "ghost-incarnation",
        &["g", &inv],
        &[i64::MAX, i64::MAX - 5],
        0,
    );
    let listed: Vec<String> = column(&mut su, "SELECT node_name FROM idgen_registry_recovery");
    assert_eq!(listed, ["a"], "the operator's view of the recovery");
    let raised: Vec<String> = column(
        &mut su,
        "SELECT subject || ': ' || raised_from || ' -> ' || raised_to FROM idgen_registry_recover()",
    );
    let g_after = segment_mark(&reg, "g");
    let inv_after: i64 = su.one(
        "SELECT max_id FROM idgen_registry_serial_counter WHERE serial = 'inv' AND period = ''",
    );
    let next = take_when_open(&mut a, "g", 100, "a", &secret);
    assert!(
        g_after == mark
            && inv_after == counter
            && matches!(next, Ok((first, _, _)) if first == mark + 1),
        "a report under a name the registry never saw (it was {}) raised the recovery's marks: \
         {raised:?}; g's mark {g_after} (a reported {mark}), inv's counter {inv_after} (a \
         reported {counter}); the next range of g: {}",
        told(&ghost),
        told(&next)
    );
}

/// A report's revision is a number the node says it saw. Two forged ones, filed by a member in
/// open recoveries: (1) 2^63 - 1 under a name the operator skips: the recovery completes (a
/// skipped node's report is not used); (2) 2^63 - 2 under a known node's name (the member's
/// own hello made it known), not skipped: refused with 22023, or the recovery completes and
/// leaves the registry able to count on, so the next range is handed out. (The first 0.9.0
/// draft failed this: `idgen_registry_recover` took the highest revision of every report,
/// skipped or not, and added 1: (1) failed with 22003 "bigint out of range", so the recovery
/// could not be completed while the report was there; (2) set the revision sequence to its
/// maximum, and every claim, renewal, release and range failed from then on with 2200H.)
#[test]
fn a_reported_revision_neither_blocks_the_recovery_nor_exhausts_the_registry() {
    let reg = registry("capture_revision_reg");
    let mut a = member(&reg, "node_a");
    let mut intruder = intruder(&reg);
    let secret = "a".repeat(40);
    direct_hello(&mut a, "a");
    a.batch_execute("SELECT * FROM idgen_registry_segment_create('g', 1, 100, NULL)")
        .unwrap();
    let (_, mark, seen) = take(&mut a, "g", 100, "a", &secret).unwrap();
    let mut su = reg.connect("postgres");
    let mut problems = Vec::new();

    // (1) Under a name the operator skips.
    su.batch_execute("SELECT idgen_registry_begin_recovery('revision test 1')")
        .unwrap();
    assert!(report(&mut a, "a", "a", &["g"], &[mark], seen).unwrap());
    let forged = report(&mut intruder, "zz", "zz", &[], &[], i64::MAX);
    let recovered = su.query(
        "SELECT * FROM idgen_registry_recover(skip_nodes => ARRAY['zz'])",
        &[],
    );
    if let Err(e) = &recovered {
        problems.push(format!(
            "(1) a report of revision 2^63 - 1 under the skipped name zz ({}) keeps the recovery \
             from completing: {}",
            told(&forged),
            failure_text(e)
        ));
        // The operator's way out: no report of the skipped node.
        su.batch_execute(
            "DELETE FROM idgen_registry_recovery_report WHERE node_name = 'zz';
             SELECT * FROM idgen_registry_recover(skip_nodes => ARRAY['zz'])",
        )
        .unwrap();
    }

    // (2) Under a known node's name, not skipped.
    let known = intruder
        .query_one(
            "SELECT recovery FROM idgen_registry_hello('b', 'b', 0, 5432)",
            &[],
        )
        .map(|r| r.get::<_, Option<String>>(0));
    assert_eq!(known.ok(), Some(None), "no recovery is open before (2)");
    su.batch_execute("SELECT idgen_registry_begin_recovery('revision test 2')")
        .unwrap();
    assert!(report(&mut a, "a", "a", &["g"], &[mark], seen).unwrap());
    let forged = report(&mut intruder, "b", "b", &[], &[], i64::MAX - 1);
    match &forged {
        Err(e) if e.code().map(|c| c.code()) == Some("22023") => {}
        _ => {
            let recovered = su.batch_execute("SELECT * FROM idgen_registry_recover()");
            let next = take_when_open(&mut a, "g", 100, "a", &secret);
            if recovered.is_err() || next.is_err() {
                problems.push(format!(
                    "(2) a report of revision 2^63 - 2 under the known name b ({}): the recovery \
                     {}; the next range then {}",
                    told(&forged),
                    told(&recovered),
                    told(&next)
                ));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "a forged revision in a recovery report:\n  {}",
        problems.join("\n  ")
    );
}

/// A failover to an asynchronous standby that lost node a's last ranges of global segment `g`
/// shows in a's next hello, which carries the revision a saw (above any the registry kept):
/// the registry opens its recovery before another node takes a's numbers again. (The first
/// 0.9.0 draft failed this: it compared with the revision sequence, which PostgreSQL logs 32
/// values ahead; the standby replayed that record, so the promoted registry's revision stood
/// above every revision a saw, no recovery opened, and the next range another member took
/// repeated a's numbers.)
#[test]
fn a_failover_that_lost_ranges_shows_in_the_next_hello() {
    let reg = registry("capture_async_reg");
    let standby = Cluster::standby_of(&reg, "capture_async_sb", &[]);
    let mut a = member(&reg, "node_a");
    drop(member(&reg, "node_b"));
    let secret = "a".repeat(40);
    direct_hello(&mut a, "a");
    a.batch_execute("SELECT * FROM idgen_registry_segment_create('g', 1, 100, NULL)")
        .unwrap();
    assert_eq!(take(&mut a, "g", 100, "a", &secret).unwrap().1, 100);
    // The standby has all of that, then stops receiving (an asynchronous standby behind).
    let (lost, seen) = lose_takes_in_a_failover(&reg, &standby, a, "a", &secret);

    let mut a = standby.connect_as("postgres", "node_a");
    let row = a
        .query_one(
            "SELECT revision, recovery FROM idgen_registry_hello('a', 'a', $1::bigint, 5432)",
            &[&seen],
        )
        .unwrap();
    let (registry_revision, recovery): (i64, Option<String>) = (row.get(0), row.get(1));
    let kept = segment_mark(&standby, "g");
    let mut b = standby.connect_as("postgres", "node_b");
    b.query_one("SELECT * FROM idgen_registry_hello('b', 'b', 0, 5432)", &[])
        .unwrap();
    let next = take_when_open(&mut b, "g", 100, "b", &"b".repeat(40));
    assert!(
        recovery.is_some(),
        "the promoted registry lost a's ranges {lost:?} (its mark of g: {kept}), yet a's hello \
         with revision {seen} opened no recovery: the registry's revision is \
         {registry_revision}; node b's next range is then {} (a's numbers again)",
        told(&next)
    );
    assert!(
        matches!(next, Err(ref e) if e.code().map(|c| c.code()) == Some("55000")),
        "a range during the recovery: {}",
        told(&next)
    );
}

/// As above, but node a is not there when the registry fails over, and before its next hello
/// a second member of `idgen_registry` takes a range of another global serial naming a's
/// incarnation (a name, never a credential: `idgen_registry_workers` and
/// `idgen_registry_recovery` show it). That must not raise the revision the registry recorded
/// as answered to a: a's hello, with the revision it saw, still opens the recovery, and no
/// other node gets a's numbers again. (Fails on 0.9.0 as of this writing: every take calls
/// `idgen_registry_next_revision(incarnation_id)` with the caller's word for the incarnation,
/// which raises the revision recorded for whichever known node has that incarnation, so the
/// promoted registry's logged-ahead revision lands in a's row, a's hello proves nothing, no
/// recovery opens, and node b's next range repeats a's numbers.)
#[test]
fn a_member_that_knows_a_nodes_incarnation_cannot_hide_its_lost_ranges() {
    let reg = registry("capture_hide_reg");
    let standby = Cluster::standby_of(&reg, "capture_hide_sb", &[]);
    let mut a = member(&reg, "node_a");
    drop(member(&reg, "node_b"));
    drop(intruder(&reg));
    let secret = "a".repeat(40);
    let row = a
        .query_one(
            "SELECT extract(epoch FROM ranges_from - clock_timestamp())::float8
               FROM idgen_registry_hello('a', 'a-incarnation', 0, 5432)",
            &[],
        )
        .unwrap();
    let wait: f64 = row.get(0);
    if wait > 0.0 {
        std::thread::sleep(Duration::from_secs_f64(wait + 0.05));
    }
    a.batch_execute("SELECT * FROM idgen_registry_segment_create('g', 1, 100, NULL)")
        .unwrap();
    assert_eq!(
        take(&mut a, "g", 100, "a-incarnation", &secret).unwrap().1,
        100
    );
    let (lost, seen) = lose_takes_in_a_failover(&reg, &standby, a, "a-incarnation", &secret);

    // The intruder, on the promoted registry, before a is back.
    let mut intruder = standby.connect_as("postgres", "intruder");
    intruder
        .query_one(
            "SELECT * FROM idgen_registry_hello('x', 'x-incarnation', 0, 5432)",
            &[],
        )
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    let bumped = loop {
        let r = intruder.query_one(
            "SELECT mark FROM idgen_registry_serial_take('s', '', 1, 'a-incarnation', $1, 'never', 'S{seq}')",
            &[&"i".repeat(40)],
        );
        match r {
            Err(e) if e.code().map(|c| c.code()) == Some("55P03") && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(200));
            }
            other => break other.map(|r| r.get::<_, i64>(0)),
        }
    };
    let kept = segment_mark(&standby, "g");

    let mut a = standby.connect_as("postgres", "node_a");
    let row = a
        .query_one(
            "SELECT revision, recovery FROM idgen_registry_hello('a', 'a-incarnation', $1::bigint, 5432)",
            &[&seen],
        )
        .unwrap();
    let (registry_revision, recovery): (i64, Option<String>) = (row.get(0), row.get(1));
    let mut b = standby.connect_as("postgres", "node_b");
    b.query_one(
        "SELECT * FROM idgen_registry_hello('b', 'b-incarnation', 0, 5432)",
        &[],
    )
    .unwrap();
    let next = take_when_open(&mut b, "g", 100, "b-incarnation", &"b".repeat(40));
    assert!(
        recovery.is_some(),
        "the promoted registry lost a's ranges {lost:?} (its mark of g: {kept}); after the \
         intruder's take naming a's incarnation ({}), a's hello with revision {seen} opened no \
         recovery (the registry's revision is {registry_revision}); node b's next range is then \
         {} (a's numbers again)",
        told(&bumped),
        told(&next)
    );
    assert!(
        matches!(next, Err(ref e) if e.code().map(|c| c.code()) == Some("55000")),
        "a range during the recovery: {}",
        told(&next)
    );
}

/// Puts the 0.0.9 install script beside the installed extension (as `upgrade.rs` does), so
/// that earlier versions can be created.
fn install_old_script() {
    let out = as_postgres("pg_config")
        .arg("--sharedir")
        .output()
        .expect("pg_config --sharedir");
    assert!(out.status.success(), "pg_config --sharedir: {out:?}");
    let sharedir = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("run by cargo test");
    std::fs::copy(
        format!("{manifest}/../upgrade/idgen--0.0.9.sql"),
        format!("{sharedir}/extension/idgen--0.0.9.sql"),
    )
    .expect("copy the 0.0.9 script into the extension directory (tests run as root)");
}

/// A registry updated from 0.8.0 knows no node yet (`idgen_registry_node` is new), while node
/// a, a role of its own, holds a live lease under its node name. The operator binds the name
/// to a's role (`idgen_registry_bind_node`, which a member cannot run: 42501), as README's
/// update note says, before the nodes restart; a second member of `idgen_registry` that says
/// hello under a's name is then refused (42501), and a's own hello goes through, so that a
/// keeps renewing and reports as itself. (Without the binding the first hello of a name binds
/// it to its role, whoever that is: an intruder could own "a".)
#[test]
fn a_member_cannot_take_the_name_of_a_node_with_a_live_lease_after_the_update() {
    install_old_script();
    let reg = registry("capture_squat_reg");
    let mut su = reg.connect("postgres");
    su.batch_execute("CREATE DATABASE old").unwrap();
    drop(member(&reg, "node_a"));
    drop(intruder(&reg));
    let mut old = reg.connect("old");
    old.batch_execute("CREATE EXTENSION idgen VERSION '0.8.0'")
        .unwrap();
    let mut a = reg.connect_as("old", "node_a");
    a.batch_execute("SELECT * FROM idgen_registry_hello()")
        .unwrap();
    let worker: i32 = a.one_with(
        "SELECT worker_id FROM idgen_registry_claim('a', 'a-incarnation', $1, 'sys', 1, NULL,
             1704067200000, 10, 12, 1, 60000, 1000, 0, 5432, 0)",
        &[&"a".repeat(40)],
    );
    old.batch_execute("ALTER EXTENSION idgen UPDATE").unwrap();
    let state: String = old.one_with(
        "SELECT state FROM idgen_registry_workers WHERE worker_id = $1",
        &[&worker],
    );
    assert_eq!(state, "held", "a's lease after the update");
    // The operator binds the node names to their roles before the nodes restart (README's
    // 0.9.0 update note); a member cannot.
    let mut intruder = reg.connect_as("old", "intruder");
    assert_eq!(
        sqlstate(intruder.batch_execute("SELECT idgen_registry_bind_node('a', 'intruder')")),
        "42501"
    );
    old.batch_execute("SELECT idgen_registry_bind_node('a', 'node_a')")
        .unwrap();

    let squat = intruder
        .query_one(
            "SELECT recovery FROM idgen_registry_hello('a', 'intruder-incarnation', 0, 5432)",
            &[],
        )
        .map(|r| r.get::<_, Option<String>>(0));
    let own = a
        .query_one(
            "SELECT recovery FROM idgen_registry_hello('a', 'a-incarnation', 0, 5432)",
            &[],
        )
        .map(|r| r.get::<_, Option<String>>(0));
    assert!(
        matches!(&squat, Err(e) if e.code().map(|c| c.code()) == Some("42501")) && own.is_ok(),
        "a member's hello under the name of a's live lease: {}; a's own hello then: {}",
        told(&squat),
        told(&own)
    );
}

/// The registry's asynchronous standby replays everything so far and stops receiving; `a`
/// (a node session of incarnation `incarnation`) takes three more ranges of `g` on the
/// registry; the registry dies and its standby is promoted: those takes are lost. Returns the
/// lost ranges and the highest revision answered.
fn lose_takes_in_a_failover(
    reg: &Cluster,
    standby: &Cluster,
    mut a: Client,
    incarnation: &str,
    secret: &str,
) -> (Vec<(i64, i64)>, i64) {
    let lsn: String = reg
        .connect("postgres")
        .one("SELECT pg_current_wal_lsn()::text");
    let mut sb = standby.connect("postgres");
    wait_for("the standby's replay", Duration::from_secs(30), || {
        sb.one_with::<bool>(
            "SELECT pg_last_wal_replay_lsn() >= $1::text::pg_lsn",
            &[&lsn],
        )
        .then_some(())
    });
    drop(sb);
    standby.stop("fast");
    let mut seen = 0;
    let mut lost = Vec::new();
    for _ in 0..3 {
        let (first, last, revision) = take(&mut a, "g", 100, incarnation, secret).unwrap();
        lost.push((first, last));
        seen = revision;
    }
    drop(a);
    reg.stop("immediate");
    standby.start_server();
    standby.promote();
    (lost, seen)
}
