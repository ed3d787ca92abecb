-- idgen's install script, part 1 of 8 (src/sql.rs orders the parts): the roles.
--
-- Runs first, before pgrx's CREATE FUNCTIONs. Roles belong to the cluster, not the database:
-- the first database's CREATE EXTENSION creates them, every other database reuses them, and
-- DROP EXTENSION leaves them (without their grants). A role of either name that someone else
-- made first is refused (docs: reference/functions.md, "Privileges").
--
-- idgen_admin: members create, alter, drop and setval segments and serials.
-- idgen_registry: members (the nodes' role) lease worker ids and ranges from this database
-- when it serves as the registry.

DO $$
BEGIN
  -- A role of that name made by someone else (a CREATEROLE holder, before the first install)
  -- would hand what idgen grants it to whoever controls it: refuse one that can log in, has
  -- any attribute, a password, or an administrator who is not a superuser. Members a superuser
  -- granted (GRANT idgen_admin TO ...) are how it is meant to be used, and stay.
  IF EXISTS (SELECT FROM pg_catalog.pg_authid a
              WHERE a.rolname OPERATOR(pg_catalog.=) 'idgen_admin'::pg_catalog.name
                AND (a.rolsuper OR a.rolcreaterole OR a.rolcreatedb OR a.rolcanlogin
                     OR a.rolreplication OR a.rolbypassrls OR a.rolpassword IS NOT NULL
                     OR a.rolvaliduntil IS NOT NULL
                     OR EXISTS (SELECT FROM pg_catalog.pg_auth_members m
                                  JOIN pg_catalog.pg_authid adm
                                    ON adm.oid OPERATOR(pg_catalog.=) m.member
                                 WHERE m.roleid OPERATOR(pg_catalog.=) a.oid
                                   AND m.admin_option AND NOT adm.rolsuper))) THEN
    RAISE EXCEPTION 'role idgen_admin exists with rights idgen does not give it'
      USING ERRCODE = 'object_not_in_prerequisite_state',
            DETAIL = 'It can log in, has attributes or a password, or a role that is not a superuser administers it: idgen''s grants to it would go to whoever made it.',
            HINT = 'Drop the role (or make it NOLOGIN with no attributes, no password and no ADMIN OPTION held by other roles), then create the extension again.';
  END IF;
  IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'idgen_admin') THEN
    CREATE ROLE idgen_admin NOLOGIN;
    COMMENT ON ROLE idgen_admin IS
      'Members may create, alter, drop and setval idgen segments (GRANT idgen_admin TO ...).';
  END IF;
END
$$;

DO $$
BEGIN
  -- A role of that name made by someone else (a CREATEROLE holder, before the first install)
  -- would hand what idgen grants it to whoever controls it: refuse one that can log in, has
  -- any attribute, a password, or an administrator who is not a superuser. Members a superuser
  -- granted (GRANT idgen_registry TO ...) are how it is meant to be used, and stay.
  IF EXISTS (SELECT FROM pg_catalog.pg_authid a
              WHERE a.rolname OPERATOR(pg_catalog.=) 'idgen_registry'::pg_catalog.name
                AND (a.rolsuper OR a.rolcreaterole OR a.rolcreatedb OR a.rolcanlogin
                     OR a.rolreplication OR a.rolbypassrls OR a.rolpassword IS NOT NULL
                     OR a.rolvaliduntil IS NOT NULL
                     OR EXISTS (SELECT FROM pg_catalog.pg_auth_members m
                                  JOIN pg_catalog.pg_authid adm
                                    ON adm.oid OPERATOR(pg_catalog.=) m.member
                                 WHERE m.roleid OPERATOR(pg_catalog.=) a.oid
                                   AND m.admin_option AND NOT adm.rolsuper))) THEN
    RAISE EXCEPTION 'role idgen_registry exists with rights idgen does not give it'
      USING ERRCODE = 'object_not_in_prerequisite_state',
            DETAIL = 'It can log in, has attributes or a password, or a role that is not a superuser administers it: idgen''s grants to it would go to whoever made it.',
            HINT = 'Drop the role (or make it NOLOGIN with no attributes, no password and no ADMIN OPTION held by other roles), then create the extension again.';
  END IF;
  IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'idgen_registry') THEN
    CREATE ROLE idgen_registry NOLOGIN;
    COMMENT ON ROLE idgen_registry IS
      'Members may lease worker ids from this registry (GRANT idgen_registry TO <the nodes'' role>).';
  END IF;
END
$$;
