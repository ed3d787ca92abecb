-- idgen 0.5.0 -> 0.6.0: serial numbers rebuilt in Rust (README "Serial numbers").
-- Run only by ALTER EXTENSION idgen UPDATE: a fresh install runs the current definitions
-- (src/sql.rs), and the upgrade test checks that both end with the same objects.
--
-- idgen 0.4.0's serials were SECURITY DEFINER PL/pgSQL: a database owner could run code as the
-- superuser through an overload of segment_create, their counters were segments found by name
-- prefix, and a drop was not transactional. Now:
--   * idgen_serial has an id (never reused) and an ACL (USAGE per serial, serial_grant);
--   * idgen_serial_counter holds every counter, fast and gapless, keyed by (serial id, period):
--     a gapless counter's last committed number, a fast counter's high-water mark (moved up by
--     the segment allocator in transactions of its own, its ranges cached in shared memory);
--   * the functions are C (Rust), not SECURITY DEFINER: they check the caller's rights, then
--     read and write these tables as their owner with a pinned search_path.

\echo Use "ALTER EXTENSION idgen UPDATE TO '0.6.0'" to load this file. \quit

DROP VIEW idgen_serials;
DROP FUNCTION serial_nextval(text);
DROP FUNCTION serial_create(text, text, text, text, boolean, text);
DROP FUNCTION serial_alter(text, text, text);
DROP FUNCTION serial_drop(text);

-- 0.4.0 took any zone AT TIME ZONE accepts; 0.6.0 reads IANA zones only (an abbreviation or
-- a POSIX offset means what each session's settings say). A serial with another zone would
-- print other times or periods after the update, so the update refuses it.
DO $$
DECLARE
    bad text;
BEGIN
    SELECT pg_catalog.string_agg(pg_catalog.format('%L (%L)'::pg_catalog.text, s.name, s.time_zone), ', '::pg_catalog.text) INTO bad
      FROM @extschema@.idgen_serial s
     WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_timezone_names z WHERE z.name = s.time_zone);
    IF bad IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22023',
            MESSAGE = pg_catalog.format('serials with a time zone that is not an IANA zone name: %s'::pg_catalog.text, bad),
            HINT = 'Recreate them with an IANA zone (pg_timezone_names) before the update: idgen 0.6.0 reads time zones the same in every session.';
    END IF;
END
$$;

-- Serials get an id, a scope, and who may draw: PUBLIC (usage_public) and the roles named in
-- usage_roles (by name, not OID: a dump restored elsewhere keeps its meaning, and aclitem
-- would stop pg_upgrade to PostgreSQL 16, whose aclitem format changed).
CREATE SEQUENCE idgen_serial_id_seq AS bigint;
SELECT pg_catalog.pg_extension_config_dump('idgen_serial_id_seq', '');
ALTER TABLE idgen_serial
    ADD COLUMN id bigint,
    ADD COLUMN scope text NOT NULL DEFAULT 'local' CHECK (scope IN ('local', 'global')),
    ADD COLUMN usage_public boolean NOT NULL DEFAULT false,
    ADD COLUMN usage_roles text[] NOT NULL DEFAULT '{}';
UPDATE idgen_serial SET id = pg_catalog.nextval('@extschema@.idgen_serial_id_seq'::pg_catalog.regclass);
ALTER TABLE idgen_serial
    ALTER COLUMN id SET DEFAULT pg_catalog.nextval('@extschema@.idgen_serial_id_seq'::pg_catalog.regclass),
    ALTER COLUMN id SET NOT NULL,
    ADD CONSTRAINT idgen_serial_id_key UNIQUE (id),
    ADD CONSTRAINT idgen_serial_global_check CHECK (scope = 'local' OR NOT gapless);
ALTER SEQUENCE idgen_serial_id_seq OWNED BY idgen_serial.id;
-- Every role could draw from every serial in 0.4.0: existing serials keep that (PUBLIC).
UPDATE idgen_serial SET usage_public = true;

-- Counters by serial id. The gapless counters move over as they are; each fast serial's
-- counter segments ('serial:<name>:<period>', exact names only) become counters whose mark is
-- the segment's (every number up to it may have been handed out) and are removed. DELETE ...
-- RETURNING waits for a refill in progress and reads the mark it committed; a draw through
-- the old function waiting on that refill then finds no segment (42704), never a number the new
-- counter hands out again. The table is changed in place (it stays the one pg_dump knows).
ALTER TABLE idgen_serial_counter ADD COLUMN serial_id bigint;
UPDATE idgen_serial_counter c SET serial_id = s.id FROM idgen_serial s WHERE s.name = c.serial;
ALTER TABLE idgen_serial_counter
    DROP CONSTRAINT idgen_serial_counter_pkey,
    DROP COLUMN serial;
ALTER TABLE idgen_serial_counter RENAME COLUMN serial_id TO serial;
ALTER TABLE idgen_serial_counter
    ALTER COLUMN serial SET NOT NULL,
    ADD PRIMARY KEY (serial, period),
    ADD CONSTRAINT idgen_serial_counter_period_check
        CHECK (period ~ '^([0-9]{4}|[0-9]{6}|[0-9]{8})?$');
WITH moved AS (
    DELETE FROM idgen_segment g
     USING idgen_serial s
     WHERE NOT s.gapless
       AND left(g.name, length('serial:' || s.name || ':')) = 'serial:' || s.name || ':'
       AND substr(g.name, length('serial:' || s.name || ':') + 1)
           ~ CASE s.reset WHEN 'day' THEN '^[0-9]{8}$' WHEN 'month' THEN '^[0-9]{6}$'
                          WHEN 'year' THEN '^[0-9]{4}$' ELSE '^$' END
    RETURNING s.id, substr(g.name, length('serial:' || s.name || ':') + 1) AS period, g.max_id)
INSERT INTO idgen_serial_counter (serial, period, value)
SELECT id, period, max_id FROM moved WHERE max_id > 0;
-- A draw through the old function that was under way during the update cannot return a text
-- once it commits: the old functions render through idgen_serial_render, dropped below (one
-- that finds its segment gone creates it again, at 1, and then fails to render: such leftover
-- 'serial:...' segments may be dropped).

-- Only through idgen_serials (which shows a role the serials it may use) and the functions.
REVOKE ALL ON TABLE idgen_serial, idgen_serial_counter FROM PUBLIC;
REVOKE ALL ON SEQUENCE idgen_serial_id_seq FROM PUBLIC;
COMMENT ON TABLE idgen_serial IS
  'Serial number definitions: id, format, reset period, time zone, mode, scope, who may draw (usage_public, usage_roles: USAGE). Changed by serial_create/alter/drop/grant/revoke.';
COMMENT ON TABLE idgen_serial_counter IS
  'Counters of serials, per serial id and period: the last number committed (gapless) or the high-water mark (fast: numbers up to it may have been handed out).';

