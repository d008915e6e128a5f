//! NVIDIA CUDA Debugger API: drive a CUDA program as a debugger does.

pub mod api;
mod attach;
mod device;
mod event;
pub mod handshake;
mod library;
mod notify;
mod session;

/// CUDA core dumps, read offline: [`crate::coredump`], under its older path.
#[doc(no_inline)]
pub use crate::coredump;
/// ELF images of CUDA modules and their function symbols: [`crate::coredump::elf`], under its older path.
#[doc(no_inline)]
pub use crate::coredump::elf;
#[doc(inline)]
pub use crate::coredump::{CudbgError, Dim3, Exception, KernelOrigin, KernelType};
pub use attach::{AttachError, AttachProtocol, AttachStep, NoCudaReason, PtraceHandshake};
pub use device::{DeviceProperties, GridInfo, StopWait, Suspended, WarpInfo};
pub use event::{ContextInfo, ElfImage, Event, KernelFinished, KernelReady, Queue, RAW_EVENT_SIZE};
pub use handshake::EndWatch;
pub use library::{ApiVersion, DebuggerLibrary, GetApiFn, GetApiVersionFn};
pub use session::{
    ATTACH_CAPABILITIES, AttachBuilder, BatchTiming, Closed, DEFAULT_SPIN, DebugSession,
    EventBatch, OnDrop, SessionBuilder, SessionError,
};
