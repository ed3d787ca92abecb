CREATE SCHEMA partman;
CREATE EXTENSION pg_partman SCHEMA partman;
