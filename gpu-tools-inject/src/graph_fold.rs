//! Graph launches built from their kernels' records, for a trace attached to a running program.
//!
//! CUPTI's graph-level records (`CUPTI_ACTIVITY_KIND_GRAPH_TRACE`) cannot be enabled in a program whose graphs
//! were instantiated before CUPTI started: with CUPTI 13.0 on driver 580, the next launch of such a graph dies by
//! SIGSEGV. Kernel records are safe there, and each kernel that ran as a graph node carries its graph's id and the
//! correlation id of the launch call. So an attached trace in graph mode enables kernel records only and folds the
//! kernels of one launch (same graph id, same correlation id) into one [`GraphLaunchRecord`]: from the first
//! node's start to the last node's end, on the device, context and stream of the first node.
//!
//! A launch's kernels may arrive over more than one batch (CUPTI's buffers fill while a graph runs). A launch is
//! therefore sent once a whole batch passed without a kernel of it, or when the stream ends. CUPTI may complete
//! buffers out of order, so a kernel may still come after its launch was sent: it is left out and counted, not
//! made into a second record of the launch.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};

use gpu_tools::trace::{GraphLaunchRecord, KernelRecord};

/// A launch whose kernels are still being collected.
#[derive(Debug)]
struct Pending {
    launch: GraphLaunchRecord,
    /// The end of the node that ended last (its device and context end the launch).
    last_end: u64,
    /// Batches ended since the last kernel of it arrived.
    idle: u8,
}

/// The launches being folded.
#[derive(Debug, Default)]
pub struct GraphFold {
    pending: HashMap<(u32, u32), Pending>,
    /// Kernels folded into launches.
    folded: u64,
    /// Launches sent.
    launches: u64,
    /// Keys of the launches sent lately, in two generations of at most [`SENT_KEPT`] each.
    sent: HashSet<(u32, u32)>,
    sent_before: HashSet<(u32, u32)>,
    /// Kernels that arrived after their launch was sent.
    late: u64,
}

/// Launches remembered as sent per generation: a kernel this far behind its launch is not told from a new one.
const SENT_KEPT: usize = 1 << 16;

