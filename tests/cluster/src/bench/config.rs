//! What a run measures and how long: the full benchmark and the quick one the tests run.

use super::{Generator, Protocol};

/// What a run measures, and how long.
#[derive(Debug, Clone)]
pub struct Config {
    /// Rounds of every measurement (medians over these).
    pub rounds: usize,
    /// Ids per bulk statement, one measurement each.
    pub bulk_sizes: Vec<u64>,
    /// Rows per `INSERT ... SELECT`.
    pub insert_rows: u64,
    /// Most ids drawn from the ticket table in one statement: every `UPDATE` of its one row
    /// within one transaction walks all the row's earlier versions, so a statement costs
    /// O(N²) (10,000 ids take a second, 1,000,000 would take hours).
    pub ticket_cap: u64,
    /// How long each pgbench run is.
    pub pgbench: PgbenchLength,
    /// pgbench client counts, one measurement each.
    pub clients: Vec<u32>,
    /// pgbench protocols (`-M`), one measurement each.
    pub protocols: Vec<Protocol>,
}

/// The length of a pgbench run.
#[derive(Debug, Clone, Copy)]
pub enum PgbenchLength {
    /// `-T seconds`.
    Seconds(u32),
    /// `-t transactions` per client.
    Transactions(u32),
}

impl Config {
    /// The ids or rows `g` draws where the configuration says `n`: `n`, or the ticket cap.
    pub fn bulk_size_of(&self, g: &Generator, n: u64) -> u64 {
        if g.capped {
            n.min(self.ticket_cap)
        } else {
            n
        }
    }

    /// The distinct bulk sizes `g` is measured at.
    pub fn bulk_sizes_of(&self, g: &Generator) -> Vec<u64> {
        let mut sizes: Vec<u64> = self
            .bulk_sizes
            .iter()
            .map(|&n| self.bulk_size_of(g, n))
            .collect();
        sizes.dedup();
        sizes
    }

    /// The full benchmark: 3 rounds, 1M and 10M ids, 1M rows, 10 s pgbench runs at
    /// 1, 2 and 8 clients in both protocols (about 35 minutes on 2 cores).
    pub fn full() -> Config {
        Config {
            rounds: 3,
            bulk_sizes: vec![1_000_000, 10_000_000],
            insert_rows: 1_000_000,
            ticket_cap: 10_000,
            pgbench: PgbenchLength::Seconds(10),
            clients: vec![1, 2, 8],
            protocols: vec![Protocol::Simple, Protocol::Prepared],
        }
    }

    /// Every measurement of [`Config::full`] at a size that takes seconds: for the test suite.
    pub fn quick() -> Config {
        Config {
            rounds: 3,
            bulk_sizes: vec![1_000, 10_000],
            insert_rows: 1_000,
            ticket_cap: 1_000,
            pgbench: PgbenchLength::Transactions(100),
            clients: vec![1, 2, 8],
            protocols: vec![Protocol::Simple, Protocol::Prepared],
        }
    }
}
