//! The metric catalogue, configuration images and evaluation of counter data: CUPTI's profiler host API, which
//! needs no GPU and no driver (only `libcupti` and `libnvperf_host.so`).
//!
//! ```no_run
//! use gpu_tools::cupti::profiler::{Method, host::{Catalog, ConfigImage}};
//!
//! fn main() -> gpu_tools::Result<()> {
//!     let catalog = Catalog::for_chip("GH100")?;
//!     for m in catalog.filter(Some(Method::PmSampling), "dram__bytes") {
//!         println!("{:40} {:10} {}", m.name, m.unit, m.description);
//!     }
//!     // Checked names (unknown ones get close suggestions), then a configuration image.
//!     let metrics = catalog.resolve_all(&["dram__bytes_read.sum"], Method::RangeProfiler)?;
//!     let config = ConfigImage::build(&catalog.chip(), Method::RangeProfiler, None, &metrics)?;
//!     println!("{} bytes, {} pass(es)", config.bytes().len(), config.passes());
//!     Ok(())
//! }
//! ```

use std::collections::HashMap;
use std::ffi::{CStr, CString, c_char};
use std::ptr;

use super::api::{Api, Needs, params, sym};
use super::error::check;
use super::metric::{self, MetricName};
use super::{Method, MetricKind, ProfilingError};
use crate::sys::cupti_profiling as sys;

bitflags::bitflags! {
    /// The collection methods that support a metric.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct Methods: u8 {
        /// [`Method::RangeProfiler`].
        const RANGE_PROFILER = 1;
        /// [`Method::PmSampling`].
        const PM_SAMPLING = 2;
    }
}

impl Methods {
    /// The flag of one method.
    pub fn of(method: Method) -> Methods {
        match method {
            Method::RangeProfiler => Methods::RANGE_PROFILER,
            Method::PmSampling => Methods::PM_SAMPLING,
        }
    }

    /// `range`, `pm` or `range,pm`.
    pub fn names(self) -> String {
        let mut out = Vec::new();
        if self.contains(Methods::RANGE_PROFILER) {
            out.push(Method::RangeProfiler.name());
        }
        if self.contains(Methods::PM_SAMPLING) {
            out.push(Method::PmSampling.name());
        }
        out.join(",")
    }
}

/// CUPTI's profiler host calls, one at a time in the process: two threads initialising host objects at once made
/// `cuptiProfilerHostInitialize` fail with `CUPTI_ERROR_UNKNOWN` (CUPTI 13.0's wheel, no GPU), and the header
/// does not say which host calls may run concurrently.
static HOST_CALLS: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn host_calls() -> std::sync::MutexGuard<'static, ()> {
    HOST_CALLS.lock().unwrap_or_else(|p| p.into_inner())
}

/// The chips the loaded CUPTI has metrics for (`cuptiProfilerHostGetSupportedChips`), for example `GH100`.
pub fn supported_chips() -> crate::Result<Vec<String>> {
    let api = Api::load(Needs::Metrics)?;
    Ok(chips(api)?)
}

fn chips(api: Api) -> Result<Vec<String>, ProfilingError> {
    let f = sym!(api, cuptiProfilerHostGetSupportedChips)?;
    let mut p = params!(CUpti_Profiler_Host_GetSupportedChips_Params, ppChipNames);
    let _lock = host_calls();
    // SAFETY: a parameter struct of the header's layout with its size set; CUPTI fills the count and a pointer
    // to its own table of names.
    check("cuptiProfilerHostGetSupportedChips", unsafe { f(&mut p) })?;
    // SAFETY: on success `ppChipNames` points at `numChips` NUL-terminated names owned by CUPTI.
    Ok(unsafe { c_strings(p.ppChipNames, p.numChips) })
}

