//! What a core dump holds, as plain data: devices, their contexts and modules, grids, SMs, blocks, warps and
//! lanes, with the memory sections where the dump has them.
//!
//! Fields that only newer drivers write are `Option`s: `None` means the dump's entries are too short to hold them
//! (an older driver), not that the value was zero.

use std::ops::Range;
use std::sync::Arc;

use super::elf::{FunctionSymbol, SymbolTable};
use super::{CudbgError, Dim3, Exception, KernelOrigin, KernelType};

/// The bytes a dump was read from, shared by the dump and its regions: a `Vec<u8>`, a memory map, anything that
/// holds bytes.
pub(super) type Source = Arc<dyn AsRef<[u8]> + Send + Sync>;

/// Bytes of one section of the dump, with the address the dump gives them (a device address for memory; 0 for
/// ELF images). Cheap to clone: it shares the dump's bytes.
#[derive(Clone)]
pub struct Region {
    address: u64,
    data: Source,
    range: Range<usize>,
}

impl Region {
    pub(super) fn new(address: u64, data: Source, range: Range<usize>) -> Self {
        Region {
            address,
            data,
            range,
        }
    }

    /// Address of the first byte (`sh_addr`).
    pub fn address(&self) -> u64 {
        self.address
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.range.len()
    }

    /// True when the section is empty.
    pub fn is_empty(&self) -> bool {
        self.range.is_empty()
    }

    /// The bytes.
    pub fn bytes(&self) -> &[u8] {
        // The range was checked against the bytes when the dump was read.
        (*self.data).as_ref().get(self.range.clone()).unwrap_or(&[])
    }

    /// `len` bytes at device address `addr`, if the region holds all of them.
    pub fn read(&self, addr: u64, len: usize) -> Option<&[u8]> {
        let start = usize::try_from(addr.checked_sub(self.address)?).ok()?;
        self.bytes().get(start..start.checked_add(len)?)
    }

    /// Whether `addr` lies inside the region.
    pub fn contains(&self, addr: u64) -> bool {
        addr.checked_sub(self.address)
            .is_some_and(|off| off < self.len() as u64)
    }
}

impl std::fmt::Debug for Region {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Region")
            .field("address", &format_args!("{:#x}", self.address))
            .field("len", &self.len())
            .finish()
    }
}

bitflags::bitflags! {
    /// The generation flags the dump was made with (`CUDBGCoredumpGenerationFlags`, set through
    /// `CUDA_COREDUMP_GENERATION_FLAGS`). Unknown bits are kept.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct GenerationFlags: u32 {
        /// `skip_nonrelocated_elf_images`.
        const SKIP_NONRELOCATED_ELF_IMAGES = 1 << 0;
        /// `skip_global_memory`.
        const SKIP_GLOBAL_MEMORY = 1 << 1;
        /// `skip_shared_memory`.
        const SKIP_SHARED_MEMORY = 1 << 2;
        /// `skip_local_memory`.
        const SKIP_LOCAL_MEMORY = 1 << 3;
        /// `skip_abort`: retired in the 13.0 header ("impossible to change this behavior"), yet driver 580.159
        /// still records it when the variable names it.
        const SKIP_ABORT = 1 << 4;
        /// `skip_constbank_memory`.
        const SKIP_CONSTBANK_MEMORY = 1 << 5;
        const _ = !0;
    }
}

/// The dump's metadata section (driver r565 and later).
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Metadata {
    /// Who wrote the dump (driver 580.159 writes `"UD"`).
    pub generator: String,
    /// GPU driver version as NVML reports it, for example (580, 159); (0, 0) on Tegra, where it is not set.
    pub driver_version: (u32, u32),
    /// CUDA driver API version, for example (13, 0).
    pub cuda_version: (u32, u32),
    /// Generation flags.
    pub flags: GenerationFlags,
    /// When the dump was written, in seconds since the Unix epoch.
    pub timestamp: u32,
}

