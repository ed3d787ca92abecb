#!/usr/bin/env bash
# Recipe test: idgen's metrics and alerts with the real components (issue 41). Runs
# tests/cluster/tests/monitoring.rs: Debian's postgres_exporter reads the extension's metrics
# views with monitoring/postgres_exporter/queries.yaml, Prometheus scrapes it every second and
# evaluates monitoring/prometheus/idgen-alerts.yml (a copy with every `for:` at 0s); every
# metric of the queries has a series and nothing fires on healthy servers; a segment near its
# column's maximum, a clock stepped back (libfaketime) and a stopped registry each fire their
# alert, which clears when the condition ends.
# Installs: Debian's prometheus (2.42 on Debian 12), prometheus-postgres-exporter (0.11.1) and
# faketime (libfaketime 0.9.10). The packages' own services (prometheus on 9090, the exporter on
# 9187, the node exporter) are neither used nor needed: each test starts its own exporter and
# Prometheus on free ports of 127.0.0.1 with their files in a scratch directory, and kills them.
# Assumes idgen's release build is installed into Debian's PostgreSQL 15.
set -uo pipefail
cd "$(dirname "$0")/../.."
source scripts/setup.sh

TOPIC=monitoring
PACKAGES=(prometheus prometheus-postgres-exporter faketime)
EXPORTER=prometheus-postgres-exporter
LIBFAKETIME=/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1

skip() {
    echo "$TOPIC skipped: $*"
    exit 0
}

if [ "$(id -u)" != 0 ]; then
    skip "the recipe installs Debian packages and runs servers as postgres: run it as root"
fi
idgen_apt_install "${PACKAGES[@]}" || skip "apt-get install ${PACKAGES[*]} failed"
for program in prometheus "$EXPORTER"; do
    command -v "$program" >/dev/null || skip "no $program program after installing ${PACKAGES[*]}"
done
prometheus --version >/dev/null 2>&1 || skip "prometheus does not run: $(prometheus --version 2>&1 | tail -n 1)"
"$EXPORTER" --version >/dev/null 2>&1 || skip "$EXPORTER does not run: $("$EXPORTER" --version 2>&1 | tail -n 1)"
[ -f "$LIBFAKETIME" ] || skip "no $LIBFAKETIME after installing faketime"
getent passwd postgres >/dev/null || skip "no postgres user (PostgreSQL refuses to run as root)"
idgen_log "$(prometheus --version 2>&1 | head -n 1), $("$EXPORTER" --version 2>&1 | head -n 1)"

cd tests/cluster && cargo test --release --test "$TOPIC" -- --ignored --test-threads=1 --nocapture
