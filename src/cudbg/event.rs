//! Typed debugger events, decoded from the driver's packed `CUDBGEvent`.

use crate::coredump::{Dim3, KernelOrigin, KernelType};
use crate::sys::cudbg as sys;

/// Which of the driver's two event queues an event came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Queue {
    /// Synchronous: the debuggee thread that raised it waits until the events are acknowledged.
    Sync,
    /// Asynchronous: needs no acknowledgement.
    Async,
}

impl Queue {
    pub(crate) fn raw(self) -> sys::CUDBGEventQueueType {
        match self {
            Queue::Sync => sys::CUDBG_EVENT_QUEUE_TYPE_SYNC,
            Queue::Async => sys::CUDBG_EVENT_QUEUE_TYPE_ASYNC,
        }
    }
}

/// A context event's fields (create, push, pop, destroy).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ContextInfo {
    /// Device index.
    pub dev: u32,
    /// Host thread (LWP) id, 0 when not known.
    pub tid: u32,
    /// The context handle in the debuggee.
    pub context: u64,
}

/// A kernel about to run (`CUDBG_EVENT_KERNEL_READY`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KernelReady {
    /// Device index.
    pub dev: u32,
    /// Host thread (LWP) id of the launching thread.
    pub tid: u32,
    /// 64-bit grid id.
    pub grid_id: u64,
    /// Context handle.
    pub context: u64,
    /// Module handle (matches [`ElfImage::module`]).
    pub module: u64,
    /// Function handle.
    pub function: u64,
    /// Device address of the kernel's first instruction.
    pub function_entry: u64,
    /// Grid dimensions.
    pub grid_dim: Dim3,
    /// Block dimensions.
    pub block_dim: Dim3,
    /// System or application kernel.
    pub kernel_type: KernelType,
    /// Grid id of the parent grid (device launches).
    pub parent_grid_id: u64,
    /// Host or device launch.
    pub origin: KernelOrigin,
}

/// A kernel that ended (`CUDBG_EVENT_KERNEL_FINISHED`).
///
/// Decoded when the driver sends it, but driver 580 (H200) was not seen sending it for application kernels, with
/// launch events on and the program synchronising after each launch: do not rely on it to time kernels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KernelFinished {
    /// Device index.
    pub dev: u32,
    /// Host thread (LWP) id.
    pub tid: u32,
    /// Context handle.
    pub context: u64,
    /// Module handle.
    pub module: u64,
    /// Function handle.
    pub function: u64,
    /// Entry address.
    pub function_entry: u64,
    /// 64-bit grid id.
    pub grid_id: u64,
}

/// An ELF image that was loaded or unloaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ElfImage {
    /// Device index.
    pub dev: u32,
    /// Context handle.
    pub context: u64,
    /// Module handle.
    pub module: u64,
    /// Image size in bytes.
    pub size: u64,
    /// Handle for [`crate::cudbg::DebugSession::elf_image`].
    pub handle: u64,
    /// `CUDBGElfImageProperties` bits (0 for an unload event, which has none).
    pub properties: u32,
}

impl ElfImage {
    /// Bit 0 of the properties, `CUDBG_ELF_IMAGE_PROPERTIES_SYSTEM`: the image holds the driver's own kernels.
    pub fn is_system(&self) -> bool {
        self.properties & 1 != 0
    }
}

