//! CUDA core dumps, read offline: the format `cudacoredump.h` documents, in safe Rust, with no NVIDIA library (no
//! libcudacore, no driver) and no process control, so it runs anywhere (feature `coredump`, without the debugger
//! API; `cudbg` includes it and names this module `cudbg::coredump` too).
//!
//! The driver writes a dump when a kernel faults and the program runs with `CUDA_ENABLE_COREDUMP_ON_EXCEPTION=1`
//! (`CUDA_COREDUMP_FILE` names the file; `CUDA_COREDUMP_GENERATION_FLAGS` leaves parts out). The file is an ELF
//! file with `ELFOSABI_CUDA`; its sections describe the devices, contexts, loaded modules, grids, SMs, blocks,
//! warps and lanes at the moment of the fault, and optionally global, shared, local and parameter memory.
//!
//! ```no_run
//! use gpu_tools::coredump::CoreDump;
//!
//! fn main() -> gpu_tools::Result<()> {
//!     let dump = CoreDump::open("core.cudacore")?; // only reads the file
//!     for l in dump.faulting_lanes() {
//!         let kernel = l.grid().and_then(|g| g.kernel_name.as_deref()).unwrap_or("?");
//!         println!(
//!             "{} in {kernel} at {:#x} (+{:#x}), block {} thread {}, device {} sm {} warp {} lane {}",
//!             l.lane.exception.description(),
//!             l.lane.pc,
//!             l.lane.function_offset,
//!             l.block.block_idx,
//!             l.lane.thread_idx,
//!             l.device.index,
//!             l.sm.id,
//!             l.warp.id,
//!             l.lane.id
//!         );
//!     }
//!     Ok(())
//! }
//! ```
//!
//! # Reading
//!
//! [`CoreDump::open`] reads a file into memory (and only reads it); [`CoreDump::from_bytes`] takes the bytes as the
//! caller holds them: a `Vec<u8>`, a `&'static [u8]`, or a memory map, which the dump and its [`Region`]s then
//! share without copying:
//!
//! ```no_run
//! use gpu_tools::coredump::CoreDump;
//!
//! fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     // A memory map (for example `memmap2::Mmap`) goes in the same way, and is not copied either.
//!     let bytes: Box<[u8]> = std::fs::read("core.cudacore")?.into_boxed_slice();
//!     let dump = CoreDump::from_bytes(bytes)?;
//!     println!("{} devices", dump.devices().len());
//!     Ok(())
//! }
//! ```
//!
//! Every table is checked against the bytes' bounds and the format's relationships first; anything that does not
//! fit is a [`CoreDumpError`] naming the section (never a panic): not ELF, another ELF file (a host core file, a
//! cubin), another ABI version, a structure outside the file (truncation), a bad link or index, two sections for
//! one place, an entry size below the oldest layout, a string index outside the string table. `?` turns it into
//! a [`crate::Error`].
//!
//! # What a dump gives
//!
//! - [`Metadata`]: driver and CUDA versions, [`GenerationFlags`].
//! - [`Device`]s: name, type, SM type, SM, warp, lane, register and predicate counts, PCI ids, status.
//! - [`Context`]s and their [`Module`]s, with the relocated and unrelocated ELF images and their function symbols
//!   (a [`SymbolTable`]: sorted once, each lookup by address a binary search).
//! - [`Grid`]s: the kernel's entry and its name (found in its module's symbols), grid and block dimensions,
//!   status, parameters, constant banks, clusters.
//! - [`Sm`]s (with the exception an exited warp left), [`Block`]s (indices, shared memory), [`Warp`]s (valid,
//!   active and CBU masks, error PC, uniform registers and predicates, convergence barriers) and [`Lane`]s (PC, PC
//!   offset in its function, thread index, [`Exception`], call stack, registers, predicates, local memory).
//! - Global and managed memory, with [`CoreDump::read_global`].
//! - [`LaneView`] joins a lane to its device, SM, block, warp, grid and function; [`CoreDump::lanes`] and
//!   [`CoreDump::faulting_lanes`] walk them.
//!
//! With the `serde` feature every part serialises (memory regions as address and length).
//!
//! # Format
//!
//! An ELF64 little-endian file with OS/ABI `ELFOSABI_CUDA` (0x33), ABI version 7, `ET_CORE`, `EM_CUDA` (0xbe), read
//! with the `object` crate; extended section numbering is followed (dumps of busy GPUs have more than 0xff00
//! sections). Tables are tied together as `cudacoredump.h` documents: a child section's `sh_link` is its parent
//! table's section index and its `sh_info` its entry's index; section names are not relied on. Entry layouts are
//! written down as offsets and checked at compile time against bindgen's view of `cudacoredump.h`
//! (`sys::cudacoredump`). Drivers add fields at the end of entries, so each entry is read with the table's
//! own `sh_entsize`: it must be at least the oldest (r346) layout, and fields past it read as `None`.

mod assemble;
mod container;
mod cudbg_status;
pub mod elf;
mod error;
mod exception;
mod kernel;
mod layout;
mod model;
#[cfg(feature = "serde")]
mod serialize;

