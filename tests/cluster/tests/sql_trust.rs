//! Pins that a database owner who is not a superuser cannot become one through idgen's SQL
//! (README "Security"): functions and operators she plants in `public` *before* `CREATE
//! EXTENSION` or `ALTER EXTENSION UPDATE` are never bound into idgen's column defaults, views
//! or CHECKs, an install captured by an earlier release stops being captured after the update,
//! a renamed extension schema makes `segment_status()` and `idgen_adopt_column()` refuse
//! instead of running her objects, and roles named `idgen_admin` / `idgen_registry` that
//! someone else made are refused, not reused. `script_capture.rs` plants a decoy for every name
//! the scripts use; this file replays the attacks that were found, one per binding.

use idgen_cluster_tests::registry::{direct_hello, DURABLE};
use idgen_cluster_tests::{as_postgres, column, sqlstate, Cluster, One};
use postgres::Client;

/// Puts the 0.0.9 install script beside the installed extension, as upgrade.rs does.
fn install_old_script() {
    let out = as_postgres("pg_config").arg("--sharedir").output();
    let sharedir = match out {
        Ok(o) if o.status.success() => String::from_utf8(o.stdout).unwrap().trim().to_owned(),
        _ => "/usr/share/postgresql/15".to_owned(),
    };
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("run by cargo test");
    std::fs::copy(
        format!("{manifest}/../upgrade/idgen--0.0.9.sql"),
        format!("{sharedir}/extension/idgen--0.0.9.sql"),
    )
    .expect("copy the 0.0.9 script into the extension directory (tests run as root)");
}

/// The attack: `pwn()` makes `app` a superuser when a superuser runs it; each
/// overload calls it, then the function it stands for. Planted in `public` by `app`, the owner
/// of the database (on PostgreSQL 15 the owner may CREATE in public).
const PLANT: &str = "
    CREATE FUNCTION public.pwn() RETURNS void LANGUAGE plpgsql AS $$
    BEGIN
      RAISE WARNING 'planted code ran as %', current_user;
      IF (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user) THEN
        EXECUTE 'ALTER ROLE app SUPERUSER';
      END IF;
    END $$;
    CREATE FUNCTION public.nextval(text) RETURNS bigint LANGUAGE plpgsql AS $$
    BEGIN PERFORM public.pwn(); RETURN pg_catalog.nextval($1::pg_catalog.regclass); END $$;
    CREATE FUNCTION public.to_timestamp(numeric) RETURNS timestamptz LANGUAGE plpgsql AS $$
    BEGIN PERFORM public.pwn(); RETURN pg_catalog.to_timestamp($1::pg_catalog.float8); END $$;
    CREATE FUNCTION public.planted_div(bigint, numeric) RETURNS numeric LANGUAGE plpgsql AS $$
    BEGIN PERFORM public.pwn(); RETURN $1::pg_catalog.numeric OPERATOR(pg_catalog./) $2; END $$;
    CREATE OPERATOR public./ (LEFTARG = bigint, RIGHTARG = numeric, FUNCTION = public.planted_div);
    CREATE FUNCTION public.num_nonnulls(integer, text, text) RETURNS integer LANGUAGE plpgsql AS $$
    BEGIN PERFORM public.pwn(); RETURN pg_catalog.num_nonnulls($1, $2, $3); END $$;
    CREATE FUNCTION public.format(text, text, text) RETURNS text LANGUAGE plpgsql AS $$
    BEGIN PERFORM public.pwn(); RETURN pg_catalog.format($1, $2, $3); END $$;
    CREATE FUNCTION public.format(text, text, bigint, bigint) RETURNS text LANGUAGE plpgsql AS $$
    BEGIN PERFORM public.pwn(); RETURN pg_catalog.format($1, $2, $3, $4); END $$;
    CREATE FUNCTION public.cardinality(text[]) RETURNS integer LANGUAGE plpgsql AS $$
    BEGIN PERFORM public.pwn(); RETURN pg_catalog.cardinality($1); END $$;
    CREATE FUNCTION public.array_to_string(text[], text) RETURNS text LANGUAGE plpgsql AS $$
    BEGIN PERFORM public.pwn(); RETURN pg_catalog.array_to_string($1, $2); END $$;
    CREATE FUNCTION public.array_position(text[], text) RETURNS integer LANGUAGE plpgsql AS $$
    BEGIN PERFORM public.pwn(); RETURN pg_catalog.array_position($1, $2); END $$;";

