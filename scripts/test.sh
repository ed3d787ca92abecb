#!/usr/bin/env bash
# Runs every test tier of idgen and ends with one summary line, "N passed, N failed":
#   1. cargo pgrx test: plain #[test]s (pure arithmetic) and #[pg_test]s (SQL surface, SQLSTATEs)
#   2. the release build installed into the system PostgreSQL 15
#   3. tests/cluster: servers started by the tests (concurrency, start-up, pg_regress files,
#      bad input, privileges, dump/restore, upgrades)
#   4. the Debian package (scripts/package.sh) installed with apt-get, alone; then the release
#      build again
# Installs what is missing first (scripts/setup.sh).
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
idgen_setup || exit 1

LOGS=$(mktemp -d /tmp/idgen-test-logs-XXXXXX)
PGRX_DATA=$(mktemp -d /tmp/idgen-pgrx-data-XXXXXX)
chown postgres:postgres "$PGRX_DATA"
trap 'rm -rf "$PGRX_DATA"' EXIT
failed_tiers=()

tier() {  # tier NAME COMMAND...: runs a tier, keeps its output for the summary
    local name=$1; shift
    idgen_log "$name: $*"
    if ! "$@" 2>&1 | tee "$LOGS/$name.log"; then
        failed_tiers+=("$name")
    fi
}

# pgrx's test server runs as postgres; it keeps its data in $PGRX_DATA.
tier pgrx cargo pgrx test pg15 --runas postgres --pgdata "$PGRX_DATA"
# cargo pgrx test leaves its test build installed: install the real one.
tier install idgen_install_release
tier cluster bash -c 'cd tests/cluster && cargo test --release --no-fail-fast -- --test-threads=2'
# The Debian package replaces the installed files, so its test runs alone, after the others;
# then the development build goes back in.
tier package bash -c 'deb=$(bash scripts/package.sh) && cd tests/cluster &&
    IDGEN_DEB="$deb" cargo test --release --test package -- --ignored'
tier reinstall idgen_install_release

passed=0; failed=0
while read -r p f; do
    passed=$((passed + p)); failed=$((failed + f))
done < <(cat "$LOGS"/*.log | sed -nE 's/^test result: [a-zA-Z]+\. ([0-9]+) passed; ([0-9]+) failed.*/\1 \2/p')
for t in "${failed_tiers[@]}"; do
    # A tier that failed without a failing test (a build error, a failed install) counts once.
    if ! sed -nE 's/^test result: .* ([0-9]+) failed.*/\1/p' "$LOGS/$t.log" | grep -qv '^0$'; then
        failed=$((failed + 1))
    fi
done
rm -rf "$LOGS"
[ ${#failed_tiers[@]} -eq 0 ] || echo "failed tiers: ${failed_tiers[*]}"
echo "$passed passed, $failed failed"
[ ${#failed_tiers[@]} -eq 0 ] && [ "$failed" -eq 0 ]
