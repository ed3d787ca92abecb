//! The node's registry session trusts nothing of the registry database (DESIGN.md §6), against
//! real servers:
//!
//! * a registry database owned by a role that is not a superuser (`app`) captures nothing:
//!   after `CREATE EXTENSION idgen`, `app` plants pass-through functions with the exact
//!   signatures of every registry function the nodes call, in a schema named after the nodes'
//!   role (`"$user"`) and in a schema `evil` that `ALTER DATABASE ... SET search_path` puts
//!   before `pg_catalog`, and an operator `*(numeric, integer)` (the registry clock's
//!   `extract(...) * 1000`) in `evil` and in `public`. Two nodes with `idgen.worker_id = auto`
//!   claim, renew, draw Snowflake ids, take global segment and global serial ranges, give
//!   back and release at a clean stop: no decoy runs (their call sequence is untouched and no
//!   holder secret is stored), the nodes hold different worker ids and no id repeats;
//! * a claim answer outside the protocol (a worker id beyond the layout, a floor above the
//!   fence), here from a superuser who replaced the real `idgen_registry_claim`, is refused
//!   with a logged reason (08P01) and nothing is installed: no worker id, no id issued.

use std::process::Command;
use std::time::Duration;

use idgen_cluster_tests::registry::{
    auto_fast, draw, draw_segment, held_worker, nothing_issued, registry, repeated, state_of,
};
use idgen_cluster_tests::{column, db_error, wait_for, Cluster, One};

/// The registry functions a node calls: name, argument types, result, and the position of
/// the holder secret among the arguments (if it carries one).
const CALLED: &[(&str, &str, &str, Option<usize>)] = &[
    (
        "idgen_registry_hello",
        "",
        "TABLE (registry_now timestamptz, version text)",
        None,
    ),
    (
        "idgen_registry_probation",
        "",
        "TABLE (ranges_until timestamptz, claims_until timestamptz)",
        None,
    ),
    (
        "idgen_registry_claim",
        "text, text, text, text, integer, integer, bigint, integer, integer, integer, integer, \
         integer, double precision, integer, bigint",
        "TABLE (worker_id integer, floor_tick bigint, fence_tick bigint, expires_at timestamptz, \
         registry_now timestamptz, previous_holder text)",
        Some(3),
    ),
    (
        "idgen_registry_renew",
        "integer, text, text, integer, integer, double precision, bigint, text[], text[], bigint[]",
        "TABLE (fence_tick bigint, expires_at timestamptz, registry_now timestamptz, regression text)",
        Some(3),
    ),
    (
        "idgen_registry_release",
        "integer, text, text, bigint",
        "boolean",
        Some(3),
    ),
    (
        "idgen_registry_report",
        "text, text, text[], bigint[], integer",
        "TABLE (registry_now timestamptz, regression text)",
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
        "text, integer, text, text, bigint",
        "TABLE (first_id bigint, last_id bigint, base_step integer, regression text)",
        Some(4),
    ),
    (
        "idgen_registry_serial_take",
        "text, text, bigint, text, text, text, text, bigint",
        "TABLE (mark bigint, regression text)",
        Some(5),
    ),
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

/// The registry server and its database `ids`, owned by `app` (not a superuser), with idgen
/// created by the superuser and the nodes' role `idgen_node` (a member of `idgen_registry`);
/// then `app`'s plants. Checks that the trap is armed: a session of `idgen_node` resolves
/// `"$user"` first and the planted operator, and counts it.
fn hostile_registry(tag: &str) -> Cluster {
    let reg = registry(tag);
    let mut su = reg.connect("postgres");
    su.batch_execute("CREATE ROLE app LOGIN").unwrap();
    su.batch_execute("CREATE DATABASE ids OWNER app").unwrap();
    su.batch_execute("CREATE ROLE idgen_node LOGIN; GRANT idgen_registry TO idgen_node")
        .unwrap();
    reg.connect("ids")
        .batch_execute("CREATE EXTENSION idgen")
        .unwrap();
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
    plant.push_str(&decoy_operator("evil"));
    plant.push_str(&decoy_operator("public"));
    reg.connect_as("ids", "app").batch_execute(&plant).unwrap();

    // Armed: the nodes' role resolves its own schema first and the planted operator.
    let mut node_role = reg.connect_as("ids", "idgen_node");
    let schemas: String = node_role.one("SELECT pg_catalog.current_schemas(false)::text");
    assert!(
        schemas.starts_with("{idgen_node,evil,pg_catalog"),
        "{schemas}"
    );
    let _: f64 = node_role.one("SELECT (extract(epoch FROM pg_catalog.now()) * 1000)::float8");
    let _: String = node_role.one("SELECT version FROM idgen_registry_hello()");
    assert_eq!(
        decoy_calls(&reg),
        2,
        "the planted operator and hello were not called"
    );
    let mut su = reg.connect("ids");
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

/// The capture attempt of the review (S2): no planted function or operator of the registry
/// database's owner runs in a node's registry session; the nodes claim, renew, draw, take,
/// give back and release with idgen's own functions.
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

    // A clean stop gives the unused numbers back and releases the leases.
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
                 node_port integer, known_tick bigint)
             RETURNS TABLE (worker_id integer, floor_tick bigint, fence_tick bigint,
                            expires_at timestamptz, registry_now timestamptz, previous_holder text)
             LANGUAGE sql AS $f$
               SELECT {worker}, {floor}, {fence},
                      pg_catalog.clock_timestamp() + pg_catalog.make_interval(secs => $11 / 1000.0),
                      pg_catalog.clock_timestamp(), NULL::text
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