/// A CUDA device at the time of the dump.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Device {
    /// Index in the dump's device table (the `devN` of section names; what cuda-gdb shows as `Dev`).
    pub index: u32,
    /// CUDA device ordinal (`devId`).
    pub id: u32,
    /// Display name, for example `"NVIDIA H100 80GB HBM3"`.
    pub name: String,
    /// Internal name, for example `"GH100GL-A"`.
    pub device_type: String,
    /// ISA, for example `"sm_90"`.
    pub sm_type: String,
    /// PCI bus id.
    pub pci_bus: u32,
    /// PCI device id.
    pub pci_device: u32,
    /// Number of SMs: at most the entries of [`Device::sms`] (the format holds one per SM; a dump that claims more
    /// is refused as corrupt, [`CoreDumpError::SmCountBeyondTable`](super::CoreDumpError::SmCountBeyondTable)).
    pub sm_count: u32,
    /// Warps per SM.
    pub warps_per_sm: u32,
    /// Lanes per warp.
    pub lanes_per_warp: u32,
    /// Most registers a lane can have (see [`Grid::registers`] and [`Warp::registers`] for the real count).
    pub registers_per_lane: u32,
    /// Predicates per lane.
    pub predicates_per_lane: u32,
    /// SM version (major, minor), for example (9, 0).
    pub sm_version: (u32, u32),
    /// Instruction size in bytes.
    pub instruction_size: u32,
    /// Device status, a `CUDBGResult`.
    pub status: Result<(), CudbgError>,
    /// Uniform registers per warp (r400).
    pub uniform_registers_per_warp: Option<u32>,
    /// Uniform predicates per warp (r400).
    pub uniform_predicates_per_warp: Option<u32>,
    /// Convergence barriers per warp (r575).
    pub convergence_barriers_per_warp: Option<u32>,
    /// Contexts on the device.
    pub contexts: Vec<Context>,
    /// Grids on the device when the dump was made.
    pub grids: Vec<Grid>,
    /// SMs that the dump describes (in table order).
    pub sms: Vec<Sm>,
}

impl Device {
    /// The grid with this 64-bit id.
    pub fn grid(&self, grid_id: u64) -> Option<&Grid> {
        self.grids.iter().find(|g| g.id == grid_id)
    }

    /// Every module of every context on the device.
    pub fn modules(&self) -> impl Iterator<Item = &Module> {
        self.contexts.iter().flat_map(|c| c.modules.iter())
    }

    /// The module with this handle.
    pub fn module(&self, handle: u64) -> Option<&Module> {
        self.modules().find(|m| m.handle == handle)
    }

    /// The function whose symbol covers device address `pc`, in any module of the device, with its module.
    pub fn function_at(&self, pc: u64) -> Option<(&Module, &FunctionSymbol)> {
        self.modules()
            .find_map(|m| m.function_at(pc).map(|f| (m, f)))
    }
}

/// A CUDA context.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Context {
    /// Context handle.
    pub id: u64,
    /// Global address of the shared-memory window.
    pub shared_window_base: u64,
    /// Global address of the local-memory window.
    pub local_window_base: u64,
    /// Global address of the global-memory window.
    pub global_window_base: u64,
    /// Index of its device in the device table.
    pub device_index: u32,
    /// Host thread (LWP) that owns it.
    pub host_tid: u32,
    /// Modules loaded in it.
    pub modules: Vec<Module>,
}

/// A loaded module (cubin).
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Module {
    /// Module handle (what [`Grid::module`] names).
    pub handle: u64,
    /// The relocated ELF image: function symbols hold device addresses.
    pub relocated_image: Option<Region>,
    /// The ELF image before relocation (absent when the dump skips non-relocated images).
    pub unrelocated_image: Option<Region>,
    /// Function symbols of the relocated image, sorted by address.
    pub functions: SymbolTable,
}

impl Module {
    /// The function whose symbol starts at, or covers, device address `pc` (a binary search; see
    /// [`SymbolTable::function_at`]).
    pub fn function_at(&self, pc: u64) -> Option<&FunctionSymbol> {
        self.functions.function_at(pc)
    }
}

