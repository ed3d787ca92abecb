-- new server: true, or wait for snowflake_timestamp(max(id)) to pass
SELECT snowflake_nextval() > (SELECT max(id) FROM orders);