/// One debugger event. Every `CUDBGEventKind` of the 13.0 header has a variant; a kind from a newer driver is kept
/// as [`Event::Unknown`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Event {
    /// `CUDBG_EVENT_INVALID`.
    Invalid,
    /// `CUDBG_EVENT_ELF_IMAGE_LOADED`.
    ElfImageLoaded(ElfImage),
    /// `CUDBG_EVENT_ELF_IMAGE_UNLOADED`.
    ElfImageUnloaded(ElfImage),
    /// `CUDBG_EVENT_KERNEL_READY`.
    KernelReady(KernelReady),
    /// `CUDBG_EVENT_KERNEL_FINISHED`.
    KernelFinished(KernelFinished),
    /// `CUDBG_EVENT_INTERNAL_ERROR`: the driver's debugger side failed; its `CUDBGResult`.
    InternalError(super::CudbgError),
    /// `CUDBG_EVENT_CTX_PUSH`.
    ContextPush(ContextInfo),
    /// `CUDBG_EVENT_CTX_POP`.
    ContextPop(ContextInfo),
    /// `CUDBG_EVENT_CTX_CREATE`.
    ContextCreate(ContextInfo),
    /// `CUDBG_EVENT_CTX_DESTROY`.
    ContextDestroy(ContextInfo),
    /// `CUDBG_EVENT_TIMEOUT`: a heartbeat; safe to ignore.
    Timeout,
    /// `CUDBG_EVENT_ATTACH_COMPLETE`.
    AttachComplete,
    /// `CUDBG_EVENT_DETACH_COMPLETE`.
    DetachComplete,
    /// `CUDBG_EVENT_FUNCTIONS_LOADED` (lazy function loading).
    FunctionsLoaded {
        /// Device index.
        dev: u32,
        /// Number of functions loaded.
        count: u32,
        /// Context handle.
        context: u64,
        /// Module handle.
        module: u64,
    },
    /// `CUDBG_EVENT_ALL_DEVICES_SUSPENDED` (suspend-events capability).
    AllDevicesSuspended {
        /// Bit per device with a warp at a breakpoint.
        broken_devices: u64,
        /// Bit per device with a warp that hit an exception.
        faulted_devices: u64,
    },
    /// `CUDBG_EVENT_CUDA_LOGS_AVAILABLE`.
    CudaLogsAvailable,
    /// `CUDBG_EVENT_CUDA_LOGS_THRESHOLD_REACHED`.
    CudaLogsThresholdReached,
    /// A kind this crate does not know.
    Unknown {
        /// The raw `CUDBGEventKind`.
        kind: u32,
    },
}

/// Size of `CUDBGEvent` in the 13.0 header (packed).
pub const RAW_EVENT_SIZE: usize = std::mem::size_of::<sys::CUDBGEvent>();

