-- old server, as a superuser, in a session of another database (postgres): from now on no
-- session can start in app, a superuser's neither ...
ALTER DATABASE app WITH ALLOW_CONNECTIONS false;
-- ... and every session of app ends but {{session}}, the pid of the session of app that you
-- opened before and keep for the rest of the cut-over. Each pg_terminate_backend waits up to
-- 5 s for its session to be gone and then says t. The subscription's walsender is no client
-- backend: it goes on.
SELECT pid, usename, pg_terminate_backend(pid, 5000) FROM pg_stat_activity
 WHERE datname = 'app' AND pid <> {{session}} AND backend_type = 'client backend';
