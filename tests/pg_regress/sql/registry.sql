-- Pins the registry's SQL surface as a node without a registry sees it (idgen.registry unset):
-- the status view (state off, nothing held), the workers and recovery views (empty, with their
-- columns), who may call each registry function, the lease bounds the registry reads from its
-- settings, a global segment created and read in this database as a registry would, and an
-- operator's recovery opened and completed with no nodes; and every bad input with its
-- SQLSTATE, message, detail and hint. Server: idgen preloaded, idgen.worker_id = 5, default
-- registry settings, no standby. Timestamps are never printed, so no output depends on the
-- clock.
SET timezone = 'UTC';
CREATE EXTENSION idgen;

-- Each bad call's SQLSTATE, message, detail and hint, one row each.
CREATE FUNCTION pg_temp.fails(call text, OUT code text, OUT message text, OUT detail text,
                              OUT hint text)
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE call;
    code := 'no error';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS code = RETURNED_SQLSTATE, message = MESSAGE_TEXT,
                            detail = PG_EXCEPTION_DETAIL, hint = PG_EXCEPTION_HINT;
END $$;

-- The node's status: no registry, nothing held.
\x on
SELECT * FROM idgen_registry_status;
\x off

-- The registry's views, empty here: their columns.
SELECT * FROM idgen_registry_workers;
SELECT * FROM idgen_registry_recovery;

-- Who may call each function: only the status is for monitoring roles; the protocol's
-- functions are for idgen_registry members; the operator's recovery for superusers.
SELECT p.proname, pg_get_function_identity_arguments(p.oid) AS args,
       has_function_privilege('public', p.oid, 'EXECUTE') AS public,
       has_function_privilege('pg_monitor', p.oid, 'EXECUTE') AS pg_monitor,
       has_function_privilege('idgen_registry', p.oid, 'EXECUTE') AS idgen_registry,
       p.prosecdef AS definer
FROM pg_proc p WHERE p.proname LIKE 'idgen\_registry\_%' ORDER BY 1;
SELECT c.relname, has_table_privilege('pg_monitor', c.oid, 'SELECT') AS pg_monitor,
       has_table_privilege('public', c.oid, 'SELECT') AS public
FROM pg_class c WHERE c.relname IN ('idgen_registry_status', 'idgen_registry_workers',
                                    'idgen_registry_recovery') ORDER BY 1;

-- The registry's lease bounds: idgen.registry_max_lease (60 s by default), and the wait after
-- an epoch counted with the longest lease answered.
SELECT idgen_registry_max_lease_ms() AS max_lease_ms, idgen_registry_wait_lease_ms() AS wait_lease_ms;
SELECT idgen_registry_check_lease(100, 33) AS shortest, idgen_registry_check_lease(60000, 20000) AS longest;

-- A global segment created in the registry: the first call creates it, a second finds it; a
-- start is the first number handed out (max_id is the number before it).
SELECT * FROM idgen_registry_segment_create('g', 1, 100, 'orders everywhere');
SELECT * FROM idgen_registry_segment_create('g', 1, 500, 'again');
SELECT * FROM idgen_registry_segment_get('g');
SELECT * FROM idgen_registry_segment_create('h', 1000, 10, NULL);
SELECT name, max_id, step, description, ranges, taken_first, taker FROM idgen_registry_segment ORDER BY name;
SELECT count(*) AS unknown_rows FROM idgen_registry_segment_get('nope');

-- An operator's recovery with no node to wait for: opened, listed, completed (the revision
-- moves on by one, as no node reported a higher one; no mark is raised).
SELECT idgen_registry_begin_recovery('a regression test') IS NOT NULL AS opened;
SELECT recovery_since IS NOT NULL AS open, recovery_reason, recovery_opened_by
FROM idgen_registry_server;
SELECT subject, raised_from, raised_to FROM idgen_registry_recover();
SELECT recovery_since IS NULL AS closed, recovered_at IS NOT NULL AS recovered FROM idgen_registry_server;

-- Bad input.
\set VERBOSITY default
\x on
SELECT call, f.* FROM (VALUES
    ('idgen_registry_recover()'),
    ('idgen_registry_check_lease(99, 33)'),
    ('idgen_registry_check_lease(60001, 20000)'),
    ('idgen_registry_check_lease(3000, 1001)'),
    ('idgen_registry_check_durable()'),
    ('idgen_registry_check_incarnation(''never-said-hello'')'),
    ('idgen_registry_segment_create(''g'', 1, 0, NULL)'),
    ('idgen_registry_segment_create('''', 1, 100, NULL)'),
    ('idgen_registry_segment_create(''x'', -9223372036854775808, 100, NULL)'),
    ('idgen_registry_segment_create(''h'', 5000, 10, NULL)'),
    ('idgen_registry_segment_create(repeat(''n'', 64), 1, 100, NULL)')
) AS c(call), pg_temp.fails('SELECT * FROM ' || call) AS f;
\x off

DROP EXTENSION idgen;
