-- idgen's install script: business serial numbers (docs: guide/serials.md). The functions are
-- C (src/serial/), declared here (`sql = false` in Rust): they check the caller's rights, then
-- read and write these tables as their owner with a pinned search_path; none is SECURITY
-- DEFINER.

-- Serial definitions: an id (never reused), the format, the reset period and its IANA time
-- zone, the mode (gapless or fast), the scope (local, or global: counter ranges from the
-- registry), and who may draw: PUBLIC (usage_public) and the roles in usage_roles and
-- usage_role_oids, side by side: a role draws only while its name and its OID are both the
-- ones recorded, so a role created later under a dropped role's name gets nothing (and after a
-- restore into another cluster, whose roles have other OIDs, serial_grant gives the grants
-- again). A name without an OID beside it (a dump of 0.7.0 or earlier restored here) counts for
-- nobody. Not aclitem: its format changed in PostgreSQL 16, which would stop pg_upgrade.
CREATE SEQUENCE idgen_serial_id_seq AS bigint;
CREATE TABLE idgen_serial (
    name         text        PRIMARY KEY CHECK (octet_length(name) BETWEEN 1 AND 40),
    format       text        NOT NULL CHECK (octet_length(format) BETWEEN 1 AND 256),
    reset        text        NOT NULL CHECK (reset IN ('day', 'month', 'year', 'never')),
    time_zone    text        NOT NULL,
    gapless      boolean     NOT NULL,
    description  text        CHECK (octet_length(description) <= 1024),
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    id           bigint      NOT NULL
                 DEFAULT pg_catalog.nextval('@extschema@.idgen_serial_id_seq'::pg_catalog.regclass),
    scope        text        NOT NULL DEFAULT 'local' CHECK (scope IN ('local', 'global')),
    usage_public boolean     NOT NULL DEFAULT false,
    usage_roles  text[]      NOT NULL DEFAULT '{}',
    usage_role_oids oid[]    NOT NULL DEFAULT '{}',
    CONSTRAINT idgen_serial_id_key UNIQUE (id),
    CONSTRAINT idgen_serial_global_check CHECK (scope = 'local' OR NOT gapless)
);
ALTER SEQUENCE idgen_serial_id_seq OWNED BY idgen_serial.id;

-- Every counter, fast and gapless, per serial id and period ('' for reset never): a gapless
-- counter's last committed number, a fast counter's high-water mark (moved up by the segment
-- allocator in transactions of its own, its ranges cached in shared memory).
CREATE TABLE idgen_serial_counter (
    period text   NOT NULL CHECK (period ~ '^([0-9]{4}|[0-9]{6}|[0-9]{8})?$'),
    value  bigint NOT NULL CHECK (value > 0),
    serial bigint NOT NULL,
    PRIMARY KEY (serial, period)
);

-- What a dropped serial's name printed: its id (its counters stay under it), format, reset and
-- scope. A serial created under the name again goes on counting under that id when its
-- definition could only print other texts (the same format but for the width of {seq}, the
-- same reset and scope); another definition is refused until serial_forget(name).
CREATE TABLE idgen_serial_dropped (
    name       text        PRIMARY KEY CHECK (octet_length(name) BETWEEN 1 AND 40),
    id         bigint      NOT NULL UNIQUE,
    format     text        NOT NULL,
    reset      text        NOT NULL,
    scope      text        NOT NULL,
    dropped_at timestamptz NOT NULL DEFAULT now()
);

-- pg_dump carries the definitions, the counters, the dropped names and the id sequence.
SELECT pg_catalog.pg_extension_config_dump('idgen_serial', '');
SELECT pg_catalog.pg_extension_config_dump('idgen_serial_counter', '');
SELECT pg_catalog.pg_extension_config_dump('idgen_serial_dropped', '');
SELECT pg_catalog.pg_extension_config_dump('idgen_serial_id_seq', '');

-- Only through idgen_serials (which shows a role the serials it may use) and the functions.
REVOKE ALL ON TABLE idgen_serial, idgen_serial_counter, idgen_serial_dropped FROM PUBLIC;
REVOKE ALL ON SEQUENCE idgen_serial_id_seq FROM PUBLIC;
COMMENT ON TABLE idgen_serial IS
  'Serial number definitions: id, format, reset period, time zone, mode, scope, who may draw (usage_public; usage_roles with usage_role_oids: USAGE). Changed by serial_create/alter/drop/grant/revoke.';
COMMENT ON TABLE idgen_serial_dropped IS
  'Dropped serials'' names, with the id their counters stay under: a serial created under the name again goes on counting (same format but the {seq} width, reset, scope) or is refused until serial_forget.';
COMMENT ON TABLE idgen_serial_counter IS
  'Counters of serials, per serial id and period: the last number committed (gapless) or the high-water mark (fast: numbers up to it may have been handed out).';

CREATE FUNCTION serial_create(
    name text, format text, reset text DEFAULT 'never', time_zone text DEFAULT 'UTC',
    gapless boolean DEFAULT false, description text DEFAULT NULL, scope text DEFAULT 'local')
