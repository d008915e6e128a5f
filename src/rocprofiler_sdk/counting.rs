//! Hardware counters: what an agent offers, counter configurations, the dispatch counting service (counters of
//! each kernel, into a buffer) and the device counting service (counters of a whole GPU, sampled on demand), which
//! implements the crate's [`DeviceCounters`].

use std::collections::HashMap;
use std::ffi::{CStr, c_void};
use std::time::Duration;

use super::agent::Agent;
use super::library::sym;
use super::{Context, SdkError, SdkLibrary, check};
use crate::counters::{
    CounterDevice, CounterInfo, DeviceCounters, DeviceSample, ReadStatus, SampleClock,
};
use crate::sys::rocprofiler_sdk as sys;

/// A counter an agent offers.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Counter {
    /// The SDK's counter id.
    pub id: u64,
    /// Its name (`SQ_WAVES`, `GRBM_COUNT`).
    pub name: String,
    /// Its description.
    pub description: String,
    /// The hardware block (empty for a derived counter).
    pub block: String,
    /// The expression of a derived counter (empty for a hardware one).
    pub expression: String,
}

fn text(p: *const std::ffi::c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: the SDK's NUL-terminated strings, which it keeps for the process.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

unsafe extern "C" fn collect_ids(
    _agent: sys::rocprofiler_agent_id_t,
    counters: *mut sys::rocprofiler_counter_id_t,
    num: usize,
    user_data: *mut c_void,
) -> sys::rocprofiler_status_t {
    crate::delivery::vendor_callback(sys::ROCPROFILER_STATUS_ERROR, || {
        if user_data.is_null() || (counters.is_null() && num > 0) {
            return sys::ROCPROFILER_STATUS_ERROR_INVALID_ARGUMENT;
        }
        // SAFETY: `user_data` is the Vec `counters` passes, alive and unborrowed during the call.
        let out = unsafe { &mut *user_data.cast::<Vec<u64>>() };
        // SAFETY: `num` ids at `counters`, valid for the call.
        let ids = unsafe { std::slice::from_raw_parts(counters, num) };
        out.extend(ids.iter().map(|c| c.handle));
        sys::ROCPROFILER_STATUS_SUCCESS
    })
}

/// The counters agent `agent` offers (`rocprofiler_iterate_agent_supported_counters` and
/// `rocprofiler_query_counter_info`).
pub fn counters(lib: &SdkLibrary, agent: u64) -> crate::Result<Vec<Counter>> {
    let iterate = sym(
        &lib.t.rocprofiler_iterate_agent_supported_counters,
        "rocprofiler_iterate_agent_supported_counters",
    )?;
    let info = sym(
        &lib.t.rocprofiler_query_counter_info,
        "rocprofiler_query_counter_info",
    )?;
    let mut ids: Vec<u64> = Vec::new();
    // SAFETY: `collect_ids` appends to the Vec behind `user_data`, which outlives the call.
    check("rocprofiler_iterate_agent_supported_counters", unsafe {
        iterate(
            sys::rocprofiler_agent_id_t { handle: agent },
            Some(collect_ids),
            (&mut ids as *mut Vec<u64>).cast(),
        )
    })?;
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        let mut v0 = sys::rocprofiler_counter_info_v0_t::default();
        // SAFETY: a version-0 info struct to fill, of the size that version has.
        check("rocprofiler_query_counter_info", unsafe {
            info(
                sys::rocprofiler_counter_id_t { handle: id },
                sys::ROCPROFILER_COUNTER_INFO_VERSION_0,
                (&mut v0 as *mut sys::rocprofiler_counter_info_v0_t).cast(),
            )
        })?;
        out.push(Counter {
            id,
            name: text(v0.name),
            description: text(v0.description),
            block: text(v0.block),
            expression: text(v0.expression),
        });
    }
    Ok(out)
}

