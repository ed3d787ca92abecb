-- 'replicating' once the subscription runs
SELECT status FROM pglogical.show_subscription_status('{{subscription}}');
