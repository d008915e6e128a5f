//! The CUDA Debugger API without a GPU, one module each: the attach route end to end against the C double
//! (`cudbg_attach_double`, whose debuggee is this binary run again), a session's device calls against the same double
//! (`cudbg_devices_double`, each test in a process of its own), and the API on a machine without a driver
//! (`cudbg_no_driver`: typed errors; each of its tests in a process of its own, `gpu_tools_testing::own_process`,
//! since the attach tests load the double as this process's driver).

mod cudbg_attach_double;
mod cudbg_devices_double;
mod cudbg_no_driver;