/// `CUDBGGridStatus`.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum GridStatus {
    /// `CUDBG_GRID_STATUS_INVALID`.
    Invalid,
    /// `CUDBG_GRID_STATUS_PENDING`: launched, not yet running.
    Pending,
    /// `CUDBG_GRID_STATUS_ACTIVE`: running.
    Active,
    /// `CUDBG_GRID_STATUS_SLEEPING`: on the device, joining.
    Sleeping,
    /// `CUDBG_GRID_STATUS_TERMINATED`.
    Terminated,
    /// `CUDBG_GRID_STATUS_UNDETERMINED`: pending or terminated.
    Undetermined,
    /// A value this crate does not know.
    Other(u32),
}

impl GridStatus {
    pub(super) fn from_raw(v: u32) -> Self {
        use crate::sys::cudbg as sys;
        match v {
            sys::CUDBG_GRID_STATUS_INVALID => GridStatus::Invalid,
            sys::CUDBG_GRID_STATUS_PENDING => GridStatus::Pending,
            sys::CUDBG_GRID_STATUS_ACTIVE => GridStatus::Active,
            sys::CUDBG_GRID_STATUS_SLEEPING => GridStatus::Sleeping,
            sys::CUDBG_GRID_STATUS_TERMINATED => GridStatus::Terminated,
            sys::CUDBG_GRID_STATUS_UNDETERMINED => GridStatus::Undetermined,
            other => GridStatus::Other(other),
        }
    }
}

/// A constant bank of a grid (r550).
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConstBank {
    /// Bank number.
    pub bank: u32,
    /// Global address of its start.
    pub address: u64,
    /// Size in bytes.
    pub size: u32,
}

/// A grid (kernel launch) on a device.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Grid {
    /// 64-bit grid id (what [`Block::grid_id`] names).
    pub id: u64,
    /// Handle of its context.
    pub context: u64,
    /// Function handle.
    pub function: u64,
    /// Device address of the kernel's first instruction.
    pub function_entry: u64,
    /// Handle of the module holding the kernel.
    pub module: u64,
    /// Parent grid id (device launches).
    pub parent_grid_id: u64,
    /// Offset in constant bank 0 where the parameters start.
    pub params_offset: u64,
    /// Application or system kernel.
    pub kernel_type: KernelType,
    /// Host or device launch.
    pub origin: KernelOrigin,
    /// Status when the dump was made.
    pub status: GridStatus,
    /// Registers per lane.
    pub registers: u32,
    /// Grid dimensions.
    pub grid_dim: Dim3,
    /// Block dimensions.
    pub block_dim: Dim3,
    /// Whether the launch was blocking.
    pub launch_blocking: bool,
    /// Host thread that launched it.
    pub host_tid: u32,
    /// Cluster dimensions (r525).
    pub cluster_dim: Option<Dim3>,
    /// Preferred cluster dimensions (r565).
    pub preferred_cluster_dim: Option<Dim3>,
    /// Parameter memory (absent when memory is not dumped).
    pub params: Option<Region>,
    /// Constant banks (r550).
    pub const_banks: Vec<ConstBank>,
    /// The kernel's (mangled) name: the function symbol at [`Self::function_entry`] in the module's relocated
    /// image, when the dump has that image.
    pub kernel_name: Option<String>,
}

/// An SM with the blocks resident on it.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Sm {
    /// SM number.
    pub id: u32,
    /// An exception seen on the SM, possibly in a warp that has since exited (r555).
    pub exception: Option<Exception>,
    /// The PC of that exception, when the driver recorded one (r555).
    pub error_pc: Option<u64>,
    /// For cluster exceptions, the block that handled the cluster request (r555 layout).
    pub cluster_exception_target_block: Option<Dim3>,
    /// More about the exception, when the driver wrote any (r580).
    pub exception_string: Option<String>,
    /// Blocks resident on the SM.
    pub blocks: Vec<Block>,
}