RETURNS void VOLATILE PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'serial_create_wrapper';
CREATE FUNCTION serial_alter(name text, format text DEFAULT NULL, description text DEFAULT NULL)
RETURNS void VOLATILE PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'serial_alter_wrapper';
CREATE FUNCTION serial_drop(name text)
RETURNS void VOLATILE PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'serial_drop_wrapper';
CREATE FUNCTION serial_forget(name text)
RETURNS void VOLATILE PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'serial_forget_wrapper';
CREATE FUNCTION serial_grant(name text, role text)
RETURNS void VOLATILE PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'serial_grant_wrapper';
CREATE FUNCTION serial_revoke(name text, role text)
RETURNS void VOLATILE PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'serial_revoke_wrapper';
CREATE FUNCTION serial_nextval(name text)
RETURNS text VOLATILE PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'serial_nextval_wrapper';
CREATE FUNCTION idgen_serial_period(reset text, time_zone text)
RETURNS text VOLATILE STRICT PARALLEL SAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'idgen_serial_period_wrapper';
CREATE FUNCTION idgen_serial_max_seq(format text)
RETURNS bigint IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'idgen_serial_max_seq_wrapper';

-- The serials the current role may draw from (security_barrier: the filter runs before any
-- function of the caller's query sees a row).
CREATE VIEW idgen_serials WITH (security_barrier) AS
SELECT s.name, s.format, s.reset, s.time_zone, s.gapless, s.scope, s.description,
       p.period AS current_period,
       (SELECT c.value FROM idgen_serial_counter c
         WHERE c.serial = s.id AND c.period = p.period) AS current_mark,
       s.created_at, s.updated_at
  FROM idgen_serial s
 CROSS JOIN LATERAL (SELECT idgen_serial_period(s.reset, s.time_zone) AS period) p
 WHERE (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname = current_user)
    OR s.usage_public
    OR EXISTS (SELECT FROM ROWS FROM (pg_catalog.unnest(s.usage_roles), pg_catalog.unnest(s.usage_role_oids)) g(n, o)
                 JOIN pg_catalog.pg_roles r ON r.oid = g.o AND r.rolname = g.n
                WHERE pg_catalog.pg_has_role(r.oid, 'USAGE'));
GRANT SELECT ON idgen_serials TO PUBLIC;
COMMENT ON VIEW idgen_serials IS
  'The serials the current role may draw from, with the current period and its counter: the last number committed (gapless) or the high-water mark (fast).';

-- Drawing is checked per serial (USAGE, serial_grant); changing serials is for idgen_admin.
REVOKE EXECUTE ON FUNCTION serial_create(text, text, text, text, boolean, text, text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION serial_alter(text, text, text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION serial_drop(text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION serial_forget(text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION serial_grant(text, text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION serial_revoke(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION serial_create(text, text, text, text, boolean, text, text) TO idgen_admin;
GRANT EXECUTE ON FUNCTION serial_alter(text, text, text) TO idgen_admin;
GRANT EXECUTE ON FUNCTION serial_drop(text) TO idgen_admin;
GRANT EXECUTE ON FUNCTION serial_forget(text) TO idgen_admin;
GRANT EXECUTE ON FUNCTION serial_grant(text, text) TO idgen_admin;
GRANT EXECUTE ON FUNCTION serial_revoke(text, text) TO idgen_admin;

COMMENT ON FUNCTION serial_create(text, text, text, text, boolean, text, text) IS
  'Creates a serial number: format like ''INV-{YYYY}{MM}{DD}-{seq:06}'', counter reset every day, month, year or never in an IANA time_zone; gapless => true counts in the caller''s transaction; scope => ''global'' takes counter ranges from the registry.';
COMMENT ON FUNCTION serial_alter(text, text, text) IS
  'Changes a serial''s description, and the width of {seq} in its format (nothing else of the format: the counters go on).';
COMMENT ON FUNCTION serial_drop(text) IS
  'Drops a serial (transactional); its name keeps what it printed: a serial created under it goes on counting, with the same format (a wider {seq}), reset and scope only.';
COMMENT ON FUNCTION serial_forget(text) IS
  'Forgets what a dropped serial printed: a serial created under its name counts from 1 and may print its texts again.';
COMMENT ON FUNCTION serial_grant(text, text) IS
  'Lets a role (or PUBLIC) draw from a serial.';
COMMENT ON FUNCTION serial_revoke(text, text) IS
  'Takes back a role''s (or PUBLIC''s) grant on a serial.';
COMMENT ON FUNCTION serial_nextval(text) IS
  'Next number of a serial, as text, in the period of the draw''s local time; needs USAGE on the serial.';
COMMENT ON FUNCTION idgen_serial_period(text, text) IS
  'Internal: the current period of a reset in a time zone, as idgen_serial_counter names it.';
COMMENT ON FUNCTION idgen_serial_max_seq(text) IS
  'Internal: the largest counter a serial format shows in full (10^N - 1 for {seq:0N}); NULL without a width.';
