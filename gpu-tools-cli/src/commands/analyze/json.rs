//! The diagnosis as JSON, with the field names of the module docs (stable: new fields may be added, none renamed
//! or removed).

use std::io::{self, Write};
use std::path::PathBuf;

use gpu_tools::trace::analyze::{Diagnosis, Evidence, Finding, GpuSummary, Span, StepSource};
use serde::Serialize;

#[derive(Serialize)]
struct Output {
    files: Vec<String>,
    gpu_time_ns: u64,
    gpus: Vec<Gpu>,
    findings: Vec<FindingOut>,
    lacks: Vec<String>,
    ended_at_signal: Vec<SignalEnd>,
}

#[derive(Serialize)]
struct SignalEnd {
    file: u32,
    stream: u32,
    pid: u32,
    host: String,
    rank: Option<u32>,
    signal: u8,
    end_ns: u64,
    text: String,
}

#[derive(Serialize)]
struct Gpu {
    file: u32,
    stream: u32,
    device: u32,
    pid: u32,
    host: String,
    rank: Option<u32>,
    start_ns: u64,
    end_ns: u64,
    window_ns: u64,
    busy_ns: u64,
    idle_ns: u64,
    before_ns: u64,
    steps: Steps,
    idle_by_cause: Vec<Cause>,
}

#[derive(Serialize)]
struct Steps {
    source: &'static str,
    name: Option<String>,
    count: u64,
    warmup: u64,
    median_ns: u64,
    p90_ns: u64,
}

#[derive(Serialize)]
struct Cause {
    cause: &'static str,
    ns: u64,
}

#[derive(Serialize)]
struct FindingOut {
    rank: usize,
    kind: &'static str,
    title: String,
    cost_ns: u64,
    share: f64,
    basis: String,
    evidence: Vec<EvidenceOut>,
    advice: Vec<String>,
    spans: Vec<SpanOut>,
}

#[derive(Serialize)]
struct EvidenceOut {
    kind: &'static str,
    name: String,
    count: Option<u64>,
    time_ns: Option<u64>,
    text: String,
}

#[derive(Serialize)]
struct SpanOut {
    file: u32,
    stream: u32,
    device: u32,
    start_ns: u64,
    end_ns: u64,
}

fn gpu(g: &GpuSummary) -> Gpu {
    let (source, name) = match &g.steps.source {
        StepSource::Nvtx(n) => ("nvtx", Some(n.clone())),
        StepSource::Graph(n) => ("graph", Some(n.clone())),
        StepSource::Pattern(n) => ("pattern", Some(n.clone())),
        _ => ("none", None),
    };
    Gpu {
        file: g.gpu.file,
        stream: g.gpu.stream,
        device: g.gpu.device,
        pid: g.gpu.pid,
        host: g.gpu.host.clone(),
        rank: g.gpu.rank,
        start_ns: g.start,
        end_ns: g.end,
        window_ns: g.end - g.start,
        busy_ns: g.busy,
        idle_ns: g.idle,
        before_ns: g.before,
        steps: Steps {
            source,
            name,
            count: g.steps.count,
            warmup: g.steps.warmup,
            median_ns: g.steps.median,
            p90_ns: g.steps.p90,
        },
        idle_by_cause: g
            .idle_by_cause
            .iter()
            .map(|(c, ns)| Cause {
                cause: c.id(),
                ns: *ns,
            })
            .collect(),
    }
}

fn evidence(e: &Evidence) -> EvidenceOut {
    EvidenceOut {
        kind: e.kind.id(),
        name: e.name.clone(),
        count: e.count,
        time_ns: e.time,
        text: e.text.clone(),
    }
}

fn span(s: &Span) -> SpanOut {
    SpanOut {
        file: s.file,
        stream: s.stream,
        device: s.device,
        start_ns: s.start,
        end_ns: s.end,
    }
}

fn finding(rank: usize, f: &Finding) -> FindingOut {
    FindingOut {
        rank,
        kind: f.kind.id(),
        title: f.title.clone(),
        cost_ns: f.cost,
        share: f.share,
        basis: f.basis.clone(),
        evidence: f.evidence.iter().map(evidence).collect(),
        advice: f.advice.clone(),
        spans: f.spans.iter().map(span).collect(),
    }
}

/// Writes the diagnosis of `files` as one JSON object.
pub fn write(out: &mut impl Write, files: &[PathBuf], d: &Diagnosis) -> io::Result<()> {
    let output = Output {
        files: files.iter().map(|f| f.display().to_string()).collect(),
        gpu_time_ns: d.gpu_time,
        gpus: d.gpus.iter().map(gpu).collect(),
        findings: d
            .findings
            .iter()
            .enumerate()
            .map(|(i, f)| finding(i + 1, f))
            .collect(),
        lacks: d.lacks.clone(),
        ended_at_signal: d
            .ended_at_signal
            .iter()
            .map(|e| SignalEnd {
                file: e.file,
                stream: e.stream,
                pid: e.pid,
                host: e.host.clone(),
                rank: e.rank,
                signal: e.signal,
                end_ns: e.time,
                text: e.text.clone(),
            })
            .collect(),
    };
    serde_json::to_writer_pretty(&mut *out, &output)?;
    writeln!(out)
}
