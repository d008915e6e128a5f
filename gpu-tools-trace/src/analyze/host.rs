//! A process's host side: its API calls by thread and by correlation id, to say what a thread was doing at an
//! instant and which call issued a device operation.

use std::collections::HashMap;

use super::collect::{Call, Op, Process};

/// The calls of one process, looked up by thread and time, and by correlation id.
#[derive(Debug)]
pub(crate) struct Host<'a> {
    pub calls: &'a [Call],
    /// Per thread: indices into `calls` sorted by start, and the largest end up to each.
    threads: HashMap<u32, (Vec<usize>, Vec<u64>)>,
    /// The outermost call of each correlation id (a runtime call encloses the driver call it makes).
    by_correlation: HashMap<u32, usize>,
    /// Operations by correlation id (indices into the process's ops).
    ops_by_correlation: HashMap<u32, usize>,
    /// Synchronisation records sorted by start: (start, end, correlation), and the largest end up to each.
    syncs: Vec<(u64, u64, u32)>,
    sync_ends: Vec<u64>,
}

impl<'a> Host<'a> {
    pub(crate) fn new(p: &'a Process) -> Self {
        let mut threads: HashMap<u32, (Vec<usize>, Vec<u64>)> = HashMap::new();
        let mut by_correlation: HashMap<u32, usize> = HashMap::new();
        for (i, c) in p.calls.iter().enumerate() {
            threads.entry(c.thread).or_default().0.push(i);
            // Correlation id 0 is none: calls that carry it are not one call, nor the launch of any operation.
            if c.correlation == 0 {
                continue;
            }
            let outer = by_correlation.entry(c.correlation).or_insert(i);
            let o = &p.calls[*outer];
            if (c.start, std::cmp::Reverse(c.end)) < (o.start, std::cmp::Reverse(o.end)) {
                *outer = i;
            }
        }
        for (order, ends) in threads.values_mut() {
            order.sort_by_key(|&i| (p.calls[i].start, std::cmp::Reverse(p.calls[i].end)));
            let mut top = 0u64;
            *ends = order
                .iter()
                .map(|&i| {
                    top = top.max(p.calls[i].end);
                    top
                })
                .collect();
        }
        let mut ops_by_correlation = HashMap::new();
        for (i, op) in p
            .ops
            .iter()
            .enumerate()
            .filter(|(_, op)| op.correlation != 0)
        {
            ops_by_correlation.entry(op.correlation).or_insert(i);
        }
        let mut syncs = p.syncs.clone();
        syncs.sort_unstable();
        let mut top = 0u64;
        let sync_ends = syncs
            .iter()
            .map(|s| {
                top = top.max(s.1);
                top
            })
            .collect();
        Host {
            calls: &p.calls,
            threads,
            by_correlation,
            ops_by_correlation,
            syncs,
            sync_ends,
        }
    }

    /// The call that issued `op` (the outermost of its correlation id).
    pub(crate) fn launch_of(&self, op: &Op) -> Option<usize> {
        self.by_correlation.get(&op.correlation).copied()
    }

    /// The outermost call of `thread` in progress at `t` (`start <= t < end`).
    pub(crate) fn at(&self, thread: u32, t: u64) -> Option<usize> {
        let (order, ends) = self.threads.get(&thread)?;
        let last = order.partition_point(|&i| self.calls[i].start <= t);
        let mut found = None;
        for j in (0..last).rev() {
            if ends[j] <= t {
                break;
            }
            let c = &self.calls[order[j]];
            if c.end > t {
                found = Some(order[j]);
            }
        }
        found
    }

    /// The outermost call of the same thread that ended last before call `i` started.
    pub(crate) fn before(&self, i: usize) -> Option<usize> {
        let call = self.calls.get(i)?;
        let (order, _) = self.threads.get(&call.thread)?;
        let last = order.partition_point(|&j| self.calls[j].start < call.start);
        let j = (0..last)
            .rev()
            .map(|k| order[k])
            .find(|&j| self.calls[j].end <= call.start)?;
        self.at(call.thread, self.calls[j].start).or(Some(j))
    }

    /// The device operation call `i` issued: of its correlation id, else of a call nested in it (the driver call
    /// a runtime call makes).
    pub(crate) fn op_of(&self, i: usize) -> Option<usize> {
        let call = self.calls.get(i)?;
        if let Some(&op) = self.ops_by_correlation.get(&call.correlation) {
            return Some(op);
        }
        let (order, _) = self.threads.get(&call.thread)?;
        let from = order.partition_point(|&j| self.calls[j].start < call.start);
        order[from..]
            .iter()
            .take_while(|&&j| self.calls[j].start < call.end)
            .filter(|&&j| self.calls[j].end <= call.end)
            .find_map(|&j| {
                self.ops_by_correlation
                    .get(&self.calls[j].correlation)
                    .copied()
            })
    }

    /// A synchronisation record in progress at `t`, where the process has any: its correlation's call, if that
    /// call is known.
    pub(crate) fn sync_record_at(&self, t: u64) -> Option<Option<usize>> {
        let last = self.syncs.partition_point(|s| s.0 <= t);
        (0..last)
            .rev()
            .take_while(|&j| self.sync_ends[j] > t)
            .find(|&j| self.syncs[j].1 > t)
            .map(|j| self.by_correlation.get(&self.syncs[j].2).copied())
    }
}
