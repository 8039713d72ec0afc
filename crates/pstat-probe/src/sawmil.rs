//! sAwMIL (sparse-aware multiple-instance learning, Bunescu & Mooney 2007 as patched by the
//! Trilemma-of-Truth repository), exactly as the upstream notes §4.2–4.8 describe:
//! standardize → cap bags to 10 instances keeping the known positives → η → stage 1 sMIL QP
//! on positive-bag means → select positive instances → stage 2 single-instance SVM with C/N →
//! unit-norm w and the midpoint bias. Deviations from upstream are listed in docs/deviations.md.

use crate::bags::TrainingSet;
use crate::error::{ProbeError, Result, invalid};
use crate::linalg::{dot, norm};
use crate::probe::{CSetting, NoiseFloorRefit, ProbeParams, Readout, SearchedC, TrainedProbe};
use crate::qp::{DualProblem, DualSolution, Tolerance, solve};
use crate::standardize::Standardizer;
use pstat_tables::Probe;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use search::{one_se_choice, search_c};

pub mod search;

/// A statement is as true as its truest token: sAwMIL is a multiple-instance probe.
pub const READOUT: Readout = Readout::MaxOverTokens;

/// Support vectors are α above this (misvm's `sv_cutoff`).
const SV_CUTOFF: f64 = 1e-7;
/// If fewer than this fraction of positive-bag instances are selected, ignore the mask.
const FALLBACK_FRACTION: f64 = 0.05;

/// Settings of the sAwMIL probe (statement score = max over its tokens). The default:
/// C searched over {0.05, 0.1, 0.5, 1, 10} by 3-fold CV on 600 bags, final fit
/// on 1800 bags, bags capped at 10 instances, seed 42.
#[derive(Debug, Clone)]
pub struct SawMilParams {
    /// `None`: choose C by cross-validation over `c_grid` (upstream `search: True`).
    pub c: Option<f64>,
    /// C values the search tries, in the order the one-SE rule reads them.
    pub c_grid: Vec<f64>,
    /// Number of CV folds of the C search (at least 2 when C is searched).
    pub cv_folds: usize,
    /// Bags used to fit each CV model (the first ones of the fold's training bags).
    pub cv_bag_limit: usize,
    /// Bags used for the final fit (the first ones of the training set).
    pub train_bag_limit: usize,
    /// Cap on a bag's instances; larger bags keep their known positives and a seeded sample of
    /// the others.
    pub max_bag_size: usize,
    /// Seeds the capping (bag i uses seed + i), the CV shuffle and the solver's order.
    pub seed: u64,
    /// The QP solver's tolerances and work caps.
    pub tolerance: Tolerance,
}

impl Default for SawMilParams {
    fn default() -> Self {
        SawMilParams {
            c: None,
            c_grid: vec![0.05, 0.1, 0.5, 1.0, 10.0],
            cv_folds: 3,
            cv_bag_limit: 600,
            train_bag_limit: 1800,
            max_bag_size: 10,
            seed: 42,
            tolerance: Tolerance::default(),
        }
    }
}

impl SawMilParams {
    /// The same settings with C fixed (no search).
    pub fn with_c(mut self, c: f64) -> Self {
        self.c = Some(c);
        self
    }

    /// Check the settings (for a config validated before any work starts; every fit checks
    /// them too).
    pub fn validate(&self) -> Result<()> {
        let bad_c = |c: f64| !(c.is_finite() && c > 0.0);
        if let Some(c) = self.c.filter(|&c| bad_c(c)) {
            return invalid(format!("C must be positive and finite, got {c}"));
        }
        if self.c.is_none() && (self.c_grid.is_empty() || self.c_grid.iter().any(|&c| bad_c(c))) {
            return invalid(format!(
                "C grid must be non-empty positive values, got {:?}",
                self.c_grid
            ));
        }
        if self.max_bag_size == 0 || self.train_bag_limit == 0 || self.cv_bag_limit == 0 {
            return invalid("max_bag_size, train_bag_limit and cv_bag_limit must be positive");
        }
        if self.c.is_none() && self.cv_folds < 2 {
            return invalid(format!(
                "cv_folds must be at least 2, got {}",
                self.cv_folds
            ));
        }
        Ok(())
    }
}

