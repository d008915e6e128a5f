//! Device profiling: counters of a whole GPU, independent of the processes running on it, polled on demand.

use std::ffi::{CStr, CString, c_char};
use std::marker::PhantomData;

use super::library::sym;
use super::{ProfilerError, Rocprofiler, RocprofilerError, RocprofilerLibrary};
use crate::Result;
use crate::counters::{
    CounterDevice, CounterInfo, DeviceCounters, DeviceSample, ReadStatus, SampleClock,
};
use crate::sys::rocprofiler as sys;

/// The vendor copies each name with `strcpy` into a 64-byte field.
const NAME_FIELD: usize = 64;

/// The value of one requested counter.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum CounterReading {
    /// The counter's value.
    Value(f64),
    /// The GPU does not know the counter; the vendor left its entry unwritten.
    Unknown,
}

/// One counter of a [`DeviceProfilingSession::poll`], owned.
#[derive(Debug, Clone, PartialEq)]
pub struct CounterSample {
    /// The counter's name as requested.
    pub name: String,
    /// Its reading.
    pub reading: CounterReading,
}

/// A device profiling session (`rocprofiler_device_profiling_session_*`): create, start, poll, stop; destroyed
/// on drop (stopped first if running).
pub struct DeviceProfilingSession<'g> {
    lib: &'static RocprofilerLibrary,
    handle: u64,
    names: Vec<CString>,
    started: bool,
    device: CounterDevice,
    counters: Vec<CounterInfo>,
    /// When the last [`DeviceCounters::read`] polled (host `CLOCK_MONOTONIC` ns), or the session started.
    last_poll: u64,
    _rocprofiler: PhantomData<&'g Rocprofiler>,
}

impl std::fmt::Debug for DeviceProfilingSession<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceProfilingSession")
            .field("handle", &self.handle)
            .field("counters", &self.names)
            .field("started", &self.started)
            .finish()
    }
}

impl<'g> DeviceProfilingSession<'g> {
    /// Creates a session for `counters` on GPU `gpu_index`, run from CPU agent `cpu_index`.
    pub fn new<I, S>(
        rocprofiler: &'g Rocprofiler,
        counters: I,
        cpu_index: u32,
        gpu_index: u32,
    ) -> Result<Self>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut names = Vec::new();
        for name in counters {
            let name = name.as_ref();
            if name.len() >= NAME_FIELD {
                return Err(ProfilerError::CounterNameTooLong {
                    name: name.to_string(),
                    len: name.len(),
                }
                .into());
            }
            if name.is_empty() {
                return Err(ProfilerError::EmptyList("characters of a counter name").into());
            }
            names.push(CString::new(name).map_err(|_| ProfilerError::NulInName(name.to_string()))?);
        }
        if names.is_empty() {
            return Err(ProfilerError::EmptyList("counter names").into());
        }
        let cpu = i32::try_from(cpu_index).map_err(|_| ProfilerError::InvalidIndex(cpu_index))?;
        let gpu = i32::try_from(gpu_index).map_err(|_| ProfilerError::InvalidIndex(gpu_index))?;
        let lib = rocprofiler.library();
        let f = sym(
            &lib.t.rocprofiler_device_profiling_session_create,
            "rocprofiler_device_profiling_session_create",
        )?;
        let mut ptrs: Vec<*const c_char> = names.iter().map(|n| n.as_ptr()).collect();
        let mut id = sys::rocprofiler_session_id_t::default();
        // SAFETY: initialised library; `ptrs` holds `names.len()` valid C strings (kept alive by `names` for the
        // session's life); `id` is a valid out-pointer.
        RocprofilerError::check(unsafe {
            f(ptrs.as_mut_ptr(), ptrs.len() as u64, &mut id, cpu, gpu)
        })?;
        let counters = names
            .iter()
            .map(|n| CounterInfo {
                name: n.to_string_lossy().into_owned(),
                unit: String::new(),
            })
            .collect();
        Ok(DeviceProfilingSession {
            lib,
            handle: id.handle,
            names,
            started: false,
            device: CounterDevice {
                index: gpu_index,
                name: format!("GPU agent {gpu_index}"),
            },
            counters,
            last_poll: 0,
            _rocprofiler: PhantomData,
        })
    }

    fn sid(&self) -> sys::rocprofiler_session_id_t {
        sys::rocprofiler_session_id_t {
            handle: self.handle,
        }
    }

    /// Starts counting.
    pub fn start(&mut self) -> Result<()> {
        if self.started {
            return Err(ProfilerError::AlreadyStarted.into());
        }
        let f = sym(
            &self.lib.t.rocprofiler_device_profiling_session_start,
            "rocprofiler_device_profiling_session_start",
        )?;
        // SAFETY: the session exists.
        RocprofilerError::check(unsafe { f(self.sid()) })?;
        self.started = true;
        self.last_poll = crate::counters::host_monotonic_ns();
        Ok(())
    }

    /// Reads every counter now, in the order requested. Counters the GPU does not know come back as
    /// [`CounterReading::Unknown`].
    pub fn poll(&mut self) -> Result<Vec<CounterSample>> {
        if !self.started {
            return Err(ProfilerError::NotStarted.into());
        }
        let f = sym(
            &self.lib.t.rocprofiler_device_profiling_session_poll,
            "rocprofiler_device_profiling_session_poll",
        )?;
        // Zeroed entries: one the vendor leaves unwritten keeps an empty name.
        let mut out = vec![sys::rocprofiler_device_profile_metric_t::default(); self.names.len()];
        // SAFETY: the session exists and was created with `names.len()` counters, so the vendor writes at most
        // that many entries; every name fits its 64-byte field (checked at creation).
        RocprofilerError::check(unsafe { f(self.sid(), out.as_mut_ptr()) })?;
        Ok(self
            .names
            .iter()
            .zip(&out)
            .map(|(name, m)| {
                let field: &[u8; NAME_FIELD] = &m.metric_name.map(|c| c as u8);
                let written = CStr::from_bytes_until_nul(field)
                    .map(|c| !c.is_empty())
                    .unwrap_or(false);
                CounterSample {
                    name: name.to_string_lossy().into_owned(),
                    reading: if written {
                        CounterReading::Value(m.value.value)
                    } else {
                        CounterReading::Unknown
                    },
                }
            })
            .collect())
    }

    /// Stops counting.
    pub fn stop(&mut self) -> Result<()> {
        if !self.started {
            return Err(ProfilerError::NotStarted.into());
        }
        let f = sym(
            &self.lib.t.rocprofiler_device_profiling_session_stop,
            "rocprofiler_device_profiling_session_stop",
        )?;
        // SAFETY: the session exists and is started.
        RocprofilerError::check(unsafe { f(self.sid()) })?;
        self.started = false;
        Ok(())
    }
}

