//! Table 1 of the paper: statements per domain × kind, affirmative and negated.

use crate::load::Dataset;
use crate::statement::{Domain, Kind};
use serde::Serialize;
use std::collections::BTreeMap;

/// Share of |D| used for the Noise control (Appendix B.1.4): n_noise = 0.10·|D|.
pub const NOISE_SHARE: f64 = 0.10;

/// Number of Noise sequences for a domain with `n_statements` statements.
pub fn noise_count(n_statements: usize) -> usize {
    (NOISE_SHARE * n_statements as f64).round() as usize
}

/// Statements of one domain and kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Statements not negated (0 for Noise).
    pub affirmative: usize,
    /// Negated statements (0 for Noise).
    pub negated: usize,
    /// affirmative + negated; for Noise (which has no sentences) the number of sequences.
    pub total: usize,
}

/// `{"city_locations": {"true": {"affirmative": .., "negated": .., "total": ..}, ...}, ...}`
/// with every kind present (zeros where a kind has no data).
pub type Table1 = BTreeMap<Domain, BTreeMap<Kind, Counts>>;

/// Table 1 of the given datasets; Noise's total is [`noise_count`] of the domain's statements.
pub fn table1(datasets: &[Dataset]) -> Table1 {
    datasets
        .iter()
        .map(|data| {
            let mut row: BTreeMap<Kind, Counts> =
                Kind::ALL.iter().map(|k| (*k, Counts::default())).collect();
            for s in &data.statements {
                let c = row.get_mut(&s.kind).expect("all kinds present");
                if s.negated {
                    c.negated += 1;
                } else {
                    c.affirmative += 1;
                }
                c.total += 1;
            }
            row.get_mut(&Kind::Noise).expect("noise present").total =
                noise_count(data.statements.len());
            (data.domain, row)
        })
        .collect()
}

/// Plain-text rendering for the terminal.
pub fn render_table1(table: &Table1) -> String {
    let kinds = Kind::TEXTUAL;
    let mut out = format!("{:<20}", "domain");
    for k in kinds {
        out.push_str(&format!("{:>16}", k.title()));
    }
    out.push_str(&format!("{:>8}\n{:<20}", "Noise", ""));
    for _ in kinds {
        out.push_str(&format!("{:>16}", "A / N"));
    }
    out.push_str(&format!("{:>8}\n", "n"));
    for (domain, row) in table {
        out.push_str(&format!("{:<20}", domain.title()));
        for k in kinds {
            let c = row[&k];
            out.push_str(&format!(
                "{:>16}",
                format!("{} / {}", c.affirmative, c.negated)
            ));
        }
        out.push_str(&format!("{:>8}\n", row[&Kind::Noise].total));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::{DataRoot, load_all};

    #[test]
    fn bundled_counts_reproduce_table_1() {
        let table = table1(&load_all(&DataRoot::bundled()).unwrap());
        let ac = |d: Domain, k: Kind| (table[&d][&k].affirmative, table[&d][&k].negated);
        use Domain::*;
        use Kind::*;
        assert_eq!(ac(CityLocations, True), (1392, 1376));
        assert_eq!(ac(CityLocations, False), (1358, 1374));
        assert_eq!(ac(CityLocations, SyntheticTf), (876, 876));
        assert_eq!(ac(MedIndications, True), (1522, 1439));
        assert_eq!(ac(MedIndications, False), (1419, 1523));
        assert_eq!(ac(MedIndications, SyntheticTf), (478, 522));
        assert_eq!(ac(WordDefinitions, True), (1269, 1251));
        assert_eq!(ac(WordDefinitions, False), (1223, 1257));
        assert_eq!(ac(WordDefinitions, SyntheticTf), (1747, 1753));
        let n: usize = table[&CityLocations]
            .iter()
            .filter(|(k, _)| **k != Noise)
            .map(|(_, c)| c.total)
            .sum();
        assert_eq!(table[&CityLocations][&Noise].total, noise_count(n));
    }
}
