-- A synthetic earlier release of idgen, 0.0.9, for the upgrade test (tests/cluster/tests/
-- upgrade.rs): the install script an older idgen would have shipped. Compared with 0.1.0 it has
-- no batch functions (snowflake_nextvals, segment_nextvals), no snowflake_compose, no status
-- functions, no segment_alter, no idgen_admin role, no comments, and no length check on
-- descriptions. Its functions have 0.1.0's signatures, so today's library serves them.
-- Never installed by `cargo pgrx install` or the package: only the test copies it.

\echo Use "CREATE EXTENSION idgen VERSION '0.0.9'" to load this file. \quit

CREATE TABLE idgen_segment (
    name        text        PRIMARY KEY CHECK (octet_length(name) BETWEEN 1 AND 63),
    max_id      bigint      NOT NULL,
    step        integer     NOT NULL CHECK (step > 0),
    description text,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
SELECT pg_catalog.pg_extension_config_dump('idgen_segment', '');
REVOKE ALL ON TABLE idgen_segment FROM PUBLIC;
GRANT SELECT ON TABLE idgen_segment TO PUBLIC;

CREATE FUNCTION snowflake_nextval() RETURNS bigint
STRICT VOLATILE PARALLEL RESTRICTED
LANGUAGE c AS 'MODULE_PATHNAME', 'snowflake_nextval_wrapper';

CREATE FUNCTION snowflake_currval() RETURNS bigint
STRICT VOLATILE PARALLEL RESTRICTED
LANGUAGE c AS 'MODULE_PATHNAME', 'snowflake_currval_wrapper';

CREATE FUNCTION snowflake_decode("id" bigint)
RETURNS TABLE ("ts" timestamp with time zone, "worker_id" INT, "sequence" INT)
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'snowflake_decode_wrapper';

CREATE FUNCTION snowflake_timestamp("id" bigint) RETURNS timestamp with time zone
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'snowflake_timestamp_wrapper';

CREATE FUNCTION segment_create(
    "name" TEXT, "start" bigint DEFAULT 1, "step" INT DEFAULT 1000, "description" TEXT DEFAULT NULL
) RETURNS void
VOLATILE PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'segment_create_wrapper';

CREATE FUNCTION segment_drop("name" TEXT) RETURNS void
VOLATILE PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'segment_drop_wrapper';

CREATE FUNCTION segment_setval("name" TEXT, "value" bigint) RETURNS bigint
VOLATILE PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'segment_setval_wrapper';

CREATE FUNCTION segment_nextval("name" TEXT) RETURNS bigint
VOLATILE PARALLEL RESTRICTED
LANGUAGE c AS 'MODULE_PATHNAME', 'segment_nextval_wrapper';

CREATE FUNCTION segment_currval("name" TEXT) RETURNS bigint
VOLATILE PARALLEL RESTRICTED
LANGUAGE c AS 'MODULE_PATHNAME', 'segment_currval_wrapper';

REVOKE EXECUTE ON FUNCTION segment_create(text, bigint, integer, text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION segment_drop(text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION segment_setval(text, bigint) FROM PUBLIC;
