#!/usr/bin/env bash
# Causes behind the survival matrix's open rows, one section each (all output in $OUT/causes.txt):
#   where-together  N eager PyTorch jobs on one GPU, each examined by a `where` started at the same moment: first
#                   with every `where` in a network namespace of its own (`unshare -n`: they cannot see each
#                   other's host lock, as before the lock), then plainly (the lock makes them one at a time). Prints
#                   each job's exit code and, for a job that died, Python's faulthandler lines.
#   ddp             a 2-rank DDP job (two GPUs), 1 s `trace --pid-tree` windows: launches without kernel records per
#                   rank (trace_launch_coverage.py), and the injected library's account of what CUPTI delivered.
#   copies          the C probe traced with copy and set records asked for, the library's account per window.
#   fork-profile    the fork-child job (it forks and execs a CUDA child every 2000 steps) under `profile --pid`
#                   again and again, one job per TOOL of FORK_TOOLS (default `metrics pc trace`; `cm`: `trace
#                   --counters` and `profile` metrics in turn, as the matrix's row did): does the job live? The job
#                   runs FORK_SECONDS (default 40) with gpu-host/support/segv_backtrace.c preloaded.
#                   (In the matrix it died by SIGSEGV once, after a metrics attach begun while it waited for its
#                   child.) Prints each job's exit code and, for one that died, its log's end.
#   profiler-open   a job whose torch.profiler session is open: trace, profile --pid (metrics, PC sampling), then
#                   PROFILER_TRACES (default 10) traces, each with its launches without kernels (job: PROFILER_SECONDS, 30);
#                   the job's own kernel count against an untouched run of the same steps.
#
#   bash gpu-host/scripts/attach_causes.sh [SECTION...]   (after staging .gpu/, as attach_matrix.sh)
# Settings: OUT (default /tmp/attach_causes), N (where-together's jobs per round, default 6), HOWS (its rounds:
# `unshared` (one job, its where in another network namespace) and `locked`; default locked), GPU (the GPU of the one-GPU sections, default 0). A job or command that
# outlives its time is killed and reported `hung`.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd); gt=$root/.gpu/bin/bin-gpu-tools; py=${PYTHON:-python3}
job=$root/gpu-host/python/survival_job.py; cover=$root/gpu-host/python/trace_launch_coverage.py
out=${OUT:-/tmp/attach_causes}; mkdir -p "$out"
cupti=${CUPTI:-/usr/local/cuda/targets/x86_64-linux/lib/libcupti.so.13}
export TORCHINDUCTOR_CACHE_DIR=${TORCHINDUCTOR_CACHE_DIR:-$out/inductor-cache}
sections=${*:-where-together copies profiler-open ddp}
gpu=${GPU:-0}

# ready LOG JOBPID: the pid of LOG's `ready PID` line, waiting while JOBPID lives.
ready() {
  for _ in $(seq 3000); do
    local line; line=$(grep -m1 -o '^ready [0-9]*' "$1" 2>/dev/null)
    [ -n "$line" ] && { echo "${line#ready }"; return 0; }
    kill -0 "$2" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}
# await PID SECONDS: waits for a child up to SECONDS, then kills it (SIGKILL) as hung; sets rc to its exit code or
# `hung`. (Not in a command substitution: a subshell cannot wait for its parent's children.)
await() {
  local t=0
  while kill -0 "$1" 2>/dev/null && [ $t -lt $(($2 * 10)) ]; do sleep 0.1; t=$((t + 1)); done
  if kill -0 "$1" 2>/dev/null; then kill -9 "$1" 2>/dev/null; wait "$1" 2>/dev/null; rc=hung; else wait "$1"; rc=$?; fi
}
# account LOG: the injected library's end-of-stream accounts in a job's log (GPU_TOOLS_TRACE_LOG=debug).
account() { grep -o 'stream ended: .*' "$1" | cut -c1-400; }

