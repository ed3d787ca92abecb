-- Pins the text form of Snowflake ids: snowflake_format (prefix + the UTC start of the id's tick
-- as yyyyMMddHHmmssSSS + worker id + sequence, zero-padded to 4 and 4 digits in the default
-- layout) and its inverse snowflake_parse, on fixed ids composed with snowflake_compose, so that
-- each text can be read against snowflake_decode; that texts of one prefix sort as their ids;
-- the edges of the layout; and every bad input with its SQLSTATE, message, detail and hint.
-- Server: idgen preloaded, idgen.worker_id = 5, default layout (epoch 2024-01-01, 41 time bits
-- of 1 ms, 10 worker bits, 12 sequence bits). No output depends on the clock.
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

-- Signatures, volatility, parallel safety, strictness.
SELECT p.proname, pg_get_function_arguments(p.oid) AS args, pg_get_function_result(p.oid) AS result,
       p.provolatile AS vol, p.proparallel AS par, p.proisstrict AS strict
FROM pg_proc p WHERE p.proname IN ('snowflake_format', 'snowflake_parse') ORDER BY 1;

-- README's order number: 2026-11-22 08:30:15.123 UTC, worker 7, sequence 42.
SELECT snowflake_compose('2026-11-22 08:30:15.123+00', 7, 42) AS id \gset
SELECT :id AS id, snowflake_format(:id, 'ORD') AS text, snowflake_format(:id) AS no_prefix;
SELECT * FROM snowflake_decode(:id);
SELECT snowflake_parse('ORD2026112208301512300070042') = :id AS parses_back,
       snowflake_parse('2026112208301512300070042') = :id AS without_prefix,
       snowflake_parse('any prefix at all: 2026112208301512300070042') = :id AS any_prefix;

-- The layout's edges: id 0 is the epoch, worker 0, sequence 0; the largest id its last tick.
SELECT snowflake_format(0) AS first, snowflake_parse(snowflake_format(0)) AS first_back;
SELECT snowflake_format(9223372036854775807) AS last,
       snowflake_parse(snowflake_format(9223372036854775807)) = 9223372036854775807 AS last_back;
SELECT snowflake_format(snowflake_compose('2030-01-01+00', 1023, 4095), 'X-') AS widest_parts;

-- For one prefix the texts sort (COLLATE "C") as the ids, and each parses back.
WITH ids AS (
    SELECT snowflake_compose(t, w, s) AS id
    FROM (VALUES ('2024-01-01 00:00:00.001+00'::timestamptz), ('2025-06-30 23:59:59.999+00'),
                 ('2026-11-22 08:30:15.123+00'), ('2031-02-03 04:05:06.007+00')) AS t(t),
         (VALUES (0), (9), (10), (1023)) AS w(w),
         (VALUES (0), (1), (999), (4095)) AS s(s)
)
SELECT count(*) AS ids,
       bool_and(snowflake_parse(snowflake_format(id, 'INV')) = id) AS all_parse_back,
       array_agg(id ORDER BY id) = array_agg(id ORDER BY snowflake_format(id, 'INV') COLLATE "C")
           AS texts_sort_as_ids,
       count(DISTINCT length(snowflake_format(id, 'INV'))) AS lengths
FROM ids;

-- Strict: NULL in, NULL out.
SELECT snowflake_format(NULL) IS NULL AS format_null, snowflake_format(1, NULL) IS NULL AS prefix_null,
       snowflake_parse(NULL) IS NULL AS parse_null;

-- Bad input.
\set VERBOSITY default
\x on
SELECT call, f.* FROM (VALUES
    ('snowflake_format(-1)'),
    ('snowflake_parse('''')'),
    ('snowflake_parse(''202611220830151230007004'')'),
    ('snowflake_parse(''ORD2026112208301512300O70042'')'),
    ('snowflake_parse(''2026022908301512300070042'')'),
    ('snowflake_parse(''2026112225301512300070042'')'),
    ('snowflake_parse(''2023123123595999900070042'')'),
    ('snowflake_parse(''2093120100000000000070042'')'),
    ('snowflake_parse(''2026112208301512310240042'')'),
    ('snowflake_parse(''2026112208301512300074096'')')
) AS c(call), pg_temp.fails('SELECT ' || call) AS f;
\x off

DROP EXTENSION idgen;
