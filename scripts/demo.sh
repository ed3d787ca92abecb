#!/usr/bin/env bash
# The demo: build and install idgen, start a throwaway PostgreSQL 15 server with idgen
# preloaded, and fill a 1,000,000-row table whose primary key is DEFAULT snowflake_nextval().
# Leaves the server running and prints how to connect and how to stop it.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
idgen_setup
idgen_install_release

BIN=/usr/lib/postgresql/15/bin
DIR=$(mktemp -d /tmp/idgen-demo-XXXXXX)
chown postgres:postgres "$DIR"
chmod 755 "$DIR"
PORT=$(idgen_free_port)
WORKER_ID=7

idgen_log "initdb $DIR/data; start on 127.0.0.1:$PORT with idgen.worker_id = $WORKER_ID"
runuser -u postgres -- "$BIN/initdb" -D "$DIR/data" -U postgres -A trust -E UTF8 --locale=C >/dev/null
cat >> "$DIR/data/postgresql.conf" <<CONF

# idgen demo
listen_addresses = '127.0.0.1'
port = $PORT
unix_socket_directories = '$DIR'
shared_preload_libraries = 'idgen'
idgen.worker_id = $WORKER_ID
CONF
runuser -u postgres -- "$BIN/pg_ctl" -D "$DIR/data" -l "$DIR/server.log" -w start >/dev/null

idgen_log "CREATE EXTENSION idgen; 1,000,000 orders with DEFAULT snowflake_nextval()"
psql "host=127.0.0.1 port=$PORT user=postgres dbname=postgres" -X -v ON_ERROR_STOP=1 -f scripts/demo.sql

cat <<MSG

The server is still running, with its data in $DIR/data and its log in $DIR/server.log.
  Connect:  psql "host=127.0.0.1 port=$PORT user=postgres dbname=postgres"
  Stop:     runuser -u postgres -- $BIN/pg_ctl -D $DIR/data stop && rm -rf $DIR
MSG
