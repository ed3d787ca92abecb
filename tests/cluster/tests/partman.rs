//! Partitioning by Snowflake id with pg_partman, with Debian's
//! `postgresql-15-partman` 4.7 and its background worker (`pg_partman_bgw`, every second).
//!
//! - A day in id units is `snowflake_compose(now() + interval '24 hours') - snowflake_compose(now())`:
//!   `86,400,000 / time_unit_ms` ticks shifted left by `worker_bits + sequence_bits`, exact
//!   whenever the tick divides a day (1 ms: 362387865600000). pg_partman rounds every id bound
//!   down to a multiple of the interval, counted from id 0, which is `idgen.epoch`: daily
//!   partitions therefore start at the epoch's time of day (midnight UTC with the default
//!   epoch), whatever the session's time zone.
//! - Daily: `create_parent(p_type => 'native', p_interval => <a day in id units>,
//!   p_start_partition => snowflake_compose(now())::text)`; rows with `DEFAULT snowflake_nextval()`
//!   and composed ids at both sides of midnight each land in the partition whose bounds contain
//!   the id and whose day is the id's UTC day, none in the default partition; the background
//!   worker premakes four days (daily.sql's premake) beyond the highest id.
//! - The idle table: maintenance follows `max(id)`, not the clock. Under libfaketime the
//!   server's clock jumps 10 days ahead of a table's last row (premake 2): the rows drawn then
//!   by the default land in its default partition; from then on every run of the
//!   background worker fails (it cannot attach today's partition over the default's rows) and
//!   rolls back the maintenance of every other partition set of the database too. Remedy:
//!   `partman.partition_data_id` moves the rows out of the default partition, and a premake from
//!   the clock (`partman.create_partition_id` with ids composed from `now()`) puts the table ahead
//!   again; run before the rows arrive, the same statement keeps them out of the default.
//! - Monthly: pg_partman's id intervals are one constant number, months are not, so monthly
//!   partitions are made by time on a `created_at` column derived from the id (a default reading
//!   `snowflake_currval()`, a CHECK that it equals `snowflake_timestamp(id)`), with
//!   `infinite_time_partitions` so that the background worker premakes from the clock.
//! - Layouts: 10 ms ticks with an epoch at midnight +08 give exact days starting at midnight
//!   +08; 7 ms ticks (which do not divide a day) give no constant day at all.
//!
//! The configuration and the statements that docs/operations/partitioning.md shows are read
//! from `tests/recipes/partman/`, and the page includes those files: what it shows is what runs.
//!
//! Run by `scripts/recipes/partman.sh`, which installs `postgresql-15-partman`.

use std::time::Duration;

use idgen_cluster_tests::{column, db_error, sqlstate, wait_for, Cluster, One};

/// Sanity bound for every wait on the background worker (not a performance claim).
const BOUND: Duration = Duration::from_secs(60);

/// [`wait_for`] within [`BOUND`] for what pg_partman's background worker does; on a timeout the
/// server's log (the worker's runs, their errors) goes to the output before the panic, so a
/// failure in CI says why.
fn wait_for_worker<T>(cluster: &Cluster, what: &str, check: impl FnMut() -> Option<T>) -> T {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        wait_for(what, BOUND, check)
    })) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("server log after waiting for {what}:\n{}", cluster.log());
            std::panic::resume_unwind(e)
        }
    }
}

/// A day in id units under the server's layout (the expression of the page and of daily.sql).
const DAY_IN_ID_UNITS: &str =
    "snowflake_compose(now() + interval '24 hours') - snowflake_compose(now())";

/// The lowest id of the current UTC day.
const TODAY_UTC: &str = "snowflake_compose(date_trunc('day', now(), 'UTC'))";

/// postgresql.conf lines preloading idgen (worker 7) and pg_partman's background worker,
/// which runs `run_maintenance()` in database `postgres` every second, in UTC.
const PARTMAN_SETTINGS: &str = include_str!("../../recipes/partman/postgresql.conf");

/// pg_partman in its own schema `partman`.
const CREATE_PARTMAN: &str = include_str!("../../recipes/partman/extension.sql");

/// Table `events`, partitioned by range of a Snowflake id drawn by default, and its
/// `create_parent` for daily partitions: the first one holds `now()`, premake 4.
const DAILY: &str = include_str!("../../recipes/partman/daily.sql");

/// Table `orders`, partitioned by month of a `created_at` derived from the id; premake 1.
const MONTHLY: &str = include_str!("../../recipes/partman/monthly.sql");

/// Premake `orders`' months from the clock (`infinite_time_partitions`), 3 ahead.
const MONTHLY_FROM_THE_CLOCK: &str =
    include_str!("../../recipes/partman/monthly-from-the-clock.sql");

