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
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
idgen_setup

major=15
case "${1:-}" in
    --pg) major="${2:?--pg takes a major version}" ;;
    "") ;;
    *) echo "usage: bash scripts/package.sh [--pg 15|16|17|18]" >&2; exit 2 ;;
esac
pgc=$(idgen_pg_fetch "$major")

version=$(sed -nE 's/^version = "([^"]+)"$/\1/p' Cargo.toml | head -1)
arch=$(dpkg --print-architecture)
name="postgresql-$major-idgen"
out="$CARGO_TARGET_DIR/debian"
build="$out/pgrx-pg$major"
stage="$out/${name}_${version}_$arch"
deb="$stage.deb"
rm -rf "$build" "$stage" "$deb"
mkdir -p "$out"

idgen_log "cargo pgrx package (release, PostgreSQL $major) into $build"
cargo pgrx package --pg-config "$pgc" --out-dir "$build" >&2

# Exactly what PostgreSQL loads: the library, the control file and the SQL scripts, moved from
# the directories of the installation built against to Debian's for version N.
libdir="/usr/lib/postgresql/$major/lib"
extdir="/usr/share/postgresql/$major/extension"
mkdir -p "$stage$libdir" "$stage$extdir"
cp "$build$("$pgc" --pkglibdir)/idgen.so" "$stage$libdir/"
cp "$build$("$pgc" --sharedir)"/extension/idgen* "$stage$extdir/"
for f in "$stage$libdir/idgen.so" "$stage$extdir/idgen.control" "$stage$extdir/idgen--$version.sql"; do
    [ -f "$f" ] || { echo "package: $f is missing" >&2; exit 1; }
done
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
