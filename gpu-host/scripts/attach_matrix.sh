#!/usr/bin/env bash
# The attach survival matrix: real jobs, each started plainly (python3 or its own binary, no gpu-tools variable),
# attached ATTACHES times with the attaching commands in an order that puts each tool after each other tool across
# the rows (trace --pid in graph and node mode, trace --pid --counters, profile --pid metrics and PC sampling,
# where), windows of 0.5 to 2 s; each job runs until its attaches are done (then the matrix creates its STOP_FILE,
# JOB_SECONDS being only a cap) and says how many steps it ran; an untouched run of exactly those steps follows (the
# threads row checks its own buffers; DDP's untouched run, of fixed steps, runs beside the attached one on the same
# GPUs; ddp-shared is the same torchrun tree of two ranks on one GPU, over gloo, NCCL refusing two ranks a GPU). A row passes when the attached job's exit code and printed result equal the untouched run's, its own
# torch.profiler was handed no record twice and its count (profiler-open, profiler-late) is within 1% of the
# untouched one's (profiler-late's sessions: no less than 1% under it, and none larger than the untouched run's
# largest), profiler-schedule's full cycles each hold exactly what every untouched full cycle holds, and
# every window gave what it should, judged by what it recorded, not its exit code alone:
#  - a trace window holds records of work and a kernel record for every kernel launch it recorded (in the nvtx row,
#    NVTX ranges too);
#  - a PC sampling window holds stall records, a metrics window kernel values (the tool exits 1 for a window that
#    recorded nothing while the job ran);
#  - a `where` names what runs: after a CUPTI attach the driver refuses the debugger for the process's life, and
#    `where` answers from the flight recorder the attach left (`ok-flight`).
# Counted apart, each said by the tool and named in the row's notes: `profile --pid` refused beside the program's
# recording profiler (`refused-program-profiler`), PC sampling refused where the job's own profiler used CUPTI's
# activity API before any PC sampling (`refused-after-program-profiler`: every window then counted all its samples
# outside the program's kernels, and no primer can come before it), in a JAX job with XLA's command buffers on
# (`refused-xla-command-buffers`: blind windows, and one job died in `cuptiPCSamplingStop`), after a first PC
# sampling window (a trace's primer, or a profile window) that had no stall record, the job idle on the GPU then
# (`refused-after-idle-sampling`: every window after such a start counted every sample outside the kernels of the
# running job), or for want of a moment with no thread inside
# the driver (`refused-no-quiet-moment`, `refused-in-driver`) or because another row's job keeps the GPU's counters after its
# `cuptiPCSamplingDisable` failed (`refused-held-by-other-job`: the tool names that job, whose window is a `left-on`
# FAIL), a `where` refused where no flight recorder was left (the
# program's profiler held CUPTI's subscriber, or TRACE_ARGS has --no-flight-recorder: `refused-no-recorder`) or where the program's own profiler ran CUPTI
# (`refused-after-cupti`), a trace window in which the job was idle, or a profile window in which the fork-child
# job waited for its child (`ok-idle`).
# The hung row is two jobs of gpu-host/scripts/hung_job.cu: one asked with `where` (the debugger) while a kernel
# hangs, before any trace; one traced first, then asked while a kernel hangs (the flight recorder must name it), and
# profiled during the hang (refused by name, at once); both released and run to their untouched results.
# A profiler-schedule row that fails names, for each unusual cycle, the attach nearest to its collection and when
# (`278:0@metrics#6+0.21s`: cycle 278 held 0, collected 0.21 s after attach 6's command started): OUT/ROW/windows.txt
# has each attach's run on CLOCK_MONOTONIC, the clock the job stamps its cycles with and the debug log uses.
#
# Each row says how its attached job ended as soon as it ends (`ATTACHED ROW exit N | result ...`, in OUT/ROW.row),
# before the untouched run; a run cut short by SIGTERM (a `timeout` around it) prints those lines before it exits.
#
# Stage first (STAGE_ONLY='^gpu-tools$' scripts/gpu-stage), then, in the checkout that goes with .gpu/:
#   bash gpu-host/scripts/attach_matrix.sh [ROW...]     (default: every row; ddp needs two GPUs)
# Rows: eager amp graph compile compile-ro profiler-open profiler-schedule profiler-late nvtx serving capture-late
# fork-child jax cupy-graph threads hung ddp-shared ddp
# Settings: OUT (logs, default /tmp/attach_matrix; KEEP_TRACES=1 keeps every window's trace file; a failed window's
# is always kept), PARALLEL (rows at once, default 4), ATTACHES (default 6), JOB_SECONDS (the most a job lives,
# default 480), TOOLS (the attaching commands in turn: by default an Eulerian circuit over every ordered pair of
# them, each row starting ATTACHES further on; a profiler row whose part has no PC sampling window ends on one),
# SEGV_BACKTRACE=1 (the native stack of a job's fatal signal in its
# log: see below), DEBUG_ROWS (rows attached with the injection library's debug log, or DEBUG_LEVEL's, in the job's log),
# HANG_SECONDS (see the row's end), JOB_ENV (variables for the attached Python jobs, such as `MALLOC_CHECK_=3`,
# with which glibc aborts at the first heap inconsistency it sees rather than later: for a job that died of a
# corrupted heap), GT (the gpu-tools binary, default .gpu/bin/bin-gpu-tools: another build staged beside it),
# DDP_STEPS and DDP_SHARED_STEPS (the steps of the ddp and ddp-shared jobs, which run them whatever the attaches:
# 40000 and 10000). PROFILER_SCHEDULE=WAIT,WARMUP,ACTIVE: profiler-schedule's cycle (survival_job.py; the attached and
# untouched runs both take it from the environment).
# ATTACH_DEADLINE_S: seconds after the matrix's start past which no row starts another attach (0, the default: none),
# so that a run under a device call's limit still ends every row with its untouched run and a verdict: a row that
# had every window right and its untouched result but fewer than ATTACHES attaches is PARTIAL (not counted as passed),
# one with none is UNJUDGED.
# TRACE_ARGS: see where it is read. GPU_BASE=N: the first row takes GPU N (default 0), so that two runs of the script beside each other (each with
# its own OUT, whose locks are its own) keep to GPUs of their own.
# On a host with several GPUs the rows take them in turn (CUDA_VISIBLE_DEVICES), each GPU with its own lock.
# The device-wide tools (counters, the range profiler, PC sampling) take their GPU's lock, so that the rows'
# attaches never hold them at the same time; traces and where do not.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd); gt=${GT:-$root/.gpu/bin/bin-gpu-tools}; py=${PYTHON:-python3}
job=$root/gpu-host/python/survival_job.py
out=${OUT:-/tmp/attach_matrix}; mkdir -p "$out"
parallel=${PARALLEL:-4}; attaches=${ATTACHES:-6}; seconds=${JOB_SECONDS:-480}; gpu_base=${GPU_BASE:-0}
matrix_start=$(date +%s); attach_deadline=${ATTACH_DEADLINE_S:-0}
past_deadline() { [ "$attach_deadline" -gt 0 ] && [ $(($(date +%s) - matrix_start)) -ge "$attach_deadline" ]; }
gpus=$(nvidia-smi -L 2>/dev/null | wc -l); [ "$gpus" -ge 1 ] || gpus=1
[ -x "$gt" ] || { echo "missing $gt (stage the workspace)"; exit 1; }
unset GPU_TOOLS_INJECT_LIB
export TORCHINDUCTOR_CACHE_DIR=${TORCHINDUCTOR_CACHE_DIR:-$out/inductor-cache}
rows=${*:-eager amp graph compile compile-ro profiler-open profiler-schedule profiler-late nvtx serving capture-late fork-child jax cupy-graph threads hung ddp-shared ddp}
windows=(0.5 1 1.5 2)
# TRACE_ARGS: words added to every trace window (trace, trace-node, counters), such as `--no-flight-recorder
# --no-pc-primer`, with which a window leaves nothing of CUPTI's in a job that never used it (the library then
# finalises CUPTI at the job's next CUDA call).
read -r -a trace_args <<< "${TRACE_ARGS:-}"
# Every ordered pair of tools once (an Eulerian circuit of the complete graph with loops, closing on itself).
read -r -a tools <<< "${TOOLS:-trace where where pc-sampling where metrics where counters where trace-node where trace pc-sampling pc-sampling metrics pc-sampling counters pc-sampling trace-node pc-sampling trace metrics metrics counters metrics trace-node metrics trace counters counters trace-node counters trace trace-node trace-node trace}"

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

