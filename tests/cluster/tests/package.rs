//! Pins the Debian package of each PostgreSQL major version (`scripts/package.sh --pg N`,
//! `postgresql-N-idgen`): its control fields and file list put the library, the control file
//! and the SQL scripts where Debian's `postgresql-N` looks, and, with the development install
//! removed, a fresh server preloading idgen runs `CREATE EXTENSION idgen` from the package's
//! files and hands out ids.
//!
//! On 15 the package is installed with `apt-get` into Debian's PostgreSQL 15 and removed again
//! at the end. Debian 12 has no `postgresql-16` or `-18` for the package to depend on, so on
//! those the package's files are unpacked (`dpkg-deb -x`) into the server
//! `scripts/pg-versions.sh` fetched (`IDGEN_PG_BIN`), in place of the development install.
//!
//! It replaces installed files, so it cannot run beside the other cluster tests: it is
//! `#[ignore]`d there, and `scripts/test.sh` runs it in a tier of its own (`--ignored`), with the
//! package built first (`IDGEN_DEB`, `IDGEN_PG_MAJOR`), then reinstalls the development build.

use std::path::Path;
use std::process::Command;

use idgen_cluster_tests::{as_postgres, Cluster, One};

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

/// Removes the package (on 15) when the test ends, passed or not.
struct RemoveOnDrop(String);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = Command::new("apt-get")
            .args(["remove", "-y", "-q", &self.0])
            .env("DEBIAN_FRONTEND", "noninteractive")
            .output();
    }
}

/// The server's library and extension directories (`pg_config`).
fn server_dirs() -> [String; 2] {
    let ask = |opt: &str| {
        let out = as_postgres("pg_config")
            .arg(opt)
            .output()
            .expect("pg_config");
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    };
    [
        ask("--pkglibdir"),
        format!("{}/extension", ask("--sharedir")),
    ]
}

/// idgen's files in `dirs`.
fn installed_files(dirs: &[String]) -> Vec<String> {
    let mut files = Vec::new();
    for dir in dirs {
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
#[ignore = "replaces installed files: run alone by scripts/test.sh"]
fn the_package_installs_and_creates_the_extension() {
    let deb =
        std::env::var("IDGEN_DEB").expect("IDGEN_DEB: the package built by scripts/package.sh");
    assert!(Path::new(&deb).is_file(), "{deb}");
    let major = std::env::var("IDGEN_PG_MAJOR").unwrap_or_else(|_| "15".into());
    let package = format!("postgresql-{major}-idgen");

    // The control fields: the name, the version, and the server and client library it needs.
    let field = |f: &str| run("dpkg-deb", &["-f", &deb, f]).trim().to_owned();
    assert_eq!(field("Package"), package);
    let version = field("Version");
    let depends = field("Depends");
    for needed in [format!("postgresql-{major},"), "libpq5,".to_owned()] {
        assert!(
            depends.contains(&needed),
            "Depends: {depends} lacks {needed}"
        );
    }
    // Debian's directories for version `major`, and nothing else.
    let debian_dirs = [
        format!("/usr/lib/postgresql/{major}/lib"),
        format!("/usr/share/postgresql/{major}/extension"),
    ];
    let listed = run("dpkg-deb", &["-c", &deb]);
    for needed in [
        format!("{}/idgen.so", debian_dirs[0]),
        format!("{}/idgen.control", debian_dirs[1]),
        format!("{}/idgen--{version}.sql", debian_dirs[1]),
    ] {
        assert!(
            listed.lines().any(|l| l.ends_with(&format!(".{needed}"))),
            "{needed} is not in the package:\n{listed}"
        );
    }

    // Remove the development install (and any earlier package), so that only the package counts.
    let dirs = server_dirs();
    if major == "15" {
        // And the package's name before 0.4.0.
        for old in [&package, "idgen-pg15"] {
            let _ = Command::new("dpkg").args(["--purge", old]).output();
        }
    }
    for f in installed_files(&dirs) {
        std::fs::remove_file(&f).unwrap();
    }
    assert!(installed_files(&dirs).is_empty());

    let _remove = (major == "15").then(|| RemoveOnDrop(package.clone()));
    if major == "15" {
        assert_eq!(dirs, debian_dirs, "the server is Debian's PostgreSQL 15");
        run("apt-get", &["install", "-y", "-q", &deb]);
        let status = run("dpkg-query", &["-W", "-f=${Status} ${Version}", &package]);
        assert_eq!(status, format!("install ok installed {version}"));
        let owned = run("dpkg", &["-L", &package]);
        for f in installed_files(&dirs) {
            assert!(
                owned.lines().any(|l| l == f),
                "{f} is not the package's:\n{owned}"
            );
        }
    } else {
        // No postgresql-N to install it beside: unpack it and copy its files into the server.
        let root = tempdir_for(&major);
        run("dpkg-deb", &["-x", &deb, &root]);
        for (from, to) in debian_dirs.iter().zip(&dirs) {
            for entry in std::fs::read_dir(format!("{root}{from}"))
                .unwrap()
                .flatten()
            {
                std::fs::copy(entry.path(), Path::new(to).join(entry.file_name())).unwrap();
            }
        }
        std::fs::remove_dir_all(&root).unwrap();
    }
    let files = installed_files(&dirs);
    for needed in [
        format!("{}/idgen.so", dirs[0]),
        format!("{}/idgen.control", dirs[1]),
        format!("{}/idgen--{version}.sql", dirs[1]),
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

    if major == "15" {
        // Removing the package takes its files away again.
        drop(_remove);
        assert!(
            installed_files(&dirs).is_empty(),
            "{:?}",
            installed_files(&dirs)
        );
    }
}

/// An empty directory to unpack the package into.
fn tempdir_for(major: &str) -> String {
    let dir = std::env::temp_dir().join(format!("idgen-package-pg{major}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir.display().to_string()
}
