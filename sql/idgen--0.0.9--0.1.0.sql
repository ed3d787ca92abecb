-- idgen 0.0.9 -> 0.1.0 (the synthetic earlier release of tests/upgrade/idgen--0.0.9.sql).
-- Adds what 0.1.0 has and 0.0.9 had not: the batch, compose and status functions,
-- segment_alter, the idgen_admin role and its grants, the comments, and the length check on
-- descriptions. Existing rows of idgen_segment are kept as they are.

\echo Use "ALTER EXTENSION idgen UPDATE TO '0.1.0'" to load this file. \quit

ALTER TABLE idgen_segment
  ADD CONSTRAINT idgen_segment_description_check CHECK (octet_length(description) <= 1024);

CREATE FUNCTION "snowflake_nextvals"("count" INT) RETURNS SETOF bigint
VOLATILE PARALLEL RESTRICTED
LANGUAGE c AS 'MODULE_PATHNAME', 'snowflake_nextvals_wrapper';

CREATE FUNCTION "snowflake_compose"(
    "ts" timestamp with time zone, "worker_id" INT DEFAULT 0, "sequence" INT DEFAULT 0
) RETURNS bigint
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'snowflake_compose_wrapper';

CREATE FUNCTION "snowflake_status"() RETURNS TABLE (
    "worker_id" INT, "time_bits" INT, "worker_bits" INT, "sequence_bits" INT,
    "time_unit_ms" INT, "epoch" timestamp with time zone,
    "exhausted_at" timestamp with time zone, "last_id" bigint,
    "last_tick_at" timestamp with time zone, "drift_ms" bigint, "borrowed_ticks" bigint,
    "waits" bigint, "clock_failures" bigint, "clock_regressions" bigint,
    "reserved_tick" bigint, "reserved_until" timestamp with time zone,
    "reservation_writes" bigint
)
STRICT VOLATILE PARALLEL SAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'snowflake_status_wrapper';

CREATE FUNCTION "segment_alter"(
    "name" TEXT, "step" INT DEFAULT NULL, "description" TEXT DEFAULT NULL
) RETURNS void
VOLATILE PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'segment_alter_wrapper';

CREATE FUNCTION "segment_nextvals"("name" TEXT, "count" INT) RETURNS SETOF bigint
VOLATILE PARALLEL RESTRICTED
LANGUAGE c AS 'MODULE_PATHNAME', 'segment_nextvals_wrapper';

CREATE FUNCTION "segment_cache_status"() RETURNS TABLE (
    "name" TEXT, "cached_step" bigint, "current_first" bigint, "current_last" bigint,
    "current_used" bigint, "next_first" bigint, "next_last" bigint, "refills" bigint,
    "last_refill_at" timestamp with time zone, "refill_pending" bool
)
STRICT VOLATILE PARALLEL RESTRICTED
LANGUAGE c AS 'MODULE_PATHNAME', 'segment_cache_status_wrapper';

-- The rest is 0.1.0's finalize.sql, less what 0.0.9 already did (the table's dump marking and
-- privileges, the REVOKEs).

COMMENT ON FUNCTION snowflake_nextval() IS
  'Next Snowflake id of this server (41-bit ms time | 10-bit worker id | 12-bit sequence): unique, strictly increasing per server.';
COMMENT ON FUNCTION snowflake_nextvals(integer) IS
  'count consecutive Snowflake ids from one reservation, in increasing order.';
COMMENT ON FUNCTION snowflake_currval() IS
  'Last Snowflake id returned in this session; error before the first.';
COMMENT ON FUNCTION snowflake_decode(bigint) IS
  'Tick start time, worker id and sequence of a Snowflake id under this server''s layout.';
COMMENT ON FUNCTION snowflake_timestamp(bigint) IS
  'Start of the tick in which a Snowflake id was issued.';
COMMENT ON FUNCTION snowflake_compose(timestamptz, integer, integer) IS
  'Lowest Snowflake id at a time for a worker id and sequence: bounds for range scans and partitions.';
COMMENT ON FUNCTION snowflake_status() IS
  'This server''s Snowflake generator: worker id, layout, epoch, last id, drift and borrowed ticks.';

-- One row each: tell the planner (a set-returning function is estimated at 1000 rows).
ALTER FUNCTION snowflake_decode(bigint) ROWS 1;
ALTER FUNCTION snowflake_status() ROWS 1;

-- Segments ------------------------------------------------------------------------------------

-- pg_dump carries every row: the high-water marks survive dump and restore.
COMMENT ON TABLE idgen_segment IS
  'Segment high-water marks: numbers <= max_id may have been handed out, numbers above never. Written only by the idgen allocator worker.';

-- Everyone may read the high-water marks; nobody but the extension (its allocator) writes them.

