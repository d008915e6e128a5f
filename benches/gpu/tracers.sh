#!/usr/bin/env bash
# Every tracer side by side on a GPU host, in one run (docs/measurements.md, "Tracers side by side"):
#
#  main     ROUNDS interleaved rounds (the order of the configurations rotates each round) of each configuration
#           over six workloads: C launch+sync loop and C flood (tracer_work.cu), and the PyTorch flood, training
#           step, CUDA-graph replay and serving-like loop (gpu-host/python/tracer_workloads.py, all four in one
#           process per configuration). Configurations: native; the raw CUPTI floor (cupti_floor.c, an injection
#           library recording the same kinds as gpu-tools' defaults, or as --kinds kernel, buffers handed back
#           unread); `gpu-tools trace -o FILE` with its defaults and with --kinds kernel; torch.profiler with CPU and
#           CUDA activities (PyTorch workloads); Nsight Systems (`nsys profile --trace=cuda,nvtx`, where installed,
#           in the first NSYS_ROUNDS rounds). Each workload times its own loop (start-up does not count).
#  attach   a steady PyTorch job and a steady C job (floods of 1000 launches and a synchronize), each attached
#           twice for 2 s: `trace --pid`, then `trace --pid --counters`; the job's rate inside each window against
#           before it (the windows' bounds are the injection library's own log lines, on the job's clock).
#  recorder the flight recorder's cost (issue 43): a steady job's rate after one 0.5 s `trace --pid` window that left
#           the recorder in it, against a twin job whose window left none (`--no-flight-recorder`), each against its
#           own rate before its window; the C job and the PyTorch job, one after the other.
#  listing  the C flood under `trace -o FILE` with and without --list: the tool's whole wall time and the lines.
#  profile  (PROFILE=1) where the time of a traced launch goes: the C flood natively, under the floor, the floor
#           with gpu-tools' clock callback and 200 ms flush thread, the injection library alone at each stage
#           (GPU_TOOLS_TRACE_STAGE: no-decode, no-convert, no-encode, no-send, full; a file sink), and under
#           `gpu-tools trace`; the library's debug log of the time each buffer held CUPTI's thread; with `perf
#           record` of the traced flood where perf is installed.
#  kernel   (KERNEL_LADDER=1) where `--kinds kernel` spends its time above its floor, step by step, on the C loops and
#           the PyTorch workloads: the kernel floor; beside it, the floor with its buffers zeroed off the launching
#           thread and CUPTI told so (which CUPTI otherwise does on the thread that asks for a buffer, the program's);
#           the floor with gpu-tools' clock and flush thread, with its resource
#           subscriber too, the injection library alone with kernels only (buffers unread, then written to a file),
#           and `gpu-tools trace --kinds kernel`.
#  attrs    (ATTRS=1) which of CUPTI's activity attributes make a traced launch cheaper: the kernel floor as CUPTI
#           sets it up by default, and with each of pinned host memory for its device buffers, per-thread activity
#           buffers off, 16 device buffers pre-allocated (3 by default), and 32 MB device buffers (3.2 MB), over the
#           kernel part's workloads and rounds (cupti_floor.c's CUPTI_FLOOR_ATTRS). What gpu-tools could set where a
#           setting is cheaper beyond its rounds' spread.
#
# Stage first (`STAGE_ONLY=gpu-tools scripts/gpu-stage` puts .gpu/bin/bin-gpu-tools and libgpu_tools_inject.so in
# place), then in the checkout that goes with .gpu/:
#   PROFILE=1 bash benches/gpu/tracers.sh
# Settings (environment): ROUNDS (5), PARTS ("main attach recorder listing", plus profile with PROFILE=1, kernel with
# KERNEL_LADDER=1 and attrs with ATTRS=1; `PARTS=kernel` runs that part alone, about 4 minutes at SCALE=0.4;
# KERNEL_ROUNDS, default 3, the kernel and attrs parts' rounds), WORKLOADS (the main, kernel and attrs parts' workloads,
# comma-separated: c_sync, c_flood, torch_flood,
# torch_train, torch_graph, torch_serving; default all), BUDGET_S (400: the main part
# runs fewer rounds rather than overrun it; the other parts take about 100 s), SCALE (1: every
# workload's count), NODRIVER=1 (two configurations more: the defaults' kinds without driver API records, floor
# and gpu-tools), ALL_API=1 (two more: `gpu-tools trace --api all`, against the same floor as the defaults, and
# floor-essential, CUPTI itself leaving out the host-side bookkeeping: what the writer's leaving it out saves, and
# what CUPTI's would), NSYS (auto | 0), NSYS_ROUNDS (2), SMOKE=1 (tiny counts, one round, no nsys: checks that
# every part runs, in about a minute), PYTHON, CUDA_HOME. Prints the tables and writes $OUT/tracers/ (results.json,
# raw.tsv, the logs of failed runs).
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
gt=$root/.gpu/bin/bin-gpu-tools
inject=$root/.gpu/bin/libgpu_tools_inject.so
py=${PYTHON:-python3}
cuda=${CUDA_HOME:-/usr/local/cuda}
out=${OUT:-/tmp/tracers-out}/tracers
ROUNDS=${ROUNDS:-5} SCALE=${SCALE:-1} NSYS=${NSYS:-auto} NSYS_ROUNDS=${NSYS_ROUNDS:-2} BUDGET_S=${BUDGET_S:-400}
PARTS=${PARTS:-main attach recorder listing}
[ "${PROFILE:-0}" = 1 ] && PARTS="$PARTS profile"
[ "${KERNEL_LADDER:-0}" = 1 ] && PARTS="$PARTS kernel"
[ "${ATTRS:-0}" = 1 ] && PARTS="$PARTS attrs"
C_SYNC=${C_SYNC:-30000} C_FLOOD=${C_FLOOD:-100000} STEADY_S=${STEADY_S:-13}
# WORKLOADS: the workloads the main, kernel and attrs parts run (comma-separated; default all six), so that a part at full
# scale with enough rounds can run a few workloads per device call.
WORKLOADS=${WORKLOADS:-c_sync,c_flood,torch_flood,torch_train,torch_graph,torch_serving}
KERNEL_ROUNDS=${KERNEL_ROUNDS:-3}
wanted() { [[ ",$WORKLOADS," == *",$1,"* ]]; }
c_programs=$(for p in c_sync c_flood; do wanted "$p" && printf '%s ' "$p"; done)
torch_list=$(for w in flood train graph serving; do wanted "torch_$w" && printf '%s,' "$w"; done)
torch_list=${torch_list%,}
for w in ${WORKLOADS//,/ }; do
  case $w in c_sync | c_flood | torch_flood | torch_train | torch_graph | torch_serving) ;;
    *) echo "WORKLOADS: unknown workload $w" >&2; exit 2 ;; esac