/// Copies `n` C strings out of a vendor table (null entries are skipped).
///
/// # Safety
/// `table` is null (with any `n`) or points at `n` pointers, each null or a NUL-terminated string.
pub(crate) unsafe fn c_strings(table: *const *const c_char, n: usize) -> Vec<String> {
    if table.is_null() {
        return Vec::new();
    }
    (0..n)
        .filter_map(|i| {
            // SAFETY: the caller's contract: `i < n` entries.
            let p = unsafe { *table.add(i) };
            // SAFETY: each non-null entry is a NUL-terminated string.
            (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
        })
        .collect()
}

/// A string CUPTI handed out, or empty.
///
/// # Safety
/// `p` is null or a NUL-terminated string.
unsafe fn c_string(p: *const c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        // SAFETY: the caller's contract.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

/// What CUPTI says about one base metric.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct MetricInfo {
    /// The base name (`dram__bytes_read`); a collectable name adds a submetric (`.sum`, `.avg.per_second`, ...).
    pub name: String,
    /// CUPTI's description.
    pub description: String,
    /// The hardware unit that counts it (`dram`, `sm`, ...).
    pub hw_unit: String,
    /// The unit of its values (`byte`, `nanosecond`, `percent`, ...).
    pub unit: String,
    /// Counter, ratio or throughput.
    pub kind: MetricKind,
    /// The methods that can collect it on this chip.
    #[cfg_attr(feature = "serde", serde(serialize_with = "methods_names"))]
    pub methods: Methods,
}

#[cfg(feature = "serde")]
fn methods_names<S: serde::Serializer>(m: &Methods, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&m.names())
}

/// A profiler host object (`CUpti_Profiler_Host_Object`) for one chip and method: lists metrics, builds
/// configurations and evaluates counter data. Deinitialised on drop.
///
/// `Send` (the object is plain host memory CUPTI keeps for it), not `Sync`: calls on one object are not documented
/// as safe from several threads at once.
pub struct Host {
    api: Api,
    obj: *mut sys::CUpti_Profiler_Host_Object,
    chip: String,
    method: Method,
    // What the object was initialised with, kept at the same address until it is deinitialised: the header does
    // not say that CUPTI copies them, and PM sampling evaluated through an object whose availability image was
    // freed crashed inside libnvperf_host.
    _c_chip: CString,
    _availability: Option<Box<[u8]>>,
}

// SAFETY: the host object is host memory owned by this value and used by one thread at a time (not Sync).
unsafe impl Send for Host {}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host")
            .field("chip", &self.chip)
            .field("method", &self.method)
            .finish_non_exhaustive()
    }
}

impl Host {
    /// A host object for `chip` (a name of [`supported_chips`]) and `method`.
    pub fn new(chip: &str, method: Method) -> crate::Result<Host> {
        Host::with_availability(chip, method, None)
    }

    /// A host object that also knows which counters the device can give now (a counter-availability image from
    /// the device, which lets CUPTI schedule metrics around counters in use).
    pub fn with_availability(
        chip: &str,
        method: Method,
        availability: Option<&[u8]>,
    ) -> crate::Result<Host> {
        let api = Api::load(Needs::Metrics)?;
        Ok(Host::create(api, chip, method, availability)?)
    }

