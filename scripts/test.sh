#!/usr/bin/env bash
# Runs idgen's tests and ends with one summary line, "N passed, N failed".
#   bash scripts/test.sh                 the whole suite on PostgreSQL 15, then the smoke tier on
#                                        every other version (16, 17, 18; one that cannot be
#                                        fetched is reported as skipped, with the reason)
#   bash scripts/test.sh --pg N          the whole suite on version N (a version that cannot be
#                                        fetched fails the run)
#   bash scripts/test.sh --pg N --smoke  the smoke tier on version N
# First, once: the layer check of src/, the check that every test DESIGN.md names exists, the
# commit messages, and crates/idgen-core's tests (the registry model included), which need no
# PostgreSQL.
# The whole suite, per version:
#   1. cargo pgrx test: plain #[test]s (pure arithmetic) and #[pg_test]s (SQL surface, SQLSTATEs)
#   2. the release build installed into that version's PostgreSQL
#   3. tests/cluster: servers started by the tests (concurrency, start-up, pg_regress files,
#      bad input, privileges, dump/restore, upgrades, failover); on 16 and 18 without the two
#      tests that need Debian's PostgreSQL 15 packages (PL/Proxy: sharded; pg_auto_failover:
#      ha_failover), which are reported as skipped
#   4. the Debian package (scripts/package.sh --pg N) installed alone; then the release build
#      again
#   5. on 15 and 16 (and in the default run): pg_upgrade from 15 to 16
#   6. on 15 (and in the default run): the recipes, scripts/recipes/*.sh, each installing what
#      it needs (pgbouncer, pg_partman, pglogical, Patroni and etcd, Django, SQLAlchemy,
#      node-postgres) and running its tests against servers it starts; a component that cannot
#      be installed or run here is reported as skipped, with the reason
#   7. on 15 (and in the default run): the docs site (scripts/docs.sh --browser: built with
#      mkdocs-material, --strict, then rendered in Debian's headless Chromium), its SQL examples
#      run against their outputs (tests/cluster/tests/docs.rs) and its reference pages checked
#      against the code (docs_reference.rs)
#   8. on 15 (and in the default run): monitoring/ (scripts/monitoring-check.sh): the alert
#      rules and their unit tests with promtool (Debian's prometheus, installed if missing), and
#      the metric names of the rules and the dashboard against those queries.yaml emits
#   9. on 18 (and in the default run, last): PGXN (scripts/pgxn-check.sh): META.json against the
#      spec, `make dist`, and the archive installed with pgxn into a scratch PostgreSQL 18
# The smoke tier: 1, 2, and one cluster test per generator (eight connections drawing Snowflake
# ids, eight drawing segment numbers, eight drawing Snowflake uuids). On 18 both also run
# uuidv7's contrast test and the CloudNativePG image check (scripts/image-check.sh: the image
# built with umoci, read back, and idgen loaded from it alone by a PostgreSQL 18 without idgen).
# Installs what is missing first (scripts/setup.sh, scripts/pg-versions.sh).
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh

only=""; smoke=0
while [ $# -gt 0 ]; do
    case "$1" in
        --pg)
            [ $# -ge 2 ] || { echo "scripts/test.sh: --pg takes 15, 16, 17 or 18" >&2; exit 2; }
            only=$2; shift 2 ;;
        --smoke) smoke=1; shift ;;
        *) echo "usage: bash scripts/test.sh [--pg 15|16|17|18] [--smoke]" >&2; exit 2 ;;
    esac
done
case "$only" in
    ""|15|16|17|18) ;;
    *) echo "scripts/test.sh: --pg takes 15, 16, 17 or 18, not '$only'" >&2; exit 2 ;;
esac
if [ -z "$only" ] && [ $smoke = 1 ]; then
    echo "scripts/test.sh: --smoke goes with --pg N" >&2; exit 2
fi

idgen_setup || exit 1

LOGS=$(mktemp -d /tmp/idgen-test-logs-XXXXXX)
PGRX_DATA=$(mktemp -d /tmp/idgen-pgrx-data-XXXXXX)
trap 'rm -rf "$PGRX_DATA"' EXIT
failed_tiers=()
skipped=()

tier() {  # tier NAME COMMAND...: runs a tier, keeps its output for the summary
    local name=$1; shift
    idgen_log "$name: $*"
    if ! "$@" 2>&1 | tee "$LOGS/$name.log"; then
        failed_tiers+=("$name")
    fi
}

# The module layering of src/ (DESIGN.md section 5), before anything is built.
tier layers python3 scripts/check-layers.py

# Every test DESIGN.md's invariant table names exists (a renamed test would leave its guarantee
# pointing at nothing).
tier design-tests python3 scripts/check-design-tests.py

# The checkers check themselves on small trees of their own, and the commit messages since the
# rule began have a short subject and a body (CONTRIBUTING.md, "Commits").
tier checkers bash -c 'python3 scripts/check-layers.py --self-test &&
    python3 scripts/check-design-tests.py --self-test'