/// The remedy's first statement: `partition_data_id` for `public.events`.
const MOVE_DEFAULT_ROWS: &str = include_str!("../../recipes/partman/move-default-rows.sql");

/// The page's listing of `public.events`' partitions, each with its day.
const LIST_PARTITIONS: &str = include_str!("../../recipes/partman/list-partitions.sql");

/// The premake from the clock for `public.events`: the partitions of today and the `premake`
/// days after it, whatever `max(id)` is.
const PREMAKE_FROM_THE_CLOCK: &str =
    include_str!("../../recipes/partman/premake-from-the-clock.sql");

/// A started server with [`PARTMAN_SETTINGS`], idgen created in database `postgres` and
/// pg_partman in its schema `partman`.
fn partman_cluster(tag: &str) -> Cluster {
    let cluster = Cluster::start(tag, &[PARTMAN_SETTINGS]);
    cluster.create_db_with_idgen("postgres");
    cluster
        .connect("postgres")
        .batch_execute(CREATE_PARTMAN)
        .unwrap();
    cluster
}

/// The first column of the last row that the statements of `sql` return (simple protocol).
fn last_value(client: &mut postgres::Client, sql: &str) -> String {
    client
        .simple_query(sql)
        .unwrap_or_else(|e| panic!("{sql}: {e}: {:?}", e.as_db_error()))
        .into_iter()
        .filter_map(|m| match m {
            postgres::SimpleQueryMessage::Row(r) => r.get(0).map(str::to_owned),
            _ => None,
        })
        .last()
        .unwrap_or_else(|| panic!("{sql}: no row"))
}

/// The premake that daily.sql prints: pg_partman's default, a production margin.
const PRINTED_PREMAKE: i32 = 4;

/// [`DAILY`] for table `table` with `premake`: the table and its daily partitions by id, the
/// first one holding `now()`. Returns what `create_parent` returned. A `premake` other than
/// [`PRINTED_PREMAKE`] replaces the printed one (the idle-table test's shorter margin).
fn create_daily_table(client: &mut postgres::Client, table: &str, premake: i32) -> bool {
    let printed = format!("p_premake         => {PRINTED_PREMAKE},");
    assert!(DAILY.contains(&printed), "daily.sql: {printed}");
    let sql = DAILY
        .replace("events", table)
        .replace(&printed, &format!("p_premake         => {premake},"));
    let created = last_value(client, &sql) == "t";
    assert!(created, "create_parent of {table}");
    created
}

/// The lower bounds of the id partitions of `table`, ascending (the default partition left out).
fn id_partitions(client: &mut postgres::Client, table: &str) -> Vec<i64> {
    column(
        client,
        &format!(
            "SELECT (regexp_match(pg_get_expr(c.relpartbound, c.oid), 'FROM \\(''(\\d+)''\\)'))[1]::bigint AS lo
             FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
             WHERE i.inhparent = '{table}'::regclass
               AND pg_get_expr(c.relpartbound, c.oid) <> 'DEFAULT'
             ORDER BY lo"
        ),
    )
}

/// Where the rows of an id-partitioned table are, counted: (rows, distinct ids, in the default
/// partition, inside the bounds of their partition, in the partition of their own day in
/// `zone` (the day of `snowflake_decode(id).ts` equals the day its partition's lower bound
/// decodes to, and that bound is midnight in `zone`)).
fn id_placement(client: &mut postgres::Client, table: &str, zone: &str) -> [i64; 5] {
    let row = client
        .query_one(
            &format!(
                "WITH parts AS (
                     SELECT c.oid, pg_get_expr(c.relpartbound, c.oid) = 'DEFAULT' AS is_default,
                            (regexp_match(pg_get_expr(c.relpartbound, c.oid),
                                          'FROM \\(''(\\d+)''\\) TO \\(''(\\d+)''\\)')) AS b
                     FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
                     WHERE i.inhparent = '{table}'::regclass),
                 placed AS (
                     SELECT t.id, p.is_default, p.b[1]::bigint AS lo, p.b[2]::bigint AS hi,
                            ((snowflake_decode(t.id)).ts AT TIME ZONE '{zone}')::date AS id_day
                     FROM {table} t JOIN parts p ON p.oid = t.tableoid)
                 SELECT count(*),
                        count(DISTINCT id),
                        count(*) FILTER (WHERE is_default),
                        count(*) FILTER (WHERE id >= lo AND id < hi),
                        count(*) FILTER (
                            WHERE (snowflake_timestamp(lo) AT TIME ZONE '{zone}')
                                  = id_day::timestamp)
                 FROM placed"
            ),
            &[],
        )
        .unwrap();
    [row.get(0), row.get(1), row.get(2), row.get(3), row.get(4)]
}

/// How many runs of pg_partman's background worker failed because the default partition held
/// rows of the partition it tried to attach.
fn default_blocked_runs(cluster: &Cluster) -> usize {
    cluster
        .log()
        .matches("would be violated by some row")
        .count()
}

