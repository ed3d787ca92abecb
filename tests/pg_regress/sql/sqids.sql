-- Pins the short-id SQL surface: sqids_encode and sqids_decode with sqids' default alphabet
-- (the texts of sqids.org's own test vectors: sqids_encode(0..9) is bM Uk gb Ef Vq uw OI AX p6
-- nJ), a custom alphabet, min_length padding, NULL arguments, round trips at the edges of
-- bigint, and every bad input with its SQLSTATE, message, detail and hint. Pure functions: the
-- output depends on no setting and no clock. Server: idgen preloaded.
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
FROM pg_proc p WHERE p.proname LIKE 'sqids\_%' ORDER BY 1;

-- The default alphabet: sqids.org's vectors for 0..9, and each decodes back.
SELECT n, sqids_encode(n) AS sqid, sqids_decode(sqids_encode(n)) = n AS round_trip
FROM generate_series(0, 9) AS n;

-- README's examples.
SELECT sqids_encode(1039592034091012096) AS snowflake_sqid;
SELECT sqids_decode('seSp94qoRWl7') AS snowflake_id;
SELECT sqids_encode(42, min_length => 10) AS padded, length(sqids_encode(42, min_length => 10));
SELECT sqids_decode('JgaEBgznCp', min_length => 10) AS unpadded;
SELECT sqids_encode(1039592034091012096, 'abcdefghijkmnpqrstuvwxyz23456789') AS custom;
SELECT sqids_decode('8jxi5fad93q9aq', 'abcdefghijkmnpqrstuvwxyz23456789') AS custom_back;

-- The edges of bigint and of min_length.
SELECT sqids_decode(sqids_encode(9223372036854775807)) = 9223372036854775807 AS max_round_trip;
SELECT length(sqids_encode(0, min_length => 255)) AS longest,
       sqids_decode(sqids_encode(0, min_length => 255), min_length => 255) AS longest_back;
SELECT sqids_encode(7, 'abc') AS three_letters, sqids_decode(sqids_encode(7, 'abc'), 'abc');

-- NULL: a NULL id or text gives NULL; a NULL alphabet is the default, a NULL min_length 0.
SELECT sqids_encode(NULL) IS NULL AS null_id, sqids_decode(NULL) IS NULL AS null_text,
       sqids_encode(1, NULL) = sqids_encode(1) AS null_alphabet,
       sqids_encode(1, NULL, NULL) = sqids_encode(1) AS null_min_length,
       sqids_decode('Uk', NULL, NULL) AS decoded;

-- Bad input.
\set VERBOSITY default
\x on
SELECT call, f.* FROM (VALUES
    ('sqids_encode(-1)'),
    ('sqids_encode(1, ''ab'')'),
    ('sqids_encode(1, ''abca'')'),
    ('sqids_encode(1, ''abcé'')'),
    ('sqids_encode(1, min_length => -1)'),
    ('sqids_encode(1, min_length => 256)'),
    ('sqids_decode('''')'),
    ('sqids_decode(''Uk!'')'),
    ('sqids_decode(''86Rf07'')'),
    ('sqids_decode(''Uk'', min_length => 10)'),
    ('sqids_decode(''JgaEBgznCp'')'),
    ('sqids_decode(''Uk'', ''ab'')'),
    ('sqids_decode(''Uk'', min_length => 256)')
) AS c(call), pg_temp.fails('SELECT ' || call) AS f;
\x off

DROP EXTENSION idgen;
