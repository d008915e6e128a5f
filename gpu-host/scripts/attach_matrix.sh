#!/usr/bin/env bash
# The attach survival matrix: real jobs, each started plainly (python3 or its own binary, no gpu-tools variable),
# attached to at least ATTACHES times over its life with every attaching command in turn (trace --pid in graph and
# node mode, trace --pid --counters, profile --pid metrics and PC sampling, where), windows of 0.5 to 3 s, then left
# to end. The attached job runs for JOB_SECONDS and says how many steps it ran; an untouched run of exactly those steps
# follows (the threads row checks its own buffers; DDP's untouched run, of fixed steps, runs beside the attached
# one on the same GPUs). A row passes when the attached job's exit code and printed result equal the untouched
# run's, its own torch.profiler count (profiler-open) is within 1% of the
# untouched one's, and every window gave what it should (exit 0; a trace window holds records of work, and a kernel
# record for every kernel launch it recorded). A `where` after an earlier CUPTI attach is refused by driver 580
# (`refused-after-cupti`, said by where): counted apart, not as a failure. The other way round holds too: after a
# `where`, CUPTI refuses the process (CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED), so `where` comes late.
# `where` runs with --yes: it asks before attaching to a job whose own profiler library is loaded, and nothing here
# answers.
# Also counted apart, each said by the tool and named in the row's notes: `profile --pid` refused beside the
# program's recording profiler (`refused-program-profiler`) or for want of a moment with no thread inside the
# driver (`refused-no-quiet-moment`), a trace window in which the job was idle (`ok-idle`), and a job that ended
# before or inside a window (`job-ended`, `job-ended-in-window`; the row's exit code is judged all the same).
#
# Stage first (STAGE_ONLY='^gpu-tools$' scripts/gpu-stage), then, in the checkout that goes with .gpu/:
#   bash gpu-host/scripts/attach_matrix.sh [ROW...]     (default: every row; ddp needs two GPUs)
# Rows: eager amp graph compile compile-ro profiler-open capture-late fork-child jax cupy-graph threads ddp
# Settings: OUT (logs, default /tmp/attach_matrix; KEEP_TRACES=1 keeps every window's trace file; a failed window's is always kept), PARALLEL (rows at once, default 4), ATTACHES (default 10),
# JOB_SECONDS (each attached job's life, default 60; profiler-open runs half of it: its profiler keeps every event;
# threads twice: its windows are slow and its untouched run short),
# TOOLS (the attaching commands in turn, default every one: trace trace-node counters metrics pc-sampling where),
# SEGV_BACKTRACE=1 (the native stack of a job's fatal signal in its log: see below), DEBUG_ROWS (rows attached with
# the injection library's debug log, in the job's log), HANG_SECONDS (see the row's end).
# GPU_BASE=N: the first row takes GPU N (default 0), so that two runs of the script beside each other (each with
# its own OUT, whose locks are its own) keep to GPUs of their own.
# On a host with several GPUs the rows take them in turn (CUDA_VISIBLE_DEVICES), each GPU with its own lock.
# The device-wide tools (counters, the range profiler, PC sampling) take their GPU's lock, so that the rows'
# attaches never hold them at the same time; traces and where do not.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd); gt=$root/.gpu/bin/bin-gpu-tools; py=${PYTHON:-python3}
job=$root/gpu-host/python/survival_job.py
out=${OUT:-/tmp/attach_matrix}; mkdir -p "$out"
parallel=${PARALLEL:-4}; attaches=${ATTACHES:-10}; seconds=${JOB_SECONDS:-60}; gpu_base=${GPU_BASE:-0}
gpus=$(nvidia-smi -L 2>/dev/null | wc -l); [ "$gpus" -ge 1 ] || gpus=1
[ -x "$gt" ] || { echo "missing $gt (stage the workspace)"; exit 1; }
unset GPU_TOOLS_INJECT_LIB
export TORCHINDUCTOR_CACHE_DIR=${TORCHINDUCTOR_CACHE_DIR:-$out/inductor-cache}
rows=${*:-eager amp graph compile compile-ro profiler-open capture-late fork-child jax cupy-graph threads ddp}
windows=(0.5 1 2 3)
read -r -a tools <<< "${TOOLS:-trace trace-node counters metrics trace pc-sampling where trace-node trace counters metrics where}"

