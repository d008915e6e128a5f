/* Vendor headers the sys layer (src/sys/) is generated from. `cargo run -p xtask -- bindings` (xtask/src/main.rs)
 * parses this file once per API with one of the GPU_TOOLS_BIND_* macros defined; the library has no build script.
 * See docs/development.md, "Regenerating the sys layer". */

#if defined(GPU_TOOLS_BIND_CUPTI)
/* CUPTI 13.x: parsed as C++ (namespaces and nullptr in cupti_checkpoint.h). */
#include <cupti_result.h>
#include <cupti_version.h>
#include <cupti_checkpoint.h>
/* Activity and Callback APIs; cupti_activity.h includes cupti_callbacks.h, the deprecated record versions (12.x
 * layouts) and cuda.h. */
#include <cupti_activity.h>
#include <cupti_callbacks.h>
#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>
#endif

#if defined(GPU_TOOLS_BIND_CUPTI_PROFILING)
/* CUPTI 13.x profiling: chip names, the profiler host (metric catalogue, configuration, evaluation; C++, it
 * includes <string>), the profiler target (initialisation, device support, counter availability), the range
 * profiler, PM sampling, PC sampling and SASS metrics. */
#include <cupti_target.h>
#include <cupti_profiler_target.h>
#include <cupti_profiler_host.h>
#include <cupti_range_profiler.h>
#include <cupti_pmsampling.h>
#include <cupti_pcsampling.h>
#include <cupti_sass_metrics.h>
#endif

#if defined(GPU_TOOLS_BIND_CUDA_DRIVER)
/* The CUDA driver calls the safe layer needs to check preconditions and to drive tests and examples. */
#include <cuda.h>
#endif

#if defined(GPU_TOOLS_BIND_CUDBG)
/* CUDA 13.0 debugger API: the CUDBGAPI_st table, events, packed structs. */
#include <cudadebugger.h>
#endif

#if defined(GPU_TOOLS_BIND_CUDACORE)
/* The CUDA core-dump format (driver r580): table entry layouts only. */
#include <cudacoredump.h>
#endif

#if defined(GPU_TOOLS_BIND_ROCPROFILER)
/* rocprofiler v2, ROCm 6.1+ ABI. */
#include <rocprofiler/v2/rocprofiler.h>
#endif

#if defined(GPU_TOOLS_BIND_ROCPROFILER_SDK)
/* rocprofiler-sdk 1.x (ROCm 7.0+): the whole public API, parsed as C. Its headers include the HSA, hsakmt and HIP
 * headers of the same ROCm; the types that depend on HIP or HSA versions (API argument unions, API id enums) are
 * left out of the bindings (see xtask), so only their presence matters here. */
#include <rocprofiler-sdk/rocprofiler.h>
#include <rocprofiler-sdk/registration.h>
#endif
