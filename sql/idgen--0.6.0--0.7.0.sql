-- idgen 0.6.0 -> 0.7.0: a per-backend cache for segments (issue 30; README "Segment caches").
-- Also part of every fresh CREATE EXTENSION idgen (src/segment/mod.rs includes this file,
-- after 0.6.0's), so a fresh install and an upgraded one have the same objects.
--
-- idgen_segment.cache is a segment's per-backend cache, as a sequence's CACHE: 1 none (every
-- number from the range shared in memory), n > 1 blocks of n numbers a backend takes at once
-- and hands out itself, 0 blocks that adapt to each session's rate. It is a column of the
-- catalog, so pg_dump carries it with the segment.

\echo Use "ALTER EXTENSION idgen UPDATE TO '0.7.0'" to load this file. \quit

ALTER TABLE idgen_segment
    ADD COLUMN cache integer NOT NULL DEFAULT 1 CHECK (cache BETWEEN 0 AND 1000000);

-- segment_create and segment_alter gain cache. (In a fresh install pgrx has created the new
-- ones already, identically; the old ones' C symbols stay for databases not yet updated.)
DROP FUNCTION IF EXISTS segment_create(text, bigint, integer, text, text);
CREATE OR REPLACE FUNCTION "segment_create"(
	"name" TEXT,
	"start" bigint DEFAULT 1,
	"step" INT DEFAULT 1000,
	"description" TEXT DEFAULT NULL,
	"scope" TEXT DEFAULT 'local',
	"cache" INT DEFAULT 1
) RETURNS void
VOLATILE PARALLEL UNSAFE
LANGUAGE c
AS 'MODULE_PATHNAME', 'segment_create_cached_wrapper';
DROP FUNCTION IF EXISTS segment_alter(text, integer, text);
CREATE OR REPLACE FUNCTION "segment_alter"(
	"name" TEXT,
	"step" INT DEFAULT NULL,
	"description" TEXT DEFAULT NULL,
	"cache" INT DEFAULT NULL
) RETURNS void
VOLATILE PARALLEL UNSAFE
LANGUAGE c
AS 'MODULE_PATHNAME', 'segment_alter_cached_wrapper';
REVOKE EXECUTE ON FUNCTION segment_create(text, bigint, integer, text, text, integer) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION segment_alter(text, integer, text, integer) FROM PUBLIC;
-- (A fresh install creates idgen_admin and grants it later, in finalize.sql.)
DO $$
BEGIN
  IF EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'idgen_admin') THEN
    GRANT EXECUTE ON FUNCTION segment_create(text, bigint, integer, text, text, integer) TO idgen_admin;
    GRANT EXECUTE ON FUNCTION segment_alter(text, integer, text, integer) TO idgen_admin;
  END IF;
END
$$;
COMMENT ON FUNCTION segment_create(text, bigint, integer, text, text, integer) IS
  'Creates a segment whose first number is start, refilled step numbers at a time; not undone by ROLLBACK. scope => ''global'': its numbers come from the registry, shared by every node. cache => n: each backend takes blocks of n numbers (0: blocks that adapt to its rate).';
COMMENT ON FUNCTION segment_alter(text, integer, text, integer) IS
  'Changes a segment''s step, description (NULL keeps, '''' clears it) and per-backend cache (NULL keeps).';

-- segment_status shows the cache.
DROP FUNCTION IF EXISTS segment_status();
CREATE FUNCTION segment_status()
RETURNS TABLE (
    name text, max_id bigint, step integer, description text,
    cached_step bigint,
    current_first bigint, current_last bigint, current_used bigint,
    next_first bigint, next_last bigint,
    refills bigint, last_refill_at timestamptz, refill_pending boolean,
    cache integer
)
LANGUAGE sql VOLATILE PARALLEL RESTRICTED
SET search_path = pg_catalog
AS $$
  SELECT s.name, s.max_id, s.step, s.description,
         c.cached_step, c.current_first, c.current_last, c.current_used,
         c.next_first, c.next_last, COALESCE(c.refills, 0), c.last_refill_at,
         COALESCE(c.refill_pending, false), s.cache
    FROM @extschema@.idgen_segment s
    LEFT JOIN @extschema@.segment_cache_status() c ON c.name = s.name
   ORDER BY s.name
$$;
COMMENT ON FUNCTION segment_status() IS
  'Each segment: high-water mark, step, the cached current and next ranges, dynamic step and refills, per-backend cache.';
