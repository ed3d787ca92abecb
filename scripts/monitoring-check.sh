#!/usr/bin/env bash
# Checks monitoring/ (monitoring/README.md), in three parts, each ending with cargo's
# "test result:" line that scripts/test.sh's summary counts:
#   1. promtool check rules: the alert rules' syntax (one passed per rule)
#   2. promtool test rules: their unit tests, monitoring/prometheus/*.test.yml (one passed per
#      alert_rule_test case)
#   3. scripts/check-monitoring.py: its self-test, then the files against each other and
#      against sql/metrics.sql (the queries read the views' columns, and every one of them;
#      every metric that a rule or a panel uses is one that queries.yaml emits, every emitted
#      metric is used, every rule fires in a test)
# Installs what is missing: Debian's prometheus (for promtool; Debian 12 has 2.42) and
# python3-yaml. Where that cannot be done it says "monitoring skipped: <why>" and exits 0.
# Needs no PostgreSQL, no server and no network once both are installed.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh

skip() {
    echo "monitoring skipped: $*"
    exit 0
}

# Debian's prometheus package starts Prometheus (port 9090) and its recommended node exporter
# (9100) as services; only promtool is wanted. Stopped and disabled right after this script
# installed them, never otherwise.
stop_services() {
    local s
    for s in prometheus prometheus-node-exporter; do
        if [ -d /run/systemd/system ]; then
            systemctl disable --now "$s.service" >/dev/null 2>&1 || true
        elif [ -x "/etc/init.d/$s" ]; then
            "/etc/init.d/$s" stop >/dev/null 2>&1 || true
            update-rc.d "$s" disable >/dev/null 2>&1 || true
        fi
    done
}

need=()
command -v promtool >/dev/null || need+=(prometheus)
python3 -c 'import yaml' 2>/dev/null || need+=(python3-yaml)
if [ ${#need[@]} -gt 0 ]; then
    [ "$(id -u)" = 0 ] || skip "${need[*]} not installed, and installing needs root"
    idgen_apt_install "${need[@]}" || skip "apt-get install ${need[*]} failed"
    [[ " ${need[*]} " = *" prometheus "* ]] && stop_services
fi
command -v promtool >/dev/null || skip "no promtool after installing Debian's prometheus"
python3 -c 'import yaml' 2>/dev/null || skip "no PyYAML after installing python3-yaml"
idgen_log "$(promtool --version 2>&1 | head -1)"

status=0
result() {  # result PASSED FAILED: cargo's summary line for one part
    if [ "$2" = 0 ]; then
        echo "test result: ok. $1 passed; 0 failed; 0 ignored"
    else
        echo "test result: FAILED. $1 passed; $2 failed; 0 ignored"
        status=1
    fi
}

rules=()
tests=()
for f in monitoring/prometheus/*.yml; do
    case "$f" in
        *.test.yml) tests+=("$f") ;;
        *) rules+=("$f") ;;
    esac
done

idgen_log "promtool check rules ${rules[*]}"
out=$(promtool check rules "${rules[@]}" 2>&1)
rc=$?
echo "$out"
found=$(sed -nE 's/.*SUCCESS: ([0-9]+) rules found.*/\1/p' <<<"$out" | awk '{n += $1} END {print n + 0}')
if [ $rc = 0 ]; then result "$found" 0; else result "$found" 1; fi

idgen_log "promtool test rules ${tests[*]}"
out=$(promtool test rules "${tests[@]}" 2>&1)
rc=$?
echo "$out"
cases=$(python3 -c '
import sys, yaml
print(sum(len(t.get("alert_rule_test") or []) for f in sys.argv[1:]
          for t in (yaml.safe_load(open(f)) or {}).get("tests") or []))' "${tests[@]}")
# promtool prints "alertname: X, time: T," for each case that failed.
failed=$(grep -cE '^[[:space:]]+alertname: .*, time: ' <<<"$out")
if [ $rc != 0 ] && [ "$failed" = 0 ]; then
    failed=1  # a file it could not read or run
fi
result $((cases > failed ? cases - failed : 0)) "$failed"

idgen_log "python3 scripts/check-monitoring.py --self-test"
if python3 scripts/check-monitoring.py --self-test; then result 1 0; else result 0 1; fi
idgen_log "python3 scripts/check-monitoring.py"
python3 scripts/check-monitoring.py || status=1

exit $status