# locked STAMP CMD...: CMD holding the row's GPU locks (both GPUs' for DDP); STAMP gets the time (ns) they were taken,
# so that a window's time is the tool's own, not its wait for another row's device-wide tool.
locked() {
  local stamp=$1; shift
  local run=(bash -c 'date +%s%N > "$0"; exec "$@"' "$stamp" "$@")
  if [ "${#row_locks[@]}" -ge 2 ]; then flock "${row_locks[0]}" flock "${row_locks[1]}" "${run[@]}"
  else flock "${row_locks[0]}" "${run[@]}"; fi
}

# attach ROW N TOOL WINDOW TARGET...: one attach; prints `attach N TOOL WINDOW rc=RC ms=MS records=R ok|FAIL`, with
# `lock=MS` before `records` for the device-wide tools (the wait for the GPU's lock, not counted in MS).
attach() {
  local row=$1 n=$2 tool=$3 w=$4; shift 4
  local f=$out/$row/attach$n-$tool t0 rc records ok m0
  m0=$(mono)
  t0=$(date +%s%N)
  rm -f "$f.locked"
  case $tool in
  trace | trace-node)
    local graph=(); [ "$tool" = trace-node ] && graph=(--cuda-graph-trace node)
    # A row's first CUPTI attach, when a trace, PC-samples the job first (trace/pc_primer.rs): a device-wide tool,
    # which takes the GPU's lock as the others do. Without it the primer finds another row's tool holding the
    # counters, is skipped, and the row's later PC sampling windows give nothing.
    if [ -z "${row_cupti:-}" ]; then
      locked "$f.locked" timeout 120 "$gt" trace "$@" --duration "$w" "${graph[@]}" "${trace_args[@]}" -q -o "$f.gputrace" > "$f.txt" 2>&1
    else timeout 120 "$gt" trace "$@" --duration "$w" "${graph[@]}" "${trace_args[@]}" -q -o "$f.gputrace" > "$f.txt" 2>&1; fi ;;
  counters) locked "$f.locked" timeout 120 "$gt" trace "$@" --duration "$w" --counters "${trace_args[@]}" -q -o "$f.gputrace" > "$f.txt" 2>&1 ;;
  metrics) locked "$f.locked" timeout 120 "$gt" profile "$@" --duration "$w" > "$f.txt" 2>&1 ;;
  pc-sampling) locked "$f.locked" timeout 120 "$gt" profile "$@" --duration "$w" --pc-sampling > "$f.txt" 2>&1 ;;
  # --yes: the matrix asks no one (a `where` before any CUPTI attach would end CUPTI for the job: rows start with
  # a CUPTI tool, and the hung row's first job is where it is meant).
  where) if [ "$1" = --pid ]; then timeout 120 "$gt" where --yes "$2" > "$f.txt" 2>&1
         else timeout 120 "$gt" where --yes "$@" > "$f.txt" 2>&1; fi ;;
  esac
  rc=$?
  [ "$tool" = where ] || row_cupti=1
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
    if grep -q 'kernel launches have no kernel record' "$f.txt"; then ok=FAIL; records="$records,trace-warns-missing"; fi
    # The process's first trace sampled its PCs first (trace/pc_primer.rs), or said why not: a PC sampling window
    # after it is judged with that in view.
    local primed
    primed=$(grep -o 'sampled before its first trace ([0-9]* stall records' "$f.txt" | head -1 | grep -o '[0-9]*')
    [ -n "$primed" ] && records="$records,pc-primed:$primed"
    grep -q 'not sampled before its first trace' "$f.txt" && records="$records,pc-not-primed"
    grep -q 'sampled before its first trace, with no stall record while it was idle' "$f.txt" && records="$records,pc-primed-empty"
    grep -q 'sampled before its first trace, with no stall record although it ran' "$f.txt" && records="$records,pc-primed-empty-running"
    # The nvtx row: its job pushes ranges every step; a trace window without them did not record them.
    if [ "$row" = nvtx ] && [ "$ok" != FAIL ]; then
      local nv; nv=$(grep -o '[0-9]* NVTX ranges and marks' "$f.txt" | cut -d' ' -f1)
      records="$records,nvtx:${nv:-0}"
      [ "${nv:-0}" -gt 0 ] || ok=FAIL
    fi ;;
  # profile --pid does not profile beside the program's own recording profiler (it would stop its records): said,
  # and not a failure of the job.
  # What the window recorded: stall records, or kernels with values (the tool exits 1 for a window of none while
  # the job ran, saying what CUPTI counted).
  metrics | pc-sampling)
    records=$(grep -o '[0-9]* stall records from\|[0-9]* kernel launches profiled' "$f.txt" | head -1 | cut -d' ' -f1)
    # PM sampling attribution (profile --pid's kernel metrics): the kernel names it gave values for.
    grep -q 'Values from PM sampling attribution' "$f.txt" \
      && records="${records:-0},pm-attribution:$(grep -o 'kernel records of [0-9]* kernel names' "$f.txt" | head -1 | grep -o '[0-9]* kernel names' | cut -d' ' -f1)"
    # Exit 0 alone is not enough: the window must have stall records, kernels with values, or PM attribution.
    if [ "$rc" -eq 0 ]; then
      [ "${records%%,*}" -gt 0 ] 2>/dev/null || [[ $records =~ pm-attribution:[1-9] ]] || ok=FAIL
    elif grep -q "the program's own profiler is recording" "$f.txt"; then ok=refused-program-profiler
    # The job's own torch.profiler used CUPTI's activity API before any PC sampling in it: every later window counts
    # all its samples outside the program's kernels (pc_own_profiler_probe.sh), which no primer can come before.
    elif grep -q "activity API in this process before any PC sampling" "$f.txt"; then ok=refused-after-program-profiler
    # A JAX job with XLA's command buffers on: its windows were blind, and one died in cuptiPCSamplingStop.
    elif grep -q "runs JAX with XLA's CUDA command buffers on" "$f.txt"; then ok=refused-xla-command-buffers
    # Every stop found a thread inside the driver or CUPTI (NCCL's watchdog): the profile is not started there. At the
    # finish, giving up leaves the profiling on in the job (said: "stays on"): a failure.
    elif grep -q 'no moment without a thread inside the CUDA driver or CUPTI.*left as it was' "$f.txt"; then ok=refused-no-quiet-moment
    elif grep -q 'inside libcuda.*at every stop\|waits inside the CUDA driver at every stop' "$f.txt"; then ok=refused-in-driver
    # The job's first PC sampling window had no stall record (a primer, or a profile window, while fork-child waited
    # for its child): every window of the running job after such a start counted every sample outside its kernels
    # (11,781,101 after a trace, the 38th session; 2,740,546 with none between, pc_order_probe.sh SET=5), so it is
    # refused. Counted apart only where the row's attaches show that idle first window.
    elif grep -q 'first PC sampling window had no stall record' "$f.txt" \
      && grep -q ',pc-primed-empty[ ,]\| pc-sampling .* ok-idle$' "$out/$row/attaches.txt"; then ok=refused-after-idle-sampling
    else ok=FAIL; fi
    # An empty PC sampling window after the process's first attach traced it (CUPTI then put every sample outside the
    # program's kernels, pc_order_probe.sh): still a failure, its known cause named.
    if [ "$ok" = FAIL ] && grep -q "first gpu-tools attach traced it" "$f.txt"; then records="${records:-0},after-first-trace"; fi
    # A window whose cuptiPCSamplingDisable failed left sampling, and the GPU's counters, held for the job's life:
    # a failure whatever it recorded.
    if grep -q 'PC sampling could not be turned off' "$f.txt"; then ok=FAIL; records="${records:-0},left-on"; fi ;;
  # After a CUPTI attach the driver refuses the debugger for the process's life: where answers from the flight
  # recorder the attach left. Where none was left (the program's profiler holds CUPTI's one subscriber, or
  # --no-flight-recorder), or the program's own profiler ran CUPTI, the tool says so: counted apart.
  where) if [ "$rc" -eq 0 ]; then grep -q "flight recorder" "$f.txt" && ok=ok-flight
         elif grep -q 'no flight recorder answers' "$f.txt"; then ok=refused-no-recorder
         elif grep -q 'refuses the debugger' "$f.txt"; then ok=refused-after-cupti
         else ok=FAIL; fi ;;
  *) [ "$rc" -eq 0 ] || ok=FAIL ;;
  esac
  # fork-child's job waits for its child (a fresh Python importing torch: seconds) every 2000 steps and stamps each
  # wait on CLOCK_MONOTONIC. A profile window that found no kernel while the job's own stamps show it waiting for at
  # least the window's length inside the command's run had nothing to sample: said by the tool, counted apart. Its
  # samples, where CUPTI counted some, were all outside the job's kernels (another process's: 2026-12-06, an H100,
  # 17 million in such a window beside 15 busy rows).
  if [ "$ok" = FAIL ] && [ "$row" = fork-child ] \
    && grep -q 'CUPTI took no sample\|no kernel was profiled\|CUPTI attributed all [0-9]* samples to kernels it does not expose' "$f.txt" \
    && waited_through "$out/$row/attached.log" "$(window_from "$m0" "$t0" "$f.locked")" "$(mono)" "$w"; then ok=ok-idle; fi
  # Refused because another job's failed cuptiPCSamplingDisable holds the GPU's counters (the tool names that
  # process): that job's row fails for it (`left-on`); counted apart here.
  if [ "$ok" = FAIL ] && [ "$rc" -ne 0 ] && grep -q 'gpu-tools itself left PC sampling on in process [0-9]' "$f.txt" \
    && ! grep -q 'left PC sampling on in this process' "$f.txt"; then ok=refused-held-by-other-job; fi
  # The job ended between the last window and this one: no window, nothing to judge.
  if [ "$ok" = FAIL ] && grep -q "no process $2\b" "$f.txt" 2>/dev/null; then ok=job-ended; fi
  # The job ended during the window (its exit code is judged with the row's, so a crash still fails the row).
  if [ "$ok" = FAIL ] && [ "${#target[@]}" -ge 2 ] && ! alive "${target[1]}"; then ok=job-ended-in-window; fi
  # The traces are large; their summaries stay (KEEP_TRACES=1 keeps them too). A failed window's trace is kept: it is
  # what tells a missing record from a miscount (an eager window once lacked half its kernels, and was deleted).
  [ -n "${KEEP_TRACES:-}" ] || [ "$ok" = FAIL ] || rm -f "$f.gputrace"
  local t1 lock=
  t1=$(date +%s%N)
  if [ -s "$f.locked" ]; then
    lock=" lock=$((($(cat "$f.locked") - t0) / 1000000))"; t0=$(cat "$f.locked"); rm -f "$f.locked"
  fi
  echo "attach $n $tool ${w}s rc=$rc ms=$(((t1 - t0) / 1000000))$lock records=$records $ok"
  echo "$n $tool $m0 $(mono)" >> "$out/$row/windows.txt"
}

