//! One PM sampler per device in a process: a sampler claims its device at start and releases it on drop.

use std::sync::Mutex;

use crate::cupti::profiler::ProfilingError;

/// Devices a PM sampler of this process samples.
pub(super) static SAMPLED: Mutex<Vec<usize>> = Mutex::new(Vec::new());

/// A device claimed for this process's one PM sampler of it; released on drop.
pub(super) struct DeviceClaim(pub(super) usize);

impl DeviceClaim {
    pub(super) fn take(device: usize) -> Result<DeviceClaim, ProfilingError> {
        let mut sampled = SAMPLED.lock().unwrap_or_else(|p| p.into_inner());
        if sampled.contains(&device) {
            return Err(ProfilingError::AlreadySampling { device });
        }
        sampled.push(device);
        Ok(DeviceClaim(device))
    }
}

impl Drop for DeviceClaim {
    fn drop(&mut self) {
        SAMPLED
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|&d| d != self.0);
    }
}
