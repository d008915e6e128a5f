//! A diff as JSON, with the field names of the module docs.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use gpu_tools::trace::diff::{Change, Diff, Profile, Select};
use serde::Serialize;

use super::select_text;

#[derive(Serialize)]
struct Output {
    a: Side,
    b: Side,
    per_step: bool,
    kernels_by_time: Vec<ChangeOut>,
    kernels_by_count: Vec<ChangeOut>,
    new_kernels: Vec<ChangeOut>,
    gone_kernels: Vec<ChangeOut>,
    api: Vec<ChangeOut>,
    copies: Vec<ChangeOut>,
}

#[derive(Serialize)]
struct Process {
    pid: u32,
    rank: Option<u32>,
    /// Its stream in the side's file: what tells it from another process of its pid.
    stream: u32,
}

#[derive(Serialize)]
struct Side {
    file: String,
    select: String,
    processes: Vec<Process>,
    gpus: u64,
    steps: u64,
    step_median_ns: u64,
    step_p90_ns: u64,
    window_ns: u64,
    busy_ns: u64,
    idle_ns: u64,
    idle_by_cause: BTreeMap<&'static str, u64>,
    kernel_ns: u64,
    api_ns: u64,
}

#[derive(Serialize)]
struct ChangeOut {
    name: String,
    a_count: u64,
    b_count: u64,
    a_ns: u64,
    b_ns: u64,
    a_per_step_ns: Option<f64>,
    b_per_step_ns: Option<f64>,
}

fn side(path: &Path, select: Select, p: &Profile) -> Side {
    Side {
        file: path.display().to_string(),
        select: select_text(select),
        processes: p
            .processes
            .iter()
            .map(|p| Process {
                pid: p.pid,
                rank: p.rank,
                stream: p.stream,
            })
            .collect(),
        gpus: p.gpus,
        steps: p.steps,
        step_median_ns: p.step_median,
        step_p90_ns: p.step_p90,
        window_ns: p.window,
        busy_ns: p.busy,
        idle_ns: p.idle,
        idle_by_cause: p
            .idle_by_cause
            .iter()
            .map(|(c, ns)| (c.id(), *ns))
            .collect(),
        kernel_ns: p.kernels.values().map(|t| t.time).sum(),
        api_ns: p.api.values().map(|t| t.time).sum(),
    }
}

fn changes(list: &[Change], d: &Diff) -> Vec<ChangeOut> {
    let per = |t: u64, steps: u64| (steps > 0).then(|| t as f64 / steps as f64);
    list.iter()
        .map(|c| ChangeOut {
            name: c.name.clone(),
            a_count: c.a.count,
            b_count: c.b.count,
            a_ns: c.a.time,
            b_ns: c.b.time,
            a_per_step_ns: per(c.a.time, d.a.steps),
            b_per_step_ns: per(c.b.time, d.b.steps),
        })
        .collect()
}

/// Writes the diff of the two sides (file and selection of each) as one JSON object.
pub fn write(out: &mut impl Write, files: [(&PathBuf, Select); 2], d: &Diff) -> io::Result<()> {
    let output = Output {
        a: side(files[0].0, files[0].1, &d.a),
        b: side(files[1].0, files[1].1, &d.b),
        per_step: d.per_step,
        kernels_by_time: changes(&d.kernels_by_time, d),
        kernels_by_count: changes(&d.kernels_by_count, d),
        new_kernels: changes(&d.new_kernels, d),
        gone_kernels: changes(&d.gone_kernels, d),
        api: changes(&d.api, d),
        copies: changes(&d.copies, d),
    };
    serde_json::to_writer_pretty(&mut *out, &output)?;
    writeln!(out)
}
