-- Pins the serial-number SQL surface: serial_create's formats and options, serial_nextval's
-- texts in fast and gapless mode (a rolled-back gapless draw is taken back), serial_alter,
-- serial_drop and serial_forget (a name keeps counting until forgotten), serial_grant and
-- serial_revoke, the idgen_serials view, the period of each reset, and every bad input with
-- its SQLSTATE, message, detail and hint. Server: idgen preloaded, idgen.worker_id = 5, no
-- registry. Texts that show the date are matched against a pattern, never printed, so no
-- output depends on the clock.
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

-- Signatures, volatility, parallel safety, strictness, and who may call them.
SELECT p.proname, pg_get_function_arguments(p.oid) AS args, pg_get_function_result(p.oid) AS result,
       p.provolatile AS vol, p.proparallel AS par, p.proisstrict AS strict,
       p.prosecdef AS definer, has_function_privilege('public', p.oid, 'EXECUTE') AS public_may_call
FROM pg_proc p
WHERE p.proname LIKE 'serial\_%' OR p.proname = 'idgen_serial_period' ORDER BY 1;

-- Fast mode: a counter from 1, zero-padded; literal braces; this server's worker id.
SELECT serial_create('inv', 'INV-{seq:05}', description => 'invoices');
SELECT serial_nextval('inv') AS first, serial_nextval('inv') AS second, serial_nextval('inv') AS third;
SELECT serial_create('braces', '{{{seq}}}-{worker:02}-{worker}');
SELECT serial_nextval('braces') AS braces;

-- Gapless mode: a rolled-back draw is taken back.
SELECT serial_create('fiscal', 'F-{seq:04}', gapless => true);
BEGIN;
SELECT serial_nextval('fiscal') AS rolled_back;
ROLLBACK;
SELECT serial_nextval('fiscal') AS committed, serial_nextval('fiscal') AS next;

-- Periods: reset never has the period ''; a day, a month and a year show the local date.
SELECT serial_create('daily', 'D{YYYY}{MM}{DD}-{seq:03}', reset => 'day', time_zone => 'Asia/Tokyo');
SELECT serial_create('monthly', 'M{YY}{MM}-{seq}', reset => 'month', time_zone => 'Europe/Paris');
SELECT serial_create('yearly', 'Y{YYYY}-{seq:02}', reset => 'year');
SELECT serial_nextval('daily') ~ '^D[0-9]{8}-001$' AS daily_shape,
       serial_nextval('monthly') ~ '^M[0-9]{4}-1$' AS monthly_shape,
       serial_nextval('yearly') ~ '^Y[0-9]{4}-01$' AS yearly_shape;
SELECT idgen_serial_period('never', 'UTC') AS never,
       idgen_serial_period('day', 'UTC') ~ '^[0-9]{8}$' AS day,
       idgen_serial_period('month', 'UTC') ~ '^[0-9]{6}$' AS month,
       idgen_serial_period('year', 'UTC') ~ '^[0-9]{4}$' AS year,
       idgen_serial_period('day', 'No/Such_Zone') IS NULL AS unknown_zone;

-- The view: every serial this role may draw from.
SELECT name, format, reset, time_zone, gapless, scope, description,
       current_period ~ '^[0-9]*$' AS period_shape, current_mark >= 1 AS drawn
FROM idgen_serials ORDER BY name;

-- serial_alter: a wider {seq} and a new description go on above every number printed.
SELECT serial_alter('inv', format => 'INV-{seq:06}', description => 'invoices, wider');
SELECT serial_nextval('inv') ~ '^INV-[0-9]{6}$' AS wider,
       substr(serial_nextval('inv'), 5)::int > 3 AS above_printed;
SELECT format, description FROM idgen_serials WHERE name = 'inv';

