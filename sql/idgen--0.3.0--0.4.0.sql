-- idgen 0.3.0 -> 0.4.0: the text form of a Snowflake id, adopting existing serial / identity
-- columns (README "Adopting an existing column"), and the registry's side of a give-back.
-- Run only by ALTER EXTENSION idgen UPDATE: a fresh install runs the current definitions
-- (src/sql.rs), and the upgrade test checks that both end with the same objects.

\echo Use "ALTER EXTENSION idgen UPDATE TO '0.4.0'" to load this file. \quit

-- The text form of a Snowflake id (a serial-number-like text).
CREATE OR REPLACE FUNCTION "snowflake_format"(
	"id" bigint,
	"prefix" TEXT DEFAULT ''
) RETURNS TEXT
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c
AS 'MODULE_PATHNAME', 'snowflake_format_wrapper';
CREATE OR REPLACE FUNCTION "snowflake_parse"(
	"text" TEXT
) RETURNS bigint
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c
AS 'MODULE_PATHNAME', 'snowflake_parse_wrapper';
COMMENT ON FUNCTION snowflake_format(bigint, text) IS
  'Text form of a Snowflake id: prefix + UTC yyyyMMddHHmmssSSS of its tick + worker id + sequence, fixed width; sorts as the ids do.';
COMMENT ON FUNCTION snowflake_parse(text) IS
  'The Snowflake id of a text made by snowflake_format (any prefix).';

