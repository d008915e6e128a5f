//! Shares of elapsed time fitted over many samples: for kernels much shorter than a sample, sharing each sample by
//! overlap gives every kernel in a window the window's level, so every short kernel comes out alike. A sample's
//! share of elapsed time (SM active, tensor active) is instead read as the sum of what each kernel name does while
//! it runs, weighted by the part of the window it ran in (idle time does nothing):
//!
//! `value_j = Σ_k (time of name k in window j / length of window j) × x_k`
//!
//! and the `x_k` are fitted to every sample at once by non-negative least squares. Names that occur in samples of
//! different mixes are told apart; a name that always runs with the same neighbours cannot be told from them.

use std::collections::HashMap;

/// Accumulates the normal equations of the fit of one metric: `Q = Σ a aᵀ`, `b = Σ a y`, over samples whose `a`
/// (each name's share of the window) is sparse.
#[derive(Debug, Clone)]
pub(super) struct Fit {
    n: usize,
    /// `Q` by (row, column), only where two names shared a sample: a dense `n × n` matrix would take gigabytes for
    /// a trace of some ten thousand kernel names (as generated kernels give).
    q: HashMap<(usize, usize), f64>,
    b: Vec<f64>,
    /// Samples in which each name ran.
    samples: Vec<u64>,
}

/// Samples a name must run in before its fitted value is given.
pub(super) const MIN_SAMPLES: u64 = 30;

impl Fit {
    pub(super) fn new(names: usize) -> Self {
        Fit {
            n: names,
            q: HashMap::new(),
            b: vec![0.0; names],
            samples: vec![0; names],
        }
    }

    /// One sample: `value` over its window, and each name's share of the window (name, share).
    pub(super) fn add(&mut self, value: f64, shares: &[(usize, f64)]) {
        if !value.is_finite() || shares.is_empty() {
            return;
        }
        for &(i, ai) in shares {
            self.b[i] += ai * value;
            self.samples[i] += 1;
            for &(j, aj) in shares {
                *self.q.entry((i, j)).or_insert(0.0) += ai * aj;
            }
        }
    }

    /// The fitted value of each name (at most `cap`), `None` for names in fewer than [`MIN_SAMPLES`] samples.
    /// Coordinate descent on the normal equations, with each value kept at zero or above.
    pub(super) fn solve(&self, cap: f64) -> Vec<Option<f64>> {
        let n = self.n;
        // Only the names seen in samples take part; more than MAX_NAMES of them are not fitted (the work grows
        // with their square).
        let diagonal = |i: usize| self.q.get(&(i, i)).copied().unwrap_or(0.0);
        let active: Vec<usize> = (0..n).filter(|&i| diagonal(i) > 0.0).collect();
        let mut out = vec![None; n];
        if active.is_empty() || active.len() > MAX_NAMES {
            return out;
        }
        let m = active.len();
        let dense: Vec<f64> = (0..m * m)
            .map(|k| {
                let (a, b) = (active[k / m], active[k % m]);
                self.q.get(&(a, b)).copied().unwrap_or(0.0)
            })
            .collect();
        let q = |a: usize, b: usize| dense[a * m + b];
        let mut x = vec![0.0f64; m];
        // The gradient Qx - b, kept up to date as x moves.
        let mut grad: Vec<f64> = active.iter().map(|&i| -self.b[i]).collect();
        for _ in 0..ITERATIONS {
            let mut moved = 0.0f64;
            for a in 0..m {
                let next = (x[a] - grad[a] / q(a, a)).max(0.0);
                let step = next - x[a];
                if step != 0.0 {
                    for (c, g) in grad.iter_mut().enumerate() {
                        *g += step * q(c, a);
                    }
                    x[a] = next;
                    moved = moved.max(step.abs());
                }
            }
            if moved < 1e-9 {
                break;
            }
        }
        for (a, &i) in active.iter().enumerate() {
            if self.samples[i] >= MIN_SAMPLES && x[a].is_finite() {
                out[i] = Some(x[a].min(cap));
            }
        }
        out
    }
}

/// Most names fitted together.
const MAX_NAMES: usize = 1024;
/// Most rounds of coordinate descent.
const ITERATIONS: usize = 500;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_in_varied_mixes_are_told_apart() {
        // Two names: a at 80 while it runs, b at 10; windows with different mixes and idle time.
        let mut f = Fit::new(2);
        for i in 0..100 {
            let (sa, sb) = (
                0.05 + 0.004 * f64::from(i % 10),
                0.3 - 0.02 * f64::from(i % 7),
            );
            f.add(sa * 80.0 + sb * 10.0, &[(0, sa), (1, sb)]);
        }
        let x = f.solve(100.0);
        assert!((x[0].unwrap() - 80.0).abs() < 1e-6, "{x:?}");
        assert!((x[1].unwrap() - 10.0).abs() < 1e-6, "{x:?}");
    }

    #[test]
    fn too_few_samples_give_nothing_and_values_stay_in_range() {
        let mut f = Fit::new(3);
        for i in 0..40 {
            let s = 0.1 + 0.01 * f64::from(i % 5);
            // Name 0 reads more than 100 while it runs (inconsistent data): capped. Name 1 never pushes the value
            // up: kept at zero, not below. Name 2 occurs in 5 samples only.
            f.add(s * 150.0, &[(0, s), (1, 0.2)]);
            if i < 5 {
                f.add(s * 150.0, &[(0, s), (2, 0.1)]);
            }
        }
        let x = f.solve(100.0);
        assert_eq!(x[0], Some(100.0));
        assert!(x[1].is_some_and(|v| (0.0..1e-6).contains(&v)), "{x:?}");
        assert_eq!(x[2], None);
    }

    #[test]
    fn many_names_cost_what_their_samples_hold() {
        // A dense matrix of a million names would take 8 TB.
        let mut f = Fit::new(1_000_000);
        for i in 0..40 {
            let s = 0.1 + 0.01 * f64::from(i % 5);
            f.add(s * 50.0, &[(999_999, s)]);
        }
        let x = f.solve(100.0);
        assert!(
            (x[999_999].unwrap() - 50.0).abs() < 1e-9,
            "{:?}",
            x[999_999]
        );
        assert!(x[0].is_none());
    }
}
