//! [`AttachProtocol`]: how a session asks the driver inside a running process to start its debugger back end.

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
}
