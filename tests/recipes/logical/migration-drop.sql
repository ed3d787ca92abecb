-- new server: stop replicating. The old database admits no connection now, so the
-- subscription lets go of its slot, which is dropped on the old server (below)
ALTER SUBSCRIPTION migration DISABLE;
ALTER SUBSCRIPTION migration SET (slot_name = NONE);
DROP SUBSCRIPTION migration;
