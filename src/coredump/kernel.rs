//! What the debugger API and core dumps say about a kernel launch: its grid and block dimensions ([`Dim3`]), whether
//! the driver or the program launched it ([`KernelType`]), and from where ([`KernelOrigin`]).

use crate::sys::cudbg as sys;

/// Grid, block or cluster dimensions (`CuDim3`).
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Dim3 {
    /// x extent.
    pub x: u32,
    /// y extent.
    pub y: u32,
    /// z extent.
    pub z: u32,
}

impl Dim3 {
    /// Product of the three extents, saturating at `u64::MAX` (three `u32` can overflow a `u64`, and extents
    /// read from a debuggee or a core dump are not trusted to stay within real grid limits).
    pub fn count(&self) -> u64 {
        (u64::from(self.x) * u64::from(self.y)).saturating_mul(u64::from(self.z))
    }
}

impl From<sys::CuDim3> for Dim3 {
    fn from(d: sys::CuDim3) -> Self {
        Dim3 {
            x: d.x,
            y: d.y,
            z: d.z,
        }
    }
}

impl std::fmt::Display for Dim3 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "({},{},{})", self.x, self.y, self.z)
    }
}

/// `CUDBGKernelType`.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KernelType {
    /// `CUDBG_KNL_TYPE_UNKNOWN`.
    Unknown,
    /// `CUDBG_KNL_TYPE_SYSTEM`: launched by the driver itself (memset, memcpy helpers).
    System,
    /// `CUDBG_KNL_TYPE_APPLICATION`: launched by the program or a library it uses.
    Application,
    /// A value this crate does not know.
    Other(u32),
}

impl KernelType {
    pub(crate) fn from_raw(v: u32) -> Self {
        match v {
            sys::CUDBG_KNL_TYPE_UNKNOWN => KernelType::Unknown,
            sys::CUDBG_KNL_TYPE_SYSTEM => KernelType::System,
            sys::CUDBG_KNL_TYPE_APPLICATION => KernelType::Application,
            other => KernelType::Other(other),
        }
    }
}

/// `CUDBGKernelOrigin`.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KernelOrigin {
    /// Launched from the host.
    Cpu,
    /// Launched from the device (dynamic parallelism).
    Gpu,
    /// A value this crate does not know.
    Other(u32),
}

impl KernelOrigin {
    pub(crate) fn from_raw(v: u32) -> Self {
        match v {
            sys::CUDBG_KNL_ORIGIN_CPU => KernelOrigin::Cpu,
            sys::CUDBG_KNL_ORIGIN_GPU => KernelOrigin::Gpu,
            other => KernelOrigin::Other(other),
        }
    }
}