done
if [ "${SMOKE:-0}" = 1 ]; then
  ROUNDS=1 SCALE=0.02 NSYS=0 C_SYNC=300 C_FLOOD=2000 STEADY_S=11
fi
# Kinds of gpu-tools' defaults and of --kinds kernel, as the injection library enables them when launched
# (gpu-tools-inject/src/session.rs, session_kinds: graph mode adds GRAPH_TRACE).
FLOOR_DEFAULT=kernel,memcpy,memset,driver,runtime,nvtx,graph
FLOOR_KERNEL=kernel,graph
# NODRIVER=1: the defaults without driver API records as well (floor-nodriver, gt-nodriver): what the driver kind
# costs on each workload, for the choice of defaults (issue 44).
FLOOR_NODRIVER=kernel,memcpy,memset,runtime,nvtx,graph
GT_NODRIVER=kernel,memcpy,memset,runtime,nvtx
work_py=$root/gpu-host/python/tracer_workloads.py
report_py=$root/benches/gpu/tracers_report.py
started=$(date +%s)
mkdir -p "$out"
rm -f "$out"/*.log "$out"/*.tsv "$out"/*.txt "$out"/*.out "$out"/*.rc "$out"/results.json
tmp=$(mktemp -d /tmp/tracers.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
unset GPU_TOOLS_INJECT_LIB CUDA_INJECTION64_PATH NVTX_INJECTION64_PATH GPU_TOOLS_TRACE_LOG
say() { printf '%s\n' "$*" | tee -a "$out/log.txt"; }
elapsed() { echo $(($(date +%s) - started)); }
now_ms() { date +%s%3N; }

# --- the machine and what runs on it
for f in "$gt" "$inject"; do
  [ -e "$f" ] || { echo "tracers.sh: $f is missing: stage first (scripts/gpu-stage)" >&2; exit 1; }
done
{
  echo "machine $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)"
  echo "cuda_toolkit $("$cuda/bin/nvcc" --version 2>/dev/null | grep -o 'release [0-9.]*' | head -1)"
  echo "gpu_tools $("$gt" --version 2>&1 | head -1)"
  echo "python $($py -c 'import sys; print(sys.version.split()[0])' 2>&1)"
  echo "torch $($py -c 'import torch; print(torch.__version__, "cuda", torch.version.cuda, "available" if torch.cuda.is_available() else "unavailable")' 2>&1 | tail -1)"
  if [ "$NSYS" != 0 ] && command -v nsys >/dev/null; then echo "nsys $(nsys --version 2>&1 | head -1)"; else echo "nsys not used"; fi
  echo "perf $(command -v perf >/dev/null && perf --version 2>&1 | head -1 || echo 'not installed')"
  # gpu-tools registers a CLOCK_MONOTONIC timestamp callback with CUPTI: where the kernel's clock source has no vDSO
  # read (a VM without a stable TSC), each call is a system call. The clock source, and what a read costs here.
  echo "clocksource $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null || echo unknown)" \
    "(available: $(cat /sys/devices/system/clocksource/clocksource0/available_clocksource 2>/dev/null || echo unknown))"
  $py -c 'import time
n = 200000
for name, c in (("monotonic", time.CLOCK_MONOTONIC), ("realtime", time.CLOCK_REALTIME)):
    t0 = time.perf_counter_ns()
    for _ in range(n): time.clock_gettime_ns(c)
    print(f"clock_gettime {name} {(time.perf_counter_ns() - t0) / n:.1f} ns a read (Python loop included)")
t0 = time.perf_counter_ns()
for _ in range(n): pass
print(f"empty Python loop {(time.perf_counter_ns() - t0) / n:.1f} ns a turn")' 2>&1
  echo "settings rounds=$ROUNDS scale=$SCALE c_sync=$C_SYNC c_flood=$C_FLOOD parts='$PARTS' workloads=$WORKLOADS kernel_rounds=$KERNEL_ROUNDS budget_s=$BUDGET_S smoke=${SMOKE:-0}"
} | tee "$out/machine.txt"
use_nsys=0
[ "$NSYS" != 0 ] && command -v nsys >/dev/null && use_nsys=1
have_torch=0
grep -q '^torch .* available$' "$out/machine.txt" && have_torch=1
[ "$have_torch" = 1 ] || say "PyTorch with CUDA not found by $py: the PyTorch workloads are left out"

# --- build the C workload and the floor library
# CUPTI's header and library from the toolkit, else from the Python wheels (nvidia-cuda-cupti ships both).
wheels=$($py -c 'import nvidia, os; print(list(nvidia.__path__)[0])' 2>/dev/null)
inc=$(dirname "$( (find "$cuda/" -name cupti.h; [ -n "$wheels" ] && find "$wheels/" -name cupti.h) 2>/dev/null | head -1)")
cupti_lib=$( (find "$cuda/" -name 'libcupti.so*' | sort; [ -n "$wheels" ] && find "$wheels/" -name 'libcupti.so*' | sort) \
  2>/dev/null | head -1)
work=$tmp/tracer_work floor=$tmp/libcupti_floor.so
"$cuda/bin/nvcc" -O2 -arch=native -o "$work" "$root/benches/gpu/tracer_work.cu" 2>"$tmp/nvcc.err" \
  || "$cuda/bin/nvcc" -O2 -gencode arch=compute_90,code=sm_90 -o "$work" "$root/benches/gpu/tracer_work.cu" \
  || { cat "$tmp/nvcc.err"; echo "tracers.sh: nvcc failed" >&2; exit 1; }
cc -O2 -shared -fPIC -I"$inc" -I"$cuda/include" -o "$floor" "$root/benches/gpu/cupti_floor.c" -ldl -lpthread \
  || { echo "tracers.sh: the floor library did not build (cupti.h in '$inc')" >&2; exit 1; }
say "built tracer_work and the floor library in $(elapsed) s; CUPTI for C programs: $cupti_lib"

# The command prefix of a configuration (into the array `pre`); `extra` gets the workload's own extra arguments.
prefix() {
  local config=$1 tag=$2
  pre=(env) extra=()
  case $config in
    native) ;;
    floor-kernel-pinned | floor-kernel-unthreaded | floor-kernel-prealloc | floor-kernel-bigbuf)
      # The kernel floor with one of CUPTI's activity attributes set (the attrs part).
      local attrs
      case $config in
        *-pinned) attrs=8=1 ;; *-unthreaded) attrs=9=0 ;; *-prealloc) attrs=6=16 ;; *-bigbuf) attrs=0=32000000 ;;
      esac
      pre=(env CUDA_INJECTION64_PATH="$floor" CUPTI_FLOOR_KINDS="$FLOOR_KERNEL" CUPTI_FLOOR_LIB="$cupti_lib"
        CUPTI_FLOOR_ATTRS="$attrs" CUPTI_FLOOR_REPORT="$tmp/$tag.floor") ;;
    floor-kernel-zeroed)
      # The kernel floor with its buffers zeroed off the launching thread, and CUPTI told so.
      pre=(env CUDA_INJECTION64_PATH="$floor" CUPTI_FLOOR_KINDS="$FLOOR_KERNEL" CUPTI_FLOOR_LIB="$cupti_lib"
        CUPTI_FLOOR_ZEROED=1 CUPTI_FLOOR_REPORT="$tmp/$tag.floor") ;;
    floor-default | floor-kernel | floor-nodriver | floor-essential)
      # CUPTI records every API call for the defaults (their writer leaves out the host-side bookkeeping: CUPTI's
      # per-function choice would take it from the program's own profiler too); floor-essential has CUPTI leave it
      # out (CUPTI_FLOOR_API=essential).
      local kinds=$FLOOR_DEFAULT api=all
      [ "$config" = floor-kernel ] && kinds=$FLOOR_KERNEL
      [ "$config" = floor-nodriver ] && kinds=$FLOOR_NODRIVER
      [ "$config" = floor-essential ] && api=essential
      pre=(env CUDA_INJECTION64_PATH="$floor" CUPTI_FLOOR_KINDS="$kinds" CUPTI_FLOOR_API="$api"
        CUPTI_FLOOR_LIB="$cupti_lib" CUPTI_FLOOR_REPORT="$tmp/$tag.floor") ;;
    floor-clock-flush)
      pre=(env CUDA_INJECTION64_PATH="$floor" CUPTI_FLOOR_KINDS="$FLOOR_DEFAULT" CUPTI_FLOOR_API=all
        CUPTI_FLOOR_LIB="$cupti_lib"
        CUPTI_FLOOR_CLOCK=1 CUPTI_FLOOR_FLUSH_MS=200 CUPTI_FLOOR_REPORT="$tmp/$tag.floor") ;;
    floor-kernel-clock-flush | floor-kernel-subscribed)
      # The kernel floor with what a launched gpu-tools session adds in CUPTI: its clock and flush thread, then
      # also its resource subscriber.
      local subscribe=
      [ "$config" = floor-kernel-subscribed ] && subscribe=resource
      pre=(env CUDA_INJECTION64_PATH="$floor" CUPTI_FLOOR_KINDS="$FLOOR_KERNEL" CUPTI_FLOOR_LIB="$cupti_lib"
        CUPTI_FLOOR_CLOCK=1 CUPTI_FLOOR_FLUSH_MS=200 CUPTI_FLOOR_SUBSCRIBE="$subscribe"
        CUPTI_FLOOR_REPORT="$tmp/$tag.floor") ;;
    stage-kernel-*)
      pre=(env CUDA_INJECTION64_PATH="$inject" GPU_TOOLS_TRACE_FILE="$tmp/$tag-%p.raw" GPU_TOOLS_TRACE_KINDS=kernel
        GPU_TOOLS_TRACE_STAGE="${config#stage-kernel-}") ;;
    gt-default) pre=("$gt" trace -o "$tmp/$tag-%p.gputrace" --) ;;
    gt-kernel) pre=("$gt" trace --kinds kernel -o "$tmp/$tag-%p.gputrace" --) ;;
    gt-nodriver) pre=("$gt" trace --kinds "$GT_NODRIVER" -o "$tmp/$tag-%p.gputrace" --) ;;
    gt-all) pre=("$gt" trace --api all -o "$tmp/$tag-%p.gputrace" --) ;;
    gt-list) pre=("$gt" trace --list -o "$tmp/$tag-%p.gputrace" --) ;;
    stage-*)
      pre=(env CUDA_INJECTION64_PATH="$inject" NVTX_INJECTION64_PATH="$inject" GPU_TOOLS_TRACE_FILE="$tmp/$tag-%p.raw"
        GPU_TOOLS_TRACE_KINDS=kernel,memcpy,memset,driver,runtime,nvtx GPU_TOOLS_TRACE_STAGE="${config#stage-}") ;;
    torch-profiler) extra=(--profiler) ;;
    nsys) pre=(nsys profile --trace=cuda,nvtx --sample=none --cpuctxsw=none --force-overwrite=true
      -o "$tmp/$tag") ;;
  esac
}

# One run: PART ROUND CONFIG PROGRAM (c_sync, c_flood, torch). Appends a row per workload line to raw.tsv:
# part round config workload ms units rc wall_ms check (the tracer's own count: kernels in gpu-tools' summary, the
# floor's bytes, the profiler's events).
one_run() {
  local part=$1 round=$2 config=$3 program=$4 tag="$1-$2-$3-$4" t0 rc wall check
  local log=$tmp/$tag.log
  prefix "$config" "$tag"
  local cmd=()
  case $program in
    c_sync) cmd=("$work" sync "$C_SYNC") ;;
    c_flood) cmd=("$work" flood "$C_FLOOD") ;;
    torch) cmd=($py "$work_py" --scale "$SCALE" --workloads "$torch_list" ${extra[@]+"${extra[@]}"}) ;;
  esac
  t0=$(now_ms)
  timeout 180 "${pre[@]}" "${cmd[@]}" >"$log" 2>&1
  rc=$? wall=$(($(now_ms) - t0))
  check=-
  if grep -q '^--- summary' "$log"; then
    check=kernels=$(sed -n 's/^--- summary[^:]*: [0-9]* process[es]*, \([0-9]*\) kernels.*/\1/p' "$log" | head -1)
  elif [ -f "$tmp/$tag.floor" ]; then
    sed "s/^/$tag /" "$tmp/$tag.floor" >>"$out/floor-reports.txt"
    check=floor_bytes=$(sed -n 's/.* bytes=\([0-9]*\) .*/\1/p' "$tmp/$tag.floor" | awk '{ s += $1 } END { print s + 0 }')
    # An attribute CUPTI refused: not the floor asked for.
    case $config in floor-kernel-pinned | floor-kernel-unthreaded | floor-kernel-prealloc | floor-kernel-bigbuf)
      grep -q ' enable_failures=[1-9]' "$tmp/$tag.floor" && check=missing ;;
    esac
  elif grep -q '^profiler ' "$log"; then
    check=events=$(awk '$1 == "profiler" { s += $6 } END { print s + 0 }' "$log")
  fi
  # A tracer that did not run (a floor library CUDA did not load, a trace without its summary) times the program
  # untraced: the run counts as failed, not as that tracer's figure.
  case $config:$check in
    floor-*:floor_bytes=[0-9]* | gt-*:kernels=[0-9]* | torch-profiler:events=[0-9]* | native:* | nsys:* | stage-*:*) ;;
    *) check=missing ;;
  esac
  if grep -q '^work ' "$log"; then
    awk -v p="$part" -v r="$round" -v c="$config" -v rc="$rc" -v w="$wall" -v k="$check" \
      '$1 == "work" { printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p, r, c, $2, $4, $6, rc, w, k }' "$log" >>"$out/raw.tsv"
  else
    printf '%s\t%s\t%s\t%s\t-\t-\t%s\t%s\tfailed\n' "$part" "$round" "$config" "$program" "$rc" "$wall" >>"$out/raw.tsv"
  fi
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 3 ] || ! grep -q '^work ' "$log" || [ "$check" = missing ]; then
    [ -f "$out/failed-$config-$program.log" ] || cp "$log" "$out/failed-$config-$program.log"
    say "  $tag: exit $rc (log kept in failed-$config-$program.log)"
  fi
  if [ "$part" = listing ]; then
    printf '%s\t%s\t%s\t%s\t%s\n' "$round" "$config" "$wall" "$(grep -c -E '^(kernel|memcpy|memset)  ' "$log")" \
      "$(wc -c <"$log")" >>"$out/listing.tsv"
  fi
  rm -f "$tmp/$tag"-*.gputrace "$tmp/$tag"-*.raw "$tmp/$tag".nsys-rep "$tmp/$tag".qdstrm "$tmp/$tag".sqlite
}

