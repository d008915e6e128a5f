//! The entry layouts of the core-dump tables (`cudacoredump.h`, driver r580), written down as byte offsets.
//!
//! Each table section says its entry size (`sh_entsize`). Drivers add fields at the end of entries, so an entry
//! is at least the oldest layout (its *baseline*, driver r346) and fields past the file's entry size are absent.
//! The offsets below are asserted at compile time against bindgen's view of the header (`sys::cudacoredump`).

use super::Dim3;
use crate::bytes::{le_u32, le_u64};

/// Section types (`CudbgSectionHeaderTypes`).
pub(super) mod sht {
    const LOUSER: u32 = 0x8000_0000;
    pub const MANAGED_MEM: u32 = LOUSER + 1;
    pub const GLOBAL_MEM: u32 = LOUSER + 2;
    pub const LOCAL_MEM: u32 = LOUSER + 3;
    pub const SHARED_MEM: u32 = LOUSER + 4;
    pub const DEV_REGS: u32 = LOUSER + 5;
    pub const ELF_IMG: u32 = LOUSER + 6;
    pub const RELF_IMG: u32 = LOUSER + 7;
    pub const BT: u32 = LOUSER + 8;
    pub const DEV_TABLE: u32 = LOUSER + 9;
    pub const CTX_TABLE: u32 = LOUSER + 10;
    pub const SM_TABLE: u32 = LOUSER + 11;
    pub const GRID_TABLE: u32 = LOUSER + 12;
    pub const CTA_TABLE: u32 = LOUSER + 13;
    pub const WP_TABLE: u32 = LOUSER + 14;
    pub const LN_TABLE: u32 = LOUSER + 15;
    pub const MOD_TABLE: u32 = LOUSER + 16;
    pub const DEV_PRED: u32 = LOUSER + 17;
    pub const PARAM_MEM: u32 = LOUSER + 18;
    pub const DEV_UREGS: u32 = LOUSER + 19;
    pub const DEV_UPRED: u32 = LOUSER + 20;
    pub const CB_TABLE: u32 = LOUSER + 21;
    pub const META_DATA: u32 = LOUSER + 22;
    pub const CBU_BAR: u32 = LOUSER + 23;
}

/// `CudbgDeviceTableEntry`.
pub(super) mod dev {
    pub const NAME: usize = 0;
    pub const TYPE: usize = 8;
    pub const SM_TYPE: usize = 16;
    pub const ID: usize = 24;
    pub const PCI_BUS: usize = 28;
    pub const PCI_DEV: usize = 32;
    pub const SMS: usize = 36;
    pub const WARPS_PER_SM: usize = 40;
    pub const LANES_PER_WARP: usize = 44;
    pub const REGS_PER_LANE: usize = 48;
    pub const PREDS_PER_LANE: usize = 52;
    pub const SM_MAJOR: usize = 56;
    pub const SM_MINOR: usize = 60;
    pub const INSTRUCTION_SIZE: usize = 64;
    pub const STATUS: usize = 68;
    pub const BASELINE: usize = 72;
    /// r400.
    pub const UREGS_PER_WARP: usize = 72;
    pub const UPREDS_PER_WARP: usize = 76;
    /// r575.
    pub const BARRIERS_PER_WARP: usize = 80;
    pub const SIZE: usize = 88;
}

/// `CudbgContextTableEntry`.
pub(super) mod ctx {
    pub const ID: usize = 0;
    pub const SHARED_WINDOW: usize = 8;
    pub const LOCAL_WINDOW: usize = 16;
    pub const GLOBAL_WINDOW: usize = 24;
    pub const DEVICE_INDEX: usize = 32;
    pub const TID: usize = 36;
    pub const BASELINE: usize = 40;
    pub const SIZE: usize = 40;
}

/// `CudbgModuleTableEntry`.
pub(super) mod module {
    pub const HANDLE: usize = 0;
    pub const BASELINE: usize = 8;
    pub const SIZE: usize = 8;
}