/// Functions and operators outside pg_catalog that an object of idgen (a member of the
/// extension, or a default, constraint or rule of one) was bound to, one line each.
fn foreign_bindings(c: &mut Client) -> Vec<String> {
    column(
        c,
        "WITH ext AS (SELECT oid, extnamespace FROM pg_extension WHERE extname = 'idgen'),
              members AS (SELECT d.classid, d.objid FROM pg_depend d, ext
                           WHERE d.refclassid = 'pg_extension'::regclass AND d.refobjid = ext.oid
                             AND d.deptype = 'e'),
              owned AS (SELECT classid, objid FROM members
                        UNION SELECT 'pg_attrdef'::regclass, ad.oid FROM pg_attrdef ad
                               JOIN members m ON m.classid = 'pg_class'::regclass AND m.objid = ad.adrelid
                        UNION SELECT 'pg_constraint'::regclass, co.oid FROM pg_constraint co
                               JOIN members m ON m.classid = 'pg_class'::regclass AND m.objid = co.conrelid
                        UNION SELECT 'pg_rewrite'::regclass, r.oid FROM pg_rewrite r
                               JOIN members m ON m.classid = 'pg_class'::regclass AND m.objid = r.ev_class)
         SELECT pg_describe_object(d.classid, d.objid, d.objsubid) || ' -> '
                || pg_describe_object(d.refclassid, d.refobjid, 0)
           FROM pg_depend d JOIN owned o ON o.classid = d.classid AND o.objid = d.objid
          WHERE (d.refclassid = 'pg_proc'::regclass
                 AND (SELECT pronamespace FROM pg_proc WHERE oid = d.refobjid) <> 'pg_catalog'::regnamespace
                 AND NOT EXISTS (SELECT FROM members m WHERE m.classid = 'pg_proc'::regclass AND m.objid = d.refobjid))
             OR (d.refclassid = 'pg_operator'::regclass
                 AND (SELECT oprnamespace FROM pg_operator WHERE oid = d.refobjid) <> 'pg_catalog'::regnamespace)
          ORDER BY 1",
    )
}

fn is_superuser(c: &mut Client, role: &str) -> bool {
    c.one(&format!(
        "SELECT rolsuper FROM pg_roles WHERE rolname = '{role}'"
    ))
}

/// A cluster with `app` (LOGIN, not a superuser) and a database `db` that app owns.
fn owned_database(tag: &str, db: &str) -> Cluster {
    let c = Cluster::with_idgen(tag, 5, &DURABLE);
    let mut su = c.connect("postgres");
    su.batch_execute("CREATE ROLE app LOGIN").unwrap();
    su.batch_execute(&format!("CREATE DATABASE {db} OWNER app"))
        .unwrap();
    c
}

