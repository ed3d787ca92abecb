-- 2. Premake from the clock: today's partition and the `premake` days after it,
--    whatever max(id) is. The ids are rounded down to pg_partman's multiples. The partitions
--    are made as pg_partman_bgw.role, which must own them. Only pg_catalog's names are left
--    unqualified: this must call no function or operator that a database owner put first in
--    the search_path.
SET ROLE partman;
SET search_path = pg_catalog, pg_temp;
SELECT partman.create_partition_id(c.parent_table,
         ARRAY(SELECT public.snowflake_compose(now() + make_interval(hours => 24 * k))
                      / c.partition_interval::bigint * c.partition_interval::bigint
               FROM generate_series(0, c.premake) AS k))
FROM partman.part_config c WHERE c.parent_table = 'public.events';
RESET search_path;
RESET ROLE;