impl Event {
    /// Decodes an event the driver filled in.
    pub fn from_raw(raw: &sys::CUDBGEvent) -> Self {
        let kind = raw.kind;
        // Copy the union out of the packed struct before reading fields: no reference into packed data is made.
        let cases = raw.cases;
        let ctx = |c: sys::CUDBGEvent_cases_st_contextPush_st| ContextInfo {
            dev: c.dev,
            tid: c.tid,
            context: c.context,
        };
        // SAFETY (for each union read below): `kind` names the member the driver wrote; every member is plain
        // integers, so any bit pattern is a valid value even if the driver wrote less than the member's size.
        match kind {
            sys::CUDBG_EVENT_INVALID => Event::Invalid,
            sys::CUDBG_EVENT_ELF_IMAGE_LOADED => {
                // SAFETY: see above.
                let e = unsafe { cases.elfImageLoaded };
                Event::ElfImageLoaded(ElfImage {
                    dev: e.dev,
                    context: e.context,
                    module: e.module,
                    size: e.size,
                    handle: e.handle,
                    properties: e.properties,
                })
            }
            sys::CUDBG_EVENT_ELF_IMAGE_UNLOADED => {
                // SAFETY: see above.
                let e = unsafe { cases.elfImageUnloaded };
                Event::ElfImageUnloaded(ElfImage {
                    dev: e.dev,
                    context: e.context,
                    module: e.module,
                    size: e.size,
                    handle: e.handle,
                    properties: 0,
                })
            }
            sys::CUDBG_EVENT_KERNEL_READY => {
                // SAFETY: see above.
                let e = unsafe { cases.kernelReady };
                Event::KernelReady(KernelReady {
                    dev: e.dev,
                    tid: e.tid,
                    grid_id: e.gridId,
                    context: e.context,
                    module: e.module,
                    function: e.function,
                    function_entry: e.functionEntry,
                    grid_dim: Dim3::from(e.gridDim),
                    block_dim: Dim3::from(e.blockDim),
                    kernel_type: KernelType::from_raw(e.type_),
                    parent_grid_id: e.parentGridId,
                    origin: KernelOrigin::from_raw(e.origin),
                })
            }
            sys::CUDBG_EVENT_KERNEL_FINISHED => {
                // SAFETY: see above.
                let e = unsafe { cases.kernelFinished };
                Event::KernelFinished(KernelFinished {
                    dev: e.dev,
                    tid: e.tid,
                    context: e.context,
                    module: e.module,
                    function: e.function,
                    function_entry: e.functionEntry,
                    grid_id: e.gridId,
                })
            }
            sys::CUDBG_EVENT_INTERNAL_ERROR => {
                // SAFETY: see above.
                let e = unsafe { cases.internalError };
                Event::InternalError(super::CudbgError::from_code(e.errorType))
            }
            // The four context members share one layout; each is read through its own member.
            sys::CUDBG_EVENT_CTX_PUSH => {
                // SAFETY: see above.
                Event::ContextPush(ctx(unsafe { cases.contextPush }))
            }
            sys::CUDBG_EVENT_CTX_POP => {
                // SAFETY: see above.
                let c = unsafe { cases.contextPop };
                Event::ContextPop(ContextInfo {
                    dev: c.dev,
                    tid: c.tid,
                    context: c.context,
                })
            }
            sys::CUDBG_EVENT_CTX_CREATE => {
                // SAFETY: see above.
                let c = unsafe { cases.contextCreate };
                Event::ContextCreate(ContextInfo {
                    dev: c.dev,
                    tid: c.tid,
                    context: c.context,
                })
            }
            sys::CUDBG_EVENT_CTX_DESTROY => {
                // SAFETY: see above.
                let c = unsafe { cases.contextDestroy };
                Event::ContextDestroy(ContextInfo {
                    dev: c.dev,
                    tid: c.tid,
                    context: c.context,
                })
            }
            sys::CUDBG_EVENT_TIMEOUT => Event::Timeout,
            sys::CUDBG_EVENT_ATTACH_COMPLETE => Event::AttachComplete,
            sys::CUDBG_EVENT_DETACH_COMPLETE => Event::DetachComplete,
            sys::CUDBG_EVENT_FUNCTIONS_LOADED => {
                // SAFETY: see above.
                let e = unsafe { cases.functionsLoaded };
                Event::FunctionsLoaded {
                    dev: e.dev,
                    count: e.count,
                    context: e.context,
                    module: e.module,
                }
            }
            sys::CUDBG_EVENT_ALL_DEVICES_SUSPENDED => {
                // SAFETY: see above.
                let e = unsafe { cases.allDevicesSuspended };
                Event::AllDevicesSuspended {
                    broken_devices: e.brokenDevicesMask,
                    faulted_devices: e.faultedDevicesMask,
                }
            }
            sys::CUDBG_EVENT_CUDA_LOGS_AVAILABLE => Event::CudaLogsAvailable,
            sys::CUDBG_EVENT_CUDA_LOGS_THRESHOLD_REACHED => Event::CudaLogsThresholdReached,
            other => Event::Unknown { kind: other },
        }
    }

