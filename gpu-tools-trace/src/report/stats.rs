//! Summary statistics of a set of values, as the reports print them.

/// Values collected for one row of a report (durations or sizes).
#[derive(Debug, Clone, Default)]
pub(crate) struct Values(Vec<u64>);

/// Count, total, mean, median, min, max and standard deviation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Summary {
    pub count: u64,
    /// Saturating at `u64::MAX`; `overflow` says where the true total is larger.
    pub total: u64,
    /// The total does not fit a u64 (times of corrupt records).
    pub overflow: bool,
    pub mean: f64,
    pub median: f64,
    pub min: u64,
    pub max: u64,
    pub stddev: f64,
}

impl Values {
    pub(crate) fn push(&mut self, v: u64) {
        self.0.push(v);
    }

    pub(crate) fn total(&self) -> u64 {
        self.0.iter().fold(0u64, |a, v| a.saturating_add(*v))
    }

    pub(crate) fn summary(&self) -> Summary {
        let mut v = self.0.clone();
        v.sort_unstable();
        let n = v.len();
        if n == 0 {
            return Summary {
                count: 0,
                total: 0,
                overflow: false,
                mean: 0.0,
                median: 0.0,
                min: 0,
                max: 0,
                stddev: 0.0,
            };
        }
        let total = self.total();
        let mean = v.iter().map(|x| *x as f64).sum::<f64>() / n as f64;
        let median = if n % 2 == 1 {
            v[n / 2] as f64
        } else {
            (v[n / 2 - 1] as f64 + v[n / 2] as f64) / 2.0
        };
        // Sample standard deviation, as nsys prints it (0 for one value).
        let stddev = if n > 1 {
            let ss: f64 = v.iter().map(|x| (*x as f64 - mean).powi(2)).sum();
            (ss / (n - 1) as f64).sqrt()
        } else {
            0.0
        };
        Summary {
            count: n as u64,
            total,
            overflow: self
                .0
                .iter()
                .try_fold(0u64, |a, v| a.checked_add(*v))
                .is_none(),
            mean,
            median,
            min: v[0],
            max: v[n - 1],
            stddev,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries_follow_their_definitions() {
        let mut v = Values::default();
        for x in [4, 1, 3, 2] {
            v.push(x);
        }
        let s = v.summary();
        assert_eq!((s.count, s.total, s.min, s.max), (4, 10, 1, 4));
        assert_eq!((s.mean, s.median), (2.5, 2.5));
        assert!((s.stddev - 1.2909944).abs() < 1e-6);
        assert_eq!(Values::default().summary().count, 0);
    }
}
