-- on each node: a worker id of its own, held
SELECT worker_id, state FROM idgen_registry_status;
