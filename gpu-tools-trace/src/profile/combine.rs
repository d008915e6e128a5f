//! One value per metric for a group of kernels from each kernel's values ([`combine_values`]): what a CUDA graph
//! launch yields when graphs are profiled whole (`--graph-profiling graph`). The range profiler replays a graph's
//! kernels one at a time, so the group's value is made from theirs, by the metric's rollup (its name,
//! `unit__counter.rollup[.submetric]`):
//!
//! - `.sum` (no submetric): the sum, as the counter's total over the group (`gpu__time_duration.sum`: the kernels'
//!   time, one after another);
//! - `.max`, `.min`: the largest, the smallest;
//! - everything else (`.avg`, and every submetric: rates, percentages of peak, ratios): the mean weighted by each
//!   kernel's `gpu__time_duration.sum` where that metric was collected, else the plain mean. A percentage of peak
//!   over elapsed cycles or a rate per second so weighted is the group's own.
//!
//! ncu profiles a graph as one workload, its kernels running as the graph lets them: where kernels of a graph run
//! at the same time, its figures differ from these (its duration is shorter than the sum).

/// How the values of a metric over several kernels make one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Combine {
    /// Added.
    Sum,
    /// The largest.
    Max,
    /// The smallest.
    Min,
    /// The mean, weighted by the kernels' durations where known.
    Weighted,
}

/// The metric whose values weigh the others.
const DURATION: &str = "gpu__time_duration.sum";

impl Combine {
    /// How `metric` combines, from its rollup and submetric.
    pub fn of(metric: &str) -> Combine {
        let rest = metric.split_once("__").map_or(metric, |(_, r)| r);
        let mut parts = rest.split('.');
        let _counter = parts.next();
        match (parts.next(), parts.next()) {
            (Some("sum"), None) => Combine::Sum,
            (Some("max"), None) => Combine::Max,
            (Some("min"), None) => Combine::Min,
            _ => Combine::Weighted,
        }
    }
}

/// One value per metric from each kernel's values (`kernels[k][m]`: metric `m` of kernel `k`, in the order of
/// `metrics`; a short row lacks the last metrics). `NaN` values are left out; a metric with none is `NaN`.
pub fn combine_values<S: AsRef<str>>(metrics: &[S], kernels: &[&[f64]]) -> Vec<f64> {
    let duration = metrics.iter().position(|m| m.as_ref() == DURATION);
    let weight = |row: &[f64]| -> f64 {
        match duration.and_then(|d| row.get(d)) {
            Some(w) if w.is_finite() && *w >= 0.0 => *w,
            Some(_) => f64::NAN,
            None => 1.0,
        }
    };
    metrics
        .iter()
        .enumerate()
        .map(|(m, name)| {
            let values = kernels
                .iter()
                .filter_map(|row| row.get(m).map(|v| (*v, weight(row))))
                .filter(|(v, _)| !v.is_nan());
            match Combine::of(name.as_ref()) {
                Combine::Sum => values.map(|(v, _)| v).reduce(|a, b| a + b),
                Combine::Max => values.map(|(v, _)| v).reduce(f64::max),
                Combine::Min => values.map(|(v, _)| v).reduce(f64::min),
                Combine::Weighted => {
                    let pairs: Vec<(f64, f64)> = values.collect();
                    let total: f64 = pairs.iter().map(|(_, w)| w).sum();
                    if pairs.is_empty() {
                        None
                    } else if total > 0.0 && total.is_finite() {
                        Some(pairs.iter().map(|(v, w)| v * w).sum::<f64>() / total)
                    } else {
                        // No usable durations (all zero or unknown): the plain mean.
                        Some(pairs.iter().map(|(v, _)| v).sum::<f64>() / pairs.len() as f64)
                    }
                }
            }
            .unwrap_or(f64::NAN)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rollups_decide() {
        assert_eq!(Combine::of("dram__bytes_read.sum"), Combine::Sum);
        assert_eq!(Combine::of("gpu__time_duration.sum"), Combine::Sum);
        assert_eq!(Combine::of("sm__cycles_active.max"), Combine::Max);
        assert_eq!(Combine::of("sm__cycles_active.min"), Combine::Min);
        assert_eq!(Combine::of("sm__warps_active.avg"), Combine::Weighted);
        assert_eq!(
            Combine::of("sm__throughput.avg.pct_of_peak_sustained_elapsed"),
            Combine::Weighted
        );
        assert_eq!(
            Combine::of("dram__bytes_read.sum.per_second"),
            Combine::Weighted
        );
        assert_eq!(Combine::of("launch__grid_size"), Combine::Weighted);
    }

    #[test]
    fn a_graph_of_two_kernels() {
        let metrics = [
            "gpu__time_duration.sum",
            "dram__bytes_read.sum",
            "sm__throughput.avg.pct_of_peak_sustained_elapsed",
            "dram__bytes_read.sum.per_second",
            "sm__cycles_active.max",
        ];
        // 1 us reading 1 GB/s worth at 10 %, then 3 us at 50 %.
        let a = [1000.0, 1000.0, 10.0, 1e9, 7.0];
        let b = [3000.0, 9000.0, 50.0, 3e9, 5.0];
        let v = combine_values(&metrics, &[&a, &b]);
        assert_eq!(v[0], 4000.0, "times add");
        assert_eq!(v[1], 10000.0, "bytes add");
        assert_eq!(v[2], 40.0, "(10*1000 + 50*3000) / 4000");
        assert_eq!(
            v[3],
            10000.0 / 4000.0 * 1e9,
            "bytes over the time: a rate weighted by time"
        );
        assert_eq!(v[4], 7.0);
    }

    #[test]
    fn without_durations_the_mean_is_plain_and_nan_is_left_out() {
        let metrics = ["sm__warps_active.avg", "dram__bytes_read.sum", "x__y.min"];
        let a = [1.0, f64::NAN, 4.0];
        let b = [3.0, 5.0, f64::NAN];
        let v = combine_values(&metrics, &[&a, &b]);
        assert_eq!(v, vec![2.0, 5.0, 4.0]);
        let v = combine_values(&metrics, &[&[f64::NAN, f64::NAN, f64::NAN]]);
        assert!(v.iter().all(|x| x.is_nan()));
        assert!(combine_values(&metrics, &[]).iter().all(|x| x.is_nan()));
        // Zero durations: the plain mean, not a division by zero.
        let v = combine_values(
            &["gpu__time_duration.sum", "a__b.avg"],
            &[&[0.0, 2.0], &[0.0, 4.0]],
        );
        assert_eq!(v, vec![0.0, 3.0]);
    }
}