/// A block (CTA) resident on an SM.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Block {
    /// Grid id of its grid.
    pub grid_id: u64,
    /// Block index.
    pub block_idx: Dim3,
    /// Cluster index (r525).
    pub cluster_idx: Option<Dim3>,
    /// Cluster dimensions (r565).
    pub cluster_dim: Option<Dim3>,
    /// Shared memory (absent when memory is not dumped).
    pub shared_memory: Option<Region>,
    /// Its warps on this SM.
    pub warps: Vec<Warp>,
}

/// Masks the convergence barrier unit keeps per warp (r575).
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct CbuLanes {
    /// Lanes marked active.
    pub active: u32,
    /// Lanes marked exited.
    pub exited: u32,
    /// Lanes in a collective region.
    pub collective: u32,
}

/// A warp.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Warp {
    /// Warp number on its SM.
    pub id: u32,
    /// Bit per valid lane.
    pub valid_lanes: u32,
    /// Bit per active (not diverged) lane.
    pub active_lanes: u32,
    /// Whether the warp stopped at a breakpoint.
    pub broken: bool,
    /// The PC that raised the warp's error, when the driver recorded one.
    pub error_pc: Option<u64>,
    /// Registers per lane in this warp (r525).
    pub registers: Option<u32>,
    /// Shared memory size (r570).
    pub shared_memory_size: Option<u32>,
    /// Lanes stopped in a syscall (r575).
    pub in_syscall_lanes: Option<u32>,
    /// Convergence-barrier lane masks (r575).
    pub cbu: Option<CbuLanes>,
    /// Uniform registers (r400; absent when the device has none).
    pub uniform_registers: Option<Vec<u32>>,
    /// Uniform predicates (r400).
    pub uniform_predicates: Option<Vec<bool>>,
    /// Convergence barrier masks (r575).
    pub convergence_barriers: Option<Vec<u32>>,
    /// Its lanes that the dump describes (the valid ones).
    pub lanes: Vec<Lane>,
}

impl Warp {
    /// Whether lane `lane` is valid.
    pub fn is_valid(&self, lane: u32) -> bool {
        lane < 32 && self.valid_lanes & (1 << lane) != 0
    }

    /// Whether lane `lane` is active (valid and not diverged).
    pub fn is_active(&self, lane: u32) -> bool {
        lane < 32 && self.active_lanes & (1 << lane) != 0
    }
}

/// A frame of a lane's call stack.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Frame {
    /// Stack frame level.
    pub level: u32,
    /// Offset of the return address from the start of the caller.
    pub return_offset: u64,
    /// The return address (a device address on current drivers).
    pub return_address: u64,
}

/// A lane (thread).
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Lane {
    /// Lane number in its warp.
    pub id: u32,
    /// PC (`virtualPC`): a device address on current drivers, comparable with [`Grid::function_entry`].
    pub pc: u64,
    /// The PC's offset from the start of the function it is in (`physPC`).
    pub function_offset: u64,
    /// Thread index.
    pub thread_idx: Dim3,
    /// The exception the lane hit, [`Exception::None`] if none.
    pub exception: Exception,
    /// Call depth, including frames in a syscall.
    pub call_depth: u32,
    /// Frames in a syscall.
    pub syscall_call_depth: u32,
    /// The CC register (pre-Volta GPUs only).
    pub cc_register: u32,
    /// Convergence-barrier thread state, a raw `CUDBGCbuThreadState` (r575).
    pub cbu_thread_state: Option<u32>,
    /// Registers R0.. as the dump has them.
    pub registers: Option<Vec<u32>>,
    /// Predicates P0.. as the dump has them.
    pub predicates: Option<Vec<bool>>,
    /// Call stack, innermost first as the dump lists it (absent when the dump has no section for it).
    pub backtrace: Option<Vec<Frame>>,
    /// Local memory (absent when memory is not dumped).
    pub local_memory: Option<Region>,
}