tier commits python3 scripts/check-commits.py

# The pure core without PostgreSQL: its unit tests and the registry model (DESIGN.md section 6
# "The model"), bounded to about a minute and 3.3 GiB; one test at a time, each uses every core.
tier core cargo test -p idgen-core --release -- --test-threads=1

# Cluster test targets that run on version $1 (the two that need Debian's 15 packages do not
# run on the others).
cluster_targets() {
    local t
    for t in tests/cluster/tests/*.rs; do
        t=$(basename "$t" .rs)
        # The docs' tests run in the docs tiers.
        [ "$t" = docs ] || [ "$t" = docs_reference ] && continue
        if [ "$1" != 15 ] && { [ "$t" = sharded ] || [ "$t" = ha_failover ]; }; then
            continue
        fi
        printf -- '--test %s ' "$t"
    done
}

run_version() {  # run_version N full|smoke
    local v=$1 mode=$2 pgc bindir
    local ok=1
    pgc=$(idgen_pg_fetch "$v" 2>"$LOGS/fetch-$v.txt") || ok=0
    cat "$LOGS/fetch-$v.txt" >&2
    if [ $ok = 0 ]; then
        local why
        why=$(grep skipped "$LOGS/fetch-$v.txt" ||
            echo "pg$v skipped: could not be fetched or cargo pgrx init failed (output above)")
        if [ "$v" = "$only" ]; then
            # Asked for by name: a version that was not tested is a failure, not a skip.
            echo "$why" | tee "$LOGS/pg$v-fetch.log"
            failed_tiers+=("pg$v-fetch")
        else
            skipped+=("$why")
        fi
        return
    fi
    bindir=$("$pgc" --bindir)
    rm -rf "$PGRX_DATA" && mkdir -p "$PGRX_DATA" && chown postgres:postgres "$PGRX_DATA"
    # pgrx's test server runs as postgres; it keeps its data in $PGRX_DATA.
    tier "pg$v-pgrx" cargo pgrx test "pg$v" --runas postgres --pgdata "$PGRX_DATA"
    # cargo pgrx test leaves its test build installed: install the real one.
    tier "pg$v-install" idgen_install_release "$pgc"
    if [ "$v" = 15 ]; then
        # The committed install script is what a fresh CREATE EXTENSION runs.
        tier install-script bash scripts/install-script.sh --check
    fi
    if [ "$v" -ge 18 ]; then
        # uuidv7() against idgen across a restart with the clock behind (README).
        tier "pg$v-uuidv7" env IDGEN_PG_BIN="$bindir" bash -c 'cd tests/cluster &&
            cargo test --release --test uuidv7 -- --ignored'
    fi
    if [ "$v" = 18 ]; then
        # The CloudNativePG image: built, read back, and loaded by a PostgreSQL 18 that has no
        # idgen of its own (scripts/image-check.sh, docs/operations/kubernetes.md).
        tier "pg$v-image" bash scripts/image-check.sh
        local line
        while IFS= read -r line; do
            skipped+=("$line")
        done < <(grep -E "^image skipped: " "$LOGS/pg$v-image.log")
    fi
    if [ "$mode" = smoke ]; then
        tier "pg$v-cluster-smoke" env IDGEN_PG_BIN="$bindir" bash -c 'cd tests/cluster &&
            cargo test --release --no-fail-fast --test snowflake_concurrency --test segment \
                --test snowflake_uuid -- --test-threads=2 --exact \
                eight_connections_draw_distinct_increasing_ids \
                eight_connections_draw_distinct_increasing_numbers \
                eight_connections_draw_distinct_increasing_uuids'
        # A renamed test would leave the filter matching nothing, and the tier passing.
        local ran
        ran=$(grep -c '^test result: ok\. 1 passed' "$LOGS/pg$v-cluster-smoke.log")
        if [ "$ran" != 3 ]; then
            echo "pg$v smoke: 3 tests expected, $ran ran" | tee "$LOGS/pg$v-smoke-count.log"
            failed_tiers+=("pg$v-smoke-count")
        fi
        return
    fi
    [ "$v" = 15 ] || skipped+=("pg$v: cluster tests sharded (PL/Proxy) and ha_failover (pg_auto_failover) skipped: Debian 12 packages both for PostgreSQL 15 only")
    # shellcheck disable=SC2046 # one word per target
    tier "pg$v-cluster" env IDGEN_PG_BIN="$bindir" bash -c "cd tests/cluster &&
        cargo test --release --no-fail-fast $(cluster_targets "$v") -- --test-threads=2"
    # The Debian package replaces the installed files, so its test runs alone, after the
    # others; then the development build goes back in.
    tier "pg$v-package" env IDGEN_PG_BIN="$bindir" IDGEN_PG_MAJOR="$v" bash -c "
        deb=\$(bash scripts/package.sh --pg $v) && cd tests/cluster &&
        IDGEN_DEB=\"\$deb\" cargo test --release --test package -- --ignored"
    tier "pg$v-reinstall" idgen_install_release "$pgc"
}

# pg_upgrade from 15 to 16 (tests/cluster/tests/pg_upgrade.rs), with idgen's release build
# installed into both.
upgrade_tier() {
    local pgc16
    if ! pgc16=$(idgen_pg_fetch 16 2>/dev/null); then
        skipped+=("pg_upgrade 15 -> 16 skipped: PostgreSQL 16 could not be fetched")
        return
    fi
    tier pg-upgrade-install bash -c "source scripts/setup.sh &&
        idgen_install_release && idgen_install_release '$pgc16'"
    tier pg-upgrade env IDGEN_PG_NEW_BIN="$("$pgc16" --bindir)" bash -c 'cd tests/cluster &&
        cargo test --release --test pg_upgrade -- --ignored'
}

# The recipes (README "Where idgen runs"): idgen with the components users run it with, on
# Debian's PostgreSQL 15 with the release build installed.
recipe_tiers() {
    local r name line
    for r in scripts/recipes/*.sh; do
        name=$(basename "$r" .sh)
        tier "recipe-$name" bash "$r"
        # A component that could not be installed or run is reported, never skipped silently.
        while IFS= read -r line; do
            skipped+=("$line")
        done < <(grep -E "^$name skipped: " "$LOGS/recipe-$name.log")
    done
}

# The docs site (docs/, mkdocs.yml), on Debian's PostgreSQL 15 with the release build installed.
docs_tiers() {
    local line
    tier docs-site bash scripts/docs.sh --browser
    # A part that could not run here is reported, never skipped silently.
    while IFS= read -r line; do
        skipped+=("$line")
    done < <(grep -E "^docs skipped: " "$LOGS/docs-site.log")
    tier docs-tests bash -c 'cd tests/cluster &&
        cargo test --release --no-fail-fast --test docs --test docs_reference -- --test-threads=1'
}

# monitoring/: the alert rules (promtool check rules), their unit tests (promtool test rules),
# and the metric names the rules and the dashboard use against those queries.yaml emits. Needs
# no server.
monitoring_tier() {
    local line
    tier monitoring-rules bash scripts/monitoring-check.sh
    # A tool that could not be installed is reported, never skipped silently.
    while IFS= read -r line; do
        skipped+=("$line")
    done < <(grep -E "^monitoring skipped: " "$LOGS/monitoring-rules.log")
}

# PGXN (META.json, make dist, and the archive installed with pgxn into a scratch PostgreSQL 18;
# scripts/pgxn-check.sh). Last: the archive's build with no `cargo pgrx init` rebuilds the
# PostgreSQL 18 bindings, which no later tier needs.
pgxn_tier() {
    local line
    tier pgxn bash scripts/pgxn-check.sh
    # A tool that could not be installed is reported, never skipped silently.
    while IFS= read -r line; do
        skipped+=("$line")
    done < <(grep -E "^pgxn skipped: " "$LOGS/pgxn.log")
}

if [ -n "$only" ]; then
    run_version "$only" "$([ $smoke = 1 ] && echo smoke || echo full)"
    if [ $smoke = 0 ] && [ "$only" = 15 ]; then
        recipe_tiers
        docs_tiers
        monitoring_tier
    fi
    if [ $smoke = 0 ] && { [ "$only" = 15 ] || [ "$only" = 16 ]; }; then
        upgrade_tier
    fi
    if [ $smoke = 0 ] && [ "$only" = 18 ]; then
        pgxn_tier
    fi
else
    run_version 15 full
    recipe_tiers
    docs_tiers
    monitoring_tier
    for v in 16 17 18; do
        run_version "$v" smoke
    done
    upgrade_tier
    pgxn_tier
fi

passed=0; failed=0
while read -r p f; do
    passed=$((passed + p)); failed=$((failed + f))
done < <(cat "$LOGS"/*.log 2>/dev/null | sed -nE 's/^test result: [a-zA-Z]+\. ([0-9]+) passed; ([0-9]+) failed.*/\1 \2/p')
for t in "${failed_tiers[@]}"; do
    # A tier that failed without a failing test (a build error, a failed install) counts once.
    if ! sed -nE 's/^test result: .* ([0-9]+) failed.*/\1/p' "$LOGS/$t.log" | grep -qv '^0$'; then
        failed=$((failed + 1))
    fi
done
rm -rf "$LOGS"
for s in "${skipped[@]}"; do echo "$s"; done
[ ${#failed_tiers[@]} -eq 0 ] || echo "failed tiers: ${failed_tiers[*]}"
echo "$passed passed, $failed failed"
[ ${#failed_tiers[@]} -eq 0 ] && [ "$failed" -eq 0 ]