# Runs ROUNDS rounds of CONFIGS over PROGRAMS for PART, rotating the order each round; stops early when the next
# round would overrun the part's end (seconds since the start).
rounds() {
  local part=$1 until=$2 configs=($3) programs=($4) n r i c p last=0 t tn nsys_s=0 next
  n=${#configs[@]}
  for r in $(seq "$ROUNDS"); do
    # The next round's time: the last one's, with Nsight Systems' share only where it runs again.
    next=$((last - nsys_s))
    [ "$r" -le "$NSYS_ROUNDS" ] && next=$last
    if [ "$r" -gt 1 ] && [ $(($(elapsed) + next)) -gt "$until" ]; then
      say "$part: stopped after $((r - 1)) rounds (the next would end past ${until} s of the budget)"
      break
    fi
    t=$(date +%s)
    for i in $(seq 0 $((n - 1))); do
      c=${configs[$(((i + r - 1) % n))]}
      [ "$c" = nsys ] && [ "$r" -gt "$NSYS_ROUNDS" ] && continue
      tn=$(date +%s)
      for p in "${programs[@]}"; do
        case $c:$p in torch-profiler:c_*) continue ;; esac
        one_run "$part" "$r" "$c" "$p"
      done
      [ "$c" = nsys ] && nsys_s=$(($(date +%s) - tn))
    done
    last=$(($(date +%s) - t))
    say "$part: round $r in $last s (at $(elapsed) s)"
  done
}

