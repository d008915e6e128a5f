//! Every public error type of the crate converts into `gpu_tools::Error`: `?` works in a function that returns
//! `gpu_tools::Result`, whatever part of the crate failed, and the conversion keeps the error's text.

use gpu_tools::{Error, Result};

/// Compiles only when `E` converts into the crate's error.
fn converts<E: Into<Error>>() {}

#[test]
fn every_public_error_type_converts() {
    converts::<gpu_tools::LoadError>();
    converts::<gpu_tools::trace::WireError>();
    #[cfg(feature = "coredump")]
    {
        converts::<gpu_tools::coredump::CoreDumpError>();
        converts::<gpu_tools::coredump::CudbgError>();
    }
    #[cfg(any(feature = "cupti", feature = "cudbg"))]
    {
        converts::<gpu_tools::cuda::CudaError>();
        converts::<gpu_tools::cuda::process::ProcessCheckpointError>();
    }
    #[cfg(feature = "cudbg")]
    {
        converts::<gpu_tools::cudbg::CudbgError>();
        converts::<gpu_tools::cudbg::SessionError>();
        converts::<gpu_tools::cudbg::AttachError>();
    }
    #[cfg(feature = "cupti")]
    {
        converts::<gpu_tools::cupti::CuptiError>();
        converts::<gpu_tools::cupti::CheckpointError>();
        converts::<gpu_tools::cupti::TracingError>();
        converts::<gpu_tools::cupti::activity::RecordError>();
    }
    #[cfg(feature = "inject")]
    converts::<gpu_tools::linux::quiesce::QuiesceError>();
    #[cfg(feature = "rocprofiler")]
    {
        converts::<gpu_tools::rocprofiler::RocprofilerError>();
        converts::<gpu_tools::rocprofiler::ProfilerError>();
        converts::<gpu_tools::rocprofiler::RecordError>();
        converts::<gpu_tools::rocprofiler::NoAmdDriver>();
    }
}

#[test]
fn the_crate_error_is_send_sync_and_static() {
    fn send_sync<T: Send + Sync + 'static>() {}
    send_sync::<Error>();
}

#[cfg(feature = "coredump")]
#[test]
fn a_core_dump_error_goes_through_question_mark() {
    use gpu_tools::coredump::{CoreDump, CoreDumpError};

    fn faulting_lanes(path: &str) -> Result<usize> {
        let dump = CoreDump::open(path)?;
        Ok(dump.faulting_lanes().count())
    }
    fn from_memory(bytes: Vec<u8>) -> Result<usize> {
        Ok(CoreDump::from_bytes(bytes)?.devices().len())
    }

    let e = faulting_lanes("/nonexistent/gpu-tools/core.cudacore").unwrap_err();
    assert!(
        matches!(&e, Error::CoreDump(CoreDumpError::Io { .. })),
        "{e:?}"
    );
    assert!(
        e.to_string()
            .starts_with("cannot read /nonexistent/gpu-tools/core.cudacore"),
        "{e}"
    );
    let e = from_memory(b"text".to_vec()).unwrap_err();
    assert!(matches!(e, Error::CoreDump(CoreDumpError::NotElf)), "{e:?}");
    assert_eq!(e.to_string(), CoreDumpError::NotElf.to_string());
}

#[test]
fn a_wire_error_goes_through_question_mark() {
    use gpu_tools::trace::{Decoder, WireError};

    fn first_record(bytes: &[u8]) -> Result<bool> {
        let mut decoder = Decoder::new();
        decoder.feed(bytes);
        Ok(decoder.next_record()?.is_some())
    }

    let e = first_record(b"NOTATRACE and then some more bytes").unwrap_err();
    assert!(
        matches!(&e, Error::Wire(WireError::BadMagic { .. })),
        "{e:?}"
    );
    assert!(
        e.to_string().starts_with("not a gpu-tools trace stream"),
        "{e}"
    );
}
