//! Struct sizes and field offsets of the generated sys layer, checked against the values recorded in the
//! project's vendor facts (x86-64). A failure means the bindings no longer match the vendor ABI the safe layer
//! was written for.
// Each vendor's checks need its feature; with fewer features some imports and helpers go unused.
#![cfg_attr(
    not(all(feature = "cupti", feature = "cudbg", feature = "rocprofiler")),
    allow(unused)
)]

use std::mem::{offset_of, size_of};

#[cfg(feature = "cupti")]
#[test]
fn cupti_checkpoint_struct() {
    use gpu_tools::sys::cupti::NV_Cupti_Checkpoint_CUpti_Checkpoint as C;
    assert_eq!(size_of::<C>(), 48, "CUpti_Checkpoint_STRUCT_SIZE");
    assert_eq!(offset_of!(C, structSize), 0);
    assert_eq!(offset_of!(C, ctx), 8);
    assert_eq!(offset_of!(C, reserveDeviceMB), 16);
    assert_eq!(offset_of!(C, reserveHostMB), 24);
    assert_eq!(offset_of!(C, allowOverwrite), 32);
    assert_eq!(offset_of!(C, optimizations), 33);
    assert_eq!(offset_of!(C, pPriv), 40);
    assert_eq!(gpu_tools::sys::cupti::CUPTI_CHECKPOINT_OPT_TRANSFER, 1);
}

#[cfg(feature = "cudbg")]
#[test]
fn cudbg_event_structs() {
    use gpu_tools::sys::cudbg as s;
    assert_eq!(
        size_of::<s::CUDBGEvent>(),
        92,
        "CUDBGEvent is #pragma pack(1)"
    );
    assert_eq!(offset_of!(s::CUDBGEvent, kind), 0);
    assert_eq!(offset_of!(s::CUDBGEvent, cases), 4);
    assert_eq!(size_of::<s::CUDBGEventCallbackData>(), 16);
    assert_eq!(offset_of!(s::CUDBGEventCallbackData, userData), 0);
    assert_eq!(offset_of!(s::CUDBGEventCallbackData, tid), 8);
    assert_eq!(
        (
            s::CUDBG_API_VERSION_MAJOR,
            s::CUDBG_API_VERSION_MINOR,
            s::CUDBG_API_VERSION_REVISION
        ),
        (13, 0, 163)
    );
}

#[cfg(feature = "rocprofiler")]
mod rocprofiler {
    use super::*;
    use gpu_tools::sys::rocprofiler as r;

    #[test]
    fn record_header() {
        assert_eq!(size_of::<r::rocprofiler_record_header_t>(), 16);
        assert_eq!(offset_of!(r::rocprofiler_record_header_t, kind), 0);
        assert_eq!(offset_of!(r::rocprofiler_record_header_t, id), 8);
    }

    #[test]
    fn profiler_record() {
        type P = r::rocprofiler_record_profiler_t;
        assert_eq!(size_of::<P>(), 176);
        assert_eq!(offset_of!(P, counters), 56);
        assert_eq!(offset_of!(P, counters_count), 64);
        assert_eq!(offset_of!(P, xcc_index), 72);
        assert_eq!(offset_of!(P, kernel_properties), 80);
        assert_eq!(
            offset_of!(P, kernel_properties) + size_of::<r::rocprofiler_kernel_properties_t>(),
            152
        );
        assert_eq!(offset_of!(P, thread_id), 152);
        assert_eq!(offset_of!(P, queue_idx), 160);
        assert_eq!(offset_of!(P, correlation_id), 168);
    }

    #[test]
    fn tracer_record() {
        type T = r::rocprofiler_record_tracer_t;
        assert_eq!(size_of::<T>(), 96);
        assert_eq!(offset_of!(T, operation_id), 28);
        assert_eq!(offset_of!(T, api_data), 32);
        assert_eq!(offset_of!(T, correlation_id), 40);
        assert_eq!(offset_of!(T, timestamps), 48);
        assert_eq!(offset_of!(T, agent_id), 64);
        assert_eq!(offset_of!(T, queue_id), 72);
        assert_eq!(offset_of!(T, thread_id), 80);
        assert_eq!(offset_of!(T, phase), 84);
        assert_eq!(offset_of!(T, name), 88);
    }

    #[test]
    fn other_records_and_structs() {
        assert_eq!(
            size_of::<r::rocprofiler_record_pc_sample_t>(),
            56,
            "PC-sampling record"
        );
        assert_eq!(
            size_of::<r::rocprofiler_record_att_tracer_t>(),
            176,
            "ATT record"
        );
        assert_eq!(
            size_of::<r::rocprofiler_record_counters_sampler_t>(),
            40,
            "counters-sampler record"
        );
        assert_eq!(size_of::<r::rocprofiler_record_counter_instance_t>(), 16);
        assert_eq!(
            offset_of!(r::rocprofiler_record_counter_instance_t, value),
            8
        );
        assert_eq!(size_of::<r::rocprofiler_device_profile_metric_t>(), 72);
        assert_eq!(
            offset_of!(r::rocprofiler_device_profile_metric_t, value),
            64
        );
        assert_eq!(size_of::<r::rocprofiler_codeobj_symbols_t>(), 24);
        assert_eq!(size_of::<r::rocprofiler_intercepted_codeobj_t>(), 64);
        assert_eq!(size_of::<r::rocprofiler_buffer_property_t>(), 16);
        assert_eq!(
            size_of::<r::rocprofiler_filter_data_t>(),
            32,
            "passed by value to create_filter"
        );
        assert_eq!(
            size_of::<r::rocprofiler_filter_property_t>(),
            24,
            "passed by value to create_filter"
        );
    }

    #[test]
    fn kinds_and_statuses() {
        assert_eq!(
            [
                r::ROCPROFILER_PROFILER_RECORD,
                r::ROCPROFILER_TRACER_RECORD,
                r::ROCPROFILER_ATT_TRACER_RECORD,
                r::ROCPROFILER_PC_SAMPLING_RECORD,
                r::ROCPROFILER_SPM_RECORD,
                r::ROCPROFILER_COUNTERS_SAMPLER_RECORD
            ],
            [0, 1, 2, 3, 4, 5]
        );
        assert_eq!(r::ROCPROFILER_STATUS_ERROR_SESSION_NOT_FOUND, -17);
        assert_eq!(r::ROCPROFILER_STATUS_ERROR_HAS_ACTIVE_SESSION, -29);
        assert_eq!(r::ROCPROFILER_STATUS_ERROR_BUFFER_NOT_FOUND, -32);
        assert_eq!(r::ROCPROFILER_STATUS_ERROR_INVALID_ARGUMENTS, -34);
        assert_eq!(
            r::ROCPROFILER_STATUS_ERROR_MISMATCHED_EXTERNAL_CORRELATION_ID,
            -38
        );
    }
}