/// Sets off every stored expression and registry function of the attack as a superuser would
/// in normal operation: a serial's default; the registry's protocol of 0.9.0 (hello, claim,
/// renewal, a global segment's and a global serial's ranges, a recovery that a node's hello
/// opens and the operator completes with a node's report, a claim refused during it, the
/// release), with reads of idgen_registry_workers (a lease in it) and idgen_registry_recovery
/// (a recovery in it); and a row restored into the legacy regression table, as a dump of an
/// earlier release does (its CHECK). The new planted overloads (`format(text, text, bigint,
/// bigint)`, `cardinality(text[])`, `array_to_string(text[], text)`, `array_position(text[],
/// text)`) are what the bodies of hello, report_marks and recover would bind without their
/// pinned search_path.
fn use_everything(su: &mut Client) {
    su.batch_execute("SELECT serial_create('inv2', 'INV-{seq:06}')")
        .unwrap();
    su.batch_execute("SELECT serial_nextval('inv2')").unwrap();
    direct_hello(su, "n1");
    let secret = "s".repeat(40);
    let worker: i32 = su.one(&format!(
        "SELECT worker_id FROM idgen_registry_claim('n1', 'n1', '{secret}', '1', 1, NULL,
             1704067200000, 10, 12, 1, 2000, 600, 0, 5432)"
    ));
    let _: Vec<String> = column(su, "SELECT node_name FROM idgen_registry_workers");
    for sql in [
        format!("SELECT * FROM idgen_registry_renew({worker}, 'n1', '{secret}', 2000, 600, 0)"),
        "SELECT * FROM idgen_registry_segment_create('rg', 1, 10, NULL)".to_owned(),
        "SELECT * FROM idgen_registry_segment_get('rg')".to_owned(),
        format!("SELECT * FROM idgen_registry_segment_take('rg', 10, 'n1', '{secret}')"),
        format!(
            "SELECT * FROM idgen_registry_serial_take('gs', '', 10, 'n1', '{secret}', 'never', 'G{{seq}}')"
        ),
        // A node that saw a revision above the registry's opens the recovery (its reason is
        // formatted), reports, and the operator completes it.
        "SELECT * FROM idgen_registry_hello('n1', 'n1', 1000, 5432)".to_owned(),
        format!(
            "SELECT idgen_registry_report_marks('n1', 'n1', {worker}, 100,
                 ARRAY['rg', E'\\x01serial\\x01gs\\x01']::text[], ARRAY[50, 70]::bigint[], 1000)"
        ),
    ] {
        su.batch_execute(&sql)
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    let reported: Vec<bool> = column(su, "SELECT reported FROM idgen_registry_recovery");
    assert_eq!(
        reported,
        [true],
        "the recovery the hello opened, with n1's report"
    );
    assert_eq!(
        sqlstate(su.batch_execute(&format!(
            "SELECT * FROM idgen_registry_claim('n2', 'i2', '{secret}', '1', 1, NULL,
                 1704067200000, 10, 12, 1, 2000, 600, 0, 5432)"
        ))),
        "55000",
        "a claim during the recovery"
    );
    su.batch_execute("SELECT * FROM idgen_registry_recover()")
        .unwrap();
    su.batch_execute(&format!(
        "SELECT idgen_registry_release({worker}, 'n1', '{secret}', 0)"
    ))
    .unwrap();
    su.batch_execute(
        "INSERT INTO idgen_registry_regression (segment, registry_value, node_value, reported_by)
         VALUES ('rg', 1, 2, 'a dump of 0.8.0')",
    )
    .unwrap();
}

/// `app`'s functions and operators planted in `public` before `CREATE EXTENSION idgen` are
/// bound into none of idgen's objects, and none runs when a superuser uses everything
/// ([`use_everything`]): `app` stays a plain role.
#[test]
fn objects_planted_before_create_extension_are_never_bound_or_run() {
    let c = owned_database("sqltrust-fresh", "ids");
    let mut app = c.connect_as("ids", "app");
    app.batch_execute(PLANT).unwrap();
    let mut su = c.connect("ids");
    su.batch_execute("CREATE EXTENSION idgen").unwrap();
    assert_eq!(foreign_bindings(&mut su), Vec::<String>::new());
    use_everything(&mut su);
    assert!(
        !is_superuser(&mut su, "app"),
        "the database owner became a superuser through idgen"
    );
    assert!(
        !c.log().contains("planted code ran"),
        "planted code ran: {}",
        c.log()
    );
}

/// As above, with the objects planted between `CREATE EXTENSION idgen VERSION '0.5.0'` (with a
/// serial in use) and `ALTER EXTENSION idgen UPDATE` to this release.
#[test]
fn objects_planted_before_an_update_from_0_5_0_are_never_run() {
    install_old_script();
    let c = owned_database("sqltrust-update", "ids");
    let mut su = c.connect("ids");
    su.batch_execute("CREATE EXTENSION idgen VERSION '0.5.0'")
        .unwrap();
    su.batch_execute("SELECT serial_create('inv', 'INV-{seq:06}')")
        .unwrap();
    let mut app = c.connect_as("ids", "app");
    app.batch_execute(PLANT).unwrap();
    // The update numbers the existing serial (0.6.0) and re-creates the bound objects.
    su.batch_execute("ALTER EXTENSION idgen UPDATE").unwrap();
    assert_eq!(foreign_bindings(&mut su), Vec::<String>::new());
    use_everything(&mut su);
    assert!(!is_superuser(&mut su, "app"));
    assert!(!c.log().contains("planted code ran"), "{}", c.log());
}

