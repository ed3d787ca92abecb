-- old server: segments the new server has already (created by a schema script)
SELECT format('SELECT segment_setval(%L, %s);', name, max_id)
  FROM idgen_segment WHERE scope = 'local' ORDER BY name;
-- old server: segments the new server does not have (segment_setval says 42704 for them)
SELECT format('SELECT segment_create(%L, start => %s, step => %s, cache => %s);',
              name, max_id + 1, step, cache)
  FROM idgen_segment WHERE scope = 'local' ORDER BY name;
