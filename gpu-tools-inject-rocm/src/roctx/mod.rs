//! ROCTx (AMD's NVTX) as ranges and marks, as NVTX comes on NVIDIA: a range's start and end are two marker records
//! sharing an id, the start named; a mark is an instant.
//!
//! rocprofiler-sdk 1.0 writes one record per range when it ends (`MARKER_CORE_RANGE_API`), without its message;
//! the message is an argument of the opening call, which only its callback reads, under the range record's
//! correlation id ([`Notes`]). An SDK without that kind gets the calls instead (`MARKER_CORE_API`): pushes and
//! pops paired per thread, starts and stops by the id the start returned ([`Ranges`]). Either way each range comes
//! out once.

mod notes;
mod ranges;

pub use notes::Notes;
pub use ranges::Ranges;

use std::sync::Arc;

use gpu_tools::rocprofiler_sdk::{Buffer, Context, Setup, TraceKind};
use gpu_tools::sys::rocprofiler_sdk as sys;

/// Where the ranges come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// `MARKER_CORE_RANGE_API`: a record per range, named by the callbacks of the same kind.
    Ranges,
    /// `MARKER_CORE_API`: the calls, paired here, named by the callbacks of the same kind.
    Calls,
}

impl Source {
    /// The callback kind whose arguments name this source's ranges.
    pub fn callback_kind(self) -> u32 {
        match self {
            Source::Ranges => sys::ROCPROFILER_CALLBACK_TRACING_MARKER_CORE_RANGE_API,
            Source::Calls => sys::ROCPROFILER_CALLBACK_TRACING_MARKER_CORE_API,
        }
    }
}

/// Configures ROCTx ranges of `context` into `buffer`: range records where the SDK has them, else the calls
/// (`calls_traced`: `MARKER_CORE_API` is already traced into `buffer`, for the runtime kind). An SDK that lacks or
/// refuses the range kinds is not an error: the tool falls back to the calls rather than end without a trace.
pub fn configure(
    setup: &mut Setup<'_>,
    context: &Context,
    buffer: &Buffer,
    notes: &Arc<Notes>,
    calls_traced: bool,
) -> gpu_tools::Result<Source> {
    let lib = setup.library();
    let has_ranges = lib.knows_buffer_kind(sys::ROCPROFILER_BUFFER_TRACING_MARKER_CORE_RANGE_API)
        && lib.knows_callback_kind(sys::ROCPROFILER_CALLBACK_TRACING_MARKER_CORE_RANGE_API);
    if has_ranges {
        match follow(setup, context, notes, Source::Ranges)
            .and_then(|()| setup.trace(context, &[TraceKind::MarkerRanges], buffer))
        {
            Ok(()) => return Ok(Source::Ranges),
            // A range callback configured before the refusal stays (the SDK has no undo): `Notes` ignores it.
            Err(e) => {
                log::warn!("ROCTx range records refused ({e}): ranges are paired from the calls")
            }
        }
    } else {
        log::info!(
            "this rocprofiler-sdk has no ROCTx range records: ranges are paired from the calls"
        );
    }
    if !calls_traced {
        setup.trace(context, &[TraceKind::MarkerApi], buffer)?;
    }
    follow(setup, context, notes, Source::Calls)?;
    Ok(Source::Calls)
}

/// Keeps the arguments of `source`'s callbacks in `notes`.
fn follow(
    setup: &mut Setup<'_>,
    context: &Context,
    notes: &Arc<Notes>,
    source: Source,
) -> gpu_tools::Result<()> {
    notes.follow(source);
    let n = Arc::clone(notes);
    setup.trace_callbacks(context, &[source.callback_kind()], move |e| n.note(e))
}