for section in $sections; do
  echo "=== $section ($(date +%T))"
  case $section in
  where-together)
    for how in ${HOWS:-locked}; do
      n=${N:-6}; [ $how = unshared ] && n=1
      echo "## $how: $n jobs, one where each at once"
      pids=() jobs=()
      for i in $(seq "$n"); do
        CUDA_VISIBLE_DEVICES=$gpu $py -X faulthandler "$job" eager --seconds 20 > "$out/w$how$i.log" 2>&1 &
        jobs+=($!)
      done
      for i in $(seq "$n"); do pids+=("$(ready "$out/w$how$i.log" "${jobs[$((i - 1))]}")"); done
      sleep 3
      ws=()
      for i in $(seq "$n"); do
        if [ $how = unshared ]; then unshare -n timeout 60 "$gt" where --yes "${pids[$((i - 1))]}" > "$out/w$how$i.where" 2>&1 &
        else timeout 100 "$gt" where --yes "${pids[$((i - 1))]}" > "$out/w$how$i.where" 2>&1 & fi
        ws+=($!)
      done
      for i in $(seq "$n"); do
        await "${ws[$((i - 1))]}" 110; echo "where $i rc=$rc"; grep -vE '^ +sm ' "$out/w$how$i.where" | head -8 | cut -c1-200
      done
      for i in $(seq "$n"); do
        await "${jobs[$((i - 1))]}" 40
        echo "job $i rc=$rc $(grep -m1 '^result' "$out/w$how$i.log") progress lines $(grep -c '^progress' "$out/w$how$i.log")"
        [ "$rc" = 0 ] || grep -v '^progress' "$out/w$how$i.log" | tail -25
      done
    done ;;
  copies)
    nvcc -O2 -o "$out/probe" "$root/gpu-host/scripts/where_after_cupti_probe.cu" -ldl || continue
    CUDA_VISIBLE_DEVICES=$gpu GPU_TOOLS_TRACE_LOG=debug "$out/probe" none 14 "$cupti" > "$out/probe.log" 2>&1 &
    j=$!; pid=$(ready "$out/probe.log" $j) || continue
    for n in 1 2 3 4 5 6; do
      GPU_TOOLS_TRACE_LOG=debug timeout 60 "$gt" trace --pid "$pid" --duration 1 --kinds kernel,memcpy,memset,runtime,nvtx -q -o "$out/c.gputrace" > "$out/c.txt" 2>&1
      echo "-- window $n rc=$?: $(grep -m1 summary "$out/c.txt")"; grep -E 'note|warn' "$out/c.txt" | cut -c1-200
      sleep 0.3
    done
    await $j 30; echo "probe rc=$rc"; tail -1 "$out/probe.log"; account "$out/probe.log" ;;
  fork-profile)
    # The native stack of a fatal signal, printed into the job's log (gpu-host/support/segv_backtrace.c).
    segv_bt=$out/segv_backtrace.so
    gcc -shared -fPIC -O1 -o "$segv_bt" "$root/gpu-host/support/segv_backtrace.c" || segv_bt=
    for tool in ${FORK_TOOLS:-metrics pc trace}; do
      echo "## fork-child under $tool"
      CUDA_VISIBLE_DEVICES=$gpu LD_PRELOAD=${segv_bt:-} $py -X faulthandler "$job" fork-child --seconds "${FORK_SECONDS:-40}" \
        > "$out/f$tool.log" 2>&1 &
      j=$!; pid=$(ready "$out/f$tool.log" $j) || continue
      n=0
      while kill -0 $j 2>/dev/null; do
        n=$((n + 1))
        case $tool in
        metrics) timeout 90 "$gt" profile --pid "$pid" --duration 2 > "$out/f.txt" 2>&1 ;;
        cm) if [ $((n % 2)) = 1 ]; then timeout 90 "$gt" trace --pid "$pid" --counters --duration 2 -q -o "$out/f.gputrace" > "$out/f.txt" 2>&1
            else timeout 90 "$gt" profile --pid "$pid" --duration 3 > "$out/f.txt" 2>&1; fi ;;
        pc) timeout 90 "$gt" profile --pid "$pid" --duration 1 --pc-sampling > "$out/f.txt" 2>&1 ;;
        trace) timeout 90 "$gt" trace --pid "$pid" --duration 1 -q -o "$out/f.gputrace" > "$out/f.txt" 2>&1 ;;
        esac
        echo "attach $n rc=$? $(date +%T.%N | cut -c1-12): $(grep -m1 -E 'profiled|summary|no moment|not possible|error' "$out/f.txt" | cut -c1-160)"
        sleep 0.5
      done
      await $j 5
      echo "job rc=$rc $(grep -m1 '^result' "$out/f$tool.log")"
      [ "$rc" = 0 ] || { grep -v '^progress' "$out/f$tool.log" | tail -60; tail -15 "$out/f.txt"; }
    done ;;
  profiler-open)
    CUDA_VISIBLE_DEVICES=$gpu GPU_TOOLS_TRACE_LOG=debug $py "$job" profiler-open --seconds "${PROFILER_SECONDS:-30}" > "$out/p.log" 2>&1 &
    j=$!; pid=$(ready "$out/p.log" $j) || continue
    for tool in trace metrics trace pc $(for _ in $(seq "${PROFILER_TRACES:-10}"); do echo trace; done); do
      case $tool in
      trace) GPU_TOOLS_TRACE_LOG=debug timeout 60 "$gt" trace --pid "$pid" --duration 1 -q -o "$out/p.gputrace" > "$out/p.txt" 2>&1 ;;
      metrics) timeout 60 "$gt" profile --pid "$pid" --duration 1 > "$out/p.txt" 2>&1 ;;
      pc) timeout 60 "$gt" profile --pid "$pid" --duration 1 --pc-sampling > "$out/p.txt" 2>&1 ;;
      esac
      echo "-- $tool rc=$?: $(grep -m1 summary "$out/p.txt")"; grep -E 'note|warn|error|profil' "$out/p.txt" | cut -c1-260 | head -6
      [ $tool = trace ] && "$gt" export "$out/p.gputrace" --chrome "$out/p.json" > /dev/null 2>&1 && $py "$cover" "$out/p.json" > "$out/p.cover" 2>&1; head -2 "$out/p.cover"
      rm -f "$out/p.json"
      sleep 0.5
    done
    # The job's profiler builds its events at the end: a minute or more for a million kernels.
    await $j 240; echo "job rc=$rc"; grep -E '^(result|torch_profiler)' "$out/p.log"
    steps=$(grep -m1 '^result' "$out/p.log" | grep -o 'steps [0-9]*' | cut -d' ' -f2)
    [ -n "$steps" ] && CUDA_VISIBLE_DEVICES=$gpu timeout 300 $py "$job" profiler-open --steps "$steps" 2>&1 | grep -E '^(result|torch_profiler)' | sed 's/^/untouched: /'
    account "$out/p.log" ;;
  ddp)
    CUDA_VISIBLE_DEVICES=0,1 GPU_TOOLS_TRACE_LOG=debug $py -m torch.distributed.run --nproc-per-node 2 --master-port 29531 \
      "$root/gpu-host/python/ddp_job.py" --steps "${DDP_STEPS:-30000}" > "$out/ddp.log" 2>&1 &
    j=$!; sleep 15
    for n in 1 2 3 4 5; do
      GPU_TOOLS_TRACE_LOG=debug timeout 60 "$gt" trace --pid-tree $j --duration 1 -q -o "$out/d.gputrace" > "$out/d.txt" 2>&1
      echo "-- window $n rc=$?: $(grep -m1 summary "$out/d.txt")"; grep -E 'warn|left out|queued|not run' "$out/d.txt" | cut -c1-220
      "$gt" export "$out/d.gputrace" --chrome "$out/d.json" > /dev/null 2>&1 && $py "$cover" "$out/d.json" | head -8
      rm -f "$out/d.json"; sleep 0.5
    done
    kill $j 2>/dev/null; await $j 20; echo "torchrun rc=$rc"; account "$out/ddp.log" ;;
  esac
done 2>&1 | tee "$out/causes.txt"