/// `CudbgGridTableEntry`.
pub(super) mod grid {
    pub const ID: usize = 0;
    pub const CONTEXT: usize = 8;
    pub const FUNCTION: usize = 16;
    pub const FUNCTION_ENTRY: usize = 24;
    pub const MODULE: usize = 32;
    pub const PARENT: usize = 40;
    pub const PARAMS_OFFSET: usize = 48;
    pub const KERNEL_TYPE: usize = 56;
    pub const ORIGIN: usize = 60;
    pub const STATUS: usize = 64;
    pub const REGS: usize = 68;
    pub const GRID_DIM: usize = 72;
    pub const BLOCK_DIM: usize = 84;
    pub const LAUNCH_BLOCKING: usize = 96;
    pub const HOST_TID: usize = 100;
    pub const BASELINE: usize = 104;
    /// r525.
    pub const CLUSTER_DIM: usize = 104;
    /// r565.
    pub const PREFERRED_CLUSTER_DIM: usize = 120;
    pub const SIZE: usize = 136;
}

/// `CudbgConstBankTableEntry`.
pub(super) mod cbank {
    pub const ADDR: usize = 0;
    pub const SIZE_FIELD: usize = 8;
    pub const BANK: usize = 12;
    pub const BASELINE: usize = 16;
    pub const SIZE: usize = 16;
}

/// `CudbgSmTableEntry`.
pub(super) mod sm {
    pub const ID: usize = 0;
    pub const BASELINE: usize = 8;
    /// r555.
    pub const EXCEPTION: usize = 8;
    pub const ERROR_PC_VALID: usize = 12;
    pub const ERROR_PC: usize = 16;
    pub const CLUSTER_TARGET_VALID: usize = 24;
    pub const CLUSTER_TARGET: usize = 28;
    /// r580.
    pub const EXCEPTION_STRING: usize = 40;
    pub const SIZE: usize = 48;
}

/// `CudbgCTATableEntry`.
pub(super) mod cta {
    pub const GRID_ID: usize = 0;
    pub const BLOCK_IDX: usize = 8;
    pub const BASELINE: usize = 24;
    /// r525.
    pub const CLUSTER_IDX: usize = 24;
    /// r565.
    pub const CLUSTER_DIM: usize = 40;
    pub const SIZE: usize = 56;
}

/// `CudbgWarpTableEntry`.
pub(super) mod warp {
    pub const ERROR_PC: usize = 0;
    pub const ID: usize = 8;
    pub const VALID_LANES: usize = 12;
    pub const ACTIVE_LANES: usize = 16;
    pub const BROKEN: usize = 20;
    pub const ERROR_PC_VALID: usize = 24;
    pub const BASELINE: usize = 32;
    /// r525.
    pub const REGS: usize = 32;
    /// r570.
    pub const SHARED_MEM_SIZE: usize = 40;
    /// r575.
    pub const IN_SYSCALL_LANES: usize = 48;
    pub const CBU_ACTIVE_LANES: usize = 52;
    pub const CBU_EXITED_LANES: usize = 56;
    pub const CBU_COLLECTIVE_LANES: usize = 60;
    pub const SIZE: usize = 64;
}

/// `CudbgThreadTableEntry`.
pub(super) mod lane {
    pub const VIRTUAL_PC: usize = 0;
    pub const PHYS_PC: usize = 8;
    pub const LN: usize = 16;
    pub const THREAD_IDX: usize = 20;
    pub const EXCEPTION: usize = 32;
    pub const CALL_DEPTH: usize = 36;
    pub const SYSCALL_CALL_DEPTH: usize = 40;
    pub const CC_REGISTER: usize = 44;
    pub const BASELINE: usize = 48;
    /// r575.
    pub const CBU_THREAD_STATE: usize = 48;
    pub const SIZE: usize = 56;
}

/// `CudbgBacktraceTableEntry`.
pub(super) mod frame {
    pub const RETURN_OFFSET: usize = 0;
    pub const RETURN_ADDRESS: usize = 8;
    pub const LEVEL: usize = 16;
    pub const BASELINE: usize = 24;
    pub const SIZE: usize = 24;
}

/// `CudbgMetaDataEntry` (r565).
pub(super) mod meta {
    pub const GENERATOR: usize = 0;
    pub const DRIVER_MAJOR: usize = 8;
    pub const DRIVER_MINOR: usize = 12;
    pub const CUDA_MAJOR: usize = 16;
    pub const CUDA_MINOR: usize = 20;
    pub const FLAGS: usize = 24;
    pub const TIMESTAMP: usize = 28;
    pub const BASELINE: usize = 32;
    pub const SIZE: usize = 32;
}

/// Element size of the raw `uint32_t` sections (registers, predicates, barrier masks).
pub(super) const WORD: usize = 4;

