//! Session filters: what to collect (dispatch timestamps, counters, API traces) and one optional property that
//! narrows it (kernel names, GPU names, dispatch ids, a range, traced functions).

use std::ffi::{CString, c_char};

use super::ProfilerError;
use crate::sys::rocprofiler as sys;

/// An API tracing domain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TraceDomain {
    /// HSA API calls.
    HsaApi,
    /// HSA asynchronous operations (copies, dispatches).
    HsaOps,
    /// HIP asynchronous operations.
    HipOps,
    /// HIP API calls.
    HipApi,
    /// KFD calls.
    KfdApi,
    /// External API.
    ExtApi,
    /// ROCTX markers and ranges.
    Roctx,
    /// HSA events.
    HsaEvt,
    /// A value this crate does not know (seen in records; refused in filters).
    Other(u32),
}

impl TraceDomain {
    /// The vendor's `rocprofiler_tracer_activity_domain_t` value.
    pub fn raw(self) -> u32 {
        match self {
            TraceDomain::HsaApi => sys::ACTIVITY_DOMAIN_HSA_API,
            TraceDomain::HsaOps => sys::ACTIVITY_DOMAIN_HSA_OPS,
            TraceDomain::HipOps => sys::ACTIVITY_DOMAIN_HIP_OPS,
            TraceDomain::HipApi => sys::ACTIVITY_DOMAIN_HIP_API,
            TraceDomain::KfdApi => sys::ACTIVITY_DOMAIN_KFD_API,
            TraceDomain::ExtApi => sys::ACTIVITY_DOMAIN_EXT_API,
            TraceDomain::Roctx => sys::ACTIVITY_DOMAIN_ROCTX,
            TraceDomain::HsaEvt => sys::ACTIVITY_DOMAIN_HSA_EVT,
            TraceDomain::Other(v) => v,
        }
    }

    pub(crate) fn from_raw(v: u32) -> Self {
        match v {
            sys::ACTIVITY_DOMAIN_HSA_API => TraceDomain::HsaApi,
            sys::ACTIVITY_DOMAIN_HSA_OPS => TraceDomain::HsaOps,
            sys::ACTIVITY_DOMAIN_HIP_OPS => TraceDomain::HipOps,
            sys::ACTIVITY_DOMAIN_HIP_API => TraceDomain::HipApi,
            sys::ACTIVITY_DOMAIN_KFD_API => TraceDomain::KfdApi,
            sys::ACTIVITY_DOMAIN_EXT_API => TraceDomain::ExtApi,
            sys::ACTIVITY_DOMAIN_ROCTX => TraceDomain::Roctx,
            sys::ACTIVITY_DOMAIN_HSA_EVT => TraceDomain::HsaEvt,
            other => TraceDomain::Other(other),
        }
    }
}

/// A property narrowing a filter. The vendor accepts one per filter.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FilterProperty {
    /// Only kernels whose names match one of these regular expressions.
    KernelNames(Vec<String>),
    /// Only these GPUs (by name).
    GpuNames(Vec<String>),
    /// Only dispatches whose ids fall in one of these inclusive ranges.
    DispatchIds(Vec<(u64, u64)>),
    /// Only the dispatches numbered `start..end`.
    Range {
        /// First.
        start: u32,
        /// Last.
        end: u32,
    },
    /// Only these HIP functions (API trace filters).
    HipFunctions(Vec<String>),
    /// Only these HSA functions (API trace filters).
    HsaFunctions(Vec<String>),
}

impl FilterProperty {
    fn name(&self) -> &'static str {
        match self {
            FilterProperty::KernelNames(_) => "kernel names",
            FilterProperty::GpuNames(_) => "GPU names",
            FilterProperty::DispatchIds(_) => "dispatch ids",
            FilterProperty::Range { .. } => "range",
            FilterProperty::HipFunctions(_) => "HIP functions",
            FilterProperty::HsaFunctions(_) => "HSA functions",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    DispatchTimestamps,
    Counters(Vec<String>),
    ApiTrace(Vec<TraceDomain>),
}

/// What a profiling session collects into a buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filter {
    kind: Kind,
    properties: Vec<FilterProperty>,
}

impl Filter {
    /// Kernel dispatch timestamps (profiler records without counters).
    pub fn dispatch_timestamps() -> Self {
        Filter {
            kind: Kind::DispatchTimestamps,
            properties: Vec::new(),
        }
    }

    /// Hardware counters by name, per kernel dispatch (profiler records with counters).
    pub fn counters<I, S>(names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Filter {
            kind: Kind::Counters(names.into_iter().map(Into::into).collect()),
            properties: Vec::new(),
        }
    }

    /// API tracing of the given domains (tracer records).
    pub fn api_trace(domains: impl IntoIterator<Item = TraceDomain>) -> Self {
        Filter {
            kind: Kind::ApiTrace(domains.into_iter().collect()),
            properties: Vec::new(),
        }
    }

