-- on the leader, once it runs (the replicas get it by replication), each statement in a
-- transaction of its own: segment_create needs CREATE EXTENSION committed (55000 otherwise)
CREATE EXTENSION idgen;
SELECT segment_create('order_no');
