//! Device state and control: properties, suspend/resume, warps and lanes, global memory, ELF images, breakpoints.
//!
//! Warp, lane and memory inspection is only reachable through [`Suspended`], the guard that holds a device
//! suspended and resumes it on drop, so these reads never run against a running device. Indices are checked
//! against the device's counts before the driver sees them; a device index against the debugger API's own limit
//! (`CUDBG_MAX_DEVICES`) before any driver call.

use std::ffi::c_char;
use std::time::{Duration, Instant};

use super::api::api_call;
use super::event::ElfImage;
use super::session::EventBatch;
use super::{DebugSession, SessionError};
use crate::coredump::{Dim3, Exception, KernelOrigin, KernelType};
use crate::sys::cudbg as sys;

/// What the debugger API reports about a device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceProperties {
    /// Device index in the debugger API.
    pub index: u32,
    /// Marketing name (`getDeviceName`).
    pub name: String,
    /// Device type, for example `"gh100"` (`getDeviceType`).
    pub device_type: String,
    /// SM type, for example `"sm_90"` (`getSmType`).
    pub sm_type: String,
    /// Number of SMs.
    pub sms: u32,
    /// Warps per SM.
    pub warps_per_sm: u32,
    /// Lanes per warp.
    pub lanes_per_warp: u32,
    /// Registers per lane.
    pub registers_per_lane: u32,
}

/// What the driver knows of a grid (`getGridInfo`): where it runs and what it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GridInfo {
    /// Device index.
    pub dev: u32,
    /// 64-bit grid id.
    pub grid_id: u64,
    /// Host thread (LWP) id of the launching thread.
    pub tid: u32,
    /// Context handle.
    pub context: u64,
    /// Module handle (matches [`ElfImage::module`]).
    pub module: u64,
    /// Function handle.
    pub function: u64,
    /// Device address of the kernel's first instruction.
    pub function_entry: u64,
    /// Grid dimensions.
    pub grid_dim: Dim3,
    /// Block dimensions.
    pub block_dim: Dim3,
    /// Cluster dimensions.
    pub cluster_dim: Dim3,
    /// System or application kernel.
    pub kernel_type: KernelType,
    /// Grid id of the parent grid (device launches).
    pub parent_grid_id: u64,
    /// Host or device launch.
    pub origin: KernelOrigin,
}

/// One valid warp of a suspended device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WarpInfo {
    /// SM index.
    pub sm: u32,
    /// Warp index within the SM.
    pub warp: u32,
    /// Whether the warp is stopped at a breakpoint.
    pub broken: bool,
    /// Bit per valid lane.
    pub valid_lanes: u32,
    /// Bit per active lane.
    pub active_lanes: u32,
    /// 64-bit grid id of the kernel it runs.
    pub grid_id: u64,
    /// Its block index.
    pub block_idx: Dim3,
    /// Virtual PC of its first valid lane.
    pub pc: u64,
}

fn check_index(what: &'static str, index: u32, limit: u32) -> Result<(), SessionError> {
    if index < limit {
        Ok(())
    } else {
        Err(SessionError::OutOfRange { what, index, limit })
    }
}

// The session's suspended-device mask has a bit for every device the debugger API can name.
const _: () = assert!(sys::CUDBG_MAX_DEVICES <= u64::BITS);

/// The bit of device `dev` in the session's suspended-device mask. A device index the debugger API cannot name
/// (`CUDBG_MAX_DEVICES`) is refused, whatever number of devices the driver reports: it has no bit of its own.
fn device_bit(dev: u32) -> Result<u64, SessionError> {
    if dev < sys::CUDBG_MAX_DEVICES {
        Ok(1u64 << dev)
    } else {
        Err(SessionError::DeviceBeyondApi {
            dev,
            max: sys::CUDBG_MAX_DEVICES,
        })
    }
}

fn len_u32(len: usize) -> Result<u32, SessionError> {
    u32::try_from(len).map_err(|_| SessionError::TooLarge(len))
}

impl DebugSession {
    /// Number of devices the debugger API sees.
    pub fn device_count(&self) -> Result<u32, crate::Error> {
        self.live_api()?.num_devices()
    }

