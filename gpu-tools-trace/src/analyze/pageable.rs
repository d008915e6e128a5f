//! Finding: copies from or to pageable (not page-locked) host memory stall the GPU (idle cause `pageable_copy`):
//! the driver stages such a copy through a pinned buffer, the host waits in the call, and the copy cannot overlap
//! the GPU's work.

use super::copies::{evidence_of, exposed, sums};
use super::finding::{EvidenceKind, Finding, FindingKind, IdleCause};
use super::idle::SMALL_COPY;
use super::tally::{Draft, evidence, longest, tally, where_steps};
use super::words::duration;
use super::{Ctx, What};

/// The copies this finding judges: of pageable memory, and not small (small copies are the small-copy finding's).
fn judged(w: &What) -> bool {
    w.pageable() && matches!(w, What::Copy { bytes, .. } if *bytes >= SMALL_COPY)
}

pub(crate) fn detect(ctx: &Ctx<'_>) -> Option<Finding> {
    let t = tally(ctx, IdleCause::PageableCopy);
    let (bare, mut spans) = exposed(ctx, judged);
    if t.cost + bare == 0 {
        return None;
    }
    let mut ev = vec![t.gaps_evidence(
        "began while the host was in a copy of pageable memory, or in the wait after it",
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
            kind: FindingKind::PageableCopies,
            title: format!(
                "Copies from pageable host memory stall the GPU{}: the host waits in each, and none overlaps the \
                 GPU's work",
                where_steps(&t)
            ),
            cost: t.cost + bare,
            basis: "the idle gaps that began while the host thread that issued the next work was in a copy of \
                    pageable memory (or in the synchronisation right after one), and the copies' own time with no \
                    kernel beside them: page-locked memory and an asynchronous copy would let the host go on and the \
                    copy overlap computation"
                .into(),
            evidence: ev,
            advice: vec![
                "pin the host buffers: `DataLoader(pin_memory=True)` or `tensor.pin_memory()`, `cudaHostAlloc`, or \
                 `cudaHostRegister` for memory already allocated"
                    .into(),
                "then copy asynchronously (`.to(device, non_blocking=True)`, `cudaMemcpyAsync` on a stream of its \
                 own) so that the copy of the next batch overlaps this step"
                    .into(),
            ],
            spans,
        }
        .finish(ctx),
    )
}
