//! What the idle-cause findings share: their gaps over every GPU, their spans, and the finding built from them.

use super::finding::{Evidence, EvidenceKind, Finding, FindingKind, IdleCause, MAX_SPANS, Span};
use super::words::{count, duration, share};
use super::{Ctx, Gap};

/// The gaps of one cause over every GPU.
#[derive(Debug)]
pub(crate) struct Tally<'c> {
    /// Their total length, ns.
    pub cost: u64,
    /// Each gap with the index of its GPU's view.
    pub gaps: Vec<(usize, &'c Gap)>,
    /// Steps analysed on the GPUs that have such gaps.
    pub steps: u64,
}

/// The gaps of `cause`.
pub(crate) fn tally<'c>(ctx: &'c Ctx<'_>, cause: IdleCause) -> Tally<'c> {
    let mut t = Tally {
        cost: 0,
        gaps: Vec::new(),
        steps: 0,
    };
    for (v, view) in ctx.views.iter().enumerate() {
        let mut any = false;
        for g in view.gaps.iter().filter(|g| g.cause == cause) {
            t.cost += g.len();
            t.gaps.push((v, g));
            any = true;
        }
        if any {
            t.steps += view.steps();
        }
    }
    t
}

impl Tally<'_> {
    /// The longest gaps as spans.
    pub(crate) fn spans(&self, ctx: &Ctx<'_>) -> Vec<Span> {
        let mut spans: Vec<Span> = self
            .gaps
            .iter()
            .map(|(v, g)| ctx.views[*v].span(g.start, g.end))
            .collect();
        longest(&mut spans);
        spans
    }

    /// The first piece of evidence of every idle finding: how many gaps, how long, per step.
    pub(crate) fn gaps_evidence(&self, what: &str) -> Evidence {
        let n = self.gaps.len() as u64;
        let mut text = format!(
            "{} {what}, {} in all",
            count(n, "idle gap", "idle gaps"),
            duration(self.cost)
        );
        if let Some(per_step) = self.cost.checked_div(self.steps) {
            text.push_str(&format!(
                " ({} a step over {})",
                duration(per_step),
                count(self.steps, "step", "steps")
            ));
        }
        Evidence {
            kind: EvidenceKind::Gap,
            name: String::new(),
            count: Some(n),
            time: Some(self.cost),
            text,
        }
    }
}

/// Keeps the [`MAX_SPANS`] longest spans, in time order.
pub(crate) fn longest(spans: &mut Vec<Span>) {
    spans.sort_by_key(|s| std::cmp::Reverse(s.end - s.start));
    spans.truncate(MAX_SPANS);
    spans.sort();
}

/// A finding of `cost` ns, its share of the context's GPU time filled in.
pub(crate) struct Draft {
    pub kind: FindingKind,
    pub title: String,
    pub cost: u64,
    pub basis: String,
    pub evidence: Vec<Evidence>,
    pub advice: Vec<String>,
    pub spans: Vec<Span>,
}

impl Draft {
    pub(crate) fn finish(self, ctx: &Ctx<'_>) -> Finding {
        Finding {
            kind: self.kind,
            title: self.title,
            cost: self.cost,
            share: share(self.cost, ctx.gpu_time),
            basis: self.basis,
            evidence: self.evidence,
            advice: self.advice,
            spans: self.spans,
        }
    }
}

/// A piece of evidence.
pub(crate) fn evidence(
    kind: EvidenceKind,
    name: impl Into<String>,
    count: Option<u64>,
    time: Option<u64>,
    text: impl Into<String>,
) -> Evidence {
    Evidence {
        kind,
        name: name.into(),
        count,
        time,
        text: text.into(),
    }
}

/// ` inside the steps` where the GPUs have steps, else nothing.
pub(crate) fn where_steps(t: &Tally<'_>) -> &'static str {
    if t.steps > 0 {
        " inside the step loop"
    } else {
        ""
    }
}