    pub(crate) fn create(
        api: Api,
        chip: &str,
        method: Method,
        availability: Option<&[u8]>,
    ) -> Result<Host, ProfilingError> {
        let f = sym!(api, cuptiProfilerHostInitialize)?;
        let c_chip = CString::new(chip).map_err(|_| ProfilingError::NulInName(chip.to_string()))?;
        let availability: Option<Box<[u8]>> = availability.map(Box::from);
        let mut p = params!(CUpti_Profiler_Host_Initialize_Params, pHostObject);
        p.profilerType = method.profiler_type();
        p.pChipName = c_chip.as_ptr();
        p.pCounterAvailabilityImage = availability.as_deref().map_or(ptr::null(), <[u8]>::as_ptr);
        let code = {
            let _lock = host_calls();
            // SAFETY: the chip name and the availability image are owned by the returned `Host` (heap memory that
            // does not move) and outlive the object, which is deinitialised in its `Drop` before they are freed.
            unsafe { f(&mut p) }
        };
        if code == crate::sys::cupti::CUPTI_ERROR_INVALID_CHIP_NAME {
            return Err(ProfilingError::UnknownChip {
                chip: chip.to_string(),
                known: chips(api).unwrap_or_default(),
            });
        }
        check("cuptiProfilerHostInitialize", code)?;
        if p.pHostObject.is_null() {
            return Err(ProfilingError::State(
                "cuptiProfilerHostInitialize returned no host object",
            ));
        }
        Ok(Host {
            api,
            obj: p.pHostObject,
            chip: chip.to_string(),
            method,
            _c_chip: c_chip,
            _availability: availability,
        })
    }

    /// The chip.
    pub fn chip(&self) -> &str {
        &self.chip
    }

    /// The method.
    pub fn method(&self) -> Method {
        self.method
    }

    /// The base metrics of one kind (`cuptiProfilerHostGetBaseMetrics`).
    pub fn base_metrics(&self, kind: MetricKind) -> Result<Vec<String>, ProfilingError> {
        let f = sym!(self.api, cuptiProfilerHostGetBaseMetrics)?;
        let mut p = params!(CUpti_Profiler_Host_GetBaseMetrics_Params, numMetrics);
        p.pHostObject = self.obj;
        p.metricType = kind.code();
        let _lock = host_calls();
        // SAFETY: a live host object; CUPTI fills a count and a pointer to its own table.
        check("cuptiProfilerHostGetBaseMetrics", unsafe { f(&mut p) })?;
        // SAFETY: on success the table holds `numMetrics` names owned by the host object.
        Ok(unsafe { c_strings(p.ppMetricNames.cast_const(), p.numMetrics) })
    }

    /// The suffixes a base metric takes (`.sum`, `.avg.per_second`, `.pct`, ...), with their leading dot.
    pub fn submetrics(&self, base: &str, kind: MetricKind) -> Result<Vec<String>, ProfilingError> {
        let f = sym!(self.api, cuptiProfilerHostGetSubMetrics)?;
        let c = CString::new(base).map_err(|_| ProfilingError::NulInName(base.to_string()))?;
        let mut p = params!(CUpti_Profiler_Host_GetSubMetrics_Params, ppSubMetrics);
        p.pHostObject = self.obj;
        p.metricType = kind.code();
        p.pMetricName = c.as_ptr();
        let _lock = host_calls();
        // SAFETY: a live host object and a NUL-terminated name that outlives the call.
        check("cuptiProfilerHostGetSubMetrics", unsafe { f(&mut p) })?;
        // SAFETY: on success the table holds `numOfSubmetrics` strings owned by the host object.
        Ok(unsafe { c_strings(p.ppSubMetrics.cast_const(), p.numOfSubmetrics) })
    }

    /// Description, units and kind of a metric (base or full name).
    pub fn properties(&self, name: &str) -> Result<MetricInfo, ProfilingError> {
        let f = sym!(self.api, cuptiProfilerHostGetMetricProperties)?;
        let c = CString::new(name).map_err(|_| ProfilingError::NulInName(name.to_string()))?;
        let mut p = params!(CUpti_Profiler_Host_GetMetricProperties_Params, metricType);
        p.pHostObject = self.obj;
        p.pMetricName = c.as_ptr();
        let _lock = host_calls();
        // SAFETY: a live host object and a NUL-terminated name that outlives the call.
        check("cuptiProfilerHostGetMetricProperties", unsafe { f(&mut p) })?;
        Ok(MetricInfo {
            name: name.to_string(),
            // SAFETY: on success each is null or a string owned by the host object.
            description: unsafe { c_string(p.pDescription) },
            // SAFETY: as above.
            hw_unit: unsafe { c_string(p.pHwUnit) },
            // SAFETY: as above.
            unit: unsafe { c_string(p.pDimUnit) },
            kind: MetricKind::from_code(p.metricType),
            methods: Methods::of(self.method),
        })
    }