    fn check_device(&self, dev: u32) -> Result<(), crate::Error> {
        // The API's limit first: no driver call for an index it cannot name.
        device_bit(dev)?;
        check_index("device", dev, self.device_count()?)?;
        Ok(())
    }

    /// Every device the debugger API sees, with its properties (index order). A process that uses several GPUs
    /// has its kernels, warps and events attributed by these indices.
    pub fn devices(&self) -> Result<Vec<DeviceProperties>, crate::Error> {
        (0..self.device_count()?).map(|d| self.device(d)).collect()
    }

    /// Name, types and counts of device `dev`. An index the debugger API cannot name (`CUDBG_MAX_DEVICES` or more)
    /// is [`SessionError::DeviceBeyondApi`], before any driver call.
    pub fn device(&self, dev: u32) -> Result<DeviceProperties, crate::Error> {
        self.check_device(dev)?;
        let text = |which: &str| -> Result<String, crate::Error> {
            let mut buf = [0 as c_char; 256];
            let len = buf.len() as u32;
            let p = buf.as_mut_ptr();
            // SAFETY: a valid device and a writable buffer of the stated length.
            match which {
                "name" => api_call!(*self.live_api()?, getDeviceName(dev, p, len))?,
                "type" => api_call!(*self.live_api()?, getDeviceType(dev, p, len))?,
                _ => api_call!(*self.live_api()?, getSmType(dev, p, len))?,
            }
            // The driver NUL-terminates within the buffer; the last byte stays 0 in any case.
            buf[buf.len() - 1] = 0;
            let bytes: Vec<u8> = buf
                .iter()
                .take_while(|&&c| c != 0)
                .map(|&c| c as u8)
                .collect();
            Ok(String::from_utf8_lossy(&bytes).into_owned())
        };
        let count = |which: &str| -> Result<u32, crate::Error> {
            let mut n = 0;
            // SAFETY: a valid device and out-pointer.
            match which {
                "sms" => api_call!(*self.live_api()?, getNumSMs(dev, &mut n))?,
                "warps" => api_call!(*self.live_api()?, getNumWarps(dev, &mut n))?,
                "lanes" => api_call!(*self.live_api()?, getNumLanes(dev, &mut n))?,
                _ => api_call!(*self.live_api()?, getNumRegisters(dev, &mut n))?,
            }
            Ok(n)
        };
        Ok(DeviceProperties {
            index: dev,
            name: text("name")?,
            device_type: text("type")?,
            sm_type: text("sm")?,
            sms: count("sms")?,
            warps_per_sm: count("warps")?,
            lanes_per_warp: count("lanes")?,
            registers_per_lane: count("regs")?,
        })
    }

