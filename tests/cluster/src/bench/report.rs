//! The analysis of a run: cells over rounds, ratios within a round, what was not measured, and
//! the benchmark's targets.

use std::collections::BTreeMap;

use super::*;

/// The median of `values`, sorted in place.
pub fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len() % 2 == 1 {
        values[mid]
    } else {
        (values[mid - 1] + values[mid]) / 2.0
    }
}

impl Report {
    /// The value of `generator`'s `measurement` in `round`.
    fn value(&self, generator: &str, measurement: Measurement, round: usize) -> Option<f64> {
        self.samples
            .iter()
            .find(|s| s.generator == generator && s.measurement == measurement && s.round == round)
            .map(|s| s.value)
    }

    /// Median over rounds of `f(this round's value, reference's value in that round)`.
    fn versus(
        &self,
        generator: &str,
        measurement: Measurement,
        reference: &str,
        reference_measurement: Measurement,
        f: impl Fn(f64, f64) -> f64,
    ) -> Option<f64> {
        let mut per_round: Vec<f64> = (0..self.config.rounds)
            .filter_map(|r| {
                Some(f(
                    self.value(generator, measurement, r)?,
                    self.value(reference, reference_measurement, r)?,
                ))
            })
            .collect();
        (!per_round.is_empty()).then(|| median(&mut per_round))
    }

    /// The measurements the configuration asks of `g`.
    fn expected(&self, g: &Generator) -> Vec<Measurement> {
        let mut m = Vec::new();
        if g.bulk.is_some() {
            m.extend(
                self.config
                    .bulk_sizes_of(g)
                    .into_iter()
                    .map(|n| Measurement::Bulk { n }),
            );
        }
        if g.name == SNOWFLAKE {
            m.push(Measurement::Drift);
        }
        if g.column.is_some() || g.insert_keys {
            m.extend([
                Measurement::InsertSeconds,
                Measurement::InsertRate,
                Measurement::IndexSize,
            ]);
        }
        if g.statement.is_some() {
            for &protocol in &self.config.protocols {
                m.extend(
                    self.config
                        .clients
                        .iter()
                        .map(|&clients| Measurement::PerStatement { clients, protocol }),
                );
            }
        }
        m
    }

    /// Cells (generator, measurement) without a value in every round: empty after a complete
    /// run.
    pub fn missing(&self) -> Vec<String> {
        let mut missing = Vec::new();
        for g in available(self.server_version_num) {
            for m in self.expected(g) {
                let rounds = self
                    .samples
                    .iter()
                    .filter(|s| s.generator == g.name && s.measurement == m)
                    .count();
                if rounds != self.config.rounds {
                    missing.push(format!(
                        "{} / {}: {rounds} of {} rounds",
                        g.name,
                        m.label(),
                        self.config.rounds
                    ));
                }
            }
        }
        missing
    }

    /// The rows of the report: per measurement, every generator that has it.
    pub fn rows(&self) -> Vec<Row> {
        let mut cells: BTreeMap<(Measurement, usize), Vec<&Sample>> = BTreeMap::new();
        for s in &self.samples {
            let index = GENERATORS
                .iter()
                .position(|g| g.name == s.generator)
                .unwrap();
            cells.entry((s.measurement, index)).or_default().push(s);
        }
        let mut rows = Vec::new();
        for ((m, index), samples) in cells {
            let g = &GENERATORS[index];
            let mut values: Vec<f64> = samples.iter().map(|s| s.value).collect();
            let (min, max) = values
                .iter()
                .fold((f64::MAX, f64::MIN), |(lo, hi), &v| (lo.min(v), hi.max(v)));
            let ratio = |a: f64, b: f64| a / b;
            // A capped generator's sizes differ from the others': only its tps compare.
            let vs_nextval = match m {
                Measurement::Drift => None,
                Measurement::PerStatement { .. } => {
                    self.versus(g.name, m, NEXTVAL_CACHE_1, m, ratio)
                }
                _ if g.capped => None,
                _ => self.versus(g.name, m, NEXTVAL_CACHE_1, m, ratio),
            };
            let vs_floor = match m {
                Measurement::Bulk { .. } if g.capped => None,
                Measurement::Bulk { .. } => self.versus(g.name, m, CALL_FLOOR, m, |a, b| a - b),
                Measurement::PerStatement { .. } => self.versus(g.name, m, CONSTANT, m, ratio),
                Measurement::InsertSeconds | Measurement::InsertRate if !g.capped => {
                    self.versus(g.name, m, CONSTANT, m, ratio)
                }
                _ => None,
            };
            let vs_call = match m {
                Measurement::PerStatement { .. } => self.versus(g.name, m, CALL_FLOOR, m, ratio),
                _ => None,
            };
            rows.push(Row {
                generator: g.name,
                measurement: m,
                n: samples[0].n,
                rounds: samples.len(),
                median: median(&mut values),
                min,
                max,
                vs_nextval,
                vs_floor,
                vs_call,
            });
        }
        rows
    }

