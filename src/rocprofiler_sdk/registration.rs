//! Registering a Rust tool with the SDK: [`rocprofiler_sdk_tool!`](crate::rocprofiler_sdk_tool) exports
//! `rocprofiler_configure` from a cdylib, [`force_configure`] registers from inside a program. Either way the SDK
//! calls the tool's [`Tool::initialize`] once, with a [`Setup`] (the only place contexts, buffers and services
//! can be configured), and [`Tool::finalize`] at its finalisation, after the crate stopped every context and
//! flushed every buffer the tool created: every record is delivered before `finalize` runs.

use std::ffi::{CString, c_char, c_int, c_void};
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

use super::agent::{self, Agent};
use super::buffer::{self, Buffer, BufferOptions};
use super::callback::{self, CallbackEvent, CallbackState};
use super::counting::{self, CounterConfig, DeviceConfig, DeviceSampler, DispatchConfigs};
use super::library::sym;
use super::record::ApiKind;
use super::tracked;
use super::{Batch, Context, SdkError, SdkLibrary, SdkStatus, check};
use crate::delivery;
use crate::sys::rocprofiler_sdk as sys;

/// A rocprofiler-sdk tool written in Rust.
pub trait Tool: Send + 'static {
    /// The tool's name, as the SDK reports it.
    const NAME: &'static str;

    /// Configures the tool: contexts, buffers and services, through `setup`. Runs once, inside the SDK's tool
    /// initialisation (before the runtimes run any work). An error unregisters the tool; its text is logged, and
    /// [`force_configure`] returns it.
    fn initialize(setup: &mut Setup<'_>) -> crate::Result<Self>
    where
        Self: Sized;

    /// Runs once at the SDK's finalisation, after every context of the tool was stopped and every buffer flushed.
    /// The tool is dropped right after (dropping its buffers destroys them).
    fn finalize(&mut self) {}
}

/// A tool's registration with the SDK, for the process.
struct State {
    tool: Option<Box<dyn Finalize>>,
    finalize_func: sys::rocprofiler_client_finalize_t,
    client: Option<sys::rocprofiler_client_id_t>,
    init_error: Option<String>,
}

// SAFETY: the client id holds a pointer to the tool's name, a leaked string that lives for the process.
unsafe impl Send for State {}

trait Finalize: Send {
    fn finalize(&mut self);
}

impl<T: Tool> Finalize for T {
    fn finalize(&mut self) {
        Tool::finalize(self)
    }
}

static REGISTERED: AtomicBool = AtomicBool::new(false);
static STATE: Mutex<State> = Mutex::new(State {
    tool: None,
    finalize_func: None,
    client: None,
    init_error: None,
});

fn state() -> MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(|p| p.into_inner())
}

/// Whether a tool registered in this process (through either way).
pub fn is_registered() -> bool {
    REGISTERED.load(Ordering::Acquire)
}

/// What `rocprofiler_configure` hands the SDK: the tool's initialise and finalise functions.
struct ConfigureResult(sys::rocprofiler_tool_configure_result_t);
// SAFETY: function pointers and a null tool-data pointer.
unsafe impl Send for ConfigureResult {}
// SAFETY: as above.
unsafe impl Sync for ConfigureResult {}

/// `rocprofiler_configure` for tool `T`: what [`rocprofiler_sdk_tool!`](crate::rocprofiler_sdk_tool) exports and
/// [`force_configure`] hands the SDK. Returns null (the SDK then leaves the tool out) when a tool already
/// registered in this process.
///
/// # Safety
/// Only the SDK calls this, with its own arguments: `client_id` null or valid for the call.
pub unsafe extern "C" fn configure<T: Tool>(
    version: u32,
    runtime_version: *const c_char,
    priority: u32,
    client_id: *mut sys::rocprofiler_client_id_t,
) -> *mut sys::rocprofiler_tool_configure_result_t {
    delivery::vendor_callback(std::ptr::null_mut(), || {
        if REGISTERED.swap(true, Ordering::AcqRel) {
            log::warn!(
                "{}: a rocprofiler-sdk tool is already registered in this process; left out",
                T::NAME
            );
            return std::ptr::null_mut();
        }
        let runtime = if runtime_version.is_null() {
            String::new()
        } else {
            // SAFETY: the SDK's NUL-terminated version string, valid for the call.
            unsafe { std::ffi::CStr::from_ptr(runtime_version) }
                .to_string_lossy()
                .into_owned()
        };
        log::debug!(
            "{}: configured by rocprofiler-sdk {runtime} (version {version}, priority {priority})",
            T::NAME
        );
        // SAFETY: the SDK's client id, valid for the call; the tool names itself there.
        if let Some(client) = unsafe { client_id.as_mut() } {
            static NAMES: Mutex<Vec<CString>> = Mutex::new(Vec::new());
            let name = CString::new(T::NAME.replace('\0', " ")).unwrap_or_default();
            client.name = name.as_ptr();
            // Kept for the process: the SDK holds the pointer.
            NAMES.lock().unwrap_or_else(|p| p.into_inner()).push(name);
            state().client = Some(*client);
        }
        static RESULT: OnceLock<Box<ConfigureResult>> = OnceLock::new();
        let result = RESULT.get_or_init(|| {
            Box::new(ConfigureResult(sys::rocprofiler_tool_configure_result_t {
                size: size_of::<sys::rocprofiler_tool_configure_result_t>(),
                initialize: Some(tool_initialize::<T>),
                finalize: Some(tool_finalize),
                tool_data: std::ptr::null_mut(),
            }))
        });
        (&result.0 as *const sys::rocprofiler_tool_configure_result_t).cast_mut()
    })
}

