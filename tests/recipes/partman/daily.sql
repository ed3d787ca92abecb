SET ROLE partman;   -- pg_partman_bgw.role: it maintains what it owns, and partitions belong
                    -- to whoever makes them (its schema, partman, is first in its
                    -- search_path: name the table's schema)
CREATE TABLE public.events (
    id   bigint NOT NULL DEFAULT snowflake_nextval(),
    note text,
    PRIMARY KEY (id)
) PARTITION BY RANGE (id);

SELECT partman.create_parent(
    p_parent_table    => 'public.events',
    p_control         => 'id',
    p_type            => 'native',
    p_interval        => (snowflake_compose(now() + interval '24 hours') - snowflake_compose(now()))::text,
    p_premake         => 4,
    p_start_partition => snowflake_compose(now())::text);
RESET ROLE;
