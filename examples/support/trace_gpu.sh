#!/usr/bin/env bash
# GPU-host runs of the tracing bars. Copy into .gpu/ after staging (STAGE_ONLY='cuda_trace|trace_file|debuggee_kernels'
# plus the injection cdylib), together with examples/python/{torch_train,torch_launches}.py, then: bash .gpu/trace_gpu.sh
set -u
here=$(cd "$(dirname "$0")" && pwd); bin=$here/bin; py=${PYTHON:-python3}; out=${OUT:-/tmp/trace_gpu}; mkdir -p "$out"
lib=$bin/libgpu_tools_inject.so
inject() { # inject FILE_TEMPLATE [VAR=VALUE...] -- program...
  local f=$1; shift; env CUDA_INJECTION64_PATH="$lib" NVTX_INJECTION64_PATH="$lib" GPU_TOOLS_TRACE_FILE="$f" "$@"; }
echo "== 200k launches: native, API records on (all / launches only / skip noisy), kernels only, stages, torch.profiler"
$py "$here/torch_launches.py" --launches 200000
inject "$out/l200k-%p.gputrace" -- $py "$here/torch_launches.py" --launches 200000
inject "$out/l200k-launches-%p.gputrace" GPU_TOOLS_TRACE_API=launches -- $py "$here/torch_launches.py" --launches 200000
inject "$out/l200k-skip-%p.gputrace" GPU_TOOLS_TRACE_API_SKIP=cudaGetLastError,cuDevicePrimaryCtxGetState,cuKernelGetName -- $py "$here/torch_launches.py" --launches 200000
inject "$out/l200k-kern-%p.gputrace" GPU_TOOLS_TRACE_KINDS=kernel -- $py "$here/torch_launches.py" --launches 200000
for stage in no-decode no-convert no-encode no-send; do
  echo "stage $stage:"; inject "$out/stage-$stage-%p.gputrace" GPU_TOOLS_TRACE_STAGE=$stage -- $py "$here/torch_launches.py" --launches 200000
done
$py "$here/torch_launches.py" --launches 200000 --profile
ls -l "$out"/l200k-*.gputrace
echo "== CUDA graph replay: native, node mode, graph mode, torch.profiler"
$py "$here/torch_launches.py" --graph-replays 200
inject "$out/graph-node-%p.gputrace" GPU_TOOLS_TRACE_CUDA_GRAPH=node -- $py "$here/torch_launches.py" --graph-replays 200
inject "$out/graph-graph-%p.gputrace" GPU_TOOLS_TRACE_CUDA_GRAPH=graph -- $py "$here/torch_launches.py" --graph-replays 200
$py "$here/torch_launches.py" --graph-replays 200 --profile
echo "== NVTX (torch.cuda.nvtx) with graph replays, reports"
inject "$out/nvtx-%p.gputrace" -- $py "$here/torch_launches.py" --graph-replays 200 --nvtx
"$bin/example-trace_file" stats "$out"/nvtx-*.gputrace
"$bin/example-trace_file" stats --format csv "$out"/graph-graph-*.gputrace
"$bin/example-trace_file" export --perfetto "$out/nvtx.perfetto-trace" "$out"/nvtx-*.gputrace
"$bin/example-trace_file" export --chrome "$out/l200k.json" "$out"/l200k-[0-9]*.gputrace; ls -l "$out/l200k.json"
echo "== training loop and launch loop under cuda_trace (the existing table)"
"$bin/example-trace_bench" --runs 3 --torch-script "$here/torch_train.py"
echo "== crash: abort right after a synchronize (flush 0 = only the signal handler can deliver)"
inject "$out/crash-%p.gputrace" GPU_TOOLS_TRACE_FLUSH_MS=0 -- "$bin/example-debuggee_kernels" crash 1000 0
"$bin/example-trace_file" stats "$out"/crash-*.gputrace | sed -n '/cuda_gpu_kern_sum/,/^$/p;/processes/,$p'
echo "== SIGKILL loss by flush period (kill after the last synchronize)"
for ms in 50 200; do for delay in 0 0.1 0.3; do
  rm -f "$out"/kill-*.gputrace
  inject "$out/kill-%p.gputrace" GPU_TOOLS_TRACE_FLUSH_MS=$ms -- "$bin/example-debuggee_kernels" crash 1000 5000 > "$out/kill.out" &
  pid=$!; while ! grep -q "crash launches" "$out/kill.out" 2>/dev/null; do sleep 0.01; done; sleep $delay
  pkill -9 -P $pid 2>/dev/null; kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null
  echo "flush ${ms}ms kill +${delay}s: $("$bin/example-trace_file" stats --format csv "$out"/kill-*.gputrace 2>/dev/null | awk -F, '/add_one/{print $3}') of 1000 kernels"
done; done
echo "== two runs of one host, merged"
inject "$out/merge-a-%h-%p.gputrace" -- "$bin/example-debuggee_kernels" launch 100
inject "$out/merge-b-%h-%p.gputrace" -- "$bin/example-debuggee_kernels" launch 100
"$bin/example-trace_file" stats "$out"/merge-*.gputrace | sed -n '/processes/,$p'
"$bin/example-trace_file" export --perfetto "$out/merge.perfetto-trace" "$out"/merge-*.gputrace && ls -l "$out/merge.perfetto-trace"