wait_ready() { # LOG JOB: prints the pid of the first `ready PID` line, waiting up to 300 s while JOB lives
  local line
  for _ in $(seq 3000); do
    line=$(grep -m1 '^ready [0-9]*' "$1" 2>/dev/null)
    [ -n "$line" ] && { echo "$line" | grep -o 'ready [0-9]*' | cut -d' ' -f2; return 0; }
    kill -0 "$2" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}
alive() { [ -d "/proc/$1" ] && [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]; }

# locked CMD...: CMD holding the row's GPU locks (both GPUs' for DDP).
locked() {
  if [ "${#row_locks[@]}" -ge 2 ]; then flock "${row_locks[0]}" flock "${row_locks[1]}" "$@"
  else flock "${row_locks[0]}" "$@"; fi
}

# attach ROW N TOOL WINDOW TARGET...: one attach; prints `attach N TOOL WINDOW rc=RC ms=MS records=R ok|FAIL`.
attach() {
  local row=$1 n=$2 tool=$3 w=$4; shift 4
  local f=$out/$row/attach$n-$tool t0 rc records ok
  t0=$(date +%s%N)
  case $tool in
  trace) timeout 120 "$gt" trace "$@" --duration "$w" -q -o "$f.gputrace" > "$f.txt" 2>&1 ;;
  trace-node) timeout 120 "$gt" trace "$@" --duration "$w" --cuda-graph-trace node -q -o "$f.gputrace" > "$f.txt" 2>&1 ;;
  counters) locked timeout 120 "$gt" trace "$@" --duration "$w" --counters -q -o "$f.gputrace" > "$f.txt" 2>&1 ;;
  metrics) locked timeout 120 "$gt" profile "$@" --duration "$w" > "$f.txt" 2>&1 ;;
  pc-sampling) locked timeout 120 "$gt" profile "$@" --duration "$w" --pc-sampling > "$f.txt" 2>&1 ;;
  where) if [ "$1" = --pid ]; then timeout 120 "$gt" where --yes "$2" > "$f.txt" 2>&1
         else timeout 120 "$gt" where --yes "$@" > "$f.txt" 2>&1; fi ;;
  esac
  rc=$?
  records=-
  ok=ok
  case $tool in
  trace | trace-node | counters)
    # Kernels plus graph launches of the window's summary.
    records=$(awk '/^--- summary/ { for (i = 1; i <= NF; i++) if ($i ~ /^kernels,?$/) k = $(i - 1) }
                   /CUDA graph launches, each recorded/ { g = $1 } END { print (k + 0) + (g + 0) }' "$f.txt")
    # Exit 3 with records: CUPTI dropped some and the trace said so (the window is not whole, the job unharmed).
    if [ "${records:-0}" -gt 0 ] && [ "$rc" -eq 3 ]; then ok=ok-said-incomplete
    elif [ "$rc" -eq 0 ] && [ "${records:-0}" -eq 0 ] && grep -q '(note): no record of work in the .* it was nearly idle' "$f.txt"
    then ok=ok-idle  # the job did nothing on the GPU then (fork-child waiting for its child): said, counted apart
    elif [ "$rc" -ne 0 ] || [ "${records:-0}" -eq 0 ]; then ok=FAIL; fi
    # Every kernel launch of the window has its kernel record (trace_launch_coverage.py; a few at the edges may not).
    # Kernels CUPTI gave unfinished at the last flush (no end time) were left out by the trace, which says how many:
    # their launches are the window's edge too.
    local unfinished
    unfinished=$(grep -o '[0-9]* records of work that had not finished' "$f.txt" | head -1 | cut -d' ' -f1)
    if [ "$ok" != FAIL ] && [ -f "$f.gputrace" ] && "$gt" export "$f.gputrace" --chrome "$f.json" > /dev/null 2>&1; then
      $py "$root/gpu-host/python/trace_launch_coverage.py" --check $((100 + ${unfinished:-0})) "$f.json" > "$f.coverage.txt" 2>&1 \
        || { ok=FAIL; records="$records,launches-without-kernels:$(grep -o '[0-9]* without a GPU record' "$f.coverage.txt" | cut -d' ' -f1)"; }
      rm -f "$f.json"
    fi
    # The trace's own judgement of the same (launches without kernel records, queued ones and captures left out).
    if grep -q 'kernel launches have no kernel record' "$f.txt"; then ok=FAIL; records="$records,trace-warns-missing"; fi ;;
  # profile --pid does not profile beside the program's own recording profiler (it would stop its records): said,
  # and not a failure of the job.
  metrics | pc-sampling) if [ "$rc" -eq 0 ]; then :
         elif grep -q "the program's own profiler is recording" "$f.txt"; then ok=refused-program-profiler
         # Every stop found a thread inside the driver or CUPTI (NCCL's watchdog), at the search's end or, for one
         # thread at the same place at every stop, after a few stops (named): the profile is not started there.
         elif grep -qE 'no moment without a thread inside the CUDA driver or CUPTI|inside [^ ]+ at every stop \(' "$f.txt"
         then ok=refused-no-quiet-moment
         else ok=FAIL; fi ;;
  # The driver refuses the debugger in a process where CUPTI has run (driver 580; where says so): not a failure of
  # this attach, but the rule it reports. Counted apart.
  where) if [ "$rc" -eq 0 ]; then :
         elif grep -q 'refuses the debugger in any process where CUPTI has' "$f.txt"; then ok=refused-after-cupti
         else ok=FAIL; fi ;;
  *) [ "$rc" -eq 0 ] || ok=FAIL ;;
  esac
  # The job ended between the last window and this one: no window, nothing to judge.
  if [ "$ok" = FAIL ] && grep -q "no process $2\b" "$f.txt" 2>/dev/null; then ok=job-ended; fi
  # The job ended during the window (its exit code is judged with the row's, so a crash still fails the row).
  if [ "$ok" = FAIL ] && [ "${#target[@]}" -ge 2 ] && ! alive "${target[1]}"; then ok=job-ended-in-window; fi
  # The traces are large; their summaries stay (KEEP_TRACES=1 keeps them too). A failed window's trace is kept: it is
  # what tells a missing record from a miscount (an eager window once lacked half its kernels, and was deleted).
  [ -n "${KEEP_TRACES:-}" ] || [ "$ok" = FAIL ] || rm -f "$f.gputrace"
  echo "attach $n $tool ${w}s rc=$rc ms=$((($(date +%s%N) - t0) / 1000000)) records=$records $ok"
}

