//! The diagnosis as text: the GPUs in a few lines, the first findings with their cost, evidence and advice, what
//! the trace lacks.

use std::io::{self, Write};

use gpu_tools::trace::analyze::words::{self, duration};
use gpu_tools::trace::analyze::{Diagnosis, Finding, GpuSummary, StepSource};

/// Most GPUs listed one by one (the JSON has them all).
const MAX_GPUS: usize = 8;

/// Longest name written whole in a sentence; longer ones are cut (the JSON has them whole).
const MAX_NAME: usize = 100;

/// A share as a percentage, as the findings write it, except that nearly all is not all: 99.5% to 99.9% keep a
/// decimal.
fn percent(share: f64) -> String {
    let p = 100.0 * share;
    if (99.5..100.0).contains(&p) {
        format!("{p:.1}%")
    } else {
        words::percent(share)
    }
}

/// `name`, cut to `max` characters.
pub(crate) fn short(name: &str, max: usize) -> String {
    if name.chars().count() <= max {
        return name.to_string();
    }
    let mut s: String = name.chars().take(max - 1).collect();
    s.push('…');
    s
}

fn steps(g: &GpuSummary) -> String {
    let s = &g.steps;
    let from = match &s.source {
        StepSource::Nvtx(n) => format!("NVTX range {n:?}"),
        StepSource::Graph(n) => format!("launches of {n}"),
        StepSource::Pattern(n) => format!(
            "the repeating pattern of operations, each from a {}",
            short(n, MAX_NAME)
        ),
        StepSource::None => return "no steps found: the whole trace".to_string(),
    };
    let mut line = format!(
        "{} steps of {} (median; p90 {}) from {from}",
        s.count,
        duration(s.median),
        duration(s.p90)
    );
    match s.warmup {
        0 if g.before > 0 => line.push_str(&format!(
            "; the {} before them left out",
            duration(g.before)
        )),
        0 => {}
        n => line.push_str(&format!(
            "; the {} before them left out ({} of warm-up)",
            duration(g.before),
            if n == 1 {
                "1 step".to_string()
            } else {
                format!("{n} steps")
            }
        )),
    }
    line
}

fn gpu(out: &mut impl Write, g: &GpuSummary) -> io::Result<()> {
    let window = g.end - g.start;
    let share = |ns: u64| {
        if window == 0 {
            0.0
        } else {
            ns as f64 / window as f64
        }
    };
    let causes: Vec<String> = g
        .idle_by_cause
        .iter()
        .map(|(c, ns)| format!("{} {}", c.id(), percent(share(*ns))))
        .collect();
    let by_cause = if causes.is_empty() {
        String::new()
    } else {
        format!(" ({})", causes.join(", "))
    };
    writeln!(
        out,
        "  {}: {} analysed, busy {}, idle {}{by_cause}",
        g.gpu,
        duration(window),
        percent(share(g.busy)),
        percent(share(g.idle))
    )?;
    writeln!(out, "    {}", steps(g))
}

fn finding(out: &mut impl Write, rank: usize, f: &Finding) -> io::Result<()> {
    writeln!(out, "{rank}. {}", f.title)?;
    writeln!(
        out,
        "   costs {}, {} of the GPU time [{}]",
        duration(f.cost),
        percent(f.share),
        f.kind.id()
    )?;
    writeln!(out, "   estimate: {}", f.basis)?;
    writeln!(out, "   evidence:")?;
    for e in &f.evidence {
        let text = if e.name.chars().count() > MAX_NAME {
            e.text.replace(&e.name, &short(&e.name, MAX_NAME))
        } else {
            e.text.clone()
        };
        writeln!(out, "     - {text}")?;
    }
    writeln!(out, "   try:")?;
    for a in &f.advice {
        writeln!(out, "     - {a}")?;
    }
    Ok(())
}

/// Writes the diagnosis: the first `top` findings (0: all), the others named, the GPUs, what the trace lacks.
pub fn write(out: &mut impl Write, d: &Diagnosis, top: usize) -> io::Result<()> {
    let findings = match d.findings.len() {
        1 => "1 finding".to_string(),
        n => format!("{n} findings"),
    };
    writeln!(
        out,
        "{} of GPU time analysed on {}: {findings}",
        duration(d.gpu_time),
        match d.gpus.len() {
            1 => "1 GPU".to_string(),
            n => format!("{n} GPUs"),
        }
    )?;
    // Before the findings: they cannot see a crashed process's work then in flight.
    for e in &d.ended_at_signal {
        writeln!(out, "Note: {}.", e.text)?;
    }
    let shown = if top == 0 {
        d.findings.len()
    } else {
        top.min(d.findings.len())
    };
    for (i, f) in d.findings.iter().take(shown).enumerate() {
        writeln!(out)?;
        finding(out, i + 1, f)?;
    }
    if d.findings.is_empty() {
        writeln!(out)?;
        writeln!(out, "No finding costs 1% of the GPU time or more.")?;
    }
    let rest = &d.findings[shown..];
    if !rest.is_empty() {
        let list: Vec<String> = rest
            .iter()
            .map(|f| format!("{} {}", f.kind.id(), percent(f.share)))
            .collect();
        writeln!(out)?;
        writeln!(
            out,
            "{} more {} (`--top 0` shows them): {}",
            rest.len(),
            if rest.len() == 1 {
                "finding"
            } else {
                "findings"
            },
            list.join(", ")
        )?;
    }
    writeln!(out)?;
    writeln!(out, "GPUs:")?;
    for g in d.gpus.iter().take(MAX_GPUS) {
        gpu(out, g)?;
    }
    if d.gpus.len() > MAX_GPUS {
        writeln!(
            out,
            "  and {} more GPUs (`--json` lists them all)",
            d.gpus.len() - MAX_GPUS
        )?;
    }
    if !d.lacks.is_empty() {
        writeln!(out)?;
        writeln!(out, "The trace lacks:")?;
        for l in &d.lacks {
            writeln!(out, "  - {l}")?;
        }
    }
    Ok(())
}
