SELECT pglogical.create_subscription(subscription_name := '{{subscription}}',
    provider_dsn := '{{provider_dsn}}',
    replication_sets := ARRAY['default'], synchronize_structure := false,
    synchronize_data := false, forward_origins := '{}');