-- serial_drop and serial_create again with the same format: the name goes on counting; after
-- serial_forget it counts from 1.
SELECT serial_nextval('fiscal') AS before_drop;
SELECT serial_drop('fiscal');
SELECT serial_create('fiscal', 'F-{seq:04}', gapless => true);
SELECT serial_nextval('fiscal') AS after_create_again;
SELECT serial_drop('fiscal');
SELECT serial_forget('fiscal');
SELECT serial_create('fiscal', 'G-{seq}', gapless => true);
SELECT serial_nextval('fiscal') AS after_forget;

-- Definitions are undone by ROLLBACK.
BEGIN;
SELECT serial_create('temp', 'T{seq}');
ROLLBACK;
SELECT count(*) AS rolled_back_serials FROM idgen_serials WHERE name = 'temp';

-- Grants: a role draws only while granted.
CREATE ROLE regress_serial_clerk;
SELECT serial_grant('inv', 'regress_serial_clerk');
SET ROLE regress_serial_clerk;
SELECT serial_nextval('inv') ~ '^INV-[0-9]{6}$' AS granted_draw;
SELECT name FROM idgen_serials ORDER BY name;
RESET ROLE;
SELECT serial_revoke('inv', 'regress_serial_clerk');
SET ROLE regress_serial_clerk;
SELECT count(*) AS visible FROM idgen_serials;
SELECT f.* FROM pg_temp.fails('SELECT serial_nextval(''inv'')') AS f;
RESET ROLE;
DROP ROLE regress_serial_clerk;

-- Overflow: {seq:01} prints 1 to 9, and the 10th draw is an error, never a truncated text.
SELECT serial_create('tiny', 'S{seq:01}');
SELECT string_agg(serial_nextval('tiny'), ' ') AS nine FROM generate_series(1, 9);

-- Bad input.
\set VERBOSITY default
\x on
SELECT call, f.* FROM (VALUES
    ('serial_nextval(''tiny'')'),
    ('serial_nextval(''nope'')'),
    ('serial_nextval(NULL)'),
    ('serial_create(''inv'', ''INV-{seq:05}'')'),
    ('serial_create(''x'', ''X-{YYYYY}-{seq}'')'),
    ('serial_create(''x'', ''X-{seq}-{seq}'')'),
    ('serial_create(''x'', ''X-{YYYY}'')'),
    ('serial_create(''x'', ''X-{seq:00}'')'),
    ('serial_create(''x'', ''X-{seq:19}'')'),
    ('serial_create(''x'', ''X-{MM}{DD}-{seq}'', reset => ''day'')'),
    ('serial_create(''x'', ''X-{YYYY}-{seq}'', reset => ''month'')'),
    ('serial_create(''x'', ''X-{seq}'', reset => ''week'')'),
    ('serial_create(''x'', ''X-{seq}'', time_zone => ''PST'')'),
    ('serial_create(''x'', ''X-{seq}'', time_zone => ''UTC+3'')'),
    ('serial_create(''x'', ''X-{seq}'', time_zone => ''No/Such_Zone'')'),
    ('serial_create(''x'', ''X-{seq}'', scope => ''galaxy'')'),
    ('serial_create(''x'', ''X-{seq}'', gapless => true, scope => ''global'')'),
    ('serial_create(''x'', ''X-{seq}'', scope => ''global'')'),
    ('serial_create('''', ''X-{seq}'')'),
    ('serial_create(''x'', '''')'),
    ('serial_create(''x'', ''X-{seq'')'),
    ('serial_alter(''inv'', format => ''INV{seq:06}'')'),
    ('serial_alter(''nope'', description => ''d'')'),
    ('serial_drop(''nope'')'),
    ('serial_forget(''inv'')'),
    ('serial_forget(''never-created'')'),
    ('serial_grant(''inv'', ''regress_no_such_role'')'),
    ('serial_grant(''nope'', ''public'')'),
    ('serial_revoke(''inv'', ''regress_no_such_role'')')
) AS c(call), pg_temp.fails('SELECT ' || call) AS f;
\x off

DROP EXTENSION idgen;
