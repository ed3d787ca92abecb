#!/usr/bin/env python3
"""Reads back idgen's OCI image (scripts/package.sh --image) with Python's standard library
only, so that the check does not trust the tool that wrote it, and unpacks its one layer.

What it checks, following the OCI image and image-layout specifications:
  - the oci-archive holds only oci-layout, index.json and blobs/sha256/<hex> (and their
    directories); oci-layout says imageLayoutVersion 1.0.0;
  - index.json names exactly one manifest with org.opencontainers.image.ref.name = the tag;
  - every blob read (manifest, config, layer) has the sha256 digest and the size its
    descriptor gives; the media types are the OCI ones (manifest, config, tar+gzip layer);
  - the manifest has exactly one layer, and the config's rootfs.diff_ids is [the sha256 of the
    uncompressed layer];
  - the config: os linux, the architecture given, user 65532:65532, the labels
    org.opencontainers.image.title = idgen and .version = the version given;
  - the layer is CloudNativePG's image-volume layout and nothing else: the directories lib,
    share, share/extension (mode 0755), the files lib/idgen.so, share/extension/idgen.control
    and share/extension/idgen--*.sql (mode 0644, owned by root); no absolute name, no `..`, no
    `./` prefix, no link, device or whiteout (.wh.*), no name twice; the SQL files are
    exactly idgen--<version>.sql and the upgrade scripts of sql/ (idgen--A--B.sql);
  - the control file's default_version is the version.

  python3 scripts/oci-read.py ARCHIVE --tag T --arch A --version V [--sql-dir D] [--into DIR]
      check; with --into, unpack the layer into DIR (which must be empty or absent). Prints
      one line per fact checked and exits 1 with `oci-read: <what>` on the first failure.
  python3 scripts/oci-read.py --self-test
      check the checker on small images of its own: a good one passes, and each kind of
      defect above fails with its own message.
"""
import argparse
import gzip
import hashlib
import io
import json
import re
import sys
import tarfile
import tempfile
from pathlib import Path

MANIFEST = "application/vnd.oci.image.manifest.v1+json"
CONFIG = "application/vnd.oci.image.config.v1+json"
LAYER_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"
REF_NAME = "org.opencontainers.image.ref.name"
USER = "65532:65532"
DIRS = {"lib", "share", "share/extension"}


class Bad(Exception):
    """A defect of the image."""


def check(cond, what):
    if not cond:
        raise Bad(what)


def read_archive(path):
    """The regular files of an oci-archive tar, by name; refuses anything else in it."""
    files = {}
    with tarfile.open(path, "r:") as tar:
        for m in tar.getmembers():
            name = m.name[2:] if m.name.startswith("./") else m.name
            name = name.rstrip("/")
            if m.isdir():
                check(name in ("", ".", "blobs", "blobs/sha256"), f"archive: unexpected directory {m.name!r}")
                continue
            check(m.isfile(), f"archive: {m.name!r} is not a regular file")
            check(name in ("oci-layout", "index.json") or re.fullmatch(r"blobs/sha256/[0-9a-f]{64}", name),
                  f"archive: unexpected member {m.name!r}")
            check(name not in files, f"archive: {name!r} twice")
            files[name] = tar.extractfile(m).read()
    return files


def blob(files, desc, media_type, what):
    """The content of the blob a descriptor points at, its digest and size verified."""
    check(desc.get("mediaType") == media_type, f"{what}: media type {desc.get('mediaType')!r}, not {media_type}")
    digest = desc.get("digest", "")
    m = re.fullmatch(r"sha256:([0-9a-f]{64})", digest)
    check(m, f"{what}: digest {digest!r} is not sha256:<64 hex>")
    data = files.get(f"blobs/sha256/{m.group(1)}")
    check(data is not None, f"{what}: blob {digest} is missing")
    check(hashlib.sha256(data).hexdigest() == m.group(1), f"{what}: blob {digest} does not have that digest")
    check(desc.get("size") == len(data), f"{what}: size {desc.get('size')} in the descriptor, {len(data)} in the blob")
    return data


