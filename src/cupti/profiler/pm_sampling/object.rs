//! The CUPTI PM sampling object and the calls that set it up: enable (disabled on drop), size and initialise the
//! counter-data image, configure, start.

use super::{AppendMode, Interval, PmSamplerBuilder};
use crate::cupti::profiler::api::{Api, params, sym};
use crate::cupti::profiler::host::{ConfigImage, MetricNames};
use crate::cupti::profiler::{ProfilingError, check};
use crate::sys::cupti_profiling as sys;

/// The CUPTI PM sampling object, moved to the decode thread.
pub(super) struct Object(pub(super) *mut sys::CUpti_PmSampling_Object);

// SAFETY: a device-level object CUPTI does not tie to a thread; after `start` only the decode thread uses it.
unsafe impl Send for Object {}

/// Disables PM sampling on drop (the object is made by `cuptiPmSamplingEnable`).
pub(super) struct Enabled {
    pub(super) api: Api,
    pub(super) obj: Object,
}

impl Drop for Enabled {
    fn drop(&mut self) {
        if let Ok(f) = sym!(self.api, cuptiPmSamplingDisable) {
            let mut p = params!(CUpti_PmSampling_Disable_Params, pPmSamplingObject);
            p.pPmSamplingObject = self.obj.0;
            // SAFETY: the object is live and disabled once, here; this releases the counters.
            let _ = unsafe { f(&mut p) };
        }
    }
}

pub(super) fn enable(api: Api, device: usize) -> Result<Enabled, ProfilingError> {
    let f = sym!(api, cuptiPmSamplingEnable)?;
    let mut p = params!(CUpti_PmSampling_Enable_Params, pPmSamplingObject);
    p.deviceIndex = device;
    // SAFETY: a parameter struct of the header's layout; CUPTI writes the object.
    check("cuptiPmSamplingEnable", unsafe { f(&mut p) })?;
    if p.pPmSamplingObject.is_null() {
        return Err(ProfilingError::State(
            "cuptiPmSamplingEnable returned no object",
        ));
    }
    Ok(Enabled {
        api,
        obj: Object(p.pPmSamplingObject),
    })
}

pub(super) fn counter_data_size(
    api: Api,
    e: &Enabled,
    metrics: &MetricNames,
    samples: u32,
) -> Result<usize, ProfilingError> {
    let f = sym!(api, cuptiPmSamplingGetCounterDataSize)?;
    let mut names = metrics.pointers();
    let mut p = params!(CUpti_PmSampling_GetCounterDataSize_Params, counterDataSize);
    p.pPmSamplingObject = e.obj.0;
    p.pMetricNames = names.as_mut_ptr();
    p.numMetrics = names.len();
    p.maxSamples = samples;
    // SAFETY: a live object; the names outlive the call.
    check("cuptiPmSamplingGetCounterDataSize", unsafe { f(&mut p) })?;
    Ok(p.counterDataSize)
}

pub(super) fn initialize_image(
    api: Api,
    e: &Enabled,
    image: &mut [u8],
) -> Result<(), ProfilingError> {
    let f = sym!(api, cuptiPmSamplingCounterDataImageInitialize)?;
    let mut p = params!(
        CUpti_PmSampling_CounterDataImage_Initialize_Params,
        pCounterData
    );
    p.pPmSamplingObject = e.obj.0;
    p.counterDataSize = image.len();
    p.pCounterData = image.as_mut_ptr();
    // SAFETY: a live object and a buffer of the size CUPTI asked for.
    check("cuptiPmSamplingCounterDataImageInitialize", unsafe {
        f(&mut p)
    })
}

pub(super) fn set_config(
    api: Api,
    e: &Enabled,
    config: &ConfigImage,
    b: &PmSamplerBuilder,
) -> Result<(), ProfilingError> {
    let f = sym!(api, cuptiPmSamplingSetConfig)?;
    let mut p = params!(CUpti_PmSampling_SetConfig_Params, hwBufferAppendMode);
    p.pPmSamplingObject = e.obj.0;
    p.configSize = config.bytes().len();
    p.pConfig = config.bytes().as_ptr();
    p.hardwareBufferSize = b.hardware_buffer;
    (p.triggerMode, p.samplingInterval) = match b.interval {
        Interval::Time(d) => (
            sys::CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_TIME_INTERVAL,
            u64::try_from(d.as_nanos()).unwrap_or(u64::MAX),
        ),
        Interval::Clocks(c) => (sys::CUPTI_PM_SAMPLING_TRIGGER_MODE_GPU_SYSCLK_INTERVAL, c),
    };
    p.hwBufferAppendMode = match b.append {
        AppendMode::KeepOldest => sys::CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_OLDEST,
        AppendMode::KeepLatest => sys::CUPTI_PM_SAMPLING_HARDWARE_BUFFER_APPEND_MODE_KEEP_LATEST,
    };
    // SAFETY: a live object; the configuration image outlives the call, and the decode thread keeps it until the
    // object is disabled.
    check("cuptiPmSamplingSetConfig", unsafe { f(&mut p) })
}

pub(super) fn start(api: Api, e: &Enabled) -> Result<(), ProfilingError> {
    let f = sym!(api, cuptiPmSamplingStart)?;
    let mut p = params!(CUpti_PmSampling_Start_Params, pPmSamplingObject);
    p.pPmSamplingObject = e.obj.0;
    // SAFETY: a live, configured object.
    check("cuptiPmSamplingStart", unsafe { f(&mut p) })
}