/// An install captured by an earlier release (as 0.7.0's scripts let a planted function be
/// bound) is set right by the update: the default, the view and the CHECK are created again.
#[test]
fn the_update_rebinds_what_an_earlier_release_let_a_planted_function_capture() {
    install_old_script();
    let c = owned_database("sqltrust-heal", "ids");
    let mut su = c.connect("ids");
    su.batch_execute("CREATE EXTENSION idgen VERSION '0.7.0'")
        .unwrap();
    let mut app = c.connect_as("ids", "app");
    app.batch_execute(PLANT).unwrap();
    // What 0.7.0's scripts bound when the functions were planted first.
    su.batch_execute(
        "ALTER TABLE idgen_serial ALTER COLUMN id SET DEFAULT nextval('idgen_serial_id_seq');
         CREATE OR REPLACE VIEW idgen_registry_workers AS
         SELECT l.worker_id, l.node_name, l.incarnation, l.address, l.system_identifier, l.timeline,
                CASE WHEN l.released_tick IS NOT NULL THEN 'released'
                     WHEN l.expires_at < clock_timestamp() THEN 'expired'
                     ELSE 'held' END AS state,
                l.fence_tick,
                to_timestamp((f.epoch_unix_ms + (l.fence_tick + 1) * f.time_unit_ms) / 1000.0) AS fenced_until,
                l.start_tick, l.released_tick, l.claimed_at, l.renewed_at, l.expires_at, l.lease_ms,
                l.renew_interval_ms, l.clock_offset_ms, l.renewals,
                f.epoch_unix_ms, f.worker_bits, f.sequence_bits, f.time_unit_ms
           FROM idgen_registry_lease l CROSS JOIN idgen_registry_fleet f;
         ALTER TABLE idgen_registry_regression
             DROP CONSTRAINT idgen_registry_regression_check,
             ADD CONSTRAINT idgen_registry_regression_check
                 CHECK (num_nonnulls(worker_id, segment, serial) = 1
                        AND (serial IS NULL) = (serial_period IS NULL));",
    )
    .unwrap();
    let captured = foreign_bindings(&mut su);
    assert!(
        captured.len() >= 3,
        "the capture of 0.7.0 is reproduced: {captured:?}"
    );
    su.batch_execute("ALTER EXTENSION idgen UPDATE").unwrap();
    assert_eq!(foreign_bindings(&mut su), Vec::<String>::new());
    use_everything(&mut su);
    assert!(!is_superuser(&mut su, "app"));
    assert!(!c.log().contains("planted code ran"), "{}", c.log());
}

