//! What ran on a device: kernels, memory copies and memory sets, with the kinds of copy and of memory.

use std::sync::Arc;

#[cfg(doc)]
use super::ApiRecord;

/// A kernel execution.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelRecord {
    /// Start on the device, ns.
    pub start: u64,
    /// End on the device, ns.
    pub end: u64,
    /// Device ordinal.
    pub device: u32,
    /// Context id.
    pub context: u32,
    /// Stream id.
    pub stream: u32,
    /// Correlation id: the [`ApiRecord`] of the launch call carries the same.
    pub correlation: u32,
    /// The device's grid id of this launch.
    pub grid_id: u64,
    /// Grid dimensions (blocks).
    pub grid: [u32; 3],
    /// Block dimensions (threads).
    pub block: [u32; 3],
    /// Static shared memory per block, bytes.
    pub static_shared: u32,
    /// Dynamic shared memory per block, bytes.
    pub dynamic_shared: u32,
    /// Registers per thread.
    pub registers: u16,
    /// Graph id when launched from a graph, else 0.
    pub graph_id: u32,
    /// Graph node id when launched from a graph, else 0 (carried since the graph tracing modes; 0 in streams
    /// written before).
    pub graph_node_id: u64,
    /// The kernel's name as the vendor reports it (mangled for C++ kernels).
    pub name: Arc<str>,
}

impl KernelRecord {
    /// `end - start`, 0 when the vendor reported an end before the start.
    pub fn duration(&self) -> u64 {
        self.end.saturating_sub(self.start)
    }
}

/// Direction of a memory copy.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum CopyKind {
    /// Not known.
    Unknown,
    /// Host to device.
    HtoD,
    /// Device to host.
    DtoH,
    /// Host to array.
    HtoA,
    /// Array to host.
    AtoH,
    /// Array to array.
    AtoA,
    /// Array to device.
    AtoD,
    /// Device to array.
    DtoA,
    /// Device to device (one device).
    DtoD,
    /// Host to host.
    HtoH,
    /// Peer to peer (device to another device).
    PtoP,
    /// A code newer than this crate.
    Other(u8),
}

impl CopyKind {
    /// The vendor's code (CUPTI's `CUpti_ActivityMemcpyKind`).
    pub fn code(self) -> u8 {
        match self {
            CopyKind::Unknown => 0,
            CopyKind::HtoD => 1,
            CopyKind::DtoH => 2,
            CopyKind::HtoA => 3,
            CopyKind::AtoH => 4,
            CopyKind::AtoA => 5,
            CopyKind::AtoD => 6,
            CopyKind::DtoA => 7,
            CopyKind::DtoD => 8,
            CopyKind::HtoH => 9,
            CopyKind::PtoP => 10,
            CopyKind::Other(c) => c,
        }
    }

    /// From the vendor's code; codes this crate does not know are kept.
    pub fn from_code(code: u8) -> Self {
        match code {
            0 => CopyKind::Unknown,
            1 => CopyKind::HtoD,
            2 => CopyKind::DtoH,
            3 => CopyKind::HtoA,
            4 => CopyKind::AtoH,
            5 => CopyKind::AtoA,
            6 => CopyKind::AtoD,
            7 => CopyKind::DtoA,
            8 => CopyKind::DtoD,
            9 => CopyKind::HtoH,
            10 => CopyKind::PtoP,
            c => CopyKind::Other(c),
        }
    }

    /// Short name as profilers print it: `HtoD`, `DtoH`, ...
    pub fn name(self) -> &'static str {
        match self {
            CopyKind::Unknown => "unknown",
            CopyKind::HtoD => "HtoD",
            CopyKind::DtoH => "DtoH",
            CopyKind::HtoA => "HtoA",
            CopyKind::AtoH => "AtoH",
            CopyKind::AtoA => "AtoA",
            CopyKind::AtoD => "AtoD",
            CopyKind::DtoA => "DtoA",
            CopyKind::DtoD => "DtoD",
            CopyKind::HtoH => "HtoH",
            CopyKind::PtoP => "PtoP",
            CopyKind::Other(_) => "other",
        }
    }
}