    /// Evaluates `metrics` for range (or sample) `index` of a counter-data image, into `out` (one value per metric).
    ///
    /// # Safety
    /// `image` must be a counter-data image CUPTI wrote (a decoded range-profiler or PM-sampling image, or a copy of
    /// one): CUPTI parses it without checking it against its length.
    pub unsafe fn evaluate_into(
        &self,
        image: &[u8],
        index: usize,
        metrics: &MetricNames,
        out: &mut [f64],
    ) -> Result<(), ProfilingError> {
        if out.len() != metrics.len() {
            return Err(ProfilingError::State(
                "one output value per metric is needed",
            ));
        }
        let f = sym!(self.api, cuptiProfilerHostEvaluateToGpuValues)?;
        let mut ptrs = metrics.pointers();
        let mut p = params!(
            CUpti_Profiler_Host_EvaluateToGpuValues_Params,
            pMetricValues
        );
        p.pHostObject = self.obj;
        p.pCounterDataImage = image.as_ptr();
        p.counterDataImageSize = image.len();
        p.rangeIndex = index;
        p.ppMetricNames = ptrs.as_mut_ptr();
        p.numMetrics = ptrs.len();
        p.pMetricValues = out.as_mut_ptr();
        let _lock = host_calls();
        // SAFETY: a live host object; the names and `out` (one value per name) outlive the call; the image is
        // CUPTI's own (the caller's contract).
        check("cuptiProfilerHostEvaluateToGpuValues", unsafe { f(&mut p) })
    }

    /// [`evaluate_into`](Self::evaluate_into) into a new vector.
    ///
    /// # Safety
    /// As [`evaluate_into`](Self::evaluate_into).
    pub unsafe fn evaluate(
        &self,
        image: &[u8],
        index: usize,
        metrics: &MetricNames,
    ) -> Result<Vec<f64>, ProfilingError> {
        let mut out = vec![f64::NAN; metrics.len()];
        // SAFETY: forwarded.
        unsafe { self.evaluate_into(image, index, metrics, &mut out) }?;
        Ok(out)
    }

    /// Adds `metrics` to the host object's configuration. Evaluation goes through a host object configured so,
    /// as NVIDIA's samples do: evaluating derived metrics on an unconfigured one crashed inside CUPTI (H100).
    pub(crate) fn add_metrics(&self, metrics: &MetricNames) -> Result<(), ProfilingError> {
        let f = sym!(self.api, cuptiProfilerHostConfigAddMetrics)?;
        let mut ptrs = metrics.pointers();
        let mut p = params!(CUpti_Profiler_Host_ConfigAddMetrics_Params, numMetrics);
        p.pHostObject = self.obj;
        p.ppMetricNames = ptrs.as_mut_ptr();
        p.numMetrics = ptrs.len();
        let _lock = host_calls();
        // SAFETY: a live host object; the names outlive the call.
        check("cuptiProfilerHostConfigAddMetrics", unsafe { f(&mut p) })
    }