# row NAME GPU: runs one row on GPU (an index); its last line is `ROW NAME ... PASS|FAIL`.
row() {
  local name=$1 d=$out/$1 pid untouched= attached target n=0 fails=0 rc_u rc_a verdict=PASS notes=""
  mkdir -p "$d"
  # DEBUG_ROWS: rows whose attaches run with the injection library's debug log (it lands in the job's stderr).
  [[ " ${DEBUG_ROWS:-} " == *" $name "* ]] && export GPU_TOOLS_TRACE_LOG=debug
  # The job sees its GPU alone; the attaching commands see every GPU, as an operator's shell does.
  local cvd=$2
  if [ "$name" = ddp ]; then
    row_locks=("$out/gpu0.lock" "$out/gpu1.lock"); cvd=0,1
  else
    row_locks=("$out/gpu$2.lock")
  fi
  case $name in
  threads)
    nvcc -O2 -std=c++17 -o "$d/threads" "$root/gpu-host/scripts/survival_threads.cu" > "$d/nvcc.txt" 2>&1 \
      || { echo "ROW $name FAIL (nvcc: $(head -c 300 "$d/nvcc.txt"))"; return; }
    # Twice the life: its attaches take up to 33 s (four threads always inside the driver), and its untouched run is
    # 3 s, so the row still ends with the others (at 90 s it had 8 attaches).
    CUDA_VISIBLE_DEVICES=$cvd "$d/threads" "$((seconds * 2))" > "$d/attached.log" 2>&1 & attached=$! ;;
  ddp)
    CUDA_VISIBLE_DEVICES=$cvd $py -m torch.distributed.run --nproc-per-node 2 --master-port 29511 \
      "$root/gpu-host/python/ddp_job.py" --steps "${DDP_STEPS:-40000}" > "$d/untouched.log" 2>&1 & untouched=$!
    CUDA_VISIBLE_DEVICES=$cvd $py -m torch.distributed.run --nproc-per-node 2 --master-port 29512 \
      "$root/gpu-host/python/ddp_job.py" --steps "${DDP_STEPS:-40000}" > "$d/attached.log" 2>&1 & attached=$! ;;
  profiler-open) CUDA_VISIBLE_DEVICES=$cvd $py -X faulthandler "$job" "$name" --seconds "$((seconds / 2))" > "$d/attached.log" 2>&1 &
    attached=$! ;;
  *) CUDA_VISIBLE_DEVICES=$cvd LD_PRELOAD=$segv_bt $py -X faulthandler "$job" "$name" --seconds "$seconds" > "$d/attached.log" 2>&1 &
     attached=$! ;;
  esac
  if ! pid=$(wait_ready "$d/attached.log" "$attached"); then
    echo "ROW $name FAIL (the job printed no ready line: $(tail -c 300 "$d/attached.log" | tr '\n' ' '))"
    kill ${untouched:-} $attached 2>/dev/null; return
  fi
  # DDP: the whole tree under torchrun; every other job: its own pid.
  if [ "$name" = ddp ]; then target=(--pid-tree "$attached"); sleep 2; else target=(--pid "$pid"); fi
  sleep 1
  : > "$d/attaches.txt"
  while [ $n -lt "$attaches" ] && alive "$attached"; do
    local tool=${tools[$((n % ${#tools[@]}))]} w=${windows[$((n % ${#windows[@]}))]}
    # One rank's kernels for the per-process commands of a torchrun tree.
    if [ "$name" = ddp ] && [[ $tool == metrics || $tool == pc-sampling ]]; then
      attach "$name" $((n + 1)) "$tool" "$w" --pid "$pid" >> "$d/attaches.txt"
    else
      attach "$name" $((n + 1)) "$tool" "$w" "${target[@]}" >> "$d/attaches.txt"
    fi
    n=$((n + 1))
    sleep 0.3
  done
  # A job still running long after its life (HANG_SECONDS past the last attach, default 120): its threads' kernel
  # stacks and a native backtrace into hang.txt, then it is ended (the row fails), so that a hang is seen and named.
  local deadline=$(( $(date +%s) + ${HANG_SECONDS:-120} + seconds ))
  while alive "$attached" && [ "$(date +%s)" -lt "$deadline" ]; do sleep 1; done
  if alive "$attached"; then
    notes+=" the job hung (still running ${HANG_SECONDS:-120} s after its life; stacks in hang.txt);"
    verdict=FAIL
    local jp=$pid; [ "$name" = ddp ] && jp=$attached
    { for t in /proc/"$jp"/task/*; do
        echo "--- task ${t##*/} $(cat "$t/comm" 2>/dev/null) wchan=$(cat "$t/wchan" 2>/dev/null) syscall=$(cut -d' ' -f1 "$t/syscall" 2>/dev/null)"
        cat "$t/stack" 2>/dev/null
      done
      dbg=$(command -v gdb || command -v cuda-gdb)
      [ -n "$dbg" ] && timeout 60 "$dbg" -batch -p "$jp" -ex 'thread apply all bt 25' 2>&1 | grep -v '^\[New LWP' | head -300
    } > "$d/hang.txt" 2>&1
    kill -9 "$attached" 2>/dev/null
  fi
  wait $attached; rc_a=$?
  # The untouched run: the same job, exactly the steps the attached one ran.
  local steps
  steps=$(grep -m1 '^result' "$d/attached.log" | grep -o 'steps [0-9]*' | cut -d' ' -f2)
  case $name in
  threads) CUDA_VISIBLE_DEVICES=$cvd "$d/threads" 3 > "$d/untouched.log" 2>&1; rc_u=$? ;;
  ddp) wait $untouched; rc_u=$? ;;
  *) if [ -n "$steps" ]; then CUDA_VISIBLE_DEVICES=$cvd $py "$job" "$name" --steps "$steps" > "$d/untouched.log" 2>&1; rc_u=$?
     else rc_u=-1; echo "no step count in the attached run's result" > "$d/untouched.log"; fi ;;
  esac
  fails=$(grep -c ' FAIL$' "$d/attaches.txt")
  local refused; refused=$(grep -c ' refused-after-cupti$' "$d/attaches.txt")
  [ "$refused" -eq 0 ] || notes+=" $refused where refused after CUPTI (driver 580);"
  refused=$(grep -c ' refused-no-quiet-moment$' "$d/attaches.txt")
  [ "$refused" -eq 0 ] || notes+=" $refused profile --pid found no moment outside the driver and left the job alone;"
  refused=$(grep -c ' ok-idle$' "$d/attaches.txt")
  [ "$refused" -eq 0 ] || notes+=" $refused windows in which the job was idle (no record, said);"
  refused=$(grep -c ' refused-program-profiler$' "$d/attaches.txt")
  [ "$refused" -eq 0 ] || notes+=" $refused profile --pid refused beside the program's recording profiler;"
  local res_u res_a
  res_u=$(grep -E '^result' "$d/untouched.log" | tr '\n' ' ')
  res_a=$(grep -E '^result' "$d/attached.log" | tr '\n' ' ')
  [ "$rc_a" -eq "$rc_u" ] && [ "$rc_a" -eq 0 ] || { verdict=FAIL; notes+=" exit codes differ or non-zero;"; }
  [ -n "$res_u" ] && [ "$res_u" = "$res_a" ] || { verdict=FAIL; notes+=" results differ;"; }
  [ "$n" -ge "$attaches" ] || { verdict=FAIL; notes+=" only $n attaches before the job ended;"; }
  [ "$fails" -eq 0 ] || { verdict=FAIL; notes+=" $fails windows failed;"; }
  if [ "$name" = profiler-open ]; then
    local k_u k_a
    k_u=$(awk '/^torch_profiler kernels/ {print $3}' "$d/untouched.log")
    k_a=$(awk '/^torch_profiler kernels/ {print $3}' "$d/attached.log")
    notes+=" torch.profiler kernels untouched ${k_u:-none} attached ${k_a:-none};"
    awk -v a="${k_a:-0}" -v u="${k_u:-0}" 'BEGIN { exit !(u > 0 && (a - u < 0 ? u - a : a - u) <= u / 100) }' \
      || verdict=FAIL
  fi
  echo "ROW $name exit $rc_a (untouched $rc_u) | result ${res_a:-none}| untouched ${res_u:-none}| attaches $n, failed $fails |$notes $verdict"
  # A job that died: the end of its log (Python's faulthandler names the thread and frame of a fatal signal) and
  # the output of the attach it died in or after.
  if [ "$rc_a" -ne 0 ]; then
    grep -v '^progress' "$d/attached.log" | tail -70 | sed "s/^/ROW $name log: /"
    local last; last=$(ls -t "$d"/attach*.txt 2>/dev/null | head -1)
    [ -n "$last" ] && tail -20 "$last" | sed "s/^/ROW $name last attach ($(basename "$last")): /"
  fi
}

