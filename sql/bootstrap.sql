-- Runs first in the extension script: the catalog of segments (DESIGN.md §2).
--
-- One row per segment: max_id is its high-water mark. Every number <= max_id may already have
-- been handed out; numbers above it never have. Only idgen's allocator background worker
-- writes this table, each advance in a committed transaction of its own, before any number of
-- the new range is used. pg_dump carries the rows (pg_extension_config_dump, in finalize.sql).
CREATE TABLE idgen_segment (
    name        text        PRIMARY KEY CHECK (octet_length(name) BETWEEN 1 AND 63),
    max_id      bigint      NOT NULL,
    step        integer     NOT NULL CHECK (step > 0),
    description text        CHECK (octet_length(description) <= 1024),
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);

-- pg_dump carries every row: the high-water marks survive dump and restore.
SELECT pg_catalog.pg_extension_config_dump('idgen_segment', '');
