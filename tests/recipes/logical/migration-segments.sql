-- old server, in the session of step 4: names of pg_catalog only, or qualified (a database
-- owner may put a table, function or operator of the same name first in search_path, and
-- this runs as a superuser); idgen is in schema public unless CREATE EXTENSION said otherwise
SET search_path = pg_catalog, pg_temp;
-- segments the new server has already (created by a schema script)
SELECT format('SELECT public.segment_setval(%L::text, %s::bigint);', name, max_id)
  FROM public.idgen_segment WHERE scope = 'local' ORDER BY name;
-- segments the new server does not have (segment_setval says 42704 for them)
SELECT format('SELECT public.segment_create(%L::text, start => %s::bigint, '
              'step => %s::integer, cache => %s::integer);', name, max_id + 1, step, cache)
  FROM public.idgen_segment WHERE scope = 'local' ORDER BY name;
