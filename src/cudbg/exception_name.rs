//! The names cuda-gdb prints for lane exceptions (its `CUDA Exception:` line and `info cuda lanes` column). The
//! names come from cuda-gdb's signal table, and for the codes newer than it (19 to 22) from LLVM's NVIDIA GPU
//! plugin; `LaneInvalidAtomsys`, which neither names, reads like its neighbour.

use super::Exception;

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