    fn config_bytes(&self) -> Result<Vec<u8>, ProfilingError> {
        let size_f = sym!(self.api, cuptiProfilerHostGetConfigImageSize)?;
        let image_f = sym!(self.api, cuptiProfilerHostGetConfigImage)?;
        let mut s = params!(
            CUpti_Profiler_Host_GetConfigImageSize_Params,
            configImageSize
        );
        s.pHostObject = self.obj;
        let _lock = host_calls();
        // SAFETY: a live host object; CUPTI writes the size.
        check("cuptiProfilerHostGetConfigImageSize", unsafe {
            size_f(&mut s)
        })?;
        let mut bytes = vec![0u8; s.configImageSize];
        let mut p = params!(CUpti_Profiler_Host_GetConfigImage_Params, pConfigImage);
        p.pHostObject = self.obj;
        p.configImageSize = bytes.len();
        p.pConfigImage = bytes.as_mut_ptr();
        // SAFETY: the buffer holds the size CUPTI asked for.
        check("cuptiProfilerHostGetConfigImage", unsafe {
            image_f(&mut p)
        })?;
        Ok(bytes)
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        if let Ok(f) = sym!(self.api, cuptiProfilerHostDeinitialize) {
            let mut p = params!(CUpti_Profiler_Host_Deinitialize_Params, pHostObject);
            p.pHostObject = self.obj;
            let _lock = host_calls();
            // SAFETY: the object was made by cuptiProfilerHostInitialize and is deinitialised once, here.
            let _ = unsafe { f(&mut p) };
        }
    }
}

/// Metric names as CUPTI takes them: checked for NUL bytes, kept as C strings.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MetricNames {
    names: Vec<String>,
    c: Vec<CString>,
}

impl MetricNames {
    /// The names, unchecked against any catalogue (only for NUL bytes and emptiness).
    pub fn new<I, S>(names: I) -> Result<MetricNames, ProfilingError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut out = MetricNames::default();
        for n in names {
            let n = n.as_ref();
            let c = CString::new(n).map_err(|_| ProfilingError::NulInName(n.to_string()))?;
            out.names.push(n.to_string());
            out.c.push(c);
        }
        if out.names.is_empty() {
            return Err(ProfilingError::NoMetrics);
        }
        Ok(out)
    }

    /// The names.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// How many.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// True when there are none (never, for a value made by [`new`](Self::new)).
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// Pointers to the C strings, valid while `self` is.
    pub(crate) fn pointers(&self) -> Vec<*const c_char> {
        self.c.iter().map(|c| c.as_ptr()).collect()
    }
}

/// A configuration image: which counters to program, built by the host for a chip and method.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigImage {
    bytes: Vec<u8>,
    passes: usize,
    metrics: MetricNames,
}

impl ConfigImage {
    /// Builds the image for `metrics` (`cuptiProfilerHostConfigAddMetrics`, `GetConfigImage`,
    /// `GetNumOfPasses`). `availability` is a counter-availability image of the device, where there is one.
    pub fn build(
        chip: &str,
        method: Method,
        availability: Option<&[u8]>,
        metrics: &MetricNames,
    ) -> crate::Result<ConfigImage> {
        let api = Api::load(Needs::Metrics)?;
        Ok(ConfigImage::create(
            api,
            chip,
            method,
            availability,
            metrics,
        )?)
    }

    pub(crate) fn create(
        api: Api,
        chip: &str,
        method: Method,
        availability: Option<&[u8]>,
        metrics: &MetricNames,
    ) -> Result<ConfigImage, ProfilingError> {
        let host = Host::create(api, chip, method, availability)?;
        host.add_metrics(metrics)?;
        let bytes = host.config_bytes()?;
        let f = sym!(api, cuptiProfilerHostGetNumOfPasses)?;
        let mut p = params!(CUpti_Profiler_Host_GetNumOfPasses_Params, numOfPasses);
        let mut scratch = bytes.clone();
        p.configImageSize = scratch.len();
        p.pConfigImage = scratch.as_mut_ptr();
        let _lock = host_calls();
        // SAFETY: an image CUPTI just built, in a buffer of its size.
        check("cuptiProfilerHostGetNumOfPasses", unsafe { f(&mut p) })?;
        Ok(ConfigImage {
            bytes,
            passes: p.numOfPasses,
            metrics: metrics.clone(),
        })
    }

    /// The image.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Passes over the workload it needs (1 for metrics that fit the hardware at once).
    pub fn passes(&self) -> usize {
        self.passes
    }

    /// The metrics it collects.
    pub fn metrics(&self) -> &MetricNames {
        &self.metrics
    }
}