impl ProbeParams for SawMilParams {
    fn fit(&self, set: &TrainingSet) -> Result<TrainedProbe> {
        Ok(self.fit_report(set)?.probe)
    }

    fn training_bags(&self, available: usize) -> usize {
        available.min(self.train_bag_limit)
    }

    /// The fit shuffles, caps and limits its bags by its seed, so another seed is another
    /// chance.
    fn noise_floor_refit(&self) -> NoiseFloorRefit {
        NoiseFloorRefit::Reshuffle
    }

    fn c(&self) -> CSetting {
        match self.c {
            Some(c) => CSetting::Fixed(c),
            None => CSetting::Searched,
        }
    }

    /// The CV search of [`SawMilParams::fit_report`] on the baseline's labels.
    fn search_c(&self, baseline: &TrainingSet) -> Result<SearchedC> {
        let report = self.fit_report(baseline)?;
        let Some(c) = report.probe.c else {
            return invalid("a sAwMIL fit records its C");
        };
        Ok(SearchedC {
            params: Box::new(self.clone().with_c(c)),
            c,
            scores: report
                .search
                .iter()
                .flat_map(|s| &s.scores)
                .map(|s| (s.c, s.degenerate.is_none().then_some(s.mean)))
                .collect(),
            skipped: report
                .search
                .iter()
                .flat_map(|s| s.skipped())
                .map(|(c, why)| (c, why.to_string()))
                .collect(),
            baseline: report.probe,
        })
    }
}

/// A fitted probe with what the fit decided on the way.
#[derive(Debug, Clone)]
pub struct SawMilReport {
    /// The fitted probe.
    pub probe: TrainedProbe,
    /// η: known positives over capped instances, over every bag; stage 2 keeps about
    /// round(η·L_p) of the positive bags' L_p instances as positives.
    pub eta: f64,
    /// Stage-2 labels of the positive bags' (capped) instances, in bag order: true = +1.
    pub selected: Vec<bool>,
    /// The C search, when C was not fixed.
    pub search: Option<search::CSearch>,
}

impl SawMilParams {
    /// Fit as [`ProbeParams::fit`] does, and also report η, the stage-2 selection and the C
    /// search. Errors as there; [`ProbeError::Degenerate`] when every C of the grid is.
    pub fn fit_report(&self, set: &TrainingSet) -> Result<SawMilReport> {
        self.validate()?;
        set.require_both_classes("sAwMIL")?;
        let scaler = Standardizer::fit((0..set.len()).map(|i| set.bags.bag(i)), set.bags.dim());
        let prepared = PreparedBags::new(
            set,
            &scaler,
            self.max_bag_size,
            self.train_bag_limit,
            self.seed,
        );
        let (fit, c, search) = match self.c {
            Some(c) => (prepared.fit(c, self)?, c, None),
            None => {
                let mut s = search_c(set, self)?;
                loop {
                    // A C that fit every fold can still be degenerate on the whole training set:
                    // skip it too and take the next choice of the rule.
                    match prepared.fit(s.chosen, self) {
                        Ok(fit) => break (fit, s.chosen, Some(s)),
                        Err(ProbeError::Degenerate(why)) => {
                            let failed = s.chosen;
                            if let Some(score) = s.scores.iter_mut().find(|x| x.c == failed) {
                                score.degenerate = Some(format!("whole training set: {why}"));
                            }
                            s.chosen = one_se_choice(&s.scores).ok_or_else(|| {
                            ProbeError::Degenerate(format!(
                                "every C of the grid gives a degenerate fit (last tried C = {failed}: {why})"
                            ))
                        })?;
                        }
                        Err(e) => return Err(e),
                    }
                }
            }
        };
        Ok(SawMilReport {
            probe: TrainedProbe {
                kind: Probe::Sawmil,
                direction: fit.direction,
                bias: fit.bias,
                scaler,
                c: Some(c),
                eta: Some(prepared.eta),
                converged: Some(fit.converged),
            },
            eta: prepared.eta,
            selected: fit.selected,
            search,
        })
    }
}