impl GraphFold {
    /// Takes a kernel that ran as a graph node (`graph_id != 0`).
    pub fn add(&mut self, k: &KernelRecord) {
        let key = (k.graph_id, k.correlation);
        let entry = match self.pending.entry(key) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(_) if self.sent.contains(&key) || self.sent_before.contains(&key) => {
                self.late += 1;
                return;
            }
            Entry::Vacant(v) => v.insert(Pending {
                launch: GraphLaunchRecord {
                    start: k.start,
                    end: k.end,
                    device: k.device,
                    context: k.context,
                    stream: k.stream,
                    correlation: k.correlation,
                    graph_id: k.graph_id,
                    end_device: k.device,
                    end_context: k.context,
                },
                last_end: k.end,
                idle: 0,
            }),
        };
        self.folded += 1;
        entry.idle = 0;
        let l = &mut entry.launch;
        if k.start < l.start {
            l.start = k.start;
            l.device = k.device;
            l.context = k.context;
            l.stream = k.stream;
        }
        if k.end >= entry.last_end {
            entry.last_end = k.end;
            l.end = k.end;
            l.end_device = k.device;
            l.end_context = k.context;
        }
    }

    /// The end of a batch: the launches that got no kernel in the batch before this one's end, in start order.
    pub fn end_batch(&mut self) -> Vec<GraphLaunchRecord> {
        for p in self.pending.values_mut() {
            p.idle = p.idle.saturating_add(1);
        }
        self.take(|p| p.idle >= 2)
    }

    /// Every launch still pending (the stream ends), in start order.
    pub fn finish(&mut self) -> Vec<GraphLaunchRecord> {
        self.take(|_| true)
    }

    fn take(&mut self, done: impl Fn(&Pending) -> bool) -> Vec<GraphLaunchRecord> {
        let keys: Vec<(u32, u32)> = self
            .pending
            .iter()
            .filter(|(_, p)| done(p))
            .map(|(k, _)| *k)
            .collect();
        let mut out: Vec<GraphLaunchRecord> = keys
            .iter()
            .filter_map(|k| self.pending.remove(k))
            .map(|p| p.launch)
            .collect();
        for l in &out {
            if self.sent.len() >= SENT_KEPT {
                self.sent_before = std::mem::take(&mut self.sent);
            }
            self.sent.insert((l.graph_id, l.correlation));
        }
        out.sort_by_key(|l| (l.start, l.correlation));
        self.launches += out.len() as u64;
        out
    }

    /// Kernels folded so far, and launches sent.
    pub fn counts(&self) -> (u64, u64) {
        (self.folded, self.launches)
    }

    /// Kernels left out because their launch had been sent before they arrived.
    pub fn late(&self) -> u64 {
        self.late
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn kernel(graph: u32, correlation: u32, start: u64, end: u64, device: u32) -> KernelRecord {
        KernelRecord {
            start,
            end,
            device,
            context: 1 + device,
            stream: 7,
            correlation,
            grid_id: 0,
            grid: [1, 1, 1],
            block: [32, 1, 1],
            static_shared: 0,
            dynamic_shared: 0,
            registers: 16,
            graph_id: graph,
            graph_node_id: start,
            name: Arc::from("k"),
        }
    }

    #[test]
    fn the_kernels_of_one_launch_make_one_record_from_first_start_to_last_end() {
        let mut f = GraphFold::default();
        // Two launches of graph 3 (correlations 10 and 11), one of graph 4, arriving out of order.
        f.add(&kernel(3, 10, 200, 300, 0));
        f.add(&kernel(3, 10, 100, 150, 0));
        f.add(&kernel(3, 11, 400, 500, 0));
        f.add(&kernel(4, 12, 600, 900, 1));
        f.add(&kernel(3, 10, 310, 350, 1));
        assert!(f.end_batch().is_empty(), "each got a kernel in this batch");
        let sent = f.end_batch();
        assert_eq!(sent.len(), 3);
        let first = &sent[0];
        assert_eq!(
            (first.graph_id, first.correlation, first.start, first.end),
            (3, 10, 100, 350)
        );
        assert_eq!((first.device, first.context, first.stream), (0, 1, 7));
        assert_eq!((first.end_device, first.end_context), (1, 2));
        assert_eq!(
            (sent[1].correlation, sent[1].start, sent[1].end),
            (11, 400, 500)
        );
        assert_eq!(
            (sent[2].graph_id, sent[2].start, sent[2].end),
            (4, 600, 900)
        );
        assert_eq!(f.counts(), (5, 3));
        assert!(f.finish().is_empty());
    }

    #[test]
    fn a_launch_whose_kernels_span_batches_is_sent_once_after_a_batch_without_it() {
        let mut f = GraphFold::default();
        f.add(&kernel(5, 20, 10, 20, 0));
        assert!(f.end_batch().is_empty());
        // Its last node arrives in the next batch.
        f.add(&kernel(5, 20, 30, 40, 0));
        assert!(f.end_batch().is_empty());
        let sent = f.end_batch();
        assert_eq!(sent.len(), 1);
        assert_eq!((sent[0].start, sent[0].end), (10, 40));
        assert!(f.end_batch().is_empty(), "sent once");
    }

    #[test]
    fn a_kernel_arriving_after_its_launch_was_sent_makes_no_second_launch_and_is_counted() {
        let mut f = GraphFold::default();
        f.add(&kernel(8, 40, 10, 20, 0));
        assert!(f.end_batch().is_empty());
        // Two buffers of other streams complete before the one holding the launch's last node (CUPTI completes
        // buffers out of order).
        let sent = f.end_batch();
        assert_eq!(sent.len(), 1);
        f.add(&kernel(8, 40, 30, 40, 0));
        f.add(&kernel(8, 41, 50, 60, 0));
        assert!(f.end_batch().is_empty());
        let sent = f.end_batch();
        assert_eq!(
            sent.iter().map(|l| l.correlation).collect::<Vec<_>>(),
            vec![41],
            "launch 40 was sent already"
        );
        assert!(f.finish().is_empty());
        assert_eq!(f.counts(), (2, 2));
        assert_eq!(f.late(), 1, "the late kernel is counted, not lost silently");
    }

    #[test]
    fn the_end_of_the_stream_sends_what_is_pending() {
        let mut f = GraphFold::default();
        f.add(&kernel(6, 30, 5, 6, 0));
        f.add(&kernel(6, 31, 7, 8, 0));
        let sent = f.finish();
        assert_eq!(
            sent.iter().map(|l| l.correlation).collect::<Vec<_>>(),
            vec![30, 31]
        );
        assert_eq!(f.counts(), (2, 2));
    }
}
