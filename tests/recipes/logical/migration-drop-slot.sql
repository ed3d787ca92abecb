-- old server, in the session of step 4, once the subscription is disabled: the slot, which
-- would keep WAL for ever (repeat while it says the slot is active: its walsender is exiting)
SELECT pg_drop_replication_slot('migration');
