-- idgen's install script: segments (docs: guide/segments.md, DESIGN.md §2). pgrx creates the C
-- functions (src/segment/mod.rs); this file holds the catalog table, segment_status() and the
-- segments' privileges and comments.

-- The catalog of segments. One row per segment: max_id is its high-water mark. Every number
-- <= max_id may already have been handed out; numbers above it never have. Only idgen's
-- allocator background worker writes this table, each advance in a committed transaction of
-- its own, before any number of the new range is used.
--   scope: local (its mark is here) or global (its mark is in the registry; max_id here is the
--          registry's mark as of this node's last range);
--   cache: the per-backend cache, as a sequence's CACHE: 1 none (every number from the range
--          shared in memory), n > 1 blocks of n numbers a backend takes at once and hands out
--          itself, 0 blocks that adapt to each session's rate.
CREATE TABLE idgen_segment (
    name        text        PRIMARY KEY CHECK (octet_length(name) BETWEEN 1 AND 63),
    max_id      bigint      NOT NULL,
    step        integer     NOT NULL CHECK (step > 0),
    description text        CHECK (octet_length(description) <= 1024),
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    scope       text        NOT NULL DEFAULT 'local' CHECK (scope IN ('local', 'global')),
    cache       integer     NOT NULL DEFAULT 1 CHECK (cache BETWEEN 0 AND 1000000)
);
COMMENT ON TABLE idgen_segment IS
  'Segment high-water marks: numbers <= max_id may have been handed out, numbers above never. Written only by the idgen allocator worker.';

-- pg_dump carries every row (the cache with it): the high-water marks survive dump and restore.
SELECT pg_catalog.pg_extension_config_dump('idgen_segment', '');

-- Everyone may read the high-water marks; nobody but the extension (its allocator) writes them.
REVOKE ALL ON TABLE idgen_segment FROM PUBLIC;
GRANT SELECT ON TABLE idgen_segment TO PUBLIC;

-- Each segment with what this server caches of it.
CREATE FUNCTION @extschema@.segment_status()
RETURNS TABLE (
    name text, max_id bigint, step integer, description text,
    cached_step bigint,
    current_first bigint, current_last bigint, current_used bigint,
    next_first bigint, next_last bigint,
    refills bigint, last_refill_at timestamptz, refill_pending boolean,
    cache integer
)
LANGUAGE plpgsql VOLATILE PARALLEL RESTRICTED
SET search_path = pg_catalog, pg_temp
AS $status$
BEGIN
    -- The query below names idgen's schema as it was called at install (as idgen_adopt_column;
    -- the event trigger idgen_schema_guard refuses renaming it).
    IF pg_catalog.to_regnamespace('@extschema@'::pg_catalog.text)::pg_catalog.oid IS DISTINCT FROM
       (SELECT e.extnamespace FROM pg_catalog.pg_extension e
         WHERE e.extname OPERATOR(pg_catalog.=) 'idgen'::pg_catalog.name) THEN
        RAISE EXCEPTION 'segment_status: the schema idgen was installed in was renamed'
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Rename it back: idgen is not relocatable.';
    END IF;
    RETURN QUERY
      SELECT s.name, s.max_id, s.step, s.description,
             c.cached_step, c.current_first, c.current_last, c.current_used,
             c.next_first, c.next_last, COALESCE(c.refills, 0::pg_catalog.int8), c.last_refill_at,
             COALESCE(c.refill_pending, false), s.cache
        FROM @extschema@.idgen_segment s
        LEFT JOIN @extschema@.segment_cache_status() c ON c.name OPERATOR(pg_catalog.=) s.name
       ORDER BY s.name;
END
$status$;
COMMENT ON FUNCTION segment_status() IS
  'Each segment: high-water mark, step, the cached current and next ranges, dynamic step and refills, per-backend cache.';

-- Changing segments is for superusers and members of idgen_admin; drawing numbers is for all.
REVOKE EXECUTE ON FUNCTION segment_create(text, bigint, integer, text, text, integer) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION segment_alter(text, integer, text, integer) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION segment_drop(text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION segment_setval(text, bigint) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION segment_interleave_ready(bigint) FROM PUBLIC;
-- The counters are monitoring's (idgen_metrics_segment), as the metrics views are.
REVOKE EXECUTE ON FUNCTION segment_cache_counters() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION segment_cache_counters() TO pg_monitor;
GRANT EXECUTE ON FUNCTION segment_create(text, bigint, integer, text, text, integer) TO idgen_admin;
GRANT EXECUTE ON FUNCTION segment_alter(text, integer, text, integer) TO idgen_admin;
GRANT EXECUTE ON FUNCTION segment_drop(text) TO idgen_admin;
GRANT EXECUTE ON FUNCTION segment_setval(text, bigint) TO idgen_admin;
GRANT EXECUTE ON FUNCTION segment_interleave_ready(bigint) TO idgen_admin;

COMMENT ON FUNCTION segment_create(text, bigint, integer, text, text, integer) IS
  'Creates a segment whose first number is start, refilled step numbers at a time; not undone by ROLLBACK. scope => ''global'': its numbers come from the registry, shared by every node. cache => n: each backend takes blocks of n numbers (0: blocks that adapt to its rate).';
COMMENT ON FUNCTION segment_alter(text, integer, text, integer) IS
  'Changes a segment''s step, description (NULL keeps, '''' clears it) and per-backend cache (NULL keeps).';
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
COMMENT ON FUNCTION segment_cache_counters() IS
  'Internal: this database''s cached segments'' refills, numbers issued, waits, timeouts and failed refills since each was loaded (idgen_metrics_segment reads it).';