    /// The benchmark's targets on this run.
    pub fn targets(&self) -> Vec<Target> {
        let mut targets = Vec::new();
        let ratio = |a: f64, b: f64| a / b;
        for g in [SNOWFLAKE, SEGMENT] {
            for &clients in &self.config.clients {
                let protocol = Protocol::Prepared;
                let m = Measurement::PerStatement { clients, protocol };
                let r = self.versus(g, m, CONSTANT, m, ratio);
                targets.push(Target {
                    what: format!("{g}: {} ≥ 0.97 × SELECT 1", m.label()),
                    measured: r.map_or("-".into(), |r| format!("{r:.3} ×")),
                    met: r.map(|r| r >= 0.97),
                });
            }
        }
        for &n in &self.config.bulk_sizes {
            let m = Measurement::Bulk { n };
            for (g, within) in [(SNOWFLAKE, 40.0), (SEGMENT, 60.0)] {
                let d = self.versus(g, m, CALL_FLOOR, m, |a, b| a - b);
                targets.push(Target {
                    what: format!(
                        "{g}: bulk {} within {within} ns/id of the no-op pgrx function",
                        count(n)
                    ),
                    measured: d.map_or("-".into(), |d| format!("{d:+.1} ns/id")),
                    met: d.map(|d| d <= within),
                });
                let r = self.versus(g, m, NEXTVAL_CACHE_1000, m, ratio);
                targets.push(Target {
                    what: format!(
                        "{g}: bulk {} faster per id than nextval CACHE 1000",
                        count(n)
                    ),
                    measured: r.map_or("-".into(), |r| format!("{r:.3} × its time")),
                    met: r.map(|r| r < 1.0),
                });
            }
        }
        for g in [SNOWFLAKE, SEGMENT] {
            let m = Measurement::InsertSeconds;
            let r = self.versus(g, m, BIGSERIAL, m, ratio);
            targets.push(Target {
                what: format!("{g}: insert time within 5% of bigserial's"),
                measured: r.map_or("-".into(), |r| format!("{r:.3} × bigserial")),
                met: r.map(|r| r <= 1.05),
            });
            let m = Measurement::IndexSize;
            let r = self.versus(g, m, BIGSERIAL, m, ratio);
            targets.push(Target {
                what: format!("{g}: primary key no larger than bigserial's"),
                measured: r.map_or("-".into(), |r| format!("{r:.3} × bigserial")),
                met: r.map(|r| r <= 1.0),
            });
        }
        let drift: Vec<f64> = self
            .samples
            .iter()
            .filter(|s| s.measurement == Measurement::Drift)
            .map(|s| s.value)
            .collect();
        let worst = drift.iter().copied().reduce(f64::max);
        targets.push(Target {
            what: format!(
                "snowflake drift after the largest bulk ≤ idgen.max_drift_ms ({} ms)",
                self.max_drift_ms
            ),
            measured: worst.map_or("-".into(), |w| format!("{w:.0} ms at most")),
            met: worst.map(|w| self.max_drift_ms < 0 || w <= self.max_drift_ms as f64),
        });
        targets
    }
}