/// The owner renames `public` (where idgen is) to create her own `public` with look-alikes of
/// what idgen's bodies name (the registry's SECURITY DEFINER functions call
/// `public.idgen_registry_key`, segment_status reads `public.idgen_segment`): the rename is
/// refused; with that refusal switched off by a superuser, the two functions that read the
/// schema's name refuse to run.
#[test]
fn a_renamed_extension_schema_is_refused_and_schema_named_bodies_check_it() {
    let c = owned_database("sqltrust-rename", "ids");
    let mut su = c.connect("ids");
    su.batch_execute("CREATE EXTENSION idgen").unwrap();
    su.batch_execute("SELECT segment_create('orders')").unwrap();
    su.batch_execute("CREATE TABLE public.t (id bigserial PRIMARY KEY)")
        .unwrap();
    su.batch_execute("ALTER TABLE public.t OWNER TO app")
        .unwrap();
    let mut app = c.connect_as("ids", "app");
    let rename = "ALTER SCHEMA public RENAME TO old_public";
    assert_eq!(sqlstate(app.batch_execute(rename)), "55000");
    // In a transaction with the rest of the plan, as while another session waits on a lock.
    assert_eq!(
        sqlstate(app.batch_execute(&format!("BEGIN; {rename}; CREATE SCHEMA public; COMMIT"))),
        "55000"
    );
    app.batch_execute("ROLLBACK").unwrap();
    // What does not rename it is not refused.
    app.batch_execute("ALTER SCHEMA public OWNER TO app; COMMENT ON SCHEMA public IS 'mine'")
        .unwrap();
    let names: Vec<String> = column(&mut su, "SELECT name FROM segment_status()");
    assert_eq!(names, ["orders"]);

    // Behind the event trigger, the functions check the name themselves.
    su.batch_execute("ALTER EVENT TRIGGER idgen_schema_guard DISABLE")
        .unwrap();
    app.batch_execute(&format!(
        "{rename};
         CREATE SCHEMA public;
         CREATE FUNCTION public.pwn() RETURNS text LANGUAGE plpgsql AS $$
         BEGIN
           RAISE WARNING 'planted code ran as %', current_user;
           IF (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user) THEN
             EXECUTE 'ALTER ROLE app SUPERUSER';
           END IF;
           RETURN 'x';
         END $$;
         CREATE VIEW public.idgen_segment AS
           SELECT public.pwn() AS name, 0::bigint AS max_id, 1 AS step, NULL::text AS description,
                  1 AS cache, 'local'::text AS scope;"
    ))
    .unwrap();
    assert_eq!(
        sqlstate(su.batch_execute("SELECT * FROM old_public.segment_status()")),
        "55000"
    );
    assert_eq!(
        sqlstate(su.batch_execute(
            "SELECT * FROM old_public.idgen_adopt_column('old_public.t', 'id', 'segment', dry_run => true)"
        )),
        "55000"
    );
    assert!(!is_superuser(&mut su, "app"));
    assert!(!c.log().contains("planted code ran"), "{}", c.log());
    // Named back, both work again.
    app.batch_execute("DROP SCHEMA public CASCADE; ALTER SCHEMA old_public RENAME TO public")
        .unwrap();
    su.batch_execute("ALTER EVENT TRIGGER idgen_schema_guard ENABLE")
        .unwrap();
    let names: Vec<String> = column(&mut su, "SELECT name FROM segment_status()");
    assert_eq!(names, ["orders"]);
}

/// A role named idgen_admin or idgen_registry made before the first install by a CREATEROLE
/// holder (who could log in as it, or administer it) is refused, not reused.
#[test]
fn squatted_idgen_roles_are_refused_at_create_extension() {
    // No CREATE EXTENSION yet anywhere in the cluster (with_idgen would run one).
    let c = Cluster::start(
        "sqltrust-squat",
        &["shared_preload_libraries = 'idgen'", "idgen.worker_id = 6"],
    );
    let mut su = c.connect("postgres");
    for sql in [
        "CREATE ROLE ops LOGIN CREATEROLE",
        "CREATE DATABASE a",
        "CREATE DATABASE b",
    ] {
        su.batch_execute(sql).unwrap();
    }
    let mut ops = c.connect_as("postgres", "ops");
    // One that can log in, with a password its maker knows.
    ops.batch_execute("CREATE ROLE idgen_registry LOGIN PASSWORD 'x'")
        .unwrap();
    let mut a = c.connect("a");
    assert_eq!(sqlstate(a.batch_execute("CREATE EXTENSION idgen")), "55000");
    // One administered by a role that is not a superuser.
    su.batch_execute("DROP ROLE idgen_registry").unwrap();
    ops.batch_execute(
        "CREATE ROLE squat NOLOGIN; CREATE ROLE idgen_admin NOLOGIN;
         GRANT idgen_admin TO squat WITH ADMIN OPTION",
    )
    .unwrap();
    assert_eq!(sqlstate(a.batch_execute("CREATE EXTENSION idgen")), "55000");
    // Made by a superuser, with members a superuser granted: how the role is used, kept.
    su.batch_execute(
        "DROP ROLE idgen_admin; CREATE ROLE idgen_admin NOLOGIN; GRANT idgen_admin TO ops",
    )
    .unwrap();
    a.batch_execute("CREATE EXTENSION idgen").unwrap();
    // The second database reuses both roles.
    c.connect("b")
        .batch_execute("CREATE EXTENSION idgen")
        .unwrap();
}

