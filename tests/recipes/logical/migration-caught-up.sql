-- old server: repeat until true, with {{lsn}} the position above
SELECT confirmed_flush_lsn >= '{{lsn}}' FROM pg_replication_slots
 WHERE slot_name = 'migration';
