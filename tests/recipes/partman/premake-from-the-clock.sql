-- 2. Premake from the clock: today's partition and the `premake` days after it,
--    whatever max(id) is. The ids are rounded down to pg_partman's multiples. The partitions
--    are made as pg_partman_bgw.role, which must own them.
SET ROLE partman;
SELECT partman.create_partition_id(parent_table,
         ARRAY(SELECT snowflake_compose(now() + make_interval(hours => 24 * k))
                      / partition_interval::bigint * partition_interval::bigint
               FROM generate_series(0, premake) AS k))
FROM partman.part_config WHERE parent_table = 'public.events';
RESET ROLE;
