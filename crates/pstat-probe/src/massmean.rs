//! The Mass-Mean ("mean difference") probe of Marks & Tegmark as ported by the
//! Trilemma-of-Truth repository (notes §5, paper Appendix J): standardized last tokens, class
//! means, an optional pooled OAS-shrunk inverse covariance, a unit direction and the
//! negated midpoint of the projected class means as bias.

use crate::bags::TrainingSet;
use crate::error::{ProbeError, Result};
use crate::linalg::{cholesky, cholesky_solve, dot, norm};
use crate::probe::{NoiseFloorRefit, ProbeParams, Readout, TrainedProbe};
use crate::standardize::Standardizer;
use pstat_tables::Probe;

/// Mass-Mean reads a statement's last token, as upstream.
pub const READOUT: Readout = Readout::LastToken;

/// Added to the pooled covariance's diagonal before inversion, as upstream.
const RIDGE: f64 = 1e-6;

/// Settings of the Mass-Mean probe (statement score = its last token); the default scales by
/// the pooled shrunk inverse covariance, as upstream.
#[derive(Debug, Clone)]
pub struct MassMeanParams {
    /// Scale the mean difference by the pooled shrunk inverse covariance (upstream default).
    pub with_covariance: bool,
}

impl Default for MassMeanParams {
    fn default() -> Self {
        MassMeanParams {
            with_covariance: true,
        }
    }
}

impl ProbeParams for MassMeanParams {
    fn fit(&self, set: &TrainingSet) -> Result<TrainedProbe> {
        set.require_both_classes("Mass-Mean")?;
        let d = set.bags.dim();
        let last = |i: usize| {
            let bag = set.bags.bag(i);
            &bag[bag.len() - d..]
        };
        let scaler = Standardizer::fit((0..set.len()).map(last), d);
        let class_rows = |label: i8| -> Vec<f64> {
            let rows: Vec<f32> = (0..set.len())
                .filter(|&i| set.labels[i] == label)
                .flat_map(|i| last(i).iter().copied())
                .collect();
            scaler.transform(&rows)
        };
        let (pos, neg) = (class_rows(1), class_rows(-1));
        let (mu_pos, mu_neg) = (column_mean(&pos, d), column_mean(&neg, d));
        let diff: Vec<f64> = mu_pos.iter().zip(&mu_neg).map(|(p, n)| p - n).collect();
        let raw = if self.with_covariance {
            let (n_pos, n_neg) = (pos.len() / d, neg.len() / d);
            let (s_pos, s_neg) = match (oas_second_moment(&pos, d), oas_second_moment(&neg, d)) {
                (Some(p), Some(n)) => (p, n),
                (Some(p), None) => (p.clone(), p),
                (None, Some(n)) => (n.clone(), n),
                (None, None) => (identity(d), identity(d)),
            };
            let denom = (n_pos + n_neg) as f64 - 2.0;
            let mut pooled: Vec<f64> = s_pos
                .iter()
                .zip(&s_neg)
                .map(|(p, n)| ((n_pos as f64 - 1.0) * p + (n_neg as f64 - 1.0) * n) / denom)
                .collect();
            (0..d).for_each(|k| pooled[k * d + k] += RIDGE);
            if pooled.iter().any(|v| !v.is_finite()) {
                pooled = identity(d);
            }
            let l = cholesky(&pooled, d).ok_or_else(|| {
                ProbeError::Degenerate(
                    "Mass-Mean: pooled covariance is not positive definite".into(),
                )
            })?;
            cholesky_solve(&l, d, &diff)
        } else {
            diff
        };
        let len = norm(&raw);
        if !(len > 0.0 && len.is_finite()) {
            return Err(ProbeError::Degenerate(format!(
                "Mass-Mean: direction has norm {len} (equal class means?)"
            )));
        }
        let direction: Vec<f64> = raw.iter().map(|v| v / len).collect();
        let bias = -0.5 * (dot(&mu_pos, &direction) + dot(&mu_neg, &direction));
        Ok(TrainedProbe {
            kind: Probe::MassMean,
            direction,
            bias,
            scaler,
            c: None,
            eta: None,
            converged: None,
        })
    }

    /// The fit on the same bags in any order is identical: its chance is which bags it sees.
    fn noise_floor_refit(&self) -> NoiseFloorRefit {
        NoiseFloorRefit::Bootstrap
    }
}

fn column_mean(rows: &[f64], d: usize) -> Vec<f64> {
    let n = (rows.len() / d).max(1) as f64;
    let mut mean = vec![0.0; d];
    for r in rows.chunks_exact(d) {
        mean.iter_mut().zip(r).for_each(|(m, x)| *m += x);
    }
    mean.iter_mut().for_each(|m| *m /= n);
    mean
}

fn identity(d: usize) -> Vec<f64> {
    let mut m = vec![0.0; d * d];
    (0..d).for_each(|k| m[k * d + k] = 1.0);
    m
}

/// sklearn's `oas(X, assume_centered=True)`: the uncentred second moment S = XᵀX/n shrunk
/// toward (tr S/p)·I with shrinkage min(1, (ā + μ²)/((n+1)(ā − μ²/p))), ā = mean of S's
/// squared entries, μ = tr S/p. `None` for no rows or a non-finite result (upstream then
/// falls back, see the caller).
pub fn oas_second_moment(rows: &[f64], d: usize) -> Option<Vec<f64>> {
    let n = rows.len() / d;
    if n == 0 {
        return None;
    }
    let mut s = vec![0.0; d * d];
    for r in rows.chunks_exact(d) {
        for (i, &ri) in r.iter().enumerate() {
            // Upper triangle only; mirrored below.
            s[i * d + i..(i + 1) * d]
                .iter_mut()
                .zip(&r[i..])
                .for_each(|(v, &rj)| *v += ri * rj);
        }
    }
    for i in 0..d {
        for j in i..d {
            let v = s[i * d + j] / n as f64;
            s[i * d + j] = v;
            s[j * d + i] = v;
        }
    }
    let p = d as f64;
    let mu = (0..d).map(|k| s[k * d + k]).sum::<f64>() / p;
    let alpha = s.iter().map(|v| v * v).sum::<f64>() / (p * p);
    let num = alpha + mu * mu;
    let den = (n as f64 + 1.0) * (alpha - mu * mu / p);
    let shrinkage = if den == 0.0 {
        1.0
    } else {
        (num / den).min(1.0)
    };
    s.iter_mut().for_each(|v| *v *= 1.0 - shrinkage);
    (0..d).for_each(|k| s[k * d + k] += shrinkage * mu);
    s.iter().all(|v| v.is_finite()).then_some(s)
}