# waited_through LOG FROM TO SECONDS: true when the job's child waits (LOG's `child_wait_start`/`child_wait_end`, a
# wait not yet ended lasting until TO) cover at least SECONDS of FROM..TO (ns, CLOCK_MONOTONIC).
waited_through() {
  awk -v a="$2" -v b="$3" -v need="$4" '
    function add(s, e) { if (s < a) s = a; if (e > b) e = b; if (e > s) total += e - s }
    $1 == "child_wait_start" { open = $2 }
    $1 == "child_wait_end" && open != "" { add(open, $2); open = "" }
    END { if (open != "") add(open, b); exit !(total >= need * 1e9) }' "$1"
}

# window_from M0 T0 LOCKED: where a command's own time began on CLOCK_MONOTONIC (ns): M0, its start (T0 on the wall
# clock), moved on by its wait for the GPU's lock when LOCKED (the wall-clock stamp `locked` wrote) exists, so that a
# window's idle job is judged by the window, not by the wait of seconds before it.
window_from() {
  if [ -s "$3" ]; then echo $(($1 + $(cat "$3") - $2)); else echo "$1"; fi
}

# mono: now on CLOCK_MONOTONIC, in ns: the clock the profiler rows' jobs stamp their cycles with.
mono() { "$py" -S -c 'import time; print(time.monotonic_ns())'; }

