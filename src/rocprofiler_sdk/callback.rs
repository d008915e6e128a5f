//! Callback tracing: the SDK calls the tool on the traced thread, synchronously. The crate decodes the code-object
//! events (code object loads and kernel-symbol registrations) and the arguments of ROCTx calls; other kinds come
//! with their kind, operation and phase.

use std::ffi::{CStr, c_void};
use std::sync::atomic::{AtomicU64, Ordering};

use super::marker::MarkerArgs;
use super::sized::sized;
use crate::delivery;
use crate::sys::rocprofiler_sdk as sys;

/// Whether a callback comes before or after the event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Phase {
    /// No phase.
    None,
    /// Before the function runs; for code objects: loaded (`PHASE_LOAD`).
    Enter,
    /// After the function ran; for code objects: about to be unloaded (`PHASE_UNLOAD`).
    Exit,
    /// A value this crate does not know.
    Other(u32),
}

impl Phase {
    fn from_raw(p: u32) -> Phase {
        match p {
            sys::ROCPROFILER_CALLBACK_PHASE_NONE => Phase::None,
            sys::ROCPROFILER_CALLBACK_PHASE_ENTER => Phase::Enter,
            sys::ROCPROFILER_CALLBACK_PHASE_EXIT => Phase::Exit,
            other => Phase::Other(other),
        }
    }
}

/// A code object was loaded or is about to be unloaded.
#[derive(Clone, Copy)]
pub struct CodeObjectLoad<'a> {
    raw: &'a sys::rocprofiler_callback_tracing_code_object_load_data_t,
}

impl<'a> CodeObjectLoad<'a> {
    /// The raw payload.
    pub fn raw(&self) -> &'a sys::rocprofiler_callback_tracing_code_object_load_data_t {
        self.raw
    }
    /// The code object's id (kernel symbols name it).
    pub fn id(&self) -> u64 {
        self.raw.code_object_id
    }
    /// The agent it is loaded on.
    pub fn agent_id(&self) -> u64 {
        // SAFETY: both union members are the same agent id.
        unsafe { self.raw.__bindgen_anon_1.agent_id.handle }
    }
    /// Its URI (`file:///path#offset=..&size=..` or `memory://pid#offset=..&size=..`).
    pub fn uri(&self) -> Option<&'a CStr> {
        // SAFETY: the SDK's string for the payload, valid for the callback ('a), or null.
        (!self.raw.uri.is_null()).then(|| unsafe { CStr::from_ptr(self.raw.uri) })
    }
    /// Where it is loaded on the device, and how many bytes.
    pub fn load_range(&self) -> (u64, u64) {
        (self.raw.load_base, self.raw.load_size)
    }
    /// The difference between the load address and the address the code object was linked for.
    pub fn load_delta(&self) -> i64 {
        self.raw.load_delta
    }
    /// For a code object loaded from memory, its host bytes' address and length.
    pub fn memory(&self) -> Option<(u64, u64)> {
        if self.raw.storage_type != sys::ROCPROFILER_CODE_OBJECT_STORAGE_TYPE_MEMORY {
            return None;
        }
        // SAFETY: the storage type says the memory member is the one written.
        let m = unsafe { self.raw.__bindgen_anon_2.__bindgen_anon_2 };
        Some((m.memory_base, m.memory_size))
    }
}

impl std::fmt::Debug for CodeObjectLoad<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CodeObjectLoad")
            .field("id", &self.id())
            .field("uri", &self.uri())
            .field("load_range", &self.load_range())
            .finish_non_exhaustive()
    }
}

/// A kernel symbol of a loaded code object was registered.
#[derive(Clone, Copy)]
pub struct KernelSymbol<'a> {
    raw: &'a sys::rocprofiler_callback_tracing_code_object_kernel_symbol_register_data_t,
}

impl<'a> KernelSymbol<'a> {
    /// The raw payload.
    pub fn raw(
        &self,
    ) -> &'a sys::rocprofiler_callback_tracing_code_object_kernel_symbol_register_data_t {
        self.raw
    }
    /// The kernel's id, as kernel dispatch records carry it.
    pub fn kernel_id(&self) -> u64 {
        self.raw.kernel_id
    }
    /// The code object it belongs to.
    pub fn code_object_id(&self) -> u64 {
        self.raw.code_object_id
    }
    /// The kernel's symbol name as the code object has it: mangled for C++ kernels (tools demangle it), often with
    /// a `.kd` suffix.
    pub fn name(&self) -> Option<&'a CStr> {
        // SAFETY: the SDK's string for the payload, valid for the callback ('a), or null.
        (!self.raw.kernel_name.is_null()).then(|| unsafe { CStr::from_ptr(self.raw.kernel_name) })
    }
    /// The kernel descriptor's address.
    pub fn kernel_object(&self) -> u64 {
        self.raw.kernel_object
    }
    /// LDS and scratch bytes, as the descriptor declares them.
    pub fn segment_sizes(&self) -> (u32, u32) {
        (self.raw.group_segment_size, self.raw.private_segment_size)
    }
    /// Scalar, architectural vector and accumulation vector registers.
    pub fn registers(&self) -> (u32, u32, u32) {
        (
            self.raw.sgpr_count,
            self.raw.arch_vgpr_count,
            self.raw.accum_vgpr_count,
        )
    }
}

impl std::fmt::Debug for KernelSymbol<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelSymbol")
            .field("kernel_id", &self.kernel_id())
            .field("name", &self.name())
            .finish_non_exhaustive()
    }
}

