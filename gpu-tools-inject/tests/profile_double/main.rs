//! Kernel metrics from the injection library end to end without a GPU: a child process (this test binary run
//! again) opens the library and calls its `InitializeInjection` as CUDA would, with the CUDA driver double and
//! the whole CUPTI double (`cupti_full`: callbacks and range profiler in one library), then plays a program: it
//! fires the callbacks CUPTI would (context created, launches, an executable graph made) and makes the range
//! profiler double count one auto range per kernel that ran, named by number as CUPTI names them. The parent reads
//! the stream file and checks the kernel-metrics records: every range named after its kernel, graph kernels
//! included, per-name aggregation, `GPU_TOOLS_PROFILE_GRAPH=graph` (one record per graph launch), launches into a
//! capturing stream left out, and silence for a process that never made a context.

mod attached;
mod controls;
mod launched;
mod order;
mod program;
mod support;
