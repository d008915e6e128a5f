#!/usr/bin/env bash
# Which earlier attach leaves PC sampling with no stall record? Fresh jobs of survival_job.py, each attached in its
# own order, every PC sampling window 1 s (`profile --pid --pc-sampling`), each line with CUPTI's samples and how many
# it put outside the program's kernels (non-user):
#   A eager:      trace --pid, then PC sampling
#   B eager:      PC sampling, trace --pid, PC sampling
#   C eager:      trace --pid --no-flight-recorder, then PC sampling
#   D eager:      trace --pid --kinds kernel, then PC sampling
#   E eager:      trace --pid --kinds kernel --no-flight-recorder --cuda-graph-trace node (kernel records alone: no
#                 recorder's subscriber, no graph-level records), then PC sampling
#   P eager:      trace --pid with its PC sampling before the first trace (the default since trace/pc_primer.rs;
#                 A, C, D and E run with --no-pc-primer, as they were first run), then PC sampling twice, a trace
#                 between
#   J jax:        PC sampling first
#   K cupy-graph: PC sampling first
# SET=2 runs a second set instead (which part of a first trace breaks PC sampling, and what a short PC window first
# does):
#   G eager:      PC sampling for 0.1 s (the CLI raises it to 1 s since a 0.1 s window hung a job), trace --pid,
#                 then PC sampling
#   F cupy-graph: trace --pid, then PC sampling (a program that links no CUPTI of its own: no redirect of its calls)
#   E eager:      as in the first set, alone
# SET=3 asks whether PC sampling attributes only kernels whose modules were loaded after some moment (the stall
# records' count, and of them the kernels of work the job starts only when told, NEW_WORK_FILE in survival_job.py):
#   L eager, CUDA_MODULE_LOADING=EAGER (every module loaded at the start, before any attach): PC sampling first
#   M eager (lazy loading, the default): PC sampling first, the baseline
#   A eager: trace --pid --no-pc-primer, PC sampling (0 before), then new work (i0e, loaded now), PC sampling
#   J jax (command buffers): PC sampling first, then new work (compiled now), PC sampling
#   N jax, XLA's command buffers off: PC sampling first
# SET=4 asks whether a PC sampling with no stall record before a first trace (the job idle on the GPU then: the
# matrix's fork-child waiting for its child) keeps later windows' as one with stall records does:
#   I eager, paused (PAUSE_FILE) through its first trace, whose PC sampling before it then finds no kernel; resumed,
#             then PC sampling twice (refused since the 38th session, with the reason)
#   O the same with GT_OLD (a build from before that refusal): the windows run, and say what CUPTI counted
#   Q eager, running through its first trace: PC sampling after it (the control)
# SET=5 asks whether a second PC sampling, with launches, after a first one without (the job paused then) and before
# the first trace, keeps later windows' stall records: where it does, a primer that found nothing can be tried again
# rather than leave the job's PC sampling blind after its trace (the matrix's fork-child, the 41st session):
#   R eager, paused: PC sampling (nothing to sample); resumed: PC sampling, trace --pid, PC sampling twice. An H100
#             (2026-12-07, a build from before the refusal) said no: the second window, the job launching again,
#             counted 2,740,546 samples, all outside the program's kernels, and both after the trace as many; since
#             then every window after the idle first is refused, with the reason
#   I eager, paused through its first trace (its primer finds no kernel; what CUPTI counted in it is said), resumed,
#             PC sampling (refused since the 38th session)
#   Q eager, running through its first trace: PC sampling after it (the control)
# Found by the survival matrix (16 jobs on one H200, 2026-12-02): PC sampling after a trace window of the same
# process counted millions of samples, all outside the program's kernels; an eager job's first attach, PC sampling,
# gave 8,192 records beside five busy processes (pc_shared_probe.sh).
#
# Stage first, then: bash gpu-host/scripts/pc_order_probe.sh     (OUT: logs, default /tmp/pc_order_probe)
set -u
root=$(cd "$(dirname "$0")/../.." && pwd); gt=$root/.gpu/bin/bin-gpu-tools; py=${PYTHON:-python3}
job=$root/gpu-host/python/survival_job.py
out=${OUT:-/tmp/pc_order_probe}; mkdir -p "$out"
# SEGV_BACKTRACE=1: the jobs get gpu-host/support/segv_backtrace.c preloaded (the native stack of a fatal signal in
# the job's log), as in attach_matrix.sh: a JAX job of SET=3 died in its second PC sampling window with none.
if [ "${SEGV_BACKTRACE:-0}" = 1 ] && gcc -shared -fPIC -O1 -o "$out/segv_backtrace.so" "$root/gpu-host/support/segv_backtrace.c"; then
  py="env LD_PRELOAD=$out/segv_backtrace.so $py"
