#!/usr/bin/env bash
# Installs what idgen's build and tests need, idempotently; sourced by demo.sh and test.sh.
#   - Debian packages: PostgreSQL 15 server and headers, clang (bindgen), sudo (pgrx --runas),
#     faketime (clock fault tests), PL/Proxy (the sharded test cluster), pg_auto_failover
#     (the HA failover test: monitor extension and pg_autoctl)
#   - cargo-pgrx pinned at 0.18.1 (the same version as the pgrx crate) and `cargo pgrx init`
#     against the system PostgreSQL 15
#   - a persistent CARGO_TARGET_DIR outside the clone, so repeated runs rebuild in minutes
# Needs root (apt, installing into the system PostgreSQL) and rustc 1.95.

PG_CONFIG=/usr/lib/postgresql/15/bin/pg_config
PGRX_VERSION=0.18.1
export PG_CONFIG
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/idgen/target}"
mkdir -p "$CARGO_TARGET_DIR"
export PATH="$HOME/.cargo/bin:$PATH"

source "$(dirname "${BASH_SOURCE[0]}")/pg-versions.sh"

idgen_log() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

idgen_setup() {
    if [ "$(id -u)" != 0 ]; then
        echo "idgen's scripts install packages and the extension: run them as root" >&2
        return 1
    fi
    local pkgs=(postgresql-15 postgresql-server-dev-15 postgresql-15-plproxy postgresql-15-auto-failover pg-auto-failover-cli libpq-dev libclang-dev clang sudo faketime python3)
    local missing=()
    for p in "${pkgs[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        idgen_log "apt-get install ${missing[*]}"
        apt-get update -q >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null
    fi
    # Debian's postgresql-15 package starts a cluster on 5432; our servers use their own ports.

    if ! cargo pgrx --version 2>/dev/null | grep -q " $PGRX_VERSION\$"; then
        idgen_log "cargo install cargo-pgrx $PGRX_VERSION (about 7 minutes, once)"
        cargo install cargo-pgrx --version "=$PGRX_VERSION" --locked --force
    fi
    # `cargo pgrx init` for 15 (keeping the other versions pg-versions.sh fetched).
    idgen_pg_fetch 15 >/dev/null
}

# Installs those of the Debian packages named that are missing (apt-get update first); returns
# non-zero if apt-get fails. The recipes (scripts/recipes/*.sh) install their components with it.
idgen_apt_install() {
    local missing=() p
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    idgen_log "apt-get install ${missing[*]}"
    apt-get -o DPkg::Lock::Timeout=600 update -q >/dev/null &&
        DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q "${missing[@]}" >/dev/null
}

# Prints a free TCP port on 127.0.0.1.
idgen_free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Builds the release library and installs it into a PostgreSQL: the system 15, or the one whose
# pg_config is given.
idgen_install_release() {
    local pgc=${1:-$PG_CONFIG}
    idgen_log "cargo pgrx install --release (into $("$pgc" --pkglibdir))"
    cargo pgrx install --release --pg-config "$pgc"
}