    /// Decodes an event from its raw bytes (the packed 13.0 layout, [`RAW_EVENT_SIZE`] bytes).
    pub fn from_bytes(bytes: &[u8; RAW_EVENT_SIZE]) -> Self {
        // SAFETY: CUDBGEvent is plain integers in a packed layout of exactly RAW_EVENT_SIZE bytes; every bit
        // pattern is a valid value, and read_unaligned needs no alignment.
        let raw: sys::CUDBGEvent = unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast()) };
        Event::from_raw(&raw)
    }

    /// A short name for the kind, for logs and traces.
    pub fn name(&self) -> &'static str {
        match self {
            Event::Invalid => "invalid",
            Event::ElfImageLoaded(_) => "elf-image-loaded",
            Event::ElfImageUnloaded(_) => "elf-image-unloaded",
            Event::KernelReady(_) => "kernel-ready",
            Event::KernelFinished(_) => "kernel-finished",
            Event::InternalError(_) => "internal-error",
            Event::ContextPush(_) => "context-push",
            Event::ContextPop(_) => "context-pop",
            Event::ContextCreate(_) => "context-create",
            Event::ContextDestroy(_) => "context-destroy",
            Event::Timeout => "timeout",
            Event::AttachComplete => "attach-complete",
            Event::DetachComplete => "detach-complete",
            Event::FunctionsLoaded { .. } => "functions-loaded",
            Event::AllDevicesSuspended { .. } => "all-devices-suspended",
            Event::CudaLogsAvailable => "cuda-logs-available",
            Event::CudaLogsThresholdReached => "cuda-logs-threshold-reached",
            Event::Unknown { .. } => "unknown",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(kind: u32, body: &[u8]) -> [u8; RAW_EVENT_SIZE] {
        let mut b = [0u8; RAW_EVENT_SIZE];
        b[..4].copy_from_slice(&kind.to_le_bytes());
        b[4..4 + body.len()].copy_from_slice(body);
        b
    }

    fn le(parts: &[&[u8]]) -> Vec<u8> {
        parts.concat()
    }

    #[test]
    fn event_is_92_bytes() {
        assert_eq!(RAW_EVENT_SIZE, 92);
    }

    #[test]
    fn kernel_ready_fields_decode_at_their_packed_offsets() {
        let body = le(&[
            &3u32.to_le_bytes(),           // dev
            &77u32.to_le_bytes(),          // tid
            &1u64.to_le_bytes(),           // gridId
            &0xc0u64.to_le_bytes(),        // context
            &0x30du64.to_le_bytes(),       // module
            &0xf00u64.to_le_bytes(),       // function
            &0x7f00_1000u64.to_le_bytes(), // functionEntry
            &2u32.to_le_bytes(),
            &1u32.to_le_bytes(),
            &1u32.to_le_bytes(), // gridDim
            &32u32.to_le_bytes(),
            &4u32.to_le_bytes(),
            &2u32.to_le_bytes(), // blockDim
            &2u32.to_le_bytes(), // type
            &9u64.to_le_bytes(), // parentGridId
            &1u32.to_le_bytes(), // origin
        ]);
        assert_eq!(body.len(), 88);
        let e = Event::from_bytes(&bytes(sys::CUDBG_EVENT_KERNEL_READY, &body));
        assert_eq!(
            e,
            Event::KernelReady(KernelReady {
                dev: 3,
                tid: 77,
                grid_id: 1,
                context: 0xc0,
                module: 0x30d,
                function: 0xf00,
                function_entry: 0x7f00_1000,
                grid_dim: Dim3 { x: 2, y: 1, z: 1 },
                block_dim: Dim3 { x: 32, y: 4, z: 2 },
                kernel_type: KernelType::Application,
                parent_grid_id: 9,
                origin: KernelOrigin::Gpu,
            })
        );
    }

    #[test]
    fn elf_loaded_and_unloaded() {
        let body = le(&[
            &1u32.to_le_bytes(),
            &0xc0u64.to_le_bytes(),
            &0x30du64.to_le_bytes(),
            &4096u64.to_le_bytes(),
            &0x55u64.to_le_bytes(),
            &1u32.to_le_bytes(),
        ]);
        let e = Event::from_bytes(&bytes(sys::CUDBG_EVENT_ELF_IMAGE_LOADED, &body));
        let Event::ElfImageLoaded(img) = e else {
            panic!("{e:?}")
        };
        assert_eq!(
            (img.dev, img.module, img.size, img.handle),
            (1, 0x30d, 4096, 0x55)
        );
        assert!(img.is_system());
        let e = Event::from_bytes(&bytes(sys::CUDBG_EVENT_ELF_IMAGE_UNLOADED, &body[..36]));
        let Event::ElfImageUnloaded(img) = e else {
            panic!("{e:?}")
        };
        assert_eq!((img.size, img.handle, img.properties), (4096, 0x55, 0));
        assert!(!img.is_system());
    }

    #[test]
    fn kernel_finished_grid_id_is_last() {
        let body = le(&[
            &0u32.to_le_bytes(),
            &5u32.to_le_bytes(),
            &1u64.to_le_bytes(),
            &2u64.to_le_bytes(),
            &3u64.to_le_bytes(),
            &4u64.to_le_bytes(),
            &42u64.to_le_bytes(),
        ]);
        let e = Event::from_bytes(&bytes(sys::CUDBG_EVENT_KERNEL_FINISHED, &body));
        let Event::KernelFinished(k) = e else {
            panic!("{e:?}")
        };
        assert_eq!(
            (k.tid, k.context, k.function_entry, k.grid_id),
            (5, 1, 4, 42)
        );
    }

    #[test]
    fn context_events_keep_their_kind() {
        let body = le(&[
            &2u32.to_le_bytes(),
            &11u32.to_le_bytes(),
            &0xabcu64.to_le_bytes(),
        ]);
        let info = ContextInfo {
            dev: 2,
            tid: 11,
            context: 0xabc,
        };
        let cases = [
            (sys::CUDBG_EVENT_CTX_CREATE, Event::ContextCreate(info)),
            (sys::CUDBG_EVENT_CTX_PUSH, Event::ContextPush(info)),
            (sys::CUDBG_EVENT_CTX_POP, Event::ContextPop(info)),
            (sys::CUDBG_EVENT_CTX_DESTROY, Event::ContextDestroy(info)),
        ];
        for (kind, want) in cases {
            assert_eq!(Event::from_bytes(&bytes(kind, &body)), want);
        }
    }

    #[test]
    fn payload_free_and_other_kinds() {
        let e = |k, body: &[u8]| Event::from_bytes(&bytes(k, body));
        assert_eq!(e(sys::CUDBG_EVENT_INVALID, &[]), Event::Invalid);
        assert_eq!(e(sys::CUDBG_EVENT_TIMEOUT, &[]), Event::Timeout);
        assert_eq!(
            e(sys::CUDBG_EVENT_ATTACH_COMPLETE, &[]),
            Event::AttachComplete
        );
        assert_eq!(
            e(sys::CUDBG_EVENT_DETACH_COMPLETE, &[]),
            Event::DetachComplete
        );
        assert_eq!(
            e(sys::CUDBG_EVENT_CUDA_LOGS_AVAILABLE, &[]),
            Event::CudaLogsAvailable
        );
        assert_eq!(
            e(sys::CUDBG_EVENT_CUDA_LOGS_THRESHOLD_REACHED, &[]),
            Event::CudaLogsThresholdReached
        );
        assert_eq!(
            e(
                sys::CUDBG_EVENT_INTERNAL_ERROR,
                &sys::CUDBG_ERROR_COMMUNICATION_FAILURE.to_le_bytes()
            ),
            Event::InternalError(super::super::CudbgError::CommunicationFailure)
        );
        let fl = le(&[
            &1u32.to_le_bytes(),
            &7u32.to_le_bytes(),
            &8u64.to_le_bytes(),
            &9u64.to_le_bytes(),
        ]);
        assert_eq!(
            e(sys::CUDBG_EVENT_FUNCTIONS_LOADED, &fl),
            Event::FunctionsLoaded {
                dev: 1,
                count: 7,
                context: 8,
                module: 9
            }
        );
        let ads = le(&[&0b10u64.to_le_bytes(), &0b1u64.to_le_bytes()]);
        assert_eq!(
            e(sys::CUDBG_EVENT_ALL_DEVICES_SUSPENDED, &ads),
            Event::AllDevicesSuspended {
                broken_devices: 2,
                faulted_devices: 1
            }
        );
        assert_eq!(e(0x4242, &[]), Event::Unknown { kind: 0x4242 });
        assert_eq!(e(0x4242, &[]).name(), "unknown");
    }

    #[test]
    fn unknown_kernel_type_and_origin_are_kept() {
        assert_eq!(KernelType::from_raw(9), KernelType::Other(9));
        assert_eq!(KernelType::from_raw(1), KernelType::System);
        assert_eq!(KernelOrigin::from_raw(0), KernelOrigin::Cpu);
        assert_eq!(KernelOrigin::from_raw(5), KernelOrigin::Other(5));
    }
}
