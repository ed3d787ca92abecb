//! Issue 28, the third review's findings against real servers, adapted to the registry's
//! explicit recovery (issue 37): a registry reloaded from a dump into the same running server
//! opens a recovery (#2), a first host of a multi-host registry that accepts connections but
//! never answers is passed over (#3), and a standby that streams under the primary's own node
//! name, promoted while the primary lives, never takes the primary's live lease (#5).

use std::net::TcpListener;
use std::time::Duration;

use idgen_cluster_tests::registry::{
    direct_hello, draw, failure_text, held_worker, refused, registry, repeated, state_of, status,
    DIRECT_CLAIM, FAST,
};
use idgen_cluster_tests::{sqlstate, twitter, wait_for, Cluster, One};

/// #2: `pg_dump` of a used registry database (a lease granted) restored into another database
/// of the same running server: the restored `idgen_registry_server` row names this very server
/// (install token and system identifier), but the restore is a rewind all the same. The install
/// token, made at `CREATE EXTENSION` and not dumped, makes the restored copy another server: its
/// first hello opens a recovery (`recovery_since` set, the hello answers it, opened by the
/// registry itself), and a claim there is refused while it is open (55000). The original
/// database is the same server as before: its hello opens nothing and it grants.
#[test]
fn a_dump_reloaded_into_the_same_server_opens_a_recovery() {
    let reg = registry("reg_dump");
    let mut r = reg.connect("postgres");
    // Use it: the server row (a hello) and a lease (so there is something to lose).
    direct_hello(&mut r, "n1");
    let layout: [&(dyn postgres::types::ToSql + Sync); 10] = [
        &"n1",
        &"inc1",
        &"a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1",
        &"sys",
        &1_i32,
        &None::<i32>,
        &1_704_067_200_000_i64,
        &10_i32,
        &12_i32,
        &1_i32,
    ];
    r.query(DIRECT_CLAIM, &layout)
        .unwrap_or_else(|e| panic!("the claim: {}", failure_text(&e)));
    let identity: String = r.one("SELECT server_identity FROM idgen_registry_server");
    let dump = reg.dir().join("registry.dump");
    let out = reg
        .program("pg_dump")
        .args(["-Fc", "-f", dump.to_str().unwrap()])
        .arg(reg.conninfo("postgres"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    r.batch_execute("CREATE DATABASE restored").unwrap();
    // (pg_restore may report ignored errors about objects that exist already, public say.)
    let out = reg
        .program("pg_restore")
        .args(["-d", &reg.conninfo("restored"), dump.to_str().unwrap()])
        .output()
        .unwrap();
    eprintln!("pg_restore: {out:?}");

    let mut restored = reg.connect("restored");
    let (copied, open_before): (String, bool) = {
        let row = restored
            .query_one(
                "SELECT server_identity, recovery_since IS NOT NULL FROM idgen_registry_server",
                &[],
            )
            .unwrap();
        (row.get(0), row.get(1))
    };
    assert_eq!(copied, identity, "the dump carries the server row");
    assert!(!open_before, "the dump carried an open recovery");
    let leases: i64 = restored.one("SELECT count(*) FROM idgen_registry_lease");
    assert_eq!(leases, 1, "the dump carries the lease");

    let recovery: Option<String> =
        restored.one("SELECT recovery FROM idgen_registry_hello('n2', 'inc2', 0, 5432)");
    assert!(
        recovery.is_some(),
        "the first hello of the reloaded registry answered no recovery"
    );
    let row = restored
        .query_one(
            "SELECT server_identity, recovery_since IS NOT NULL, recovery_opened_by \
             FROM idgen_registry_server",
            &[],
        )
        .unwrap();
    let (now, open, opened_by): (String, bool, Option<String>) =
        (row.get(0), row.get(1), row.get(2));
    assert_ne!(now, identity, "the reloaded registry's identity");
    assert!(
        open,
        "the reloaded registry opened no recovery at its first hello"
    );
    assert_eq!(opened_by.as_deref(), Some("the registry"));
    let other: [&(dyn postgres::types::ToSql + Sync); 10] = [
        &"n2",
        &"inc2",
        &"b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2",
        &"sys",
        &1_i32,
        &None::<i32>,
        &1_704_067_200_000_i64,
        &10_i32,
        &12_i32,
        &1_i32,
    ];
    assert_eq!(
        sqlstate(restored.query(DIRECT_CLAIM, &other)),
        "55000",
        "a claim on the reloaded registry while its recovery is open"
    );

    // The original database is the same server as before: no recovery there, and it grants.
    let original: Option<String> =
        r.one("SELECT recovery FROM idgen_registry_hello('n2', 'inc2', 0, 5432)");
    assert_eq!(original, None, "the original registry opened a recovery");
    let granted = r
        .query(DIRECT_CLAIM, &other)
        .unwrap_or_else(|e| panic!("a claim on the original registry: {}", failure_text(&e)));
    assert_eq!(granted.len(), 1);
}

/// #3: `idgen.registry` lists first a host that accepts TCP connections but never answers (a
/// hung postmaster, or a listener of something else), then the registry. libpq's
/// `connect_timeout` (2 s, set by idgen unless the string has one) passes over the first for the
/// second within the client's deadline. (Before the fix each attempt waited on the first host
/// until the client's own deadline and began again with it: the node never held a lease.)
#[test]
fn a_first_registry_host_that_never_answers_is_passed_over() {
    let reg = registry("reg_silent_first");
    // Accepts connections (the kernel completes the handshake into the backlog) and never
    // reads or writes.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_port = silent.local_addr().unwrap().port();
    let setting = format!(
        "idgen.registry = 'host=127.0.0.1,127.0.0.1 port={silent_port},{} dbname=postgres user=postgres'",
        reg.port()
    );
    let n = Cluster::start(
        "silent_first",
        &[
            "shared_preload_libraries = 'idgen'",
            &setting,
            "idgen.worker_id = auto",
            FAST[0],
            FAST[1],
        ],
    );
    n.create_db_with_idgen("postgres");
    held_worker(&n, Duration::from_secs(30));
    let server: String = n
        .connect("postgres")
        .one("SELECT registry FROM idgen_registry_status");
    assert_eq!(server, format!("127.0.0.1:{}", reg.port()));
    drop(silent);
}

/// #5: a standby made by `pg_basebackup` copies the primary's `postgresql.conf`, node name
/// included (a restored copy of the primary carries it too), and here streams under it. It is
/// promoted while the primary still runs and renews (a split brain), asking for the primary's
/// very worker id (`idgen.worker_id` fixed to it). A promoted standby claims like any other
/// server, and the same node name earns it nothing: it is refused (55006, the id is held by a
/// live lease) while the primary renews and issues no id, and the primary keeps its worker id
/// and issues ids with it. (Before 0.9.0 the primary vouched for its standbys by name, and
/// such a copy, promoted, took the live primary's lease.)
#[test]
fn a_promoted_standby_under_the_primarys_name_never_takes_its_live_lease() {
    let reg = registry("reg_own_name");
    let setting = format!(
        "idgen.registry = 'host=127.0.0.1 port={} dbname=postgres user=postgres'",
        reg.port()
    );
    let primary = Cluster::start(
        "own_name",
        &[
            "shared_preload_libraries = 'idgen'",
            &setting,
            "idgen.worker_id = auto",
            "idgen.node_name = 'prod'",
            FAST[0],
            FAST[1],
        ],
    );
    primary.create_db_with_idgen("postgres");
    let w = held_worker(&primary, Duration::from_secs(20));
    let mut ids = draw(&primary, 100);
    // The standby streams as application_name = 'prod', the primary's node name: a copy made
    // a standby by hand (standby.signal and primary_conninfo in its postgresql.conf).
    let standby = Cluster::clone_of(
        &primary,
        "own_name_standby",
        &[
            &format!(
                "primary_conninfo = 'host=127.0.0.1 port={} user=postgres application_name=prod'",
                primary.port()
            ),
            &format!("idgen.worker_id = {w}"),
        ],
    );
    standby.write_signal("standby.signal");
    standby.start_server();
    let mut p = primary.connect("postgres");
    wait_for("the standby to stream", Duration::from_secs(30), || {
        p.one::<bool>(
            "SELECT EXISTS (SELECT FROM pg_stat_replication \
             WHERE application_name = 'prod' AND state = 'streaming')",
        )
        .then_some(())
    });
    standby.promote();
    let refusal = refused(&standby);
    assert_eq!(
        refusal.code().code(),
        "55006",
        "the promoted standby's claim of the primary's worker id {w}: {}",
        refusal.message()
    );
    // Several renewals of the primary later, the promoted standby still has no worker id.
    std::thread::sleep(Duration::from_secs(3));
    let (state, held, error) = state_of(&standby);
    assert!(
        held.is_none() && state != "held",
        "the promoted standby: {state} {held:?} {error:?}"
    );
    assert_eq!(status(&mut p).0, "held");
    assert_eq!(status(&mut p).1, Some(w));
    ids.extend(draw(&primary, 100));
    assert!(ids.iter().all(|&id| twitter::worker_of(id) == i64::from(w)));
    let standby_ids = standby
        .connect("postgres")
        .query("SELECT snowflake_nextval()", &[]);
    assert!(
        standby_ids.is_err(),
        "the promoted standby issued an id without a worker id: {standby_ids:?}"
    );
    assert!(repeated(&ids).is_empty(), "the primary repeated an id");
    drop(standby);
}