fi
unset GPU_TOOLS_INJECT_LIB
export STOP_FILE=$out/stop; rm -f "$STOP_FILE"
. "$root/gpu-host/support/job_ready.sh"
n=0
pcs() { # LABEL PID [SECONDS]
  n=$((n + 1)); local f=$out/$n-$1-pc.txt
  timeout 60 "$gt" profile --pid "$2" --duration "${3:-1}" --pc-sampling > "$f" 2>&1
  echo "$1 pc: rc=$? records=$(grep -o '[0-9]* stall records from' "$f" | head -1 | cut -d' ' -f1)" \
    "$(grep -o 'counted [0-9]* samples in [0-9]* PC records ([0-9]* dropped, [0-9]* outside' "$f" | head -1)" \
    "$(grep -o 'held by another tool\|GetData failed: [A-Z_]*\|range profiler ran in this process\|first PC sampling window had no stall record\|first gpu-tools attach traced it' "$f" | head -1)"
}
trc() { # LABEL PID [ARGS]
  n=$((n + 1)); local f=$out/$n-$1-trace.txt l=$1 p=$2; shift 2
  # P's trace says what its PC sampling before the first trace came to: not --quiet there.
  local q=-q; case $l in P | I | O | Q | R) q=--no-progress ;; esac
  # The command's whole time (a 1 s window): with the PC sampling before a first trace, what that costs.
  local t0 rc; t0=$(date +%s%N)
  timeout 60 "$gt" trace --pid "$p" --duration 1 $q -o "$out/$n.gputrace" "$@" > "$f" 2>&1
  rc=$?
  echo "$l trace $*: rc=$rc in $(( ($(date +%s%N) - t0) / 1000000 )) ms, $(grep -o '[0-9]* kernels' "$f" | head -1)" \
    "$(grep -o 'sampled before its first trace ([0-9]* stall records\|sampled before its first trace, with no stall record [a-z ]*\|not sampled before its first trace: .\{0,80\}' "$f" | head -1)" \
    "$(grep -o 'CUPTI counted [0-9]* samples in it, [0-9]* of them outside' "$f" | head -1)"
  rm -f "$out/$n.gputrace"
}
declare -A pid
# SET=4 and 5: eager jobs, those named first paused (PAUSE_FILE) until `resume`, the last running (Q).
paused_and_running() { # PAUSED... RUNNING
  local j last=${*: -1}
  for j in "${@:1:$#-1}"; do
    touch "$out/$j.pause"
    PAUSE_FILE=$out/$j.pause $py "$job" eager --seconds 300 > "$out/$j.log" 2>&1 &
  done
  $py "$job" eager --seconds 300 > "$out/$last.log" 2>&1 &
  for j in "$@"; do pid[$j]=$(job_ready "$out/$j.log" 120) || { echo "$j did not start: $(tail -3 "$out/$j.log")"; }; done
  sleep 1
}
resume() { rm -f "$out/$1.pause"; sleep 1; echo "$1: $(grep -m1 '^paused' "$out/$1.log"), $(grep -m1 '^resumed' "$out/$1.log")"; }
results() { # JOB...
  touch "$STOP_FILE"; wait
  local j; for j in "$@"; do echo "$j: $(grep -m1 '^result' "$out/$j.log" || tail -c 300 "$out/$j.log")"; done
}
if [ "${SET:-1}" = 5 ]; then
  paused_and_running R I Q
  pcs R "${pid[R]}"; resume R; pcs R "${pid[R]}"; trc R "${pid[R]}"; pcs R "${pid[R]}"; pcs R "${pid[R]}"
  trc I "${pid[I]}"; resume I; pcs I "${pid[I]}"
  trc Q "${pid[Q]}"; pcs Q "${pid[Q]}"
  results R I Q
  exit 0
fi
if [ "${SET:-1}" = 4 ]; then
  gt_new=$gt gt_old=${GT_OLD:-$gt}
  paused_and_running I O Q
  trc I "${pid[I]}"; resume I; pcs I "${pid[I]}"; pcs I "${pid[I]}"
  gt=$gt_old; trc O "${pid[O]}"; resume O; pcs O "${pid[O]}"; pcs O "${pid[O]}" 2; gt=$gt_new
  trc Q "${pid[Q]}"; pcs Q "${pid[Q]}"
  results I O Q
  exit 0
