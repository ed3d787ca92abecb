-- new server: stop replicating (this drops the slot on the old server too)
DROP SUBSCRIPTION migration;
