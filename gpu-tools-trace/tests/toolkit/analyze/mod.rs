//! `analyze`: a finding per planted problem, on simulated programs with exactly one problem each (`program`),
//! asserting the finding, its rank and its numbers; what the analysis says of the real traces of
//! `tests/fixtures/traces/`; changed and cut files, which read with an error and never as other findings; and
//! `diff` of two traces.

mod annotate;
mod diff;
mod planted;
mod planted_job;
mod program;
mod real;
mod unreadable;

use gpu_tools_trace::analyze::{Diagnosis, Finding, FindingKind, Trace};

/// The diagnosis of trace files that read without an error.
pub fn diagnose(files: &[Vec<u8>]) -> Diagnosis {
    let mut t = Trace::new();
    for (i, f) in files.iter().enumerate() {
        let errors = t.read(i as u32, &f[..]);
        assert!(errors.is_empty(), "{errors:?}");
    }
    t.diagnose()
}

/// The finding of `kind`, printed with the others when it is missing.
pub fn finding(d: &Diagnosis, kind: FindingKind) -> &Finding {
    d.findings
        .iter()
        .find(|f| f.kind == kind)
        .unwrap_or_else(|| panic!("no {kind:?} among {:#?}", kinds(d)))
}

/// The kinds of the findings, in rank order, with their costs.
pub fn kinds(d: &Diagnosis) -> Vec<(FindingKind, u64)> {
    d.findings.iter().map(|f| (f.kind, f.cost)).collect()
}

/// Whether some evidence of `f` says `text`.
pub fn says(f: &Finding, text: &str) -> bool {
    f.evidence.iter().any(|e| e.text.contains(text))
}

/// The diagnosis in a few lines, for a failing test's output.
#[allow(dead_code)]
pub fn show(d: &Diagnosis) {
    for g in &d.gpus {
        println!(
            "{}: {}..{} busy {} idle {} {:?} {:?}",
            g.gpu, g.start, g.end, g.busy, g.idle, g.steps, g.idle_by_cause
        );
    }
    for f in &d.findings {
        println!("{:?} {} {:.3}: {}", f.kind, f.cost, f.share, f.title);
        for e in &f.evidence {
            println!("   - {}", e.text);
        }
    }
    println!("lacks {:#?}", d.lacks);
}
