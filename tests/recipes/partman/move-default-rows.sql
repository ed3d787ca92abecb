-- 1. Move the rows out of the default partition. This creates the partitions they belong in,
--    as pg_partman_bgw.role, which must own them. For large amounts,
--    CALL partman.partition_data_proc('public.events') commits in batches.
SET ROLE partman;
SELECT partman.partition_data_id('public.events', p_batch_count => 100);
RESET ROLE;