-- Changing segments is for superusers and members of idgen_admin; drawing numbers is for all.
-- Roles belong to the cluster, not the database: the role is created by the first database's
-- CREATE EXTENSION and reused by the others (and survives DROP EXTENSION, without its grants).
DO $$
BEGIN
  -- A role of that name made by someone else (a CREATEROLE holder, before the first install)
  -- would hand what idgen grants it to whoever controls it: refuse one that can log in, has
  -- any attribute, a password, or an administrator who is not a superuser. Members a superuser
  -- granted (GRANT idgen_admin TO ...) are how it is meant to be used, and stay.
  IF EXISTS (SELECT FROM pg_catalog.pg_authid a
              WHERE a.rolname OPERATOR(pg_catalog.=) 'idgen_admin'::pg_catalog.name
                AND (a.rolsuper OR a.rolcreaterole OR a.rolcreatedb OR a.rolcanlogin
                     OR a.rolreplication OR a.rolbypassrls OR a.rolpassword IS NOT NULL
                     OR a.rolvaliduntil IS NOT NULL
                     OR EXISTS (SELECT FROM pg_catalog.pg_auth_members m
                                  JOIN pg_catalog.pg_authid adm
                                    ON adm.oid OPERATOR(pg_catalog.=) m.member
                                 WHERE m.roleid OPERATOR(pg_catalog.=) a.oid
                                   AND m.admin_option AND NOT adm.rolsuper))) THEN
    RAISE EXCEPTION 'role idgen_admin exists with rights idgen does not give it'
      USING ERRCODE = 'object_not_in_prerequisite_state',
            DETAIL = 'It can log in, has attributes or a password, or a role that is not a superuser administers it: idgen''s grants to it would go to whoever made it.',
            HINT = 'Drop the role (or make it NOLOGIN with no attributes, no password and no ADMIN OPTION held by other roles), then create the extension again.';
  END IF;
  IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'idgen_admin') THEN
    CREATE ROLE idgen_admin NOLOGIN;
    COMMENT ON ROLE idgen_admin IS
      'Members may create, alter, drop and setval idgen segments (GRANT idgen_admin TO ...).';
  END IF;
END
$$;
REVOKE EXECUTE ON FUNCTION segment_alter(text, integer, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION segment_create(text, bigint, integer, text) TO idgen_admin;
GRANT EXECUTE ON FUNCTION segment_alter(text, integer, text) TO idgen_admin;
GRANT EXECUTE ON FUNCTION segment_drop(text) TO idgen_admin;
GRANT EXECUTE ON FUNCTION segment_setval(text, bigint) TO idgen_admin;

CREATE FUNCTION segment_status()
RETURNS TABLE (
    name text, max_id bigint, step integer, description text,
    cached_step bigint,
    current_first bigint, current_last bigint, current_used bigint,
    next_first bigint, next_last bigint,
    refills bigint, last_refill_at timestamptz, refill_pending boolean
)
LANGUAGE sql VOLATILE PARALLEL RESTRICTED
SET search_path = pg_catalog
AS $$
  SELECT s.name, s.max_id, s.step, s.description,
         c.cached_step, c.current_first, c.current_last, c.current_used,
         c.next_first, c.next_last, COALESCE(c.refills, 0), c.last_refill_at,
         COALESCE(c.refill_pending, false)
    FROM @extschema@.idgen_segment s
    LEFT JOIN @extschema@.segment_cache_status() c ON c.name = s.name
   ORDER BY s.name
$$;

COMMENT ON FUNCTION segment_create(text, bigint, integer, text) IS
  'Creates a segment whose first number is start, refilled step numbers at a time; not undone by ROLLBACK.';
COMMENT ON FUNCTION segment_nextval(text) IS
  'Next number of a segment: dense, increasing, never handed out twice; one atomic add on a range cached in shared memory.';
COMMENT ON FUNCTION segment_nextvals(text, integer) IS
  'count numbers of a segment, increasing.';
COMMENT ON FUNCTION segment_currval(text) IS
  'Last number of the segment returned in this session; error before the first.';
COMMENT ON FUNCTION segment_setval(text, bigint) IS
  'Moves a segment forward: later numbers are greater than value. Never backwards.';
COMMENT ON FUNCTION segment_alter(text, integer, text) IS
  'Changes a segment''s step and description (NULL keeps, '''' clears the description).';
COMMENT ON FUNCTION segment_drop(text) IS
  'Drops a segment and its cached numbers; not undone by ROLLBACK.';
COMMENT ON FUNCTION segment_cache_status() IS
  'Internal: this database''s segments in the shared cache; use segment_status().';
COMMENT ON FUNCTION segment_status() IS
  'Each segment: high-water mark, step, the cached current and next ranges, dynamic step and refills.';
