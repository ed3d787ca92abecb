#!/usr/bin/env bash
# Recipe test: idgen with logical replication (issue 31, point 4). Runs
# tests/cluster/tests/logical.rs:
#   - bidirectional pglogical: two PostgreSQL 15 servers replicating one table both ways
#     (forward_origins '{}'), worker ids leased from an idgen registry on a third server, a
#     global segment for the order numbers, 2 writers per side for 60 s: 0 duplicate ids or
#     numbers, both tables identical, every acknowledged insert on both sides, 0 pglogical
#     conflicts in either server log;
#   - a one-way migration with built-in logical replication (CREATE PUBLICATION / SUBSCRIPTION)
#     under writes, the cut-over steps of README "Logical replication", and the new server's ids
#     and numbers all above the replicated ones (and, without the segment step, a repeated
#     number: 23505).
# Installs: Debian's postgresql-15-pglogical (2.4.2 on Debian 12); where it cannot be installed,
# only the pglogical test is skipped (a "logical skipped: ..." line). The tests start their own
# servers on free ports. Assumes idgen's release build is installed into Debian's PostgreSQL 15.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/setup.sh

TOPIC=logical

skip() {
    echo "$TOPIC skipped: $*"
    exit 0
}

if [ "$(id -u)" != 0 ]; then
    skip "the recipe installs Debian packages and runs servers as postgres: run it as root"
fi
[ -x /usr/lib/postgresql/15/bin/postgres ] || skip "no Debian PostgreSQL 15 (/usr/lib/postgresql/15/bin/postgres)"
[ -f /usr/share/postgresql/15/extension/idgen.control ] \
    || skip "idgen is not installed into Debian's PostgreSQL 15 (bash scripts/test.sh installs it)"

# Without pglogical only its test is skipped (said on stdout); the built-in logical
# replication test needs nothing but PostgreSQL 15 and still runs.
filter=()
pglogical_missing() {
    echo "$TOPIC skipped: $* (the pglogical test only; the built-in logical replication test runs)"
    filter=(migration)
}
pkgs=(postgresql-15-pglogical)
idgen_apt_install "${pkgs[@]}" || pglogical_missing "apt-get install ${pkgs[*]} failed"
if [ ${#filter[@]} -eq 0 ]; then
    if [ -f /usr/lib/postgresql/15/lib/pglogical.so ]; then
        idgen_log "postgresql-15-pglogical $(dpkg-query -W -f='${Version}' postgresql-15-pglogical)"
    else
        pglogical_missing "no /usr/lib/postgresql/15/lib/pglogical.so after installing postgresql-15-pglogical"
    fi
fi

cd tests/cluster && cargo test --release --test "$TOPIC" -- --ignored --test-threads=2 --nocapture "${filter[@]}"