/// Names of `known` closest to `name`, best first: the same prefix before the first `_`, or a small edit distance.
pub(crate) fn close_names(name: &str, known: &[Counter]) -> Vec<String> {
    let upper = name.to_ascii_uppercase();
    let mut scored: Vec<(usize, &str)> = known
        .iter()
        .map(|c| {
            (
                distance(&upper, &c.name.to_ascii_uppercase()),
                c.name.as_str(),
            )
        })
        .filter(|(d, n)| {
            *d <= 3.max(upper.len() / 3)
                || n.to_ascii_uppercase()
                    .starts_with(upper.split('_').next().unwrap_or(""))
        })
        .collect();
    scored.sort();
    scored.dedup_by(|a, b| a.1 == b.1);
    scored
        .into_iter()
        .take(5)
        .map(|(_, n)| n.to_string())
        .collect()
}

/// Levenshtein distance.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

/// Resolves counter names of an agent to ids; an unknown name is [`SdkError::UnknownCounter`] with the close ones.
pub(crate) fn resolve(
    lib: &SdkLibrary,
    agent: &Agent,
    names: &[&str],
) -> crate::Result<Vec<Counter>> {
    if names.is_empty() {
        return Err(SdkError::EmptyList("counter names").into());
    }
    let known = counters(lib, agent.id)?;
    names
        .iter()
        .map(|name| {
            known
                .iter()
                .find(|c| c.name == *name)
                .cloned()
                .ok_or_else(|| {
                    SdkError::UnknownCounter {
                        name: name.to_string(),
                        agent: format!("{} (id {})", agent.name, agent.id),
                        close: close_names(name, &known),
                    }
                    .into()
                })
        })
        .collect()
}

/// A counter configuration of one agent (`rocprofiler_create_counter_config`), destroyed on drop.
#[derive(Debug)]
pub struct CounterConfig {
    lib: &'static SdkLibrary,
    id: u64,
    agent: u64,
    counters: Vec<Counter>,
}

impl CounterConfig {
    /// A configuration of `names` on `agent`. An unknown name is [`SdkError::UnknownCounter`], listing the
    /// agent's counters closest to it.
    pub fn new(
        lib: &'static SdkLibrary,
        agent: &Agent,
        names: &[&str],
    ) -> crate::Result<CounterConfig> {
        let counters = resolve(lib, agent, names)?;
        let f = sym(
            &lib.t.rocprofiler_create_counter_config,
            "rocprofiler_create_counter_config",
        )?;
        let mut ids: Vec<sys::rocprofiler_counter_id_t> = counters
            .iter()
            .map(|c| sys::rocprofiler_counter_id_t { handle: c.id })
            .collect();
        let mut id = sys::rocprofiler_counter_config_id_t { handle: 0 };
        // SAFETY: `ids` holds `ids.len()` counter ids for the call; `id` is a valid out-pointer.
        check("rocprofiler_create_counter_config", unsafe {
            f(
                sys::rocprofiler_agent_id_t { handle: agent.id },
                ids.as_mut_ptr(),
                ids.len(),
                &mut id,
            )
        })?;
        Ok(CounterConfig {
            lib,
            id: id.handle,
            agent: agent.id,
            counters,
        })
    }

    /// The agent it counts on.
    pub fn agent_id(&self) -> u64 {
        self.agent
    }

    /// The counters, in the order named.
    pub fn counters(&self) -> &[Counter] {
        &self.counters
    }

    pub(crate) fn raw(&self) -> sys::rocprofiler_counter_config_id_t {
        sys::rocprofiler_counter_config_id_t { handle: self.id }
    }
}

impl Drop for CounterConfig {
    fn drop(&mut self) {
        if let Ok(f) = sym(
            &self.lib.t.rocprofiler_destroy_counter_config,
            "rocprofiler_destroy_counter_config",
        ) {
            // SAFETY: a configuration the SDK created, destroyed once.
            let _ = check("rocprofiler_destroy_counter_config", unsafe {
                f(self.raw())
            });
        }
    }
}

/// The per-agent configurations of a dispatch counting service, kept for the process (the SDK asks for one at
/// every dispatch and cannot be told to stop asking).
pub(crate) struct DispatchConfigs {
    pub(crate) by_agent: HashMap<u64, CounterConfig>,
}

