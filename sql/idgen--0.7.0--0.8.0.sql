-- idgen 0.7.0 -> 0.8.0: nothing a database owner planted is bound or run (README "Security").
-- Run only by ALTER EXTENSION idgen UPDATE: a fresh install runs the current definitions
-- (src/sql.rs), and the upgrade test checks that both end with the same objects.
--
-- A column default, a view and a CHECK of earlier releases were bound, when their script ran,
-- to the best-matching function or operator along the whole search_path: a database owner who
-- had planted public.nextval(text), public.to_timestamp(numeric), public./(bigint, numeric) or
-- public.num_nonnulls(integer, text, text) before CREATE EXTENSION or ALTER EXTENSION UPDATE
-- had them bound into idgen's objects and run by superusers. Each is created again here, every
-- function and operator schema-qualified with exact types, so an install that was captured
-- stops being captured. Bodies that name idgen's schema (the registry's SECURITY DEFINER
-- functions, segment_status(), idgen_adopt_column()) would run another schema's objects if
-- idgen's were renamed and another created under its name: the event trigger
-- idgen_schema_guard refuses the rename, and segment_status() and idgen_adopt_column() also
-- check the name before they use it.

\echo Use "ALTER EXTENSION idgen UPDATE TO '0.8.0'" to load this file. \quit

ALTER TABLE @extschema@.idgen_serial
    ALTER COLUMN id SET DEFAULT pg_catalog.nextval('@extschema@.idgen_serial_id_seq'::pg_catalog.regclass);

ALTER TABLE @extschema@.idgen_registry_regression
    DROP CONSTRAINT idgen_registry_regression_check,
    ADD CONSTRAINT idgen_registry_regression_check
        CHECK (pg_catalog.num_nonnulls(worker_id, segment, serial) = 1 AND (serial IS NULL) = (serial_period IS NULL));

-- Serial grants follow a role's identity, not its name: a role created under a dropped role's
-- name drew from the serials granted to the dropped one. Each named role gets its OID; a name
-- whose role is gone is dropped (that grant's role no longer exists).
ALTER TABLE @extschema@.idgen_serial ADD COLUMN usage_role_oids oid[] NOT NULL DEFAULT '{}';
UPDATE @extschema@.idgen_serial s
   SET (usage_roles, usage_role_oids) =
       (SELECT COALESCE(pg_catalog.array_agg(r.rolname::pg_catalog.text ORDER BY u.i), '{}'),
               COALESCE(pg_catalog.array_agg(r.oid ORDER BY u.i), '{}')
          FROM pg_catalog.unnest(s.usage_roles) WITH ORDINALITY AS u(n, i)
          JOIN pg_catalog.pg_roles r ON r.rolname OPERATOR(pg_catalog.=) u.n);
COMMENT ON TABLE @extschema@.idgen_serial IS
  'Serial number definitions: id, format, reset period, time zone, mode, scope, who may draw (usage_public; usage_roles with usage_role_oids: USAGE). Changed by serial_create/alter/drop/grant/revoke.';
-- OR REPLACE keeps the view's privileges and comment.
CREATE OR REPLACE VIEW @extschema@.idgen_serials WITH (security_barrier) AS
SELECT s.name, s.format, s.reset, s.time_zone, s.gapless, s.scope, s.description,
       p.period AS current_period,
       (SELECT c.value FROM @extschema@.idgen_serial_counter c
         WHERE c.serial = s.id AND c.period = p.period) AS current_mark,
       s.created_at, s.updated_at
  FROM @extschema@.idgen_serial s
 CROSS JOIN LATERAL (SELECT @extschema@.idgen_serial_period(s.reset, s.time_zone) AS period) p
 WHERE (SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname = current_user)
    OR s.usage_public
    OR EXISTS (SELECT FROM ROWS FROM (pg_catalog.unnest(s.usage_roles), pg_catalog.unnest(s.usage_role_oids)) g(n, o)
                 JOIN pg_catalog.pg_roles r ON r.oid = g.o AND r.rolname = g.n
                WHERE pg_catalog.pg_has_role(r.oid, 'USAGE'));


-- OR REPLACE keeps the view's privileges and comment.
CREATE OR REPLACE VIEW @extschema@.idgen_registry_workers AS
SELECT l.worker_id, l.node_name, l.incarnation, l.address, l.system_identifier, l.timeline,
       CASE WHEN l.released_tick IS NOT NULL THEN 'released'
            WHEN l.expires_at < pg_catalog.clock_timestamp() THEN 'expired'
            ELSE 'held' END AS state,
       l.fence_tick,
       pg_catalog.to_timestamp(
           (f.epoch_unix_ms + (l.fence_tick + 1) * f.time_unit_ms)::pg_catalog.float8
           OPERATOR(pg_catalog./) 1000::pg_catalog.float8) AS fenced_until,
       l.start_tick, l.released_tick, l.claimed_at, l.renewed_at, l.expires_at, l.lease_ms,
       l.renew_interval_ms, l.clock_offset_ms, l.renewals,
       f.epoch_unix_ms, f.worker_bits, f.sequence_bits, f.time_unit_ms
  FROM @extschema@.idgen_registry_lease l CROSS JOIN @extschema@.idgen_registry_fleet f;

-- The bodies of idgen's functions (the registry's SECURITY DEFINER functions among them) name
-- idgen's schema as it was called at install: renamed, with another schema created under the
-- old name, every such body would run the objects of whoever owns that schema (on PostgreSQL 15
-- and later, the owner of the database owns public) with the rights of the function's caller or
-- owner. The schema keeps its name: this event trigger refuses, at the end of any ALTER SCHEMA,
-- a name of idgen's schema other than the one installed (as ALTER EXTENSION ... SET SCHEMA is
-- refused for an extension that is not relocatable).
CREATE FUNCTION @extschema@.idgen_schema_guard()
RETURNS event_trigger
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $guard$
BEGIN
    -- By OID: the name as this script spelled it (quoted as the keywords of the server that
    -- ran it required) must still name idgen's schema.
    IF pg_catalog.to_regnamespace('@extschema@'::pg_catalog.text)::pg_catalog.oid IS DISTINCT FROM
       (SELECT e.extnamespace FROM pg_catalog.pg_extension e
         WHERE e.extname OPERATOR(pg_catalog.=) 'idgen'::pg_catalog.name) THEN
        RAISE EXCEPTION 'the schema of extension idgen cannot be renamed'
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = 'idgen''s functions name their schema; another schema under the old name would run in their place.',
                  HINT = 'Keep the name; to move idgen, DROP EXTENSION idgen and CREATE EXTENSION idgen SCHEMA ... (segments and serials are in its tables: pg_dump them first).';
    END IF;