/// Rows in default partitions, from pg_partman's monitoring function.
fn check_default(client: &mut postgres::Client) -> Vec<(String, i64)> {
    client
        .query(
            "SELECT default_table, count FROM partman.check_default()",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect()
}

/// [`PREMAKE_FROM_THE_CLOCK`] for `table`: the partitions of today and the `premake` days after
/// it, whatever `max(id)` is.
fn premake_from_the_clock(client: &mut postgres::Client, table: &str) {
    // create_partition_id returns false when every partition existed already: the callers
    // check the partitions.
    let sql = PREMAKE_FROM_THE_CLOCK.replace("'public.events'", &format!("'public.{table}'"));
    client.batch_execute(&sql).unwrap_or_else(|e| {
        panic!(
            "{sql}: {e}: {}",
            e.as_db_error().map(|d| d.message()).unwrap_or_default()
        )
    });
}

/// What a database's owner can plant for a superuser's unqualified names: a role `owner` that
/// owns database `postgres` (and so its schema `public`, which PostgreSQL 15 gives the
/// database's owner) creates functions named as those the premake calls, in a schema `postgres`
/// (the superuser's "$user") and in `public`, each recording its call and its caller's pid in
/// `captured.calls` and returning 0, and puts pg_catalog last in the database's search_path.
/// Dropped, it puts everything back.
struct Captor<'a>(&'a Cluster);

fn plant_captor(cluster: &Cluster) -> Captor<'_> {
    cluster
        .connect("postgres")
        .batch_execute(
            "CREATE ROLE owner LOGIN;
             ALTER DATABASE postgres OWNER TO owner;
             CREATE SCHEMA captured AUTHORIZATION owner;
             CREATE TABLE captured.calls (name text, pid integer);
             ALTER TABLE captured.calls OWNER TO owner;
             GRANT USAGE ON SCHEMA captured TO PUBLIC;
             GRANT INSERT ON captured.calls TO PUBLIC",
        )
        .unwrap();
    let mut owner = cluster.connect_as("postgres", "owner");
    owner
        .batch_execute(
            "CREATE SCHEMA postgres;
             CREATE FUNCTION postgres.snowflake_compose(t timestamptz, worker_id integer DEFAULT 0,
                                                        sequence integer DEFAULT 0)
               RETURNS bigint LANGUAGE sql
               AS $$ INSERT INTO captured.calls VALUES ('snowflake_compose', pg_backend_pid()) RETURNING 0::bigint $$;
             CREATE FUNCTION postgres.make_interval(hours integer) RETURNS interval LANGUAGE sql
               AS $$ INSERT INTO captured.calls VALUES ('make_interval', pg_backend_pid())
                     RETURNING interval '0' $$;
             CREATE FUNCTION postgres.generate_series(integer, integer) RETURNS SETOF integer
               LANGUAGE sql
               AS $$ INSERT INTO captured.calls VALUES ('generate_series', pg_backend_pid())
                     RETURNING 0 $$;
             CREATE FUNCTION public.make_interval(hours integer) RETURNS interval LANGUAGE sql
               AS $$ INSERT INTO captured.calls VALUES ('make_interval', pg_backend_pid())
                     RETURNING interval '0' $$;
             CREATE FUNCTION public.generate_series(integer, integer) RETURNS SETOF integer
               LANGUAGE sql
               AS $$ INSERT INTO captured.calls VALUES ('generate_series', pg_backend_pid())
                     RETURNING 0 $$;
             ALTER DATABASE postgres SET search_path = \"$user\", public, pg_catalog;",
        )
        .unwrap();
    Captor(cluster)
}

impl Drop for Captor<'_> {
    fn drop(&mut self) {
        let _ = self.0.connect("postgres").batch_execute(
            "ALTER DATABASE postgres RESET search_path;
             DROP SCHEMA postgres CASCADE;
             DROP FUNCTION public.make_interval(integer), public.generate_series(integer, integer);
             ALTER DATABASE postgres OWNER TO postgres;",
        );
    }
}

