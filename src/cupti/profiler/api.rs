//! The profiling entry points of the loaded `libcupti`, and the parameter-struct sizes CUPTI checks.

use super::{NvperfHost, ProfilingError};
use crate::cupti::CuptiLibrary;
use crate::sys::cupti_profiling::CuptiProfilingFns;

/// The loaded CUPTI and its profiling table.
#[derive(Clone, Copy)]
pub(crate) struct Api {
    pub(crate) lib: &'static CuptiLibrary,
    pub(crate) t: &'static CuptiProfilingFns,
}

impl std::fmt::Debug for Api {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Api")
            .field("cupti", &self.lib.path())
            .finish()
    }
}

/// Which libraries a caller needs besides `libcupti`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Needs {
    /// The metric host (catalogue, configuration, evaluation): CUPTI opens `libnvperf_host.so`.
    Metrics,
    /// Only `libcupti` (PC sampling).
    CuptiOnly,
}

impl Api {
    /// Loads CUPTI (and, for metrics, `libnvperf_host.so` before CUPTI looks for it).
    pub(crate) fn load(needs: Needs) -> crate::Result<Api> {
        let lib = CuptiLibrary::load()?;
        let t = lib
            .profiling
            .as_ref()
            .ok_or(ProfilingError::MissingSymbol("cuptiProfilerInitialize"))?;
        if needs == Needs::Metrics {
            NvperfHost::load()?;
        }
        Ok(Api { lib, t })
    }

    /// A required entry point, or the typed error naming it.
    pub(crate) fn sym<F: Copy>(
        &self,
        field: &Result<F, libloading::Error>,
        name: &'static str,
    ) -> Result<F, ProfilingError> {
        crate::loader::required(field, name).map_err(|_| ProfilingError::MissingSymbol(name))
    }
}

/// `api.sym(&api.t.NAME, "NAME")`.
macro_rules! sym {
    ($api:expr, $name:ident) => {
        $api.sym(&$api.t.$name, stringify!($name))
    };
}
pub(crate) use sym;

/// The `structSize` CUPTI expects for a parameter struct: up to the end of its last field (the header's
/// `*_STRUCT_SIZE` macros), which is less than `size_of` where the struct ends in padding. CUPTI rejects
/// `size_of` there (`cuptiProfilerHostGetMetricProperties` answers `CUPTI_ERROR_INVALID_PARAMETER`).
macro_rules! struct_size {
    ($t:ty, $last:ident) => {{
        let place = ::std::mem::MaybeUninit::<$t>::uninit();
        // SAFETY: a raw place of the value's own (uninitialised) memory; nothing is read or referenced.
        let field = unsafe { &raw const (*place.as_ptr()).$last };
        ::std::mem::offset_of!($t, $last) + $crate::cupti::profiler::api::pointee_size(field)
    }};
}
pub(crate) use struct_size;

/// The size of what a raw pointer points to (a field's size, without reading it).
pub(crate) const fn pointee_size<T>(_: *const T) -> usize {
    std::mem::size_of::<T>()
}

/// A parameter struct, zeroed, with its `structSize` set to the header's `*_STRUCT_SIZE`.
macro_rules! params {
    ($t:ident, $last:ident) => {{
        let mut p = $crate::sys::cupti_profiling::$t::default();
        p.structSize =
            $crate::cupti::profiler::api::struct_size!($crate::sys::cupti_profiling::$t, $last);
        p
    }};
}
pub(crate) use params;

#[cfg(test)]
mod tests {
    use crate::sys::cupti_profiling as sys;

    #[test]
    fn struct_sizes_end_at_the_last_field() {
        // 7 pointers and a 4-byte enum: 60, where size_of is 64.
        assert_eq!(
            struct_size!(
                sys::CUpti_Profiler_Host_GetMetricProperties_Params,
                metricType
            ),
            60
        );
        assert_eq!(
            std::mem::size_of::<sys::CUpti_Profiler_Host_GetMetricProperties_Params>(),
            64
        );
        assert_eq!(
            struct_size!(sys::CUpti_PmSampling_DecodeData_Params, overflow),
            std::mem::offset_of!(sys::CUpti_PmSampling_DecodeData_Params, overflow) + 1
        );
        let p = params!(CUpti_Profiler_Host_Initialize_Params, pHostObject);
        assert_eq!(p.structSize, 48);
        assert!(p.pChipName.is_null());
        // Packed structs too.
        assert_eq!(
            struct_size!(sys::CUpti_PCSamplingData, hardwareBufferFull),
            std::mem::offset_of!(sys::CUpti_PCSamplingData, hardwareBufferFull) + 1
        );
    }
}