/// One table entry: exactly `sh_entsize` bytes. Fields inside the baseline are always there (the table was checked
/// to have entries at least that large); later fields read as `None` when the entry is shorter.
#[derive(Clone, Copy)]
pub(super) struct Entry<'a>(pub &'a [u8]);

impl Entry<'_> {
    pub fn opt_u32(self, at: usize) -> Option<u32> {
        le_u32(self.0, at)
    }
    pub fn opt_u64(self, at: usize) -> Option<u64> {
        le_u64(self.0, at)
    }
    /// A baseline field (always inside the entry; 0 would only be seen if that check were skipped).
    pub fn u32(self, at: usize) -> u32 {
        self.opt_u32(at).unwrap_or(0)
    }
    /// A baseline field.
    pub fn u64(self, at: usize) -> u64 {
        self.opt_u64(at).unwrap_or(0)
    }
    /// Three consecutive `u32` (x, y, z), if all are inside the entry.
    pub fn opt_dim3(self, at: usize) -> Option<Dim3> {
        Some(Dim3 {
            x: self.opt_u32(at)?,
            y: self.opt_u32(at + 4)?,
            z: self.opt_u32(at + 8)?,
        })
    }
    /// A baseline `Dim3`.
    pub fn dim3(self, at: usize) -> Dim3 {
        self.opt_dim3(at).unwrap_or_default()
    }
}

