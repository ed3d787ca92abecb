SELECT partition_tablename,
       snowflake_timestamp(substring(partition_tablename FROM '_p(\d+)$')::bigint) AS day
FROM partman.show_partitions('public.events');
