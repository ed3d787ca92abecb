#!/usr/bin/env bash
# Recipe test: partitioning by Snowflake id with pg_partman (issue 31, point 5). Runs
# tests/cluster/tests/partman.rs against servers it starts itself (free ports, as postgres):
# daily partitions by id with p_interval = a day in id units and
# p_start_partition = snowflake_compose(now()), rows placed in their UTC day, none in the
# default partition, the background worker (pg_partman_bgw, every second) premaking ahead;
# the idle-table caveat (maintenance follows max(id): new rows land in the default partition
# and every later maintenance run fails) and its remedy (partition_data_id, then a premake from
# the clock with create_partition_id); monthly partitions by a created_at column derived from
# the id; the id units of a day under 10 ms and 7 ms ticks.
# Installs: Debian's postgresql-15-partman (pg_partman 4.7.2 on Debian 12).
# Assumes idgen's release build is installed into Debian's PostgreSQL 15.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/setup.sh

TOPIC=partman

skip() {
    echo "$TOPIC skipped: $*"
    exit 0
}

if [ "$(id -u)" != 0 ]; then
    skip "the recipe installs a Debian package and runs servers as postgres: run it as root"
fi

pkgs=(postgresql-15-partman)
idgen_apt_install "${pkgs[@]}" || skip "apt-get install ${pkgs[*]} failed"
libdir=$(/usr/lib/postgresql/15/bin/pg_config --pkglibdir)
sharedir=$(/usr/lib/postgresql/15/bin/pg_config --sharedir)
[ -f "$libdir/pg_partman_bgw.so" ] && [ -f "$sharedir/extension/pg_partman.control" ] \
    || skip "no pg_partman_bgw.so or pg_partman.control in PostgreSQL 15 after installing the package"
idgen_log "pg_partman $(sed -n "s/^default_version = '\(.*\)'/\1/p" "$sharedir/extension/pg_partman.control")"

cd tests/cluster && cargo test --release --test "$TOPIC" -- --ignored --test-threads=2 --nocapture
