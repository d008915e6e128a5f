//! The findings of an analysis ([`crate::analyze`]) drawn on the timeline: each finding a track of its own in the
//! group of each GPU it concerns, placed first there (`finding 1: launch_bound`), with a slice over each time
//! range it concerns, named by its title and carrying its estimate, basis and advice as arguments.

use std::collections::BTreeMap;
use std::io;

use super::{Arg, Key, Slice, Timeline, TimelineSink, Track};
use crate::analyze::Diagnosis;

/// Findings' tracks sort before the streams of their GPU (whose places are positive), in rank order.
const FINDING_SORT: i64 = -(1 << 20);

impl<S: TimelineSink> Timeline<S> {
    /// Draws the findings of `diagnosis`, made from the same files read in the same order (see the module docs).
    /// Call it once every file is read, before [`finish`](Self::finish).
    pub fn annotate(&mut self, diagnosis: &Diagnosis) -> io::Result<()> {
        for (i, f) in diagnosis.findings.iter().enumerate() {
            let mut by_gpu: BTreeMap<(u32, u32, u32), Vec<(u64, u64)>> = BTreeMap::new();
            for s in &f.spans {
                let at = |t: u64| self.alignment.apply(s.file, s.stream, t);
                by_gpu
                    .entry((s.file, s.stream, s.device))
                    .or_default()
                    .push((at(s.start), at(s.end)));
            }
            let args = vec![
                ("finding", Arg::S(f.kind.id().to_string())),
                ("rank", Arg::U(i as u64 + 1)),
                ("estimate_ns", Arg::U(f.cost)),
                ("share", Arg::F(f.share)),
                ("basis", Arg::S(f.basis.clone())),
                ("advice", Arg::S(f.advice.join("; "))),
            ];
            for ((file, stream, device), spans) in by_gpu {
                let parent = self.group_track((file, stream), Key::Gpu(device))?;
                let id = self.new_track();
                self.sink.track(&Track {
                    id,
                    parent: Some(parent),
                    name: format!("finding {}: {}", i + 1, f.kind.id()),
                    process: None,
                    sort: FINDING_SORT + i as i64,
                })?;
                // One track nests only if its slices do not overlap: overlapping ranges are drawn as one.
                for (start, end) in crate::analyze::union(spans) {
                    self.sink.slice(&Slice {
                        track: id,
                        name: &f.title,
                        category: "finding",
                        start,
                        end,
                        instant: false,
                        args: args.clone(),
                        flow_out: None,
                        flow_in: None,
                        color: None,
                    })?;
                }
            }
        }
        Ok(())
    }
}
