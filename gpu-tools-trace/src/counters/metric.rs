//! What a metric's name says: how its values add up over time, and how a viewer labels it.

use super::{DRAM_READ_PER_SECOND, DRAM_WRITE_PER_SECOND, OCCUPANCY, SM_ACTIVE, TENSOR_ACTIVE};

/// How the values of a metric over sampling intervals combine into one value for a span of time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub enum MetricKind {
    /// A level (percentages, averages, ratios): the time-weighted mean over the span.
    Level,
    /// A share of elapsed time (`….pct_of_peak_sustained_elapsed`: SM active, tensor pipes active): nothing while
    /// the device is idle, so a sample's value is its busy part's value diluted by its idle part. Per kernel, the
    /// sample's value divided by the share of its window in which kernels ran (at most 100), then the
    /// time-weighted mean as for a level.
    Share,
    /// A rate per second (`….per_second`): integrated over the span into an amount (bytes per second into bytes).
    Rate,
    /// An amount in the interval (`….sum`): the part of each interval's amount that falls in the span.
    Amount,
}

impl MetricKind {
    /// What the name of `metric` says: `….per_second` is a rate, `….sum` an amount, `….pct_of_peak_sustained_elapsed`
    /// a share of elapsed time, anything else a level (`….pct_of_peak_sustained_active` included: it is already
    /// per active cycle).
    pub fn of(metric: &str) -> MetricKind {
        if metric.ends_with(".pct_of_peak_sustained_elapsed") {
            MetricKind::Share
        } else if metric.ends_with(".per_second") {
            MetricKind::Rate
        } else if metric.ends_with(".sum") {
            MetricKind::Amount
        } else {
            MetricKind::Level
        }
    }
}

/// How a viewer shows `metric`: a short name and a unit (`("SM active", "%")`), for the default set; other metrics
/// keep their name, with the unit their name implies (`%` for `….pct…`, `/s` for rates, none otherwise).
pub fn label(metric: &str) -> (String, &'static str) {
    let known = match metric {
        SM_ACTIVE => Some(("SM active", "%")),
        TENSOR_ACTIVE => Some(("tensor active", "%")),
        OCCUPANCY => Some(("achieved occupancy", "%")),
        DRAM_READ_PER_SECOND => Some(("DRAM read", "B/s")),
        DRAM_WRITE_PER_SECOND => Some(("DRAM write", "B/s")),
        _ => None,
    };
    if let Some((name, unit)) = known {
        return (name.to_string(), unit);
    }
    let unit = if metric.contains(".pct") {
        "%"
    } else if metric.ends_with(".per_second") {
        "/s"
    } else {
        ""
    };
    (metric.to_string(), unit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_say_how_values_combine() {
        assert_eq!(MetricKind::of(DRAM_READ_PER_SECOND), MetricKind::Rate);
        assert_eq!(MetricKind::of("dram__bytes_read.sum"), MetricKind::Amount);
        assert_eq!(MetricKind::of(SM_ACTIVE), MetricKind::Share);
        assert_eq!(MetricKind::of(TENSOR_ACTIVE), MetricKind::Share);
        assert_eq!(MetricKind::of(OCCUPANCY), MetricKind::Level);
        assert_eq!(label(OCCUPANCY), ("achieved occupancy".to_string(), "%"));
        assert_eq!(
            label("lts__t_bytes.sum.per_second"),
            ("lts__t_bytes.sum.per_second".to_string(), "/s")
        );
        assert_eq!(label("smsp__inst_executed.sum").1, "");
    }
}
