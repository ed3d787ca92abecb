-- Runs last in the extension script: documentation and privileges of the public API.

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

COMMENT ON TABLE idgen_segment IS
  'Segment high-water marks: numbers <= max_id may have been handed out, numbers above never. Written only by the idgen allocator worker.';

-- Everyone may read the high-water marks; nobody but the extension (its allocator) writes them.
REVOKE ALL ON TABLE idgen_segment FROM PUBLIC;
GRANT SELECT ON TABLE idgen_segment TO PUBLIC;

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
REVOKE EXECUTE ON FUNCTION segment_create(text, bigint, integer, text, text, integer) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION segment_alter(text, integer, text, integer) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION segment_drop(text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION segment_setval(text, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION segment_create(text, bigint, integer, text, text, integer) TO idgen_admin;
GRANT EXECUTE ON FUNCTION segment_alter(text, integer, text, integer) TO idgen_admin;
GRANT EXECUTE ON FUNCTION segment_drop(text) TO idgen_admin;
GRANT EXECUTE ON FUNCTION segment_setval(text, bigint) TO idgen_admin;
REVOKE EXECUTE ON FUNCTION segment_interleave_ready(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION segment_interleave_ready(bigint) TO idgen_admin;
-- Serials (sql/idgen--0.3.0--0.4.0.sql grants them when idgen_admin exists already).
GRANT EXECUTE ON FUNCTION serial_create(text, text, text, text, boolean, text, text) TO idgen_admin;
GRANT EXECUTE ON FUNCTION serial_alter(text, text, text) TO idgen_admin;
GRANT EXECUTE ON FUNCTION serial_drop(text) TO idgen_admin;
GRANT EXECUTE ON FUNCTION serial_grant(text, text) TO idgen_admin;
GRANT EXECUTE ON FUNCTION serial_revoke(text, text) TO idgen_admin;

-- segment_status() is created by sql/idgen--0.6.0--0.7.0.sql (with its comment).

COMMENT ON FUNCTION segment_nextval(text) IS
  'Next number of a segment: dense, increasing, never handed out twice; one atomic add on a range cached in shared memory.';
COMMENT ON FUNCTION segment_nextvals(text, integer) IS
  'count numbers of a segment, increasing.';
COMMENT ON FUNCTION segment_currval(text) IS
  'Last number of the segment returned in this session; error before the first.';
COMMENT ON FUNCTION segment_setval(text, bigint) IS
  'Moves a segment forward: later numbers are greater than value. Never backwards.';
COMMENT ON FUNCTION segment_interleave_ready(bigint) IS
  'Growing from N to M servers: confirms idgen.segment_interleave_until = until is in force here and no segment is past it; returns the highest mark.';
COMMENT ON FUNCTION segment_drop(text) IS
  'Drops a segment and its cached numbers; not undone by ROLLBACK.';
COMMENT ON FUNCTION segment_cache_status() IS
  'Internal: this database''s segments in the shared cache; use segment_status().';