/// The update from 0.0.9, which creates idgen_admin, refuses a squatted one too.
#[test]
fn a_squatted_idgen_admin_is_refused_by_the_update_that_creates_it() {
    install_old_script();
    let c = Cluster::start(
        "sqltrust-squat-update",
        &["shared_preload_libraries = 'idgen'", "idgen.worker_id = 7"],
    );
    let mut su = c.connect("postgres");
    su.batch_execute("CREATE ROLE ops LOGIN CREATEROLE")
        .unwrap();
    c.connect_as("postgres", "ops")
        .batch_execute("CREATE ROLE idgen_admin LOGIN PASSWORD 'x'")
        .unwrap();
    su.batch_execute("CREATE EXTENSION idgen VERSION '0.0.9'")
        .unwrap();
    assert_eq!(
        sqlstate(su.batch_execute("ALTER EXTENSION idgen UPDATE")),
        "55000"
    );
    assert_eq!(
        su.one::<String>("SELECT extversion FROM pg_extension WHERE extname = 'idgen'"),
        "0.0.9"
    );
}

/// Serial grants follow a role's identity: a role created under the name of a dropped grantee
/// draws nothing and sees nothing until it is granted itself.
#[test]
fn a_role_created_under_a_dropped_grantees_name_draws_nothing() {
    let c = Cluster::with_idgen("sqltrust-grants", 8, &[]);
    let mut su = c.connect("postgres");
    su.batch_execute(
        "CREATE ROLE clerk LOGIN; SELECT serial_create('inv', 'INV-{seq:04}');
         SELECT serial_grant('inv', 'clerk')",
    )
    .unwrap();
    let draw = |c: &Cluster| -> Result<String, postgres::Error> {
        c.connect_as("postgres", "clerk")
            .query_one("SELECT serial_nextval('inv')", &[])
            .map(|r| r.get(0))
    };
    let seen = |c: &Cluster| -> Vec<String> {
        column(
            &mut c.connect_as("postgres", "clerk"),
            "SELECT name FROM idgen_serials",
        )
    };
    assert_eq!(draw(&c).unwrap(), "INV-0001");
    assert_eq!(seen(&c), ["inv"]);
    su.batch_execute("DROP ROLE clerk; CREATE ROLE clerk LOGIN")
        .unwrap();
    assert_eq!(sqlstate(draw(&c)), "42501");
    assert!(seen(&c).is_empty());
    su.batch_execute("SELECT serial_grant('inv', 'clerk')")
        .unwrap();
    assert_eq!(draw(&c).unwrap(), "INV-0002");
    assert_eq!(
        su.one::<String>("SELECT usage_roles::text FROM idgen_serial WHERE name = 'inv'"),
        "{postgres,clerk}",
        "the stale entry of the dropped clerk was replaced"
    );
    su.batch_execute("SELECT serial_revoke('inv', 'clerk')")
        .unwrap();
    assert_eq!(sqlstate(draw(&c)), "42501");
}

