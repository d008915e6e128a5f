//! [`AttachProtocol`]: how a session asks the driver inside a running process to start its debugger back end;
//! [`DetachProcedure`]: how it lets the process go.

/// How a session asks the driver inside a running process to start its debugger back end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum AttachProtocol {
    /// [`Descriptor`](Self::Descriptor) where the process's driver offers it, else
    /// [`InferiorCall`](Self::InferiorCall).
    #[default]
    Auto,
    /// Call `cudbgApiAttach()` on a thread of the stopped process, retrying while the driver answers
    /// `CUDBG_ERROR_ATTACH_NOT_POSSIBLE`. Every driver that can be attached to has it; NVIDIA's documentation
    /// calls it the legacy initialisation, since the call can land where the driver is not ready for it.
    InferiorCall,
    /// Write one byte to the file descriptor named by the process's `cudbgInitiateDebuggerAttachProcedureFd`, let
    /// the process run, and hold it again when its driver calls `cudbgReportAttachProcedureFinished()`: the
    /// driver starts its back end itself, where it knows that to be safe. Drivers of CUDA 13.1 and later; with an
    /// older one the attach fails with [`AttachError::Unsupported`](super::AttachError::Unsupported).
    Descriptor,
}

impl AttachProtocol {
    /// The names [`FromStr`](std::str::FromStr) takes and [`Display`](std::fmt::Display) writes, for command
    /// lines and configuration: `auto`, `call`, `descriptor`.
    pub const NAMES: [&'static str; 3] = ["auto", "call", "descriptor"];

    /// The protocol's name (one of [`Self::NAMES`]).
    pub fn name(self) -> &'static str {
        match self {
            AttachProtocol::Auto => "auto",
            AttachProtocol::InferiorCall => "call",
            AttachProtocol::Descriptor => "descriptor",
        }
    }
}

impl std::fmt::Display for AttachProtocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for AttachProtocol {
    type Err = String;
    fn from_str(name: &str) -> Result<Self, String> {
        [
            AttachProtocol::Auto,
            AttachProtocol::InferiorCall,
            AttachProtocol::Descriptor,
        ]
        .into_iter()
        .find(|p| p.name() == name)
        .ok_or_else(|| {
            format!(
                "unknown attach protocol {name:?}; known: {}",
                Self::NAMES.join(", ")
            )
        })
    }
}

/// How a session that attached to a running process detaches from it.
///
/// NVIDIA's documented procedure (and cuda-gdb's `cuda_do_detach`) calls `cudbgApiDetach()` inside the stopped
/// process. On driver 580 (CUDA 13.0), a process detached that way dies from SIGSEGV when it exits, inside the
/// driver's debugger library, if it destroyed its last CUDA context before exiting (a released primary context,
/// `cuCtxDestroy`, `cudaDeviceReset`); cuda-gdb 13.0's own detach does the same to such a program. Leaving out
/// only that call avoided it in every process tried (13 of 13 on an H100, among them repeated attaches to one
/// process and a kernel fault after the detach, which the program saw as usual): the driver still cleans up on
/// request (`requestCleanupOnDetach`) and reports `DETACH_COMPLETE`. `docs/driver-notes.md` has the measurements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum DetachProcedure {
    /// The documented steps without the call of `cudbgApiDetach()` in the process: `clearAttachState`, then
    /// `requestCleanupOnDetach` with the process's `cudbgResumeForAttachDetach`, `cudbgDebuggerCapabilities` and
    /// `cudbgDebuggerInitialized` cleared, the process resumed until `DETACH_COMPLETE`, `cudbgIpcFlag` cleared.
    #[default]
    WithoutInProcessCall,
    /// NVIDIA's documented procedure, `cudbgApiDetach()` called in the process before the clean-up is requested.
    Documented,
}

impl DetachProcedure {
    /// The names [`FromStr`](std::str::FromStr) takes and [`Display`](std::fmt::Display) writes: `default`,
    /// `documented`.
    pub const NAMES: [&'static str; 2] = ["default", "documented"];

    /// The procedure's name (one of [`Self::NAMES`]).
    pub fn name(self) -> &'static str {
        match self {
            DetachProcedure::WithoutInProcessCall => "default",
            DetachProcedure::Documented => "documented",
        }
    }
}

impl std::fmt::Display for DetachProcedure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for DetachProcedure {
    type Err = String;
    fn from_str(name: &str) -> Result<Self, String> {
        [
            DetachProcedure::WithoutInProcessCall,
            DetachProcedure::Documented,
        ]
        .into_iter()
        .find(|p| p.name() == name)
        .ok_or_else(|| {
            format!(
                "unknown detach procedure {name:?}; known: {}",
                Self::NAMES.join(", ")
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocols_have_names() {
        for name in AttachProtocol::NAMES {
            let p: AttachProtocol = name.parse().unwrap();
            assert_eq!(p.to_string(), name);
        }
        assert_eq!("call".parse(), Ok(AttachProtocol::InferiorCall));
        assert!(
            "fd".parse::<AttachProtocol>()
                .unwrap_err()
                .contains("auto, call, descriptor")
        );
        assert_eq!(AttachProtocol::default(), AttachProtocol::Auto);
    }

    #[test]
    fn detach_procedures_have_names() {
        for name in DetachProcedure::NAMES {
            let p: DetachProcedure = name.parse().unwrap();
            assert_eq!(p.to_string(), name);
        }
        assert_eq!(
            DetachProcedure::default(),
            DetachProcedure::WithoutInProcessCall
        );
        assert!(
            "skip"
                .parse::<DetachProcedure>()
                .unwrap_err()
                .contains("default, documented")
        );
    }
}
