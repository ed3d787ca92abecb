-- new server
CREATE SUBSCRIPTION migration
    CONNECTION '{{old_dsn}}' PUBLICATION migration;