    /// Adds a property. The vendor takes one per filter: a second one is reported when the filter is added.
    pub fn with_property(mut self, property: FilterProperty) -> Self {
        self.properties.push(property);
        self
    }

    /// The filter kind's name.
    pub fn kind_name(&self) -> &'static str {
        match self.kind {
            Kind::DispatchTimestamps => "dispatch timestamps",
            Kind::Counters(_) => "counters",
            Kind::ApiTrace(_) => "API trace",
        }
    }

    pub(crate) fn raw_kind(&self) -> u32 {
        match self.kind {
            Kind::DispatchTimestamps => sys::ROCPROFILER_DISPATCH_TIMESTAMPS_COLLECTION,
            Kind::Counters(_) => sys::ROCPROFILER_COUNTERS_COLLECTION,
            Kind::ApiTrace(_) => sys::ROCPROFILER_API_TRACE,
        }
    }

    /// Checks the filter and builds the C data it passes, owned so that it outlives every use by the vendor.
    pub(crate) fn prepare(&self) -> Result<PreparedFilter, ProfilerError> {
        let mut out = PreparedFilter {
            kind: self.raw_kind(),
            data: sys::rocprofiler_filter_data_t::default(),
            data_count: 0,
            property: sys::rocprofiler_filter_property_t::default(),
            strings: Vec::new(),
            pointers: Vec::new(),
            property_pointers: Vec::new(),
            domains: Vec::new(),
            ranges: Vec::new(),
        };
        match &self.kind {
            Kind::DispatchTimestamps => {}
            Kind::Counters(names) => {
                if names.is_empty() {
                    return Err(ProfilerError::EmptyList("counter names"));
                }
                out.pointers = out.c_strings(names)?;
                out.data.counters_names = out.pointers.as_mut_ptr();
                out.data_count = names.len() as u64;
            }
            Kind::ApiTrace(domains) => {
                if domains.is_empty() {
                    return Err(ProfilerError::EmptyList("trace domains"));
                }
                for d in domains {
                    if let TraceDomain::Other(v) = d {
                        return Err(ProfilerError::UnknownDomain(*v));
                    }
                    out.domains.push(d.raw());
                }
                out.data.trace_apis = out.domains.as_mut_ptr();
                out.data_count = out.domains.len() as u64;
            }
        }
        if self.properties.len() > 1 {
            return Err(ProfilerError::TooManyProperties);
        }
        if let Some(p) = self.properties.first() {
            self.check_applies(p)?;
            out.set_property(p)?;
        }
        Ok(out)
    }

    fn check_applies(&self, p: &FilterProperty) -> Result<(), ProfilerError> {
        let trace = matches!(self.kind, Kind::ApiTrace(_));
        let fits = match p {
            FilterProperty::HipFunctions(_) | FilterProperty::HsaFunctions(_) => trace,
            FilterProperty::KernelNames(_)
            | FilterProperty::GpuNames(_)
            | FilterProperty::DispatchIds(_) => !trace,
            FilterProperty::Range { .. } => true,
        };
        if fits {
            Ok(())
        } else {
            Err(ProfilerError::PropertyMismatch {
                property: p.name(),
                filter: self.kind_name(),
            })
        }
    }
}

/// The C form of a filter with the memory its pointers point to. Moving it does not move the heap buffers the
/// pointers refer to.
pub(crate) struct PreparedFilter {
    pub(crate) kind: u32,
    pub(crate) data: sys::rocprofiler_filter_data_t,
    pub(crate) data_count: u64,
    pub(crate) property: sys::rocprofiler_filter_property_t,
    strings: Vec<CString>,
    pointers: Vec<*const c_char>,
    property_pointers: Vec<*const c_char>,
    domains: Vec<u32>,
    ranges: Vec<sys::rocprofiler_filter_property_t__bindgen_ty_1__bindgen_ty_1>,
}

// SAFETY: the raw pointers point into the heap buffers of the fields above, owned by this value and never
// shared outside it except with the vendor, which only reads them.
unsafe impl Send for PreparedFilter {}
// SAFETY: as above; nothing is written through the pointers.
unsafe impl Sync for PreparedFilter {}

impl PreparedFilter {
    fn c_strings(&mut self, names: &[String]) -> Result<Vec<*const c_char>, ProfilerError> {
        let mut ptrs = Vec::with_capacity(names.len());
        for n in names {
            if n.is_empty() {
                return Err(ProfilerError::EmptyList("characters of a name"));
            }
            let c = CString::new(n.as_str()).map_err(|_| ProfilerError::NulInName(n.clone()))?;
            ptrs.push(c.as_ptr());
            self.strings.push(c);
        }
        Ok(ptrs)
    }

