//! [`ProcessState`]: the driver's `CUprocessState` of a process.

use std::fmt;

use crate::sys::cuda_driver as sys;

/// Where the driver says a process stands in the checkpoint cycle (`CUprocessState`).
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProcessState {
    /// `CU_PROCESS_STATE_RUNNING`: the default; CUDA calls run.
    Running,
    /// `CU_PROCESS_STATE_LOCKED`: the driver holds the process's CUDA API locks; its CUDA calls block.
    Locked,
    /// `CU_PROCESS_STATE_CHECKPOINTED`: device memory moved to host memory, the GPUs released.
    Checkpointed,
    /// `CU_PROCESS_STATE_FAILED`: an uncorrectable error during checkpoint or restore; the driver offers no way
    /// back.
    Failed,
    /// A value this version of the crate does not know (from a newer driver).
    Unknown(u32),
}

impl ProcessState {
    /// The state of a `CUprocessState` value.
    pub fn from_raw(raw: sys::CUprocessState) -> Self {
        match raw {
            sys::CU_PROCESS_STATE_RUNNING => ProcessState::Running,
            sys::CU_PROCESS_STATE_LOCKED => ProcessState::Locked,
            sys::CU_PROCESS_STATE_CHECKPOINTED => ProcessState::Checkpointed,
            sys::CU_PROCESS_STATE_FAILED => ProcessState::Failed,
            other => ProcessState::Unknown(other),
        }
    }

    /// The `CUprocessState` value.
    pub fn as_raw(self) -> sys::CUprocessState {
        match self {
            ProcessState::Running => sys::CU_PROCESS_STATE_RUNNING,
            ProcessState::Locked => sys::CU_PROCESS_STATE_LOCKED,
            ProcessState::Checkpointed => sys::CU_PROCESS_STATE_CHECKPOINTED,
            ProcessState::Failed => sys::CU_PROCESS_STATE_FAILED,
            ProcessState::Unknown(raw) => raw,
        }
    }
}

impl fmt::Display for ProcessState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProcessState::Running => f.write_str("running"),
            ProcessState::Locked => f.write_str("locked"),
            ProcessState::Checkpointed => f.write_str("checkpointed"),
            ProcessState::Failed => f.write_str("failed"),
            ProcessState::Unknown(raw) => write!(f, "unknown state {raw}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_values_round_trip() {
        for raw in 0..6 {
            assert_eq!(ProcessState::from_raw(raw).as_raw(), raw);
        }
        assert_eq!(ProcessState::from_raw(2), ProcessState::Checkpointed);
        assert_eq!(ProcessState::from_raw(7), ProcessState::Unknown(7));
        assert_eq!(ProcessState::Unknown(7).to_string(), "unknown state 7");
    }
}