unsafe extern "C" fn tool_initialize<T: Tool>(
    finalize_func: sys::rocprofiler_client_finalize_t,
    _tool_data: *mut c_void,
) -> c_int {
    delivery::vendor_callback(-1, || {
        state().finalize_func = finalize_func;
        let lib = match SdkLibrary::load() {
            Ok(lib) => lib,
            Err(e) => {
                fail(T::NAME, e.to_string());
                return -1;
            }
        };
        let mut setup = Setup {
            lib,
            _only_here: PhantomData,
        };
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| T::initialize(&mut setup))) {
            Ok(Ok(tool)) => {
                state().tool = Some(Box::new(tool));
                0
            }
            Ok(Err(e)) => {
                fail(T::NAME, e.to_string());
                -1
            }
            Err(payload) => {
                fail(
                    T::NAME,
                    format!("panicked: {}", delivery::panic_message(&*payload)),
                );
                std::mem::forget(payload);
                -1
            }
        }
    })
}

fn fail(name: &str, msg: String) {
    log::error!("{name}: initialize failed: {msg}");
    state().init_error = Some(msg);
}

unsafe extern "C" fn tool_finalize(_tool_data: *mut c_void) {
    delivery::vendor_callback((), finish);
}

/// Stops the tool's contexts, flushes its buffers, then runs and drops the tool.
fn finish() {
    let tool = state().tool.take();
    let (contexts, buffers) = tracked::contexts_and_buffers();
    if let Some(lib) = SdkLibrary::get() {
        for c in contexts {
            let _ = super::context::stop_raw(lib, c);
        }
        for b in buffers {
            if let Err(e) = buffer::flush_raw(lib, b) {
                log::warn!("final flush of rocprofiler-sdk buffer {b}: {e}");
            }
        }
    }
    if let Some(mut tool) = tool {
        if let Err(payload) =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| tool.finalize()))
        {
            log::error!(
                "the tool's finalize panicked: {}",
                delivery::panic_message(&*payload)
            );
            std::mem::forget(payload);
        }
        if let Err(payload) =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(tool)))
        {
            std::mem::forget(payload);
        }
    }
}

/// Registers tool `T` from inside the program (`rocprofiler_force_configure`): the SDK initialises at once and runs
/// `T::initialize` before this returns.
///
/// Must run before the HIP or HSA runtime starts (before the program's first HIP call). A second registration is
/// [`SdkError::AlreadyRegistered`]; registering after the SDK initialised is [`SdkError::TooLate`]; a failed
/// `initialize` is [`SdkError::ToolInitializeFailed`].
pub fn force_configure<T: Tool>(lib: &'static SdkLibrary) -> crate::Result<()> {
    if delivery::in_callback() {
        return Err(SdkError::InsideCallback.into());
    }
    if is_registered() {
        return Err(SdkError::AlreadyRegistered.into());
    }
    if lib.is_initialized()? {
        return Err(SdkError::TooLate.into());
    }
    let f = sym(
        &lib.t.rocprofiler_force_configure,
        "rocprofiler_force_configure",
    )?;
    // SAFETY: `configure::<T>` has the signature the SDK calls, and stays valid for the process.
    let status = unsafe { f(Some(configure::<T>)) };
    match check("rocprofiler_force_configure", status) {
        Ok(()) => {}
        Err(SdkStatus::ConfigurationLocked) => return Err(SdkError::TooLate.into()),
        Err(e) => return Err(e.into()),
    }
    if let Some(msg) = state().init_error.take() {
        return Err(SdkError::ToolInitializeFailed(msg).into());
    }
    if !is_registered() {
        // The SDK did not call the configure function: another tool holds the process.
        return Err(SdkError::AlreadyRegistered.into());
    }
    Ok(())
}

