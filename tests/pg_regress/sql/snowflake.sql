-- Pins the Snowflake SQL surface: signatures, volatility and parallel safety, comments, the
-- relations between ids, decode/compose/timestamp round trips, and every argument error with
-- its message, detail and hint. Server: idgen preloaded, idgen.worker_id = 5, default layout.
-- Ids depend on the clock, so only their relations are printed.
SET timezone = 'UTC';
CREATE EXTENSION idgen;

-- The public API, as psql describes it.
SELECT p.proname, pg_get_function_identity_arguments(p.oid) AS args,
       p.provolatile AS vol, p.proparallel AS par, p.proisstrict AS strict, p.prorows AS rows,
       obj_description(p.oid, 'pg_proc') IS NOT NULL AS commented
FROM pg_proc p JOIN pg_depend d ON d.objid = p.oid AND d.deptype = 'e'
JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'idgen'
ORDER BY 1;
SELECT pg_get_function_result('snowflake_decode'::regproc) AS decode_result;

-- currval before the first nextval of the session, as for sequences.
SELECT snowflake_currval();

-- nextval: positive, increasing, worker id 5, currval follows.
SELECT snowflake_nextval() AS a \gset
SELECT snowflake_nextval() AS b \gset
SELECT :a > 0 AS positive, :b > :a AS increasing, snowflake_currval() = :b AS currval_is_last;
SELECT worker_id FROM snowflake_decode(:b);

-- nextvals: consecutive ids of one reservation; a batch larger than a tick borrows ticks.
WITH ids AS (SELECT id, row_number() OVER () AS n FROM snowflake_nextvals(10000) AS id)
SELECT count(*) AS ids, count(DISTINCT id) AS distinct_ids,
       bool_and(id > :b) AS after_b,
       count(DISTINCT snowflake_timestamp(id)) > 1 AS spans_ticks,
       max(id) = snowflake_currval() AS currval_is_last
FROM ids;

-- compose and decode are inverse; the epoch is id 0; the largest id is the layout's end.
SELECT snowflake_compose('2024-01-01 00:00:00+00');
SELECT snowflake_compose('2026-05-04 03:02:01.123+00', 5, 7);
SELECT * FROM snowflake_decode(snowflake_compose('2026-05-04 03:02:01.123+00', 5, 7));
SELECT snowflake_timestamp(4611686018427387904);
SELECT * FROM snowflake_decode(9223372036854775807);
SELECT snowflake_compose('2026-05-04 03:02:01.1239+00') = snowflake_compose('2026-05-04 03:02:01.123+00') AS truncated_to_ms;

-- compose bounds select ids by time.
SELECT snowflake_compose(snowflake_timestamp(:b)) <= :b
   AND :b < snowflake_compose(snowflake_timestamp(:b) + interval '1 ms') AS within_its_millisecond;

-- Pure functions are strict: NULL in, NULL out (decode: no row).
SELECT snowflake_timestamp(NULL) IS NULL AS ts_null, snowflake_compose(NULL) IS NULL AS compose_null,
       (SELECT count(*) FROM snowflake_decode(NULL)) AS decode_rows;

-- status: one row describing this server's generator.
SELECT worker_id, time_bits, worker_bits, sequence_bits, time_unit_ms, epoch, exhausted_at,
       last_id >= :b AS last_id_current, drift_ms <= greatest(0, ceil(extract(epoch FROM last_tick_at - now()) * 1000) + 1) AS drift_bounded, borrowed_ticks >= 2 AS borrowed,
       reserved_tick >= :b >> 22 AND reserved_until > last_tick_at AS reserved_ahead, reservation_writes >= 1 AS reservation_written,
       clock_failures = 0 AND clock_regressions = 0 AS clock_steady
FROM snowflake_status();

-- Argument errors.
\set VERBOSITY default
SELECT snowflake_nextvals(NULL);
SELECT snowflake_nextvals(0);
SELECT snowflake_nextvals(-1);
SELECT snowflake_nextvals(4096001);
SELECT snowflake_decode(-1);
SELECT snowflake_timestamp(-42);
SELECT snowflake_compose(now(), 1024);
SELECT snowflake_compose(now(), 0, 4096);
SELECT snowflake_compose(now(), -1, -1);
SELECT snowflake_compose('2023-12-31 23:59:59+00');
SELECT snowflake_compose('2093-09-07 00:00:00+00');
SELECT snowflake_compose('infinity');

-- Settings are fixed at server start.
SET idgen.worker_id = 6;
SET idgen.epoch = '2020-01-01+00';
SET idgen.worker_idd = 6;
SHOW idgen.worker_id;
SHOW idgen.epoch;

DROP EXTENSION idgen;
