SET ROLE partman;   -- pg_partman_bgw.role: it maintains what it owns, and partitions belong
                    -- to whoever makes them (its schema, partman, is first in its
                    -- search_path: name the table's schema)
CREATE TABLE public.orders (
    id         bigint      NOT NULL DEFAULT snowflake_nextval(),
    created_at timestamptz NOT NULL DEFAULT snowflake_timestamp(snowflake_currval()),
    note       text,
    CONSTRAINT created_at_is_the_id_time CHECK (created_at = snowflake_timestamp(id)),
    PRIMARY KEY (id, created_at)
) PARTITION BY RANGE (created_at);

SELECT partman.create_parent(
    p_parent_table => 'public.orders',
    p_control      => 'created_at',
    p_type         => 'native',
    p_interval     => '1 month',
    p_premake      => 1);
RESET ROLE;
