//! What to collect in a profiled program ([`ProfileRequest`]) and how it travels to the injection library: the
//! variables of [`env`](mod@crate::env) (`GPU_TOOLS_PROFILE_*`), a part of the [`Settings`](super::Settings) that a
//! launcher sets or an attach argument carries, read back by the library. Re-exported by
//! [`profile`](crate::profile), whose launcher runs a program with it.

use super::SettingError;
use crate::env::{self, GraphMode};

/// The `basic` set: time, DRAM traffic and SM throughput of each kernel.
pub const BASIC_SET: [&str; 4] = [
    "gpu__time_duration.sum",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
];

/// The metrics of a named set (`basic`).
pub fn named_set(name: &str) -> Option<&'static [&'static str]> {
    match name {
        "basic" => Some(&BASIC_SET),
        _ => None,
    }
}

/// Default kernel launches between two decodes of the range profiler's counter data.
pub const DEFAULT_MAX_RANGES: usize = 2048;

/// What to collect in a profiled program; travels through the environment ([`env::PROFILE_METRICS`],
/// [`env::PROFILE_PC_SAMPLING`], [`env::PROFILE_MAX_RANGES`], [`env::PROFILE_LAUNCHES_PER_KERNEL`],
/// [`env::PROFILE_GRAPH`], [`env::PROFILE_PRIMER`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfileRequest {
    /// Metrics per kernel launch (full names); empty: none.
    pub metrics: Vec<String>,
    /// Also PC sampling.
    pub pc_sampling: bool,
    /// Launches between two decodes.
    pub max_ranges: usize,
    /// Profile at most this many launches of each kernel name (per context); the others run unprofiled, at native
    /// speed. `None`: every launch. A CUDA graph launch is profiled whole or not at all: it counts as a launch of
    /// the graph.
    pub launches_per_kernel: Option<u32>,
    /// What a CUDA graph launch yields, as ncu's `--graph-profiling`: one record per kernel node
    /// ([`GraphMode::Node`], the default), or one per graph launch named after the graph
    /// ([`GraphMode::Graph`], values combined by [`combine_values`](gpu_tools_trace::profile::combine_values)).
    pub graph_profiling: GraphMode,
    /// PC sampling before a process's first trace, not asked for by name ([`env::PROFILE_PRIMER`]): refused beside
    /// a profiler of the program's that ever registered with CUPTI, not only beside a recording one.
    pub primer: bool,
}

impl ProfileRequest {
    /// Metrics, no PC sampling, the default decode interval.
    pub fn new(metrics: Vec<String>) -> Self {
        ProfileRequest {
            metrics,
            pc_sampling: false,
            max_ranges: DEFAULT_MAX_RANGES,
            launches_per_kernel: None,
            graph_profiling: GraphMode::Node,
            primer: false,
        }
    }

    /// Reads a metric list: names separated by commas, set names (`basic`) expanded; each name once.
    pub fn parse_metrics(value: &str) -> Result<Vec<String>, String> {
        let mut out: Vec<String> = Vec::new();
        for word in value.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            let names: Vec<&str> = match named_set(word) {
                Some(set) => set.to_vec(),
                None if word.contains("__") => vec![word],
                None => {
                    return Err(format!(
                        "{word:?} is neither a metric name (unit__counter.rollup) nor a set (basic)"
                    ));
                }
            };
            for n in names {
                if !out.iter().any(|o| o == n) {
                    out.push(n.to_string());
                }
            }
        }
        Ok(out)
    }

    /// The variables that carry a request, in the order the settings write them.
    pub const VARIABLES: [&'static str; 6] = [
        env::PROFILE_METRICS,
        env::PROFILE_PC_SAMPLING,
        env::PROFILE_MAX_RANGES,
        env::PROFILE_LAUNCHES_PER_KERNEL,
        env::PROFILE_GRAPH,
        env::PROFILE_PRIMER,
    ];

    /// Reads the request from variables looked up through `get` (unset: nothing asked for).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<ProfileRequest, String> {
        Self::decode(|k| Ok(get(k))).map_err(|e| e.to_string())
    }

    /// Reads the request from the variables `get` gives (a variable's text, or an error that names it): the
    /// decoder of [`Settings`](crate::settings::Settings) and of [`ProfileRequest::from_lookup`].
    pub(crate) fn decode(
        get: impl Fn(&'static str) -> Result<Option<String>, SettingError>,
    ) -> Result<ProfileRequest, SettingError> {
        let metrics = match get(env::PROFILE_METRICS)? {
            Some(v) => Self::parse_metrics(&v)
                .map_err(|e| SettingError::new(env::PROFILE_METRICS, &v, e))?,
            None => Vec::new(),
        };
        let pc_sampling = switch(&get, env::PROFILE_PC_SAMPLING)?;
        let max_ranges = match get(env::PROFILE_MAX_RANGES)? {
            None => DEFAULT_MAX_RANGES,
            Some(v) => match v.trim().parse::<usize>() {
                Ok(n) if (1..=1 << 20).contains(&n) => n,
                _ => {
                    let reason = format!("a count from 1 to {}", 1 << 20);
                    return Err(SettingError::new(env::PROFILE_MAX_RANGES, &v, reason));
                }
            },
        };
        let launches_per_kernel = match get(env::PROFILE_LAUNCHES_PER_KERNEL)?
            .as_deref()
            .map(str::trim)
        {
            None | Some("") | Some("0") => None,
            Some(v) => match v.parse::<u32>() {
                Ok(n) => Some(n),
                Err(_) => {
                    let reason = "a count of launches (0: all)";
                    return Err(SettingError::new(
                        env::PROFILE_LAUNCHES_PER_KERNEL,
                        v,
                        reason,
                    ));
                }
            },
        };
        let graph_profiling = match get(env::PROFILE_GRAPH)?.as_deref().map(str::trim) {
            None | Some("") => GraphMode::Node,
            Some(v) => v
                .parse::<GraphMode>()
                .map_err(|e| SettingError::new(env::PROFILE_GRAPH, v, e))?,
        };
        let primer = switch(&get, env::PROFILE_PRIMER)?;
        Ok(ProfileRequest {
            metrics,
            pc_sampling,
            max_ranges,
            launches_per_kernel,
            graph_profiling,
            primer,
        })
    }

    /// Reads the process environment.
    pub fn from_env() -> Result<ProfileRequest, String> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// Whether anything is asked for.
    pub fn is_empty(&self) -> bool {
        self.metrics.is_empty() && !self.pc_sampling
    }

    /// The variables that carry the request (every one of [`ProfileRequest::VARIABLES`]), as the settings write
    /// them.
    pub(crate) fn variables(&self) -> Vec<(&'static str, String)> {
        vec![
            (env::PROFILE_METRICS, self.metrics.join(",")),
            (
                env::PROFILE_PC_SAMPLING,
                if self.pc_sampling { "1" } else { "0" }.to_string(),
            ),
            (env::PROFILE_MAX_RANGES, self.max_ranges.to_string()),
            (
                env::PROFILE_LAUNCHES_PER_KERNEL,
                self.launches_per_kernel.unwrap_or(0).to_string(),
            ),
            (env::PROFILE_GRAPH, self.graph_profiling.name().to_string()),
            (
                env::PROFILE_PRIMER,
                if self.primer { "1" } else { "0" }.to_string(),
            ),
        ]
    }
}

