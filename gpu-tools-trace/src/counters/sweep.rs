//! One device's time cut into segments: stretches in which the same kernels run and the same counter sample (or
//! none) covers the device, visited in time order.

/// A stretch of one device's time: `[start, end)`, the sample covering it, the kernels running in it.
#[derive(Debug)]
pub(super) struct Segment<'a> {
    pub start: u64,
    pub end: u64,
    /// Index of the sample covering the segment.
    pub sample: Option<usize>,
    /// Indices of the kernels running in the segment (more than one: concurrent kernels).
    pub kernels: &'a [usize],
}

impl Segment<'_> {
    pub fn len(&self) -> u64 {
        self.end - self.start
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Edge {
    // Ends sort before starts at one time: a span `[a, b)` and one starting at `b` never meet.
    KernelEnd(usize),
    SampleEnd(usize),
    KernelStart(usize),
    SampleStart(usize),
}

/// Visits, in time order, every segment in which a kernel runs or a sample covers the device. Spans are `[start,
/// end)`; empty spans take no part. `samples` must not overlap one another ([`disjoint`] makes them so).
pub(super) fn sweep(
    kernels: &[(u64, u64)],
    samples: &[(u64, u64)],
    mut visit: impl FnMut(&Segment<'_>),
) {
    let mut edges: Vec<(u64, Edge)> = Vec::with_capacity(2 * (kernels.len() + samples.len()));
    for (i, &(start, end)) in kernels.iter().enumerate() {
        if start < end {
            edges.push((start, Edge::KernelStart(i)));
            edges.push((end, Edge::KernelEnd(i)));
        }
    }
    for (j, &(start, end)) in samples.iter().enumerate() {
        if start < end {
            edges.push((start, Edge::SampleStart(j)));
            edges.push((end, Edge::SampleEnd(j)));
        }
    }
    edges.sort_unstable();
    let mut running: Vec<usize> = Vec::new();
    let mut sample: Option<usize> = None;
    let mut at = 0u64;
    for (time, edge) in edges {
        if time > at && (sample.is_some() || !running.is_empty()) {
            visit(&Segment {
                start: at,
                end: time,
                sample,
                kernels: &running,
            });
        }
        at = time;
        match edge {
            Edge::KernelStart(i) => running.push(i),
            Edge::KernelEnd(i) => {
                if let Some(p) = running.iter().position(|&k| k == i) {
                    running.swap_remove(p);
                }
            }
            Edge::SampleStart(j) => sample = Some(j),
            Edge::SampleEnd(j) => {
                if sample == Some(j) {
                    sample = None;
                }
            }
        }
    }
}

/// Sorts spans by start and makes them disjoint: a span that starts inside an earlier one is cut to start where
/// that one ends, and a span left empty is dropped. Returns, for each span kept, its index in the input.
pub(super) fn disjoint(spans: &[(u64, u64)]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..spans.len()).collect();
    order.sort_by_key(|&i| spans[i]);
    let mut kept = Vec::with_capacity(order.len());
    let mut reached = 0u64;
    for i in order {
        let (start, end) = spans[i];
        if start.max(reached) < end {
            reached = end;
            kept.push(i);
        }
    }
    kept
}

/// The spans `disjoint` keeps, cut as it says.
pub(super) fn cut(spans: &[(u64, u64)], kept: &[usize]) -> Vec<(u64, u64)> {
    let mut reached = 0u64;
    kept.iter()
        .map(|&i| {
            let (start, end) = spans[i];
            let span = (start.max(reached), end);
            reached = end;
            span
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segments(
        kernels: &[(u64, u64)],
        samples: &[(u64, u64)],
    ) -> Vec<(u64, u64, Option<usize>, Vec<usize>)> {
        let mut out = Vec::new();
        sweep(kernels, samples, |s| {
            let mut k = s.kernels.to_vec();
            k.sort_unstable();
            out.push((s.start, s.end, s.sample, k));
        });
        out
    }

    #[test]
    fn segments_follow_kernels_and_samples() {
        // Sample 0 over [0, 100); kernel 0 over [20, 60), kernel 1 over [40, 120).
        let got = segments(&[(20, 60), (40, 120)], &[(0, 100)]);
        assert_eq!(
            got,
            vec![
                (0, 20, Some(0), vec![]),
                (20, 40, Some(0), vec![0]),
                (40, 60, Some(0), vec![0, 1]),
                (60, 100, Some(0), vec![1]),
                (100, 120, None, vec![1]),
            ]
        );
        // Back to back: the sample ending at 10 does not cover the kernel starting there.
        assert_eq!(
            segments(&[(10, 20)], &[(0, 10), (10, 20)]),
            vec![(0, 10, Some(0), vec![]), (10, 20, Some(1), vec![0])]
        );
        // Empty spans take no part; nothing runs between 5 and 7.
        assert_eq!(
            segments(&[(3, 3), (7, 9)], &[(0, 5)]),
            vec![(0, 5, Some(0), vec![]), (7, 9, None, vec![1])]
        );
    }

    #[test]
    fn overlapping_spans_are_cut_to_follow_each_other() {
        let spans = [(50, 60), (0, 30), (20, 40), (25, 35), (5, 5)];
        let kept = disjoint(&spans);
        assert_eq!(kept, vec![1, 2, 0]);
        assert_eq!(cut(&spans, &kept), vec![(0, 30), (30, 40), (50, 60)]);
    }
}
