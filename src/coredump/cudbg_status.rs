//! `CUDBGResult` as a typed error: the status of a debugger API call, and of a device in a core dump.

use crate::status::status_enum;

status_enum! {
    /// A CUDA debugger status (`CUDBGResult`) other than success: why a debugger API call failed, or a device's
    /// status in a core dump. `Display` gives the vendor's name for the code.
    pub enum CudbgError: u32, from crate::sys::cudbg, success CUDBG_SUCCESS, display describe {
        Unknown = CUDBG_ERROR_UNKNOWN,
        BufferTooSmall = CUDBG_ERROR_BUFFER_TOO_SMALL,
        UnknownFunction = CUDBG_ERROR_UNKNOWN_FUNCTION,
        InvalidArgs = CUDBG_ERROR_INVALID_ARGS,
        Uninitialized = CUDBG_ERROR_UNINITIALIZED,
        InvalidCoordinates = CUDBG_ERROR_INVALID_COORDINATES,
        InvalidMemorySegment = CUDBG_ERROR_INVALID_MEMORY_SEGMENT,
        InvalidMemoryAccess = CUDBG_ERROR_INVALID_MEMORY_ACCESS,
        MemoryMappingFailed = CUDBG_ERROR_MEMORY_MAPPING_FAILED,
        Internal = CUDBG_ERROR_INTERNAL,
        InvalidDevice = CUDBG_ERROR_INVALID_DEVICE,
        InvalidSm = CUDBG_ERROR_INVALID_SM,
        InvalidWarp = CUDBG_ERROR_INVALID_WARP,
        InvalidLane = CUDBG_ERROR_INVALID_LANE,
        SuspendedDevice = CUDBG_ERROR_SUSPENDED_DEVICE,
        RunningDevice = CUDBG_ERROR_RUNNING_DEVICE,
        Reserved0 = CUDBG_ERROR_RESERVED_0,
        InvalidAddress = CUDBG_ERROR_INVALID_ADDRESS,
        IncompatibleApi = CUDBG_ERROR_INCOMPATIBLE_API,
        InitializationFailure = CUDBG_ERROR_INITIALIZATION_FAILURE,
        InvalidGrid = CUDBG_ERROR_INVALID_GRID,
        NoEventAvailable = CUDBG_ERROR_NO_EVENT_AVAILABLE,
        SomeDevicesWatchdogged = CUDBG_ERROR_SOME_DEVICES_WATCHDOGGED,
        AllDevicesWatchdogged = CUDBG_ERROR_ALL_DEVICES_WATCHDOGGED,
        InvalidAttribute = CUDBG_ERROR_INVALID_ATTRIBUTE,
        ZeroCallDepth = CUDBG_ERROR_ZERO_CALL_DEPTH,
        InvalidCallLevel = CUDBG_ERROR_INVALID_CALL_LEVEL,
        CommunicationFailure = CUDBG_ERROR_COMMUNICATION_FAILURE,
        InvalidContext = CUDBG_ERROR_INVALID_CONTEXT,
        AddressNotInDeviceMem = CUDBG_ERROR_ADDRESS_NOT_IN_DEVICE_MEM,
        MemoryUnmappingFailed = CUDBG_ERROR_MEMORY_UNMAPPING_FAILED,
        IncompatibleDisplayDriver = CUDBG_ERROR_INCOMPATIBLE_DISPLAY_DRIVER,
        InvalidModule = CUDBG_ERROR_INVALID_MODULE,
        LaneNotInSyscall = CUDBG_ERROR_LANE_NOT_IN_SYSCALL,
        MemcheckNotEnabled = CUDBG_ERROR_MEMCHECK_NOT_ENABLED,
        InvalidEnvvarArgs = CUDBG_ERROR_INVALID_ENVVAR_ARGS,
        OsResources = CUDBG_ERROR_OS_RESOURCES,
        ForkFailed = CUDBG_ERROR_FORK_FAILED,
        NoDeviceAvailable = CUDBG_ERROR_NO_DEVICE_AVAILABLE,
        AttachNotPossible = CUDBG_ERROR_ATTACH_NOT_POSSIBLE,
        WarpResumeNotPossible = CUDBG_ERROR_WARP_RESUME_NOT_POSSIBLE,
        InvalidWarpMask = CUDBG_ERROR_INVALID_WARP_MASK,
        AmbiguousMemoryAddress = CUDBG_ERROR_AMBIGUOUS_MEMORY_ADDRESS,
        RecursiveApiCall = CUDBG_ERROR_RECURSIVE_API_CALL,
        MissingData = CUDBG_ERROR_MISSING_DATA,
        NotSupported = CUDBG_ERROR_NOT_SUPPORTED,
    }
}

fn describe(e: &CudbgError) -> String {
    match e.vendor_name() {
        Some(n) => n.to_string(),
        None => format!("unrecognized CUDBGResult {}", e.code()),
    }
}