DROP FUNCTION idgen_serial_render(text, text, timestamp, bigint);
DROP FUNCTION idgen_serial_check(text, text);

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
    OR EXISTS (SELECT FROM pg_catalog.unnest(s.usage_roles) g
                 JOIN pg_catalog.pg_roles r ON r.rolname = g
                WHERE pg_catalog.pg_has_role(r.oid, 'USAGE'));
GRANT SELECT ON idgen_serials TO PUBLIC;
COMMENT ON VIEW idgen_serials IS
  'The serials the current role may draw from, with the current period and its counter: the last number committed (gapless) or the high-water mark (fast).';

-- Drawing is checked per serial (USAGE, serial_grant); changing serials is for idgen_admin.
REVOKE EXECUTE ON FUNCTION serial_create(text, text, text, text, boolean, text, text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION serial_alter(text, text, text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION serial_drop(text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION serial_grant(text, text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION serial_revoke(text, text) FROM PUBLIC;
DO $$
BEGIN
  IF EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'idgen_admin') THEN
    GRANT EXECUTE ON FUNCTION serial_create(text, text, text, text, boolean, text, text) TO idgen_admin;
    GRANT EXECUTE ON FUNCTION serial_alter(text, text, text) TO idgen_admin;
    GRANT EXECUTE ON FUNCTION serial_drop(text) TO idgen_admin;
    GRANT EXECUTE ON FUNCTION serial_grant(text, text) TO idgen_admin;
    GRANT EXECUTE ON FUNCTION serial_revoke(text, text) TO idgen_admin;
  END IF;
END
$$;
COMMENT ON FUNCTION serial_create(text, text, text, text, boolean, text, text) IS
  'Creates a serial number: format like ''INV-{YYYY}{MM}{DD}-{seq:06}'', counter reset every day, month, year or never in an IANA time_zone; gapless => true counts in the caller''s transaction; scope => ''global'' takes counter ranges from the registry.';
COMMENT ON FUNCTION serial_alter(text, text, text) IS
  'Changes a serial''s format (e.g. a wider {seq:0N}) and description.';
COMMENT ON FUNCTION serial_drop(text) IS
  'Drops a serial (transactional); its name may be used again by a new serial, counting from 1.';
COMMENT ON FUNCTION serial_grant(text, text) IS
  'Lets a role (or PUBLIC) draw from a serial.';
COMMENT ON FUNCTION serial_revoke(text, text) IS
  'Takes back a role''s (or PUBLIC''s) grant on a serial.';
COMMENT ON FUNCTION serial_nextval(text) IS
  'Next number of a serial, as text, in the period of the draw''s local time; needs USAGE on the serial.';
COMMENT ON FUNCTION idgen_serial_period(text, text) IS
  'Internal: the current period of a reset in a time zone, as idgen_serial_counter names it.';

-- The registry's side of global serials: one counter per (serial name, period), whose mark a
-- node moves up by a step at a time (like a global segment's), after the registry's probation.
CREATE TABLE idgen_registry_serial_counter (
    serial     text        NOT NULL CHECK (octet_length(serial) BETWEEN 1 AND 40),
    period     text        NOT NULL CHECK (period ~ '^([0-9]{4}|[0-9]{6}|[0-9]{8})?$'),
    max_id     bigint      NOT NULL,
    taker      text,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (serial, period)
);
SELECT pg_catalog.pg_extension_config_dump('idgen_registry_serial_counter', '');
REVOKE ALL ON TABLE idgen_registry_serial_counter FROM PUBLIC;
COMMENT ON TABLE idgen_registry_serial_counter IS
  'Registry: marks of global serials'' counters, per serial name and period; numbers up to max_id may have been handed out by some node.';

-- The definition (reset and format) of each global serial, as the first node to draw it had
-- it: a node whose serial of that name counts per another period would print the same texts
-- from another counter row, so it is refused.
CREATE TABLE idgen_registry_serial (
    serial     text        PRIMARY KEY CHECK (octet_length(serial) BETWEEN 1 AND 40),
    reset      text        NOT NULL,
    format     text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
SELECT pg_catalog.pg_extension_config_dump('idgen_registry_serial', '');
REVOKE ALL ON TABLE idgen_registry_serial FROM PUBLIC;
COMMENT ON TABLE idgen_registry_serial IS
  'Registry: the reset and format of each global serial, the same on every node.';

-- Registry: moves the mark of global serial `serial`'s counter for `period` up by step_size and
-- returns the new mark (the node uses mark - step + 1 .. mark). known_mark is the last mark this
-- node took for the counter (0 if none): a counter below it has lost commits, which is recorded
-- in idgen_registry_regression (every claim and take then refuses, 55000, until resolved) and
-- answered with the regression text instead of a mark. Errors: 22023 bad arguments; 55000 a
-- reset or format that differs from the serial's on other nodes, or an open regression; 55P03
-- the registry's probation (after a restart, failover or restore) or a lock not granted within
-- 2 s; 22003 the counter is out of numbers.
CREATE FUNCTION idgen_registry_serial_take(serial text, period text, step_size bigint,
                                           incarnation_id text, holder_secret text,
                                           serial_reset text, serial_format text, known_mark bigint)
RETURNS TABLE (mark bigint, regression text)
LANGUAGE plpgsql VOLATILE ROWS 1 SECURITY DEFINER
SET search_path = pg_catalog, pg_temp SET lock_timeout = '2s'
AS $$
#variable_conflict use_column
DECLARE
    d       @extschema@.idgen_registry_serial;
    current bigint;
    taken   bigint;
BEGIN
    IF serial IS NULL OR octet_length(serial) NOT BETWEEN 1 AND 40 OR serial ~ '[[:cntrl:]]' OR period IS NULL
       OR period !~ '^([0-9]{4}|[0-9]{6}|[0-9]{8})?$'
       OR step_size IS NULL OR step_size < 1 OR step_size > 1000000
       OR incarnation_id IS NULL OR holder_secret IS NULL OR octet_length(holder_secret) < 32
       OR serial_reset IS NULL OR serial_format IS NULL OR known_mark IS NULL OR known_mark < 0 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'invalid serial counter request';
    END IF;
    INSERT INTO @extschema@.idgen_registry_serial AS r (serial, reset, format)
    VALUES (serial, serial_reset, serial_format)
    ON CONFLICT ON CONSTRAINT idgen_registry_serial_pkey DO NOTHING;
    SELECT * INTO d FROM @extschema@.idgen_registry_serial r WHERE r.serial = idgen_registry_serial_take.serial;
    IF d.reset <> serial_reset OR d.format <> serial_format THEN
        RAISE EXCEPTION USING ERRCODE = '55000',
            MESSAGE = format('global serial %L is defined as %L, reset %s, on the registry''s nodes, not %L, reset %s',
                             serial, d.format, d.reset, serial_format, serial_reset),
            HINT = 'Create the serial with the same format and reset on every node.';
    END IF;
    SELECT c.max_id INTO current FROM @extschema@.idgen_registry_serial_counter c
     WHERE c.serial = idgen_registry_serial_take.serial AND c.period = idgen_registry_serial_take.period
       FOR UPDATE;
    IF coalesce(current, 0) < known_mark THEN
        PERFORM @extschema@.idgen_registry_report_serial_regression(serial::text, period::text,
            coalesce(current, 0)::bigint, known_mark::bigint, NULL::text, incarnation_id::text);
        RETURN QUERY SELECT NULL::bigint,
            format('global serial %L''s counter for %L in the registry is %s, below %s that this node took: the registry has lost commits',
                   serial, period, coalesce(current, 0), known_mark);
        RETURN;
    END IF;
    IF (@extschema@.idgen_registry_probation()).ranges_until > clock_timestamp() THEN
        RAISE EXCEPTION USING ERRCODE = '55P03',
            MESSAGE = format('the registry hands out no range until %s', (@extschema@.idgen_registry_probation()).ranges_until),
            DETAIL = 'It restarted, failed over or was restored: every node reports its marks first.';
    END IF;
    PERFORM @extschema@.idgen_registry_check_regressions();
    INSERT INTO @extschema@.idgen_registry_serial_counter AS c (serial, period, max_id, taker)
    VALUES (serial, period, step_size, incarnation_id)
    ON CONFLICT ON CONSTRAINT idgen_registry_serial_counter_pkey DO UPDATE
       SET max_id = c.max_id + excluded.max_id, taker = excluded.taker,
           updated_at = clock_timestamp()
    RETURNING c.max_id INTO taken;
    RETURN QUERY SELECT taken, NULL::text;
END
$$;
REVOKE EXECUTE ON FUNCTION idgen_registry_serial_take(text, text, bigint, text, text, text, text, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idgen_registry_serial_take(text, text, bigint, text, text, text, text, bigint) TO idgen_registry;
COMMENT ON FUNCTION idgen_registry_serial_take(text, text, bigint, text, text, text, text, bigint) IS
  'Registry: moves a global serial''s counter for a period up by step_size; returns the new mark, or the regression found.';

-- A global serial's counter found lost is a regression too: the registry's regressions name a
-- worker id, a global segment, or a global serial's counter (serial and period).
ALTER TABLE idgen_registry_regression
    ADD COLUMN serial text,
    ADD COLUMN serial_period text,
    DROP CONSTRAINT idgen_registry_regression_check,
    ADD CONSTRAINT idgen_registry_regression_check
        CHECK (pg_catalog.num_nonnulls(worker_id, segment, serial) = 1 AND (serial IS NULL) = (serial_period IS NULL));

-- Registry: records that a node holds mark node_value of global serial `serial`'s counter for
-- `period` while the registry has registry_value (below it): a lost commit. Once per open
-- finding per node incarnation; only if it is still true (resolve may have raised the counter).
CREATE FUNCTION idgen_registry_report_serial_regression(serial_name text, period text,
                                                        registry_value bigint, node_value bigint,
                                                        node text, incarnation_id text)
RETURNS void
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
  INSERT INTO @extschema@.idgen_registry_regression
         (serial, serial_period, registry_value, node_value, node_name, incarnation, reported_by,
          reporter_address)
  SELECT serial_name, idgen_registry_report_serial_regression.period, registry_value, node_value,
         node, incarnation_id, session_user,
         host(inet_client_addr())
   WHERE NOT EXISTS (
         SELECT FROM @extschema@.idgen_registry_regression g
          WHERE g.resolved_at IS NULL AND g.serial = serial_name
            AND g.serial_period = idgen_registry_report_serial_regression.period
            AND g.incarnation IS NOT DISTINCT FROM incarnation_id)
     AND coalesce((SELECT c.max_id FROM @extschema@.idgen_registry_serial_counter c
                    WHERE c.serial = serial_name
                      AND c.period = idgen_registry_report_serial_regression.period), 0) < node_value
$$;
REVOKE EXECUTE ON FUNCTION idgen_registry_report_serial_regression(text, text, bigint, bigint, text, text) FROM PUBLIC;
COMMENT ON FUNCTION idgen_registry_report_serial_regression(text, text, bigint, bigint, text, text) IS
  'Registry: records a global serial counter below a mark a node took (a lost commit).';

-- Renewals and reports show global serials' marks too.
CREATE OR REPLACE FUNCTION idgen_registry_check_marks(segment_names text[], segment_marks bigint[], node text,
                                           incarnation_id text)
RETURNS text
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    found_lost text;
    m record;
BEGIN
    FOR m IN SELECT s.name, s.max_id, k.mark
               FROM unnest(segment_names, segment_marks) AS k(name, mark)
               JOIN @extschema@.idgen_registry_segment s ON s.name = k.name
              WHERE k.mark > s.max_id
                -- The last range this very node gave back: its report read the mark before
                -- the give-back (nothing of the range above the new mark was handed out).
                AND NOT coalesce(s.given_back_by = incarnation_id AND k.mark = s.given_back_from, false) LOOP
        PERFORM @extschema@.idgen_registry_report_regression(NULL::integer, m.name::text, m.max_id::bigint, m.mark::bigint, node::text, incarnation_id::text);
        found_lost := coalesce(found_lost, format('global segment %L''s mark in the registry is %s, below %s that this node holds: the registry has lost commits', m.name, m.max_id, m.mark));
    END LOOP;
    -- Global serials' counters, named E'\\x01serial\\x01' || serial || E'\\x01' || period.
    FOR m IN SELECT k.serial, k.period, coalesce(c.max_id, 0) AS max_id, k.mark
               FROM (SELECT split_part(x.name, chr(1), 3) AS serial,
                            split_part(x.name, chr(1), 4) AS period, x.mark
                       FROM unnest(segment_names, segment_marks) AS x(name, mark)
                      WHERE x.name LIKE chr(1) || 'serial' || chr(1) || '%'
                        AND array_length(string_to_array(x.name, chr(1)), 1) = 4
                        -- A global segment's name is a segment's mark, never a serial's.
                        AND NOT EXISTS (SELECT FROM @extschema@.idgen_registry_segment s
                                         WHERE s.name = x.name)) k
               LEFT JOIN @extschema@.idgen_registry_serial_counter c
                      ON c.serial = k.serial AND c.period = k.period
              WHERE k.mark > coalesce(c.max_id, 0)
                AND octet_length(k.serial) BETWEEN 1 AND 40
                AND k.period ~ '^([0-9]{4}|[0-9]{6}|[0-9]{8})?$' LOOP
        PERFORM @extschema@.idgen_registry_report_serial_regression(m.serial::text, m.period::text,
            m.max_id::bigint, m.mark::bigint, node::text, incarnation_id::text);
        found_lost := coalesce(found_lost, format('global serial %L''s counter for %L in the registry is %s, below %s that this node holds: the registry has lost commits', m.serial, m.period, m.max_id, m.mark));
    END LOOP;
    RETURN found_lost;
END
$$;

-- Resolving raises lost global serial counters as it raises segments.
CREATE OR REPLACE FUNCTION idgen_registry_resolve(dismiss bigint[] DEFAULT '{}')
RETURNS TABLE (worker_id integer, segment text, raised_from bigint, raised_to bigint)
LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
BEGIN
    LOCK TABLE @extschema@.idgen_registry_regression IN SHARE ROW EXCLUSIVE MODE;
    UPDATE @extschema@.idgen_registry_regression g
       SET resolved_at = clock_timestamp(), dismissed = true
     WHERE g.resolved_at IS NULL AND g.id = ANY (coalesce(dismiss, '{}'));
    -- A worker id's report raises nothing here: a holder whose row survived raised its R with
    -- its own renewal (only the holder can); one whose row was lost is told so at its next
    -- renewal (55006: it stays below its fence until a restart claims anew); and the probation
    -- kept everyone else off the id until every R a lost renewal could have confirmed had
    -- passed (with one lease length for the whole fleet). Such reports are only closed.
    RETURN QUERY
    WITH worst AS (
        SELECT g.segment, max(g.node_value) AS v FROM @extschema@.idgen_registry_regression g
         WHERE g.resolved_at IS NULL AND g.segment IS NOT NULL GROUP BY g.segment),
    raised AS (
        UPDATE @extschema@.idgen_registry_segment r
           SET max_id = w.v, taker = NULL, taker_key = NULL, updated_at = clock_timestamp()
          FROM worst w, (SELECT name, max_id FROM @extschema@.idgen_registry_segment) o
         WHERE r.name = w.segment AND o.name = r.name AND r.max_id < w.v
        RETURNING r.name, o.max_id AS before, r.max_id AS after)
    SELECT NULL::integer, raised.name, raised.before, raised.after FROM raised;
    -- A global serial's counter: raised to the highest mark a node reported.
    RETURN QUERY
    WITH worst AS (
        SELECT g.serial, g.serial_period AS period, max(g.node_value) AS v
          FROM @extschema@.idgen_registry_regression g
         WHERE g.resolved_at IS NULL AND g.serial IS NOT NULL GROUP BY 1, 2),
    before AS (
        SELECT w.serial, w.period, w.v, c.max_id AS was FROM worst w
          LEFT JOIN @extschema@.idgen_registry_serial_counter c
                 ON c.serial = w.serial AND c.period = w.period
         WHERE coalesce(c.max_id, 0) < w.v),
    raised AS (
        INSERT INTO @extschema@.idgen_registry_serial_counter AS c (serial, period, max_id)
        SELECT b.serial, b.period, b.v FROM before b
        ON CONFLICT ON CONSTRAINT idgen_registry_serial_counter_pkey DO UPDATE
           SET max_id = greatest(c.max_id, excluded.max_id), taker = NULL, updated_at = clock_timestamp()
        RETURNING c.serial, c.period)
    SELECT NULL::integer, format('serial %s, period %s', b.serial, b.period), b.was, b.v
      FROM before b JOIN raised r ON r.serial = b.serial AND r.period = b.period;
    UPDATE @extschema@.idgen_registry_regression g SET resolved_at = clock_timestamp()
     WHERE g.resolved_at IS NULL;
END
$$;

-- Adopting a column: the segment always continues above the column and the
-- sequence, its cached numbers dropped; refused under REPEATABLE READ / SERIALIZABLE.
--
-- Switches a bigint column fed by a sequence (serial, bigserial, an identity column, or any
-- DEFAULT nextval(...)) to an idgen generator, in the caller's transaction, as pgEdge
-- snowflake's convert_sequence_to_snowflake does. Returns one row per step: what it does (or,
-- with dry_run, would do) and the statement that undoes it.
--
-- Order: every check first (nothing is changed by a refused call); then the table is locked
-- ACCESS EXCLUSIVE (concurrent inserts wait for the caller's COMMIT, then use the new default;
-- none fails); then the floor is read under the lock: the larger of max(column) and the
-- sequence's last value (a value nextval handed out but not yet inserted is covered).
--
-- The floor is read by a statement that starts after the lock, so it sees every row committed
-- before the lock: true in READ COMMITTED only. REPEATABLE READ and SERIALIZABLE read through
-- the transaction's snapshot, taken before the lock (at the latest by the statement calling
-- this function), and would miss rows committed in between: refused with 25001 (class 25, the
-- transaction's state; the code PostgreSQL gives "SET TRANSACTION ISOLATION LEVEL must be
-- called before any query"), since the same call in a READ COMMITTED transaction works. A dry
-- run (it locks and changes nothing) and a column already on idgen are answered at any level.
--
-- A new segment starts above the floor. An existing one (a rerun after a ROLLBACK: the segment
-- step is not undone; a segment shared with another column) is always moved with setval
-- semantics: segment_setval(segment, greatest(floor, mark)), which discards the numbers cached
-- in shared memory, so the next number is above both the floor and every number the segment
-- may have handed out. A mark at or above the floor says nothing about the cached numbers below
-- it: 0.5.0 skipped the setval then and handed out numbers the column held. The mark
-- and not the floor alone: segment_setval refuses (22003) a value below a number this server
-- handed out, and below the stored mark when the segment is not cached; the numbers between the
-- floor and the mark are skipped, as a sequence's cached values are after a crash. A refill by
-- another session between the read of the mark and the setval raises the mark (22003): read it
-- again and retry. A global segment's mark lives in the registry and a node cannot move it:
-- refused (0A000, as segment_setval refuses it) before anything changes.
--
-- Snowflake ids need no floor, but it must lie below the ids of a clock a day behind. Then the
-- identity is dropped, or the sequence detached (and dropped with drop_sequence), and the
-- default set.
--
-- The default segment name: <table>_<column> for a table in schema public (the name every
-- adopt gave before 0.6.0: reruns, README, existing defaults), <schema>.<table>_<column> in any
-- other schema, so that same-named tables in two schemas (a schema per tenant) get a segment
-- each instead of sharing one. Not "qualified when the table is not in the search path": this
-- function runs with its own search_path, and a name that depended on the caller's would let
-- two sessions pick two segments for one column. Compatibility: where <schema>.<table>_<column>
-- does not exist but <table>_<column> does and no other table's default draws from it, that is
-- the segment an earlier version's adopt of this table created and left behind at a ROLLBACK,
-- and it is reused. Either way uniqueness does not rest on the name: an existing segment is
-- always moved above the floor, so a shared segment hands each table numbers none holds.
--
-- Safety: search_path is pg_catalog, pg_temp, and every call of an idgen function names
-- @extschema@ and passes arguments of its parameters' exact types, so that an overload created
-- in the extension's schema cannot take the call.
--
-- The segment step is not undone by ROLLBACK (segments are changed by the allocator in
-- transactions of its own, like nextval); a rerun finds the segment and moves it.
--
-- Errors: 22004 a NULL argument; 22023 an unknown generator, a segment name with generator
-- snowflake, or a segment name of 0 or more than 63 bytes; 42703 no such column; 42809 not a
-- table, a partition (adopt its partitioned table), or a generated column; 42804 not bigint
-- (integer: ALTER COLUMN ... TYPE bigint first); 55000 existing values at or above the
-- Snowflake ids of a clock a day behind; 42501 the caller does not own the table, or may not
-- create segments (idgen_admin); 25001 a REPEATABLE READ or SERIALIZABLE transaction; 0A000 a
-- global segment.
CREATE OR REPLACE FUNCTION idgen_adopt_column(
    table_name regclass,
    column_name name,
    generator text DEFAULT 'snowflake',
    segment text DEFAULT NULL,
    drop_sequence boolean DEFAULT false,
    dry_run boolean DEFAULT false)
RETURNS TABLE (step integer, action text, statement text, undo text)
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE ROWS 10
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    rel       record;
    col       record;
    seq       regclass;
    owned     boolean;
    seq_last  bigint;
    floor_id  bigint;
    has_max   bigint;
    seg_mark  bigint;
    target    bigint;
    legacy    text;
    named     boolean := segment IS NOT NULL;
    created   boolean;
    moved     boolean;
    tries     integer := 0;
    new_default text;
    qualified text;
    n         integer := 0;
BEGIN
    IF table_name IS NULL OR column_name IS NULL OR generator IS NULL
       OR drop_sequence IS NULL OR dry_run IS NULL THEN
        RAISE EXCEPTION 'idgen_adopt_column: % must not be NULL',
            CASE WHEN table_name IS NULL THEN 'table_name'
                 WHEN column_name IS NULL THEN 'column_name'
                 WHEN generator IS NULL THEN 'generator'
                 WHEN drop_sequence IS NULL THEN 'drop_sequence'
                 ELSE 'dry_run' END
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF generator NOT IN ('snowflake', 'segment') THEN
        RAISE EXCEPTION 'idgen_adopt_column: generator must be ''snowflake'' or ''segment'', not %',
            quote_literal(left(generator, 40))
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF generator = 'snowflake' AND segment IS NOT NULL THEN
        RAISE EXCEPTION 'idgen_adopt_column: segment is only for generator => ''segment'''
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    SELECT c.oid, c.relkind, c.relispartition, c.relowner, c.relname, n.nspname
      INTO rel
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE c.oid = table_name;
    IF rel.relkind NOT IN ('r', 'p') THEN
        RAISE EXCEPTION 'idgen_adopt_column: % is not a table', table_name
            USING ERRCODE = 'wrong_object_type';
    END IF;
    IF rel.relispartition THEN
        RAISE EXCEPTION 'idgen_adopt_column: % is a partition', table_name
            USING ERRCODE = 'wrong_object_type',
                  HINT = 'Adopt the column of its partitioned table: its default applies to every partition.';
    END IF;
    SELECT a.attnum, a.atttypid, a.attidentity, a.attgenerated,
           pg_get_expr(d.adbin, d.adrelid) AS default_expr
      INTO col
      FROM pg_attribute a
      LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
     WHERE a.attrelid = table_name AND a.attname = column_name
       AND a.attnum > 0 AND NOT a.attisdropped;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'idgen_adopt_column: column % of % does not exist', quote_ident(column_name), table_name
            USING ERRCODE = 'undefined_column';
    END IF;
    IF col.attgenerated <> '' THEN
        RAISE EXCEPTION 'idgen_adopt_column: column % of % is a generated column', quote_ident(column_name), table_name
            USING ERRCODE = 'wrong_object_type';
    END IF;
    IF col.atttypid <> 'bigint'::regtype THEN
        RAISE EXCEPTION 'idgen_adopt_column: column % of % is %, not bigint',
            quote_ident(column_name), table_name, format_type(col.atttypid, NULL)
            USING ERRCODE = 'datatype_mismatch',
                  HINT = CASE WHEN col.atttypid IN ('integer'::regtype, 'smallint'::regtype)
                         THEN format('Widen it first: ALTER TABLE %s ALTER COLUMN %I TYPE bigint;', table_name, column_name)
                         ELSE 'idgen generates bigint values.' END;
    END IF;
    IF NOT pg_has_role(current_user, rel.relowner, 'USAGE') THEN
        RAISE EXCEPTION 'idgen_adopt_column: must be owner of table %', table_name
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF generator = 'segment'
       AND NOT has_function_privilege('@extschema@.segment_create(text, bigint, integer, text, text)', 'EXECUTE') THEN
        RAISE EXCEPTION 'idgen_adopt_column: permission denied to create segments'
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'GRANT idgen_admin TO the caller.';
    END IF;
    IF generator = 'segment' THEN
        IF NOT named THEN
            -- The default name (see the comment above the function).
            segment := rel.relname || '_' || column_name;
            IF rel.nspname <> 'public' THEN
                legacy := segment;
                segment := rel.nspname || '.' || legacy;
                IF NOT EXISTS (SELECT FROM @extschema@.idgen_segment s WHERE s.name = segment)
                   AND EXISTS (SELECT FROM @extschema@.idgen_segment s WHERE s.name = legacy)
                   AND NOT EXISTS (
                       SELECT FROM pg_attrdef ad
                         JOIN pg_depend d ON d.classid = 'pg_attrdef'::regclass AND d.objid = ad.oid
                        WHERE d.refclassid = 'pg_proc'::regclass
                          AND d.refobjid = '@extschema@.segment_nextval(text)'::regprocedure
                          AND ad.adrelid <> table_name
                          AND strpos(pg_get_expr(ad.adbin, ad.adrelid),
                                     format('segment_nextval(%L::text)', legacy)) > 0) THEN
                    segment := legacy;
                END IF;
            END IF;
        END IF;
        IF octet_length(segment) NOT BETWEEN 1 AND 63 AND named THEN
            RAISE EXCEPTION 'idgen_adopt_column: segment name must be 1 to 63 bytes'
                USING ERRCODE = 'invalid_parameter_value';
        ELSIF octet_length(segment) > 63 THEN
            RAISE EXCEPTION 'idgen_adopt_column: segment name must be 1 to 63 bytes'
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = format('The default name %s is too long: name the segment (segment => ...).',
                                    quote_literal(segment));
        END IF;
        new_default := format('@extschema@.segment_nextval(%L::text)', segment);
    ELSE
        new_default := '@extschema@.snowflake_nextval()';
    END IF;
    IF EXISTS (SELECT FROM pg_attrdef ad
                 JOIN pg_depend d ON d.classid = 'pg_attrdef'::regclass AND d.objid = ad.oid
                WHERE ad.adrelid = table_name AND ad.adnum = col.attnum
                  AND d.refclassid = 'pg_proc'::regclass
                  AND d.refobjid IN ('@extschema@.snowflake_nextval()'::regprocedure,
                                     '@extschema@.segment_nextval(text)'::regprocedure)) THEN
        RETURN QUERY SELECT 0, 'nothing to do: the column already draws from idgen'::text,
                            NULL::text, NULL::text;
        RETURN;
    END IF;
    IF NOT dry_run AND current_setting('transaction_isolation') IN ('repeatable read', 'serializable') THEN
        RAISE EXCEPTION 'idgen_adopt_column: cannot adopt % in a % transaction',
            table_name, upper(current_setting('transaction_isolation'))
            USING ERRCODE = 'active_sql_transaction',
                  DETAIL = 'The transaction''s snapshot is older than the table lock: rows committed in between would be missed when the floor is read.',
                  HINT = 'Run it in a READ COMMITTED transaction (BEGIN ISOLATION LEVEL READ COMMITTED).';
    END IF;
    IF generator = 'segment'
       AND EXISTS (SELECT FROM @extschema@.idgen_segment s WHERE s.name = segment AND s.scope = 'global') THEN
        RAISE EXCEPTION 'idgen_adopt_column: segment % is global: this server cannot move it above the values of %',
            quote_literal(segment), table_name
            USING ERRCODE = 'feature_not_supported',
                  HINT = 'Adopt the column with a local segment (segment => another name).';
    END IF;
    qualified := format('%I.%I', rel.nspname, rel.relname);
    -- The sequence feeding the column: owned by it (serial, identity), or named by its default.
    seq := pg_get_serial_sequence(qualified, column_name)::regclass;
    owned := seq IS NOT NULL;
    IF seq IS NULL THEN
        SELECT d.refobjid::regclass INTO seq
          FROM pg_attrdef ad
          JOIN pg_depend d ON d.classid = 'pg_attrdef'::regclass AND d.objid = ad.oid
          JOIN pg_class s ON s.oid = d.refobjid AND s.relkind = 'S'
         WHERE ad.adrelid = table_name AND ad.adnum = col.attnum AND d.refclassid = 'pg_class'::regclass
         LIMIT 1;
    END IF;

    -- Checks done: from here on the call changes things (unless dry_run).
    IF NOT dry_run THEN
        EXECUTE format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE', qualified);
    END IF;
    n := n + 1;
    RETURN QUERY SELECT n, 'lock the table; inserts wait for this transaction'::text,
                        format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE', qualified), NULL::text;

    -- A statement of its own after the lock: in READ COMMITTED, a snapshot that sees every row
    -- committed before the lock was granted.
    EXECUTE format('SELECT max(%I) FROM %s', column_name, qualified) INTO has_max;
    floor_id := coalesce(has_max, 0);
    IF seq IS NOT NULL THEN
        EXECUTE format('SELECT last_value FROM %s', seq) INTO seq_last;
        floor_id := greatest(floor_id, seq_last);
    END IF;

    IF generator = 'snowflake' THEN
        IF floor_id >= @extschema@.snowflake_compose((clock_timestamp() - interval '1 day')::timestamptz,
                                                     0::integer, 0::integer) THEN
            RAISE EXCEPTION 'idgen_adopt_column: % already holds values up to %, which Snowflake ids may reach',
                qualified || '.' || quote_ident(column_name), floor_id
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      HINT = 'Use generator => ''segment'', which starts above them.';
        END IF;
        n := n + 1;
        RETURN QUERY SELECT n, format('Snowflake ids are above every existing value (up to %s)', floor_id),
                            NULL::text, NULL::text;
    ELSE
        n := n + 1;
        LOOP
            tries := tries + 1;
            created := false;
            moved := false;
            SELECT s.max_id INTO seg_mark FROM @extschema@.idgen_segment s WHERE s.name = segment;
            IF NOT FOUND THEN
                IF dry_run THEN
                    created := true;
                ELSE
                    BEGIN
                        PERFORM @extschema@.segment_create(name => segment::text, start => (floor_id + 1)::bigint);
                        created := true;
                    EXCEPTION WHEN duplicate_object THEN
                        IF tries >= 5 THEN
                            RAISE;
                        END IF; -- created by another session since the read: move it instead
                    END;
                END IF;
            ELSE
                -- Forward only, and every cached number is dropped: later numbers are above
                -- target, which is at or above both the floor and the mark.
                target := greatest(floor_id, seg_mark);
                IF dry_run THEN
                    moved := true;
                ELSE
                    BEGIN
                        PERFORM @extschema@.segment_setval(segment::text, target::bigint);
                        moved := true;
                    EXCEPTION WHEN numeric_value_out_of_range THEN
                        IF tries >= 5 THEN
                            RAISE;
                        END IF; -- a refill raised the mark since it was read: read it again
                    END;
                END IF;
            END IF;
            EXIT WHEN created OR moved;
        END LOOP;
        IF created THEN
            RETURN QUERY SELECT n, format('create segment %s starting above %s', quote_literal(segment), floor_id),
                                format('SELECT @extschema@.segment_create(%L, start => %s)', segment, floor_id + 1),
                                format('SELECT @extschema@.segment_drop(%L)', segment);
        ELSE
            RETURN QUERY SELECT n, format('move segment %s above %s and drop its cached numbers',
                                          quote_literal(segment), target),
                                format('SELECT @extschema@.segment_setval(%L, %s)', segment, target),
                                NULL::text;
        END IF;
    END IF;

    IF col.attidentity <> '' THEN
        n := n + 1;
        IF NOT dry_run THEN
            EXECUTE format('ALTER TABLE %s ALTER COLUMN %I DROP IDENTITY', qualified, column_name);
        END IF;
        RETURN QUERY SELECT n, 'drop the identity (and its sequence)'::text,
                            format('ALTER TABLE %s ALTER COLUMN %I DROP IDENTITY', qualified, column_name),
                            format('ALTER TABLE %s ALTER COLUMN %I DROP DEFAULT, ALTER COLUMN %I ADD GENERATED BY DEFAULT AS IDENTITY; SELECT setval(pg_get_serial_sequence(%L, %L), (SELECT max(%I) FROM %s))',
                                   qualified, column_name, column_name, qualified, column_name, column_name, qualified);
    ELSIF owned THEN
        n := n + 1;
        IF NOT dry_run THEN
            EXECUTE format('ALTER SEQUENCE %s OWNED BY NONE', seq);
        END IF;
        RETURN QUERY SELECT n, 'detach the sequence from the column'::text,
                            format('ALTER SEQUENCE %s OWNED BY NONE', seq),
                            format('ALTER SEQUENCE %s OWNED BY %s.%I', seq, qualified, column_name);
    END IF;

    n := n + 1;
    IF NOT dry_run THEN
        EXECUTE format('ALTER TABLE %s ALTER COLUMN %I SET DEFAULT %s', qualified, column_name, new_default);
    END IF;
    RETURN QUERY SELECT n, 'draw the column''s values from idgen'::text,
                        format('ALTER TABLE %s ALTER COLUMN %I SET DEFAULT %s', qualified, column_name, new_default),
                        CASE WHEN col.attidentity <> '' THEN NULL
                             WHEN col.default_expr IS NULL THEN format('ALTER TABLE %s ALTER COLUMN %I DROP DEFAULT', qualified, column_name)
                             WHEN seq IS NULL THEN format('ALTER TABLE %s ALTER COLUMN %I SET DEFAULT %s', qualified, column_name, col.default_expr)
                             ELSE format('ALTER TABLE %s ALTER COLUMN %I SET DEFAULT %s; SELECT setval(%L, (SELECT max(%I) FROM %s))',
                                         qualified, column_name, col.default_expr, seq, column_name, qualified) END;

    IF owned AND col.attidentity = '' AND drop_sequence THEN
        n := n + 1;
        IF NOT dry_run THEN
            EXECUTE format('DROP SEQUENCE %s', seq);
        END IF;
        RETURN QUERY SELECT n, 'drop the detached sequence'::text, format('DROP SEQUENCE %s', seq),
                            'CREATE SEQUENCE again (its old values are in the column)'::text;
    END IF;
END
$fn$;

COMMENT ON FUNCTION idgen_adopt_column(regclass, name, text, text, boolean, boolean) IS
  'Switches a bigint serial / identity column to snowflake_nextval() or segment_nextval(segment), in the caller''s READ COMMITTED transaction; an existing segment is moved above the column''s values. Returns each step and its undo. dry_run => true changes nothing.';

-- Two registry functions of 0.5.0, again (idgen_registry_check_marks is above), with every argument of their calls to
-- idgen_registry_report_regression cast to its exact type: an untyped NULL let an overload that
-- a database owner created in the extension's schema (public) match better and run as the
-- superuser.
CREATE OR REPLACE FUNCTION idgen_registry_renew(
    held_worker integer, incarnation_id text, holder_secret text, lease_length_ms integer,
    renew_every_ms integer, offset_ms double precision, known_fence bigint,
    standbys text[] DEFAULT '{}', segment_names text[] DEFAULT '{}',
    segment_marks bigint[] DEFAULT '{}')
RETURNS TABLE (fence_tick bigint, expires_at timestamptz, registry_now timestamptz, regression text)
LANGUAGE plpgsql VOLATILE ROWS 1 SECURITY DEFINER
SET search_path = pg_catalog, pg_temp SET lock_timeout = '2s'
AS $$
#variable_conflict use_column
DECLARE
    now_ts timestamptz := clock_timestamp();
    l      @extschema@.idgen_registry_lease;
    lost   text;
BEGIN
    IF lease_length_ms IS NULL OR lease_length_ms < 1 OR renew_every_ms IS NULL OR renew_every_ms < 1
       OR holder_secret IS NULL OR known_fence IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'invalid lease renewal';
    END IF;
    SELECT * INTO l FROM @extschema@.idgen_registry_lease r
     WHERE r.worker_id = held_worker AND r.incarnation = incarnation_id AND r.released_tick IS NULL
       FOR UPDATE;
    IF NOT FOUND THEN
        SELECT * INTO l FROM @extschema@.idgen_registry_lease r WHERE r.worker_id = held_worker;
        IF NOT FOUND OR coalesce(l.released_tick - 1, l.fence_tick) < known_fence THEN
            -- This node was confirmed a fence the registry's row never reached (or there is
            -- no row): the registry lost this node's claim or renewals. Reported (for the
            -- operator; it raises nothing, the probation keeps others off the id), and answered
            -- (not raised, so that the report commits) as a regression: the node extends
            -- nothing.
            IF NOT EXISTS (SELECT FROM @extschema@.idgen_registry_regression g
                            WHERE g.worker_id = held_worker AND g.incarnation = incarnation_id
                              AND g.resolved_at IS NOT NULL) THEN
                PERFORM @extschema@.idgen_registry_report_regression(held_worker::integer, NULL::text,
                    coalesce(l.released_tick - 1, l.fence_tick, -1)::bigint, known_fence::bigint, NULL::text, incarnation_id::text);
                RETURN QUERY SELECT NULL::bigint, NULL::timestamptz, now_ts,
                    format('the registry has no lease of worker id %s up to tick %s that it confirmed to this node: the registry has lost commits', held_worker, known_fence);
                RETURN;
            END IF;
            -- Reported and resolved: the lease is gone from the registry; this server stays
            -- below its fence until a restart claims anew (55006 below).
        END IF;
        RAISE EXCEPTION USING ERRCODE = '55006',
            MESSAGE = format('worker id %s is no longer leased to this server', held_worker),
            DETAIL = CASE WHEN NOT FOUND THEN 'The registry has no lease of it.'
                          WHEN l.released_tick IS NOT NULL THEN 'Its lease was released.'
                          ELSE format('Node %L took it over at %s, after this server''s lease expired.', l.node_name, l.claimed_at) END,
            HINT = 'Restart this server to claim a worker id again; until then its ids stop at the last confirmed end of its lease.';
    END IF;
    IF l.holder_key IS DISTINCT FROM @extschema@.idgen_registry_key(holder_secret) THEN
        RAISE EXCEPTION USING ERRCODE = '42501',
            MESSAGE = format('only the holder of worker id %s can renew its lease', held_worker);
    END IF;
    lost := @extschema@.idgen_registry_check_marks(segment_names, segment_marks, l.node_name, incarnation_id);
    IF l.fence_tick < known_fence THEN
        PERFORM @extschema@.idgen_registry_report_regression(held_worker::integer, NULL::text, l.fence_tick::bigint, known_fence::bigint, l.node_name::text, incarnation_id::text);
        lost := format('the registry''s fence of worker id %s is tick %s, below tick %s that it confirmed to this node: the registry has lost commits',
                       held_worker, l.fence_tick, known_fence);
    ELSIF lost IS NULL AND EXISTS (SELECT FROM @extschema@.idgen_registry_regression g WHERE g.resolved_at IS NULL) THEN
        -- Another node found the registry behind: nothing it says is believed until resolved.
        lost := 'the registry has lost commits (an open regression in idgen_registry_regression)';
    END IF;
    UPDATE @extschema@.idgen_registry_lease r
       SET fence_tick = greatest(r.fence_tick, known_fence,
                                 greatest(floor(extract(epoch FROM now_ts) * 1000)::bigint + lease_length_ms - f.epoch_unix_ms, 0) / f.time_unit_ms),
           renewed_at = now_ts,
           expires_at = now_ts + make_interval(secs => lease_length_ms / 1000.0),
           lease_ms = lease_length_ms, renew_interval_ms = renew_every_ms,
           clock_offset_ms = offset_ms, renewals = r.renewals + 1,
           attested_standbys = coalesce(standbys, '{}')
      FROM @extschema@.idgen_registry_fleet f
     WHERE r.worker_id = held_worker
    RETURNING r.* INTO l;
    -- After the lease row (a claim holds the lease table and then writes the server row).
    PERFORM @extschema@.idgen_registry_probation();
    PERFORM @extschema@.idgen_registry_note_lease(lease_length_ms, renew_every_ms);
    RETURN QUERY SELECT l.fence_tick, l.expires_at, now_ts, lost;
END
$$;

CREATE OR REPLACE FUNCTION idgen_registry_segment_take(segment text, step_size integer, incarnation_id text,
                                            holder_secret text, known_mark bigint)
RETURNS TABLE (first_id bigint, last_id bigint, base_step integer, regression text)
LANGUAGE plpgsql VOLATILE ROWS 1 SECURITY DEFINER
SET search_path = pg_catalog, pg_temp SET lock_timeout = '2s'
AS $$
#variable_conflict use_column
DECLARE
    s     @extschema@.idgen_registry_segment;
    first bigint;
BEGIN
    IF step_size IS NULL OR step_size < 1 OR incarnation_id IS NULL OR holder_secret IS NULL
       OR octet_length(holder_secret) < 32 THEN
        RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = 'invalid range request';
    END IF;
    SELECT * INTO s FROM @extschema@.idgen_registry_segment r WHERE r.name = segment FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = '42704', MESSAGE = format('global segment %L does not exist', segment);
    END IF;
    IF s.max_id < known_mark
       AND NOT coalesce(s.given_back_by = incarnation_id AND known_mark = s.given_back_from, false) THEN
        PERFORM @extschema@.idgen_registry_report_regression(NULL::integer, segment::text, s.max_id::bigint, known_mark::bigint, NULL::text, incarnation_id::text);
        RETURN QUERY SELECT NULL::bigint, NULL::bigint, s.step,
            format('global segment %L''s mark in the registry is %s, below %s that this node saw: the registry has lost commits',
                   segment, s.max_id, known_mark);
        RETURN;
    END IF;
    IF (@extschema@.idgen_registry_probation()).ranges_until > clock_timestamp() THEN
        -- After a restart, failover or restore the registry may have lost ranges whose takers
        -- have not reported their marks yet: none is handed out until they have.
        RAISE EXCEPTION USING ERRCODE = '55P03',
            MESSAGE = format('the registry hands out no range until %s', (@extschema@.idgen_registry_probation()).ranges_until),
            DETAIL = 'It restarted, failed over or was restored: every node reports its marks first.',
            HINT = 'The refill is tried again; cached ranges serve meanwhile.';
    END IF;
    PERFORM @extschema@.idgen_registry_check_regressions();
    IF s.max_id = 9223372036854775807 THEN
        RAISE EXCEPTION USING ERRCODE = '2200H', MESSAGE = format('global segment %L has run out of numbers', segment);
    END IF;
    first := s.max_id + 1;
    UPDATE @extschema@.idgen_registry_segment r
       SET max_id = CASE WHEN s.max_id > 9223372036854775807 - step_size THEN 9223372036854775807
                         ELSE s.max_id + step_size END,
           ranges = r.ranges + 1, updated_at = clock_timestamp(),
           taken_first = first, taker = incarnation_id,
           taker_key = @extschema@.idgen_registry_key(holder_secret)
     WHERE r.name = segment
    RETURNING r.* INTO s;
    RETURN QUERY SELECT first, s.max_id, s.step, NULL::text;
END
$$;

-- Ids for the web. snowflake_status() gains the column id_bits
-- (idgen.id_bits, the width of a whole id) after worker_id: its row type changes, which CREATE
-- OR REPLACE cannot do, so it is dropped and created again (an update fails with 2BP01 while a
-- user's view or function depends on it). sqids_encode / sqids_decode: short ids for URLs.
DROP FUNCTION snowflake_status();
CREATE FUNCTION "snowflake_status"() RETURNS TABLE (
	"worker_id" INT,  /* Option < i32 > */
	"id_bits" INT,  /* i32 */
	"time_bits" INT,  /* i32 */
	"worker_bits" INT,  /* i32 */
	"sequence_bits" INT,  /* i32 */
	"time_unit_ms" INT,  /* i32 */
	"epoch" timestamp with time zone,  /* TimestampWithTimeZone */
	"exhausted_at" timestamp with time zone,  /* Option < TimestampWithTimeZone > */
	"last_id" bigint,  /* Option < i64 > */
	"last_tick_at" timestamp with time zone,  /* Option < TimestampWithTimeZone > */
	"drift_ms" bigint,  /* i64 */
	"borrowed_ticks" bigint,  /* i64 */
	"waits" bigint,  /* i64 */
	"clock_failures" bigint,  /* i64 */
	"clock_regressions" bigint,  /* i64 */
	"reserved_tick" bigint,  /* Option < i64 > */
	"reserved_until" timestamp with time zone,  /* Option < TimestampWithTimeZone > */
	"reservation_writes" bigint  /* i64 */
)
STRICT VOLATILE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'snowflake_status_wrapper';
COMMENT ON FUNCTION snowflake_status() IS
  'This server''s Snowflake generator: worker id, layout, epoch, last id, drift and borrowed ticks.';
ALTER FUNCTION snowflake_status() ROWS 1;

CREATE OR REPLACE FUNCTION "sqids_encode"(
	"id" bigint, /* Option < i64 > */
	"alphabet" TEXT DEFAULT NULL, /* Option < & str > */
	"min_length" INT DEFAULT 0 /* Option < i32 > */
) RETURNS TEXT /* Option < String > */
IMMUTABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'sqids_encode_wrapper';
COMMENT ON FUNCTION sqids_encode(bigint, text, integer) IS
  'Short text of a non-negative bigint for URLs (sqids.org): alphabet NULL for the default, padded to min_length (0-255). Not encryption: anyone can decode it.';

CREATE OR REPLACE FUNCTION "sqids_decode"(
	"text" TEXT, /* Option < & str > */
	"alphabet" TEXT DEFAULT NULL, /* Option < & str > */
	"min_length" INT DEFAULT 0 /* Option < i32 > */
) RETURNS bigint /* Option < i64 > */
IMMUTABLE PARALLEL SAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'sqids_decode_wrapper';
COMMENT ON FUNCTION sqids_decode(text, text, integer) IS
  'The bigint whose sqid (as sqids_encode makes it, with the same alphabet and min_length) is the text; 22P02 for any other text.';