/// Training bags after standardization and capping, ready for any C.
pub(crate) struct PreparedBags {
    dim: usize,
    pub(crate) eta: f64,
    /// (label, standardized rows [n × dim], known-positive flags), the first `bag_limit` bags.
    bags: Vec<(i8, Vec<f64>, Vec<bool>)>,
}

pub(crate) struct StageTwoFit {
    pub(crate) direction: Vec<f64>,
    pub(crate) bias: f64,
    selected: Vec<bool>,
    /// Both stages' QPs met their tolerances before the solver's caps.
    pub(crate) converged: bool,
}

impl PreparedBags {
    /// η runs over every bag (positive and negative) after capping, before the bag limit.
    pub(crate) fn new(
        set: &TrainingSet,
        scaler: &Standardizer,
        max_bag_size: usize,
        bag_limit: usize,
        seed: u64,
    ) -> Self {
        let dim = set.bags.dim();
        let (mut known_total, mut size_total) = (0usize, 0usize);
        let mut bags = Vec::with_capacity(set.len().min(bag_limit));
        for i in 0..set.len() {
            let known = set.known(i);
            let keep = cap_bag(known, max_bag_size, seed.wrapping_add(i as u64));
            known_total += keep.iter().filter(|&&k| known[k]).count();
            size_total += keep.len();
            if i < bag_limit {
                let raw = set.bags.bag(i);
                let rows: Vec<f32> = keep
                    .iter()
                    .flat_map(|&k| raw[k * dim..(k + 1) * dim].iter().copied())
                    .collect();
                bags.push((
                    set.labels[i],
                    scaler.transform(&rows),
                    keep.iter().map(|&k| known[k]).collect(),
                ));
            }
        }
        PreparedBags {
            dim,
            eta: known_total as f64 / size_total as f64,
            bags,
        }
    }

    pub(crate) fn fit(&self, c: f64, params: &SawMilParams) -> Result<StageTwoFit> {
        let d = self.dim;
        let (neg, pos): (Vec<_>, Vec<_>) = self.bags.iter().partition(|b| b.0 == -1);
        if neg.is_empty() || pos.is_empty() {
            return Err(ProbeError::Invalid(format!(
                "sAwMIL: the first {} bags hold {} negative and {} positive bags; both are needed",
                self.bags.len(),
                neg.len(),
                pos.len()
            )));
        }
        let neg_rows: Vec<f64> = neg.iter().flat_map(|b| b.1.iter().copied()).collect();
        let l_n = neg_rows.len() / d;
        let x_p = pos.len();

        // Stage 1 (sMIL): every negative instance, then every positive bag as the mean of its
        // instances (misvm's "linear_av" set kernel), margin target 2/|B| − 1.
        let mut rows = neg_rows.clone();
        let mut rho = vec![1.0; l_n];
        for (_, r, _) in &pos {
            let size = r.len() / d;
            let mut mean = vec![0.0; d];
            for row in r.chunks_exact(d) {
                mean.iter_mut()
                    .zip(row)
                    .for_each(|(m, x)| *m += x / size as f64);
            }
            rows.extend(mean);
            rho.push(2.0 / size as f64 - 1.0);
        }
        let y: Vec<f64> = (0..l_n)
            .map(|_| -1.0)
            .chain((0..x_p).map(|_| 1.0))
            .collect();
        let upper: Vec<f64> = (0..l_n)
            .map(|_| c / l_n as f64)
            .chain((0..x_p).map(|_| c / x_p as f64))
            .collect();
        let problem = DualProblem {
            rows: &rows,
            dim: d,
            y: &y,
            rho: &rho,
            upper: &upper,
        };
        let stage1 = solve(&problem, params.tolerance, params.seed);
        warn_unconverged(&stage1, 1, c, &params.tolerance);
        // If w₁ = 0 is optimal every instance ties (so all known positives pass the cutoff);
        // ranking by rounding noise instead would make the selection arbitrary.
        let w1 = if stage1.is_degenerate(&problem) {
            vec![0.0; d]
        } else {
            stage1.w
        };

        // Selection: rank positive-bag instances by stage-1 score (the intercept is a
        // constant shift, so w₁ alone ranks them).
        let pos_rows: Vec<f64> = pos.iter().flat_map(|b| b.1.iter().copied()).collect();
        let pos_known: Vec<bool> = pos.iter().flat_map(|b| b.2.iter().copied()).collect();
        let scores: Vec<f64> = pos_rows.chunks_exact(d).map(|x| dot(x, &w1)).collect();
        let selected = select_positives(&scores, &pos_known, self.eta, x_p);

        // Stage 2: single-instance SVM over all instances, bound C/N.
        let l_p = pos_known.len();
        let n = l_n + l_p;
        let mut rows = neg_rows;
        rows.extend_from_slice(&pos_rows);
        let y: Vec<f64> = (0..l_n)
            .map(|_| -1.0)
            .chain(selected.iter().map(|&s| if s { 1.0 } else { -1.0 }))
            .collect();
        let upper = vec![c / n as f64; n];
        let rho = vec![1.0; n];
        let problem = DualProblem {
            rows: &rows,
            dim: d,
            y: &y,
            rho: &rho,
            upper: &upper,
        };
        let stage2 = solve(&problem, params.tolerance, params.seed);
        warn_unconverged(&stage2, 2, c, &params.tolerance);
        if stage2.is_degenerate(&problem) {
            return Err(ProbeError::Degenerate(format!(
                "stage 2: w = 0 is optimal at C = {c} (every instance scores the same)"
            )));
        }
        let (direction, bias) = linearize(&rows, d, &y, &stage2.alpha, &stage2.w, c)?;
        Ok(StageTwoFit {
            direction,
            bias,
            selected,
            converged: stage1.converged && stage2.converged,
        })
    }
}

