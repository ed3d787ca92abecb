-- new server: true once every table is copied (srsubstate 'r')
SELECT coalesce(bool_and(srsubstate = 'r'), false) FROM pg_subscription_rel;
