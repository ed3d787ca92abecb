-- The metrics contract (docs/operations/monitoring.md, "Metrics"): one view per area, in
-- Prometheus's units and names, for postgres_exporter (monitoring/postgres_exporter/queries.yaml
-- reads them; a metric is `<query>_<column>`) and for any exporter that reads SQL.
--
-- * Only pg_monitor (and superusers) may read them: they show every segment and serial of the
--   database, with names, and the registry's state. They are views owned by the extension's
--   owner, so a member of pg_monitor reads idgen's tables through them without any grant on the
--   tables (idgen_serial is not readable by PUBLIC); the functions they call are executable by
--   pg_monitor.
-- * Bound when this script runs: every function, operator, type and table is qualified
--   (pg_catalog or idgen's schema), so nothing a user can create in a schema on the search
--   path can stand in for one, before or after CREATE EXTENSION.
-- * Reading them costs no id anything: the counters are kept where the slow paths run
--   (refills, waits, registry calls) or read from what the draws already write.
-- * Server-wide views (idgen_metrics_snowflake, idgen_metrics_registry_client) show the same
--   rows in every database of a server; per-database ones (segments, serials, the registry)
--   show the database they are read in.

-- This server's Snowflake generator, one row.
CREATE VIEW @extschema@.idgen_metrics_snowflake AS
SELECT s.worker_id,
       (s.worker_id IS NOT NULL)::pg_catalog.int4 AS worker_id_assigned,
       pg_catalog.date_part('epoch'::pg_catalog.text,
           s.exhausted_at OPERATOR(pg_catalog.-) pg_catalog.clock_timestamp()) AS layout_remaining_seconds,
       s.drift_ms::pg_catalog.float8 OPERATOR(pg_catalog./) 1000::pg_catalog.float8 AS drift_seconds,
       (SELECT CASE WHEN g.setting::pg_catalog.int8 OPERATOR(pg_catalog.<) 0::pg_catalog.int8 THEN NULL
                    ELSE g.setting::pg_catalog.float8 OPERATOR(pg_catalog./) 1000::pg_catalog.float8 END
          FROM pg_catalog.pg_settings g
         WHERE g.name OPERATOR(pg_catalog.=) 'idgen.max_drift_ms'::pg_catalog.text) AS max_drift_seconds,
       s.borrowed_ticks AS borrowed_ticks_total,
       s.waits AS waits_total,
       s.clock_failures AS clock_failures_total,
       s.clock_regressions AS clock_regressions_total,
       pg_catalog.date_part('epoch'::pg_catalog.text,
           s.reserved_until OPERATOR(pg_catalog.-) pg_catalog.clock_timestamp()) AS reservation_headroom_seconds,
       s.reservation_writes AS reservation_writes_total
  FROM @extschema@.snowflake_status() s;

-- This server's registry client, one row; none without idgen.registry.
CREATE VIEW @extschema@.idgen_metrics_registry_client AS
SELECT c.state, c.worker_id,
       -- NULL on a node that asks for no worker id (idgen.worker_id unset: global segments
       -- only), which holds no lease by design, whatever its state.
       CASE WHEN (SELECT g.setting FROM pg_catalog.pg_settings g
                   WHERE g.name OPERATOR(pg_catalog.=) 'idgen.worker_id'::pg_catalog.text)
                 OPERATOR(pg_catalog.=) '-1'::pg_catalog.text THEN NULL
            ELSE (c.worker_id IS NOT NULL
                  AND c.state OPERATOR(pg_catalog.=) ANY ('{held,renewing,recovering}'::pg_catalog.text[]))::pg_catalog.int4
       END AS lease_held,
       pg_catalog.date_part('epoch'::pg_catalog.text,
           c.lease_expires_at OPERATOR(pg_catalog.-) pg_catalog.clock_timestamp()) AS lease_remaining_seconds,
       pg_catalog.date_part('epoch'::pg_catalog.text,
           c.fenced_until OPERATOR(pg_catalog.-) pg_catalog.clock_timestamp()) AS fence_remaining_seconds,
       c.renewals AS renewals_total,
       n.calls AS calls_total,
       n.failures AS failures_total,
       c.clock_offset_ms OPERATOR(pg_catalog./) 1000::pg_catalog.float8 AS clock_offset_seconds,
       (SELECT g.setting::pg_catalog.float8 OPERATOR(pg_catalog./) 1000::pg_catalog.float8
          FROM pg_catalog.pg_settings g
         WHERE g.name OPERATOR(pg_catalog.=) 'idgen.registry_lease'::pg_catalog.text) AS lease_seconds,
       (SELECT CASE WHEN g.setting::pg_catalog.int8 OPERATOR(pg_catalog.<) 0::pg_catalog.int8 THEN NULL
                    ELSE g.setting::pg_catalog.float8 OPERATOR(pg_catalog./) 1000::pg_catalog.float8 END
          FROM pg_catalog.pg_settings g
         WHERE g.name OPERATOR(pg_catalog.=) 'idgen.registry_max_clock_offset_ms'::pg_catalog.text)
           AS max_clock_offset_seconds
  FROM @extschema@.idgen_registry_client_status() c
 CROSS JOIN @extschema@.idgen_registry_calls() n
 WHERE c.state OPERATOR(pg_catalog.<>) 'off'::pg_catalog.text;

-- Each segment of this database: its high-water mark against the largest number the columns
-- drawing from it can hold, and what this server's cache counted since it loaded the segment
-- (0 while it is not cached here). max_value: the narrowest integer type (through domains) of the
-- columns of permanent tables whose DEFAULT calls segment_nextval('<name>'); the bigint maximum
-- when none does. The defaults are found in one pass, through pg_depend's index on the function
-- they reference, and each one's segment names are read from the expression as PostgreSQL prints
-- it, whole quoted literals, so that no other name matches (a prefix, a LIKE wildcard).
-- Temporary tables are left out: any role may create one, and it ends with its session.
CREATE VIEW @extschema@.idgen_metrics_segment AS
WITH RECURSIVE drawing AS (
       SELECT pg_catalog.pg_get_expr(ad.adbin, ad.adrelid) AS expr, a.atttypid AS typ
         FROM pg_catalog.pg_depend d
         JOIN pg_catalog.pg_attrdef ad ON ad.oid OPERATOR(pg_catalog.=) d.objid
         JOIN pg_catalog.pg_attribute a
           ON a.attrelid OPERATOR(pg_catalog.=) ad.adrelid
          AND a.attnum OPERATOR(pg_catalog.=) ad.adnum
          AND NOT a.attisdropped
         JOIN pg_catalog.pg_class r ON r.oid OPERATOR(pg_catalog.=) ad.adrelid
        WHERE d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass::pg_catalog.oid
          AND d.refobjid OPERATOR(pg_catalog.=)
              '@extschema@.segment_nextval(pg_catalog.text)'::pg_catalog.regprocedure::pg_catalog.oid
          AND d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_attrdef'::pg_catalog.regclass::pg_catalog.oid
          AND r.relpersistence OPERATOR(pg_catalog.<>) 't'::pg_catalog."char"
     ),
     -- Each column type and the types under it, down a chain of domains.
     chain(typ, cur) AS (
       SELECT DISTINCT w.typ, w.typ FROM drawing w
       UNION ALL
       SELECT c.typ, t.typbasetype
         FROM chain c
         JOIN pg_catalog.pg_type t ON t.oid OPERATOR(pg_catalog.=) c.cur
        WHERE t.typtype OPERATOR(pg_catalog.=) 'd'::pg_catalog."char"
     ),
     capacity AS (
       SELECT c.typ,
              pg_catalog.min(CASE
                  WHEN c.cur OPERATOR(pg_catalog.=) 'pg_catalog.int2'::pg_catalog.regtype::pg_catalog.oid
                      THEN 32767::pg_catalog.int8
                  WHEN c.cur OPERATOR(pg_catalog.=) 'pg_catalog.int4'::pg_catalog.regtype::pg_catalog.oid
                      THEN 2147483647::pg_catalog.int8
                  ELSE 9223372036854775807::pg_catalog.int8
              END) AS max_value
         FROM chain c
        GROUP BY c.typ
     ),
     -- The segment names each default draws from: segment_nextval('<name>'::text), the name
     -- as an argument by position or by name, cast to text or through another type, the function's
     -- name and the type quoted or not (quote_all_identifiers), the name
     -- as a quoted literal ('' for a quote; \\ for a backslash when the reading session has
     -- standard_conforming_strings off, then with or without an E before it), not preceded by
     -- a letter of another name.
     named AS (
       SELECT CASE WHEN m.part[1] OPERATOR(pg_catalog.=) 'E'::pg_catalog.text
                     OR pg_catalog.current_setting('standard_conforming_strings'::pg_catalog.text)
                        OPERATOR(pg_catalog.=) 'off'::pg_catalog.text
                   THEN pg_catalog.replace(pg_catalog.replace(m.part[2], E'\\\\', E'\\'), '''''', '''')
                   ELSE pg_catalog.replace(m.part[2], '''''', '''')
              END AS name,
              k.max_value
         FROM drawing w
         JOIN capacity k ON k.typ OPERATOR(pg_catalog.=) w.typ
        CROSS JOIN LATERAL pg_catalog.regexp_matches(w.expr,
              E'(?:^|[^[:alnum:]_$])"?segment_nextval"?\\((?:"?name"? => )?\\(?(E?)''((?:[^'']|'''')*)''(?:::[[:alnum:] "_.]+)?\\)?(?:::[[:alnum:] "_.]+)?\\)',
              'g') AS m(part)
     ),
     narrowest AS (
       SELECT n.name, pg_catalog.min(n.max_value) AS max_value FROM named n GROUP BY n.name
     )
SELECT pg_catalog.current_database()::pg_catalog.text AS datname,
       s.name AS segment,
       s.scope,
       s.max_id AS high_water_mark,
       COALESCE(w.max_value, 9223372036854775807::pg_catalog.int8) AS max_value,
       s.max_id::pg_catalog.float8 OPERATOR(pg_catalog./)
           COALESCE(w.max_value, 9223372036854775807::pg_catalog.int8)::pg_catalog.float8 AS used_ratio,
       COALESCE(c.issued, 0::pg_catalog.int8) AS issued_total,
       COALESCE(c.refills, 0::pg_catalog.int8) AS refills_total,
       COALESCE(c.waits, 0::pg_catalog.int8) AS waits_total,
       COALESCE(c.timeouts, 0::pg_catalog.int8) AS timeouts_total,
       COALESCE(c.refill_failures, 0::pg_catalog.int8) AS refill_failures_total
  FROM @extschema@.idgen_segment s
  LEFT JOIN @extschema@.segment_cache_counters() c ON c.name OPERATOR(pg_catalog.=) s.name
  LEFT JOIN narrowest w ON w.name OPERATOR(pg_catalog.=) s.name;

-- Each serial of this database in its current period: the counter against the largest one
-- its format shows in full ({seq:0N}: 10^N - 1; the bigint maximum without a width).
CREATE VIEW @extschema@.idgen_metrics_serial AS
SELECT pg_catalog.current_database()::pg_catalog.text AS datname,
       s.name AS serial,
       COALESCE(p.period, ''::pg_catalog.text) AS period,
       COALESCE(c.value, 0::pg_catalog.int8) AS value,
       w.max_value,
       COALESCE(c.value, 0::pg_catalog.int8)::pg_catalog.float8
           OPERATOR(pg_catalog./) w.max_value::pg_catalog.float8 AS used_ratio
  FROM @extschema@.idgen_serial s
 CROSS JOIN LATERAL (SELECT @extschema@.idgen_serial_period(s.reset, s.time_zone) AS period) p
 CROSS JOIN LATERAL (SELECT COALESCE(@extschema@.idgen_serial_max_seq(s.format),
                                     9223372036854775807::pg_catalog.int8) AS max_value) w
  LEFT JOIN @extschema@.idgen_serial_counter c
         ON c.serial OPERATOR(pg_catalog.=) s.id
        AND c.period OPERATOR(pg_catalog.=) p.period;

-- The registry, in a database that is one (it recorded a layout at its first claim); no row
-- elsewhere. Held: leases neither released nor expired.
CREATE VIEW @extschema@.idgen_metrics_registry AS
SELECT pg_catalog.current_database()::pg_catalog.text AS datname,
       (1::pg_catalog.int8 OPERATOR(pg_catalog.<<) f.worker_bits) AS worker_ids,
       h.held AS worker_ids_held,
       (1::pg_catalog.int8 OPERATOR(pg_catalog.<<) f.worker_bits) OPERATOR(pg_catalog.-) h.held
           AS worker_ids_free,
       (SELECT COALESCE(pg_catalog.sum(g.ranges), 0::pg_catalog.numeric)::pg_catalog.int8
          FROM @extschema@.idgen_registry_segment g) AS ranges_taken_total,
       (SELECT (v.recovery_since IS NOT NULL)::pg_catalog.int4
          FROM @extschema@.idgen_registry_server v) AS recovery_open
  FROM @extschema@.idgen_registry_fleet f
 CROSS JOIN LATERAL (
       SELECT pg_catalog.count(*) AS held
         FROM @extschema@.idgen_registry_lease l
        WHERE l.released_tick IS NULL
          AND l.expires_at OPERATOR(pg_catalog.>) pg_catalog.clock_timestamp()) h;

REVOKE ALL ON TABLE idgen_metrics_snowflake, idgen_metrics_registry_client, idgen_metrics_segment,
    idgen_metrics_serial, idgen_metrics_registry FROM PUBLIC;
GRANT SELECT ON TABLE idgen_metrics_snowflake, idgen_metrics_registry_client, idgen_metrics_segment,
    idgen_metrics_serial, idgen_metrics_registry TO pg_monitor;

COMMENT ON VIEW idgen_metrics_snowflake IS
  'Metrics: this server''s Snowflake generator (layout time left, drift, waits, clock steps, reservation), for pg_monitor.';
COMMENT ON VIEW idgen_metrics_registry_client IS
  'Metrics: this server''s registry client (lease and fence time left, calls and failures); no row without idgen.registry. For pg_monitor.';
COMMENT ON VIEW idgen_metrics_segment IS
  'Metrics: each segment of this database (high-water mark against its columns'' type, numbers issued, refills, waits, timeouts, failed refills), for pg_monitor.';
COMMENT ON VIEW idgen_metrics_serial IS
  'Metrics: each serial of this database (the current period''s counter against its format''s width), for pg_monitor.';
COMMENT ON VIEW idgen_metrics_registry IS
  'Metrics: the registry in this database (worker ids held and free, ranges taken, an open recovery); no row elsewhere. For pg_monitor.';
