#!/usr/bin/env bash
# Builds the Debian package postgresql-N-idgen_<version>_<arch>.deb for PostgreSQL N (15 by
# default; --pg 16, 17 or 18 for the others scripts/pg-versions.sh fetches), from the same
# source: `cargo pgrx package` builds the release library against N's headers and stages it
# with the control file and the install and upgrade scripts; the package puts them where
# Debian's and the PostgreSQL apt repository's postgresql-N looks (/usr/lib/postgresql/N/lib,
# /usr/share/postgresql/N/extension) and depends on postgresql-N; the monitoring files go to
# /usr/share/doc/postgresql-N-idgen/monitoring/. The package lands in
# $CARGO_TARGET_DIR/debian/; its path is the last line.
# Install it with: apt-get install ./postgresql-15-idgen_<version>_amd64.deb
#
# --image (PostgreSQL 18, the default with it, or later) builds instead an OCI image for
# CloudNativePG's image volume extensions (docs/operations/kubernetes.md), offline and without
# a container daemon: umoci (Debian's package, installed if missing) writes an OCI layout whose
# one layer holds exactly lib/idgen.so and share/extension/idgen.control and idgen--*.sql, the
# layout CloudNativePG mounts at /extensions/idgen. The layout directory and an oci-archive tar
# of it, idgen-N-<version>-<codename>.oci.tar (tag N-<version>-<codename>, the codename of the
# Debian release built on, whose glibc the library needs), land in $CARGO_TARGET_DIR/image/;
# the archive's path is the last line. Push it with:
#   skopeo copy oci-archive:idgen-18-<version>-bookworm.oci.tar docker://REGISTRY/idgen:18-<version>-bookworm
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { echo "usage: bash scripts/package.sh [--pg 15|16|17|18] [--image]" >&2; exit 2; }
major=""; image=0
while [ $# -gt 0 ]; do
    case "$1" in
        --pg) [ $# -ge 2 ] || usage; major=$2; shift 2 ;;
        --image) image=1; shift ;;
        *) usage ;;
    esac
done
if [ $image = 1 ]; then
    major=${major:-18}
    case "$major" in ''|*[!0-9]*) usage ;; esac
    # CloudNativePG points extension_control_path at the mounted image; PostgreSQL 17 and
    # older have no such setting and load extensions only from their own directories.
    if [ "$major" -lt 18 ]; then
        echo "package: --image needs PostgreSQL 18 or later, not $major: CloudNativePG mounts an" \
            "extension image through extension_control_path, which PostgreSQL 18 added" >&2
        exit 2
    fi
else
    major=${major:-15}
fi

source scripts/setup.sh
idgen_setup
pgc=$(idgen_pg_fetch "$major")

version=$(sed -nE 's/^version = "([^"]+)"$/\1/p' Cargo.toml | head -1)
arch=$(dpkg --print-architecture)
out="$CARGO_TARGET_DIR/$([ $image = 1 ] && echo image || echo debian)"
build="$out/pgrx-pg$major"
rm -rf "$build"
mkdir -p "$out"

idgen_log "cargo pgrx package (release, PostgreSQL $major) into $build"
cargo pgrx package --pg-config "$pgc" --out-dir "$build" >&2

# Exactly what PostgreSQL loads: the library, the control file and the SQL scripts (install
# and upgrade), moved from the directories of the installation built against to $2 and $3
# under $1.
stage_extension() {
    local root=$1 libdir=$2 extdir=$3 f
    mkdir -p "$root$libdir" "$root$extdir"
    cp "$build$("$pgc" --pkglibdir)/idgen.so" "$root$libdir/"
    cp "$build$("$pgc" --sharedir)"/extension/idgen* "$root$extdir/"
    for f in "$root$libdir/idgen.so" "$root$extdir/idgen.control" "$root$extdir/idgen--$version.sql"; do
        [ -f "$f" ] || { echo "package: $f is missing" >&2; exit 1; }
    done
}