# `rounds` with N rounds (1 in a smoke run), whatever ROUNDS says: the parts after the main one.
n_rounds() {
  local saved=$ROUNDS
  ROUNDS=$1
  shift
  [ "${SMOKE:-0}" = 1 ] && ROUNDS=1
  rounds "$@"
  ROUNDS=$saved
}
three_rounds() { n_rounds 3 "$@"; }

reserve=0
for p in $PARTS; do
  case $p in
    attach) reserve=$((reserve + 45)) ;; recorder) reserve=$((reserve + 60)) ;; listing) reserve=$((reserve + 15)) ;; profile) reserve=$((reserve + 50)) ;;
    kernel | attrs) reserve=$((reserve + 120)) ;;
  esac
done
[ "${SMOKE:-0}" = 1 ] && reserve=0

if [[ " $PARTS " == *" main "* ]]; then
  configs="native floor-default floor-kernel gt-default gt-kernel"
  [ "${NODRIVER:-0}" = 1 ] && configs="$configs floor-nodriver gt-nodriver"
  [ "${ALL_API:-0}" = 1 ] && configs="$configs floor-essential gt-all"
  programs=$c_programs
  [ "$have_torch" = 1 ] && [ -n "$torch_list" ] && configs="$configs torch-profiler" programs="$programs torch"
  [ "$use_nsys" = 1 ] && configs="$configs nsys"
  say "== main: $configs over $programs (at $(elapsed) s)"
  rounds main $((BUDGET_S - reserve)) "$configs" "$programs"