    /// Suspends device `dev` until the guard is dropped or [`Suspended::resume`] is called.
    ///
    /// A device index of `CUDBG_MAX_DEVICES` (64) or more is refused with [`SessionError::DeviceBeyondApi`]
    /// before any driver call.
    pub fn suspend(&self, dev: u32) -> Result<Suspended<'_>, crate::Error> {
        let bit = device_bit(dev)?;
        let props = self.device(dev)?;
        if self.suspended.get() & bit != 0 {
            return Err(SessionError::AlreadySuspended(dev).into());
        }
        // SAFETY: a valid device index.
        api_call!(*self.live_api()?, suspendDevice(dev))?;
        self.suspended.set(self.suspended.get() | bit);
        Ok(Suspended {
            session: self,
            props,
            resumed: false,
        })
    }

    /// The ELF image of a loaded module, by the handle of its load event (relocated: symbol values are device
    /// addresses).
    pub fn elf_image(&self, image: &ElfImage) -> Result<Vec<u8>, crate::Error> {
        self.check_device(image.dev)?;
        let len = usize::try_from(image.size).map_err(|_| SessionError::TooLarge(usize::MAX))?;
        // The size comes from the caller's `ElfImage`: an impossible one is an error, not an abort.
        let mut buf = Vec::new();
        buf.try_reserve_exact(len)
            .map_err(|_| SessionError::TooLarge(len))?;
        buf.resize(len, 0u8);
        // SAFETY: the buffer holds exactly `size` bytes, the size the driver reported for this handle.
        api_call!(
            *self.live_api()?,
            getElfImageByHandle(
                image.dev,
                image.handle,
                sys::CUDBG_ELF_IMAGE_TYPE_RELOCATED,
                buf.as_mut_ptr().cast(),
                image.size
            )
        )?;
        Ok(buf)
    }

    /// Sets a breakpoint at device code address `addr` (for example [`super::KernelReady::function_entry`]).
    ///
    /// Set while a launch is held at its `KernelReady`, it stops that launch's warps in a session that started
    /// the program; in one that attached to a running process, driver 580 applied it from the next launch on
    /// (seen on an H100 and an H200).
    pub fn set_breakpoint(&self, dev: u32, addr: u64) -> Result<(), crate::Error> {
        self.check_device(dev)?;
        // SAFETY: a valid device; the driver validates the address.
        api_call!(*self.live_api()?, setBreakpoint(dev, addr))?;
        self.breakpoints.borrow_mut().insert((dev, addr));
        Ok(())
    }

    /// Removes a breakpoint this session set.
    pub fn unset_breakpoint(&self, dev: u32, addr: u64) -> Result<(), crate::Error> {
        if !self.breakpoints.borrow().contains(&(dev, addr)) {
            return Err(SessionError::NoSuchBreakpoint { dev, addr }.into());
        }
        // SAFETY: an address this session set a breakpoint at on that device.
        api_call!(*self.live_api()?, unsetBreakpoint(dev, addr))?;
        self.breakpoints.borrow_mut().remove(&(dev, addr));
        Ok(())
    }

    /// Breakpoints this session has set, as (device, address).
    pub fn breakpoints(&self) -> Vec<(u32, u64)> {
        self.breakpoints.borrow().iter().copied().collect()
    }

    /// Polls device `dev` until a warp is at a breakpoint or has hit an exception, and returns the device
    /// suspended right there (it is not resumed between the check and the return).
    ///
    /// Events the driver reports meanwhile are handed to `on_events` as a batch, acknowledged when the closure
    /// returns, and the wait goes on. They cannot wait until after the stop: a synchronous event holds the
    /// debuggee until it is acknowledged, and a kernel launched behind it never reaches its breakpoint (with
    /// context push/pop events on, a launch's `ContextPop` follows its `KernelReady`). Events already fetched by
    /// the session go to `on_events` first.
    pub fn wait_for_stop(
        &mut self,
        dev: u32,
        timeout: Duration,
        mut on_events: impl FnMut(EventBatch<'_>),
    ) -> Result<StopWait<'_>, crate::Error> {
        self.check_device(dev)?;
        // A timeout too large for an `Instant` never passes.
        let deadline = Instant::now().checked_add(timeout);
        let props = loop {
            if self.exit_status()?.is_some() {
                return Ok(StopWait::Ended);
            }
            self.settle()?;
            if !self.has_events() {
                self.drain(true)?;
            }
            if self.has_events() {
                // `next_batch` hands out what is pending at once.
                match self.next_batch(Some(Duration::from_secs(1)))? {
                    Some(batch) => on_events(batch),
                    None => return Ok(StopWait::Ended),
                }
                continue;
            }
            let s = self.suspend(dev)?;
            if s.exception_sms()?.iter().any(|&w| w != 0) || s.warps()?.iter().any(|w| w.broken) {
                break s.into_props();
            }
            s.resume()?;
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(StopWait::TimedOut);
            }
            std::thread::sleep(Duration::from_millis(2));
        };
        // The device is still suspended: a new guard for it, borrowing the session for the caller.
        Ok(StopWait::Stopped(Suspended {
            session: self,
            props,
            resumed: false,
        }))
    }
}

/// What [`DebugSession::wait_for_stop`] saw first.
#[derive(Debug)]
#[must_use = "a stopped device stays suspended until the guard is dropped or resumed"]
pub enum StopWait<'s> {
    /// A warp is at a breakpoint or has hit an exception; the device is suspended right there.
    Stopped(Suspended<'s>),
    /// The debuggee ended.
    Ended,
    /// The timeout passed.
    TimedOut,
}

