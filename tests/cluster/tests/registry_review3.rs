//! Issue 28, the third review's findings against real servers: a registry reloaded from a dump
//! into the same running server is on probation (#2), a first host of a multi-host registry that
//! accepts connections but never answers is passed over (#3), and a primary never vouches for a
//! standby that streams under the primary's own node name (#5).

use std::net::TcpListener;
use std::time::Duration;

use idgen_cluster_tests::registry::{held_worker, registry, status, FAST};
use idgen_cluster_tests::{wait_for, Cluster, One};

/// #2: `pg_dump` of a used registry database restored into another database of the same
/// running server: the restored `idgen_registry_server` row names this very server (system
/// identifier and postmaster start), but the restore is a rewind all the same. The install
/// token, made at `CREATE EXTENSION` and not dumped, makes the restored copy another server:
/// its first call starts a probation. (Before the fix the identity matched and the copy granted
/// expired leases and handed out ranges at once.)
#[test]
fn a_dump_reloaded_into_the_same_server_is_on_probation() {
    let reg = registry("reg_dump");
    let mut r = reg.connect("postgres");
    // Use it: a lease (so there is something to lose) and the server row.
    r.batch_execute(
        "SELECT * FROM idgen_registry_claim('n1', 'inc1', repeat('a', 64), 'sys', 1, NULL, \
         1704067200000, 10, 12, 1, 2000, 200, 0, 5432, 0)",
    )
    .unwrap();
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
    let copied: String = restored.one("SELECT server_identity FROM idgen_registry_server");
    assert_eq!(copied, identity, "the dump carries the server row");
    let on_probation: bool =
        restored.one("SELECT claims_until > clock_timestamp() FROM idgen_registry_probation()");
    assert!(on_probation, "the restored registry is not on probation");
    let now: String = restored.one("SELECT server_identity FROM idgen_registry_server");
    assert_ne!(now, identity);
    // The original database is the same server as before: no probation there.
    let original: bool =
        r.one("SELECT claims_until > clock_timestamp() FROM idgen_registry_probation()");
    assert!(!original, "the original registry went on probation");
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
/// included, and so streams under the primary's own name (its `application_name` here is set to
/// it). A restored copy of the primary carries that name too, so the primary never names
/// itself among the standbys it vouches for. (Before the fix it did, and such a copy, promoted,
/// took the live primary's lease.)
#[test]
fn a_primary_never_vouches_for_a_standby_under_its_own_name() {
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
    // The standby streams as application_name = 'prod', the primary's node name: a copy made
    // a standby by hand (standby.signal and primary_conninfo in its postgresql.conf).
    let standby = Cluster::clone_of(
        &primary,
        "own_name_standby",
        &[&format!(
            "primary_conninfo = 'host=127.0.0.1 port={} user=postgres application_name=prod'",
            primary.port()
        )],
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
    // Several renewals later the primary still vouches for nobody.
    std::thread::sleep(Duration::from_secs(2));
    let attested: Vec<String> = reg.connect("postgres").one(&format!(
        "SELECT attested_standbys FROM idgen_registry_lease WHERE worker_id = {w}"
    ));
    assert!(attested.is_empty(), "the primary vouched for {attested:?}");
    assert_eq!(status(&mut p).0, "held");
    drop(standby);
}
