//! CUDA graphs: a graph launch traced as one event, and a graph's instantiation.

#[cfg(doc)]
use super::ApiRecord;

/// A CUDA graph launch, traced as one event (CUPTI's `GRAPH_TRACE` records): the kernels, copies and sets of the
/// graph are not traced one by one in this mode.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct GraphLaunchRecord {
    /// Start of the graph's first node on the device, ns.
    pub start: u64,
    /// End of its last node, ns.
    pub end: u64,
    /// Device the graph started on.
    pub device: u32,
    /// Context id it started in.
    pub context: u32,
    /// Stream id it was launched into.
    pub stream: u32,
    /// Correlation id: the [`ApiRecord`] of the launch call carries the same.
    pub correlation: u32,
    /// The graph's id (as kernel records of node mode carry it).
    pub graph_id: u32,
    /// Device the graph ended on (multi-device graphs).
    pub end_device: u32,
    /// Context id it ended in.
    pub end_context: u32,
}

impl GraphLaunchRecord {
    /// `end - start`, 0 when the vendor reported an end before the start.
    pub fn duration(&self) -> u64 {
        self.end.saturating_sub(self.start)
    }
}

/// A CUDA graph was instantiated into an executable graph.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct GraphInfo {
    /// When, ns.
    pub time: u64,
    /// The id of the graph it was instantiated from (0 where unknown).
    pub graph_id: u32,
    /// The id of the executable graph (0 where unknown).
    pub exec_id: u32,
    /// Nodes in the graph (`u32::MAX` where unknown).
    pub node_count: u32,
}