#[test]
#[ignore = "needs postgresql-15-partman: run by scripts/recipes/partman.sh"]
fn daily_partitions_by_id_follow_utc_days_and_the_background_worker_premakes_them() {
    let cluster = partman_cluster("partman-daily");
    let mut client = cluster.connect("postgres");
    // Any session time zone: the partitions are UTC days (id 0 is the default epoch, midnight
    // UTC). A calendar day in this zone is 23 hours on 2026-03-08; 24 hours are always a day.
    client
        .batch_execute("SET timezone = 'America/New_York'")
        .unwrap();
    let day: i64 = client.one(&format!("SELECT {DAY_IN_ID_UNITS}"));
    assert_eq!(day, 86_400_000 << 22);
    assert_eq!(day, 362_387_865_600_000);
    let dst_day: i64 = client.one(
        "SELECT snowflake_compose(timestamptz '2026-03-08 00:00' + interval '1 day')
              - snowflake_compose(timestamptz '2026-03-08 00:00')",
    );
    assert_eq!(dst_day, (23 * 3_600_000) << 22, "'1 day' is 23 hours there");

    // One transaction: now() is one instant for create_parent and for "today". daily.sql as
    // printed: premake 4.
    client.batch_execute("BEGIN").unwrap();
    let made = create_daily_table(&mut client, "events", PRINTED_PREMAKE);
    let today: i64 = client.one(&format!("SELECT {TODAY_UTC}"));
    client.batch_execute("COMMIT").unwrap();
    assert!(made);
    let premake: i32 =
        client.one("SELECT premake FROM partman.part_config WHERE parent_table = 'public.events'");
    assert_eq!(premake, 4, "events' premake: pg_partman's default");
    let parts = id_partitions(&mut client, "events");
    let days = |from: i64, to: i64| -> Vec<i64> { (from..=to).map(|k| today + k * day).collect() };
    assert_eq!(parts, days(0, 4));
    assert_eq!(today % day, 0, "bounds are multiples of the interval");
    let midnight: bool = client.one_with(
        "SELECT snowflake_timestamp($1) = date_trunc('day', now(), 'UTC')",
        &[&today],
    );
    assert!(midnight, "today's partition starts at midnight UTC");

    // Rows drawn by the default, in one statement and in many.
    client
        .batch_execute("INSERT INTO events (note) SELECT 'bulk' FROM generate_series(1, 1000)")
        .unwrap();
    for _ in 0..20 {
        client
            .execute("INSERT INTO events (note) VALUES ('single')", &[])
            .unwrap();
    }
    // Both sides of midnight: the last id of today (23:59:59.999, worker 1023, sequence 4095)
    // and the first id of tomorrow; and an id two days ahead.
    client
        .execute(
            "INSERT INTO events (id, note) VALUES ($1, 'last of today'), ($2, 'first of tomorrow'),
                 (snowflake_compose(now() + interval '48 hours', 7), 'in two days')",
            &[&(today + day - 1), &(today + day)],
        )
        .unwrap();
    let last_of_today: String = client.one_with(
        "SELECT to_char(ts AT TIME ZONE 'UTC', 'HH24:MI:SS.MS') || ' ' || worker_id || ' ' || sequence
         FROM snowflake_decode($1)",
        &[&(today + day - 1)],
    );
    assert_eq!(last_of_today, "23:59:59.999 1023 4095");
    let placed = id_placement(&mut client, "events", "UTC");
    println!("daily: [rows, distinct ids, in default, in bounds, in their UTC day] = {placed:?}");
    assert_eq!(placed, [1023, 1023, 0, 1023, 1023]);
    let sides: Vec<String> = column(
        &mut client,
        "SELECT note || ' in ' || tableoid::regclass FROM events
         WHERE note IN ('last of today', 'first of tomorrow') ORDER BY id",
    );
    assert_eq!(
        sides,
        vec![
            format!("last of today in events_p{today}"),
            format!("first of tomorrow in events_p{}", today + day)
        ]
    );

    // The background worker (never run_maintenance() here) premakes 4 partitions beyond the
    // partition of the highest id (+2): days +5 and +6.
    let expected = days(0, 6);
    wait_for_worker(
        &cluster,
        "the background worker to premake days +5 and +6",
        || (id_partitions(&mut client, "events") == expected).then_some(()),
    );
    // It ran as pg_partman_bgw.role: no superuser, the owner of the table and its partitions.
    let (role, superuser, owners): (String, Option<bool>, Vec<String>) = {
        let row = client
            .query_one(
                "SELECT current_setting('pg_partman_bgw.role'),
                        (SELECT rolsuper FROM pg_roles
                          WHERE rolname = current_setting('pg_partman_bgw.role')),
                        ARRAY(SELECT DISTINCT pg_get_userbyid(c.relowner)::text FROM pg_class c
                               WHERE c.oid = 'events'::regclass
                                  OR c.oid IN (SELECT inhrelid FROM pg_inherits
                                                WHERE inhparent = 'events'::regclass))",
                &[],
            )
            .unwrap();
        (row.get(0), row.get(1), row.get(2))
    };
    println!("daily: maintenance role {role} (superuser {superuser:?}), owners {owners:?}");
    assert_eq!(
        superuser,
        Some(false),
        "pg_partman_bgw.role {role}: a role, and no superuser"
    );
    assert_eq!(
        owners,
        vec![role.clone()],
        "the owners of events and its partitions"
    );
    // The page's listing: every partition with its day, midnight UTC of today + k.
    let listed: Vec<String> = client
        .query(LIST_PARTITIONS, &[])
        .unwrap()
        .iter()
        .map(|r| {
            format!(
                "{} {}",
                r.get::<_, String>(0),
                r.get::<_, std::time::SystemTime>(1)
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_millis()
            )
        })
        .collect();
    let midnights: Vec<String> = column(
        &mut client,
        "SELECT 'events_p' || (snowflake_compose(d))::text || ' '
                || (extract(epoch FROM d) * 1000)::bigint::text
           FROM generate_series(date_trunc('day', now(), 'UTC'),
                                date_trunc('day', now(), 'UTC') + interval '144 hours',
                                interval '24 hours') AS d ORDER BY d",
    );
    assert_eq!(
        listed, midnights,
        "the listing of partitions and their days"
    );
    let placed = id_placement(&mut client, "events", "UTC");
    assert_eq!(placed, [1023, 1023, 0, 1023, 1023]);
    assert!(check_default(&mut client).is_empty());
    assert!(
        !cluster.log().contains("ERROR"),
        "errors in the log:\n{}",
        cluster.log()
    );
    println!(
        "daily: partitions after the background worker: {} (days 0 to +6)",
        expected.len()
    );
}

