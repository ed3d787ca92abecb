-- idgen 0.10.0 -> 0.11.0: Snowflake UUIDs (docs/guide/uuids.md).
-- Run only by ALTER EXTENSION idgen UPDATE: a fresh install runs the current definitions
-- (src/sql.rs), and the upgrade test checks that both end with the same objects.
--
-- Adds snowflake_uuid(), an RFC 9562 version-7 uuid drawn from the Snowflake generator, and its
-- conversions: snowflake_uuid_decode(uuid), snowflake_uuid_to_id(uuid) and
-- snowflake_uuid_from_id(bigint). Nothing existing changes: a server running the 0.11.0 library
-- with a database not yet updated serves every function of 0.10.0 as before.

\echo Use "ALTER EXTENSION idgen UPDATE TO '0.11.0'" to load this file. \quit

CREATE FUNCTION @extschema@.snowflake_uuid() RETURNS uuid
STRICT VOLATILE PARALLEL RESTRICTED
LANGUAGE c AS 'MODULE_PATHNAME', 'snowflake_uuid_wrapper';
COMMENT ON FUNCTION @extschema@.snowflake_uuid() IS
  'Next Snowflake UUID of this server: RFC 9562 version 7 (tick start ms | 7 | sequence | variant | worker id | random), from the same generator as snowflake_nextval(): unique, strictly increasing per server.';

CREATE FUNCTION @extschema@.snowflake_uuid_decode("uuid" uuid) RETURNS TABLE (
	"ts" timestamp with time zone,
	"worker_id" INT,
	"sequence" INT
)
IMMUTABLE STRICT PARALLEL SAFE ROWS 1
LANGUAGE c AS 'MODULE_PATHNAME', 'snowflake_uuid_decode_wrapper';
COMMENT ON FUNCTION @extschema@.snowflake_uuid_decode(uuid) IS
  'Tick start time, worker id and sequence of a Snowflake UUID under this server''s layout.';

CREATE FUNCTION @extschema@.snowflake_uuid_to_id("uuid" uuid) RETURNS bigint
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'snowflake_uuid_to_id_wrapper';
COMMENT ON FUNCTION @extschema@.snowflake_uuid_to_id(uuid) IS
  'The bigint Snowflake id with a Snowflake UUID''s tick, worker id and sequence.';

CREATE FUNCTION @extschema@.snowflake_uuid_from_id("id" bigint) RETURNS uuid
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'snowflake_uuid_from_id_wrapper';
COMMENT ON FUNCTION @extschema@.snowflake_uuid_from_id(bigint) IS
  'The canonical Snowflake UUID (random bits zero) of a bigint Snowflake id: snowflake_uuid_to_id reads the id back.';