# cycles_by_attach LOG WINDOWS: where each unusual cycle of a profiler row's job was collected, against the attaches
# (WINDOWS: `N TOOL START_NS END_NS`, the command's whole run): `CYCLE:COUNT@TOOL#N+S` (S seconds after that
# attach's command started, negative before it), for the attach whose run is nearest; so a run without the debug
# log still says which tool, and which moment of it, a lost cycle belongs to.
cycles_by_attach() {
  awk '
    FNR == 1 { file++ }
    file == 1 { tool[$1] = $2; s[$1] = $3; e[$1] = $4; n = $1 > n ? $1 : n; next }
    /^torch_profiler_cycle_unlike/ {
      t = $7; best = ""; bd = -1
      for (i = 1; i <= n; i++) {
        if (!(i in s)) continue
        d = t < s[i] ? s[i] - t : (t > e[i] ? t - e[i] : 0)
        if (bd < 0 || d < bd) { bd = d; best = i }
      }
      if (best != "") printf "%s:%s@%s#%s%+.2fs ", $2, $3, tool[best], best, (t - s[best]) / 1e9
    }' "$2" "$1"
}

# row NAME GPU: runs one row on GPU (an index); its last line is `ROW NAME ... PASS|FAIL`.
row() {
  local name=$1 d=$out/$1 pid untouched= attached target n=0 fails=0 rc_u rc_a verdict=PASS notes="" offset=$3 row_cupti= cut=
  [ "$name" = hung ] && { hung_row "$2"; return; }
  # A row's folder is its own: files of an earlier run in it (a lent machine may keep /tmp) would be read as this one's.
  rm -rf "$d"; mkdir -p "$d"
  # The job ends once the file exists (created when its attaches are done).
  export STOP_FILE=$d/stop
  rm -f "$STOP_FILE"
  # DEBUG_ROWS: rows whose attaches run with the injection library's debug log (it lands in the job's stderr).
  [[ " ${DEBUG_ROWS:-} " == *" $name "* ]] && export GPU_TOOLS_TRACE_LOG=${DEBUG_LEVEL:-debug}
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
    CUDA_VISIBLE_DEVICES=$cvd "$d/threads" "$seconds" > "$d/attached.log" 2>&1 & attached=$! ;;
  ddp | ddp-shared)
    # Two ranks on two GPUs over NCCL, or on the row's one GPU over gloo.
    # (gloo's all-reduce goes through the host: fewer steps, DDP_SHARED_STEPS).
    local backend=nccl ports=(29511 29512) ddp_steps=${DDP_STEPS:-40000}
    [ "$name" = ddp-shared ] && backend=gloo ports=(29513 29514) ddp_steps=${DDP_SHARED_STEPS:-10000}
    CUDA_VISIBLE_DEVICES=$cvd $py -m torch.distributed.run --nproc-per-node 2 --master-port "${ports[0]}" \
      "$root/gpu-host/python/ddp_job.py" --backend $backend --steps "$ddp_steps" > "$d/untouched.log" 2>&1 &
    untouched=$!
    CUDA_VISIBLE_DEVICES=$cvd $py -m torch.distributed.run --nproc-per-node 2 --master-port "${ports[1]}" \
      "$root/gpu-host/python/ddp_job.py" --backend $backend --steps "$ddp_steps" > "$d/attached.log" 2>&1 &
    attached=$! ;;
  profiler-open) env ${JOB_ENV:-} CUDA_VISIBLE_DEVICES=$cvd $py -X faulthandler "$job" "$name" --seconds "$seconds" \
      > "$d/attached.log" 2>&1 &
    attached=$! ;;
  *) env ${JOB_ENV:-} CUDA_VISIBLE_DEVICES=$cvd LD_PRELOAD=$segv_bt $py -X faulthandler "$job" "$name" \
       --seconds "$seconds" > "$d/attached.log" 2>&1 &
     attached=$! ;;
  esac
  if ! pid=$(wait_ready "$d/attached.log" "$attached"); then
    echo "ROW $name FAIL (the job printed no ready line: $(tail -c 300 "$d/attached.log" | tr '\n' ' '))"
    kill ${untouched:-} $attached 2>/dev/null; return
  fi
  # DDP: the whole tree under torchrun; every other job: its own pid.
  if [[ $name == ddp* ]]; then target=(--pid-tree "$attached"); sleep 2; else target=(--pid "$pid"); fi
  sleep 1
  : > "$d/attaches.txt"; : > "$d/windows.txt"
  # This row's part of the tools' circuit; never a `where` first (the debugger would end CUPTI for the job).
  [ "${tools[$((offset % ${#tools[@]}))]}" = where ] && offset=$((offset + 1))
  # A row whose job runs its own profiler ends on a PC sampling window where its part of the default circuit has
  # none, so that every run asks PC sampling beside the program's profiler (refused by its reason, or stall records).
  local last_pc=
  if [ -z "${TOOLS:-}" ] && [[ $name == profiler-* ]] && [ "$attaches" -ge 2 ]; then
    last_pc=1
    for k in $(seq 0 $((attaches - 1))); do
      [ "${tools[$(((k + offset) % ${#tools[@]}))]}" = pc-sampling ] && last_pc=
    done
  fi
  while [ $n -lt "$attaches" ] && alive "$attached"; do
    past_deadline && { cut=1; break; }
    local tool=${tools[$(((n + offset) % ${#tools[@]}))]} w=${windows[$((n % ${#windows[@]}))]}
    [ -n "$last_pc" ] && [ $n -eq $((attaches - 1)) ] && tool=pc-sampling
    # One rank's kernels for the per-process commands of a torchrun tree.
    if [[ $name == ddp* ]] && [[ $tool == metrics || $tool == pc-sampling ]]; then
      attach "$name" $((n + 1)) "$tool" "$w" --pid "$pid" >> "$d/attaches.txt"
    else
      attach "$name" $((n + 1)) "$tool" "$w" "${target[@]}" >> "$d/attaches.txt"
    fi
    n=$((n + 1))
    sleep 0.3
  done
  touch "$STOP_FILE"
  # A job still running HANG_SECONDS (default 90) after it was told to end: its threads' kernel stacks, its Python
  # stacks (faulthandler on SIGUSR1, into its log) and a native backtrace by gdb into hang.txt, then it is ended (the
  # row fails), so that a hang is seen and named. DDP runs its steps. Never cuda-gdb: its attach calls
  # cudbgApiAttach in the job, which the driver refuses in a process that ran CUPTI ("Could not find CUDA Debugger
  # back-end"), and the job then died of SIGSEGV (profiler-open, 2026-12-02: it was slow, in torch.profiler's
  # parsing of its events, not hung; the probe killed it).
  local told deadline result_at=
  told=$(date +%s); deadline=$((told + ${HANG_SECONDS:-90}))
  [[ $name == ddp* ]] && deadline=$((deadline + seconds))
  # When the job printed its result: a job slow to exit after it (its interpreter's and the CUDA driver's teardown)
  # is told apart from one that never got there.
  while alive "$attached" && [ "$(date +%s)" -lt "$deadline" ]; do
    [ -z "$result_at" ] && grep -q '^result' "$d/attached.log" 2>/dev/null && result_at=$(date +%s)
    sleep 1
  done
  if alive "$attached"; then
    notes+=" the job hung (still running ${HANG_SECONDS:-90} s after it was told to end"
    if [ -n "$result_at" ]; then notes+=", $((result_at - told)) s after which it had printed its result"
    else notes+=", with no result printed"; fi
    notes+="; stacks in hang.txt);"
    verdict=FAIL
    local jp=$pid; [[ $name == ddp* ]] && jp=$attached
    { echo "state: $(cut -d' ' -f3 "/proc/$jp/stat" 2>/dev/null), threads: $(ls "/proc/$jp/task" 2>/dev/null | wc -l)"
      for t in /proc/"$jp"/task/*; do
        echo "--- task ${t##*/} $(cat "$t/comm" 2>/dev/null) state=$(cut -d' ' -f3 "$t/stat" 2>/dev/null) wchan=$(cat "$t/wchan" 2>/dev/null) syscall=$(cut -d' ' -f1 "$t/syscall" 2>/dev/null)"
        cat "$t/stack" 2>/dev/null
      done
      echo "--- maps of the GPU libraries it still has"
      grep -o '/[^ ]*\(libcuda\|libcupti\|gpu_tools\|libnvidia\)[^ ]*' "/proc/$jp/maps" 2>/dev/null | sort -u
      case $name in threads|ddp|ddp-shared|hung) ;; *) kill -USR1 "$jp" 2>/dev/null && sleep 1 && echo "(Python stacks: in attached.log)" ;; esac
      if command -v gdb > /dev/null; then
        timeout 60 gdb -batch -p "$jp" -ex 'thread apply all bt 25' 2>&1 | grep -v '^\[New LWP' | head -300
      else
        echo "(no gdb here: no native backtrace; cuda-gdb is not used, see above)"
      fi
    } > "$d/hang.txt" 2>&1
    # A slow exit rather than a hang: given 30 s more, said with when it ended.
    local grace=$(( $(date +%s) + 30 ))
    while alive "$attached" && [ "$(date +%s)" -lt "$grace" ]; do sleep 1; done
    if alive "$attached"; then kill -9 "$attached" 2>/dev/null
    else notes+=" it then exited on its own, $(( $(date +%s) - told )) s after it was told to end;"; fi
  fi
  wait $attached; rc_a=$?
  # Said at once: a run cut before the untouched runs (a device call's limit) still tells how each job ended.
  echo "ATTACHED $name exit $rc_a | $(grep -m1 -E '^result' "$d/attached.log" 2>/dev/null)"
  # The untouched run: the same job, exactly the steps the attached one ran.
  local steps
  steps=$(grep -m1 '^result' "$d/attached.log" | grep -o 'steps [0-9]*' | cut -d' ' -f2)
  case $name in
  threads) STOP_FILE= CUDA_VISIBLE_DEVICES=$cvd "$d/threads" 3 > "$d/untouched.log" 2>&1; rc_u=$? ;;
  ddp | ddp-shared) wait $untouched; rc_u=$? ;;
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
  refused=$(grep -c ' refused-after-program-profiler$' "$d/attaches.txt")
  [ "$refused" -eq 0 ] || notes+=" $refused PC sampling refused: the job's own profiler used CUPTI's activity API first (no stall record is had then);"
  refused=$(grep -c ' refused-after-idle-sampling$' "$d/attaches.txt")
  [ "$refused" -eq 0 ] || notes+=" $refused PC sampling refused: the job's first PC sampling window had no stall record (the job idle on the GPU then);"
  refused=$(grep -c ' refused-xla-command-buffers$' "$d/attaches.txt")
  [ "$refused" -eq 0 ] || notes+=" $refused PC sampling refused: JAX with XLA's command buffers on (blind, and a job died in CUPTI's stop);"
  refused=$(grep -c ' refused-in-driver$' "$d/attaches.txt")
  [ "$refused" -eq 0 ] || notes+=" $refused profile --pid refused for a thread inside the driver at every stop;"
  refused=$(grep -c ' refused-no-recorder$' "$d/attaches.txt")
  [ "$refused" -eq 0 ] || notes+=" $refused where without a flight recorder (the program's profiler holds CUPTI's subscriber, or --no-flight-recorder);"
  refused=$(grep -c ' refused-held-by-other-job$' "$d/attaches.txt")
  [ "$refused" -eq 0 ] || notes+=" $refused windows refused: another job's failed PC sampling disable held the GPU's counters;"
  refused=$(grep -c ' ok-flight$' "$d/attaches.txt")
  [ "$refused" -eq 0 ] || notes+=" $refused where answered by the flight recorder;"
  local res_u res_a
  res_u=$(grep -E '^result' "$d/untouched.log" | tr '\n' ' ')
  res_a=$(grep -E '^result' "$d/attached.log" | tr '\n' ' ')
  [ "$rc_a" -eq "$rc_u" ] && [ "$rc_a" -eq 0 ] || { verdict=FAIL; notes+=" exit codes differ or non-zero;"; }
  [ -n "$res_u" ] && [ "$res_u" = "$res_a" ] || { verdict=FAIL; notes+=" results differ;"; }
  if [ -n "$cut" ]; then
    notes+=" $n of $attaches attaches before ATTACH_DEADLINE_S ($attach_deadline s);"
  elif [ "$n" -lt "$attaches" ]; then
    verdict=FAIL; notes+=" only $n attaches before the job ended;"
  fi
  [ "$fails" -eq 0 ] || { verdict=FAIL; notes+=" $fails windows failed;"; }
  refused=$(grep -c ',after-first-trace FAIL$' "$d/attaches.txt")
  [ "$refused" -eq 0 ] || notes+=" $refused of them PC sampling after the job's first attach traced it;"
  if [[ $name == profiler-* ]]; then
    local k_u k_a
    k_u=$(awk '/^torch_profiler kernels/ {print $3}' "$d/untouched.log")
    k_a=$(awk '/^torch_profiler kernels/ {print $3}' "$d/attached.log")
    notes+=" torch.profiler kernels untouched ${k_u:-none} attached ${k_a:-none};"
    # Rows whose profiler runs in cycles (schedule, late sessions) print each cycle's count: the largest cycle of
    # the untouched run is what a cycle holds when nothing is lost. Under load the untouched run's scheduled
    # profiler lost records on its own (2026-12-02, 16 jobs on one H200: untouched 179,498 over 6,850 steps, about
    # 157 a cycle of 6 steps on average; attached 208,432, its cycles at most 188 each, mostly exactly 188, as far
    # as its log shows them), so there a larger attached count is no harm
    # unless a cycle of it holds more than any untouched cycle (records the program did not make: replays).
    local rep_a
    rep_a=$(awk '/^torch_profiler repeats/ {print $3}' "$d/attached.log")
    if [ -n "$rep_a" ]; then
      notes+=" repeated records $rep_a;"
      [ "$rep_a" -eq 0 ] || { verdict=FAIL; notes+=" the job's profiler was handed records twice;"; }
    fi
    if [ "$name" = profiler-schedule ]; then
      # The job synchronises before each schedule step: every cycle but the last (cut short at the job's end) holds
      # exactly its 3 steps' records, in the untouched run and the attached one alike; any other count is a record
      # lost or repeated.
      local odd
      odd=$(cycles_unlike "$d/untouched.log" "$d/attached.log")
      notes+=" cycles unlike the untouched run's: ${odd:-none};"
      [ -z "$odd" ] || { verdict=FAIL; notes+=" by attach: $(cycles_by_attach "$d/attached.log" "$d/windows.txt");"; }
    fi
    local max_u max_a
    max_u=$(awk '/^torch_profiler_cycles/ { for (i = 2; i <= NF; i++) { split($i, c, "x"); if (c[1] > m) m = c[1] } } END { print m + 0 }' "$d/untouched.log")
    max_a=$(awk '/^torch_profiler_cycles/ { for (i = 2; i <= NF; i++) { split($i, c, "x"); if (c[1] > m) m = c[1] } } END { print m + 0 }' "$d/attached.log")
    if [ "$name" = profiler-schedule ]; then
      : # judged cycle by cycle above
    elif [ "$max_u" -gt 0 ]; then
      notes+=" largest cycle untouched $max_u attached $max_a;"
      [ "$max_a" -le "$max_u" ] || { verdict=FAIL; notes+=" a cycle holds more than any untouched cycle;"; }
      awk -v a="${k_a:-0}" -v u="${k_u:-0}" 'BEGIN { exit !(u > 0 && a >= u - u / 100) }' || verdict=FAIL
    else
      awk -v a="${k_a:-0}" -v u="${k_u:-0}" 'BEGIN { exit !(u > 0 && (a - u < 0 ? u - a : a - u) <= u / 100) }' \
        || verdict=FAIL
    fi
  fi
  # Cut by the deadline: a row with nothing wrong is PARTIAL (fewer windows than asked), with no attach UNJUDGED.
  if [ -n "$cut" ] && [ "$verdict" = PASS ]; then
    if [ "$n" -eq 0 ]; then verdict=UNJUDGED; else verdict=PARTIAL; fi
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