echo "=== attach survival matrix: $(date -u +%FT%TZ)"
# SEGV_BACKTRACE=1: the Python jobs but profiler-open get gpu-host/support/segv_backtrace.c preloaded, which prints the
# native stack of a fatal signal into the job's log (and does nothing else).
segv_bt=
if [ "${SEGV_BACKTRACE:-0}" = 1 ]; then
  gcc -shared -fPIC -O1 -o "$out/segv_backtrace.so" "$root/gpu-host/support/segv_backtrace.c" && segv_bt=$out/segv_backtrace.so
  echo "jobs preload ${segv_bt:-nothing (segv_backtrace.c did not build)}"
fi
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | sed 's/^/gpu: /'
$py -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>/dev/null
"$gt" --version 2>&1 | head -5
active=0; i=0
for r in $rows; do
  if [ "$r" = ddp ] && [ "$gpus" -lt 2 ]; then echo "ROW ddp SKIPPED (one GPU)" > "$out/$r.row"; continue; fi
  row "$r" $(((i + gpu_base) % gpus)) > "$out/$r.row" 2>&1 &
  i=$((i + 1))
  active=$((active + 1))
  if [ $active -ge "$parallel" ]; then wait -n; active=$((active - 1)); fi
done
wait
for r in $rows; do
  [ -f "$out/$r.row" ] || continue
  echo "--- $r"; cat "$out/$r/attaches.txt" 2>/dev/null; tail -1 "$out/$r.row"
done
echo "=== summary"
grep -h '^ROW' "$out"/*.row | sed 's/^ROW //' | awk '{print $1, $NF}'
pass=$(grep -h '^ROW' "$out"/*.row | grep -c ' PASS$'); total=$(grep -h '^ROW' "$out"/*.row | grep -vc SKIPPED)
echo "$pass of $total rows passed"
# Every log of the run in one file (a device run brings back few files).
for f in $(find "$out" -name '*.txt' -o -name '*.log' | grep -v '/logs.txt$' | sort); do
  echo "=== $f"; tail -c "${LOG_TAIL:-2500}" "$f"; echo
done > "$out/logs.txt"