def check_layer(tar_bytes, version, upgrades):
    """The layer's members (name -> TarInfo) if it is exactly CloudNativePG's layout."""
    members = {}
    with tarfile.open(fileobj=io.BytesIO(tar_bytes), mode="r:") as tar:
        for m in tar.getmembers():
            raw = m.name
            check(not raw.startswith("/"), f"layer: absolute name {raw!r}")
            name = raw.rstrip("/") if m.isdir() else raw
            parts = name.split("/")
            check(".." not in parts and "." not in parts and "" not in parts, f"layer: name {raw!r} has '.', '..' or an empty part")
            check(not any(p.startswith(".wh.") for p in parts), f"layer: whiteout {raw!r}")
            check(not (m.issym() or m.islnk()), f"layer: link {raw!r} -> {m.linkname!r}")
            check(m.isdir() or m.isfile(), f"layer: {raw!r} is neither a file nor a directory")
            check(name not in members, f"layer: {name!r} twice")
            if m.isdir():
                check(name in DIRS, f"layer: unexpected directory {raw!r}")
                check(m.mode & 0o7777 == 0o755, f"layer: directory {name} has mode {m.mode & 0o7777:04o}, not 0755")
            else:
                ok = name == "lib/idgen.so" or name == "share/extension/idgen.control" or \
                    re.fullmatch(r"share/extension/idgen--[0-9A-Za-z.]+(--[0-9A-Za-z.]+)?\.sql", name)
                check(ok, f"layer: unexpected file {raw!r}")
                check(m.mode & 0o7777 == 0o644, f"layer: file {name} has mode {m.mode & 0o7777:04o}, not 0644")
            check(m.uid == 0 and m.gid == 0, f"layer: {name} is owned by {m.uid}:{m.gid}, not 0:0")
            members[name] = m
        check(set(members) >= DIRS | {"lib/idgen.so", "share/extension/idgen.control"},
              f"layer: missing {sorted(DIRS | {'lib/idgen.so', 'share/extension/idgen.control'} - set(members))}")
        sql = {n.split("/")[-1] for n in members if n.endswith(".sql")}
        want = {f"idgen--{version}.sql"} | set(upgrades)
        check(sql == want, f"layer: SQL files {sorted(sql)}, expected {sorted(want)}")
        control = tar.extractfile(members["share/extension/idgen.control"]).read().decode()
        m = re.search(r"^\s*default_version\s*=\s*'([^']*)'", control, re.M)
        check(m and m.group(1) == version, f"layer: idgen.control's default_version is {m and m.group(1)!r}, not {version!r}")
        check(members["lib/idgen.so"].size > 0 and
              tar.extractfile(members["lib/idgen.so"]).read(4) == b"\x7fELF", "layer: lib/idgen.so is not an ELF file")
    return members


def read_image(archive, tag, arch, version, upgrades, log=print):
    """Checks the image; returns the uncompressed layer (a tar) and the config."""
    files = read_archive(archive)
    check("oci-layout" in files, "archive: no oci-layout")
    layout = json.loads(files["oci-layout"])
    check(layout.get("imageLayoutVersion") == "1.0.0", f"oci-layout: {layout}")
    check("index.json" in files, "archive: no index.json")
    index = json.loads(files["index.json"])
    check(index.get("schemaVersion") == 2, "index.json: schemaVersion is not 2")
    tagged = [d for d in index.get("manifests", []) if d.get("annotations", {}).get(REF_NAME) == tag]
    check(len(tagged) == 1, f"index.json: {len(tagged)} manifests tagged {tag!r}, not 1")
    log(f"image: tag {tag}, manifest {tagged[0]['digest']}")
    manifest = json.loads(blob(files, tagged[0], MANIFEST, "manifest"))
    check(manifest.get("schemaVersion") == 2, "manifest: schemaVersion is not 2")
    check(manifest.get("mediaType", MANIFEST) == MANIFEST, f"manifest: mediaType {manifest.get('mediaType')!r}")
    config = json.loads(blob(files, manifest.get("config", {}), CONFIG, "config"))
    layers = manifest.get("layers", [])
    check(len(layers) == 1, f"manifest: {len(layers)} layers, not 1")
    compressed = blob(files, layers[0], LAYER_GZIP, "layer")
    layer = gzip.decompress(compressed)
    diff_id = "sha256:" + hashlib.sha256(layer).hexdigest()
    rootfs = config.get("rootfs", {})
    check(rootfs.get("type") == "layers" and rootfs.get("diff_ids") == [diff_id],
          f"config: rootfs {rootfs}, expected diff_ids [{diff_id}]")
    log(f"image: one layer {layers[0]['digest']}, diff_id {diff_id}: digests and sizes verified")
    check(config.get("os") == "linux", f"config: os {config.get('os')!r}")
    check(config.get("architecture") == arch, f"config: architecture {config.get('architecture')!r}, not {arch!r}")
    cfg = config.get("config", {})
    check(cfg.get("User") == USER, f"config: user {cfg.get('User')!r}, not {USER}")
    labels = cfg.get("Labels") or {}
    check(labels.get("org.opencontainers.image.title") == "idgen", f"config: title label {labels.get('org.opencontainers.image.title')!r}")
    check(labels.get("org.opencontainers.image.version") == version,
          f"config: version label {labels.get('org.opencontainers.image.version')!r}, not {version!r}")
    log(f"image: config os linux, architecture {arch}, user {USER}, title idgen, version {version}")
    members = check_layer(layer, version, upgrades)
    log(f"image: layer holds exactly {', '.join(sorted(n for n in members if n not in DIRS))}")
    return layer