# cycles_unlike UNTOUCHED ATTACHED: the full cycles (all but the last of each run) of the attached run whose count is
# not the one every full untouched cycle holds, as COUNTxTIMES; "untouched not uniform" when the untouched run's
# full cycles differ among themselves (then nothing can be judged); nothing when all agree.
cycles_unlike() {
  awk '
    FNR == 1 { file++ }
    /^torch_profiler_cycles/ {
      n = 0
      for (i = 2; i <= NF; i++) { split($i, c, "x"); for (j = 0; j < c[2]; j++) cyc[file, ++n] = c[1] }
      len[file] = n
    }
    END {
      want = ""
      for (i = 1; i < len[1]; i++) {
        if (want == "") want = cyc[1, i]
        else if (cyc[1, i] != want) { print "untouched not uniform"; exit }
      }
      if (want == "" || len[2] < 2) { print "no full cycles"; exit }
      out = ""
      for (i = 1; i < len[2]; i++) if (cyc[2, i] != want) odd[cyc[2, i]]++
      for (k in odd) out = out k "x" odd[k] " "
      printf "%s", out
    }' "$1" "$2"
}

# judge_hung FILE LINE WANT: the hung row's own verdict on an attach line: `where` must name the hung kernel (by
# the debugger before any trace, by the flight recorder after one); `profile --pid` during the hang must be refused
# at once, by name, or record.
judge_hung() {
  local f=$1 line=$2 want=$3
  case $want in
  debugger) grep -q 'wait_flag' "$f" && [[ $line == *" ok" ]] ;;
  # The recorder knows a launch finished only from a synchronisation the program made after it: a hang a few steps
  # after the job's last synchronise leaves those steps' kernels unknown, and the recorder names the hung kernel as
  # the last of the stream's launches not known to have finished (`... up to wait_flag (the stream's last launch`).
  flight) [[ $line == *" ok-flight" ]] && grep -qE "running or next to run: wait_flag|up to wait_flag \(the stream's last launch" "$f" ;;
  refused) [[ $line == *" refused-in-driver" || $line == *" refused-no-quiet-moment" || $line == *" ok" ]] ;;
  esac
}