fi

# --- attached: the job's own rate inside each 2 s window against outside it
# steady_start PREFIX COMMAND...: starts a steady job (its output in PREFIX.job.log and .job.err) and waits for its
# `ready PID` line; sets steady_job (the started process) and steady_pid (the pid it printed). Returns 1, the job
# ended, when it ended or printed none in 60 s.
steady_start() {
  local prefix=$1 i
  shift
  "$@" >"$prefix.job.log" 2>"$prefix.job.err" &
  steady_job=$! steady_pid=""
  for i in $(seq 600); do
    steady_pid=$(sed -n 's/^ready \([0-9]*\)/\1/p' "$prefix.job.log" | head -1)
    [ -n "$steady_pid" ] && break
    kill -0 "$steady_job" 2>/dev/null || break
    sleep 0.1
  done
  [ -n "$steady_pid" ] && return 0
  kill "$steady_job" 2>/dev/null
  wait "$steady_job"
  return 1
}
# steady_end: the job ends by itself STEADY_S after it started; one that does not is ended.
steady_end() {
  local i
  for i in $(seq $((STEADY_S * 10 + 300))); do
    kill -0 "$steady_job" 2>/dev/null || break
    sleep 0.1
  done
  kill "$steady_job" 2>/dev/null
  wait "$steady_job"
}
attach_job() {
  local name=$1
  shift
  steady_start "$out/attach-$name" "$@" || { say "attach $name: the job did not start"; return; }
  local pid=$steady_pid
  sleep 3
  GPU_TOOLS_TRACE_LOG=debug RUST_LOG=info timeout 60 "$gt" trace --pid "$pid" --duration 2 -o "$tmp/attach-$name-1.gputrace" \
    >"$out/attach-$name.pid.txt" 2>&1
  echo "pid $?" >>"$out/attach-$name.rc"
  sleep 1.5
  GPU_TOOLS_TRACE_LOG=debug RUST_LOG=info timeout 60 "$gt" trace --pid "$pid" --counters --duration 2 \
    -o "$tmp/attach-$name-2.gputrace" >"$out/attach-$name.counters.txt" 2>&1
  echo "pid+counters $?" >>"$out/attach-$name.rc"
  steady_end
  rm -f "$tmp"/attach-"$name"-*.gputrace
}
if [[ " $PARTS " == *" attach "* ]]; then
  say "== attach: trace --pid, then trace --pid --counters, 2 s each (at $(elapsed) s)"
  rm -f "$out"/attach-*.rc
  attach_job c "$work" steady "$STEADY_S"
  [ "$have_torch" = 1 ] && attach_job torch $py "$work_py" --steady "$STEADY_S"