/// Every base metric of a chip, with its properties and the methods that collect it; checks full names
/// against it (unknown names get close suggestions).
///
/// `Send`, not `Sync` (it keeps a host object per method for submetric lookups).
#[derive(Debug)]
pub struct Catalog {
    chip: String,
    metrics: Vec<MetricInfo>,
    index: HashMap<String, usize>,
    hosts: Vec<Host>,
}

impl Catalog {
    /// The catalogue of a named chip (`GH100`, `GA100`, ...).
    pub fn for_chip(chip: &str) -> crate::Result<Catalog> {
        let api = Api::load(Needs::Metrics)?;
        Ok(Catalog::create(api, chip)?)
    }

    /// The catalogue of CUDA device `index` (its chip, from `cuptiDeviceGetChipName`; needs the driver).
    pub fn for_device(index: usize) -> crate::Result<Catalog> {
        let chip = super::chip_name(index)?;
        Catalog::for_chip(&chip)
    }

    pub(crate) fn create(api: Api, chip: &str) -> Result<Catalog, ProfilingError> {
        let mut metrics: Vec<MetricInfo> = Vec::new();
        let mut index: HashMap<String, usize> = HashMap::new();
        let mut hosts = Vec::new();
        for method in [Method::RangeProfiler, Method::PmSampling] {
            let host = match Host::create(api, chip, method, None) {
                Ok(h) => h,
                // A chip one method does not know (GV100 has no PM sampling): the other may.
                Err(ProfilingError::Vendor { .. }) if !hosts.is_empty() => continue,
                Err(e) => return Err(e),
            };
            for kind in MetricKind::ALL {
                for name in host.base_metrics(kind)? {
                    if let Some(&i) = index.get(&name) {
                        metrics[i].methods |= Methods::of(method);
                        continue;
                    }
                    let mut info = host.properties(&name).unwrap_or_else(|_| MetricInfo {
                        name: name.clone(),
                        description: String::new(),
                        hw_unit: String::new(),
                        unit: String::new(),
                        kind,
                        methods: Methods::of(method),
                    });
                    info.kind = kind;
                    index.insert(name, metrics.len());
                    metrics.push(info);
                }
            }
            hosts.push(host);
        }
        if metrics.is_empty() {
            return Err(ProfilingError::EmptyCatalog {
                chip: chip.to_string(),
            });
        }
        let mut order: Vec<usize> = (0..metrics.len()).collect();
        order.sort_by(|&a, &b| metrics[a].name.cmp(&metrics[b].name));
        let metrics: Vec<MetricInfo> = order.into_iter().map(|i| metrics[i].clone()).collect();
        let index = metrics
            .iter()
            .enumerate()
            .map(|(i, m)| (m.name.clone(), i))
            .collect();
        Ok(Catalog {
            chip: chip.to_string(),
            metrics,
            index,
            hosts,
        })
    }

    /// The chip.
    pub fn chip(&self) -> &str {
        &self.chip
    }

    /// Every base metric, sorted by name.
    pub fn metrics(&self) -> &[MetricInfo] {
        &self.metrics
    }

    /// One base metric.
    pub fn get(&self, base: &str) -> Option<&MetricInfo> {
        self.index.get(base).map(|&i| &self.metrics[i])
    }

