//! [`TracingError`]: misuse of the Activity and Callback layers that the crate reports itself, and vendor failures
//! named with the call that failed.

use super::CuptiError;
use super::activity_kind::ActivityKind;

/// The Activity or Callback layer could not do what was asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TracingError {
    /// An [`ActivityTracer`](super::activity::ActivityTracer) is already running: CUPTI's buffer callbacks are
    /// process-wide, so a process has one.
    #[error(
        "an activity tracer is already running in this process (CUPTI's buffer callbacks are process-wide)"
    )]
    TracerActive,
    /// A callback subscriber exists already: CUPTI allows one per process. `holder` names it where CUPTI said
    /// (13.0 and later), or says that it is this crate's own [`Subscriber`](super::callback::Subscriber).
    #[error("CUPTI allows one callback subscriber per process and one exists already{}", holder_text(.holder))]
    AlreadySubscribed {
        /// Who holds the subscription, where known.
        holder: Option<String>,
    },
    /// A subscriber name CUPTI cannot take: a NUL byte, or more than 53 bytes.
    #[error("subscriber name {0:?} has a NUL byte or is longer than 53 bytes")]
    InvalidName(String),
    /// No activity kind was asked for.
    #[error("no activity kind to record")]
    NoKinds,
    /// The vendor buffer size does not fit: it must hold the largest record and be a multiple of 8.
    #[error("activity buffer size {size} is not allowed: at least {min} bytes and a multiple of 8")]
    BufferSize {
        /// The size asked for.
        size: usize,
        /// The smallest size allowed.
        min: usize,
    },
    /// A buffer pool of no buffer would drop every record.
    #[error("the buffer pool must allow at least one buffer")]
    NoBuffers,
    /// The call would wait for the callback it is made from (a flush, a stop, an unsubscribe inside a callback).
    #[error(
        "this call is not allowed inside a CUPTI callback (it would wait for the callback itself)"
    )]
    InsideCallback,
    /// `cuptiFinalize` is made only where CUPTI's header says it is safe in a running process: inside the
    /// subscriber's callback, at the exit of a driver or runtime API call.
    #[error(
        "CUPTI is finalised only inside the subscriber's callback at the exit of a driver or runtime API call"
    )]
    NotAtApiExit,
    /// The user's closure panicked; the panic was caught and not unwound into CUPTI.
    #[error("the callback panicked: {0}")]
    CallbackPanicked(String),
    /// The loaded `libcupti` lacks an entry point the layer needs.
    #[error("the loaded CUPTI library has no `{0}`")]
    MissingSymbol(&'static str),
    /// [`Clock::Monotonic`](super::activity::Clock::Monotonic) needs `cuptiActivityRegisterTimestampCallback`,
    /// which the loaded library lacks; [`Clock::Realtime`](super::activity::Clock::Realtime) is CUPTI's own.
    #[error("the loaded CUPTI library cannot take a timestamp callback; use Clock::Realtime")]
    ClockUnavailable,
    /// CUPTI refused to enable an activity kind.
    #[error("cuptiActivityEnable({kind}) failed: {error}")]
    EnableKind {
        /// The kind.
        kind: ActivityKind,
        /// CUPTI's code.
        error: CuptiError,
    },
    /// A CUPTI call failed.
    #[error("{call} failed: {error}")]
    Vendor {
        /// The function.
        call: &'static str,
        /// CUPTI's code.
        error: CuptiError,
    },
}

fn holder_text(holder: &Option<String>) -> String {
    match holder {
        Some(h) => format!(" ({h})"),
        None => String::new(),
    }
}

/// `Ok` for success, else [`TracingError::Vendor`] naming `call`.
pub(crate) fn vendor(call: &'static str, code: u32) -> Result<(), TracingError> {
    CuptiError::check(code).map_err(|error| TracingError::Vendor { call, error })
}