fi

# --- the flight recorder's cost: a job's rate after a window that left a recorder, against a twin's that left none
recorder_job() { # NAME FLAG COMMAND...: FLAG --flight-recorder (the default) or --no-flight-recorder
  local name=$1 flag=$2
  shift 2
  steady_start "$out/recorder-$name" "$@" || { say "recorder $name: the job did not start"; return; }
  sleep 3
  # Without the PC sampling before a first trace: the windows differ only in the recorder.
  local args=(--no-pc-primer)
  [ "$flag" = --no-flight-recorder ] && args+=("$flag")
  GPU_TOOLS_TRACE_LOG=debug timeout 60 "$gt" trace --pid "$steady_pid" --duration 0.5 -q "${args[@]}" \
    -o "$tmp/recorder-$name.gputrace" >"$out/recorder-$name.txt" 2>&1
  echo "$?" >"$out/recorder-$name.rc"
  steady_end
  rm -f "$tmp/recorder-$name.gputrace"
}
if [[ " $PARTS " == *" recorder "* ]]; then
  say "== recorder: a steady job after a 0.5 s window with and without the flight recorder (at $(elapsed) s)"
  rm -f "$out"/recorder-*.rc
  recorder_job c-on --flight-recorder "$work" steady "$STEADY_S"
  recorder_job c-off --no-flight-recorder "$work" steady "$STEADY_S"
  if [ "$have_torch" = 1 ]; then
    recorder_job torch-on --flight-recorder $py "$work_py" --steady "$STEADY_S"
    recorder_job torch-off --no-flight-recorder $py "$work_py" --steady "$STEADY_S"
  fi
