//! The report as Markdown and CSV.

use std::fmt::Write as _;

use super::*;

impl Report {
    /// The report as Markdown: the machine, one table of every cell, the targets.
    pub fn markdown(&self) -> String {
        let mut md = String::new();
        let length = match self.config.pgbench {
            PgbenchLength::Seconds(s) => format!("-T {s}"),
            PgbenchLength::Transactions(t) => format!("-t {t}"),
        };
        writeln!(
            md,
            "{} rounds, interleaved; medians (min–max). pgbench {length}, -M simple and prepared.\n",
            self.config.rounds
        )
        .unwrap();
        writeln!(md, "| machine | |\n|---|---|").unwrap();
        for (k, v) in &self.machine {
            writeln!(md, "| {k} | {v} |").unwrap();
        }
        writeln!(
            md,
            "\n| measurement | generator | n | median | min–max | ÷ nextval CACHE 1 | vs floor / ceiling | ÷ no-op function |\n|---|---|--:|--:|--:|--:|--:|--:|"
        )
        .unwrap();
        for r in self.rows() {
            let unit = r.measurement.unit();
            let vs_floor = match (r.measurement, r.vs_floor) {
                (_, None) => "".to_owned(),
                (Measurement::Bulk { .. }, Some(d)) => format!("{d:+.1} ns"),
                (_, Some(x)) => format!("{x:.3} ×"),
            };
            writeln!(
                md,
                "| {} | {} | {} | {} {unit} | {}–{} | {} | {vs_floor} | {} |",
                r.measurement.label(),
                r.generator,
                match r.measurement {
                    Measurement::PerStatement { .. } => String::new(),
                    _ => count(r.n),
                },
                fmt(r.median),
                fmt(r.min),
                fmt(r.max),
                r.vs_nextval.map_or("".into(), |x| format!("{x:.3}")),
                r.vs_call.map_or("".into(), |x| format!("{x:.3} ×")),
            )
            .unwrap();
        }
        writeln!(
            md,
            "\nvs floor / ceiling: bulk, ns/id above the no-op pgrx function; per statement, tps ÷ `SELECT 1`'s (÷ no-op function: tps ÷ that of `SELECT` of a pgrx function that returns a constant, the floor of any function call); insert time and rate, ÷ those of an insert that supplies its own keys. Ratios are taken within a round. The ticket table's bulk and insert draw at most {} ids: each `UPDATE` of its row in one transaction walks the row's earlier versions, O(N²).\n",
            count(self.config.ticket_cap)
        )
        .unwrap();
        writeln!(md, "| target | measured | met |\n|---|--:|---|").unwrap();
        for t in self.targets() {
            let met = match t.met {
                Some(true) => "yes",
                Some(false) => "**no**",
                None => "not measured",
            };
            writeln!(md, "| {} | {} | {met} |", t.what, t.measured).unwrap();
        }
        md
    }

    /// The rows as CSV, one line per cell, with a header line.
    pub fn csv(&self) -> String {
        let mut csv = String::from(
            "measurement,generator,unit,n,rounds,median,min,max,vs_nextval_cache_1,vs_floor_or_ceiling,vs_noop_function\n",
        );
        let opt = |x: Option<f64>| x.map_or(String::new(), |x| format!("{x:.4}"));
        for r in self.rows() {
            writeln!(
                csv,
                "\"{}\",\"{}\",{},{},{},{:.4},{:.4},{:.4},{},{},{}",
                r.measurement.label(),
                r.generator.replace('"', "\"\""),
                r.measurement.unit(),
                r.n,
                r.rounds,
                r.median,
                r.min,
                r.max,
                opt(r.vs_nextval),
                opt(r.vs_floor),
                opt(r.vs_call)
            )
            .unwrap();
        }
        csv
    }
}

/// A value with precision to suit its size.
fn fmt(v: f64) -> String {
    let a = v.abs();
    if a >= 100_000.0 {
        count(v.round() as u64)
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}