if [ $image = 1 ]; then
    codename=$(. /etc/os-release && echo "${VERSION_CODENAME:?no VERSION_CODENAME in /etc/os-release}")
    tag="$major-$version-$codename"
    oci="$out/idgen-$tag"
    archive="$oci.oci.tar"
    stage="$out/stage-$tag"
    rm -rf "$oci" "$archive" "$stage" "$stage.tar"
    # CloudNativePG's layout, the image's root being what it mounts at /extensions/idgen:
    # lib/ goes into dynamic_library_path, share/ into extension_control_path.
    stage_extension "$stage" /lib /share/extension
    rm -rf "$build"
    find "$stage" -type d -exec chmod 0755 {} +
    find "$stage" -type f -exec chmod 0644 {} +

    idgen_apt_install umoci ||
        { echo "package: umoci (Debian's package) is missing and apt-get could not install it" >&2; exit 1; }
    # Every time in the image is the last commit's (SOURCE_DATE_EPOCH if set), so that a
    # rebuild of the same commit gives the same layer.
    epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}
    created=$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)
    # One layer, written here rather than by umoci's rootfs diff: the members are named
    # relative to the image's root (lib/idgen.so), owned by root, in a fixed order.
    tar -C "$stage" --format=ustar --sort=name --owner=0 --group=0 --numeric-owner \
        --mtime="@$epoch" -cf "$stage.tar" lib share
    idgen_log "umoci: OCI layout $oci, tag $tag"
    umoci init --layout "$oci" >&2
    umoci new --image "$oci:$tag" >&2
    umoci raw add-layer --image "$oci:$tag" --history.created "$created" \
        --history.created_by "scripts/package.sh --image --pg $major" "$stage.tar" >&2
    # The user of CloudNativePG's own extension images; the image runs nothing.
    umoci config --image "$oci:$tag" --no-history --created "$created" \
        --os linux --architecture "$arch" --config.user 65532:65532 \
        --config.label org.opencontainers.image.title=idgen \
        --config.label "org.opencontainers.image.version=$version" \
        --config.label "org.opencontainers.image.description=idgen $version for PostgreSQL $major ($codename, $arch), for CloudNativePG's image volume extensions" \
        --config.label org.opencontainers.image.licenses=PostgreSQL >&2
    umoci gc --layout "$oci" >&2
    chmod -R go+rX "$oci"    # umoci writes its blobs 0600
    rm -rf "$stage" "$stage.tar"
    # An oci-archive: the layout directory as a tar (what skopeo's oci-archive: transport reads).
    tar -C "$oci" --format=ustar --sort=name --owner=0 --group=0 --numeric-owner \
        --mtime="@$epoch" -cf "$archive" oci-layout index.json blobs
    echo "$archive"
    exit 0
fi

name="postgresql-$major-idgen"
stage="$out/${name}_${version}_$arch"
deb="$stage.deb"
rm -rf "$stage" "$deb"
# Moved to Debian's directories for version N.
stage_extension "$stage" "/usr/lib/postgresql/$major/lib" "/usr/share/postgresql/$major/extension"
rm -rf "$build"

# The monitoring files (monitoring/README.md: postgres_exporter's queries, the Prometheus alert
# rules and their unit tests, the Grafana dashboard) as documentation, to copy from or point
# the tools at.
docdir="/usr/share/doc/$name/monitoring"
for f in README.md postgres_exporter/queries.yaml prometheus/idgen-alerts.yml \
    prometheus/idgen-alerts.test.yml grafana/idgen.json; do
    install -D -m 0644 "monitoring/$f" "$stage$docdir/$f"
done

mkdir -p "$stage/DEBIAN"
size=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
cat > "$stage/DEBIAN/control" <<CONTROL
Package: $name
Version: $version
Architecture: $arch
Maintainer: idgen developers <idgen@localhost>
Depends: postgresql-$major, libpq5, libc6 (>= 2.34), libgcc-s1
Section: database
Priority: optional
Installed-Size: $size
Description: Snowflake and Leaf-style segment ids generated inside PostgreSQL $major
 idgen is a PostgreSQL extension that generates unique 64-bit ids: time-ordered
 Snowflake ids (snowflake_nextval()) and dense Leaf-style segment numbers
 (segment_nextval('name')), without a separate id service.
 .
 Add idgen to shared_preload_libraries, set idgen.worker_id, restart, then
 CREATE EXTENSION idgen.
CONTROL

idgen_log "dpkg-deb --build $deb"
dpkg-deb --build --root-owner-group "$stage" "$deb" >&2
echo "$deb"