def unpack(layer, into):
    """Writes the checked layer's directories and files into `into` with their modes."""
    into = Path(into)
    into.mkdir(parents=True, exist_ok=True)
    check(not any(into.iterdir()), f"unpack: {into} is not empty")
    with tarfile.open(fileobj=io.BytesIO(layer), mode="r:") as tar:
        for m in tar.getmembers():
            dest = into / m.name.rstrip("/")
            if m.isdir():
                dest.mkdir(parents=True, exist_ok=True)
            else:
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(tar.extractfile(m).read())
            dest.chmod(m.mode & 0o7777)


def upgrade_scripts(sql_dir):
    return sorted(p.name for p in Path(sql_dir).glob("idgen--*--*.sql"))


# --- self-test ------------------------------------------------------------------------------

def _tarinfo(name, kind=tarfile.REGTYPE, mode=0o644, data=b"", linkname="", uid=0):
    ti = tarfile.TarInfo(name)
    ti.type, ti.mode, ti.size, ti.linkname, ti.uid, ti.gid = kind, mode, len(data), linkname, uid, uid
    return ti, data


def _tar(entries):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for ti, data in entries:
            tar.addfile(ti, io.BytesIO(data) if ti.isfile() else None)
    return buf.getvalue()


def _good_entries(version):
    d = tarfile.DIRTYPE
    return [
        _tarinfo("lib/", d, 0o755), _tarinfo("lib/idgen.so", data=b"\x7fELF...."),
        _tarinfo("share/", d, 0o755), _tarinfo("share/extension/", d, 0o755),
        _tarinfo("share/extension/idgen--0.1.0--1.0.0.sql", data=b"-- up\n"),
        _tarinfo(f"share/extension/idgen--{version}.sql", data=b"-- install\n"),
        _tarinfo("share/extension/idgen.control", data=f"default_version = '{version}'\n".encode()),
    ]


def _write_image(path, tag, layer_tar, *, arch="amd64", config_edit=None, diff_id=None,
                 corrupt_layer=False, extra=None):
    blobs = {}

    def put(data, media_type):
        h = hashlib.sha256(data).hexdigest()
        blobs[h] = data
        return {"mediaType": media_type, "digest": f"sha256:{h}", "size": len(data)}

    layer_gz = gzip.compress(layer_tar, mtime=0)
    layer_desc = put(layer_gz, LAYER_GZIP)
    if corrupt_layer:
        blobs[layer_desc["digest"][7:]] = layer_gz[:-1] + bytes([layer_gz[-1] ^ 1])
    config = {"os": "linux", "architecture": arch,
              "config": {"User": USER, "Labels": {"org.opencontainers.image.title": "idgen",
                                                  "org.opencontainers.image.version": "1.0.0"}},
              "rootfs": {"type": "layers",
                         "diff_ids": [diff_id or "sha256:" + hashlib.sha256(layer_tar).hexdigest()]}}
    if config_edit:
        config_edit(config)
    config_desc = put(json.dumps(config).encode(), CONFIG)
    manifest = {"schemaVersion": 2, "mediaType": MANIFEST, "config": config_desc, "layers": [layer_desc]}
    man_desc = put(json.dumps(manifest).encode(), MANIFEST)
    man_desc["annotations"] = {REF_NAME: tag}
    entries = [_tarinfo("oci-layout", data=b'{"imageLayoutVersion":"1.0.0"}'),
               _tarinfo("index.json", data=json.dumps({"schemaVersion": 2, "manifests": [man_desc]}).encode()),
               _tarinfo("blobs/", tarfile.DIRTYPE, 0o755), _tarinfo("blobs/sha256/", tarfile.DIRTYPE, 0o755)]
    entries += [_tarinfo(f"blobs/sha256/{h}", data=d) for h, d in sorted(blobs.items())]
    entries += extra or []
    Path(path).write_bytes(_tar(entries))


