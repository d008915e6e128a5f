//! Device work and API calls as slices: kernels, copies, sets and graph launches on their device stream's track,
//! API calls on their thread's (those that issue work paired with it by a flow), synchronization and the vendor's
//! overhead on their process's own tracks.

use std::io;

use super::state::{Held, Key, Row};
use super::{Arg, Slice, Timeline, TimelineSink};
use crate::record::{
    ApiDomain, ApiRecord, GraphLaunchRecord, KernelRecord, MemcpyRecord, MemsetRecord,
    OverheadRecord, SyncRecord,
};
use crate::report::Alignment;

/// Whether an API function issues device work (its calls get flow arrows).
fn issues_work(name: &str) -> bool {
    ["Launch", "Memcpy", "Memset", "memcpy", "memset"]
        .iter()
        .any(|w| name.contains(w))
}

impl<S: TimelineSink> Timeline<S> {
    /// A kernel: a slice on its device stream's track, its flow from the launch call.
    pub(super) fn kernel(&mut self, key: (u32, u32), k: &KernelRecord) -> io::Result<()> {
        let shift = |a: &Alignment, t: u64| a.apply(key.0, key.1, t);
        let (start, end) = (
            shift(&self.alignment, k.start),
            shift(&self.alignment, k.end),
        );
        let track = self.lane(key, Key::Stream(k.device, k.stream), start, end)?;
        let mut args = vec![
            ("correlation", Arg::U(u64::from(k.correlation))),
            (
                "grid",
                Arg::S(format!("{},{},{}", k.grid[0], k.grid[1], k.grid[2])),
            ),
            (
                "block",
                Arg::S(format!("{},{},{}", k.block[0], k.block[1], k.block[2])),
            ),
            ("registers per thread", Arg::U(u64::from(k.registers))),
            (
                "shared memory",
                Arg::U(u64::from(k.static_shared) + u64::from(k.dynamic_shared)),
            ),
        ];
        if k.graph_id != 0 {
            args.push(("graph", Arg::U(u64::from(k.graph_id))));
            args.push(("graph node", Arg::U(k.graph_node_id)));
        }
        let work = Held {
            track,
            name: k.name.to_string(),
            category: "kernel",
            start,
            end,
            args,
        };
        self.work(key, k.correlation, work)?;
        Ok(())
    }

    /// A memory copy: a slice on its device stream's track, its flow from the call.
    pub(super) fn memcpy(&mut self, key: (u32, u32), m: &MemcpyRecord) -> io::Result<()> {
        let shift = |a: &Alignment, t: u64| a.apply(key.0, key.1, t);
        let (start, end) = (
            shift(&self.alignment, m.start),
            shift(&self.alignment, m.end),
        );
        let track = self.lane(key, Key::Stream(m.device, m.stream), start, end)?;
        let name = format!(
            "Memcpy {} ({} -> {})",
            m.kind.name(),
            m.src.name(),
            m.dst.name()
        );
        let work = Held {
            track,
            name,
            category: "gpu_memcpy",
            start,
            end,
            args: vec![
                ("bytes", Arg::U(m.bytes)),
                ("correlation", Arg::U(u64::from(m.correlation))),
            ],
        };
        self.work(key, m.correlation, work)?;
        Ok(())
    }

    /// A memory set: a slice on its device stream's track, its flow from the call.
    pub(super) fn memset(&mut self, key: (u32, u32), m: &MemsetRecord) -> io::Result<()> {
        let shift = |a: &Alignment, t: u64| a.apply(key.0, key.1, t);
        let (start, end) = (
            shift(&self.alignment, m.start),
            shift(&self.alignment, m.end),
        );
        let track = self.lane(key, Key::Stream(m.device, m.stream), start, end)?;
        let work = Held {
            track,
            name: "Memset".to_string(),
            category: "gpu_memset",
            start,
            end,
            args: vec![
                ("bytes", Arg::U(m.bytes)),
                ("value", Arg::U(u64::from(m.value))),
                ("correlation", Arg::U(u64::from(m.correlation))),
            ],
        };
        self.work(key, m.correlation, work)?;
        Ok(())
    }

