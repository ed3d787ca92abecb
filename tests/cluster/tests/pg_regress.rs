//! Runs the pg_regress golden files of `tests/pg_regress` (the SQL surface, one file per
//! surface, every file of `sql/` in name order) against a server started here, with the
//! pg_regress of the PostgreSQL under test (its pgxs).

use std::path::Path;
use std::process::Command;

use idgen_cluster_tests::{pg_regress_path, Cluster};

#[test]
fn golden_files_match() {
    // Read at run time: a binary reused from another checkout through a shared
    // CARGO_TARGET_DIR would carry that checkout's compile-time path.
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR").expect("run by cargo test");
    let suite = Path::new(&manifest_dir)
        .join("../pg_regress")
        .canonicalize()
        .unwrap();
    let mut tests: Vec<String> = std::fs::read_dir(suite.join("sql"))
        .unwrap()
        .filter_map(|e| {
            e.ok()?
                .file_name()
                .to_str()?
                .strip_suffix(".sql")
                .map(str::to_owned)
        })
        .collect();
    tests.sort();
    assert!(!tests.is_empty(), "no tests in {suite:?}");

    let c = Cluster::start(
        "regress",
        &["shared_preload_libraries = 'idgen'", "idgen.worker_id = 5"],
    );
    let out_dir = std::env::temp_dir().join(format!("idgen-regress-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out_dir);
    std::fs::create_dir_all(&out_dir).unwrap();
    let out = Command::new(pg_regress_path())
        .arg(format!("--inputdir={}", suite.display()))
        .arg(format!("--outputdir={}", out_dir.display()))
        .arg(format!("--bindir={}", idgen_cluster_tests::pg_bin()))
        .args([
            "--host=127.0.0.1",
            &format!("--port={}", c.port()),
            "--user=postgres",
            "--dbname=idgen_regress",
        ])
        .args(&tests)
        .output()
        .expect("run pg_regress");
    let stdout = String::from_utf8_lossy(&out.stdout);
    print!("{stdout}");
    if !out.status.success() {
        let diffs = std::fs::read_to_string(out_dir.join("regression.diffs")).unwrap_or_default();
        panic!(
            "pg_regress failed:\n{stdout}\n{}\n{diffs}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let _ = std::fs::remove_dir_all(&out_dir);
}
