-- The demo's SQL: a table keyed by snowflake_nextval(), with order numbers from the segment
-- 'order_no', 1,000,000 rows in one statement.
\set QUIET on
CREATE EXTENSION idgen;
\o /dev/null
SELECT segment_create('order_no', start => 100000, step => 1000,
                      description => 'customer-facing order numbers');
\o
CREATE TABLE orders (
    id         bigint PRIMARY KEY DEFAULT snowflake_nextval(),
    order_no   bigint UNIQUE NOT NULL DEFAULT segment_nextval('order_no'),
    customer   text          NOT NULL,
    amount     numeric(10,2) NOT NULL,
    created_at timestamptz   NOT NULL DEFAULT now()
);
\set QUIET off
\echo 'INSERT INTO orders (customer, amount) SELECT ... FROM generate_series(1, 1000000)'
\timing on
INSERT INTO orders (customer, amount)
SELECT 'customer-' || (g % 5000), round((g % 10000) / 100.0, 2)
FROM generate_series(1, 1000000) AS g;
\timing off

\echo 'Counts: every row got an id and an order number, and no two got the same one'
SELECT count(*) AS rows, count(DISTINCT id) AS distinct_ids, min(id) AS min_id, max(id) AS max_id,
       count(DISTINCT order_no) AS distinct_order_nos, min(order_no) AS min_order_no,
       max(order_no) AS max_order_no
FROM orders;

\echo 'The first and last ids, decoded: time of the tick, worker id, sequence within the tick'
SELECT o.id, d.ts, d.worker_id, d.sequence
FROM (
    (SELECT id FROM orders ORDER BY id LIMIT 3)
    UNION ALL
    (SELECT id FROM orders ORDER BY id DESC LIMIT 2)
) o, snowflake_decode(o.id) d
ORDER BY o.id;

\echo 'Ids are time-ordered: the rows of one second, by range scan on the primary key'
SELECT count(*) AS rows_in_first_second
FROM orders
WHERE id >= snowflake_compose(snowflake_timestamp((SELECT min(id) FROM orders)))
  AND id <  snowflake_compose(snowflake_timestamp((SELECT min(id) FROM orders)) + interval '1 second');

\echo 'The generator'
\x on
SELECT * FROM snowflake_status();
\x off

\echo 'The segment: high-water mark, the dynamic step (grown from 1000), the cached ranges, and how'
\echo 'few table writes (refills) 1,000,000 order numbers took'
\x on
SELECT * FROM segment_status();
\x off
\echo 'The allocator background worker that wrote them'
SELECT pid, backend_type, application_name, datname FROM pg_stat_activity
WHERE backend_type = 'idgen allocator';
