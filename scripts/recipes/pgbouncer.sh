#!/usr/bin/env bash
# Recipe test: idgen behind pgbouncer (issue 31, point 3). Runs tests/cluster/tests/pgbouncer.rs:
# session pooling with `server_reset_query = DISCARD ALL` (the next client on the same backend
# gets 55000 from snowflake_currval(), segment_currval() and currval(), also after a client's own
# DISCARD SEQUENCES); transaction pooling with 8 clients (all ids and numbers distinct, RETURNING
# always right, currval across transactions answered by another client's backend); statement
# pooling; psycopg 3 through transaction pooling with prepare_threshold=None.
# Installs: Debian's pgbouncer (1.18 on Debian 12; the tests start their own pgbouncer on free
# ports, never the packaged service), python3-venv, and psycopg[binary] pinned from PyPI into a
# venv under /var/cache/idgen/recipes/pgbouncer/.
# Assumes idgen's release build is installed into Debian's PostgreSQL 15.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/setup.sh

TOPIC=pgbouncer
PSYCOPG_VERSION=3.3.9
VENV=/var/cache/idgen/recipes/$TOPIC/venv

skip() {
    echo "$TOPIC skipped: $*"
    exit 0
}

if [ "$(id -u)" != 0 ]; then
    skip "the recipe installs Debian packages and runs servers as postgres: run it as root"
fi

pkgs=(pgbouncer python3-venv)
# The package enables a pgbouncer service on port 6432; the tests never use it.
idgen_apt_install "${pkgs[@]}" || skip "apt-get install ${pkgs[*]} failed"
command -v pgbouncer >/dev/null || skip "no pgbouncer program after installing the package"
idgen_log "$(pgbouncer --version | head -1)"

if ! "$VENV/bin/python" -c "import psycopg, sys; sys.exit(psycopg.__version__ != '$PSYCOPG_VERSION')" 2>/dev/null; then
    idgen_log "psycopg[binary]==$PSYCOPG_VERSION into $VENV"
    rm -rf "$VENV"
    python3 -m venv "$VENV" || skip "python3 -m venv $VENV failed"
    "$VENV/bin/pip" install -q --disable-pip-version-check "psycopg[binary]==$PSYCOPG_VERSION" \
        || skip "pip install psycopg[binary]==$PSYCOPG_VERSION failed (PyPI unreachable?)"
fi

export IDGEN_PGBOUNCER_PYTHON="$VENV/bin/python"
cd tests/cluster && cargo test --release --test "$TOPIC" -- --ignored --test-threads=1 --nocapture