/// Asks the SDK to finalise the registered tool now (the `finalize_func` it handed to `initialize`): contexts stop,
/// buffers flush, [`Tool::finalize`] runs. Without a registered tool, does nothing.
pub fn finalize() -> crate::Result<()> {
    if delivery::in_callback() {
        return Err(SdkError::InsideCallback.into());
    }
    let (f, client) = {
        let st = state();
        (st.finalize_func, st.client)
    };
    if let (Some(f), Some(client)) = (f, client) {
        // SAFETY: the SDK's finalize function for this client, with the client id it gave.
        unsafe { f(client) };
    }
    Ok(())
}

/// Kinds of buffer tracing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TraceKind {
    /// Kernel dispatches, with device start and end.
    KernelDispatch,
    /// Memory copies.
    MemoryCopy,
    /// Memory allocations and frees.
    MemoryAllocation,
    /// Scratch memory events.
    ScratchMemory,
    /// HIP runtime API calls.
    HipRuntimeApi,
    /// HIP compiler API calls (kernel registration and launch configuration).
    HipCompilerApi,
    /// HSA API calls (core and AMD extensions).
    HsaApi,
    /// ROCTx calls, each on its own (core, control, name): a push and its pop are two calls.
    MarkerApi,
    /// ROCTx ranges, one record from each range's start to its end, and marks
    /// ([`Record::MarkerRange`](super::Record::MarkerRange)); their names come with callback tracing
    /// ([`MarkerArgs`](super::MarkerArgs)). SDK 1.0 on; an older SDK refuses it with [`SdkError::UnknownKind`].
    MarkerRanges,
    /// RCCL calls.
    RcclApi,
    /// Correlation id retirements.
    CorrelationIdRetirement,
    /// A raw `rocprofiler_buffer_tracing_kind_t` value.
    Raw(u32),
}

impl TraceKind {
    /// The SDK's kinds for this one.
    pub fn raw_kinds(self) -> Vec<u32> {
        match self {
            TraceKind::KernelDispatch => vec![sys::ROCPROFILER_BUFFER_TRACING_KERNEL_DISPATCH],
            TraceKind::MemoryCopy => vec![sys::ROCPROFILER_BUFFER_TRACING_MEMORY_COPY],
            TraceKind::MemoryAllocation => vec![sys::ROCPROFILER_BUFFER_TRACING_MEMORY_ALLOCATION],
            TraceKind::ScratchMemory => vec![sys::ROCPROFILER_BUFFER_TRACING_SCRATCH_MEMORY],
            TraceKind::HipRuntimeApi => vec![sys::ROCPROFILER_BUFFER_TRACING_HIP_RUNTIME_API],
            TraceKind::HipCompilerApi => vec![sys::ROCPROFILER_BUFFER_TRACING_HIP_COMPILER_API],
            TraceKind::HsaApi => vec![
                sys::ROCPROFILER_BUFFER_TRACING_HSA_CORE_API,
                sys::ROCPROFILER_BUFFER_TRACING_HSA_AMD_EXT_API,
            ],
            TraceKind::MarkerApi => vec![
                sys::ROCPROFILER_BUFFER_TRACING_MARKER_CORE_API,
                sys::ROCPROFILER_BUFFER_TRACING_MARKER_CONTROL_API,
                sys::ROCPROFILER_BUFFER_TRACING_MARKER_NAME_API,
            ],
            TraceKind::MarkerRanges => vec![sys::ROCPROFILER_BUFFER_TRACING_MARKER_CORE_RANGE_API],
            TraceKind::RcclApi => vec![sys::ROCPROFILER_BUFFER_TRACING_RCCL_API],
            TraceKind::CorrelationIdRetirement => {
                vec![sys::ROCPROFILER_BUFFER_TRACING_CORRELATION_ID_RETIREMENT]
            }
            TraceKind::Raw(k) => vec![k],
        }
    }