/// Poll-based: each [`read`](DeviceCounters::read) waits until `timeout` has passed since the previous read (or the
/// start), then polls once, giving one sample over that interval on the host's clock. Counters the GPU does not
/// know read `NaN`.
impl DeviceCounters for DeviceProfilingSession<'_> {
    fn device(&self) -> &CounterDevice {
        &self.device
    }

    fn counters(&self) -> &[CounterInfo] {
        &self.counters
    }

    fn clock(&self) -> SampleClock {
        SampleClock::HostMonotonic
    }

    fn read(
        &mut self,
        timeout: std::time::Duration,
        out: &mut Vec<DeviceSample>,
    ) -> Result<ReadStatus> {
        if !self.started {
            return Err(ProfilerError::NotStarted.into());
        }
        let due = self
            .last_poll
            .saturating_add(u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX));
        let now = crate::counters::host_monotonic_ns();
        if due > now {
            std::thread::sleep(std::time::Duration::from_nanos(due - now));
        }
        let readings = self.poll()?;
        let end = crate::counters::host_monotonic_ns();
        out.push(DeviceSample {
            start_ns: self.last_poll,
            end_ns: end,
            values: readings
                .iter()
                .map(|r| match r.reading {
                    CounterReading::Value(v) => v,
                    CounterReading::Unknown => f64::NAN,
                })
                .collect(),
        });
        self.last_poll = end;
        Ok(ReadStatus {
            samples: 1,
            dropped: 0,
            gaps: 0,
        })
    }
}

impl Drop for DeviceProfilingSession<'_> {
    fn drop(&mut self) {
        if self.started {
            let _ = self.stop();
        }
        if let Ok(f) = sym(
            &self.lib.t.rocprofiler_device_profiling_session_destroy,
            "rocprofiler_device_profiling_session_destroy",
        ) {
            // SAFETY: the session exists and is destroyed once, here.
            let _ = unsafe { f(self.sid()) };
        }
    }
}
