-- idgen's install script, last part (src/sql.rs orders the parts): what guards the rest.

-- The bodies of idgen's functions (the registry's SECURITY DEFINER functions among them) name
-- idgen's schema as it was called at install: renamed, with another schema created under the
-- old name, every such body would run the objects of whoever owns that schema (on PostgreSQL 15
-- and later, the owner of the database owns public) with the rights of the function's caller or
-- owner. The schema keeps its name: this event trigger refuses, at the end of any ALTER SCHEMA,
-- a name of idgen's schema other than the one installed (as ALTER EXTENSION ... SET SCHEMA is
-- refused for an extension that is not relocatable).
CREATE FUNCTION idgen_schema_guard()
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
COMMENT ON FUNCTION idgen_schema_guard() IS
  'Internal: the event trigger idgen_schema_guard, which refuses renaming idgen''s schema.';
CREATE EVENT TRIGGER idgen_schema_guard ON ddl_command_end
    WHEN TAG IN ('ALTER SCHEMA')
    EXECUTE FUNCTION @extschema@.idgen_schema_guard();
COMMENT ON EVENT TRIGGER idgen_schema_guard IS
  'Refuses renaming the schema of extension idgen (its functions name it).';
