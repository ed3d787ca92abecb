-- Premake 3 months ahead from the clock, not from max(created_at): even an empty table.
UPDATE partman.part_config SET premake = 3, infinite_time_partitions = true
WHERE parent_table = 'public.orders';
