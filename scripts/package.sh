#!/usr/bin/env bash
# Builds the Debian package idgen-pg15_<version>_amd64.deb from the release build:
# `cargo pgrx package` stages the library, the control file and the install and upgrade scripts
# under usr/, and dpkg-deb wraps them with a DEBIAN/control that depends on Debian's
# postgresql-15. The package lands in $CARGO_TARGET_DIR/debian/; its path is the last line.
# Install it with: apt-get install ./idgen-pg15_<version>_amd64.deb
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
idgen_setup

version=$(sed -nE 's/^version = "([^"]+)"$/\1/p' Cargo.toml | head -1)
arch=$(dpkg --print-architecture)
out="$CARGO_TARGET_DIR/debian"
stage="$out/idgen-pg15_${version}_$arch"
deb="$stage.deb"
rm -rf "$stage" "$deb"
mkdir -p "$out"

idgen_log "cargo pgrx package (release) into $stage"
cargo pgrx package --pg-config "$PG_CONFIG" --out-dir "$stage" >&2

# The staged tree must hold exactly what PostgreSQL loads: the library, the control file and
# the SQL scripts, under the system PostgreSQL 15's directories.
libdir=$("$PG_CONFIG" --pkglibdir)
extdir=$("$PG_CONFIG" --sharedir)/extension
for f in "$stage$libdir/idgen.so" "$stage$extdir/idgen.control" "$stage$extdir/idgen--$version.sql"; do
    [ -f "$f" ] || { echo "package: $f is missing" >&2; exit 1; }
done

mkdir -p "$stage/DEBIAN"
size=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
cat > "$stage/DEBIAN/control" <<CONTROL
Package: idgen-pg15
Version: $version
Architecture: $arch
Maintainer: idgen developers <idgen@localhost>
Depends: postgresql-15, libc6 (>= 2.34), libgcc-s1
Section: database
Priority: optional
Installed-Size: $size
Description: Snowflake and Leaf-style segment ids generated inside PostgreSQL 15
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
