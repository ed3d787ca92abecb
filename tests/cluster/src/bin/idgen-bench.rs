//! `idgen-bench [--quick] [--seconds S]`: runs idgen's benchmark (see `idgen_cluster_tests::bench`), prints
//! the report and writes it as Markdown and CSV to `<out-dir>/bench.md` and `bench.csv`
//! (`--out-dir DIR`, default `target/bench` of the project). `--seconds S`: each pgbench run
//! lasts S seconds instead of 10. Run it through `scripts/bench.sh`,
//! which builds and installs the release build first. Exits non-zero when a cell was not
//! measured.

use std::path::PathBuf;
use std::time::Instant;

use idgen_cluster_tests::bench::{self, Config, PgbenchLength};

fn main() {
    let mut args = std::env::args().skip(1);
    let mut config = Config::full();
    // At run time: a binary built from another clone into the shared target directory must
    // still write into this one.
    let manifest =
        std::env::var("CARGO_MANIFEST_DIR").expect("run by cargo run (scripts/bench.sh)");
    let mut out_dir = PathBuf::from(manifest).join("../../target/bench");
    let mut seconds = None;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--quick" => config = Config::quick(),
            "--out-dir" => out_dir = args.next().expect("--out-dir DIR").into(),
            "--seconds" => {
                let s = args.next().and_then(|s| s.parse().ok());
                seconds = Some(s.expect("--seconds S (whole seconds)"));
            }
            other => {
                eprintln!(
                    "usage: idgen-bench [--quick] [--seconds S] [--out-dir DIR] (unknown: {other})"
                );
                std::process::exit(2);
            }
        }
    }
    // After the loop, so that --quick does not undo it.
    if let Some(s) = seconds {
        config.pgbench = PgbenchLength::Seconds(s);
    }
    let start = Instant::now();
    let report = bench::run(&config, |step| {
        eprintln!("[{:>6.1} s] {step}", start.elapsed().as_secs_f64())
    });
    let md = report.markdown();
    println!("{md}");
    std::fs::create_dir_all(&out_dir).expect("create the output directory");
    let out_dir = out_dir.canonicalize().unwrap();
    std::fs::write(out_dir.join("bench.md"), &md).unwrap();
    std::fs::write(out_dir.join("bench.csv"), report.csv()).unwrap();
    eprintln!(
        "wrote {0}/bench.md and {0}/bench.csv in {1:.0} s",
        out_dir.display(),
        start.elapsed().as_secs_f64()
    );
    let missing = report.missing();
    if !missing.is_empty() {
        eprintln!("not measured:\n  {}", missing.join("\n  "));
        std::process::exit(1);
    }
}
