-- Pins the segment SQL surface: the catalog table and its privileges, each function's
-- results, and every argument error with its message, detail and hint. Changes run in the
-- allocator's own transaction, so they are not undone by ROLLBACK (shown below). Server:
-- idgen preloaded. Each segment draws at most 10% of its step, so that no range is fetched
-- ahead and max_id is deterministic.
SET timezone = 'UTC';
CREATE EXTENSION idgen;

-- The catalog: columns, checks, dump marking and grants.
\d idgen_segment
SELECT extconfig::regclass[] AS dumped FROM pg_extension WHERE extname = 'idgen';
SELECT grantee, privilege_type FROM information_schema.role_table_grants
 WHERE table_name = 'idgen_segment' AND grantee = 'PUBLIC';
SELECT p.oid::regprocedure AS function, has_function_privilege('public', p.oid, 'EXECUTE') AS public_may
  FROM pg_proc p WHERE p.proname LIKE 'segment\_%' ORDER BY 1::text;

-- Create, draw, currval.
SELECT segment_create('orders');
SELECT segment_create('invoice', start => 1000, step => 500, description => 'invoice numbers');
SELECT segment_nextval('orders'), segment_nextval('orders'), segment_currval('orders');
SELECT * FROM segment_nextvals('invoice', 5);
SELECT segment_currval('invoice');
SELECT name, max_id, step, description, created_at <= now() AS created FROM idgen_segment ORDER BY name;
SELECT name, max_id, step, cached_step, current_first, current_last, current_used,
       next_first, refills, refill_pending
  FROM segment_status();

-- ROLLBACK does not undo draws or changes (like nextval): numbers are never reused.
BEGIN;
SELECT segment_nextval('orders');
SELECT segment_create('rolled_back');
ROLLBACK;
SELECT segment_nextval('orders');
SELECT name FROM idgen_segment WHERE name = 'rolled_back';

-- setval moves forward only; the next number follows it.
SELECT segment_setval('orders', 5000);
SELECT segment_nextval('orders');
SELECT segment_setval('orders', 4000);
SELECT segment_setval('orders', 5001);
SELECT segment_nextval('orders');

-- alter: step and description; NULL keeps, '' clears the description.
SELECT segment_alter('invoice', step => 2000);
SELECT step, description FROM idgen_segment WHERE name = 'invoice';
SELECT segment_alter('invoice', description => '');
SELECT step, description FROM idgen_segment WHERE name = 'invoice';

-- Names are data, not SQL: quotes, spaces and non-ASCII are fine up to 63 bytes.
SELECT segment_create('it''s a "name"; 号段');
SELECT segment_nextval('it''s a "name"; 号段');

-- Argument errors.
\set VERBOSITY default
SELECT segment_nextval(NULL);
SELECT segment_nextval('');
SELECT segment_nextval(repeat('x', 64));
SELECT segment_nextval('nope');
SELECT segment_nextval('it''s nope');
SELECT segment_currval('nope');
SELECT segment_currval('rolled_back_neither');
SELECT segment_create('fresh');
SELECT segment_currval('fresh');
SELECT segment_nextvals('orders', NULL);
SELECT segment_nextvals('orders', 0);
SELECT segment_nextvals('orders', 1000001);
SELECT segment_create('orders');
SELECT segment_create('bad', step => 0);
SELECT segment_create('bad', step => -1);
SELECT segment_create('bad', start => NULL);
SELECT segment_create('bad', start => -9223372036854775808);
SELECT segment_create('bad', description => repeat('d', 1025));
SELECT segment_alter('nope', step => 5);
SELECT segment_alter('orders', step => 0);
SELECT segment_setval('orders', NULL);
SELECT segment_drop('nope');
SELECT count(*) AS segments_after_errors FROM idgen_segment;

-- The end of bigint: the last range is cut short, then "reached maximum value".
SELECT segment_create('edge', start => 9223372036854775806, step => 10);
SELECT segment_nextval('edge'), segment_nextval('edge');
SELECT segment_nextval('edge');
SELECT max_id FROM idgen_segment WHERE name = 'edge';

-- drop forgets the segment and its cached ranges.
SELECT segment_drop('orders');
SELECT segment_nextval('orders');
SELECT segment_create('orders', start => 10);
SELECT segment_nextval('orders');

-- A per-backend cache: a block of 10 is taken at the first draw and handed out by
-- this session; segment_status shows the cache; setval drops the block; bad caches are refused.
SELECT segment_create('blocks', step => 100, cache => 10);
SELECT segment_nextval('blocks'), segment_nextval('blocks');
SELECT name, cache, current_used FROM segment_status() WHERE name = 'blocks';
SELECT segment_setval('blocks', 9);
SELECT segment_setval('blocks', 10);
SELECT segment_nextval('blocks');
SELECT segment_alter('blocks', cache => 0);
SELECT name, cache FROM segment_status() WHERE name = 'blocks';
SELECT segment_create('blocks_bad', cache => -1);
SELECT segment_alter('blocks', cache => 1000001);
SELECT segment_create('blocks_bad', cache => NULL);
SELECT count(*) AS blocks_bad FROM idgen_segment WHERE name = 'blocks_bad';

-- Dropping the extension forgets its cached ranges: rows restored into a new idgen_segment
-- (as pg_restore's COPY does, without segment_create) start from their own max_id.
DROP EXTENSION idgen;
CREATE EXTENSION idgen;
INSERT INTO idgen_segment (name, max_id, step) VALUES ('orders', 0, 10);
SELECT segment_nextval('orders');

DROP EXTENSION idgen;
