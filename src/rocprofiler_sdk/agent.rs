//! Agents: the CPUs and GPUs the SDK sees, with their properties.

use std::ffi::{CStr, c_char, c_void};

use super::library::sym;
use super::{SdkLibrary, check};
use crate::sys::rocprofiler_sdk as sys;

/// What an agent is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub enum AgentKind {
    /// A CPU.
    Cpu,
    /// A GPU.
    Gpu,
    /// A value this crate does not know.
    Other(u32),
}

/// An agent and its properties, owned.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Agent {
    /// The SDK's agent id (records name agents by it).
    pub id: u64,
    /// CPU or GPU.
    pub kind: AgentKind,
    /// The architecture name (`gfx942`) for a GPU, the CPU's name for a CPU.
    pub name: String,
    /// The marketing name (`AMD Instinct MI300X`).
    pub product_name: String,
    /// The vendor.
    pub vendor_name: String,
    /// The model name.
    pub model_name: String,
    /// KFD topology node.
    pub node_id: u32,
    /// Index among agents of all kinds, in the runtime's order.
    pub logical_node_id: i32,
    /// Index among agents of its kind (the HIP device ordinal for a GPU).
    pub logical_node_type_id: i32,
    /// `gfx_target_version` (90402 for gfx942).
    pub gfx_target_version: u32,
    /// Compute units.
    pub cu_count: u32,
    /// SIMDs.
    pub simd_count: u32,
    /// Wavefront width.
    pub wave_front_size: u32,
    /// Accelerator complex dies (XCCs).
    pub num_xcc: u32,
    /// Highest compute engine clock, MHz.
    pub max_engine_clock_mhz: u32,
    /// Local memory bytes.
    pub local_mem_size: u64,
    /// PCI vendor and device id.
    pub pci_id: (u16, u16),
    /// KFD's GPU id.
    pub gpu_id: u64,
    /// DRM render node minor.
    pub drm_render_minor: u32,
    /// The agent's UUID value (0 where none).
    pub uuid: u64,
}

impl Agent {
    /// Whether it is a GPU.
    pub fn is_gpu(&self) -> bool {
        self.kind == AgentKind::Gpu
    }
}

fn text(p: *const c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: the SDK's NUL-terminated strings, valid during the query callback.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

impl Agent {
    pub(crate) fn from_raw(a: &sys::rocprofiler_agent_v0_t) -> Agent {
        Agent {
            id: a.id.handle,
            kind: match a.type_ {
                sys::ROCPROFILER_AGENT_TYPE_CPU => AgentKind::Cpu,
                sys::ROCPROFILER_AGENT_TYPE_GPU => AgentKind::Gpu,
                other => AgentKind::Other(other),
            },
            name: text(a.name),
            product_name: text(a.product_name),
            vendor_name: text(a.vendor_name),
            model_name: text(a.model_name),
            node_id: a.node_id,
            logical_node_id: a.logical_node_id,
            logical_node_type_id: a.logical_node_type_id,
            gfx_target_version: a.gfx_target_version,
            cu_count: a.cu_count,
            simd_count: a.simd_count,
            wave_front_size: a.wave_front_size,
            num_xcc: a.num_xcc,
            max_engine_clock_mhz: a.max_engine_clk_fcompute,
            local_mem_size: a.local_mem_size,
            pci_id: (a.vendor_id, a.device_id),
            gpu_id: a.gpu_id,
            drm_render_minor: a.drm_render_minor,
            // SAFETY: both union members are plain 8 bytes.
            uuid: unsafe { a.uuid.value },
        }
    }
}

unsafe extern "C" fn collect(
    version: sys::rocprofiler_agent_version_t,
    agents: *mut *const c_void,
    num_agents: usize,
    user_data: *mut c_void,
) -> sys::rocprofiler_status_t {
    crate::delivery::vendor_callback(sys::ROCPROFILER_STATUS_ERROR, || {
        if user_data.is_null() || (agents.is_null() && num_agents > 0) {
            return sys::ROCPROFILER_STATUS_ERROR_INVALID_ARGUMENT;
        }
        if version != sys::ROCPROFILER_AGENT_INFO_VERSION_0 {
            return sys::ROCPROFILER_STATUS_ERROR_INCOMPATIBLE_ABI;
        }
        // SAFETY: `user_data` is the Vec `list` passes, alive and not otherwise borrowed during the call.
        let out = unsafe { &mut *user_data.cast::<Vec<Agent>>() };
        for i in 0..num_agents {
            // SAFETY: `num_agents` pointers, each at a version-0 agent the SDK keeps for the call.
            let a = unsafe { (*agents.add(i)).cast::<sys::rocprofiler_agent_v0_t>() };
            // SAFETY: null, or a version-0 agent readable for the call.
            if let Some(a) = unsafe { a.as_ref() } {
                if a.size >= size_of::<sys::rocprofiler_agent_v0_t>() as u64 {
                    out.push(Agent::from_raw(a));
                }
            }
        }
        sys::ROCPROFILER_STATUS_SUCCESS
    })
}

/// Every agent the SDK sees (`rocprofiler_query_available_agents`), in the SDK's order.
pub fn agents(lib: &SdkLibrary) -> crate::Result<Vec<Agent>> {
    let f = sym(
        &lib.t.rocprofiler_query_available_agents,
        "rocprofiler_query_available_agents",
    )?;
    let mut out: Vec<Agent> = Vec::new();
    // SAFETY: `collect` reads version-0 agents into the Vec behind `user_data`, which outlives the call.
    check("rocprofiler_query_available_agents", unsafe {
        f(
            sys::ROCPROFILER_AGENT_INFO_VERSION_0,
            Some(collect),
            size_of::<sys::rocprofiler_agent_v0_t>(),
            (&mut out as *mut Vec<Agent>).cast(),
        )
    })?;
    Ok(out)
}
