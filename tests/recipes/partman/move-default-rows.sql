-- 1. Move the rows out of the default partition. This creates the partitions they belong in.
--    For large amounts, CALL partman.partition_data_proc('public.events') commits in batches.
SELECT partman.partition_data_id('public.events', p_batch_count => 100);
