-- On the registry, as a superuser, once for each member ({{name}}: its Patroni name): a role of
-- its own, since members that share a role can act for one another, and its node name bound
-- to that role before the member's first call. Its password goes in the member's ~/.pgpass.
CREATE ROLE "idgen_{{name}}" LOGIN;
GRANT idgen_registry TO "idgen_{{name}}";
ALTER ROLE "idgen_{{name}}" SET log_parameter_max_length = 0;
SELECT idgen_registry_bind_node('{{name}}', 'idgen_{{name}}');