-- Switches a bigint column fed by a sequence (serial, bigserial, an identity column, or any
-- DEFAULT nextval(...)) to an idgen generator, in the caller's transaction, as pgEdge
-- snowflake's convert_sequence_to_snowflake does. Returns one row per step: what it does (or,
-- with dry_run, would do) and the statement that undoes it.
--
-- Order: every check first (nothing is changed by a refused call); then the table is locked
-- ACCESS EXCLUSIVE (concurrent inserts wait for the caller's COMMIT, then use the new default;
-- none fails); then the floor is read under the lock: the larger of max(column) and the
-- sequence's last value (a value nextval handed out but not yet inserted is covered). A segment
-- is created to start above the floor, or moved forward to it (segment_setval); Snowflake ids
-- need nothing, but the floor must lie below the ids of a clock a day behind. Then the identity
-- is dropped, or the sequence detached (and dropped with drop_sequence), and the default set.
--
-- The segment step is not undone by ROLLBACK (segments are changed by the allocator in
-- transactions of its own, like nextval); a rerun finds the segment and reuses it.
--
-- Errors: 22004 a NULL argument; 22023 an unknown generator, or a segment name with
-- generator snowflake; 42703 no such column; 42809 not a table, a partition (adopt its
-- partitioned table), or a generated column; 42804 not bigint (integer: ALTER COLUMN ... TYPE
-- bigint first); 55000 existing values at or above the Snowflake ids of a clock a day behind;
-- 42501 the caller does not own the table, or may not create segments (idgen_admin).
CREATE FUNCTION idgen_adopt_column(
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
        segment := coalesce(segment, rel.relname || '_' || column_name);
        IF octet_length(segment) NOT BETWEEN 1 AND 63 THEN
            RAISE EXCEPTION 'idgen_adopt_column: segment name must be 1 to 63 bytes'
                USING ERRCODE = 'invalid_parameter_value';
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

    EXECUTE format('SELECT max(%I) FROM %s', column_name, qualified) INTO has_max;
    floor_id := coalesce(has_max, 0);
    IF seq IS NOT NULL THEN
        EXECUTE format('SELECT last_value FROM %s', seq) INTO seq_last;
        floor_id := greatest(floor_id, seq_last);
    END IF;

    IF generator = 'snowflake' THEN
        IF floor_id >= @extschema@.snowflake_compose(clock_timestamp() - interval '1 day') THEN
            RAISE EXCEPTION 'idgen_adopt_column: % already holds values up to %, which Snowflake ids may reach',
                qualified || '.' || quote_ident(column_name), floor_id
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      HINT = 'Use generator => ''segment'', which starts above them.';
        END IF;
        n := n + 1;
        RETURN QUERY SELECT n, format('Snowflake ids are above every existing value (up to %s)', floor_id),
                            NULL::text, NULL::text;
    ELSE
        SELECT s.max_id INTO seg_mark FROM @extschema@.idgen_segment s WHERE s.name = segment;
        n := n + 1;
        IF NOT FOUND THEN
            IF NOT dry_run THEN
                PERFORM @extschema@.segment_create(segment, start => floor_id + 1);
            END IF;
            RETURN QUERY SELECT n, format('create segment %s starting above %s', quote_literal(segment), floor_id),
                                format('SELECT @extschema@.segment_create(%L, start => %s)', segment, floor_id + 1),
                                format('SELECT @extschema@.segment_drop(%L)', segment);
        ELSIF seg_mark < floor_id THEN
            IF NOT dry_run THEN
                PERFORM @extschema@.segment_setval(segment, floor_id);
            END IF;
            RETURN QUERY SELECT n, format('move segment %s forward above %s', quote_literal(segment), floor_id),
                                format('SELECT @extschema@.segment_setval(%L, %s)', segment, floor_id),
                                NULL::text;
        ELSE
            RETURN QUERY SELECT n, format('segment %s is above every existing value already', quote_literal(segment)),
                                NULL::text, NULL::text;
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
  'Switches a bigint serial / identity column to snowflake_nextval() or segment_nextval(segment), in the caller''s transaction; returns each step and its undo. dry_run => true changes nothing.';

-- The registry's side of a give-back (README "Give-back"): a node whose cached range of a
-- global segment leaves its cache (a clean shutdown, idleness, eviction) lowers the mark to the
-- last number it handed out, if the mark is still the one its last range set: no node took a
-- range since. True if it did. A lost answer is harmless: the node has stopped using the range.
CREATE FUNCTION idgen_registry_segment_give_back(segment text, expected_mark bigint, new_mark bigint)
RETURNS boolean
LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
  WITH given AS (
    UPDATE @extschema@.idgen_registry_segment r
       SET max_id = new_mark, updated_at = clock_timestamp()
     WHERE r.name = segment AND r.max_id = expected_mark AND new_mark < expected_mark
    RETURNING 1)
  SELECT EXISTS (SELECT FROM given)
$$;
COMMENT ON FUNCTION idgen_registry_segment_give_back(text, bigint, bigint) IS
  'Registry: lowers a global segment''s mark to new_mark if it is still expected_mark (a node gives back its unused numbers).';
REVOKE EXECUTE ON FUNCTION idgen_registry_segment_give_back(text, bigint, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION idgen_registry_segment_give_back(text, bigint, bigint) TO idgen_registry;

-- Business serial numbers (README "Serial numbers"): text numbers such as
-- INV-20261122-000123 from a format, with a counter that restarts every day, month or year in
-- the serial's time zone. Fast mode: the counter of each period is a segment of this
-- database ('serial:<name>:<period>', autonomous like nextval: gaps on rollback, never a
-- duplicate). Gapless mode: the counter is a row of idgen_serial_counter, incremented in the
-- caller's transaction (rolled back with it: no gaps; writers of one serial wait for each
-- other's COMMIT).

-- The format's parser and the rendering, in Rust (src/upgrade.rs keeps them for this SQL).
CREATE OR REPLACE FUNCTION "idgen_serial_check"(
	"format" TEXT,
	"reset" TEXT
) RETURNS void
IMMUTABLE STRICT PARALLEL SAFE
LANGUAGE c
AS 'MODULE_PATHNAME', 'idgen_serial_check_wrapper';
CREATE OR REPLACE FUNCTION "idgen_serial_render"(
	"name" TEXT,
	"format" TEXT,
	"at" timestamp,
	"seq" bigint
) RETURNS TEXT
STABLE STRICT PARALLEL SAFE
LANGUAGE c
AS 'MODULE_PATHNAME', 'idgen_serial_render_wrapper';

CREATE TABLE idgen_serial (
    name        text        PRIMARY KEY CHECK (octet_length(name) BETWEEN 1 AND 40),
    format      text        NOT NULL CHECK (octet_length(format) BETWEEN 1 AND 256),
    reset       text        NOT NULL CHECK (reset IN ('day', 'month', 'year', 'never')),
    time_zone   text        NOT NULL,
    gapless     boolean     NOT NULL,
    description text        CHECK (octet_length(description) <= 1024),
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
-- The counters of gapless serials, one row per period ('' for reset never).
CREATE TABLE idgen_serial_counter (
    serial text   NOT NULL REFERENCES idgen_serial (name) ON DELETE CASCADE,
    period text   NOT NULL,
    value  bigint NOT NULL CHECK (value > 0),
    PRIMARY KEY (serial, period)
);
SELECT pg_catalog.pg_extension_config_dump('idgen_serial', '');
SELECT pg_catalog.pg_extension_config_dump('idgen_serial_counter', '');
REVOKE ALL ON TABLE idgen_serial, idgen_serial_counter FROM PUBLIC;
GRANT SELECT ON TABLE idgen_serial, idgen_serial_counter TO PUBLIC;
COMMENT ON TABLE idgen_serial IS
  'Serial number definitions: format, reset period, time zone, mode. Changed by serial_create/alter/drop.';
COMMENT ON TABLE idgen_serial_counter IS
  'Counters of gapless serials, per period: the last number handed out (committed).';

-- Creates a serial. Errors: 22004 a NULL argument; 22023 an invalid format (naming the token),
-- a format that does not show the period its counter restarts in, an unknown reset or time
-- zone, a name of 0 or more than 40 bytes; 42710 the serial exists. Transactional.
CREATE FUNCTION serial_create(
    name text, format text, reset text DEFAULT 'never', time_zone text DEFAULT 'UTC',
    gapless boolean DEFAULT false, description text DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
BEGIN
    IF name IS NULL OR format IS NULL OR reset IS NULL OR time_zone IS NULL OR gapless IS NULL THEN
        RAISE EXCEPTION 'serial_create: % must not be null',
            CASE WHEN name IS NULL THEN 'name' WHEN format IS NULL THEN 'format'
                 WHEN reset IS NULL THEN 'reset' WHEN time_zone IS NULL THEN 'time_zone'
                 ELSE 'gapless' END
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF octet_length(name) NOT BETWEEN 1 AND 40 THEN
        RAISE EXCEPTION 'serial_create: serial name must be 1 to 40 bytes, not %', octet_length(name)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM @extschema@.idgen_serial_check(format, reset);
    PERFORM now() AT TIME ZONE time_zone; -- 22023 'time zone "..." not recognized'
    IF EXISTS (SELECT FROM @extschema@.idgen_serial s WHERE s.name = serial_create.name) THEN
        RAISE EXCEPTION 'serial_create: serial % already exists', quote_literal(name)
            USING ERRCODE = 'duplicate_object';
    END IF;
    INSERT INTO @extschema@.idgen_serial (name, format, reset, time_zone, gapless, description)
    VALUES (name, format, reset, time_zone, gapless, description);
END
$fn$;

-- Changes a serial's format (checked as at creation: widen {seq:06} to {seq:07}, say) and
-- description (NULL keeps either; '' clears the description). The reset, time zone and mode
-- stay: changing them would restart or repeat counters. Errors: 42704 no such serial, 22023 an
-- invalid format.
CREATE FUNCTION serial_alter(name text, format text DEFAULT NULL, description text DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    s @extschema@.idgen_serial;
BEGIN
    IF name IS NULL THEN
        RAISE EXCEPTION 'serial_alter: name must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    SELECT * INTO s FROM @extschema@.idgen_serial x WHERE x.name = serial_alter.name FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'serial_alter: serial % does not exist', quote_literal(left(name, 40))
            USING ERRCODE = 'undefined_object';
    END IF;
    IF format IS NOT NULL THEN
        PERFORM @extschema@.idgen_serial_check(format, s.reset);
    END IF;
    UPDATE @extschema@.idgen_serial x
       SET format = coalesce(serial_alter.format, x.format),
           description = CASE WHEN serial_alter.description IS NULL THEN x.description
                              ELSE nullif(serial_alter.description, '') END,
           updated_at = now()
     WHERE x.name = serial_alter.name;
END
$fn$;

-- Drops a serial, its gapless counters and its fast-mode counter segments. Errors: 42704 no
-- such serial. The segments go at once (not undone by ROLLBACK); the rest is transactional.
CREATE FUNCTION serial_drop(name text)
RETURNS void
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    seg text;
BEGIN
    IF name IS NULL THEN
        RAISE EXCEPTION 'serial_drop: name must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    DELETE FROM @extschema@.idgen_serial x WHERE x.name = serial_drop.name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'serial_drop: serial % does not exist', quote_literal(left(name, 40))
            USING ERRCODE = 'undefined_object';
    END IF;
    FOR seg IN SELECT g.name FROM @extschema@.idgen_segment g
                WHERE left(g.name, octet_length('serial:' || serial_drop.name || ':'))
                      = 'serial:' || serial_drop.name || ':' LOOP
        PERFORM @extschema@.segment_drop(seg);
    END LOOP;
END
$fn$;

-- The next number of a serial, as text. The period is decided by the local time of the draw
-- (clock_timestamp()) in the serial's time zone: a draw at 23:59:59.999 belongs to that day,
-- one at 00:00:00.000 to the next. Fast mode: one counter segment per period, created at the
-- period's first draw (the one before it is kept for draws straddling the boundary; older ones
-- are dropped); gapless mode: the period's row of idgen_serial_counter, incremented in the
-- caller's transaction. Errors: 22004 NULL; 42704 no such serial; 22003 the counter outgrew
-- its {seq:0N} in this period (never a truncated or repeated number); 25006 in a read-only
-- transaction or on a standby.
CREATE FUNCTION serial_nextval(name text)
RETURNS text
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
    s      @extschema@.idgen_serial;
    local  timestamp;
    period text;
    seg    text;
    seq    bigint;
BEGIN
    IF name IS NULL THEN
        RAISE EXCEPTION 'serial_nextval: name must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    SELECT * INTO s FROM @extschema@.idgen_serial x WHERE x.name = serial_nextval.name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'serial_nextval: serial % does not exist', quote_literal(left(name, 40))
            USING ERRCODE = 'undefined_object',
                  HINT = 'Create it with serial_create(name, format, reset => ...).';
    END IF;
    local := clock_timestamp() AT TIME ZONE s.time_zone;
    period := CASE s.reset WHEN 'day' THEN to_char(local, 'YYYYMMDD')
                           WHEN 'month' THEN to_char(local, 'YYYYMM')
                           WHEN 'year' THEN to_char(local, 'YYYY') ELSE '' END;
    IF s.gapless THEN
        INSERT INTO @extschema@.idgen_serial_counter AS c (serial, period, value)
        VALUES (s.name, period, 1)
        ON CONFLICT ON CONSTRAINT idgen_serial_counter_pkey DO UPDATE SET value = c.value + 1
        RETURNING c.value INTO seq;
    ELSE
        seg := 'serial:' || s.name || ':' || period;
        IF NOT EXISTS (SELECT FROM @extschema@.idgen_segment g WHERE g.name = seg) THEN
            BEGIN
                PERFORM @extschema@.segment_create(seg, start => 1, step => 100,
                    description => format('counter of serial %L, period %L', s.name, period));
            EXCEPTION WHEN duplicate_object THEN
                NULL; -- another session created it first
            END;
            -- Keep the newest earlier period (draws straddling the boundary), drop the rest.
            PERFORM @extschema@.segment_drop(old.name)
               FROM (SELECT g.name FROM @extschema@.idgen_segment g
                      WHERE left(g.name, octet_length('serial:' || s.name || ':')) = 'serial:' || s.name || ':'
                        AND g.name < seg
                      ORDER BY g.name DESC OFFSET 1) old;
        END IF;
        seq := @extschema@.segment_nextval(seg);
    END IF;
    RETURN @extschema@.idgen_serial_render(s.name, s.format, local, seq);
END
$fn$;

CREATE VIEW idgen_serials AS
SELECT s.name, s.format, s.reset, s.time_zone, s.gapless, s.description,
       CASE s.reset WHEN 'day' THEN to_char(clock_timestamp() AT TIME ZONE s.time_zone, 'YYYYMMDD')
                    WHEN 'month' THEN to_char(clock_timestamp() AT TIME ZONE s.time_zone, 'YYYYMM')
                    WHEN 'year' THEN to_char(clock_timestamp() AT TIME ZONE s.time_zone, 'YYYY')
                    ELSE '' END AS current_period,
       CASE WHEN s.gapless THEN
                (SELECT c.value FROM idgen_serial_counter c
                  WHERE c.serial = s.name AND c.period = CASE s.reset
                        WHEN 'day' THEN to_char(clock_timestamp() AT TIME ZONE s.time_zone, 'YYYYMMDD')
                        WHEN 'month' THEN to_char(clock_timestamp() AT TIME ZONE s.time_zone, 'YYYYMM')
                        WHEN 'year' THEN to_char(clock_timestamp() AT TIME ZONE s.time_zone, 'YYYY')
                        ELSE '' END)
            ELSE
                (SELECT g.max_id FROM idgen_segment g
                  WHERE g.name = 'serial:' || s.name || ':' || CASE s.reset
                        WHEN 'day' THEN to_char(clock_timestamp() AT TIME ZONE s.time_zone, 'YYYYMMDD')
                        WHEN 'month' THEN to_char(clock_timestamp() AT TIME ZONE s.time_zone, 'YYYYMM')
                        WHEN 'year' THEN to_char(clock_timestamp() AT TIME ZONE s.time_zone, 'YYYY')
                        ELSE '' END)
       END AS current_mark,
       s.created_at, s.updated_at
  FROM idgen_serial s;
GRANT SELECT ON idgen_serials TO PUBLIC;
COMMENT ON VIEW idgen_serials IS
  'Each serial with its current period and, per mode, the last number committed (gapless) or the high-water mark of the period''s counter segment (fast).';

REVOKE EXECUTE ON FUNCTION serial_create(text, text, text, text, boolean, text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION serial_alter(text, text, text) FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION serial_drop(text) FROM PUBLIC;
DO $$
BEGIN
  IF EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'idgen_admin') THEN
    GRANT EXECUTE ON FUNCTION serial_create(text, text, text, text, boolean, text) TO idgen_admin;
    GRANT EXECUTE ON FUNCTION serial_alter(text, text, text) TO idgen_admin;
    GRANT EXECUTE ON FUNCTION serial_drop(text) TO idgen_admin;
  END IF;
END
$$;
COMMENT ON FUNCTION serial_create(text, text, text, text, boolean, text) IS
  'Creates a serial number: format like ''INV-{YYYY}{MM}{DD}-{seq:06}'', counter reset every day, month, year or never in time_zone; gapless => true counts in the caller''s transaction.';
COMMENT ON FUNCTION serial_alter(text, text, text) IS
  'Changes a serial''s format (e.g. a wider {seq:0N}) and description.';
COMMENT ON FUNCTION serial_drop(text) IS
  'Drops a serial, its counters and its counter segments.';
COMMENT ON FUNCTION serial_nextval(text) IS
  'Next number of a serial, as text, in the period of the draw''s local time.';
COMMENT ON FUNCTION idgen_serial_check(text, text) IS
  'Internal: checks a serial format for a reset period (22023 naming the token).';
COMMENT ON FUNCTION idgen_serial_render(text, text, timestamp, bigint) IS
  'Internal: the text of a serial''s counter value at a local time.';