impl<'s> StopWait<'s> {
    /// The suspended device, if a warp stopped.
    pub fn stopped(self) -> Option<Suspended<'s>> {
        match self {
            StopWait::Stopped(s) => Some(s),
            _ => None,
        }
    }
}

/// A suspended device; resumed when dropped. Borrowing the session, it is neither `Send` nor `Sync`.
#[derive(Debug)]
pub struct Suspended<'s> {
    session: &'s DebugSession,
    props: DeviceProperties,
    resumed: bool,
}

impl Suspended<'_> {
    /// The session (for breakpoints and ELF images while the device is held).
    pub fn session(&self) -> &DebugSession {
        self.session
    }

    /// The device's properties.
    pub fn device(&self) -> &DeviceProperties {
        &self.props
    }

    fn dev(&self) -> u32 {
        self.props.index
    }

    /// Gives up the guard without resuming the device (another guard takes it over).
    fn into_props(mut self) -> DeviceProperties {
        self.resumed = true;
        self.props.clone()
    }

    fn check_warp(&self, sm: u32, warp: u32) -> Result<(), SessionError> {
        check_index("sm", sm, self.props.sms)?;
        check_index("warp", warp, self.props.warps_per_sm)
    }

    fn check_lane(&self, sm: u32, warp: u32, lane: u32) -> Result<(), SessionError> {
        self.check_warp(sm, warp)?;
        check_index("lane", lane, self.props.lanes_per_warp)
    }

    /// Bit per valid warp on SM `sm`.
    pub fn valid_warps(&self, sm: u32) -> Result<u64, crate::Error> {
        check_index("sm", sm, self.props.sms)?;
        let mut mask = 0;
        // SAFETY: checked indices, valid out-pointer, device suspended.
        api_call!(
            *self.session.live_api()?,
            readValidWarps(self.dev(), sm, &mut mask)
        )?;
        Ok(mask)
    }

    /// Bit per warp stopped at a breakpoint on SM `sm`.
    pub fn broken_warps(&self, sm: u32) -> Result<u64, crate::Error> {
        check_index("sm", sm, self.props.sms)?;
        let mut mask = 0;
        // SAFETY: checked indices, valid out-pointer, device suspended.
        api_call!(
            *self.session.live_api()?,
            readBrokenWarps(self.dev(), sm, &mut mask)
        )?;
        Ok(mask)
    }

    /// Bit per valid lane of a warp.
    pub fn valid_lanes(&self, sm: u32, warp: u32) -> Result<u32, crate::Error> {
        self.check_warp(sm, warp)?;
        let mut mask = 0;
        // SAFETY: checked indices, valid out-pointer, device suspended.
        api_call!(
            *self.session.live_api()?,
            readValidLanes(self.dev(), sm, warp, &mut mask)
        )?;
        Ok(mask)
    }

    /// Bit per active lane of a warp.
    pub fn active_lanes(&self, sm: u32, warp: u32) -> Result<u32, crate::Error> {
        self.check_warp(sm, warp)?;
        let mut mask = 0;
        // SAFETY: checked indices, valid out-pointer, device suspended.
        api_call!(
            *self.session.live_api()?,
            readActiveLanes(self.dev(), sm, warp, &mut mask)
        )?;
        Ok(mask)
    }

    /// The 64-bit grid id a warp runs.
    pub fn grid_id(&self, sm: u32, warp: u32) -> Result<u64, crate::Error> {
        self.check_warp(sm, warp)?;
        let mut id = 0;
        // SAFETY: checked indices, valid out-pointer, device suspended.
        api_call!(
            *self.session.live_api()?,
            readGridId(self.dev(), sm, warp, &mut id)
        )?;
        Ok(id)
    }

    /// The block index a warp runs.
    pub fn block_idx(&self, sm: u32, warp: u32) -> Result<Dim3, crate::Error> {
        self.check_warp(sm, warp)?;
        let mut d = sys::CuDim3::default();
        // SAFETY: checked indices, valid out-pointer, device suspended.
        api_call!(
            *self.session.live_api()?,
            readBlockIdx(self.dev(), sm, warp, &mut d)
        )?;
        Ok(d.into())
    }

    /// The thread index of a lane.
    pub fn thread_idx(&self, sm: u32, warp: u32, lane: u32) -> Result<Dim3, crate::Error> {
        self.check_lane(sm, warp, lane)?;
        let mut d = sys::CuDim3::default();
        // SAFETY: checked indices, valid out-pointer, device suspended.
        api_call!(
            *self.session.live_api()?,
            readThreadIdx(self.dev(), sm, warp, lane, &mut d)
        )?;
        Ok(d.into())
    }

    /// The virtual PC of a lane (comparable with kernel entry addresses).
    pub fn pc(&self, sm: u32, warp: u32, lane: u32) -> Result<u64, crate::Error> {
        self.check_lane(sm, warp, lane)?;
        let mut pc = 0;
        // SAFETY: checked indices, valid out-pointer, device suspended.
        api_call!(
            *self.session.live_api()?,
            readVirtualPC(self.dev(), sm, warp, lane, &mut pc)
        )?;
        Ok(pc)
    }

    /// The exception a lane hit, [`Exception::None`] if none.
    pub fn lane_exception(&self, sm: u32, warp: u32, lane: u32) -> Result<Exception, crate::Error> {
        self.check_lane(sm, warp, lane)?;
        let mut e: sys::CUDBGException_t = sys::CUDBG_EXCEPTION_NONE;
        // SAFETY: checked indices, valid out-pointer, device suspended.
        api_call!(
            *self.session.live_api()?,
            readLaneException(self.dev(), sm, warp, lane, &mut e)
        )?;
        Ok(Exception::from_raw(e))
    }

    /// Every valid warp of the device.
    pub fn warps(&self) -> Result<Vec<WarpInfo>, crate::Error> {
        let mut out = Vec::new();
        for sm in 0..self.props.sms {
            let valid = self.valid_warps(sm)?;
            if valid == 0 {
                continue;
            }
            let broken = self.broken_warps(sm)?;
            for warp in (0..self.props.warps_per_sm.min(64)).filter(|w| valid & (1 << w) != 0) {
                let valid_lanes = self.valid_lanes(sm, warp)?;
                let first = valid_lanes.trailing_zeros();
                let pc = if valid_lanes == 0 {
                    0
                } else {
                    self.pc(sm, warp, first)?
                };
                out.push(WarpInfo {
                    sm,
                    warp,
                    broken: broken & (1 << warp) != 0,
                    valid_lanes,
                    active_lanes: self.active_lanes(sm, warp)?,
                    grid_id: self.grid_id(sm, warp)?,
                    block_idx: self.block_idx(sm, warp)?,
                    pc,
                });
            }
        }
        Ok(out)
    }

    /// Lanes with an exception, as (sm, warp, lane, exception).
    pub fn exceptions(&self) -> Result<Vec<(u32, u32, u32, Exception)>, crate::Error> {
        let mut out = Vec::new();
        for w in self.warps()? {
            for lane in (0..32).filter(|l| w.valid_lanes & (1 << l) != 0) {
                let e = self.lane_exception(w.sm, w.warp, lane)?;
                if e != Exception::None {
                    out.push((w.sm, w.warp, lane, e));
                }
            }
        }
        Ok(out)
    }

    /// What the driver knows of grid `grid_id` running on this device (for example a grid that
    /// [`warps`](Self::warps) shows and whose launch the session did not see, as after an attach).
    pub fn grid(&self, grid_id: u64) -> Result<GridInfo, crate::Error> {
        let mut g = sys::CUDBGGridInfo::default();
        // SAFETY: a suspended device, a writable grid-info struct of the 13.0 layout.
        api_call!(
            *self.session.live_api()?,
            getGridInfo(self.dev(), grid_id, &mut g)
        )?;
        // Copy fields out of the packed struct by value.
        let (grid_dim, block_dim, cluster_dim) = (g.gridDim, g.blockDim, g.clusterDim);
        Ok(GridInfo {
            dev: g.dev,
            grid_id: g.gridId64,
            tid: g.tid,
            context: g.context,
            module: g.module,
            function: g.function,
            function_entry: g.functionEntry,
            grid_dim: grid_dim.into(),
            block_dim: block_dim.into(),
            cluster_dim: cluster_dim.into(),
            kernel_type: KernelType::from_raw(g.type_),
            parent_grid_id: g.parentGridId,
            origin: KernelOrigin::from_raw(g.origin),
        })
    }

    /// Bit per SM with an exception (`readDeviceExceptionState`), one `u64` per 64 SMs.
    pub fn exception_sms(&self) -> Result<Vec<u64>, crate::Error> {
        let words = self.props.sms.div_ceil(64).max(1);
        let mut mask = vec![0u64; words as usize];
        // SAFETY: the buffer holds `words` u64 values, as the call is told.
        api_call!(
            *self.session.live_api()?,
            readDeviceExceptionState(self.dev(), mask.as_mut_ptr(), words)
        )?;
        Ok(mask)
    }

    /// Reads device global memory at `addr` into `buf`.
    pub fn read_global(&self, addr: u64, buf: &mut [u8]) -> Result<(), crate::Error> {
        let len = len_u32(buf.len())?;
        // SAFETY: the buffer is writable for `len` bytes; the driver validates the device address.
        api_call!(
            *self.session.live_api()?,
            readGlobalMemory(addr, buf.as_mut_ptr().cast(), len)
        )
    }

    /// Writes `data` to device global memory at `addr`.
    pub fn write_global(&self, addr: u64, data: &[u8]) -> Result<(), crate::Error> {
        let len = len_u32(data.len())?;
        // SAFETY: the buffer is readable for `len` bytes; the driver validates the device address.
        api_call!(
            *self.session.live_api()?,
            writeGlobalMemory(addr, data.as_ptr().cast(), len)
        )
    }

    /// Resumes the device now, reporting a failure (dropping the guard does the same but cannot report).
    pub fn resume(mut self) -> Result<(), crate::Error> {
        self.resumed = true;
        self.do_resume()
    }

    fn do_resume(&self) -> Result<(), crate::Error> {
        let dev = self.dev();
        let s = self.session;
        // A guard exists only for a device `suspend` accepted, which has a bit.
        let bit = device_bit(dev)?;
        s.suspended.set(s.suspended.get() & !bit);
        // SAFETY: a device this guard suspended.
        api_call!(*s.live_api()?, resumeDevice(dev))
    }
}