    /// The API a kind traces, if it is an API.
    pub fn api(self) -> Option<ApiKind> {
        self.raw_kinds()
            .first()
            .and_then(|k| ApiKind::of_buffer_kind(*k))
    }
}

/// What a tool configures in its [`Tool::initialize`]; exists only there, so nothing can be configured after the
/// SDK locked its configuration.
pub struct Setup<'s> {
    lib: &'static SdkLibrary,
    _only_here: PhantomData<&'s mut *const ()>,
}

impl std::fmt::Debug for Setup<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Setup").field("lib", &self.lib).finish()
    }
}

impl Setup<'_> {
    /// The library.
    pub fn library(&self) -> &'static SdkLibrary {
        self.lib
    }

    /// Every agent the SDK sees.
    pub fn agents(&self) -> crate::Result<Vec<Agent>> {
        agent::agents(self.lib)
    }

    /// A new context.
    pub fn create_context(&mut self) -> crate::Result<Context> {
        Context::create(self.lib)
    }

    /// A buffer of `context` whose batches go to `callback` (on the SDK's buffer thread, or the thread that
    /// flushes). A size below [`MIN_BUFFER_SIZE`](super::MIN_BUFFER_SIZE) is [`SdkError::BufferTooSmall`].
    pub fn create_buffer<F>(
        &mut self,
        context: &Context,
        options: BufferOptions,
        callback: F,
    ) -> crate::Result<Buffer>
    where
        F: for<'b> FnMut(&Batch<'b>) + Send + 'static,
    {
        Buffer::create(self.lib, context, options, Box::new(callback))
    }

    /// Traces `kinds` of `context` into `buffer`. A kind the library does not have is
    /// [`SdkError::UnknownKind`], and then none of `kinds` is configured.
    pub fn trace(
        &mut self,
        context: &Context,
        kinds: &[TraceKind],
        buffer: &Buffer,
    ) -> crate::Result<()> {
        if kinds.is_empty() {
            return Err(SdkError::EmptyList("trace kinds").into());
        }
        let raw: Vec<u32> = kinds.iter().flat_map(|k| k.raw_kinds()).collect();
        if let Some(&kind) = raw.iter().find(|&&k| !self.lib.knows_buffer_kind(k)) {
            return Err(SdkError::UnknownKind {
                service: "buffer tracing",
                kind,
            }
            .into());
        }
        let f = sym(
            &self.lib.t.rocprofiler_configure_buffer_tracing_service,
            "rocprofiler_configure_buffer_tracing_service",
        )?;
        for kind in raw {
            // SAFETY: context and buffer exist; no operation filter (null, 0: every operation).
            check("rocprofiler_configure_buffer_tracing_service", unsafe {
                f(context.raw(), kind, std::ptr::null(), 0, buffer.raw())
            })
            .map_err(super::locked_or)?;
        }
        Ok(())
    }

    /// Calls `callback` on the traced thread for every event of `kinds` (raw `rocprofiler_callback_tracing_kind_t`
    /// values) in `context`. The closure is kept for the process: the SDK cannot be told to forget it. A kind the
    /// library does not have is [`SdkError::UnknownKind`], and then none of `kinds` is configured.
    pub fn trace_callbacks<F>(
        &mut self,
        context: &Context,
        kinds: &[u32],
        callback: F,
    ) -> crate::Result<()>
    where
        F: for<'e> Fn(&CallbackEvent<'e>) + Send + Sync + 'static,
    {
        if kinds.is_empty() {
            return Err(SdkError::EmptyList("callback kinds").into());
        }
        if let Some(&kind) = kinds.iter().find(|&&k| !self.lib.knows_callback_kind(k)) {
            return Err(SdkError::UnknownKind {
                service: "callback tracing",
                kind,
            }
            .into());
        }
        let f = sym(
            &self.lib.t.rocprofiler_configure_callback_tracing_service,
            "rocprofiler_configure_callback_tracing_service",
        )?;
        let state: &'static CallbackState = Box::leak(Box::new(CallbackState {
            callback: Box::new(callback),
            panics: Default::default(),
        }));
        for &kind in kinds {
            // SAFETY: the context exists; `on_callback` and `state` live for the process.
            check("rocprofiler_configure_callback_tracing_service", unsafe {
                f(
                    context.raw(),
                    kind,
                    std::ptr::null(),
                    0,
                    Some(callback::on_callback),
                    (state as *const CallbackState).cast_mut().cast(),
                )
            })
            .map_err(super::locked_or)?;
        }
        Ok(())
    }

    /// Code objects and kernel symbols of `context`: `callback` sees each load and unload, and each kernel
    /// symbol's registration with its (mangled) name and kernel id.
    pub fn trace_code_objects<F>(&mut self, context: &Context, callback: F) -> crate::Result<()>
    where
        F: for<'e> Fn(&CallbackEvent<'e>) + Send + Sync + 'static,
    {
        self.trace_callbacks(
            context,
            &[sys::ROCPROFILER_CALLBACK_TRACING_CODE_OBJECT],
            callback,
        )
    }

    /// The dispatch counting service of `context`: each kernel dispatched on an agent of `configs` is counted
    /// with that agent's configuration, its values written to `buffer` (a [`Record::DispatchCounters`]
    /// header, then one [`Record::CounterValue`] per counter instance).
    ///
    /// [`Record::DispatchCounters`]: super::Record::DispatchCounters
    /// [`Record::CounterValue`]: super::Record::CounterValue
    pub fn count_dispatches(
        &mut self,
        context: &Context,
        buffer: &Buffer,
        configs: Vec<CounterConfig>,
    ) -> crate::Result<()> {
        if configs.is_empty() {
            return Err(SdkError::EmptyList("counter configurations").into());
        }
        let f = sym(
            &self
                .lib
                .t
                .rocprofiler_configure_buffer_dispatch_counting_service,
            "rocprofiler_configure_buffer_dispatch_counting_service",
        )?;
        let configs: &'static DispatchConfigs = Box::leak(Box::new(DispatchConfigs {
            by_agent: configs.into_iter().map(|c| (c.agent_id(), c)).collect(),
        }));
        // SAFETY: context and buffer exist; `choose_config` and `configs` live for the process.
        let configured = unsafe {
            f(
                context.raw(),
                buffer.raw(),
                Some(counting::choose_config),
                (configs as *const DispatchConfigs).cast_mut().cast(),
            )
        };
        check(
            "rocprofiler_configure_buffer_dispatch_counting_service",
            configured,
        )
        .map_err(super::locked_or)?;
        Ok(())
    }

    /// A counter configuration of `names` on `agent` (for [`count_dispatches`](Self::count_dispatches)).
    pub fn counter_config(
        &mut self,
        agent: &Agent,
        names: &[&str],
    ) -> crate::Result<CounterConfig> {
        CounterConfig::new(self.lib, agent, names)
    }

    /// Counters `names` of the GPU `agent`, sampled on demand (the device counting service, in a context of its
    /// own). Checks first that the AMD GPU driver is there (`/dev/kfd`, [`SdkError::NoAmdDriver`]); an unknown
    /// counter name is [`SdkError::UnknownCounter`], listing the agent's closest names.
    pub fn device_counting(
        &mut self,
        agent: &Agent,
        names: &[&str],
    ) -> crate::Result<DeviceSampler> {
        crate::rocprofiler::amd_gpus().map_err(|e| SdkError::NoAmdDriver(e.reason))?;
        self.device_counting_unchecked(agent, names)
    }

    /// [`device_counting`](Self::device_counting) without the driver check, for an SDK that needs no driver (a
    /// test double). Not unsafe: the real SDK reports a missing GPU with its own status.
    pub fn device_counting_unchecked(
        &mut self,
        agent: &Agent,
        names: &[&str],
    ) -> crate::Result<DeviceSampler> {
        if !agent.is_gpu() {
            return Err(SdkError::NoSuchAgent(format!("{} is not a GPU agent", agent.id)).into());
        }
        let config = CounterConfig::new(self.lib, agent, names)?;
        let counters = config.counters().to_vec();
        let context = Context::create(self.lib)?;
        let f = sym(
            &self.lib.t.rocprofiler_configure_device_counting_service,
            "rocprofiler_configure_device_counting_service",
        )?;
        let device: &'static DeviceConfig = Box::leak(Box::new(DeviceConfig { config }));
        // SAFETY: the context exists; buffer 0 (none: samples come back from the sample call); the callback and
        // `device` live for the process.
        check("rocprofiler_configure_device_counting_service", unsafe {
            f(
                context.raw(),
                sys::rocprofiler_buffer_id_t { handle: 0 },
                sys::rocprofiler_agent_id_t { handle: agent.id },
                Some(counting::set_device_config),
                (device as *const DeviceConfig).cast_mut().cast(),
            )
        })
        .map_err(super::locked_or)?;
        Ok(DeviceSampler::new(self.lib, context, agent, &counters))
    }
}
