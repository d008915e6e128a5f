//! An SDK from before `MARKER_CORE_RANGE_API` (buffer kind 32, callback kind 21): the kinds it lacks are typed
//! errors before the SDK is asked (the double, like the real SDK, ends the process when asked to configure a kind
//! past its last), nothing of a refused list is configured, and ROCTx still comes through `MARKER_CORE_API`. One
//! test: registration is per process.
#![cfg(feature = "rocprofiler-sdk")]

use crate::common;

use std::sync::Mutex;

use gpu_tools::rocprofiler_sdk::{
    Batch, Buffer, BufferOptions, CallbackEvent, Context, MarkerCall, Payload, Record, SdkError,
    Setup, Tool, TraceKind, force_configure,
};
use gpu_tools::sys::rocprofiler_sdk as sys;

static CALLS: Mutex<Vec<MarkerCall>> = Mutex::new(Vec::new());
static MESSAGES: Mutex<Vec<String>> = Mutex::new(Vec::new());
static REFUSALS: Mutex<Vec<String>> = Mutex::new(Vec::new());

struct BeforeRanges {
    _context: Context,
    buffer: Buffer,
}

fn keep(batch: &Batch<'_>) {
    for r in batch.records().flatten() {
        if let Record::Api(a) = r {
            if let Some(call) = a.marker_call() {
                CALLS.lock().unwrap().push(call);
            }
        }
    }
}

impl Tool for BeforeRanges {
    const NAME: &'static str = "before ranges";

    fn initialize(setup: &mut Setup<'_>) -> gpu_tools::Result<Self> {
        let lib = setup.library();
        assert!(!lib.knows_buffer_kind(sys::ROCPROFILER_BUFFER_TRACING_MARKER_CORE_RANGE_API));
        assert!(lib.knows_buffer_kind(sys::ROCPROFILER_BUFFER_TRACING_MARKER_CORE_API));
        assert!(!lib.knows_callback_kind(sys::ROCPROFILER_CALLBACK_TRACING_MARKER_CORE_RANGE_API));
        let context = setup.create_context()?;
        let buffer = setup.create_buffer(&context, BufferOptions::new(4096), keep)?;
        let mut refusals = REFUSALS.lock().unwrap();
        match setup.trace(
            &context,
            &[TraceKind::KernelDispatch, TraceKind::MarkerRanges],
            &buffer,
        ) {
            Err(gpu_tools::Error::Sdk(e)) => refusals.push(e.to_string()),
            other => refusals.push(format!("unexpected {other:?}")),
        }
        let kinds = [sys::ROCPROFILER_CALLBACK_TRACING_MARKER_CORE_RANGE_API];
        match setup.trace_callbacks(&context, &kinds, |_: &CallbackEvent<'_>| {}) {
            Err(gpu_tools::Error::Sdk(e)) => refusals.push(e.to_string()),
            other => refusals.push(format!("unexpected {other:?}")),
        }
        // The refused list configured nothing: kernel dispatches are still free to configure.
        setup.trace(
            &context,
            &[TraceKind::KernelDispatch, TraceKind::MarkerApi],
            &buffer,
        )?;
        let kinds = [sys::ROCPROFILER_CALLBACK_TRACING_MARKER_CORE_API];
        setup.trace_callbacks(&context, &kinds, |e: &CallbackEvent<'_>| {
            if let Payload::Marker(args) = e.payload() {
                if let Some(m) = args.message() {
                    MESSAGES
                        .lock()
                        .unwrap()
                        .push(m.to_string_lossy().into_owned());
                }
            }
        })?;
        context.start()?;
        Ok(BeforeRanges {
            _context: context,
            buffer,
        })
    }

    fn finalize(&mut self) {
        let _ = self.buffer.flush();
    }
}

#[test]
fn an_sdk_without_range_kinds_refuses_them_typed_and_traces_roctx_calls() {
    if !gpu_tools_testing::own_process() {
        return;
    }
    // SAFETY: no other thread reads the environment here.
    unsafe { std::env::set_var("RPSDK_DOUBLE_NO_CORE_RANGE", "1") };
    let d = common::double();
    force_configure::<BeforeRanges>(d.lib).expect("the tool registers");
    // SAFETY: NUL-terminated strings that outlive the calls.
    unsafe {
        (d.roctx_push)(c"step".as_ptr());
        (d.roctx_mark)(c"here".as_ptr());
        (d.roctx_pop)();
    }
    gpu_tools::rocprofiler_sdk::finalize().unwrap();
    assert_eq!(
        *REFUSALS.lock().unwrap(),
        [
            SdkError::UnknownKind {
                service: "buffer tracing",
                kind: 32
            }
            .to_string(),
            SdkError::UnknownKind {
                service: "callback tracing",
                kind: 21
            }
            .to_string(),
        ]
    );
    assert_eq!(
        *CALLS.lock().unwrap(),
        [
            MarkerCall::RangePush,
            MarkerCall::Mark,
            MarkerCall::RangePop
        ]
    );
    assert_eq!(*MESSAGES.lock().unwrap(), ["step", "here"]);
}
