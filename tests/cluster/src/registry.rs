//! Helpers of the registry tests (`tests/registry*.rs`): a registry server, nodes of it, and
//! what a node's `idgen_registry_status` says.

use std::time::Duration;

use postgres::Client;

use crate::{column, db_error, wait_for, Cluster, One};

/// Renewal interval and lease of most tests: quick, with ten renewals per lease.
pub const FAST: [&str; 2] = [
    "idgen.registry_renew_interval = 200ms",
    "idgen.registry_lease = 2s",
];

/// A registry: a server with idgen in its `postgres` database.
pub fn registry(tag: &str) -> Cluster {
    Cluster::with_idgen(tag, 0, &[])
}

/// `idgen.registry = '...'` pointing at `registry`'s `postgres` database as `user`.
pub fn registry_setting(registry: &Cluster, user: &str) -> String {
    format!(
        "idgen.registry = 'host=127.0.0.1 port={} dbname=postgres user={user}'",
        registry.port()
    )
}

/// A started node of `registry` with `settings` (the worker id among them) and idgen created.
pub fn node(registry: &Cluster, tag: &str, settings: &[&str]) -> Cluster {
    let setting = registry_setting(registry, "postgres");
    let mut all = vec!["shared_preload_libraries = 'idgen'", setting.as_str()];
    all.extend_from_slice(settings);
    let c = Cluster::start(tag, &all);
    c.create_db_with_idgen("postgres");
    c
}

/// The node's registry client state, worker id and last error.
pub fn status(client: &mut Client) -> (String, Option<i32>, Option<String>) {
    let row = client
        .query_one(
            "SELECT state, worker_id, last_error FROM idgen_registry_status",
            &[],
        )
        .unwrap();
    (row.get(0), row.get(1), row.get(2))
}

/// Waits until the node holds a lease; returns its worker id.
pub fn held_worker(node: &Cluster, within: Duration) -> i32 {
    let mut client = node.connect("postgres");
    wait_for("a held lease", within, || match status(&mut client) {
        (state, Some(w), _) if state == "held" => Some(w),
        _ => None,
    })
}

/// Waits until the node's claim is refused; returns the error `snowflake_nextval()` raises.
pub fn refused(node: &Cluster) -> postgres::error::DbError {
    let mut client = node.connect("postgres");
    wait_for("a refused claim", Duration::from_secs(20), || {
        (status(&mut client).0 == "refused").then_some(())
    });
    db_error(client.query_one("SELECT snowflake_nextval()", &[]))
}

/// `n` ids from the node.
pub fn draw(node: &Cluster, n: i32) -> Vec<i64> {
    column(
        &mut node.connect("postgres"),
        &format!("SELECT snowflake_nextval() FROM generate_series(1, {n})"),
    )
}

/// Nothing was issued since the server started.
pub fn nothing_issued(node: &Cluster) -> bool {
    node.connect("postgres")
        .one::<bool>("SELECT last_id IS NULL FROM snowflake_status()")
}
