-- idgen's install script: adopting an existing column (docs: guide/adopting-a-column.md).
--
-- idgen_adopt_column switches a bigint serial or identity column to Snowflake ids or to a
-- segment: it locks the table, finds the highest value in use, starts the generator above it,
-- changes the column's default and detaches (or drops) the old sequence, returning each step
-- with its undo. An invoker function: it checks that the caller owns the table and may create
-- segments (segment_create's privilege), and runs everything with the caller's rights.

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
COMMENT ON FUNCTION idgen_adopt_column(regclass, name, text, text, boolean, boolean) IS
  'Switches a bigint serial / identity column to snowflake_nextval() or segment_nextval(segment), in the caller''s READ COMMITTED transaction; an existing segment is moved above the column''s values. Returns each step and its undo. dry_run => true changes nothing.';
