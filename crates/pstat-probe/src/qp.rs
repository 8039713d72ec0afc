//! The dual QP that both sAwMIL stages solve, with a linear kernel and an intercept:
//!
//! ```text
//! minimize_α  ½‖Σ_i α_i y_i z_i‖² − Σ_i ρ_i α_i
//! s.t.        0 ≤ α_i ≤ u_i,   Σ_i y_i α_i = 0
//! ```
//!
//! (misvm/cvxopt's `½αᵀHα + fᵀα` with `H = yyᵀ∘ZZᵀ`, `f = −ρ`.) The equality constraint is
//! the intercept b of the primal `min ½‖w‖² + Σ u_i ξ_i, y_i(w·z_i + b) ≥ ρ_i − ξ_i`.
//!
//! Method: for a fixed b the problem is a box-constrained dual without the equality, solved
//! by dual coordinate descent in primal w-space (Hsieh et al. 2008: O(d) per coordinate, no
//! n×n kernel, with liblinear-style shrinking). The primal value P(b) is convex in b with
//! derivative −g(b), g(b) = Σ y_i α_i(b), which is non-increasing; so the b that enforces
//! the equality is the root of g, found by a bracketed Illinois (regula falsi) search with
//! warm-started inner solves. The primal is strictly convex in w, so w(b) is continuous and
//! converges to the unique optimal w even where g jumps across 0.

use crate::linalg::{axpy, dot};
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;

/// One QP instance. `rows` is row-major [n, dim]; all slices have length n.
pub struct DualProblem<'a> {
    pub rows: &'a [f64],
    pub dim: usize,
    pub y: &'a [f64],
    pub rho: &'a [f64],
    pub upper: &'a [f64],
}

#[derive(Debug, Clone)]
pub struct DualSolution {
    pub alpha: Vec<f64>,
    /// w = Σ α_i y_i z_i.
    pub w: Vec<f64>,
    /// The intercept (the multiplier of Σ y α = 0).
    pub b: f64,
}

impl DualSolution {
    /// w = 0 is the optimum (the terms of Σ α_i y_i z_i cancel to rounding): every instance
    /// then scores the same and no direction exists. An interior-point solver would return
    /// rounding noise here instead.
    pub fn is_degenerate(&self, p: &DualProblem) -> bool {
        let mass: f64 = self
            .alpha
            .iter()
            .enumerate()
            .map(|(i, a)| {
                a * dot(
                    &p.rows[i * p.dim..(i + 1) * p.dim],
                    &p.rows[i * p.dim..(i + 1) * p.dim],
                )
                .sqrt()
            })
            .sum();
        crate::linalg::norm(&self.w) <= 1e-9 * mass
    }
}

/// Stopping tolerances, in margin units (the gradient of the dual is y_i(w·z_i + b) − ρ_i).
#[derive(Debug, Clone, Copy)]
pub struct Tolerance {
    /// Inner solve: max − min projected gradient.
    pub gradient: f64,
    /// Outer search: |Σ y α| relative to Σ u_i.
    pub equality: f64,
}

impl Default for Tolerance {
    fn default() -> Self {
        Tolerance {
            gradient: 1e-7,
            equality: 1e-8,
        }
    }
}

const MAX_INNER_EPOCHS: usize = 20_000;
const MAX_OUTER: usize = 200;

struct Solver<'a> {
    p: &'a DualProblem<'a>,
    alpha: Vec<f64>,
    w: Vec<f64>,
    q_diag: Vec<f64>,
    order: Vec<usize>,
    rng: ChaCha8Rng,
    tol: f64,
}

impl Solver<'_> {
    fn row(&self, i: usize) -> &[f64] {
        &self.p.rows[i * self.p.dim..(i + 1) * self.p.dim]
    }

    /// Σ y α for the current α.
    fn imbalance(&self) -> f64 {
        self.alpha.iter().zip(self.p.y).map(|(a, y)| a * y).sum()
    }

    /// Minimize over the box with the intercept fixed at `b`, from the current α.
    fn solve_fixed_b(&mut self, b: f64) {
        let n = self.alpha.len();
        let mut active = n;
        self.order.clear();
        self.order.extend(0..n);
        let (mut pg_max_old, mut pg_min_old) = (f64::INFINITY, f64::NEG_INFINITY);
        for _ in 0..MAX_INNER_EPOCHS {
            self.order[..active].shuffle(&mut self.rng);
            let (mut pg_max, mut pg_min) = (f64::NEG_INFINITY, f64::INFINITY);
            let mut s = 0;
            while s < active {
                let i = self.order[s];
                let (yi, ui, ai) = (self.p.y[i], self.p.upper[i], self.alpha[i]);
                let g = yi * (dot(&self.w, self.row(i)) + b) - self.p.rho[i];
                // Shrinking: a variable at a bound whose gradient pushes it outward by more
                // than last epoch's worst violation is unlikely to move; drop it for now.
                let pg = if ai <= 0.0 {
                    if g > pg_max_old {
                        active -= 1;
                        self.order.swap(s, active);
                        continue;
                    }
                    g.min(0.0)
                } else if ai >= ui {
                    if g < pg_min_old {
                        active -= 1;
                        self.order.swap(s, active);
                        continue;
                    }
                    g.max(0.0)
                } else {
                    g
                };
                pg_max = pg_max.max(pg);
                pg_min = pg_min.min(pg);
                if pg != 0.0 {
                    let qii = self.q_diag[i];
                    let new = if qii > 0.0 {
                        (ai - g / qii).clamp(0.0, ui)
                    } else if g < 0.0 {
                        ui
                    } else {
                        0.0
                    };
                    let delta = new - ai;
                    if delta != 0.0 {
                        self.alpha[i] = new;
                        let (w, row) = (
                            &mut self.w,
                            &self.p.rows[i * self.p.dim..(i + 1) * self.p.dim],
                        );
                        axpy(delta * yi, row, w);
                    }
                }
                s += 1;
            }
            if pg_max - pg_min <= self.tol || active == 0 {
                if active == n {
                    return;
                }
                // Converged on the shrunk set: verify on all variables.
                active = n;
                pg_max_old = f64::INFINITY;
                pg_min_old = f64::NEG_INFINITY;
                continue;
            }
            pg_max_old = if pg_max <= 0.0 { f64::INFINITY } else { pg_max };
            pg_min_old = if pg_min >= 0.0 {
                f64::NEG_INFINITY
            } else {
                pg_min
            };
        }
    }
}

