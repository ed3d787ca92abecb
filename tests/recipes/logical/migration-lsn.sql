-- old server, once the writes have stopped: its WAL position, e.g. 0/5A1B2C8
SELECT pg_current_wal_lsn()::text;