/// Kind of memory at one end of a copy or set.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum MemoryKind {
    /// Not known.
    Unknown,
    /// Pageable host memory.
    Pageable,
    /// Page-locked host memory.
    Pinned,
    /// Device memory.
    Device,
    /// A CUDA array.
    Array,
    /// Managed (unified) memory.
    Managed,
    /// Static device memory.
    DeviceStatic,
    /// Static managed memory.
    ManagedStatic,
    /// A code newer than this crate.
    Other(u8),
}

impl MemoryKind {
    /// The vendor's code (CUPTI's `CUpti_ActivityMemoryKind`).
    pub fn code(self) -> u8 {
        match self {
            MemoryKind::Unknown => 0,
            MemoryKind::Pageable => 1,
            MemoryKind::Pinned => 2,
            MemoryKind::Device => 3,
            MemoryKind::Array => 4,
            MemoryKind::Managed => 5,
            MemoryKind::DeviceStatic => 6,
            MemoryKind::ManagedStatic => 7,
            MemoryKind::Other(c) => c,
        }
    }

    /// From the vendor's code; codes this crate does not know are kept.
    pub fn from_code(code: u8) -> Self {
        match code {
            0 => MemoryKind::Unknown,
            1 => MemoryKind::Pageable,
            2 => MemoryKind::Pinned,
            3 => MemoryKind::Device,
            4 => MemoryKind::Array,
            5 => MemoryKind::Managed,
            6 => MemoryKind::DeviceStatic,
            7 => MemoryKind::ManagedStatic,
            c => MemoryKind::Other(c),
        }
    }

    /// Lower-case name: `pageable`, `pinned`, `device`, ...
    pub fn name(self) -> &'static str {
        match self {
            MemoryKind::Unknown => "unknown",
            MemoryKind::Pageable => "pageable",
            MemoryKind::Pinned => "pinned",
            MemoryKind::Device => "device",
            MemoryKind::Array => "array",
            MemoryKind::Managed => "managed",
            MemoryKind::DeviceStatic => "device static",
            MemoryKind::ManagedStatic => "managed static",
            MemoryKind::Other(_) => "other",
        }
    }
}

/// A memory copy.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemcpyRecord {
    /// Start, ns.
    pub start: u64,
    /// End, ns.
    pub end: u64,
    /// Device ordinal.
    pub device: u32,
    /// Context id.
    pub context: u32,
    /// Stream id.
    pub stream: u32,
    /// Correlation id of the API call that issued it.
    pub correlation: u32,
    /// Bytes copied.
    pub bytes: u64,
    /// Direction.
    pub kind: CopyKind,
    /// Source memory.
    pub src: MemoryKind,
    /// Destination memory.
    pub dst: MemoryKind,
    /// Issued by an asynchronous call.
    pub is_async: bool,
}

impl MemcpyRecord {
    /// `end - start`, 0 when the vendor reported an end before the start.
    pub fn duration(&self) -> u64 {
        self.end.saturating_sub(self.start)
    }
}

/// A memory set.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemsetRecord {
    /// Start, ns.
    pub start: u64,
    /// End, ns.
    pub end: u64,
    /// Device ordinal.
    pub device: u32,
    /// Context id.
    pub context: u32,
    /// Stream id.
    pub stream: u32,
    /// Correlation id of the API call that issued it.
    pub correlation: u32,
    /// Bytes set.
    pub bytes: u64,
    /// The value written (the element value of the set call).
    pub value: u32,
    /// Memory that was set.
    pub memory: MemoryKind,
    /// Issued by an asynchronous call.
    pub is_async: bool,
}

impl MemsetRecord {
    /// `end - start`, 0 when the vendor reported an end before the start.
    pub fn duration(&self) -> u64 {
        self.end.saturating_sub(self.start)
    }
}
