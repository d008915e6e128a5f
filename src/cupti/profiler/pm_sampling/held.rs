//! Whether another client holds a device's performance counters, asked without taking them.

use super::claims::DeviceClaim;
use crate::cupti::profiler::api::{Api, Needs};
use crate::cupti::profiler::{self, ProfilerInit, ProfilingError};

/// Whether another client holds the performance counters of CUDA device `index`: a PM sampler or range profiler
/// of another process, Nsight Compute, DCGM's profiling metrics. CUPTI's PM-sampling availability query answers
/// `CUPTI_ERROR_HARDWARE_BUSY` then, and reserves nothing. PC sampling enabled beside such a holder starts, then
/// `cuptiPCSamplingGetData` fails with `CUPTI_ERROR_UNKNOWN` (H200, CUPTI 13.0, driver 580), and CUDA-graph jobs
/// sampled so died at their next launches: ask this first.
///
/// A PM sampler of this process on the device is refused before any vendor call
/// ([`ProfilingError::AlreadySampling`]): CUPTI answers a second PM client of one process with
/// `CUPTI_ERROR_UNKNOWN`, not with the busy code.
pub fn counters_held_elsewhere(index: usize) -> crate::Result<bool> {
    let api = Api::load(Needs::CuptiOnly)?;
    profiler::check_index(index)?;
    let _claim = DeviceClaim::take(index)?;
    let _init = ProfilerInit::acquire(api)?;
    match profiler::pm_availability(api, index) {
        Ok(_) => Ok(false),
        Err(ProfilingError::CountersBusy { .. }) => Ok(true),
        Err(e) => Err(e.into()),
    }
}