/// A QP that stopped at its caps still gives a usable but approximate w; the fit goes on, says
/// so here, and records `converged = false` in the probe.
fn warn_unconverged(solution: &DualSolution, stage: u8, c: f64, tol: &Tolerance) {
    if !solution.converged {
        tracing::warn!(
            "sAwMIL stage {stage} at C = {c}: the QP stopped at its caps ({} coordinate epochs, {} multiplier updates) before reaching its tolerances; the fit is approximate",
            tol.max_epochs,
            tol.max_outer
        );
    }
}

/// Rows kept when a bag is capped to `max` instances: all known positives stay; the other
/// `max − known` are sampled without replacement from the unknown rows, in the sampler's
/// order, followed by the known rows in bag order. With the known positives being the last
/// K rows this is upstream's `process_single_bag`. Bags within the cap are unchanged.
pub fn cap_bag(known: &[bool], max: usize, seed: u64) -> Vec<usize> {
    let n = known.len();
    if n <= max {
        return (0..n).collect();
    }
    let mut unknown: Vec<usize> = (0..n).filter(|&k| !known[k]).collect();
    let known_rows = (0..n).filter(|&k| known[k]);
    let take = max.saturating_sub(n - unknown.len()).min(unknown.len());
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    for k in 0..take {
        let j = rng.random_range(k..unknown.len());
        unknown.swap(k, j);
    }
    unknown.truncate(take);
    unknown.extend(known_rows);
    unknown
}

/// Stage-2 labels for the positive bags' instances (notes §4.6): n = round(η·L_p), clamped
/// to [X_p, L_p]; an instance is positive iff its score is at least the n-th largest score
/// (ties included) and it is a known positive. If that selects fewer than 5% of L_p, the mask
/// is ignored.
pub fn select_positives(
    scores: &[f64],
    known: &[bool],
    eta: f64,
    positive_bags: usize,
) -> Vec<bool> {
    let l_p = scores.len();
    if l_p == 0 {
        return Vec::new();
    }
    let n = ((l_p as f64 * eta).round_ties_even() as usize)
        .min(l_p)
        .max(positive_bags)
        .min(l_p);
    let mut sorted = scores.to_vec();
    sorted.sort_by(|a, b| b.total_cmp(a));
    let cutoff = sorted[n.max(1) - 1];
    let masked: Vec<bool> = scores
        .iter()
        .zip(known)
        .map(|(&s, &k)| s >= cutoff && k)
        .collect();
    if (masked.iter().filter(|&&m| m).count() as f64) < FALLBACK_FRACTION * l_p as f64 {
        return scores.iter().map(|&s| s >= cutoff).collect();
    }
    masked
}

