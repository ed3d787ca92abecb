#!/usr/bin/env bash
# Clients and ORMs (README "Clients and ORMs", issue 31 point 6): runs tests/cluster/tests/clients.rs,
# whose tests start servers with idgen and run the recipes' client programs (tests/recipes/clients/)
# against them: Django 5.2 and 6.1 (migrations, db_default ids, bulk_create), SQLAlchemy 2.1 with
# psycopg 3 (server_default ids and segment numbers through RETURNING), node-postgres (int8 as
# strings, BigInt and JSON, the parseInt trap, JSON built by the server).
# Installs, idempotently, outside the clone:
#   - Debian: python3-venv (for Debian's Python 3.11), nodejs and npm when no `node` is installed
#   - /var/cache/idgen/recipes/clients/django-5.2: venv of Debian's Python 3.11, Django 5.2.19, psycopg 3.3.9
#   - /var/cache/idgen/recipes/clients/django-6.1: venv of the newest Python >= 3.12 on the machine
#     (Django 6 needs it; Debian 12 has 3.11; the machine's pyenv has 3.12 and 3.13), Django 6.1.3,
#     psycopg 3.3.9; without such a Python the Django 6.1 test is skipped, saying so
#   - /var/cache/idgen/recipes/clients/sqlalchemy: venv of Python 3.11, SQLAlchemy 2.1.9, psycopg 3.3.9
#   - /var/cache/idgen/recipes/clients/node: pg 8.23.1 from npm
# Assumes idgen's release build is installed into Debian's PostgreSQL 15.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/setup.sh

CLIENTS=/var/cache/idgen/recipes/clients
DJANGO5=(Django==5.2.19 asgiref==3.13.0 sqlparse==0.6.1 psycopg==3.3.9 psycopg-binary==3.3.9 typing_extensions==4.16.0)
DJANGO6=(Django==6.1.3 asgiref==3.13.0 sqlparse==0.6.1 psycopg==3.3.9 psycopg-binary==3.3.9 typing_extensions==4.16.0)
SQLALCHEMY=(SQLAlchemy==2.1.9 psycopg==3.3.9 psycopg-binary==3.3.9 typing_extensions==4.16.0)
PG_NPM=8.23.1
mkdir -p "$CLIENTS"


# venv DIR PYTHON PACKAGES...: a virtual environment of PYTHON holding exactly the pinned
# PACKAGES; kept while its record of them matches. Prints why on failure.
venv() {
    local dir=$1 py=$2
    shift 2
    local want="$("$py" -c 'import sys; print(sys.version.split()[0])') $*"
    if [ -x "$dir/bin/python" ] && [ "$(cat "$dir/.idgen-packages" 2>/dev/null)" = "$want" ]; then
        return 0
    fi
    idgen_log "venv $dir ($want)"
    rm -rf "$dir"
    "$py" -m venv "$dir" || { echo "python -m venv failed with $py"; return 1; }
    "$dir/bin/pip" install -q --disable-pip-version-check "$@" || { echo "pip install $* failed"; return 1; }
    echo "$want" >"$dir/.idgen-packages"
}

skip=()
if idgen_apt_install python3 python3-venv; then
    why=$(venv "$CLIENTS/django-5.2" /usr/bin/python3 "${DJANGO5[@]}") ||
        { echo "clients skipped: Django 5.2: ${why##*$'\n'}"; skip+=(--skip django_5_2); }
    why=$(venv "$CLIENTS/sqlalchemy" /usr/bin/python3 "${SQLALCHEMY[@]}") ||
        { echo "clients skipped: SQLAlchemy: ${why##*$'\n'}"; skip+=(--skip sqlalchemy); }
else
    echo "clients skipped: Django 5.2 and SQLAlchemy: apt-get install python3-venv failed"
    skip+=(--skip django_5_2 --skip sqlalchemy)
fi

# Django 6 declares Python >= 3.12 and does not import on 3.11 (inspect.markcoroutinefunction):
# take the newest Python >= 3.12 there is (on PATH, or pyenv's under $HOME or /root).
py6=
for py in python3.14 python3.13 python3.12 \
    $(ls -d "$HOME"/.pyenv/versions/3.1[2-9]*/bin/python3 /root/.pyenv/versions/3.1[2-9]*/bin/python3 2>/dev/null | sort -rV); do
    if "$py" -c 'import sys, venv, ensurepip; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
        py6=$(command -v "$py")
        break
    fi
done
if [ -z "$py6" ]; then
    echo "clients skipped: Django 6.1: no Python >= 3.12 on this machine (Debian 12 has 3.11, on which Django 6 does not import)"
    skip+=(--skip django_6_1)
elif ! why=$(venv "$CLIENTS/django-6.1" "$py6" "${DJANGO6[@]}"); then
    echo "clients skipped: Django 6.1 with $py6: ${why##*$'\n'}"
    skip+=(--skip django_6_1)
fi

node_ok=1
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    idgen_apt_install nodejs npm || { echo "clients skipped: node-postgres: apt-get install nodejs npm failed"; node_ok=0; }
fi
if [ $node_ok = 1 ] &&
    [ "$(node -p "require('$CLIENTS/node/node_modules/pg/package.json').version" 2>/dev/null)" != "$PG_NPM" ]; then
    idgen_log "npm install pg@$PG_NPM ($CLIENTS/node)"
    npm install --prefix "$CLIENTS/node" --no-audit --no-fund --save-exact --loglevel=error "pg@$PG_NPM" >/dev/null ||
        { echo "clients skipped: node-postgres: npm install pg@$PG_NPM failed"; node_ok=0; }
fi
[ $node_ok = 1 ] || skip+=(--skip node_postgres)

export IDGEN_CLIENTS_DIR=$CLIENTS
cd tests/cluster && cargo test --release --test clients -- --ignored --test-threads=2 --nocapture "${skip[@]}"