impl Drop for Suspended<'_> {
    fn drop(&mut self) {
        if !self.resumed {
            let _ = self.do_resume();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exceptions_map_both_ways_known_and_unknown() {
        assert_eq!(Exception::from_raw(0), Exception::None);
        assert_eq!(Exception::from_raw(14), Exception::WarpIllegalAddress);
        assert_eq!(Exception::from_raw(10), Exception::DeviceIllegalAddress);
        assert_eq!(Exception::from_raw(u32::MAX), Exception::Unknown);
        assert_eq!(Exception::from_raw(999), Exception::Other(999));
    }

    #[test]
    fn index_checks() {
        assert!(check_index("sm", 131, 132).is_ok());
        let e = check_index("sm", 132, 132).unwrap_err();
        assert!(matches!(
            e,
            SessionError::OutOfRange {
                what: "sm",
                index: 132,
                limit: 132
            }
        ));
        assert!(matches!(len_u32(1 << 33), Err(SessionError::TooLarge(_))));
    }

    #[test]
    fn every_device_the_api_names_has_a_bit_of_its_own() {
        let bits: Vec<u64> = (0..sys::CUDBG_MAX_DEVICES)
            .map(|d| device_bit(d).expect("a device the API names"))
            .collect();
        assert_eq!(bits.iter().fold(0, |all, b| all | b), u64::MAX);
        assert_eq!(bits.iter().map(|b| b.count_ones()).sum::<u32>(), 64);
        for dev in [sys::CUDBG_MAX_DEVICES, 128, u32::MAX] {
            assert!(matches!(
                device_bit(dev),
                Err(SessionError::DeviceBeyondApi { dev: d, max: 64 }) if d == dev
            ));
        }
    }
}
