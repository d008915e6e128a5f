//! [`GpuUuid`]: a GPU's UUID, the name a GPU keeps across processes, reboots and ordinal changes.

use std::fmt;

use super::{CudaError, Driver};
use crate::sys::cuda_driver as sys;

/// A GPU's 16-byte UUID (`CUuuid`). `Display` writes it as `nvidia-smi` does: `GPU-xxxxxxxx-xxxx-...`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GpuUuid(pub [u8; 16]);

impl GpuUuid {
    pub(crate) fn to_raw(self) -> sys::CUuuid {
        sys::CUuuid {
            bytes: self.0.map(|b| b as std::ffi::c_char),
        }
    }
}

impl fmt::Display for GpuUuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("GPU")?;
        for (i, b) in self.0.iter().enumerate() {
            if matches!(i, 0 | 4 | 6 | 8 | 10) {
                f.write_str("-")?;
            }
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

/// Serialised as its `Display` text (`GPU-xxxxxxxx-...`), as `nvidia-smi` and NVML name GPUs.
#[cfg(feature = "serde")]
impl serde::Serialize for GpuUuid {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl Driver {
    /// The UUID of device `ordinal` (`cuDeviceGetUuid_v2`; initialises the driver).
    pub fn device_uuid(&self, ordinal: usize) -> Result<GpuUuid, CudaError> {
        let dev = self.device(ordinal)?;
        let Some(get) = self.api().cu_device_get_uuid else {
            return Err(CudaError::from_code(self, sys::CUDA_ERROR_NOT_SUPPORTED));
        };
        let mut raw = sys::CUuuid::default();
        // SAFETY: driver initialised by device(); valid out-pointer and device.
        self.check(unsafe { get(&mut raw, dev) })?;
        Ok(GpuUuid(raw.bytes.map(|b| b as u8)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn displays_like_nvidia_smi() {
        let u = GpuUuid([
            0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab,
            0xcd, 0xef,
        ]);
        assert_eq!(u.to_string(), "GPU-12345678-9abc-def0-0123-456789abcdef");
        assert_eq!(GpuUuid(u.to_raw().bytes.map(|b| b as u8)), u);
    }
}
