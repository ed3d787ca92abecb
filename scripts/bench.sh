#!/usr/bin/env bash
# idgen's benchmark against PostgreSQL's own generators (README, "Performance"):
#   bash scripts/bench.sh           full run, about 20 minutes on 2 cores
#   bash scripts/bench.sh --quick   every measurement at a tiny size, in seconds
#   bash scripts/bench.sh --registry   the registry's scale check (renewals, global ranges)
#   bash scripts/bench.sh --names      segment_nextval with 1 to 100,000 names (the cache)
#   bash scripts/bench.sh --serials [--quick] [--round-robin]   serial_nextval, fast and gapless;
#                                      then 2,000 fast counters drawn round-robin by 8 clients:
#                                      numbers consumed less drawn (skipped or still cached) and
#                                      µs per draw, which
#                                      show whether they fit idgen.serial_cache_size. --round-robin:
#                                      that table only (about 2 minutes); --quick: every
#                                      measurement tiny
#   bash scripts/bench.sh --cores [--quick]   many sessions at once (issue 30): PAR sessions each
#                                      drawing N ids (segments with and without a per-backend
#                                      cache, a segment per session, nextval CACHE 1000,
#                                      snowflake), and pgbench single-row inserts at 16 and 64
#                                      clients; target/bench/cores.md and cores.csv. ROUNDS,
#                                      PARS ("1 4 16"), N (2000000), CLIENTS ("16 64"), SECS (10),
#                                      or --rounds/--pars/--n/--clients/--seconds. Meant for 8 or
#                                      more cores: on fewer it shows little (and says so)
#   bash scripts/bench.sh --pg 18 [--seconds 5]   the benchmark on PostgreSQL 16, 17 or 18 (fetched by
#                                      scripts/pg-versions.sh; 18 adds uuidv7()); --seconds:
#                                      each pgbench run's length (default 10)
# Installs what is missing, builds and installs the release build, then starts its own server
# (default durability, idgen preloaded) and prints one table; writes it as Markdown and CSV to
# target/bench/ of the project. Not a pass/fail test: the test suite runs --quick only to check
# that every cell is still measured.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
idgen_setup
pgc=$PG_CONFIG
args=()
while [ $# -gt 0 ]; do  # --pg N anywhere; the rest goes to the benchmark
    if [ "$1" = --pg ]; then
        pgc=$(idgen_pg_fetch "${2:?--pg takes a major version}")
        shift 2
    else
        args+=("$1")
        shift
    fi
done
set -- "${args[@]}"
idgen_install_release "$pgc"
export IDGEN_PG_BIN
IDGEN_PG_BIN=$("$pgc" --bindir)
cd tests/cluster
case "${1:-}" in
    --registry | --names | --serials | --cores)
        bin="idgen-${1#--}-bench"
        bin="${bin/serials/serial}"
        idgen_log "$bin ${*:2}"
        exec cargo run --release --quiet --bin "$bin" -- "${@:2}"
        ;;
esac
idgen_log "idgen-bench $*"
cargo run --release --quiet --bin idgen-bench -- "$@"
