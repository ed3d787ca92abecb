-- one statement: the id and the number come back with the row
INSERT INTO orders (client) VALUES ($1) RETURNING id, no;

-- or within one transaction (one backend from BEGIN to COMMIT)
BEGIN;
INSERT INTO orders (client) VALUES (42);
SELECT snowflake_currval(), segment_currval('order_no');
COMMIT;