def self_test():
    v, tag, ups = "1.0.0", "18-1.0.0-bookworm", ["idgen--0.1.0--1.0.0.sql"]
    good = _good_entries(v)
    d = tarfile.DIRTYPE
    cases = {
        # name: (layer entries, image options, a word the error must contain)
        "good": (good, {}, None),
        "absolute name": (good + [_tarinfo("/lib/x.so")], {}, "absolute"),
        "dot-dot": (good + [_tarinfo("lib/../../etc/passwd")], {}, "'..'"),
        "dot prefix": ([_tarinfo("./lib/idgen.so")] + good[2:], {}, "'.'"),
        "symlink": (good + [_tarinfo("lib/idgen2.so", tarfile.SYMTYPE, linkname="idgen.so")], {}, "link"),
        "hard link": (good + [_tarinfo("share/extension/idgen--2.sql", tarfile.LNKTYPE, linkname="lib/idgen.so")], {}, "link"),
        "whiteout": (good + [_tarinfo("lib/.wh.old.so")], {}, "whiteout"),
        "other file": (good + [_tarinfo("lib/libpq.so.5", data=b"\x7fELF")], {}, "unexpected file"),
        "other directory": (good + [_tarinfo("licenses/", d, 0o755)], {}, "unexpected directory"),
        "device": (good + [_tarinfo("lib/null", tarfile.CHRTYPE)], {}, "neither"),
        "twice": (good + [_tarinfo("lib/idgen.so", data=b"\x7fELF")], {}, "twice"),
        "file mode": ([_tarinfo("lib/", d, 0o755), _tarinfo("lib/idgen.so", mode=0o755, data=b"\x7fELF")] + good[2:], {}, "0644"),
        "directory mode": ([_tarinfo("lib/", d, 0o700)] + good[1:], {}, "0755"),
        "owner": ([_tarinfo("lib/", d, 0o755), _tarinfo("lib/idgen.so", data=b"\x7fELF", uid=1000)] + good[2:], {}, "owned"),
        "no library": (good[:1] + good[2:], {}, "missing"),
        "an upgrade script missing": ([e for e in good if "0.1.0" not in e[0].name], {}, "SQL files"),
        "default_version": (good[:-1] + [_tarinfo("share/extension/idgen.control", data=b"default_version = '0.9'\n")], {}, "default_version"),
        "bad digest": (good, {"corrupt_layer": True}, "digest"),
        "diff_id": (good, {"diff_id": "sha256:" + "0" * 64}, "diff_ids"),
        "architecture": (good, {"arch": "arm64"}, "architecture"),
        "user": (good, {"config_edit": lambda c: c["config"].update(User="0")}, "user"),
        "version label": (good, {"config_edit": lambda c: c["config"]["Labels"].update(
            {"org.opencontainers.image.version": "2"})}, "version label"),
        "stray archive member": (good, {"extra": [_tarinfo("notes.txt")]}, "unexpected member"),
    }
    with tempfile.TemporaryDirectory() as tmp:
        for name, (entries, opts, word) in cases.items():
            path = Path(tmp) / "image.oci.tar"
            _write_image(path, tag, _tar(entries), **opts)
            try:
                layer = read_image(path, tag, "amd64", v, ups, log=lambda *_: None)
                err = None
            except Bad as e:
                err = str(e)
            if word is None:
                check(err is None, f"self-test: the good image fails: {err}")
                into = Path(tmp) / "unpacked"
                unpack(layer, into)
                check((into / "lib/idgen.so").read_bytes().startswith(b"\x7fELF") and
                      oct((into / "share/extension").stat().st_mode & 0o777) == "0o755",
                      "self-test: the good image does not unpack")
            else:
                check(err is not None, f"self-test: {name}: passes")
                check(word in err, f"self-test: {name}: fails for another reason: {err}")
        _write_image(Path(tmp) / "image.oci.tar", tag, _tar(good))
        try:
            read_image(Path(tmp) / "image.oci.tar", "other-tag", "amd64", v, ups, log=lambda *_: None)
            raise SystemExit("oci-read: self-test: a tag that is not there passes")
        except Bad as e:
            check("tagged" in str(e), f"self-test: missing tag fails for another reason: {e}")
    print(f"oci-read self-test: ok (a good image, {len(cases)} cases and a missing tag)")


def main(argv):
    if argv[1:] == ["--self-test"]:
        try:
            self_test()
        except Bad as e:
            sys.exit(f"oci-read: {e}")
        return
    p = argparse.ArgumentParser(description="check idgen's OCI image and unpack its layer")
    p.add_argument("archive")
    p.add_argument("--tag", required=True)
    p.add_argument("--arch", required=True)
    p.add_argument("--version", required=True)
    p.add_argument("--sql-dir", default=str(Path(__file__).resolve().parent.parent / "sql"))
    p.add_argument("--into")
    a = p.parse_args(argv[1:])
    try:
        layer = read_image(a.archive, a.tag, a.arch, a.version, upgrade_scripts(a.sql_dir))
        if a.into:
            unpack(layer, a.into)
            print(f"image: unpacked into {a.into}")
    except Bad as e:
        sys.exit(f"oci-read: {e}")


if __name__ == "__main__":
    main(sys.argv)