/// A database still at 0.7.0 keeps its serials working under the new library (grants by name
/// until its update), and its dump restores into 0.8.0 with every serial, its counter going on
/// above what was drawn, and its grants to roles kept by name but given to nobody until
/// `serial_grant` runs again in the new database (whose role OIDs the old one never saw).
#[test]
fn a_0_7_0_database_keeps_its_serials_under_the_new_library_and_through_a_dump() {
    install_old_script();
    let c = Cluster::with_idgen("sqltrust-restore", 9, &[]);
    let mut su = c.connect("postgres");
    for sql in [
        "CREATE ROLE clerk LOGIN",
        "CREATE DATABASE old",
        "CREATE DATABASE new",
    ] {
        su.batch_execute(sql).unwrap();
    }
    let mut old = c.connect("old");
    old.batch_execute(
        "CREATE EXTENSION idgen VERSION '0.7.0';
         SELECT serial_create('inv', 'INV-{seq:06}');
         SELECT serial_grant('inv', 'clerk')",
    )
    .unwrap();
    let draw = |db: &str| -> Result<String, postgres::Error> {
        c.connect_as(db, "clerk")
            .query_one("SELECT serial_nextval('inv')", &[])
            .map(|r| r.get(0))
    };
    let first = draw("old").unwrap();
    assert_eq!(first, "INV-000001");
    old.batch_execute("SELECT serial_revoke('inv', 'clerk'); SELECT serial_grant('inv', 'clerk')")
        .unwrap();
    let last = draw("old").unwrap();

    let dump = c.dir().join("old.sql");
    let out = c
        .program("pg_dump")
        .args(["-f", dump.to_str().unwrap()])
        .arg(c.conninfo("old"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let out = c
        .program("psql")
        .args(["-X", "-v", "ON_ERROR_STOP=1", "-f", dump.to_str().unwrap()])
        .arg(c.conninfo("new"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the 0.7.0 dump restores into 0.11.0: {out:?}"
    );
    let mut new = c.connect("new");
    assert_eq!(
        new.one::<String>("SELECT extversion FROM pg_extension WHERE extname = 'idgen'"),
        "0.11.0"
    );
    let next: String = new.one("SELECT serial_nextval('inv')");
    assert!(next > last, "{next} continues above {last}");
    assert_eq!(sqlstate(draw("new")), "42501");
    new.batch_execute("SELECT serial_grant('inv', 'clerk')")
        .unwrap();
    assert!(draw("new").unwrap() > next);
}

/// Before a database's update to 0.9.0 the new library runs with the old objects, and the
/// database owner may create a table named `idgen_serial_dropped` in idgen's schema (public):
/// serial functions write dropped names there as the extension's owner, so her triggers must
/// never fire. On the code before this test, `serial_drop` found the table by its name and
/// inserted into it as the superuser, and `app` became one.
#[test]
fn a_planted_table_of_dropped_serials_is_never_written() {
    install_old_script();
    let c = owned_database("sqltrust-dropped", "ids");
    let mut su = c.connect("ids");
    su.batch_execute("CREATE EXTENSION idgen VERSION '0.8.0'")
        .unwrap();
    for sql in [
        "SELECT serial_create('inv', 'INV-{seq}')",
        "SELECT serial_nextval('inv')",
        "SELECT serial_create('old', 'OLD-{seq}')",
    ] {
        su.batch_execute(sql).unwrap();
    }
    let mut app = c.connect_as("ids", "app");
    app.batch_execute(PLANT).unwrap();
    app.batch_execute(
        "CREATE TABLE public.idgen_serial_dropped (
             name text PRIMARY KEY, id bigint NOT NULL UNIQUE, format text NOT NULL,
             reset text NOT NULL, scope text NOT NULL, dropped_at timestamptz NOT NULL DEFAULT now());
         INSERT INTO public.idgen_serial_dropped (name, id, format, reset, scope)
         VALUES ('again', 999, 'A-{seq}', 'never', 'local'), ('gone', 998, 'G-{seq}', 'never', 'local');
         CREATE FUNCTION public.pwn_trigger() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN PERFORM public.pwn(); RETURN COALESCE(NEW, OLD); END $$;
         CREATE TRIGGER pwn BEFORE INSERT OR UPDATE OR DELETE ON public.idgen_serial_dropped
           FOR EACH ROW EXECUTE FUNCTION public.pwn_trigger();
         GRANT ALL ON public.idgen_serial_dropped TO PUBLIC;",
    )
    .unwrap();
    su.batch_execute("SELECT serial_drop('inv')").unwrap();
    su.batch_execute("SELECT serial_create('again', 'A-{seq}')")
        .unwrap();
    assert_eq!(
        su.one::<String>("SELECT serial_nextval('again')"),
        "A-1",
        "not the planted id"
    );
    assert_eq!(
        sqlstate(su.batch_execute("SELECT serial_forget('gone')")),
        "42883",
        "0.8.0 has no serial_forget"
    );
    su.batch_execute("SELECT serial_drop('old')").unwrap();
    assert!(!is_superuser(&mut su, "app"));
    assert!(!c.log().contains("planted code ran"), "{}", c.log());
}