/// What a callback carries, where the crate decodes it.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum Payload<'a> {
    /// A code object load or unload.
    CodeObjectLoad(CodeObjectLoad<'a>),
    /// A kernel symbol registration or unregistration.
    KernelSymbol(KernelSymbol<'a>),
    /// The arguments of a ROCTx call (`MARKER_CORE_API` or `MARKER_CORE_RANGE_API`): its message, range id.
    Marker(MarkerArgs<'a>),
    /// A payload the crate does not decode (API arguments other than ROCTx's, which follow the traced library's
    /// release, and newer
    /// kinds); [`CallbackEvent::raw`] has its pointer.
    Other,
    /// A payload whose `size` field is below the bindings' layout (a library older than the bindings).
    TooSmall {
        /// Its size field.
        size: u64,
        /// The size the crate reads.
        need: usize,
    },
}

/// One callback of the SDK, borrowed for its duration.
#[derive(Clone, Copy)]
pub struct CallbackEvent<'a> {
    raw: &'a sys::rocprofiler_callback_tracing_record_t,
    payload: Payload<'a>,
}

impl<'a> CallbackEvent<'a> {
    /// The raw record (its `payload` pointer is valid during the callback only).
    pub fn raw(&self) -> &'a sys::rocprofiler_callback_tracing_record_t {
        self.raw
    }
    /// The callback tracing kind (`ROCPROFILER_CALLBACK_TRACING_CODE_OBJECT`, ...).
    pub fn kind(&self) -> u32 {
        self.raw.kind
    }
    /// The operation within the kind.
    pub fn operation(&self) -> i32 {
        self.raw.operation
    }
    /// Before or after.
    pub fn phase(&self) -> Phase {
        Phase::from_raw(self.raw.phase)
    }
    /// The SDK's internal correlation id.
    pub fn correlation_id(&self) -> u64 {
        self.raw.correlation_id.internal
    }
    /// The thread.
    pub fn thread_id(&self) -> u64 {
        self.raw.thread_id
    }
    /// The decoded payload.
    pub fn payload(&self) -> Payload<'a> {
        self.payload
    }
}

impl std::fmt::Debug for CallbackEvent<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallbackEvent")
            .field("kind", &self.kind())
            .field("operation", &self.operation())
            .field("phase", &self.phase())
            .field("payload", &self.payload)
            .finish()
    }
}

/// The closure of a callback tracing service.
pub(crate) type CallbackFn = dyn for<'e> Fn(&CallbackEvent<'e>) + Send + Sync;

/// What the SDK's callback data points at: the closure and its panic count. Kept for the process (the SDK has no
/// call that unconfigures a service).
pub(crate) struct CallbackState {
    pub(crate) callback: Box<CallbackFn>,
    pub(crate) panics: AtomicU64,
}

pub(crate) fn decode<'a>(
    record: &'a sys::rocprofiler_callback_tracing_record_t,
) -> CallbackEvent<'a> {
    let p = record.payload.cast_const();
    let decoded = if record.kind == sys::ROCPROFILER_CALLBACK_TRACING_CODE_OBJECT {
        // SAFETY: the SDK's payload for the record's kind and operation, valid for the callback.
        unsafe { code_object(record.operation as u32, p) }
    } else {
        let enter = record.phase == sys::ROCPROFILER_CALLBACK_PHASE_ENTER;
        // SAFETY: as above; `decode` reads only marker kinds.
        unsafe { MarkerArgs::decode(record.kind, record.operation, enter, p) }
            .map(|r| r.map(Payload::Marker))
    };
    let payload = match decoded {
        Ok(Some(p)) => p,
        Ok(None) => Payload::Other,
        Err((size, need)) => Payload::TooSmall { size, need },
    };
    CallbackEvent {
        raw: record,
        payload,
    }
}

/// The payload of a code-object callback of `op`.
///
/// # Safety
/// `p` must be null or the SDK's payload of that operation, readable for 'a.
unsafe fn code_object<'a>(op: u32, p: *const c_void) -> Result<Option<Payload<'a>>, (u64, usize)> {
    match op {
        sys::ROCPROFILER_CODE_OBJECT_LOAD => {
            // SAFETY: the caller's contract: a code object load.
            unsafe { sized::<sys::rocprofiler_callback_tracing_code_object_load_data_t>(p) }
                .map(|r| r.map(|raw| Payload::CodeObjectLoad(CodeObjectLoad { raw })))
        }
        sys::ROCPROFILER_CODE_OBJECT_DEVICE_KERNEL_SYMBOL_REGISTER => {
            // SAFETY: the caller's contract: a kernel symbol registration.
            unsafe {
                sized::<sys::rocprofiler_callback_tracing_code_object_kernel_symbol_register_data_t>(p)
            }
            .map(|r| r.map(|raw| Payload::KernelSymbol(KernelSymbol { raw })))
        }
        _ => Ok(None),
    }
}

/// The C callback given to `rocprofiler_configure_callback_tracing_service`; runs on the traced thread.
pub(crate) unsafe extern "C" fn on_callback(
    record: sys::rocprofiler_callback_tracing_record_t,
    _user_data: *mut sys::rocprofiler_user_data_t,
    data: *mut c_void,
) {
    delivery::vendor_callback((), || {
        if data.is_null() {
            return;
        }
        // SAFETY: `data` is the leaked `CallbackState` the service was configured with; it lives for the process.
        let state = unsafe { &*data.cast::<CallbackState>() };
        let event = decode(&record);
        let _scope = delivery::CallbackScope::enter();
        if let Err(payload) =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (state.callback)(&event)))
        {
            state.panics.fetch_add(1, Ordering::Relaxed);
            log::error!(
                "rocprofiler-sdk callback panicked: {}",
                delivery::panic_message(&*payload)
            );
            std::mem::forget(payload);
        }
    });
}
