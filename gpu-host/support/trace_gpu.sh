#!/usr/bin/env bash
# GPU-host runs of the tracing bars, printed as one table (logs and traces under $OUT, or /tmp/trace_gpu).
# Stage: STAGE_ONLY='gpu-tools|trace_bench|debuggee_kernels' scripts/gpu-stage --features nvidia-hw-tests
# (the injection cdylib comes with it), then on the GPU host, in the repository checkout that goes with .gpu/:
# bash gpu-host/support/trace_gpu.sh
# Every run has a time limit; the whole script stays under 8 minutes on an H100.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd); bin=$root/.gpu/bin; pydir=$root/gpu-host/python; py=${PYTHON:-python3}
out=${OUT:-/tmp/trace_gpu}; logs=$out/logs; mkdir -p "$logs"
lib=$bin/libgpu_tools_inject.so
gt=$bin/bin-gpu-tools
N=${LAUNCHES:-200000}; R=${REPLAYS:-200}
for f in "$lib" "$gt"; do [ -f "$f" ] || { echo "missing $f (stage the workspace)"; exit 1; }; done
table=$out/table.txt; : > "$table"
row() { printf '%-26s | %s\n' "$1" "$2" | tee -a "$table"; }
# run NAME LIMIT_S [VAR=VALUE...] -- program...: runs injected with the trace in $out/NAME-%p.gputrace (NAME
# starting with "native" or "prof" runs without injection); prints a row: loop time, file size, report figures.
run() {
  local name=$1 limit=$2; shift 2; local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  rm -f "$out/$name"-*.gputrace
  local t0=$(date +%s%N) rc
  case $name in
    native*|prof*) timeout "$limit" env "${envs[@]}" "$@" > "$logs/$name.log" 2>&1; rc=$? ;;
    *) timeout "$limit" env CUDA_INJECTION64_PATH="$lib" NVTX_INJECTION64_PATH="$lib" \
        GPU_TOOLS_TRACE_FILE="$out/$name-%p.gputrace" "${envs[@]}" "$@" > "$logs/$name.log" 2>&1; rc=$? ;;
  esac
  local wall=$((($(date +%s%N) - t0) / 1000000))
  local loop=$(grep -o 'loop_ms [0-9.]*' "$logs/$name.log" | tail -1 | cut -d' ' -f2)
  local line="rc=$rc wall=${wall}ms loop_ms=${loop:--}"
  local files=("$out/$name"-*.gputrace)
  if [ -e "${files[0]}" ]; then
    local bytes=$(cat "${files[@]}" | wc -c)
    line+=" file=${bytes}B"
    [ -n "${PER:-}" ] && line+=" ($((bytes / PER)) B/launch)"
    local skip=""; for e in "${envs[@]}"; do case $e in GPU_TOOLS_TRACE_API_SKIP=*) skip=${e#*=};; esac; done
    line+=" $("$gt" stats --format json "${files[@]}" 2> "$logs/$name.stats.err" | $py "$pydir/trace_summary.py" "$skip")"
  fi
  # The library's own notices (graph-mode fallback, NVTX, flush errors), first two.
  local notice=$(grep -i 'gpu-tools\|fallback\|cupti' "$logs/$name.log" | head -2 | tr '\n' ' ' | cut -c1-200)
  [ -n "$notice" ] && line+=" log: $notice"
  row "$name" "$line"
}
L="$py $pydir/torch_launches.py"
echo "== $N launches (1 kernel + 7 API calls each): native, tracer variants, torch.profiler"
PER=$N run native-launches 60 -- $L --launches $N
PER=$N run l-api-all 90 -- $L --launches $N
PER=$N run l-api-launches 90 GPU_TOOLS_TRACE_API=launches -- $L --launches $N
PER=$N run l-api-skip 90 GPU_TOOLS_TRACE_API_SKIP=cudaGetLastError,cuDevicePrimaryCtxGetState,cuKernelGetName -- $L --launches $N
PER=$N run l-kernels 90 GPU_TOOLS_TRACE_KINDS=kernel -- $L --launches $N
for stage in no-decode no-convert no-encode no-send; do
  PER=$N run "l-stage-$stage" 90 GPU_TOOLS_TRACE_STAGE=$stage -- $L --launches $N
