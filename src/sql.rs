//! The install script of idgen: the one place that orders every part of it.
//!
//! A fresh `CREATE EXTENSION idgen` runs, in this order: `sql/bootstrap.sql` (the roles), the
//! `CREATE FUNCTION`s pgrx generates from the `#[pg_extern]`s, then one file per feature, each
//! holding the current definition of every object of its feature, and `sql/finalize.sql` last.
//! The upgrade scripts `sql/idgen--A--B.sql` are never part of it: they run only for `ALTER
//! EXTENSION idgen UPDATE`, and the upgrade test checks that an updated database ends with
//! exactly the objects of a fresh one. The generated script is committed as
//! `sql/install/idgen--<version>.sql` (`scripts/install-script.sh`, checked by the test
//! command), so that what an install binds can be read in one file.
//!
//! The C symbols that only older SQL declares (databases not yet updated) are in
//! [`crate::upgrade`].

// The roles, before anything is granted to them.
pgrx::extension_sql_file!("../sql/bootstrap.sql", bootstrap);

// Snowflake ids: comments on pgrx's functions.
pgrx::extension_sql_file!(
    "../sql/snowflake.sql",
    name = "snowflake",
    requires = [
        snowflake_nextval,
        snowflake_nextvals,
        snowflake_currval,
        snowflake_decode,
        snowflake_timestamp,
        snowflake_compose,
        snowflake_status,
        snowflake_uuid,
        snowflake_uuid_decode,
        snowflake_uuid_to_id,
        snowflake_uuid_from_id
    ]
);

// Text forms and short ids.
pgrx::extension_sql_file!(
    "../sql/web.sql",
    name = "web",
    requires = [
        "snowflake",
        snowflake_format,
        snowflake_parse,
        sqids_encode,
        sqids_decode
    ]
);

// Segments: the catalog table, segment_status(), privileges.
pgrx::extension_sql_file!(
    "../sql/segment.sql",
    name = "segment",
    requires = [
        "web",
        segment_create_cached,
        segment_alter_cached,
        segment_drop,
        segment_setval,
        segment_interleave_ready,
        segment_nextval,
        segment_nextvals,
        segment_currval,
        segment_cache_status
    ]
);

// Serial numbers: tables, their C functions (`sql = false` in Rust), the view.
pgrx::extension_sql_file!("../sql/serial.sql", name = "serial", requires = ["segment"]);

// idgen_adopt_column.
pgrx::extension_sql_file!("../sql/adopt.sql", name = "adopt", requires = ["serial"]);

// The registry: tables, SECURITY DEFINER functions, views.
pgrx::extension_sql_file!(
    "../sql/registry.sql",
    name = "registry",
    requires = ["adopt"]
);

// The metrics contract: views for monitoring (postgres_exporter's queries read them).
pgrx::extension_sql_file!(
    "../sql/metrics.sql",
    name = "metrics",
    requires = ["registry", segment_cache_counters]
);

// What guards the rest: the event trigger on renaming idgen's schema.
pgrx::extension_sql_file!("../sql/finalize.sql", finalize);
