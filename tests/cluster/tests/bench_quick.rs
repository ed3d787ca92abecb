//! The benchmark's quick mode (`scripts/bench.sh --quick`), so that the benchmark never rots:
//! every generator is measured in every round of every measurement, and the report shows each
//! cell. No timing is asserted: timings belong to the benchmark itself.

use idgen_cluster_tests::bench::{self, available, Config};

#[test]
fn quick_benchmark_measures_every_cell() {
    let config = Config::quick();
    let report = bench::run(&config, |_| {});
    assert_eq!(report.missing(), Vec::<String>::new(), "cells not measured");
    let rows = report.rows();
    // Every generator this server has (uuidv7() from 18 on), and every protocol.
    for g in available(report.server_version_num) {
        assert!(
            rows.iter().any(|r| r.generator == g.name),
            "{} has no row",
            g.name
        );
    }
    for r in &rows {
        assert_eq!(
            r.rounds,
            config.rounds,
            "{} / {}",
            r.generator,
            r.measurement.label()
        );
        assert!(
            r.min.is_finite() && r.min <= r.median && r.median <= r.max,
            "{} / {}: median {} outside {}..{}",
            r.generator,
            r.measurement.label(),
            r.median,
            r.min,
            r.max
        );
    }
    // One CSV line per row besides the header, and every target evaluated.
    assert_eq!(report.csv().lines().count(), rows.len() + 1);
    let targets = report.targets();
    assert!(
        targets.iter().all(|t| t.met.is_some()),
        "targets without a measurement: {targets:?}"
    );
    let md = report.markdown();
    for p in &config.protocols {
        assert!(
            md.contains(&format!("-M {}", p.name())),
            "no -M {} row",
            p.name()
        );
    }
    for g in available(report.server_version_num) {
        assert!(md.contains(g.name), "the Markdown lacks {}", g.name);
    }
}