done
run prof-launches 120 -- $L --launches $N --profile
echo "== CUDA graph replay x$R: native, node mode, graph mode (GRAPH_TRACE with CONCURRENT_KERNEL), torch.profiler"
run native-graph 60 -- $L --graph-replays $R
run g-node 90 GPU_TOOLS_TRACE_CUDA_GRAPH=node -- $L --graph-replays $R
run g-graph 90 GPU_TOOLS_TRACE_CUDA_GRAPH=graph -- $L --graph-replays $R
run g-default 90 -- $L --graph-replays $R
run prof-graph 120 -- $L --graph-replays $R --profile
echo "== NVTX (torch.cuda.nvtx ranges around replays) through NVTX_INJECTION64_PATH"
run nvtx 90 GPU_TOOLS_TRACE_CUDA_GRAPH=node -- $L --graph-replays $R --nvtx
run nvtx-graph 90 GPU_TOOLS_TRACE_CUDA_GRAPH=graph -- $L --graph-replays $R --nvtx
echo "== crash: abort right after a synchronize, periodic flush off (only the signal handler delivers)"
run crash 60 GPU_TOOLS_TRACE_FLUSH_MS=0 -- "$bin/example-debuggee_kernels" crash 1000 0
echo "== SIGKILL after the last synchronize"
for ms in 50 200; do for delay in 0 0.3; do
  name=kill-$ms-$delay; rm -f "$out/$name"-*.gputrace
  env CUDA_INJECTION64_PATH="$lib" GPU_TOOLS_TRACE_FILE="$out/$name-%p.gputrace" GPU_TOOLS_TRACE_FLUSH_MS=$ms \
    timeout 30 "$bin/example-debuggee_kernels" crash 1000 5000 > "$logs/$name.log" 2>&1 &
  pid=$!; for _ in $(seq 500); do grep -q "crash launches" "$logs/$name.log" 2>/dev/null && break; sleep 0.01; done
  sleep $delay; pkill -9 -P $pid 2>/dev/null; kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null
  row "$name" "$("$gt" stats --format json "$out/$name"-*.gputrace 2>/dev/null | $py "$pydir/trace_summary.py")"
done; done
echo "== two runs of one host, merged; exports"
run merge-a 60 -- "$bin/example-debuggee_kernels" launch 100
run merge-b 60 -- "$bin/example-debuggee_kernels" launch 100
row merged "$("$gt" stats --format json "$out"/merge-a-*.gputrace "$out"/merge-b-*.gputrace | $py "$pydir/trace_summary.py")"
t0=$(date +%s); "$gt" export "$out"/nvtx-*.gputrace --perfetto "$out/nvtx.perfetto-trace" > "$logs/export.log" 2>&1
"$gt" export "$out"/l-api-all-*.gputrace --chrome "$out/l200k.json.gz" >> "$logs/export.log" 2>&1
row exports "$(($(date +%s) - t0))s perfetto=$(wc -c < "$out/nvtx.perfetto-trace")B chrome.gz(l-api-all)=$(wc -c < "$out/l200k.json.gz")B"
echo "== gpu-tools trace: -o streamed next to the summary, graph mode, launches-only API, Chrome streamed"
t0=$(date +%s%N)
timeout 120 "$gt" trace -q -o "$out/cli-%p.gputrace" --chrome-trace "$out/cli.json" --cuda-graph-trace graph \
  --api launches -- $L --graph-replays $R > "$logs/cli-trace.log" 2>&1
row cli-trace "rc=$? wall=$((($(date +%s%N) - t0) / 1000000))ms file=$(cat "$out"/cli-*.gputrace | wc -c)B chrome=$(wc -c < "$out/cli.json")B $("$gt" stats --format json "$out"/cli-*.gputrace | $py "$pydir/trace_summary.py")"
tail -n 8 "$logs/cli-trace.log"
echo "== gpu-tools trace -o on the $N-launch loop: the compact file's bytes per launch, against the Chrome JSON"
t0=$(date +%s%N)
timeout 120 "$gt" trace -q -o "$out/cli200k-%p.gputrace" -- $L --launches $N > "$logs/cli200k.log" 2>&1
rc=$?; wall=$((($(date +%s%N) - t0) / 1000000)); bytes=$(cat "$out"/cli200k-*.gputrace | wc -c)
"$gt" export "$out"/cli200k-*.gputrace --chrome "$out/cli200k.json" > "$logs/cli200k-export.log" 2>&1
json=$(wc -c < "$out/cli200k.json"); rm -f "$out/cli200k.json"
row cli-200k "rc=$rc wall=${wall}ms file=${bytes}B ($((bytes / N)) B/launch) chrome-json=${json}B ($((json / N)) B/launch) $("$gt" stats --format json "$out"/cli200k-*.gputrace | $py "$pydir/trace_summary.py")"
echo "== training loop and launch loop (trace_bench, the existing comparison)"
timeout 150 "$bin/example-trace_bench" --runs 3 --torch-script "$pydir/torch_train.py" > "$logs/trace_bench.log" 2>&1
row trace_bench "rc=$? (table in logs/trace_bench.log; last lines below)"
tail -n 12 "$logs/trace_bench.log"
"$gt" stats "$out"/nvtx-*.gputrace > "$out/nvtx-stats.txt" 2>&1
echo; echo "===== RESULTS (also $table; nvtx stats text in $out/nvtx-stats.txt)"; cat "$table"
sed -n '/nvtx_sum\|NVTX Range/,/^$/p' "$out/nvtx-stats.txt" | head -20
