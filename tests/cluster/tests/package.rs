//! Pins the Debian package (`scripts/package.sh`): with the development install removed,
//! `apt-get install ./idgen-pg15_<version>_amd64.deb` puts the library, the control file and the
//! SQL scripts where Debian's PostgreSQL 15 looks, and a fresh server preloading idgen runs
//! `CREATE EXTENSION idgen` and hands out ids. The package is removed again at the end.
//!
//! It replaces system files, so it cannot run beside the other cluster tests: it is `#[ignore]`d
//! there, and `scripts/test.sh` runs it in a tier of its own (`--ignored`), with the package
//! built first (`IDGEN_DEB`), then reinstalls the development build.

use std::path::Path;
use std::process::Command;

use idgen_cluster_tests::{Cluster, One};

const LIBDIR: &str = "/usr/lib/postgresql/15/lib";
const EXTDIR: &str = "/usr/share/postgresql/15/extension";

fn run(program: &str, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?}:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Removes the package when the test ends, passed or not.
struct RemoveOnDrop;

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = Command::new("apt-get")
            .args(["remove", "-y", "-q", "idgen-pg15"])
            .env("DEBIAN_FRONTEND", "noninteractive")
            .output();
    }
}

/// idgen's files in the system PostgreSQL directories.
fn installed_files() -> Vec<String> {
    let mut files = Vec::new();
    for dir in [LIBDIR, EXTDIR] {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let name = entry.file_name().into_string().unwrap();
            if name == "idgen.so" || name == "idgen.control" || name.starts_with("idgen--") {
                files.push(format!("{dir}/{name}"));
            }
        }
    }
    files.sort();
    files
}

#[test]
#[ignore = "replaces system files: run alone by scripts/test.sh"]
fn the_package_installs_and_creates_the_extension() {
    let deb =
        std::env::var("IDGEN_DEB").expect("IDGEN_DEB: the package built by scripts/package.sh");
    assert!(Path::new(&deb).is_file(), "{deb}");

    // Remove the development install (and any earlier package), so that only the package counts.
    let _ = Command::new("dpkg")
        .args(["--purge", "idgen-pg15"])
        .output();
    for f in installed_files() {
        std::fs::remove_file(&f).unwrap();
    }
    assert!(installed_files().is_empty());

    let _remove = RemoveOnDrop;
    run("apt-get", &["install", "-y", "-q", &deb]);
    let status = run(
        "dpkg-query",
        &["-W", "-f=${Status} ${Version}", "idgen-pg15"],
    );
    assert!(status.starts_with("install ok installed"), "{status}");
    let version = status.rsplit(' ').next().unwrap().to_owned();
    let listed = run("dpkg", &["-L", "idgen-pg15"]);
    let files = installed_files();
    for f in &files {
        assert!(
            listed.lines().any(|l| l == f),
            "{f} is not the package's:\n{listed}"
        );
    }
    for needed in [
        format!("{LIBDIR}/idgen.so"),
        format!("{EXTDIR}/idgen.control"),
        format!("{EXTDIR}/idgen--{version}.sql"),
    ] {
        assert!(files.contains(&needed), "{needed} missing: {files:?}");
    }

    let c = Cluster::with_idgen("package", 8, &[]);
    let mut client = c.connect("postgres");
    let installed: String =
        client.one("SELECT extversion FROM pg_extension WHERE extname = 'idgen'");
    assert_eq!(installed, version);
    client
        .batch_execute("SELECT segment_create('from_package', start => 10)")
        .unwrap();
    let row = client
        .query_one(
            "SELECT segment_nextval('from_package'), (snowflake_decode(snowflake_nextval())).worker_id",
            &[],
        )
        .unwrap();
    assert_eq!((row.get::<_, i64>(0), row.get::<_, i32>(1)), (10, 8));
    drop(client);
    drop(c);

    // Removing the package takes its files away again.
    drop(_remove);
    assert!(installed_files().is_empty(), "{:?}", installed_files());
}
