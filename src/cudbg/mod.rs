//! NVIDIA CUDA Debugger API: drive a CUDA program as a debugger does.

pub mod api;
mod attach;
pub mod coredump;
mod device;
pub mod elf;
mod error;
mod event;
mod exception_name;
pub mod handshake;
mod library;
mod notify;
mod session;

pub use attach::{AttachError, AttachProtocol, AttachStep, NoCudaReason, PtraceHandshake};
pub use device::{DeviceProperties, Exception, GridInfo, StopWait, Suspended, WarpInfo};
pub use error::CudbgError;
pub use event::{
    ContextInfo, Dim3, ElfImage, Event, KernelFinished, KernelOrigin, KernelReady, KernelType,
    Queue, RAW_EVENT_SIZE,
};
pub use handshake::EndWatch;
pub use library::{ApiVersion, DebuggerLibrary, GetApiFn, GetApiVersionFn};
pub use session::{
    ATTACH_CAPABILITIES, AttachBuilder, BatchTiming, Closed, DEFAULT_SPIN, DebugSession,
    EventBatch, OnDrop, SessionBuilder, SessionError,
};
