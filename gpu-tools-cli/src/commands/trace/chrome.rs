//! The trace model as a Chrome trace: one process group per GPU with a track per stream, one group per traced
//! process with a track per host thread, flow arrows from each API call to the device work it issued. Categories
//! follow torch.profiler's: `kernel`, `gpu_memcpy`, `gpu_memset`, `cuda_runtime`, `cuda_driver`, `ac2g`.

use std::collections::BTreeSet;

use serde_json::json;

use super::model::{Trace, TransferKind};
use crate::chrome_trace::{ChromeTrace, Track, args};

/// Group id of a GPU's tracks: above every process id, distinct per (traced process, device), since stream ids
/// are per process.
fn gpu_group(pid: u32, device: u32) -> u64 {
    (1 << 40) | (u64::from(pid) << 8) | u64::from(device & 0xff)
}

/// Track id of a debugger-backend kernel (no stream known): the launching thread, above every stream id.
fn thread_track(thread: u32) -> u64 {
    (1 << 48) | u64::from(thread)
}

pub fn build(trace: &Trace) -> ChromeTrace {
    let mut out = ChromeTrace::new(trace.origin());
    let several = trace.processes.len() > 1;
    for p in &trace.processes {
        let name = if p.command.is_empty() {
            format!("process {}", p.pid)
        } else {
            format!("process {} {}", p.pid, p.command)
        };
        out.name_process(u64::from(p.pid), &name, 0);
    }
    // Name each GPU group and each track once.
    let mut groups = BTreeSet::new();
    let mut tracks = BTreeSet::new();
    let mut device_track =
        |out: &mut ChromeTrace, pid: u32, device: u32, tid: u64, label: String| -> Track {
            let group = gpu_group(pid, device);
            if groups.insert(group) {
                let name = if several {
                    format!("GPU {device} (pid {pid})")
                } else {
                    format!("GPU {device}")
                };
                out.name_process(group, &name, 1 + i64::from(device));
            }
            let track = Track { pid: group, tid };
            if tracks.insert(track) {
                out.name_track(track, &label, tid.min(i64::MAX as u64) as i64);
            }
            track
        };
    let api = trace.api_by_correlation();
    let mut flow_id = 0u64;
    for k in &trace.kernels {
        let track = match (k.stream, k.thread) {
            (Some(s), _) => device_track(&mut out, k.pid, k.device, s, format!("stream {s}")),
            (None, t) => {
                let t = t.unwrap_or(0);
                device_track(
                    &mut out,
                    k.pid,
                    k.device,
                    thread_track(t),
                    format!("kernels launched by thread {t}"),
                )
            }
        };
        let caller = k.correlation.and_then(|c| api.get(&(k.pid, c)));
        let a = args([
            ("device", json!(k.device)),
            ("context", json!(k.context)),
            ("stream", json!(k.stream)),
            ("grid", json!(k.grid)),
            ("block", json!(k.block)),
            ("correlation", json!(k.correlation)),
            ("registers per thread", json!(k.registers)),
            ("shared memory", json!(k.shared_memory)),
            ("api", json!(caller.map(|c| &*c.name))),
        ]);
        match (k.start, k.end) {
            (Some(s), Some(e)) => {
                out.complete(track, &k.name, "kernel", s, e, a);
                if let Some(c) = caller {
                    flow_id += 1;
                    out.flow(
                        flow_id,
                        "ac2g",
                        host_track(c.pid, c.thread),
                        c.start,
                        track,
                        s,
                    );
                }
            }
            (Some(s), None) => out.instant(track, &k.name, "kernel", s, a),
            _ => {}
        }
    }
    for t in &trace.transfers {
        let track = device_track(
            &mut out,
            t.pid,
            t.device,
            t.stream,
            format!("stream {}", t.stream),
        );
        let (name, category) = match t.kind {
            TransferKind::Memcpy(dir) => (format!("Memcpy {dir} ({})", t.detail), "gpu_memcpy"),
            TransferKind::Memset => (format!("Memset ({})", t.detail), "gpu_memset"),
        };
        let caller = api.get(&(t.pid, t.correlation));
        let a = args([
            ("bytes", json!(t.bytes)),
            ("device", json!(t.device)),
            ("context", json!(t.context)),
            ("stream", json!(t.stream)),
            ("correlation", json!(t.correlation)),
            ("api", json!(caller.map(|c| &*c.name))),
        ]);
        out.complete(track, &name, category, t.start, t.end, a);
        if let Some(c) = caller {
            flow_id += 1;
            out.flow(
                flow_id,
                "ac2g",
                host_track(c.pid, c.thread),
                c.start,
                track,
                t.start,
            );
        }
    }
    let mut threads = BTreeSet::new();
    for c in &trace.api {
        let track = host_track(c.pid, c.thread);
        if threads.insert(track) {
            out.name_track(track, &format!("thread {}", c.thread), i64::from(c.thread));
        }
        let a = args([
            ("correlation", json!(c.correlation)),
            ("return value", json!(c.return_value)),
        ]);
        out.complete(track, &c.name, c.category, c.start, c.end, a);
    }
    out
}

fn host_track(pid: u32, thread: u32) -> Track {
    Track {
        pid: u64::from(pid),
        tid: u64::from(thread),
    }
}