// The offsets above, checked against the header as bindgen lays it out. A header change that moves a field breaks
// the build here instead of misreading dumps.
const _: () = {
    use crate::sys::cudacoredump as h;
    use std::mem::{offset_of, size_of};

    assert!(offset_of!(h::CudbgDeviceTableEntry, devName) == dev::NAME);
    assert!(offset_of!(h::CudbgDeviceTableEntry, devType) == dev::TYPE);
    assert!(offset_of!(h::CudbgDeviceTableEntry, smType) == dev::SM_TYPE);
    assert!(offset_of!(h::CudbgDeviceTableEntry, devId) == dev::ID);
    assert!(offset_of!(h::CudbgDeviceTableEntry, pciBusId) == dev::PCI_BUS);
    assert!(offset_of!(h::CudbgDeviceTableEntry, pciDevId) == dev::PCI_DEV);
    assert!(offset_of!(h::CudbgDeviceTableEntry, numSMs) == dev::SMS);
    assert!(offset_of!(h::CudbgDeviceTableEntry, numWarpsPerSM) == dev::WARPS_PER_SM);
    assert!(offset_of!(h::CudbgDeviceTableEntry, numLanesPerWarp) == dev::LANES_PER_WARP);
    assert!(offset_of!(h::CudbgDeviceTableEntry, numRegsPerLane) == dev::REGS_PER_LANE);
    assert!(offset_of!(h::CudbgDeviceTableEntry, numPredicatesPrLane) == dev::PREDS_PER_LANE);
    assert!(offset_of!(h::CudbgDeviceTableEntry, smMajor) == dev::SM_MAJOR);
    assert!(offset_of!(h::CudbgDeviceTableEntry, smMinor) == dev::SM_MINOR);
    assert!(offset_of!(h::CudbgDeviceTableEntry, instructionSize) == dev::INSTRUCTION_SIZE);
    assert!(offset_of!(h::CudbgDeviceTableEntry, status) == dev::STATUS);
    assert!(offset_of!(h::CudbgDeviceTableEntry, numUniformRegsPrWarp) == dev::UREGS_PER_WARP);
    assert!(
        offset_of!(h::CudbgDeviceTableEntry, numUniformPredicatesPrWarp) == dev::UPREDS_PER_WARP
    );
    assert!(
        offset_of!(h::CudbgDeviceTableEntry, numConvergenceBarriersPrWarp)
            == dev::BARRIERS_PER_WARP
    );
    assert!(size_of::<h::CudbgDeviceTableEntry>() == dev::SIZE);

    assert!(offset_of!(h::CudbgContextTableEntry, contextId) == ctx::ID);
    assert!(offset_of!(h::CudbgContextTableEntry, sharedWindowBase) == ctx::SHARED_WINDOW);
    assert!(offset_of!(h::CudbgContextTableEntry, localWindowBase) == ctx::LOCAL_WINDOW);
    assert!(offset_of!(h::CudbgContextTableEntry, globalWindowBase) == ctx::GLOBAL_WINDOW);
    assert!(offset_of!(h::CudbgContextTableEntry, deviceIdx) == ctx::DEVICE_INDEX);
    assert!(offset_of!(h::CudbgContextTableEntry, tid) == ctx::TID);
    assert!(size_of::<h::CudbgContextTableEntry>() == ctx::SIZE);

    assert!(offset_of!(h::CudbgModuleTableEntry, moduleHandle) == module::HANDLE);
    assert!(size_of::<h::CudbgModuleTableEntry>() == module::SIZE);

    assert!(offset_of!(h::CudbgGridTableEntry, gridId64) == grid::ID);
    assert!(offset_of!(h::CudbgGridTableEntry, contextId) == grid::CONTEXT);
    assert!(offset_of!(h::CudbgGridTableEntry, function) == grid::FUNCTION);
    assert!(offset_of!(h::CudbgGridTableEntry, functionEntry) == grid::FUNCTION_ENTRY);
    assert!(offset_of!(h::CudbgGridTableEntry, moduleHandle) == grid::MODULE);
    assert!(offset_of!(h::CudbgGridTableEntry, parentGridId64) == grid::PARENT);
    assert!(offset_of!(h::CudbgGridTableEntry, paramsOffset) == grid::PARAMS_OFFSET);
    assert!(offset_of!(h::CudbgGridTableEntry, kernelType) == grid::KERNEL_TYPE);
    assert!(offset_of!(h::CudbgGridTableEntry, origin) == grid::ORIGIN);
    assert!(offset_of!(h::CudbgGridTableEntry, gridStatus) == grid::STATUS);
    assert!(offset_of!(h::CudbgGridTableEntry, numRegs) == grid::REGS);
    assert!(offset_of!(h::CudbgGridTableEntry, gridDimX) == grid::GRID_DIM);
    assert!(offset_of!(h::CudbgGridTableEntry, gridDimZ) == grid::GRID_DIM + 8);
    assert!(offset_of!(h::CudbgGridTableEntry, blockDimX) == grid::BLOCK_DIM);
    assert!(offset_of!(h::CudbgGridTableEntry, blockDimZ) == grid::BLOCK_DIM + 8);
    assert!(offset_of!(h::CudbgGridTableEntry, attrLaunchBlocking) == grid::LAUNCH_BLOCKING);
    assert!(offset_of!(h::CudbgGridTableEntry, attrHostTid) == grid::HOST_TID);
    assert!(offset_of!(h::CudbgGridTableEntry, clusterDimX) == grid::CLUSTER_DIM);
    assert!(offset_of!(h::CudbgGridTableEntry, clusterDimZ) == grid::CLUSTER_DIM + 8);
    assert!(
        offset_of!(h::CudbgGridTableEntry, preferredClusterDimX) == grid::PREFERRED_CLUSTER_DIM
    );
    assert!(
        offset_of!(h::CudbgGridTableEntry, preferredClusterDimZ) == grid::PREFERRED_CLUSTER_DIM + 8
    );
    assert!(size_of::<h::CudbgGridTableEntry>() == grid::SIZE);

    assert!(offset_of!(h::CudbgConstBankTableEntry, addr) == cbank::ADDR);
    assert!(offset_of!(h::CudbgConstBankTableEntry, size) == cbank::SIZE_FIELD);
    assert!(offset_of!(h::CudbgConstBankTableEntry, bankId) == cbank::BANK);
    assert!(size_of::<h::CudbgConstBankTableEntry>() == cbank::SIZE);

    assert!(offset_of!(h::CudbgSmTableEntry, smId) == sm::ID);
    assert!(offset_of!(h::CudbgSmTableEntry, exception) == sm::EXCEPTION);
    assert!(offset_of!(h::CudbgSmTableEntry, errorPCValid) == sm::ERROR_PC_VALID);
    assert!(offset_of!(h::CudbgSmTableEntry, errorPC) == sm::ERROR_PC);
    assert!(
        offset_of!(h::CudbgSmTableEntry, clusterExceptionTargetBlockIdxValid)
            == sm::CLUSTER_TARGET_VALID
    );
    assert!(
        offset_of!(h::CudbgSmTableEntry, clusterExceptionTargetBlockIdxX) == sm::CLUSTER_TARGET
    );
    assert!(
        offset_of!(h::CudbgSmTableEntry, clusterExceptionTargetBlockIdxZ) == sm::CLUSTER_TARGET + 8
    );
    assert!(offset_of!(h::CudbgSmTableEntry, exceptionString) == sm::EXCEPTION_STRING);
    assert!(size_of::<h::CudbgSmTableEntry>() == sm::SIZE);

    assert!(offset_of!(h::CudbgCTATableEntry, gridId64) == cta::GRID_ID);
    assert!(offset_of!(h::CudbgCTATableEntry, blockIdxX) == cta::BLOCK_IDX);
    assert!(offset_of!(h::CudbgCTATableEntry, blockIdxZ) == cta::BLOCK_IDX + 8);
    assert!(offset_of!(h::CudbgCTATableEntry, clusterIdxX) == cta::CLUSTER_IDX);
    assert!(offset_of!(h::CudbgCTATableEntry, clusterIdxZ) == cta::CLUSTER_IDX + 8);
    assert!(offset_of!(h::CudbgCTATableEntry, clusterDimX) == cta::CLUSTER_DIM);
    assert!(offset_of!(h::CudbgCTATableEntry, clusterDimZ) == cta::CLUSTER_DIM + 8);
    assert!(size_of::<h::CudbgCTATableEntry>() == cta::SIZE);

    assert!(offset_of!(h::CudbgWarpTableEntry, errorPC) == warp::ERROR_PC);
    assert!(offset_of!(h::CudbgWarpTableEntry, warpId) == warp::ID);
    assert!(offset_of!(h::CudbgWarpTableEntry, validLanesMask) == warp::VALID_LANES);
    assert!(offset_of!(h::CudbgWarpTableEntry, activeLanesMask) == warp::ACTIVE_LANES);
    assert!(offset_of!(h::CudbgWarpTableEntry, isWarpBroken) == warp::BROKEN);
    assert!(offset_of!(h::CudbgWarpTableEntry, errorPCValid) == warp::ERROR_PC_VALID);
    assert!(offset_of!(h::CudbgWarpTableEntry, numRegs) == warp::REGS);
    assert!(offset_of!(h::CudbgWarpTableEntry, sharedMemSize) == warp::SHARED_MEM_SIZE);
    assert!(offset_of!(h::CudbgWarpTableEntry, inSyscallLanesMask) == warp::IN_SYSCALL_LANES);
    assert!(offset_of!(h::CudbgWarpTableEntry, cbuActiveLanesMask) == warp::CBU_ACTIVE_LANES);
    assert!(offset_of!(h::CudbgWarpTableEntry, cbuExitedLanesMask) == warp::CBU_EXITED_LANES);
    assert!(
        offset_of!(h::CudbgWarpTableEntry, cbuCollectiveLanesMask) == warp::CBU_COLLECTIVE_LANES
    );
    assert!(size_of::<h::CudbgWarpTableEntry>() == warp::SIZE);

    assert!(offset_of!(h::CudbgThreadTableEntry, virtualPC) == lane::VIRTUAL_PC);
    assert!(offset_of!(h::CudbgThreadTableEntry, physPC) == lane::PHYS_PC);
    assert!(offset_of!(h::CudbgThreadTableEntry, ln) == lane::LN);
    assert!(offset_of!(h::CudbgThreadTableEntry, threadIdxX) == lane::THREAD_IDX);
    assert!(offset_of!(h::CudbgThreadTableEntry, threadIdxZ) == lane::THREAD_IDX + 8);
    assert!(offset_of!(h::CudbgThreadTableEntry, exception) == lane::EXCEPTION);
    assert!(offset_of!(h::CudbgThreadTableEntry, callDepth) == lane::CALL_DEPTH);
    assert!(offset_of!(h::CudbgThreadTableEntry, syscallCallDepth) == lane::SYSCALL_CALL_DEPTH);
    assert!(offset_of!(h::CudbgThreadTableEntry, ccRegister) == lane::CC_REGISTER);
    assert!(offset_of!(h::CudbgThreadTableEntry, cbuThreadState) == lane::CBU_THREAD_STATE);
    assert!(size_of::<h::CudbgThreadTableEntry>() == lane::SIZE);

    assert!(offset_of!(h::CudbgBacktraceTableEntry, returnAddress) == frame::RETURN_OFFSET);
    assert!(offset_of!(h::CudbgBacktraceTableEntry, virtualReturnAddress) == frame::RETURN_ADDRESS);
    assert!(offset_of!(h::CudbgBacktraceTableEntry, level) == frame::LEVEL);
    assert!(size_of::<h::CudbgBacktraceTableEntry>() == frame::SIZE);

    assert!(offset_of!(h::CudbgMetaDataEntry, generatorName) == meta::GENERATOR);
    assert!(offset_of!(h::CudbgMetaDataEntry, driverVersionMajor) == meta::DRIVER_MAJOR);
    assert!(offset_of!(h::CudbgMetaDataEntry, driverVersionMinor) == meta::DRIVER_MINOR);
    assert!(offset_of!(h::CudbgMetaDataEntry, cudaDriverVersionMajor) == meta::CUDA_MAJOR);
    assert!(offset_of!(h::CudbgMetaDataEntry, cudaDriverVersionMinor) == meta::CUDA_MINOR);
    assert!(offset_of!(h::CudbgMetaDataEntry, flags) == meta::FLAGS);
    assert!(offset_of!(h::CudbgMetaDataEntry, timestamp) == meta::TIMESTAMP);
    assert!(size_of::<h::CudbgMetaDataEntry>() == meta::SIZE);

    // Every field read without a check lies inside its table's baseline.
    assert!(dev::STATUS + 4 <= dev::BASELINE);
    assert!(ctx::TID + 4 <= ctx::BASELINE);
    assert!(module::HANDLE + 8 <= module::BASELINE);
    assert!(grid::HOST_TID + 4 <= grid::BASELINE);
    assert!(cbank::BANK + 4 <= cbank::BASELINE);
    assert!(sm::ID + 4 <= sm::BASELINE);
    assert!(cta::BLOCK_IDX + 12 <= cta::BASELINE);
    assert!(warp::ERROR_PC_VALID + 4 <= warp::BASELINE);
    assert!(lane::CC_REGISTER + 4 <= lane::BASELINE);
    assert!(frame::LEVEL + 4 <= frame::BASELINE);
    assert!(meta::TIMESTAMP + 4 <= meta::BASELINE);

    assert!(h::CUDBG_SHT_MANAGED_MEM == sht::MANAGED_MEM);
    assert!(h::CUDBG_SHT_GLOBAL_MEM == sht::GLOBAL_MEM);
    assert!(h::CUDBG_SHT_LOCAL_MEM == sht::LOCAL_MEM);
    assert!(h::CUDBG_SHT_SHARED_MEM == sht::SHARED_MEM);
    assert!(h::CUDBG_SHT_DEV_REGS == sht::DEV_REGS);
    assert!(h::CUDBG_SHT_ELF_IMG == sht::ELF_IMG);
    assert!(h::CUDBG_SHT_RELF_IMG == sht::RELF_IMG);
    assert!(h::CUDBG_SHT_BT == sht::BT);
    assert!(h::CUDBG_SHT_DEV_TABLE == sht::DEV_TABLE);
    assert!(h::CUDBG_SHT_CTX_TABLE == sht::CTX_TABLE);
    assert!(h::CUDBG_SHT_SM_TABLE == sht::SM_TABLE);
    assert!(h::CUDBG_SHT_GRID_TABLE == sht::GRID_TABLE);
    assert!(h::CUDBG_SHT_CTA_TABLE == sht::CTA_TABLE);
    assert!(h::CUDBG_SHT_WP_TABLE == sht::WP_TABLE);
    assert!(h::CUDBG_SHT_LN_TABLE == sht::LN_TABLE);
    assert!(h::CUDBG_SHT_MOD_TABLE == sht::MOD_TABLE);
    assert!(h::CUDBG_SHT_DEV_PRED == sht::DEV_PRED);
    assert!(h::CUDBG_SHT_PARAM_MEM == sht::PARAM_MEM);
    assert!(h::CUDBG_SHT_DEV_UREGS == sht::DEV_UREGS);
    assert!(h::CUDBG_SHT_DEV_UPRED == sht::DEV_UPRED);
    assert!(h::CUDBG_SHT_CB_TABLE == sht::CB_TABLE);
    assert!(h::CUDBG_SHT_META_DATA == sht::META_DATA);
    assert!(h::CUDBG_SHT_CBU_BAR == sht::CBU_BAR);
};
