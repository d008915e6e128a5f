//! One GPU of one process: its operations in start order and the intervals in which at least one ran.

use super::collect::{Op, Process};

/// A GPU's operations (indices into its process's ops, in start order) and busy intervals.
#[derive(Debug)]
pub(crate) struct Gpu {
    pub device: u32,
    pub ops: Vec<usize>,
    /// Intervals in which at least one operation ran, in order, not touching: (start, end, the operation that
    /// started it).
    pub busy: Vec<(u64, u64, usize)>,
}

/// An idle interval of a GPU: from the end of one busy interval to the start of the next (the operation that
/// starts it, `next`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Idle {
    /// When the GPU ran out of work.
    pub from: u64,
    /// When the next operation started.
    pub to: u64,
    pub next: usize,
}

impl Gpu {
    /// The GPUs of `p`, by ordinal.
    pub(crate) fn of(p: &Process) -> Vec<Gpu> {
        let mut devices: Vec<u32> = p.ops.iter().map(|o| o.device).collect();
        devices.sort_unstable();
        devices.dedup();
        devices
            .into_iter()
            .map(|device| {
                let mut ops: Vec<usize> = (0..p.ops.len())
                    .filter(|&i| p.ops[i].device == device)
                    .collect();
                ops.sort_by_key(|&i| (p.ops[i].start, p.ops[i].end));
                let busy = union(&p.ops, &ops);
                Gpu { device, ops, busy }
            })
            .collect()
    }

    /// Start of its first operation and end of its last.
    pub(crate) fn extent(&self) -> (u64, u64) {
        match (self.busy.first(), self.busy.last()) {
            (Some(a), Some(b)) => (a.0, b.1),
            _ => (0, 0),
        }
    }

    /// Busy time within `[start, end)`.
    pub(crate) fn busy_within(&self, start: u64, end: u64) -> u64 {
        let from = self.busy.partition_point(|b| b.1 <= start);
        self.busy[from..]
            .iter()
            .take_while(|b| b.0 < end)
            .map(|b| b.1.min(end).saturating_sub(b.0.max(start)))
            .sum()
    }

    /// The idle intervals that overlap `[start, end)`, with their true start (`from` may lie before `start`).
    pub(crate) fn idle_within(&self, start: u64, end: u64) -> Vec<Idle> {
        self.busy
            .windows(2)
            .filter(|w| w[0].1 < end && w[1].0 > start)
            .map(|w| Idle {
                from: w[0].1,
                to: w[1].0,
                next: w[1].2,
            })
            .collect()
    }
}

/// The union of the spans of `order` (indices into `ops`, in start order).
fn union(ops: &[Op], order: &[usize]) -> Vec<(u64, u64, usize)> {
    let mut out: Vec<(u64, u64, usize)> = Vec::new();
    for &i in order {
        let op = &ops[i];
        match out.last_mut() {
            Some(last) if op.start <= last.1 => last.1 = last.1.max(op.end),
            _ => out.push((op.start, op.end, i)),
        }
    }
    out
}
