//! The gpu-tools rocprofiler-sdk tool library. The SDK loads it into a HIP program named in `ROCP_TOOL_LIBRARIES`
//! and calls its `rocprofiler_configure`; it then traces the program's kernel dispatches, memory copies, HIP API
//! calls and ROCTx ranges and marks, and streams them, in the format of `gpu_tools::trace`, to the tracer named by
//! the settings in the environment (`gpu_tools_injection::settings`: a Unix socket, or a file), as the CUDA
//! injection library does. ROCTx ranges come as NVTX ranges do on NVIDIA (the marker kind, `nvtx`); the ROCTx
//! calls come as API calls with the runtime kind.
//!
//! Kernel names come from the code-object callbacks as the code object has them (mangled; the `.kd` suffix of
//! kernel descriptors removed): the tracer demangles. Every record is delivered at the SDK's finalisation (process
//! exit), then the stream ends with its counts. Nothing is printed to the program's stdout; no panic crosses into
//! the SDK.

// No unwrap or expect outside tests: a panic here would cross into the program or the vendor's code, or end the
// tool without the error's words (CI's clippy, -D warnings, holds it).
#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

mod convert;
mod roctx;
mod stream;

use std::sync::Arc;

use gpu_tools::rocprofiler_sdk::{
    Buffer, BufferOptions, Context, Payload, Setup, Tool, TraceKind as SdkKind,
};
use gpu_tools_injection::env::TraceKind;
use gpu_tools_injection::settings::Settings;

use roctx::Notes;
use stream::Stream;

/// The tool: one context tracing into one buffer, and the stream.
pub struct RocmTrace {
    _context: Context,
    buffer: Buffer,
    stream: Arc<Stream>,
}

/// SDK buffer tracing kinds for the configured record kinds.
fn sdk_kinds(kinds: &[TraceKind]) -> Vec<SdkKind> {
    let mut out = Vec::new();
    for k in kinds {
        let add: &[SdkKind] = match k {
            TraceKind::Kernel => &[SdkKind::KernelDispatch],
            TraceKind::Memcpy => &[SdkKind::MemoryCopy],
            TraceKind::Runtime | TraceKind::Driver => &[SdkKind::HipRuntimeApi, SdkKind::MarkerApi],
            // The marker kind (named for NVTX; ROCTx on AMD) is configured apart: `roctx::configure`. No memset,
            // synchronization or overhead records in the SDK's buffer tracing.
            _ => &[],
        };
        for a in add {
            if !out.contains(a) {
                out.push(*a);
            }
        }
    }
    out
}

impl Tool for RocmTrace {
    const NAME: &'static str = "gpu-tools-inject-rocm";

    fn initialize(setup: &mut Setup<'_>) -> gpu_tools::Result<Self> {
        // The settings the CUDA library reads, of which this one uses the destination, the kinds and the buffer
        // size; a value it cannot use is refused, as there.
        let settings = Settings::from_env().map_err(|e| {
            gpu_tools::rocprofiler_sdk::SdkError::ToolInitializeFailed(format!("not tracing: {e}"))
        })?;
        let (kinds, size) = (&settings.kinds, settings.buffer_size);
        let lib = setup.library();
        let calls = sdk_kinds(kinds);
        let marker_calls = calls.contains(&SdkKind::MarkerApi);
        let stream = Arc::new(
            Stream::open(
                lib,
                setup.agents().unwrap_or_default(),
                &settings.destination,
                marker_calls,
            )
            .map_err(|e| {
                gpu_tools::rocprofiler_sdk::SdkError::ToolInitializeFailed(format!(
                    "no trace output: {e}"
                ))
            })?,
        );
        let context = setup.create_context()?;
        let s = Arc::clone(&stream);
        let buffer = setup.create_buffer(&context, BufferOptions::new(size), move |batch| {
            s.write_batch(batch)
        })?;
        if !calls.is_empty() {
            setup.trace(&context, &calls, &buffer)?;
        }
        if kinds.contains(&TraceKind::Nvtx) {
            let notes = Arc::new(Notes::new(lib));
            let source = roctx::configure(setup, &context, &buffer, &notes, marker_calls)?;
            stream.follow_roctx(source, notes);
        }
        let s = Arc::clone(&stream);
        setup.trace_code_objects(&context, move |event| {
            if let Payload::KernelSymbol(k) = event.payload() {
                if let Some(name) = k.name() {
                    s.kernel_symbol(k.kernel_id(), &name.to_string_lossy());
                }
            }
        })?;
        context.start()?;
        Ok(RocmTrace {
            _context: context,
            buffer,
            stream,
        })
    }

    fn finalize(&mut self) {
        // Every buffer was flushed before this runs.
        let stats = self.buffer.stats();
        self.stream
            .end(stats.dropped_records, stats.callback_panics);
    }
}

gpu_tools::rocprofiler_sdk_tool!(RocmTrace);