fi

# --- the listing's cost: the same trace with and without --list
if [[ " $PARTS " == *" listing "* ]]; then
  say "== listing: the C flood under trace -o FILE with and without --list (at $(elapsed) s)"
  three_rounds listing $((BUDGET_S - reserve + 60)) "gt-default gt-list" "c_flood"
fi

# --- where the time of a traced launch goes
if [[ " $PARTS " == *" profile "* ]]; then
  say "== profile: the C flood, stage by stage (at $(elapsed) s)"
  three_rounds profile $((BUDGET_S - 20)) \
    "native floor-default floor-clock-flush stage-no-decode stage-no-convert stage-no-encode stage-no-send stage-full gt-default" \
    "c_flood"
  # The library's own account of each buffer: how long the writer held CUPTI's thread (decode to write).
  env CUDA_INJECTION64_PATH="$inject" NVTX_INJECTION64_PATH="$inject" GPU_TOOLS_TRACE_FILE="$tmp/delivery-%p.raw" \
    GPU_TOOLS_TRACE_KINDS=kernel,memcpy,memset,driver,runtime,nvtx GPU_TOOLS_TRACE_LOG=debug \
    timeout 120 "$work" flood "$C_FLOOD" >"$out/profile-delivery.out" 2>"$out/profile-delivery.log"
  rm -f "$tmp"/delivery-*.raw
  if command -v perf >/dev/null && [ $(elapsed) -lt $((BUDGET_S - 15)) ]; then
    perf record -F 2999 -g -o "$tmp/perf.data" -- "$gt" trace -o "$tmp/perf-%p.gputrace" -- "$work" flood "$C_FLOOD" \
      >"$tmp/perf.log" 2>&1
    perf report -i "$tmp/perf.data" --stdio --no-children -g none --sort dso,sym 2>/dev/null | grep -v '^#' | grep -v '^$' \
      | head -400 >"$out/perf-report.txt"
    perf report -i "$tmp/perf.data" --stdio --no-children -g none --sort dso 2>/dev/null | grep -v '^#' | grep -v '^$' \
      | head -40 >"$out/perf-dso.txt"
    say "perf: the traced C flood's profile by library and by symbol: perf-dso.txt, perf-report.txt"
  else
    say "perf: not installed (or no time left): the stage splits above are the breakdown"
  fi
