//! Reading CUPTI counter-data images: the calls that need only the image (no profiler or sampler object), shared by
//! the samplers that fill images ([`range_profiler`](super::range_profiler), [`pm_sampling`](super::pm_sampling))
//! and by [`image`](super::image), which evaluates images read back from files.

use std::ffi::CStr;

use super::api::{Api, params, sym};
use super::host::{Host, MetricNames};
use super::{ProfilingError, check};
use crate::sys::cupti_profiling as sys;

/// Ranges in a range-profiler counter-data image (`cuptiRangeProfilerGetCounterDataInfo`, no object needed).
///
/// # Safety
/// `image` is a range-profiler counter-data image CUPTI wrote.
pub(crate) unsafe fn range_count(api: Api, image: &[u8]) -> Result<usize, ProfilingError> {
    let f = sym!(api, cuptiRangeProfilerGetCounterDataInfo)?;
    let mut p = params!(
        CUpti_RangeProfiler_GetCounterDataInfo_Params,
        numTotalRanges
    );
    p.pCounterDataImage = image.as_ptr();
    p.counterDataImageSize = image.len();
    // SAFETY: the caller's contract.
    check("cuptiRangeProfilerGetCounterDataInfo", unsafe { f(&mut p) })?;
    Ok(p.numTotalRanges)
}

/// The name of range `index`, nested names joined by `/` (`cuptiRangeProfilerCounterDataGetRangeInfo`).
///
/// # Safety
/// As [`range_count`].
pub(crate) unsafe fn range_name(
    api: Api,
    image: &[u8],
    index: usize,
) -> Result<String, ProfilingError> {
    let f = sym!(api, cuptiRangeProfilerCounterDataGetRangeInfo)?;
    let mut p = params!(
        CUpti_RangeProfiler_CounterData_GetRangeInfo_Params,
        rangeName
    );
    p.pCounterDataImage = image.as_ptr();
    p.counterDataImageSize = image.len();
    p.rangeIndex = index;
    p.rangeDelimiter = c"/".as_ptr();
    // SAFETY: the caller's contract; the delimiter is a static string.
    check("cuptiRangeProfilerCounterDataGetRangeInfo", unsafe {
        f(&mut p)
    })?;
    if p.rangeName.is_null() {
        return Ok(String::new());
    }
    // SAFETY: on success a NUL-terminated name. Who owns it is not documented: it is copied and left alone.
    Ok(unsafe { CStr::from_ptr(p.rangeName) }
        .to_string_lossy()
        .into_owned())
}

/// Every range of an image, named and evaluated: (name, one value per metric).
///
/// # Safety
/// As [`range_count`].
pub(crate) unsafe fn evaluate_ranges(
    api: Api,
    host: &Host,
    image: &[u8],
    metrics: &MetricNames,
) -> Result<Vec<(String, Vec<f64>)>, ProfilingError> {
    // SAFETY: forwarded.
    let n = unsafe { range_count(api, image) }?;
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        // SAFETY: forwarded; `i` is below the count.
        let name = unsafe { range_name(api, image, i) }?;
        // SAFETY: as above.
        let values = unsafe { host.evaluate(image, i, metrics) }?;
        out.push((name, values));
    }
    Ok(out)
}

/// Completed samples of a PM counter-data image (`cuptiPmSamplingGetCounterDataInfo`, no object needed).
///
/// # Safety
/// `image` is a PM sampling counter-data image CUPTI wrote.
pub(crate) unsafe fn completed_samples(api: Api, image: &[u8]) -> Result<usize, ProfilingError> {
    // SAFETY: the caller's contract.
    unsafe { sample_counts(api, image) }.map(|(_, completed)| completed)
}

/// Populated and completed samples of a PM counter-data image (`cuptiPmSamplingGetCounterDataInfo`).
///
/// # Safety
/// `image` is a PM sampling counter-data image CUPTI wrote.
pub(crate) unsafe fn sample_counts(
    api: Api,
    image: &[u8],
) -> Result<(usize, usize), ProfilingError> {
    let f = sym!(api, cuptiPmSamplingGetCounterDataInfo)?;
    let mut p = params!(
        CUpti_PmSampling_GetCounterDataInfo_Params,
        numCompletedSamples
    );
    p.pCounterDataImage = image.as_ptr();
    p.counterDataImageSize = image.len();
    // SAFETY: the caller's contract.
    check("cuptiPmSamplingGetCounterDataInfo", unsafe { f(&mut p) })?;
    Ok((p.numPopulatedSamples, p.numCompletedSamples))
}

/// Start and end of sample `index` (`cuptiPmSamplingCounterDataGetSampleInfo`). `obj` may be null for an image
/// read back from a file (whether CUPTI accepts that is its own affair; it then answers an error).
///
/// # Safety
/// `image` is a PM sampling counter-data image CUPTI wrote; `obj` is null or the live object that wrote it.
pub(crate) unsafe fn sample_times(
    api: Api,
    obj: *mut sys::CUpti_PmSampling_Object,
    image: &[u8],
    index: usize,
) -> Result<(u64, u64), ProfilingError> {
    let f = sym!(api, cuptiPmSamplingCounterDataGetSampleInfo)?;
    let mut p = params!(
        CUpti_PmSampling_CounterData_GetSampleInfo_Params,
        endTimestamp
    );
    p.pPmSamplingObject = obj;
    p.pCounterDataImage = image.as_ptr();
    p.counterDataImageSize = image.len();
    p.sampleIndex = index;
    // SAFETY: the caller's contract.
    check("cuptiPmSamplingCounterDataGetSampleInfo", unsafe {
        f(&mut p)
    })?;
    Ok((p.startTimestamp, p.endTimestamp))
}