/// A request's on-off variable `name`: `1` on; unset, empty or `0` off; anything else an error that names it.
fn switch(
    get: &impl Fn(&'static str) -> Result<Option<String>, SettingError>,
    name: &'static str,
) -> Result<bool, SettingError> {
    match get(name)?.as_deref().map(str::trim) {
        None | Some("") | Some("0") => Ok(false),
        Some("1") => Ok(true),
        Some(v) => Err(SettingError::new(name, v, "use 1 or 0")),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    #[test]
    fn metric_lists_expand_sets_and_refuse_junk() {
        assert_eq!(
            ProfileRequest::parse_metrics("basic").unwrap(),
            BASIC_SET.to_vec()
        );
        assert_eq!(
            ProfileRequest::parse_metrics("dram__bytes_read.sum, basic")
                .unwrap()
                .len(),
            4,
            "a name of the set is not repeated"
        );
        assert!(
            ProfileRequest::parse_metrics("fast")
                .unwrap_err()
                .contains("basic")
        );
        assert!(ProfileRequest::parse_metrics("").unwrap().is_empty());
    }

    #[test]
    fn requests_travel_through_the_environment() {
        let r = ProfileRequest {
            metrics: vec!["a__b.sum".into()],
            pc_sampling: true,
            max_ranges: 16,
            launches_per_kernel: Some(3),
            graph_profiling: GraphMode::Graph,
            primer: true,
        };
        let vars: HashMap<&str, String> = r.variables().into_iter().collect();
        let back = ProfileRequest::from_lookup(|k| vars.get(k).cloned()).unwrap();
        assert_eq!(back, r);
        assert!(ProfileRequest::from_lookup(|_| None).unwrap().is_empty());
        assert!(
            ProfileRequest::from_lookup(|k| (k == env::PROFILE_PC_SAMPLING).then(|| "yes".into()))
                .is_err()
        );
        assert!(
            ProfileRequest::from_lookup(|k| (k == env::PROFILE_MAX_RANGES).then(|| "0".into()))
                .is_err()
        );
        assert!(
            ProfileRequest::from_lookup(|k| (k == env::PROFILE_PRIMER).then(|| "yes".into()))
                .is_err()
        );
        let every = ProfileRequest::new(vec!["a__b.sum".into()]);
        let vars: HashMap<&str, String> = every.variables().into_iter().collect();
        assert_eq!(
            ProfileRequest::from_lookup(|k| vars.get(k).cloned())
                .unwrap()
                .launches_per_kernel,
            None,
            "0 travels as every launch"
        );
        assert!(
            ProfileRequest::from_lookup(
                |k| (k == env::PROFILE_LAUNCHES_PER_KERNEL).then(|| "-1".into())
            )
            .is_err()
        );
        assert_eq!(
            every.graph_profiling,
            GraphMode::Node,
            "graph launches are profiled node by node unless asked"
        );
        let e = ProfileRequest::from_lookup(|k| (k == env::PROFILE_GRAPH).then(|| "whole".into()))
            .unwrap_err();
        assert!(
            e.contains(env::PROFILE_GRAPH) && e.contains("node, graph"),
            "{e}"
        );
    }
}
