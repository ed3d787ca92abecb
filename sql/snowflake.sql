-- idgen's install script: Snowflake ids (docs: guide/snowflake.md). pgrx creates the functions
-- (src/snowflake/); this file documents them.

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
COMMENT ON FUNCTION snowflake_uuid() IS
  'Next Snowflake UUID of this server: RFC 9562 version 7 (tick start ms | 7 | sequence | variant | worker id | random), from the same generator as snowflake_nextval(): unique, strictly increasing per server.';
COMMENT ON FUNCTION snowflake_uuid_decode(uuid) IS
  'Tick start time, worker id and sequence of a Snowflake UUID under this server''s layout.';
COMMENT ON FUNCTION snowflake_uuid_to_id(uuid) IS
  'The bigint Snowflake id with a Snowflake UUID''s tick, worker id and sequence.';
COMMENT ON FUNCTION snowflake_uuid_from_id(bigint) IS
  'The canonical Snowflake UUID (random bits zero) of a bigint Snowflake id: snowflake_uuid_to_id reads the id back.';

-- One row each: tell the planner (a set-returning function is estimated at 1000 rows).
ALTER FUNCTION snowflake_decode(bigint) ROWS 1;
ALTER FUNCTION snowflake_status() ROWS 1;
ALTER FUNCTION snowflake_uuid_decode(uuid) ROWS 1;
