//! Finding: small repeated copies stall the GPU (idle cause `small_copy`): each copy under 64 KiB costs its fixed
//! part (the call, the DMA set-up) more than its bytes, and the host waits on it.

use super::copies::{evidence_of, exposed, sums};
use super::finding::{EvidenceKind, Finding, FindingKind, IdleCause};
use super::idle::{ITEM_BYTES, SMALL_COPY};
use super::tally::{Draft, evidence, longest, tally, where_steps};
use super::words::duration;
use super::{Ctx, What};
use crate::record::CopyKind;

/// The copies this finding judges: under 64 KiB, but small reads of a result (the synchronisation finding's).
fn judged(w: &What) -> bool {
    match w {
        What::Copy { kind, bytes, .. } => {
            *bytes < SMALL_COPY && !(*kind == CopyKind::DtoH && *bytes <= ITEM_BYTES)
        }
        _ => false,
    }
}

pub(crate) fn detect(ctx: &Ctx<'_>) -> Option<Finding> {
    let t = tally(ctx, IdleCause::SmallCopy);
    let (bare, mut spans) = exposed(ctx, judged);
    if t.cost + bare == 0 {
        return None;
    }
    let mut ev =
        vec![t.gaps_evidence(
            "began while the host was in a copy under 64 KiB, or in the wait after it",
        )];
    ev.push(evidence(
        EvidenceKind::Copy,
        "",
        None,
        Some(bare),
        format!(
            "the copies themselves ran {} with no kernel beside them",
            duration(bare)
        ),
    ));
    let (copies, steps) = sums(ctx, judged);
    ev.extend(evidence_of(&copies, steps));
    spans.extend(t.spans(ctx));
    longest(&mut spans);
    Some(
        Draft {
            kind: FindingKind::SmallCopies,
            title: format!(
                "Small repeated copies stall the GPU{}: each costs a call and a wait for a few bytes",
                where_steps(&t)
            ),
            cost: t.cost + bare,
            basis: "the idle gaps that began while the host thread that issued the next work was in a copy under \
                    64 KiB (or in the synchronisation right after one), and the copies' own time with no kernel beside \
                    them: one batched copy, or none, would save the waits and most of that time"
                .into(),
            evidence: ev,
            advice: vec![
                "batch the small copies into one (pack the values into one buffer or tensor, `torch.cat`, then one \
                 copy)"
                    .into(),
                "copy what does not change once, before the loop, and keep it on the GPU; make per-step values on the \
                 GPU instead of copying them"
                    .into(),
                "where a copy must stay, make it asynchronous from pinned memory (`non_blocking=True`)".into(),
            ],
            spans,
        }
        .finish(ctx),
    )
}
