CREATE EXTENSION idgen;
CREATE EXTENSION pglogical;
SELECT pglogical.create_node(node_name := '{{node}}', dsn := '{{dsn}}');
SELECT segment_create('orders_no', scope => 'global');   -- every node declares the same segment
CREATE TABLE orders (
    id   bigint PRIMARY KEY DEFAULT snowflake_nextval(),
    no   bigint UNIQUE DEFAULT segment_nextval('orders_no'),
    node text NOT NULL,
    at   timestamptz NOT NULL DEFAULT clock_timestamp());
SELECT pglogical.replication_set_add_table('default', 'orders');
