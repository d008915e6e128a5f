//! `--counter-interval`: the sampling interval's text, its limits, and how the summary prints it (here, below both
//! the options and the sampler, so that neither imports the other for it).

use std::time::Duration;

/// The sampling interval without `--counter-interval`: what `top` samples at, and what ran 60 s without a loss
/// on an H100 (docs/measurements.md in the repository).
pub const DEFAULT_INTERVAL: Duration = Duration::from_millis(1);
/// The shortest interval accepted. The hardware's own shortest sustained interval is measured by
/// `benches/gpu/counters_accuracy.sh sweep`; below this one the sampler's decoding (a CUPTI evaluation per
/// sample, on the host) is not expected to keep up.
pub const MIN_INTERVAL: Duration = Duration::from_micros(100);
/// The longest interval accepted.
pub const MAX_INTERVAL: Duration = Duration::from_secs(10);
/// `--counter-interval`: `1ms`, `500us`, `0.25ms`, `2s`, or a number of milliseconds; between [`MIN_INTERVAL`]
/// and [`MAX_INTERVAL`].
pub fn parse_interval(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| c.is_ascii_alphabetic() || c == 'µ')
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let scale = match unit.trim() {
        "" | "ms" => 1e6,
        "us" | "µs" => 1e3,
        "ns" => 1.0,
        "s" => 1e9,
        other => return Err(format!("unknown unit {other:?} (ms, us, ns, s)")),
    };
    let value: f64 = number
        .trim()
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite() && *v > 0.0)
        .ok_or_else(|| format!("{s:?} is not a positive duration (1ms, 500us)"))?;
    let ns = (value * scale).round();
    if ns < MIN_INTERVAL.as_nanos() as f64 {
        return Err(format!(
            "{s} is shorter than {}, the shortest sampling interval gpu-tools accepts",
            describe_interval(MIN_INTERVAL)
        ));
    }
    if ns > MAX_INTERVAL.as_nanos() as f64 {
        return Err(format!(
            "{s} is longer than {}",
            describe_interval(MAX_INTERVAL)
        ));
    }
    Ok(Duration::from_nanos(ns as u64))
}

/// An interval as the summary prints it: `1 ms`, `250 us`, `1.5 ms`.
pub fn describe_interval(d: Duration) -> String {
    let ns = d.as_nanos();
    if ns % 1_000_000 == 0 {
        format!("{} ms", ns / 1_000_000)
    } else if ns % 1_000 == 0 && ns < 1_000_000 {
        format!("{} us", ns / 1_000)
    } else {
        format!("{} ms", ns as f64 / 1e6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_take_units_and_the_limits_are_checked() {
        assert_eq!(parse_interval("1ms"), Ok(Duration::from_millis(1)));
        assert_eq!(parse_interval("1"), Ok(Duration::from_millis(1)));
        assert_eq!(parse_interval("0.25ms"), Ok(Duration::from_micros(250)));
        assert_eq!(parse_interval("100us"), Ok(Duration::from_micros(100)));
        assert_eq!(parse_interval("100 µs"), Ok(Duration::from_micros(100)));
        assert_eq!(parse_interval("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_interval("500000ns"), Ok(Duration::from_micros(500)));
        let short = parse_interval("50us").unwrap_err();
        assert!(short.contains("shorter than 100 us"), "{short}");
        assert!(
            parse_interval("11s")
                .unwrap_err()
                .contains("longer than 10000 ms")
        );
        assert!(parse_interval("1h").unwrap_err().contains("unknown unit"));
        assert!(parse_interval("-1ms").is_err());
        assert!(parse_interval("ms").is_err());
        assert!(parse_interval("nan").is_err());
        assert_eq!(describe_interval(Duration::from_millis(1)), "1 ms");
        assert_eq!(describe_interval(Duration::from_micros(250)), "250 us");
        assert_eq!(describe_interval(Duration::from_micros(1500)), "1.5 ms");
    }
}
