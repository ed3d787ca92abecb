-- idgen 0.1.0 -> 0.2.0: segment_interleave_ready(bigint), step 1 of growing from N to M
-- servers under traffic (README, "Growing from N to M servers"), for idgen_admin only.

\echo Use "ALTER EXTENSION idgen UPDATE TO '0.2.0'" to load this file. \quit

CREATE FUNCTION "segment_interleave_ready"("until" bigint) RETURNS bigint
VOLATILE PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'segment_interleave_ready_wrapper';

REVOKE EXECUTE ON FUNCTION segment_interleave_ready(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION segment_interleave_ready(bigint) TO idgen_admin;
COMMENT ON FUNCTION segment_interleave_ready(bigint) IS
  'Growing from N to M servers: confirms idgen.segment_interleave_until = until is in force here and no segment is past it; returns the highest mark.';