#[test]
#[ignore = "needs postgresql-15-partman: run by scripts/recipes/partman.sh"]
fn an_idle_table_sends_new_rows_to_the_default_partition_until_premade_from_the_clock() {
    // The server runs under libfaketime, so that its clock can jump 10 days ahead.
    let mut cluster = Cluster::init("partman-idle", &[PARTMAN_SETTINGS]);
    let clock = cluster.fake_clock();
    cluster.start_server();
    cluster.create_db_with_idgen("postgres");
    let mut client = cluster.connect("postgres");
    client.batch_execute(CREATE_PARTMAN).unwrap();
    let day: i64 = client.one(&format!("SELECT {DAY_IN_ID_UNITS}"));
    let today: i64 = client.one(&format!("SELECT {TODAY_UTC}"));
    let days = |from: i64, to: i64| -> Vec<i64> { (from..=to).map(|k| today + k * day).collect() };

    // Three tables with daily partitions, premake 2: one active, two that go idle after today.
    for table in ["events", "idle", "idle2"] {
        create_daily_table(&mut client, table, 2);
    }
    client
        .batch_execute(
            "INSERT INTO idle (note) SELECT 'day 0' FROM generate_series(1, 100);
             INSERT INTO idle2 (note) SELECT 'day 0' FROM generate_series(1, 100)",
        )
        .unwrap();
    assert_eq!(
        id_placement(&mut client, "idle", "UTC"),
        [100, 100, 0, 100, 100]
    );

    // The background worker works: an id two days ahead gets days +3 and +4 made for events;
    // idle's highest id is today, so it has what premake 2 asks for.
    client
        .batch_execute(
            "INSERT INTO events (id, note) VALUES (snowflake_compose(now() + interval '48 hours', 7), 'ahead')",
        )
        .unwrap();
    wait_for_worker(
        &cluster,
        "the background worker to premake events +3, +4",
        || (id_partitions(&mut client, "events") == days(0, 4)).then_some(()),
    );
    assert_eq!(id_partitions(&mut client, "idle"), days(0, 2));

    // Ten days pass with no row: maintenance follows max(id), not the clock, so nothing is
    // made, and the rows of day +10, drawn by the default, land in the default partition.
    clock.set_offset_secs(10.0 * 86_400.0);
    wait_for("the server's clock to be 10 days ahead", BOUND, || {
        let moved: bool = client.one_with(
            "SELECT now() >= snowflake_timestamp($1) + interval '10 days'",
            &[&today],
        );
        moved.then_some(())
    });
    client
        .batch_execute("INSERT INTO idle (note) SELECT 'day 10' FROM generate_series(1, 100)")
        .unwrap();
    let placed = id_placement(&mut client, "idle", "UTC");
    println!("idle after 10 days: [rows, distinct ids, in default, in bounds, in their UTC day] = {placed:?}");
    assert_eq!(placed, [200, 200, 100, 100, 100]);
    assert_eq!(
        check_default(&mut client),
        vec![("public.idle_default".to_owned(), 100)]
    );

    // From now on every maintenance run fails on the idle table, and its rollback takes the
    // other tables' maintenance with it: events, with an id 4 days ahead, gets no day +5 or +6.
    let before = default_blocked_runs(&cluster);
    client
        .batch_execute(&format!(
            "INSERT INTO events (id, note) VALUES ({} + 7 * 4096, 'further')",
            today + 4 * day
        ))
        .unwrap();
    let failed = wait_for("two failed background worker runs", BOUND, || {
        let n = default_blocked_runs(&cluster);
        (n >= before + 2).then_some(n)
    });
    println!("idle: background worker runs failed so far: {failed}");
    assert!(
        cluster.log().contains(
            "updated partition constraint for default partition \"idle_default\" would be violated by some row"
        ),
        "{}",
        cluster.log()
    );
    assert_eq!(
        id_partitions(&mut client, "events"),
        days(0, 4),
        "a run succeeded"
    );
    assert_eq!(
        id_partitions(&mut client, "idle"),
        days(0, 2),
        "a run succeeded"
    );

    // Remedy: move the rows out of the default partition (this makes day +10's partition),
    // then premake from the clock.
    let moved: i64 = last_value(
        &mut client,
        &MOVE_DEFAULT_ROWS.replace("'public.events'", "'public.idle'"),
    )
    .parse()
    .unwrap();
    assert_eq!(moved, 100);
    assert!(check_default(&mut client).is_empty());
    // Run as a superuser in a database whose owner planted functions named as those it calls
    // and put pg_catalog last: the premake calls only idgen's and PostgreSQL's own.
    let captor = plant_captor(&cluster);
    let mut superuser = cluster.connect("postgres");
    let pid: i32 = superuser.one("SELECT pg_backend_pid()");
    premake_from_the_clock(&mut superuser, "idle");
    let captured: Vec<String> = column(
        &mut client,
        &format!("SELECT name FROM captured.calls WHERE pid = {pid} ORDER BY name"),
    );
    assert!(
        captured.is_empty(),
        "the premake called the planted functions {captured:?}"
    );
    let parts = id_partitions(&mut client, "idle");
    assert_eq!(parts, [days(0, 2), days(10, 12)].concat());
    drop(captor);
    client
        .batch_execute("INSERT INTO idle (note) SELECT 'day 10, after' FROM generate_series(1, 10)")
        .unwrap();
    let placed = id_placement(&mut client, "idle", "UTC");
    println!("idle after the remedy: {placed:?}");
    assert_eq!(placed, [210, 210, 0, 210, 210]);
    // The background worker runs again for every table: events gets days +5 and +6.
    wait_for(
        "the background worker to premake events +5, +6",
        BOUND,
        || (id_partitions(&mut client, "events") == days(0, 6)).then_some(()),
    );

    // Prevention: the same premake from the clock, before the rows of day +10 arrive.
    premake_from_the_clock(&mut client, "idle2");
    client
        .batch_execute("INSERT INTO idle2 (note) SELECT 'day 10' FROM generate_series(1, 100)")
        .unwrap();
    let placed = id_placement(&mut client, "idle2", "UTC");
    println!("idle2, premade from the clock first: {placed:?}");
    assert_eq!(placed, [200, 200, 0, 200, 200]);
    assert!(check_default(&mut client).is_empty());
    assert_eq!(
        id_partitions(&mut client, "idle2"),
        [days(0, 2), days(10, 12)].concat()
    );
}
#[test]
#[ignore = "needs postgresql-15-partman: run by scripts/recipes/partman.sh"]
fn monthly_partitions_by_a_time_column_derived_from_the_id() {
    let cluster = partman_cluster("partman-monthly");
    let mut client = cluster.connect("postgres");
    // A generated column would be simpler, but PostgreSQL refuses it as a partition key.
    let refused = client.batch_execute(
        "CREATE TABLE g (id bigint, created_at timestamptz GENERATED ALWAYS AS (snowflake_timestamp(id)) STORED)
         PARTITION BY RANGE (created_at)",
    );
    assert_eq!(
        db_error(refused).message(),
        "cannot use generated column in partition key"
    );

    // One transaction: now() is one instant for create_parent and for the expected names.
    client.batch_execute("BEGIN").unwrap();
    let made = last_value(&mut client, MONTHLY) == "t";
    let expected: Vec<String> = client.one(
        "SELECT ARRAY(SELECT 'orders_p' || to_char(date_trunc('month', now(), 'UTC') + make_interval(months => k), 'YYYY_MM')
                      FROM generate_series(-1, 3) AS k)",
    );
    client.batch_execute("COMMIT").unwrap();
    assert!(made);
    let monthly = |client: &mut postgres::Client| -> Vec<String> {
        column(
            client,
            "SELECT partition_tablename FROM partman.show_partitions('public.orders')",
        )
    };
    assert_eq!(monthly(&mut client), expected[..3].to_vec());

    // Premake from the clock: the table is empty, so only the clock can drive this.
    client.batch_execute(MONTHLY_FROM_THE_CLOCK).unwrap();
    wait_for(
        "the background worker to premake months +2, +3",
        BOUND,
        || {
            let now = monthly(&mut client);
            expected.iter().all(|m| now.contains(m)).then_some(())
        },
    );

    // Rows by default (INSERT ... SELECT, single rows, COPY), and composed ids on both sides of
    // the next month's start, and 40 days ahead.
    client
        .batch_execute("INSERT INTO orders (note) SELECT 'bulk' FROM generate_series(1, 1000)")
        .unwrap();
    for _ in 0..10 {
        client
            .execute("INSERT INTO orders (note) VALUES ('single')", &[])
            .unwrap();
    }
    {
        use std::io::Write;
        let mut w = client.copy_in("COPY orders (note) FROM STDIN").unwrap();
        for i in 0..100 {
            writeln!(w, "copy {i}").unwrap();
        }
        w.finish().unwrap();
    }
    client
        .batch_execute(
            "INSERT INTO orders (id, created_at, note)
             SELECT i, snowflake_timestamp(i), n FROM (VALUES
                 (snowflake_compose(date_trunc('month', now(), 'UTC') + interval '1 month') - 1, 'last of this month'),
                 (snowflake_compose(date_trunc('month', now(), 'UTC') + interval '1 month'), 'first of next month'),
                 (snowflake_compose(now() + interval '40 days', 7), 'in 40 days')) AS v(i, n)",
        )
        .unwrap();
    let row = client
        .query_one(
            "WITH parts AS (
                 SELECT c.oid, pg_get_expr(c.relpartbound, c.oid) = 'DEFAULT' AS is_default,
                        (regexp_match(pg_get_expr(c.relpartbound, c.oid),
                                      'FROM \\(''([^'']+)''\\) TO \\(''([^'']+)''\\)')) AS b
                 FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
                 WHERE i.inhparent = 'orders'::regclass),
             placed AS (
                 SELECT o.id, o.created_at, p.is_default, (snowflake_decode(o.id)).ts AS id_ts,
                        p.b[1]::timestamptz AS lo, p.b[2]::timestamptz AS hi
                 FROM orders o JOIN parts p ON p.oid = o.tableoid)
             SELECT count(*), count(DISTINCT id),
                    count(*) FILTER (WHERE is_default),
                    count(*) FILTER (WHERE created_at = snowflake_timestamp(id)),
                    count(*) FILTER (WHERE created_at >= lo AND created_at < hi),
                    count(*) FILTER (WHERE lo = date_trunc('month', id_ts, 'UTC'))
             FROM placed",
            &[],
        )
        .unwrap();
    let placed: [i64; 6] = [
        row.get(0),
        row.get(1),
        row.get(2),
        row.get(3),
        row.get(4),
        row.get(5),
    ];
    println!(
        "monthly: [rows, distinct ids, in default, created_at = snowflake_timestamp(id), \
         in bounds, in their UTC month] = {placed:?}"
    );
    assert_eq!(placed, [1113, 1113, 0, 1113, 1113, 1113]);
    let sides: Vec<String> = column(
        &mut client,
        "SELECT note || ' in ' || tableoid::regclass FROM orders
         WHERE note IN ('last of this month', 'first of next month') ORDER BY id",
    );
    assert_eq!(
        sides,
        vec![
            format!("last of this month in {}", expected[1]),
            format!("first of next month in {}", expected[2])
        ]
    );

    // An id given without its created_at is refused, never misfiled; so is a duplicate id.
    let explicit = client.execute(
        "INSERT INTO orders (id, note) VALUES (snowflake_compose(now() + interval '40 days', 7) + 1, 'no created_at')",
        &[],
    );
    assert_eq!(sqlstate(explicit), "23514");
    // The default reads snowflake_currval(), so it needs id's default evaluated first: PostgreSQL
    // does so in column order, except inside a multi-row VALUES list, which evaluates in the
    // order the columns are named. Named the other way, the CHECK refuses the rows.
    let reordered = client.execute(
        "INSERT INTO orders (created_at, id, note)
         VALUES (DEFAULT, snowflake_nextval(), 'reordered'), (DEFAULT, snowflake_nextval(), 'reordered')",
        &[],
    );
    assert_eq!(sqlstate(reordered), "23514");
    let some_id: i64 = client.one("SELECT min(id) FROM orders");
    let duplicate = client.execute(
        "INSERT INTO orders (id, created_at, note) VALUES ($1, snowflake_timestamp($1), 'again')",
        &[&some_id],
    );
    assert_eq!(sqlstate(duplicate), "23505");

    // A look-up by id prunes to one partition when it names created_at too.
    let plan = |client: &mut postgres::Client, sql: &str| -> usize {
        // Distinct tables scanned ("... Scan on orders_p2026_11 ...", not the "..._pkey" index).
        let scanned: std::collections::BTreeSet<String> =
            column::<String>(client, &format!("EXPLAIN (COSTS OFF) {sql}"))
                .iter()
                .filter_map(|l| l.split(" on ").nth(1))
                .filter_map(|rest| rest.split_whitespace().next())
                .filter(|t| t.starts_with("orders_") && !t.ends_with("_pkey"))
                .map(str::to_owned)
                .collect();
        scanned.len()
    };
    let pruned = plan(
        &mut client,
        &format!("SELECT * FROM orders WHERE id = {some_id} AND created_at = snowflake_timestamp({some_id})"),
    );
    let unpruned = plan(
        &mut client,
        &format!("SELECT * FROM orders WHERE id = {some_id}"),
    );
    println!("monthly: partitions scanned by id and created_at: {pruned}; by id alone: {unpruned}");
    assert_eq!(pruned, 1);
    // A prepared statement's generic plan prunes at executor start.
    client
        .batch_execute(
            "SET plan_cache_mode = force_generic_plan;
             PREPARE by_id(bigint) AS SELECT * FROM orders WHERE id = $1 AND created_at = snowflake_timestamp($1)",
        )
        .unwrap();
    let generic = plan(&mut client, &format!("EXECUTE by_id({some_id})"));
    assert_eq!(generic, 1, "generic plan");
    let all = monthly(&mut client).len();
    assert_eq!(unpruned, all + 1, "every partition and the default");
    assert!(check_default(&mut client).is_empty());
}