    /// The metrics a method collects (all, for `None`) whose name or description contains `text` (any case).
    pub fn filter<'a>(
        &'a self,
        method: Option<Method>,
        text: &'a str,
    ) -> impl Iterator<Item = &'a MetricInfo> + 'a {
        let needle = text.to_lowercase();
        self.metrics.iter().filter(move |m| {
            method.is_none_or(|k| m.methods.contains(Methods::of(k)))
                && (needle.is_empty()
                    || m.name.to_lowercase().contains(&needle)
                    || m.description.to_lowercase().contains(&needle))
        })
    }

    /// The suffixes a base metric takes for a method.
    pub fn submetrics(&self, base: &str, method: Method) -> Result<Vec<String>, ProfilingError> {
        let info = self.get(base).ok_or_else(|| self.unknown(base))?;
        let host = self
            .hosts
            .iter()
            .find(|h| h.method == method)
            .ok_or_else(|| self.not_for(base, method, info.methods))?;
        host.submetrics(base, info.kind)
    }

    /// Checks a full metric name (`dram__bytes_read.sum`) for a method: the base exists on the chip, the method
    /// collects it, and the suffix is one the base takes.
    pub fn resolve(&self, name: &str, method: Method) -> Result<String, ProfilingError> {
        let parsed = MetricName::parse(name, |b| self.index.contains_key(b));
        let Some((base, suffix)) = parsed.base_and_suffix() else {
            return Err(self.unknown(name));
        };
        let info = &self.metrics[self.index[base]];
        if !info.methods.contains(Methods::of(method)) {
            return Err(self.not_for(name, method, info.methods));
        }
        let valid = self.submetrics(base, method)?;
        if suffix.is_empty() || !valid.iter().any(|v| v == suffix) {
            return Err(ProfilingError::BadSubmetric {
                name: name.to_string(),
                base: base.to_string(),
                valid,
            });
        }
        Ok(name.to_string())
    }

    /// [`resolve`](Self::resolve) for each name, as [`MetricNames`].
    pub fn resolve_all<S: AsRef<str>>(
        &self,
        names: &[S],
        method: Method,
    ) -> Result<MetricNames, ProfilingError> {
        let mut checked = Vec::with_capacity(names.len());
        for n in names {
            checked.push(self.resolve(n.as_ref(), method)?);
        }
        MetricNames::new(checked)
    }

    fn unknown(&self, name: &str) -> ProfilingError {
        ProfilingError::UnknownMetric {
            name: name.to_string(),
            chip: self.chip.clone(),
            close: metric::close_names(name, self.metrics.iter().map(|m| m.name.as_str()), 5),
        }
    }

    fn not_for(&self, name: &str, method: Method, methods: Methods) -> ProfilingError {
        let other = match method {
            Method::RangeProfiler => Method::PmSampling,
            Method::PmSampling => Method::RangeProfiler,
        };
        ProfilingError::NotSupportedByMethod {
            name: name.to_string(),
            method,
            chip: self.chip.clone(),
            other: methods.contains(Methods::of(other)).then_some(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_strings_skip_nulls_and_accept_an_empty_table() {
        let a = CString::new("GH100").unwrap();
        let table = [a.as_ptr(), ptr::null()];
        // SAFETY: two entries, one a string, one null.
        let strings = unsafe { c_strings(table.as_ptr(), 2) };
        assert_eq!(strings, vec!["GH100".to_string()]);
        // SAFETY: a null table.
        assert!(unsafe { c_strings(ptr::null(), 5) }.is_empty());
    }

    #[test]
    fn metric_names_refuse_nul_and_emptiness() {
        assert_eq!(
            MetricNames::new(Vec::<String>::new()),
            Err(ProfilingError::NoMetrics)
        );
        assert!(matches!(
            MetricNames::new(["a\0b"]),
            Err(ProfilingError::NulInName(_))
        ));
        let m = MetricNames::new(["x.sum", "y.avg"]).unwrap();
        assert_eq!(m.len(), 2);
        assert_eq!(m.pointers().len(), 2);
    }

    #[test]
    fn methods_print_their_names() {
        assert_eq!(
            (Methods::RANGE_PROFILER | Methods::PM_SAMPLING).names(),
            "range,pm"
        );
        assert_eq!(Methods::of(Method::PmSampling).names(), "pm");
    }

    fn assert_send<T: Send>() {}

    #[test]
    fn hosts_and_catalogues_move_between_threads() {
        assert_send::<Host>();
        assert_send::<Catalog>();
    }
}
