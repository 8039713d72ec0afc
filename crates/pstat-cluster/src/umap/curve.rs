//! The (a, b) parameters of UMAP's low-dimensional similarity 1 / (1 + a·d^(2b)), fitted by least
//! squares to the min_dist/spread target curve, as umap-learn's `find_ab_params` does.

/// Fits (a, b) with Levenberg–Marquardt on the 300-point grid umap-learn uses.
pub fn find_ab_params(spread: f64, min_dist: f64) -> (f64, f64) {
    let xs: Vec<f64> = (0..300).map(|i| 3.0 * spread * i as f64 / 299.0).collect();
    let ys: Vec<f64> = xs
        .iter()
        .map(|&x| {
            if x < min_dist {
                1.0
            } else {
                (-(x - min_dist) / spread).exp()
            }
        })
        .collect();
    let residuals = |a: f64, b: f64| -> f64 {
        xs.iter()
            .zip(&ys)
            .map(|(&x, &y)| (curve(x, a, b) - y).powi(2))
            .sum()
    };
    let (mut a, mut b, mut lambda) = (1.0_f64, 1.0_f64, 1e-3_f64);
    let mut cost = residuals(a, b);
    for _ in 0..500 {
        // Normal equations J·Jᵀ δ = J·r for the two parameters.
        let (mut jaa, mut jab, mut jbb, mut ga, mut gb) = (0.0, 0.0, 0.0, 0.0, 0.0);
        for (&x, &y) in xs.iter().zip(&ys) {
            let f = curve(x, a, b);
            let r = y - f;
            let (da, db) = if x > 0.0 {
                let x2b = x.powf(2.0 * b);
                (-f * f * x2b, -f * f * a * x2b * 2.0 * x.ln())
            } else {
                (0.0, 0.0)
            };
            jaa += da * da;
            jab += da * db;
            jbb += db * db;
            ga += da * r;
            gb += db * r;
        }
        let (maa, mbb) = (jaa * (1.0 + lambda), jbb * (1.0 + lambda));
        let det = maa * mbb - jab * jab;
        if det.abs() < 1e-300 {
            break;
        }
        let step_a = (mbb * ga - jab * gb) / det;
        let step_b = (maa * gb - jab * ga) / det;
        let (na, nb) = (a + step_a, b + step_b);
        let new_cost = if na > 0.0 && nb > 0.0 {
            residuals(na, nb)
        } else {
            f64::INFINITY
        };
        if new_cost < cost {
            let done = (cost - new_cost) <= 1e-15 * cost.max(1e-300);
            (a, b, cost, lambda) = (na, nb, new_cost, lambda / 10.0);
            if done {
                break;
            }
        } else {
            lambda *= 10.0;
            if lambda > 1e12 {
                break;
            }
        }
    }
    (a, b)
}

fn curve(x: f64, a: f64, b: f64) -> f64 {
    1.0 / (1.0 + a * x.powf(2.0 * b))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reference values printed by umap-learn 0.5.12 (`find_ab_params(1.0, 0.1)` and `(1.0, 0.0)`).
    #[test]
    fn matches_umap_learn() {
        let (a, b) = find_ab_params(1.0, 0.1);
        assert!(
            (a - 1.5769).abs() < 2e-3 && (b - 0.8951).abs() < 2e-3,
            "{a} {b}"
        );
        let (a, b) = find_ab_params(1.0, 0.0);
        assert!(
            (a - 1.9328).abs() < 2e-3 && (b - 0.7905).abs() < 2e-3,
            "{a} {b}"
        );
    }
}