#[test]
#[ignore = "needs postgresql-15-partman: run by scripts/recipes/partman.sh"]
fn a_day_in_id_units_is_exact_when_the_tick_divides_a_day() {
    // Sonyflake-like 10 ms ticks, 16 worker and 8 sequence bits, epoch at midnight in +08.
    let cluster = Cluster::with_idgen(
        "partman-10ms",
        40000,
        &[
            "idgen.worker_bits = 16",
            "idgen.sequence_bits = 8",
            "idgen.time_unit_ms = 10",
            "idgen.epoch = '2024-01-01 00:00:00+08'",
            "timezone = 'UTC'",
        ],
    );
    let mut client = cluster.connect("postgres");
    client.batch_execute(CREATE_PARTMAN).unwrap();
    let day: i64 = client.one(&format!("SELECT {DAY_IN_ID_UNITS}"));
    assert_eq!(day, 8_640_000 << 24);
    let constant: bool = client.one_with(
        "SELECT bool_and(snowflake_compose(t + make_interval(hours => 24 * k)) - snowflake_compose(t) = k * $1::bigint)
         FROM (SELECT now() AS t) n, generate_series(0, 1000) AS k",
        &[&day],
    );
    assert!(constant, "1000 days are 1000 times a day");
    // Multiples of the interval decode to midnight in +08, the epoch's time of day.
    let midnights: bool = client.one_with(
        "SELECT bool_and(to_char(snowflake_timestamp(k * $1::bigint) AT TIME ZONE 'Asia/Shanghai', 'HH24:MI:SS.MS') = '00:00:00.000')
         FROM generate_series(900, 1100) AS k",
        &[&day],
    );
    assert!(midnights);

    create_daily_table(&mut client, "events", 1);
    let parts = id_partitions(&mut client, "events");
    let start_of_day: bool = client.one_with(
        "SELECT snowflake_timestamp($1) = date_trunc('day', now(), 'Asia/Shanghai')",
        &[&parts[0]],
    );
    assert!(
        start_of_day,
        "the first partition starts at today's midnight in +08"
    );
    client
        .batch_execute("INSERT INTO events (note) SELECT 'bulk' FROM generate_series(1, 300)")
        .unwrap();
    client
        .execute(
            "INSERT INTO events (id, note) VALUES ($1, 'last of the day'), ($2, 'first of the next')",
            &[&(parts[1] - 1), &parts[1]],
        )
        .unwrap();
    let placed = id_placement(&mut client, "events", "Asia/Shanghai");
    println!(
        "10 ms ticks: [rows, distinct ids, in default, in bounds, in their +08 day] = {placed:?}"
    );
    assert_eq!(placed, [302, 302, 0, 302, 302]);
    drop(client);
    drop(cluster);

    // 7 ms ticks do not divide a day: 86,400,000 / 7 leaves 1, so a day is 12342857 ticks on 6
    // days of 7 and 12342858 on the seventh; a constant interval drifts off midnight.
    let cluster = Cluster::with_idgen("partman-7ms", 7, &["idgen.time_unit_ms = 7"]);
    let mut client = cluster.connect("postgres");
    let lengths: Vec<i64> = column(
        &mut client,
        "SELECT DISTINCT (snowflake_compose(d + interval '24 hours') - snowflake_compose(d)) >> 22
         FROM generate_series(timestamptz '2026-01-01 00:00+00', '2026-01-14 00:00+00', interval '24 hours') AS d
         ORDER BY 1",
    );
    println!("7 ms ticks: day lengths in ticks {lengths:?}");
    assert_eq!(lengths, vec![12_342_857, 12_342_858]);
}
