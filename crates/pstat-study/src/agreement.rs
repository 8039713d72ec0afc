//! Beyond the paper: where the instantiations of one Θ agree statement by statement. For each
//! condition both instantiations judged in the main configurations (the clustering's input,
//! [`crate::stage::Retractions`]), their retraction sets over the held-out True statements are
//! compared by Jaccard overlap and Cohen's κ (pstat-stability's [`retraction_agreement`]).

use crate::stage::{Cell, Retractions};
use pstat_stability::{Bootstrap, compare, retracted_by_all, retraction_agreement};
use pstat_tables::{AgreementRow, Instantiation};

/// The pairs of instantiations compared, in table order.
const PAIRS: [(Instantiation, Instantiation); 3] = [
    (Instantiation::Representational, Instantiation::Behavioral),
    (Instantiation::Representational, Instantiation::Contextual),
    (Instantiation::Behavioral, Instantiation::Contextual),
];

/// The rows of `agreement.csv` for `cell`: one per compared pair and condition both judged.
pub(crate) fn agreement_rows(
    cell: &Cell,
    retractions: &Retractions,
) -> anyhow::Result<Vec<AgreementRow>> {
    let study = cell.study;
    let held_out = study.held_out_true(cell.domain);
    let bootstrap = Bootstrap::new(
        study.config.bootstrap_resamples,
        study.seed_for(&format!("agreement:{}:{}", cell.model.name, cell.domain)),
    )?;
    let mut rows = Vec::new();
    for (a, b) in PAIRS {
        for condition in study.conditions.conditions.iter().map(|c| &c.name) {
            let judged = |i: Instantiation| retractions.judged.get(&format!("{i}:{condition}"));
            let (Some((base_a, pert_a)), Some((base_b, pert_b))) = (judged(a), judged(b)) else {
                continue;
            };
            let cmp_a = compare(&held_out, base_a, pert_a)?;
            let cmp_b = compare(&held_out, base_b, pert_b)?;
            let agreement = retraction_agreement(&cmp_a, &cmp_b, bootstrap)?;
            rows.push(AgreementRow {
                model: cell.model.name.clone(),
                domain: cell.domain.to_string(),
                condition: condition.clone(),
                a,
                b,
                n: agreement.n,
                retracted_a: agreement.retracted_a,
                retracted_b: agreement.retracted_b,
                retracted_both: agreement.retracted_both,
                jaccard: agreement.jaccard.value,
                jaccard_lo: agreement.jaccard.lo,
                jaccard_hi: agreement.jaccard.hi,
                kappa: agreement.kappa.value,
                kappa_lo: agreement.kappa.lo,
                kappa_hi: agreement.kappa.hi,
                retracted_by_both: retracted_by_all(&[&cmp_a, &cmp_b]).join(";"),
            });
        }
    }
    Ok(rows)
}
