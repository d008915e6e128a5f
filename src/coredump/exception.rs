//! [`Exception`]: what a lane hit (`CUDBGException_t`), as the debugger API reports it and a core dump records it,
//! with the names cuda-gdb prints for it (its `CUDA Exception:` line and `info cuda lanes` column). The names come
//! from cuda-gdb's signal table, and for the codes newer than it (19 to 22) from LLVM's NVIDIA GPU plugin;
//! `LaneInvalidAtomsys`, which neither names, reads like its neighbour.

use crate::sys::cudbg as sys;

/// A lane's hardware exception (`CUDBGException_t`).
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
#[allow(missing_docs)] // each variant is the header's name of the same code
pub enum Exception {
    None,
    Unknown,
    LaneIllegalAddress,
    LaneUserStackOverflow,
    DeviceHardwareStackOverflow,
    WarpIllegalInstruction,
    WarpOutOfRangeAddress,
    WarpMisalignedAddress,
    WarpInvalidAddressSpace,
    WarpInvalidPc,
    WarpHardwareStackOverflow,
    DeviceIllegalAddress,
    LaneMisalignedAddress,
    WarpAssert,
    LaneSyscallError,
    WarpIllegalAddress,
    LaneNonmigratableAtomsys,
    LaneInvalidAtomsys,
    ClusterOutOfRangeAddress,
    ClusterBlockNotPresent,
    WarpStackCanary,
    WarpTmemAccessCheck,
    WarpTmemLeak,
    WarpCallRequiresNewerDriver,
    /// A code this crate does not know.
    Other(u32),
}

impl Exception {
    /// The typed value of a raw `CUDBGException_t`.
    pub fn from_raw(v: u32) -> Self {
        use Exception::*;
        match v {
            sys::CUDBG_EXCEPTION_NONE => None,
            sys::CUDBG_EXCEPTION_UNKNOWN => Unknown,
            sys::CUDBG_EXCEPTION_LANE_ILLEGAL_ADDRESS => LaneIllegalAddress,
            sys::CUDBG_EXCEPTION_LANE_USER_STACK_OVERFLOW => LaneUserStackOverflow,
            sys::CUDBG_EXCEPTION_DEVICE_HARDWARE_STACK_OVERFLOW => DeviceHardwareStackOverflow,
            sys::CUDBG_EXCEPTION_WARP_ILLEGAL_INSTRUCTION => WarpIllegalInstruction,
            sys::CUDBG_EXCEPTION_WARP_OUT_OF_RANGE_ADDRESS => WarpOutOfRangeAddress,
            sys::CUDBG_EXCEPTION_WARP_MISALIGNED_ADDRESS => WarpMisalignedAddress,
            sys::CUDBG_EXCEPTION_WARP_INVALID_ADDRESS_SPACE => WarpInvalidAddressSpace,
            sys::CUDBG_EXCEPTION_WARP_INVALID_PC => WarpInvalidPc,
            sys::CUDBG_EXCEPTION_WARP_HARDWARE_STACK_OVERFLOW => WarpHardwareStackOverflow,
            sys::CUDBG_EXCEPTION_DEVICE_ILLEGAL_ADDRESS => DeviceIllegalAddress,
            sys::CUDBG_EXCEPTION_LANE_MISALIGNED_ADDRESS => LaneMisalignedAddress,
            sys::CUDBG_EXCEPTION_WARP_ASSERT => WarpAssert,
            sys::CUDBG_EXCEPTION_LANE_SYSCALL_ERROR => LaneSyscallError,
            sys::CUDBG_EXCEPTION_WARP_ILLEGAL_ADDRESS => WarpIllegalAddress,
            sys::CUDBG_EXCEPTION_LANE_NONMIGRATABLE_ATOMSYS => LaneNonmigratableAtomsys,
            sys::CUDBG_EXCEPTION_LANE_INVALID_ATOMSYS => LaneInvalidAtomsys,
            sys::CUDBG_EXCEPTION_CLUSTER_OUT_OF_RANGE_ADDRESS => ClusterOutOfRangeAddress,
            sys::CUDBG_EXCEPTION_CLUSTER_BLOCK_NOT_PRESENT => ClusterBlockNotPresent,
            sys::CUDBG_EXCEPTION_WARP_STACK_CANARY => WarpStackCanary,
            sys::CUDBG_EXCEPTION_WARP_TMEM_ACCESS_CHECK => WarpTmemAccessCheck,
            sys::CUDBG_EXCEPTION_WARP_TMEM_LEAK => WarpTmemLeak,
            sys::CUDBG_EXCEPTION_WARP_CALL_REQUIRES_NEWER_DRIVER => WarpCallRequiresNewerDriver,
            other => Other(other),
        }
    }
}

impl Exception {
    /// The name cuda-gdb gives the exception, for example `"Warp Misaligned Address"`; `"No exception"` for
    /// [`Exception::None`] and `"Device Unknown Exception"` for codes it does not name.
    pub fn description(self) -> &'static str {
        use Exception::*;
        match self {
            None => "No exception",
            LaneIllegalAddress => "Lane Illegal Address",
            LaneUserStackOverflow => "Lane User Stack Overflow",
            DeviceHardwareStackOverflow => "Device Hardware Stack Overflow",
            WarpIllegalInstruction => "Warp Illegal Instruction",
            WarpOutOfRangeAddress => "Warp Out-of-range Address",
            WarpMisalignedAddress => "Warp Misaligned Address",
            WarpInvalidAddressSpace => "Warp Invalid Address Space",
            WarpInvalidPc => "Warp Invalid PC",
            WarpHardwareStackOverflow => "Warp Hardware Stack Overflow",
            DeviceIllegalAddress => "Device Illegal Address",
            LaneMisalignedAddress => "Lane Misaligned Address",
            WarpAssert => "Warp Assert",
            LaneSyscallError => "Lane Syscall Error",
            WarpIllegalAddress => "Warp Illegal Address",
            LaneNonmigratableAtomsys => "Non-migratable System-scoped Atomic Access",
            LaneInvalidAtomsys => "Invalid System-scoped Atomic Access",
            ClusterOutOfRangeAddress => "Cluster Out-of-range Address",
            ClusterBlockNotPresent => "Cluster Block Not Present",
            WarpStackCanary => "Warp Stack Canary",
            WarpTmemAccessCheck => "Warp Tensor Memory Access Check",
            WarpTmemLeak => "Warp Tensor Memory Leak",
            WarpCallRequiresNewerDriver => "Warp Call Requires Newer Driver",
            Unknown | Other(_) => "Device Unknown Exception",
        }
    }
}
