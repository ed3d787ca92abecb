CREATE SCHEMA partman;
CREATE EXTENSION pg_partman SCHEMA partman;
-- pg_partman_bgw.role: maintenance needs no superuser for native partitioning (pg_partman 4.4
-- and later), only the ownership of the partitioned tables and these rights. LOGIN because
-- its background worker logs in as it; no password.
CREATE ROLE partman LOGIN;
GRANT ALL ON SCHEMA partman TO partman;
GRANT ALL ON ALL TABLES IN SCHEMA partman TO partman;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA partman TO partman;
GRANT EXECUTE ON ALL PROCEDURES IN SCHEMA partman TO partman;
GRANT CREATE, USAGE ON SCHEMA public TO partman;   -- the schema of the partitioned tables
GRANT TEMPORARY ON DATABASE postgres TO partman;   -- your database (pg_partman_bgw.dbname)