    /// A CUDA graph launch: a slice on its device stream's track, its flow from the call.
    pub(super) fn graph_launch(
        &mut self,
        key: (u32, u32),
        g: &GraphLaunchRecord,
    ) -> io::Result<()> {
        let shift = |a: &Alignment, t: u64| a.apply(key.0, key.1, t);
        let (start, end) = (
            shift(&self.alignment, g.start),
            shift(&self.alignment, g.end),
        );
        let track = self.lane(key, Key::Stream(g.device, g.stream), start, end)?;
        let work = Held {
            track,
            name: format!("CUDA graph {}", g.graph_id),
            category: "cuda_graph",
            start,
            end,
            args: vec![
                ("graph", Arg::U(u64::from(g.graph_id))),
                ("correlation", Arg::U(u64::from(g.correlation))),
            ],
        };
        self.work(key, g.correlation, work)?;
        Ok(())
    }

    /// An API call: a slice on its thread's track; one that issues work held for its flow.
    pub(super) fn api(&mut self, key: (u32, u32), a: &ApiRecord) -> io::Result<()> {
        let shift = |a: &Alignment, t: u64| a.apply(key.0, key.1, t);
        let (start, end) = (
            shift(&self.alignment, a.start),
            shift(&self.alignment, a.end),
        );
        let row = match a.domain {
            ApiDomain::Runtime => Row::Runtime,
            ApiDomain::Driver => Row::Driver,
            _ => Row::OtherApi,
        };
        let track = self.lane(key, Key::Thread(a.thread, row), start, end)?;
        let unnamed;
        let name: &str = if a.name.is_empty() {
            unnamed = format!("{} cbid {}", a.domain.name(), a.cbid);
            &unnamed
        } else {
            &a.name
        };
        let call = Held {
            track,
            name: name.to_string(),
            category: match row {
                Row::Runtime => "cuda_runtime",
                _ => "cuda_driver",
            },
            start,
            end,
            args: vec![("correlation", Arg::U(u64::from(a.correlation)))],
        };
        if a.correlation != 0 && issues_work(name) {
            self.call(key, a.correlation, call)?;
        } else {
            self.sink.slice(&call.slice(None, None))?;
        }
        Ok(())
    }

    /// A synchronization: a slice on the process's synchronization track.
    pub(super) fn synchronization(&mut self, key: (u32, u32), y: &SyncRecord) -> io::Result<()> {
        let shift = |a: &Alignment, t: u64| a.apply(key.0, key.1, t);
        let (start, end) = (
            shift(&self.alignment, y.start),
            shift(&self.alignment, y.end),
        );
        let track = self.lane(key, Key::Sync, start, end)?;
        self.sink.slice(&Slice {
            track,
            name: y.kind.name(),
            category: "cuda_sync",
            start,
            end,
            instant: false,
            args: vec![
                ("stream", Arg::U(u64::from(y.stream))),
                ("correlation", Arg::U(u64::from(y.correlation))),
            ],
            flow_out: None,
            flow_in: None,
            color: None,
        })?;
        Ok(())
    }

    /// The vendor's overhead: a slice on the process's overhead track.
    pub(super) fn overhead(&mut self, key: (u32, u32), o: &OverheadRecord) -> io::Result<()> {
        let shift = |a: &Alignment, t: u64| a.apply(key.0, key.1, t);
        let (start, end) = (
            shift(&self.alignment, o.start),
            shift(&self.alignment, o.end),
        );
        let track = self.lane(key, Key::Overhead, start, end)?;
        self.sink.slice(&Slice {
            track,
            name: "CUPTI overhead",
            category: "overhead",
            start,
            end,
            instant: false,
            args: vec![("kind", Arg::U(u64::from(o.kind)))],
            flow_out: None,
            flow_in: None,
            color: None,
        })?;
        Ok(())
    }
}