END
$guard$;
COMMENT ON FUNCTION @extschema@.idgen_schema_guard() IS
  'Internal: the event trigger idgen_schema_guard, which refuses renaming idgen''s schema.';
CREATE EVENT TRIGGER idgen_schema_guard ON ddl_command_end
    WHEN TAG IN ('ALTER SCHEMA')
    EXECUTE FUNCTION @extschema@.idgen_schema_guard();
COMMENT ON EVENT TRIGGER idgen_schema_guard IS
  'Refuses renaming the schema of extension idgen (its functions name it).';

-- OR REPLACE keeps the function's privileges and comment.
CREATE OR REPLACE FUNCTION @extschema@.segment_status()
RETURNS TABLE (
    name text, max_id bigint, step integer, description text,
    cached_step bigint,
    current_first bigint, current_last bigint, current_used bigint,
    next_first bigint, next_last bigint,
    refills bigint, last_refill_at timestamptz, refill_pending boolean,
    cache integer
)
LANGUAGE plpgsql VOLATILE PARALLEL RESTRICTED
SET search_path = pg_catalog, pg_temp
AS $status$
BEGIN
    -- The query below names idgen's schema as it was called at install (as idgen_adopt_column;
    -- the event trigger idgen_schema_guard refuses renaming it).
    IF pg_catalog.to_regnamespace('@extschema@'::pg_catalog.text)::pg_catalog.oid IS DISTINCT FROM
       (SELECT e.extnamespace FROM pg_catalog.pg_extension e
         WHERE e.extname OPERATOR(pg_catalog.=) 'idgen'::pg_catalog.name) THEN
        RAISE EXCEPTION 'segment_status: the schema idgen was installed in was renamed'
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Rename it back: idgen is not relocatable.';
    END IF;
    RETURN QUERY
      SELECT s.name, s.max_id, s.step, s.description,
             c.cached_step, c.current_first, c.current_last, c.current_used,
             c.next_first, c.next_last, COALESCE(c.refills, 0::pg_catalog.int8), c.last_refill_at,
             COALESCE(c.refill_pending, false), s.cache
        FROM @extschema@.idgen_segment s
        LEFT JOIN @extschema@.segment_cache_status() c ON c.name OPERATOR(pg_catalog.=) s.name
       ORDER BY s.name;
END
$status$;

-- idgen_adopt_column of 0.7.0 with the same check first (an unchanged copy otherwise).
CREATE OR REPLACE FUNCTION @extschema@.idgen_adopt_column(
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
    -- The names below were bound to idgen's schema by name when this script ran: refuse if
    -- that name now means another schema (the schema renamed and another created under its
    -- old name, whose objects would run with the caller's rights).
    IF pg_catalog.to_regnamespace('@extschema@'::pg_catalog.text)::pg_catalog.oid IS DISTINCT FROM
       (SELECT e.extnamespace FROM pg_catalog.pg_extension e
         WHERE e.extname OPERATOR(pg_catalog.=) 'idgen'::pg_catalog.name) THEN
        RAISE EXCEPTION 'idgen_adopt_column: the schema idgen was installed in was renamed'
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Rename it back, or run ALTER EXTENSION idgen UPDATE after moving it back; idgen is not relocatable.';
    END IF;
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
       AND NOT has_function_privilege('@extschema@.segment_create(text, bigint, integer, text, text, integer)', 'EXECUTE') THEN
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
