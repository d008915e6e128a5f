/* The CUPTI double as one library, as the real libcupti is one: the Activity and Callback APIs
 * (cupti_activity.c) and the counter APIs (cupti_profiling.c), for a client that uses both in one process (the
 * injection library profiling kernels: its callback subscriber queues the launches, its range profiler counts
 * them). Both sets of test controls (`cd_*`, `cp_*`) are exported. */
#define CUPTI_DOUBLE_FULL 1
#include "cupti_activity.c"
#include "cupti_profiling.c"