fi
if [ "${SET:-1}" = 3 ]; then
  new() { touch "$out/$1.new"; sleep "${2:-1}"; echo "$1 new work: $(grep -m1 '^new_work' "$out/$1.log")"; }
  newpcs() { pcs "$@"; echo "  of them i0e's: $(grep -c 'i0e' "$out/$n-$1-pc.txt")"; }
  CUDA_MODULE_LOADING=EAGER $py "$job" eager --seconds 300 > "$out/L.log" 2>&1 &
  $py "$job" eager --seconds 300 > "$out/M.log" 2>&1 &
  NEW_WORK_FILE=$out/A.new $py "$job" eager --seconds 300 > "$out/A.log" 2>&1 &
  # J's optimized HLO is dumped: which of its kernels are cuBLAS's (kernels CUPTI does not expose to PC sampling)
  # and which XLA's own fusions.
  NEW_WORK_FILE=$out/J.new XLA_FLAGS="--xla_dump_to=$out/J-hlo --xla_dump_hlo_as_text --xla_gpu_autotune_level=0" \
    $py "$job" jax --seconds 300 > "$out/J.log" 2>&1 &
  XLA_FLAGS="--xla_gpu_enable_command_buffer= --xla_gpu_autotune_level=0" $py "$job" jax --seconds 300 > "$out/N.log" 2>&1 &
  for j in L M A J N; do pid[$j]=$(job_ready "$out/$j.log" 120) || { echo "$j did not start: $(tail -3 "$out/$j.log")"; }; done
  sleep 1
  pcs L "${pid[L]}"; pcs M "${pid[M]}"
  trc A "${pid[A]}" --no-pc-primer; newpcs A "${pid[A]}"; new A; newpcs A "${pid[A]}"; newpcs A "${pid[A]}"
  pcs J "${pid[J]}"; new J 3; pcs J "${pid[J]}"
  pcs N "${pid[N]}"
  touch "$STOP_FILE"; wait
  for j in L M A J N; do echo "$j: $(grep -m1 '^result' "$out/$j.log" || tail -c 300 "$out/$j.log")"; done
  echo "J's optimized HLO: $(cat "$out"/J-hlo/*after_optimizations.txt 2>/dev/null | grep -o 'custom_call_target="[^"]*"' | sort | uniq -c | tr '\n' ';') fusions $(cat "$out"/J-hlo/*after_optimizations.txt 2>/dev/null | grep -c ' fusion(')"
  exit 0
fi
if [ "${SET:-1}" = 2 ]; then
  for j in G:eager F:cupy-graph E:eager; do
    $py "$job" "${j#*:}" --seconds 300 > "$out/${j%%:*}.log" 2>&1 &
  done
  for j in G F E; do pid[$j]=$(job_ready "$out/$j.log" 120) || { echo "$j did not start: $(tail -3 "$out/$j.log")"; }; done
  sleep 1
  pcs G "${pid[G]}" 0.1; trc G "${pid[G]}"; pcs G "${pid[G]}"
  trc F "${pid[F]}"; pcs F "${pid[F]}"
  trc E "${pid[E]}" --kinds kernel --no-flight-recorder --cuda-graph-trace node; pcs E "${pid[E]}"
  touch "$STOP_FILE"; wait
  for j in G F E; do echo "$j: $(grep -m1 '^result' "$out/$j.log" || tail -c 300 "$out/$j.log")"; done
  exit 0
fi
for j in A:eager B:eager C:eager D:eager E:eager P:eager J:jax K:cupy-graph; do
  $py "$job" "${j#*:}" --seconds 300 > "$out/${j%%:*}.log" 2>&1 &
done
for j in A B C D E P J K; do pid[$j]=$(job_ready "$out/$j.log" 120) || { echo "$j did not start: $(tail -3 "$out/$j.log")"; }; done
sleep 1
[ -n "${pid[J]:-}" ] && pcs J "${pid[J]}"
[ -n "${pid[K]:-}" ] && pcs K "${pid[K]}"
pcs B "${pid[B]}"
trc A "${pid[A]}" --no-pc-primer; pcs A "${pid[A]}"
trc B "${pid[B]}"; pcs B "${pid[B]}"
trc C "${pid[C]}" --no-flight-recorder --no-pc-primer; pcs C "${pid[C]}"
trc D "${pid[D]}" --kinds kernel --no-pc-primer; pcs D "${pid[D]}"
trc E "${pid[E]}" --kinds kernel --no-flight-recorder --cuda-graph-trace node --no-pc-primer; pcs E "${pid[E]}"
trc P "${pid[P]}"; pcs P "${pid[P]}"; trc P "${pid[P]}"; pcs P "${pid[P]}"
pcs A "${pid[A]}"
touch "$STOP_FILE"; wait
for j in A B C D E P J K; do echo "$j: $(grep -m1 '^result' "$out/$j.log" || tail -c 300 "$out/$j.log")"; done