    fn set_property(&mut self, p: &FilterProperty) -> Result<(), ProfilerError> {
        let (kind, count) = match p {
            FilterProperty::KernelNames(names)
            | FilterProperty::GpuNames(names)
            | FilterProperty::HipFunctions(names)
            | FilterProperty::HsaFunctions(names) => {
                if names.is_empty() {
                    return Err(ProfilerError::EmptyList("property names"));
                }
                self.property_pointers = self.c_strings(names)?;
                self.property.__bindgen_anon_1.name_regex = self.property_pointers.as_mut_ptr();
                let kind = match p {
                    FilterProperty::KernelNames(_) => sys::ROCPROFILER_FILTER_KERNEL_NAMES,
                    FilterProperty::GpuNames(_) => sys::ROCPROFILER_FILTER_GPU_NAME,
                    FilterProperty::HipFunctions(_) => {
                        sys::ROCPROFILER_FILTER_HIP_TRACER_API_FUNCTIONS
                    }
                    _ => sys::ROCPROFILER_FILTER_HSA_TRACER_API_FUNCTIONS,
                };
                (kind, names.len())
            }
            FilterProperty::DispatchIds(ranges) => {
                if ranges.is_empty() {
                    return Err(ProfilerError::EmptyList("dispatch id ranges"));
                }
                for &(start, end) in ranges {
                    if start > end {
                        return Err(ProfilerError::InvalidRange { start, end });
                    }
                    self.ranges.push(
                        sys::rocprofiler_filter_property_t__bindgen_ty_1__bindgen_ty_1 {
                            start,
                            end,
                        },
                    );
                }
                self.property.__bindgen_anon_1.dispatch_ids = self.ranges.as_mut_ptr();
                (sys::ROCPROFILER_FILTER_DISPATCH_IDS, ranges.len())
            }
            FilterProperty::Range { start, end } => {
                if start > end {
                    return Err(ProfilerError::InvalidRange {
                        start: u64::from(*start),
                        end: u64::from(*end),
                    });
                }
                self.property.__bindgen_anon_1.range = [*start, *end];
                (sys::ROCPROFILER_FILTER_RANGE, 2)
            }
        };
        self.property.kind = kind;
        self.property.data_count = count as u64;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_point_at_owned_names() {
        let p = Filter::counters(["SQ_WAVES", "GRBM_COUNT"])
            .prepare()
            .unwrap();
        assert_eq!(p.kind, sys::ROCPROFILER_COUNTERS_COLLECTION);
        assert_eq!(p.data_count, 2);
        // SAFETY: test reads the pointers the filter built from its own strings.
        let second = unsafe { std::ffi::CStr::from_ptr(*p.data.counters_names.add(1)) };
        assert_eq!(second.to_str().unwrap(), "GRBM_COUNT");
    }

    #[test]
    fn invalid_filters_are_typed_errors() {
        assert_eq!(
            Filter::counters(Vec::<String>::new()).prepare().err(),
            Some(ProfilerError::EmptyList("counter names"))
        );
        assert_eq!(
            Filter::counters(["A\0B"]).prepare().err(),
            Some(ProfilerError::NulInName("A\0B".into()))
        );
        assert_eq!(
            Filter::api_trace([TraceDomain::Other(99)]).prepare().err(),
            Some(ProfilerError::UnknownDomain(99))
        );
        let two = Filter::dispatch_timestamps()
            .with_property(FilterProperty::Range { start: 0, end: 1 })
            .with_property(FilterProperty::Range { start: 0, end: 2 });
        assert_eq!(two.prepare().err(), Some(ProfilerError::TooManyProperties));
        let reversed =
            Filter::dispatch_timestamps().with_property(FilterProperty::DispatchIds(vec![(5, 1)]));
        assert_eq!(
            reversed.prepare().err(),
            Some(ProfilerError::InvalidRange { start: 5, end: 1 })
        );
        let hip_on_dispatch = Filter::dispatch_timestamps()
            .with_property(FilterProperty::HipFunctions(vec!["hipMalloc".into()]));
        assert!(matches!(
            hip_on_dispatch.prepare(),
            Err(ProfilerError::PropertyMismatch { .. })
        ));
    }

    #[test]
    fn properties_are_encoded() {
        let p = Filter::dispatch_timestamps()
            .with_property(FilterProperty::DispatchIds(vec![(1, 3), (7, 9)]))
            .prepare()
            .unwrap();
        assert_eq!(p.property.kind, sys::ROCPROFILER_FILTER_DISPATCH_IDS);
        assert_eq!(p.property.data_count, 2);
        // SAFETY: test reads the ranges the filter built.
        let second = unsafe { *p.property.__bindgen_anon_1.dispatch_ids.add(1) };
        assert_eq!((second.start, second.end), (7, 9));
        let r = Filter::api_trace([TraceDomain::HipApi])
            .with_property(FilterProperty::Range { start: 2, end: 4 })
            .prepare()
            .unwrap();
        // SAFETY: the range member was the one written.
        assert_eq!(unsafe { r.property.__bindgen_anon_1.range }, [2, 4]);
        // SAFETY: test reads the domain array the filter built.
        assert_eq!(unsafe { *r.data.trace_apis }, sys::ACTIVITY_DOMAIN_HIP_API);
    }
}
