#!/usr/bin/env bash
# Recipe test: idgen under Patroni (issue 31, point 2; README "Recipe: Patroni, three members and etcd").
# Runs tests/cluster/tests/patroni.rs: one etcd and three Patroni members of PostgreSQL 15 with
# idgen preloaded, in synchronous_mode; 8 clients insert rows (snowflake_nextval() and
# segment_nextval() defaults, RETURNING) through a multi-host connection string with
# target_session_attrs=read-write while the leader is lost three times (kill -9 of its patroni
# and its postmaster, then its patroni started again: it rewinds and rejoins) and switched over
# once; 0 repeated ids and numbers, later timelines above earlier ones, every acknowledged row on
# the final leader. Twice: worker ids from an idgen registry, and one static worker id per
# Patroni cluster.
# Installs, idempotently: Debian's patroni (3.0.2 on Debian 12), etcd-server (3.4.23) and
# etcd-client (etcdctl, for looking around). The package scripts' etcd/patroni services are not
# used (a service started by the installation is stopped again); the test starts its own etcd
# and Patroni processes on free ports as the postgres user. Assumes idgen's release build is
# installed into Debian's PostgreSQL 15.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/setup.sh

TOPIC=patroni
PACKAGES=(patroni etcd-server etcd-client)

skip() {
    echo "$TOPIC skipped: $*"
    exit 0
}

if ! idgen_apt_install "${PACKAGES[@]}"; then
    [ "$(id -u)" = 0 ] || skip "${PACKAGES[*]} not all installed, and installing needs root"
    skip "apt-get install ${PACKAGES[*]} failed"
fi
# Where an init system let the packages start their services, stop them: the test runs its
# own processes (and the packaged etcd would hold 2379/2380).
for s in etcd patroni; do
    if [ -x "/etc/init.d/$s" ] && "/etc/init.d/$s" status >/dev/null 2>&1; then
        idgen_log "stopping the packaged $s service"
        "/etc/init.d/$s" stop >/dev/null 2>&1 || true
    fi
done
for program in patroni patronictl etcd; do
    command -v "$program" >/dev/null || skip "$program is not on PATH after installing ${PACKAGES[*]}"
done
patroni --version >/dev/null 2>&1 || skip "patroni does not run: $(patroni --version 2>&1 | tail -n 1)"
etcd --version >/dev/null 2>&1 || skip "etcd does not run: $(etcd --version 2>&1 | tail -n 1)"
getent passwd postgres >/dev/null || skip "no postgres user (Patroni and PostgreSQL refuse to run as root)"
idgen_log "$(patroni --version), $(etcd --version | head -n 1)"

cd tests/cluster && cargo test --release --test patroni -- --ignored --test-threads=1 --nocapture