/// Solve the QP; `seed` fixes the coordinate order.
pub fn solve(p: &DualProblem, tol: Tolerance, seed: u64) -> DualSolution {
    use rand::SeedableRng;
    let n = p.y.len();
    let q_diag = (0..n).map(|i| {
        let r = &p.rows[i * p.dim..(i + 1) * p.dim];
        dot(r, r)
    });
    let mut s = Solver {
        p,
        alpha: vec![0.0; n],
        w: vec![0.0; p.dim],
        q_diag: q_diag.collect(),
        order: Vec::with_capacity(n),
        rng: ChaCha8Rng::seed_from_u64(seed),
        tol: tol.gradient,
    };
    let eq_tol = tol.equality * p.upper.iter().sum::<f64>();
    // g(b) = Σ y α(b) is non-increasing; bracket its root, then shrink the bracket.
    let eval = |s: &mut Solver, b: f64| {
        s.solve_fixed_b(b);
        s.imbalance()
    };
    let (mut b, mut g) = (0.0, eval(&mut s, 0.0));
    if g.abs() <= eq_tol {
        return finish(s, b);
    }
    let mut step = if g > 0.0 { 1.0 } else { -1.0 };
    let (mut lo, mut g_lo, mut hi, mut g_hi);
    loop {
        let b_next = b + step;
        let g_next = eval(&mut s, b_next);
        if g_next.abs() <= eq_tol {
            return finish(s, b_next);
        }
        if (g_next > 0.0) == (g > 0.0) {
            b = b_next;
            g = g_next;
            step *= 2.0;
            continue;
        }
        (lo, g_lo, hi, g_hi) = if g > 0.0 {
            (b, g, b_next, g_next)
        } else {
            (b_next, g_next, b, g)
        };
        break;
    }
    // Illinois: regula falsi that halves the stale end's weight so both ends move.
    let mut last_side = 0i8;
    let mut best = (f64::INFINITY, lo);
    for _ in 0..MAX_OUTER {
        let mid = if g_lo - g_hi > 0.0 {
            lo + (hi - lo) * g_lo / (g_lo - g_hi)
        } else {
            0.5 * (lo + hi)
        };
        let gm = eval(&mut s, mid);
        if gm.abs() < best.0 {
            best = (gm.abs(), mid);
        }
        if gm.abs() <= eq_tol || (hi - lo) <= 1e-11 * (1.0 + mid.abs()) {
            return finish(s, mid);
        }
        if gm > 0.0 {
            lo = mid;
            g_lo = gm;
            if last_side == 1 {
                g_hi *= 0.5;
            }
            last_side = 1;
        } else {
            hi = mid;
            g_hi = gm;
            if last_side == -1 {
                g_lo *= 0.5;
            }
            last_side = -1;
        }
    }
    let b = best.1;
    s.solve_fixed_b(b);
    finish(s, b)
}

fn finish(s: Solver, b: f64) -> DualSolution {
    DualSolution {
        alpha: s.alpha,
        w: s.w,
        b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two separable points: the hard-margin answer is w = (1, 0), b = 0.
    #[test]
    fn two_point_svm() {
        let rows = [1.0, 0.0, -1.0, 0.0];
        let y = [1.0, -1.0];
        let p = DualProblem {
            rows: &rows,
            dim: 2,
            y: &y,
            rho: &[1.0, 1.0],
            upper: &[10.0, 10.0],
        };
        let s = solve(&p, Tolerance::default(), 1);
        eprintln!("{:?}", s);
        assert!((s.w[0] - 1.0).abs() < 1e-6 && s.w[1].abs() < 1e-9 && s.b.abs() < 1e-6);
    }

    /// Asymmetric: points at 3 (+) and 1 (−): w = 1, b = −2.
    #[test]
    fn shifted_svm() {
        let rows = [3.0, 1.0, 1.0, 1.0];
        let y = [1.0, -1.0];
        let p = DualProblem {
            rows: &rows,
            dim: 2,
            y: &y,
            rho: &[1.0, 1.0],
            upper: &[10.0, 10.0],
        };
        let s = solve(&p, Tolerance::default(), 1);
        eprintln!("{:?}", s);
        assert!((s.w[0] - 1.0).abs() < 1e-6 && s.w[1].abs() < 1e-6 && (s.b + 2.0).abs() < 1e-6);
    }
}