# hung_row GPU: two jobs of hung_job.cu (see the header). Prints `ROW hung ... PASS|FAIL`.
hung_row() {
  local d=$out/hung cvd=$1 verdict=PASS notes="" part n=0
  rm -rf "$d"; mkdir -p "$d"
  row_locks=("$out/gpu$1.lock")
  nvcc -O2 -std=c++17 -o "$d/hung_job" "$root/gpu-host/scripts/hung_job.cu" > "$d/nvcc.txt" 2>&1 \
    || { echo "ROW hung FAIL (nvcc: $(head -c 300 "$d/nvcc.txt"))"; return; }
  : > "$d/attaches.txt"
  for part in before after; do
    local p=$d/$part job pid line
    mkdir -p "$p"; rm -f "$p/hang" "$p/release" "$p/stop"
    HANG_FILE=$p/hang RELEASE_FILE=$p/release STOP_FILE=$p/stop HANG_LIMIT=60 CUDA_VISIBLE_DEVICES=$cvd \
      "$d/hung_job" --seconds "$seconds" > "$p/attached.log" 2>&1 &
    job=$!
    if ! pid=$(wait_ready "$p/attached.log" "$job"); then verdict=FAIL; notes+=" $part: no ready line;"; continue; fi
    target=(--pid "$pid")
    if [ "$part" = after ]; then
      n=$((n + 1)); line=$(attach hung $n trace 1 --pid "$pid"); echo "$part $line" >> "$d/attaches.txt"
      [[ $line == *" FAIL" ]] && { verdict=FAIL; notes+=" the trace before the hang failed;"; }
    fi
    touch "$p/hang"
    for _ in $(seq 100); do grep -q '^hung ' "$p/attached.log" && break; sleep 0.1; done
    sleep 1
    n=$((n + 1)); line=$(attach hung $n where 0 --pid "$pid"); echo "$part $line" >> "$d/attaches.txt"
    if [ "$part" = before ]; then
      judge_hung "$out/hung/attach$n-where.txt" "$line" debugger || { verdict=FAIL; notes+=" where before any trace named no hung kernel;"; }
    else
      judge_hung "$out/hung/attach$n-where.txt" "$line" flight || { verdict=FAIL; notes+=" where after a trace (flight recorder) named no hung kernel;"; }
      n=$((n + 1)); line=$(attach hung $n pc-sampling 1 --pid "$pid"); echo "$part $line" >> "$d/attaches.txt"
      local ms; ms=$(echo "$line" | grep -o 'ms=[0-9]*' | cut -d= -f2)
      judge_hung "$out/hung/attach$n-pc-sampling.txt" "$line" refused || { verdict=FAIL; notes+=" profile --pid during the hang failed;"; }
      [ "${ms:-0}" -le 15000 ] || { verdict=FAIL; notes+=" profile --pid during the hang took ${ms} ms to answer;"; }
    fi
    touch "$p/release"
    for _ in $(seq 200); do grep -q '^released ' "$p/attached.log" && break; sleep 0.1; done
    touch "$p/stop"
    local deadline=$(( $(date +%s) + ${HANG_SECONDS:-90} ))
    while alive "$job" && [ "$(date +%s)" -lt "$deadline" ]; do sleep 1; done
    alive "$job" && { kill -9 "$job"; verdict=FAIL; notes+=" $part: the job did not end;"; }
    wait "$job"; local rc_a=$? steps res_a res_u
    steps=$(grep -m1 '^result' "$p/attached.log" | grep -o 'steps [0-9]*' | cut -d' ' -f2)
    CUDA_VISIBLE_DEVICES=$cvd "$d/hung_job" --steps "${steps:-0}" > "$p/untouched.log" 2>&1
    res_a=$(grep '^result' "$p/attached.log"); res_u=$(grep '^result' "$p/untouched.log")
    [ "$rc_a" -eq 0 ] && [ -n "$res_u" ] && [ "$res_a" = "$res_u" ] \
      || { verdict=FAIL; notes+=" $part: exit $rc_a, result '${res_a}' against '${res_u}';"; }
    notes+=" $part: $(grep -m1 '^released' "$p/attached.log" | tr -d '\n'), $res_a;"
  done
  echo "ROW hung | attaches $n |$notes $verdict"
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
# This run's rows' files: an OUT used before may hold other rows' (a lent machine may keep /tmp), never counted here.
row_files=(); for r in $rows; do row_files+=("$out/$r.row"); done
# Cut short (a limit's SIGTERM): how each attached job ended so far, which its row says at once (`ATTACHED`).
trap 'echo "=== cut short: the attached jobs that ended"; grep -h "^ATTACHED" "${row_files[@]}" 2>/dev/null; exit 143' TERM
active=0; i=0
for r in $rows; do
  if [ "$r" = ddp ] && [ "$gpus" -lt 2 ]; then echo "ROW ddp SKIPPED (one GPU)" > "$out/$r.row"; continue; fi
  row "$r" $(((i + gpu_base) % gpus)) $((i * attaches)) > "$out/$r.row" 2>&1 &
  i=$((i + 1))
  active=$((active + 1))
  if [ $active -ge "$parallel" ]; then wait -n; active=$((active - 1)); fi
done
wait
# A row's verdict lines (a failed row's .row file also holds its job's log and its last attach's output).
verdicts() { grep -h '^ROW' "$@" | grep -Ev '^ROW [^ ]+ (log:|last attach)'; }
for r in $rows; do
  [ -f "$out/$r.row" ] || continue
  echo "--- $r"; cat "$out/$r/attaches.txt" 2>/dev/null; verdicts "$out/$r.row" | tail -1
done
echo "=== summary"
verdicts "${row_files[@]}" | sed 's/^ROW //' | awk '{print $1, $NF}'
pass=$(verdicts "${row_files[@]}" | grep -c ' PASS$'); total=$(verdicts "${row_files[@]}" | grep -vc SKIPPED)
partial=$(verdicts "${row_files[@]}" | grep -c ' PARTIAL$')
if [ "$attach_deadline" -gt 0 ]; then
  echo "$pass of $total rows passed; $partial PARTIAL (fewer attaches than asked, cut by ATTACH_DEADLINE_S; nothing wrong)"
else
  echo "$pass of $total rows passed"
fi
# Every window of every row by tool and verdict (a window's verdict is its line's last word; `records=` tags such as
# `after-first-trace` and `left-on` are counted too), and the PC sampling the first traces made (primers).
for r in $rows; do cat "$out/$r/attaches.txt" 2>/dev/null; done | awk '
  / (trace|trace-node|counters|metrics|pc-sampling|where) / {
    for (i = 1; i <= NF; i++) if ($i ~ /^(trace|trace-node|counters|metrics|pc-sampling|where)$/) tool = $i
    n[tool " " $NF]++
    if ($0 ~ /after-first-trace/) tag["pc-sampling after-first-trace"]++
    if ($0 ~ /left-on/) tag["pc-sampling left-on"]++
    if ($0 ~ /pc-primed:[0-9]/) tag["primers with stall records"]++
    if ($0 ~ /pc-primed-empty[, ]/) tag["primers without, the job idle"]++
    if ($0 ~ /pc-primed-empty-running/) tag["primers without, the job running"]++
    if ($0 ~ /pc-not-primed/) tag["first traces not primed"]++
  }
  END {
    for (k in n) print "windows " k " " n[k]
    for (k in tag) print "windows tagged " k " " tag[k]
  }' | sort
# Every log of the run in one file (a device run brings back few files).
for f in $(find "$out" -name '*.txt' -o -name '*.log' | grep -v '/logs.txt$' | sort); do
  echo "=== $f"; tail -c "${LOG_TAIL:-2500}" "$f"; echo
done > "$out/logs.txt"