/// The dispatch counting service's callback: the configuration for the dispatch's agent, none for an agent
/// without one.
pub(crate) unsafe extern "C" fn choose_config(
    dispatch: sys::rocprofiler_dispatch_counting_service_data_t,
    config: *mut sys::rocprofiler_counter_config_id_t,
    _user_data: *mut sys::rocprofiler_user_data_t,
    data: *mut c_void,
) {
    crate::delivery::vendor_callback((), || {
        if config.is_null() || data.is_null() {
            return;
        }
        // SAFETY: the leaked `DispatchConfigs` the service was configured with.
        let configs = unsafe { &*data.cast::<DispatchConfigs>() };
        if let Some(c) = configs
            .by_agent
            .get(&dispatch.dispatch_info.agent_id.handle)
        {
            // SAFETY: the SDK's out-pointer for this dispatch.
            unsafe { *config = c.raw() };
        }
    });
}

/// The configuration the device counting service's callback installs when its context starts.
pub(crate) struct DeviceConfig {
    pub(crate) config: CounterConfig,
}

pub(crate) unsafe extern "C" fn set_device_config(
    context: sys::rocprofiler_context_id_t,
    _agent: sys::rocprofiler_agent_id_t,
    set_config: sys::rocprofiler_device_counting_agent_cb_t,
    data: *mut c_void,
) {
    crate::delivery::vendor_callback((), || {
        let Some(set) = set_config else { return };
        if data.is_null() {
            return;
        }
        // SAFETY: the leaked `DeviceConfig` the service was configured with.
        let device = unsafe { &*data.cast::<DeviceConfig>() };
        // SAFETY: the SDK's setter for this context, called during its callback as documented.
        let status = unsafe { set(context, device.config.raw()) };
        if status != sys::ROCPROFILER_STATUS_SUCCESS {
            log::error!("rocprofiler-sdk refused the device counter configuration ({status})");
        }
    });
}

/// Counters of one GPU sampled on demand: the device counting service of a context of its own. Created in the
/// tool's initialisation ([`Setup::device_counting`](super::Setup::device_counting)); [`start`](Self::start) it
/// any time after, then read it through [`DeviceCounters`].
///
/// Each [`read`](DeviceCounters::read) samples once (`rocprofiler_sample_device_counting_service`, synchronous)
/// and reports, per counter, the sum over its instances (the hardware's shader engines, XCCs, ...), for the
/// interval since the previous sample (the first from [`start`](Self::start)). Timestamps are on the SDK's clock.
pub struct DeviceSampler {
    lib: &'static SdkLibrary,
    context: Context,
    device: CounterDevice,
    info: Vec<CounterInfo>,
    /// Counter id → position in `info`.
    index: HashMap<u64, usize>,
    last: Option<u64>,
    records: Vec<sys::rocprofiler_counter_record_t>,
}

// SAFETY: the record vector is scratch space the SDK writes during a sample; the pointer in each record's user
// data is never followed; the rest is plain data and a context handle.
unsafe impl Send for DeviceSampler {}

impl std::fmt::Debug for DeviceSampler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceSampler")
            .field("context", &self.context)
            .field("device", &self.device)
            .field("counters", &self.info)
            .field("started", &self.last.is_some())
            .finish_non_exhaustive()
    }
}

/// Most counter instances one sample may hold; a device offering more is an error, not a reallocation loop.
const MAX_RECORDS: usize = 1 << 20;

impl DeviceSampler {
    pub(crate) fn new(
        lib: &'static SdkLibrary,
        context: Context,
        agent: &Agent,
        counters: &[Counter],
    ) -> DeviceSampler {
        DeviceSampler {
            lib,
            context,
            device: CounterDevice {
                index: u32::try_from(agent.logical_node_type_id).unwrap_or(0),
                name: if agent.product_name.is_empty() {
                    agent.name.clone()
                } else {
                    agent.product_name.clone()
                },
            },
            info: counters
                .iter()
                .map(|c| CounterInfo {
                    name: c.name.clone(),
                    unit: String::new(),
                })
                .collect(),
            index: counters
                .iter()
                .enumerate()
                .map(|(i, c)| (c.id, i))
                .collect(),
            last: None,
            records: Vec::new(),
        }
    }

    /// Starts counting (starts the sampler's context).
    pub fn start(&mut self) -> crate::Result<()> {
        self.context.start()?;
        self.last = Some(self.lib.timestamp()?);
        Ok(())
    }

    /// Stops counting.
    pub fn stop(&mut self) -> crate::Result<()> {
        self.last = None;
        self.context.stop()
    }