use std::path::Path;
use std::sync::Arc;

pub use cudbg_status::CudbgError;
pub use elf::{FunctionSymbol, SymbolTable};
pub use error::{CoreDumpError, SectionId};
pub use exception::Exception;
pub use kernel::{Dim3, KernelOrigin, KernelType};
pub use model::{
    Block, CbuLanes, ConstBank, Context, Device, Frame, GenerationFlags, Grid, GridStatus, Lane,
    Metadata, Module, Region, Sm, Warp,
};

/// A CUDA core dump, read and checked.
///
/// It holds the dump's bytes ([`CoreDump::open`] reads the file into memory; [`CoreDump::from_bytes`] takes them
/// as the caller holds them); the memory sections ([`Region`]) share them.
#[derive(Debug, Clone)]
pub struct CoreDump {
    abi_version: u8,
    metadata: Option<Metadata>,
    devices: Vec<Device>,
    global_memory: Vec<Region>,
    managed_memory: Vec<Region>,
}

impl CoreDump {
    /// Reads and checks the file at `path`. The file is only read.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, CoreDumpError> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|source| CoreDumpError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_bytes(bytes)
    }

    /// Checks and reads a dump held in memory: a `Vec<u8>`, a `&'static [u8]`, a `Box<[u8]>`, a memory map (for
    /// example `memmap2::Mmap`), anything that holds the bytes and can be shared between threads. The dump keeps
    /// them, unchanged, and its [`Region`]s share them without copying. Bytes borrowed for less than `'static` are
    /// copied first (`CoreDump::from_bytes(slice.to_vec())`).
    ///
    /// The bytes must not change while the dump lives (a memory map of a file that another process truncates or
    /// writes breaks that promise). Every range was checked when the dump was read; a region whose bytes have since
    /// shrunk reads as empty, never out of bounds.
    pub fn from_bytes<B>(bytes: B) -> Result<Self, CoreDumpError>
    where
        B: AsRef<[u8]> + Send + Sync + 'static,
    {
        let source: model::Source = Arc::new(bytes);
        let parts = assemble::assemble(&source)?;
        Ok(CoreDump {
            abi_version: parts.abi_version,
            metadata: parts.metadata,
            devices: parts.devices,
            global_memory: parts.global_memory,
            managed_memory: parts.managed_memory,
        })
    }

    /// The ELF ABI version of the dump (`EI_ABIVERSION`; 7 for every dump this reader accepts).
    pub fn abi_version(&self) -> u8 {
        self.abi_version
    }

    /// The metadata section (driver r565 and later).
    pub fn metadata(&self) -> Option<&Metadata> {
        self.metadata.as_ref()
    }

    /// The devices, in device-table order.
    pub fn devices(&self) -> &[Device] {
        &self.devices
    }

    /// Global memory sections (absent when the dump skips global memory).
    pub fn global_memory(&self) -> &[Region] {
        &self.global_memory
    }

    /// Managed memory sections.
    pub fn managed_memory(&self) -> &[Region] {
        &self.managed_memory
    }

    /// `len` bytes at global address `addr`, from the global or managed memory the dump holds.
    pub fn read_global(&self, addr: u64, len: usize) -> Option<&[u8]> {
        self.global_memory
            .iter()
            .chain(&self.managed_memory)
            .find_map(|r| r.read(addr, len))
    }

    /// Every lane the dump describes, device by device, SM by SM, in table order.
    pub fn lanes(&self) -> impl Iterator<Item = LaneView<'_>> {
        self.devices.iter().flat_map(|device| {
            device.sms.iter().flat_map(move |sm| {
                sm.blocks.iter().flat_map(move |block| {
                    block.warps.iter().flat_map(move |warp| {
                        warp.lanes.iter().map(move |lane| LaneView {
                            device,
                            sm,
                            block,
                            warp,
                            lane,
                        })
                    })
                })
            })
        })
    }

    /// The lanes with an exception.
    pub fn faulting_lanes(&self) -> impl Iterator<Item = LaneView<'_>> {
        self.lanes().filter(|l| l.lane.exception != Exception::None)
    }
}

/// A lane with the device, SM, block and warp it belongs to.
#[derive(Debug, Clone, Copy)]
pub struct LaneView<'a> {
    /// Its device.
    pub device: &'a Device,
    /// Its SM.
    pub sm: &'a Sm,
    /// Its block.
    pub block: &'a Block,
    /// Its warp.
    pub warp: &'a Warp,
    /// The lane.
    pub lane: &'a Lane,
}

impl<'a> LaneView<'a> {
    /// The grid the lane's block belongs to.
    pub fn grid(&self) -> Option<&'a Grid> {
        self.device.grid(self.block.grid_id)
    }

    /// The function symbol covering the lane's PC (which may be a device function the kernel called).
    pub fn function(&self) -> Option<&'a FunctionSymbol> {
        self.device.function_at(self.lane.pc).map(|(_, f)| f)
    }

    /// Whether the lane is active (not diverged) in its warp.
    pub fn is_active(&self) -> bool {
        self.warp.is_active(self.lane.id)
    }
}
