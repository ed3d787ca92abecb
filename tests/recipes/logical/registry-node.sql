-- On the registry, as a superuser, once for each node ({{node}}: a, b): a role of its own,
-- since nodes that share a role can act for one another. Its password goes in the node's
-- ~/.pgpass.
CREATE ROLE idgen_node_{{node}} LOGIN;
GRANT idgen_registry TO idgen_node_{{node}};
ALTER ROLE idgen_node_{{node}} SET log_parameter_max_length = 0;