    /// Takes one sample now.
    fn sample(&mut self) -> crate::Result<DeviceSample> {
        let Some(start) = self.last else {
            return Err(SdkError::NotStarted.into());
        };
        let f = sym(
            &self.lib.t.rocprofiler_sample_device_counting_service,
            "rocprofiler_sample_device_counting_service",
        )?;
        let query = sym(
            &self.lib.t.rocprofiler_query_record_counter_id,
            "rocprofiler_query_record_counter_id",
        )?;
        let mut capacity = self.records.capacity().max(64 * self.info.len().max(1));
        loop {
            self.records.clear();
            self.records
                .resize(capacity, sys::rocprofiler_counter_record_t::default());
            let mut count = capacity;
            // SAFETY: the context has a device counting service; `records` holds `count` writable records, the
            // count the SDK may fill, and `count` is a valid in/out pointer.
            let status = unsafe {
                f(
                    self.context.raw(),
                    sys::rocprofiler_user_data_t { value: 0 },
                    sys::ROCPROFILER_COUNTER_FLAG_NONE,
                    self.records.as_mut_ptr(),
                    &mut count,
                )
            };
            if status == sys::ROCPROFILER_STATUS_ERROR_OUT_OF_RESOURCES && capacity < MAX_RECORDS {
                capacity *= 4;
                continue;
            }
            check("rocprofiler_sample_device_counting_service", status)?;
            self.records.truncate(count.min(capacity));
            break;
        }
        let end = self.lib.timestamp()?;
        self.last = Some(end);
        let mut values = vec![f64::NAN; self.info.len()];
        for r in &self.records {
            let mut counter = sys::rocprofiler_counter_id_t { handle: 0 };
            // SAFETY: an instance id the SDK wrote; a valid out-pointer.
            if check("rocprofiler_query_record_counter_id", unsafe {
                query(r.id, &mut counter)
            })
            .is_err()
            {
                continue;
            }
            if let Some(&i) = self.index.get(&counter.handle) {
                let v = &mut values[i];
                *v = if v.is_nan() {
                    r.counter_value
                } else {
                    *v + r.counter_value
                };
            }
        }
        Ok(DeviceSample {
            start_ns: start,
            end_ns: end,
            values,
        })
    }
}

impl DeviceCounters for DeviceSampler {
    fn device(&self) -> &CounterDevice {
        &self.device
    }

    fn counters(&self) -> &[CounterInfo] {
        &self.info
    }

    fn clock(&self) -> SampleClock {
        SampleClock::Vendor
    }

    /// Samples once; waits first until `timeout` has passed since the previous sample, so that a loop of reads
    /// samples at that interval.
    fn read(
        &mut self,
        timeout: Duration,
        out: &mut Vec<DeviceSample>,
    ) -> crate::Result<ReadStatus> {
        let Some(last) = self.last else {
            return Err(SdkError::NotStarted.into());
        };
        let now = self.lib.timestamp()?;
        let since = Duration::from_nanos(now.saturating_sub(last));
        if since < timeout {
            std::thread::sleep(timeout - since);
        }
        out.push(self.sample()?);
        Ok(ReadStatus {
            samples: 1,
            dropped: 0,
            gaps: 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counter(name: &str) -> Counter {
        Counter {
            id: 0,
            name: name.into(),
            description: String::new(),
            block: String::new(),
            expression: String::new(),
        }
    }

    #[test]
    fn close_names_find_typos_and_the_same_block() {
        let known: Vec<Counter> = [
            "GRBM_COUNT",
            "GRBM_GUI_ACTIVE",
            "SQ_WAVES",
            "SQ_INSTS_VALU",
            "TCC_HIT",
        ]
        .iter()
        .map(|n| counter(n))
        .collect();
        let close = close_names("GRBM_CONT", &known);
        assert_eq!(close.first().map(String::as_str), Some("GRBM_COUNT"));
        assert!(close.contains(&"GRBM_GUI_ACTIVE".to_string()), "{close:?}");
        assert!(!close.contains(&"TCC_HIT".to_string()), "{close:?}");
        assert_eq!(
            close_names("sq_wave", &known).first().map(String::as_str),
            Some("SQ_WAVES")
        );
        assert!(close_names("ZZZZZZZZZZZZ", &known).is_empty());
    }
}