/// Upstream `linearize(normalize=True)`: ŵ = w/‖w‖ and b = −½(mean over positive SVs of
/// x·ŵ + mean over negative SVs of x·ŵ). SVs are sv_cutoff < α < C − sv_cutoff, compared
/// with the unscaled C as upstream (so in practice every SV counts).
fn linearize(
    rows: &[f64],
    d: usize,
    y: &[f64],
    alpha: &[f64],
    w: &[f64],
    c: f64,
) -> Result<(Vec<f64>, f64)> {
    let len = norm(w);
    if !(len > 0.0 && len.is_finite()) {
        return Err(ProbeError::Degenerate(format!(
            "stage-2 weight vector has norm {len}"
        )));
    }
    let unit: Vec<f64> = w.iter().map(|v| v / len).collect();
    let (mut sum, mut count) = ([0.0f64; 2], [0usize; 2]);
    for (i, x) in rows.chunks_exact(d).enumerate() {
        if alpha[i] > SV_CUTOFF && alpha[i] < c - SV_CUTOFF {
            let class = usize::from(y[i] > 0.0);
            sum[class] += dot(x, &unit);
            count[class] += 1;
        }
    }
    if count[0] == 0 || count[1] == 0 {
        return Err(ProbeError::Degenerate(format!(
            "stage 2 has {} negative and {} positive support vectors; the midpoint bias needs both",
            count[0], count[1]
        )));
    }
    let bias = -0.5 * (sum[1] / count[1] as f64 + sum[0] / count[0] as f64);
    Ok((unit, bias))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capping_keeps_known_positives_last_and_is_seeded() {
        let known: Vec<bool> = (0..30).map(|j| j >= 28).collect();
        let kept = cap_bag(&known, 10, 7);
        assert_eq!(kept.len(), 10);
        assert_eq!(&kept[8..], &[28, 29]);
        assert!(kept[..8].iter().all(|&k| k < 28));
        let mut distinct = kept.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), 10);
        assert_eq!(kept, cap_bag(&known, 10, 7));
        assert_ne!(kept, cap_bag(&known, 10, 8));
        assert_eq!(cap_bag(&known[..9], 10, 7), (0..9).collect::<Vec<_>>());
    }

    #[test]
    fn selection_uses_nth_largest_with_ties_and_mask() {
        // L_p = 10, η = 0.3 → n = 3; cutoff = 3rd largest = 0.8 (tied twice).
        let scores = [0.1, 0.9, 0.8, 0.8, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7];
        let known = [
            false, true, true, false, false, false, false, false, false, true,
        ];
        let sel = select_positives(&scores, &known, 0.3, 2);
        let expect = [
            false, true, true, false, false, false, false, false, false, false,
        ];
        assert_eq!(sel, expect);
    }

    #[test]
    fn selection_floor_is_number_of_positive_bags() {
        // round(10·0.1) = 1 but 4 positive bags → n = 4 → cutoff 0.6.
        let scores = [0.1, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.0];
        let known = [true; 10];
        let sel = select_positives(&scores, &known, 0.1, 4);
        assert_eq!(sel.iter().filter(|&&s| s).count(), 4);
        assert!(sel[1] && sel[2] && sel[3] && sel[4]);
    }

    #[test]
    fn selection_falls_back_when_mask_leaves_under_five_percent() {
        // 40 instances, n = 4 top scores; the known positives are all low-scoring, so the
        // mask selects 0 < 0.05·40 = 2 and the threshold alone decides.
        let scores: Vec<f64> = (0..40).map(|k| k as f64).collect();
        let known: Vec<bool> = (0..40).map(|k| k < 2).collect();
        let sel = select_positives(&scores, &known, 0.1, 1);
        let chosen: Vec<usize> = (0..40).filter(|&k| sel[k]).collect();
        assert_eq!(chosen, vec![36, 37, 38, 39]);
        // One known positive among the top 4 selects 1 < 2: still the fallback.
        let mut known = known;
        known[39] = true;
        assert_eq!(
            select_positives(&scores, &known, 0.1, 1)
                .iter()
                .filter(|&&s| s)
                .count(),
            4
        );
        // Two known positives in the top 4 reach 2 ≥ 2: the mask holds.
        known[38] = true;
        let sel = select_positives(&scores, &known, 0.1, 1);
        assert_eq!(
            (0..40).filter(|&k| sel[k]).collect::<Vec<_>>(),
            vec![38, 39]
        );
    }

    /// Positive bags whose every instance is shifted (no instance-level signal for stage 2):
    /// w = 0 is optimal at some C on some folds. The search skips those C values, says which,
    /// and the chosen C fits the whole training set.
    #[test]
    fn c_search_skips_degenerate_c_values_and_says_which() {
        use crate::bags::Bags;
        let (n_bags, dim, size) = (10, 4, 5);
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let mut values = Vec::new();
        let mut offsets = vec![0];
        let mut labels = Vec::new();
        for b in 0..n_bags {
            let y: i8 = if b % 2 == 0 { 1 } else { -1 };
            for _ in 0..size {
                for j in 0..dim {
                    let shift = if j == 0 { 3.0 * f32::from(y) } else { 0.0 };
                    values.push(rng.random::<f32>() - 0.5 + shift);
                }
            }
            offsets.push(offsets.last().unwrap() + size);
            labels.push(y);
        }
        let set = TrainingSet::with_last_known(Bags::new(dim, values, offsets).unwrap(), labels, 2)
            .unwrap();
        let report = SawMilParams::default().fit_report(&set).unwrap();
        let search = report.search.unwrap();
        let skipped: Vec<f64> = search.skipped().map(|(c, _)| c).collect();
        assert!(!skipped.is_empty(), "{search:?}");
        assert!(!skipped.contains(&search.chosen));
        assert_eq!(report.probe.c, Some(search.chosen));
        assert!(
            search
                .skipped()
                .all(|(_, why)| why.contains("w = 0 is optimal"))
        );
    }

    /// Separable bags: a positive bag's two known positives (its last two rows) sit at +3 on
    /// feature 0, every other instance (negative bags, and the rest of positive bags) near −1.
    fn separable_bags() -> (crate::bags::Bags, Vec<i8>) {
        let (n_bags, dim, size) = (40, 3, 6);
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let (mut values, mut offsets, mut labels) = (Vec::new(), vec![0], Vec::new());
        for b in 0..n_bags {
            let y: i8 = if b % 2 == 0 { 1 } else { -1 };
            for k in 0..size {
                let centre = if y == 1 && k >= size - 2 { 3.0 } else { -1.0 };
                values.push(centre + 0.3 * (rng.random::<f32>() - 0.5));
                values.extend((1..dim).map(|_| rng.random::<f32>() - 0.5));
            }
            offsets.push(offsets.last().unwrap() + size);
            labels.push(y);
        }
        (
            crate::bags::Bags::new(dim, values, offsets).unwrap(),
            labels,
        )
    }

    /// Every C of a wide range fits separable bags, with the direction along +feature 0 and
    /// every bag on the right side of 0, and the search over that range chooses one of them.
    #[test]
    fn separable_bags_fit_at_every_c_with_the_right_sign() {
        let (bags, labels) = separable_bags();
        let set = TrainingSet::with_last_known(bags.clone(), labels.clone(), 2).unwrap();
        let grid = vec![0.1, 1.0, 10.0, 100.0];
        for &c in &grid {
            let probe = SawMilParams::default()
                .with_c(c)
                .fit(&set)
                .unwrap_or_else(|e| panic!("C = {c}: {e}"));
            assert!(probe.direction[0] > 0.9, "C = {c}: {:?}", probe.direction);
            assert_eq!(probe.converged, Some(true), "C = {c}");
            for (score, y) in probe.scores(&bags).iter().zip(&labels) {
                assert_eq!(TrainedProbe::label(*score), *y, "C = {c}: score {score}");
            }
        }
        let search = SawMilParams {
            c_grid: grid,
            ..SawMilParams::default()
        }
        .fit_report(&set)
        .unwrap()
        .search
        .unwrap();
        assert_eq!(search.skipped().count(), 0, "{search:?}");
    }

    /// The search's fits are handed to the workers largest C first; the scores still come in
    /// grid order (here not ascending) and are the same bits whatever the number of workers.
    #[test]
    fn c_search_scores_do_not_depend_on_the_workers() {
        let (bags, labels) = separable_bags();
        let set = TrainingSet::with_last_known(bags, labels, 2).unwrap();
        let params = SawMilParams {
            c_grid: vec![1.0, 0.1, 100.0, 10.0],
            ..SawMilParams::default()
        };
        let search_on = |threads: usize| {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            pool.install(|| params.fit_report(&set).unwrap().search.unwrap())
        };
        let bits = |s: &search::CSearch| -> Vec<(u64, Vec<u64>)> {
            s.scores
                .iter()
                .map(|c| {
                    (
                        c.c.to_bits(),
                        c.fold_ap.iter().map(|a| a.to_bits()).collect(),
                    )
                })
                .collect()
        };
        let one = search_on(1);
        let grid: Vec<f64> = one.scores.iter().map(|s| s.c).collect();
        assert_eq!(grid, params.c_grid);
        for threads in [2, 3, 4] {
            let many = search_on(threads);
            assert_eq!(bits(&one), bits(&many), "{threads} workers");
            assert_eq!(one.chosen.to_bits(), many.chosen.to_bits());
        }
    }

    /// A fit whose QP is cut off at the caps still returns its probe, pointing the right way and
    /// marked unconverged (also in the saved file); within the default caps it converges.
    #[test]
    fn a_capped_fit_reports_that_it_did_not_converge() {
        let (bags, labels) = separable_bags();
        let set = TrainingSet::with_last_known(bags, labels, 2).unwrap();
        let params = SawMilParams::default().with_c(1.0);
        assert_eq!(params.fit(&set).unwrap().converged, Some(true));
        let capped = SawMilParams {
            tolerance: Tolerance {
                max_epochs: 2,
                ..Tolerance::default()
            },
            ..params
        };
        // Cut off after two epochs, the solver's b is far off and its objective worse than
        // w = 0's, which used to be reported as a degenerate fit.
        let probe = capped.fit(&set).unwrap();
        assert_eq!(probe.converged, Some(false));
        assert!(probe.direction[0] > 0.0, "{:?}", probe.direction);
        let saved = TrainedProbe::from_bytes(&probe.to_bytes()).unwrap();
        assert_eq!(saved.converged, Some(false));
    }

    #[test]
    fn eta_counts_known_positives_over_capped_sizes_of_all_bags() {
        use crate::bags::Bags;
        // Bag sizes 3, 12 (capped to 10), 4 with the last two known: η = 6 / 17.
        let sizes = [3usize, 12, 4];
        let mut offsets = vec![0];
        for s in sizes {
            offsets.push(offsets.last().unwrap() + s);
        }
        let values: Vec<f32> = (0..19).map(|k| k as f32).collect();
        let set =
            TrainingSet::with_last_known(Bags::new(1, values, offsets).unwrap(), vec![1, -1, 1], 2)
                .unwrap();
        let scaler = Standardizer::fit(std::iter::once(set.bags.values()), 1);
        let prepared = PreparedBags::new(&set, &scaler, 10, 1, 42);
        assert!((prepared.eta - 6.0 / 17.0).abs() < 1e-15);
        assert_eq!(prepared.bags.len(), 1);
    }
}