fi

# --- where the time of a launch traced with --kinds kernel goes, above its floor
# The programs of the kernel and attrs parts: the C ones, and the PyTorch workloads (one process) where torch is.
ladder_programs=$c_programs
[ "$have_torch" = 1 ] && [ -n "$torch_list" ] && ladder_programs="$ladder_programs torch"

if [[ " $PARTS " == *" kernel "* ]]; then
  programs=$ladder_programs
  say "== kernel: --kinds kernel step by step over $programs (at $(elapsed) s)"
  n_rounds "$KERNEL_ROUNDS" kernel $((BUDGET_S - 5)) \
    "native floor-kernel floor-kernel-zeroed floor-kernel-clock-flush floor-kernel-subscribed stage-kernel-no-decode stage-kernel-full gt-kernel" \
    "$programs"
  # Untimed: how often CUPTI reads the clock through the timestamp callback in a traced C workload, the floor's
  # (CUPTI_FLOOR_CLOCK=count) and gpu-tools' (its debug log's count at the stream's end). Where the clock source has
  # no vDSO read, each call is a system call on the launching thread.
  for program in $c_programs; do
    case $program in c_sync) n=$C_SYNC m=sync ;; *) n=$C_FLOOD m=flood ;; esac
    env CUDA_INJECTION64_PATH="$floor" CUPTI_FLOOR_KINDS="$FLOOR_KERNEL" CUPTI_FLOOR_LIB="$cupti_lib" \
      CUPTI_FLOOR_CLOCK=count CUPTI_FLOOR_REPORT="$tmp/clock-$program.floor" "$work" "$m" "$n" >/dev/null 2>&1
    floor_calls=$(sed -n 's/.* timestamp_calls=\([0-9]*\).*/\1/p' "$tmp/clock-$program.floor" | head -1)
    GPU_TOOLS_TRACE_LOG=debug "$gt" trace --kinds kernel -q -o "$tmp/clock-$program-%p.gputrace" -- "$work" "$m" "$n" \
      >"$tmp/clock-$program.log" 2>&1
    gt_calls=$(grep -o 'the timestamp callback was called [0-9]* times' "$tmp/clock-$program.log" | tail -1 | grep -o '[0-9]*')
    say "clock calls ($program, $n launches, --kinds kernel): floor ${floor_calls:-?}, gpu-tools ${gt_calls:-?}" \
      | tee -a "$out/clock-calls.txt"
    rm -f "$tmp/clock-$program"-*.gputrace
  done
fi

if [[ " $PARTS " == *" attrs "* ]]; then
  programs=$ladder_programs
  say "== attrs: the kernel floor with CUPTI's activity attributes over $programs (at $(elapsed) s)"
  n_rounds "$KERNEL_ROUNDS" attrs $((BUDGET_S - 5)) \
    "native floor-kernel floor-kernel-pinned floor-kernel-unthreaded floor-kernel-prealloc floor-kernel-bigbuf" \
    "$programs"
fi

say "== done in $(elapsed) s"
$py "$report_py" "$out" | tee "$out/report.txt"
# A smoke run checks that every part runs: any failed or untraced run fails it.
if [ "${SMOKE:-0}" = 1 ] && awk -F'\t' '$9 == "failed" || $9 == "missing" || ($7 != 0 && $7 != 3) { bad = 1 } END { exit !bad }' "$out/raw.tsv"; then
  say "smoke run: some runs failed or ran untraced (raw.tsv, failed-*.log)"
  exit 1
fi
