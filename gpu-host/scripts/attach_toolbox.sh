#!/usr/bin/env bash
# Probes of the tools used together on one job (issue "the whole toolbox on one live job"), each part on its own:
#   pc-graph   gpu-host/scripts/pc_graph_probe.cu: PC sampling's samples for plain launches and for graphs
#              instantiated before or after the sampling was enabled (an attach's case is "before")
#   pc-nonuser what CUPTI's PC sampling counts outside the program's kernels (non-user): the probe's graphs built
#              node by node (as XLA's command buffers are) against captured ones, its kernel loaded from PTX in memory
#              before and after the sampling's start (as JAX, CuPy and Triton load theirs), and a JAX job sampled
#              first with its command buffers on and off (XLA_FLAGS --xla_gpu_enable_command_buffer=)
#   pc-order   the same probe: PC sampling after CUPTI's first use in the process was an activity session or a
#              subscriber alone, and with PC sampling queried or enabled first (which first use leaves PC sampling
#              no sample inside the program's kernels, and what avoids it)
#   pc-inject  the same probe: PC sampling after activity records turned on and off while another thread launches
#              (parked, or parked with work in flight, at either edge; by kind), after a trace by the injection
#              library itself called in the probe's own process (no ptrace; its settings in PC_INJECT_ARGS, `;`
#              between variables), and a C job of the probe's (`serve`) attached with `trace --pid`
#              (PC_INJECT_TRACE_ARGS), then `profile --pid --pc-sampling` (PC_INJECT_PC_ARGS; PC_INJECT_SERVE=none:
#              sampled alone); PC_INJECT_VARIANTS picks the probe's variants
#   hang       gpu-host/scripts/hang_probe.cu: what a thread of a hung program can still ask (a stream query,
#              CUPTI's flushes) while a kernel hangs and the main thread waits in the driver
#   schedule   a job whose own torch.profiler runs on a `schedule`, attached with four 2 s trace windows (the
#              injection library's debug log in the job's log), and its untouched run of the same steps
#   after-pc   a job with its torch.profiler open: trace, PC sampling, then three traces
#   nvtx-state which modules of a PyTorch process carry NVTX v3 state (symbol table), and whether stripped
#   container  a PyTorch job (CONTAINER_KINDS: eager graph) and the C `serve` job in mount and PID namespaces of their
#              own, with a /tmp of their own (as a container's): PC sampling, a trace, kernel metrics and PC sampling
#              again by --pid (the host's pid), the pid the trace names, and what each left in the job's /tmp
#   host       nsys, perf, versions
# Stage first (STAGE_ONLY='^gpu-tools$' scripts/gpu-stage, or the CLI alone in .gpu/bin/bin-gpu-tools), then:
#   OUT=/tmp/toolbox bash gpu-host/scripts/attach_toolbox.sh [PART...]
set -u
root=$(cd "$(dirname "$0")/../.." && pwd); gt=$root/.gpu/bin/bin-gpu-tools; py=${PYTHON:-python3}
out=${OUT:-/tmp/attach_toolbox}; mkdir -p "$out"; unset GPU_TOOLS_INJECT_LIB
parts=${*:-host pc-graph pc-order pc-inject hang nvtx-state pc-graph-tool schedule late serving after-pc nvtx-attach serving-profile hung-flight}
job=$root/gpu-host/python/survival_job.py
cuda=${CUDA_HOME:-/usr/local/cuda}
inc=$(dirname "$(find "$cuda/" -name cupti.h 2>/dev/null | head -1)")
lib=$(dirname "$(find "$cuda/" -name 'libcupti.so*' 2>/dev/null | head -1)")
build() { # NAME: nvcc of gpu-host/scripts/NAME.cu into $out/NAME
  nvcc -O2 -std=c++17 -arch=sm_90 -I"$inc" -o "$out/$1" "$root/gpu-host/scripts/$1.cu" -L"$lib" -lcupti -lcuda \
    -lpthread -ldl -Xlinker -rpath="$lib" > "$out/$1.nvcc.txt" 2>&1 || { echo "nvcc $1 failed: $(head -c 600 "$out/$1.nvcc.txt")"; return 1; }
}
wait_ready() { # LOG: the pid of its first `ready PID` line, waiting up to 60 s
  local p
  for _ in $(seq 600); do
    p=$(grep -m1 -o '^ready [0-9]*' "$1" 2>/dev/null | cut -d' ' -f2)
    [ -n "$p" ] && { echo "$p"; return 0; }
    sleep 0.1
  done
  return 1
}

for part in $parts; do
  echo "=== $part $(date -u +%T)"
  case $part in
  host)
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    $py -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1 | tail -1
    for t in nsys perf ncu cuda-gdb gdb valgrind; do echo "$t: $(command -v $t || echo none)"; done
    nproc; free -g | head -2 ;;
  pc-graph)
    build pc_graph_probe || continue
    for v in eager graph-after graph-before graph-before-upload graph-before-serial eager-then-graph-before; do
      timeout 60 "$out/pc_graph_probe" "$v" 400 200 2>&1 | tail -3
    done ;;
  pc-nonuser)
    build pc_graph_probe || continue
    for v in graph-before graph-node-before graph-node-after graph-node-only-before graph-node-update-before \
      module-ptx-before module-ptx-after; do
      timeout 60 "$out/pc_graph_probe" "$v" 400 200 2>&1 | tail -3
    done
    # How XLA builds its kernels here (ptxas found, or the driver's PTX JIT), which the sampling may depend on.
    $py -c 'import jax; print("jax", jax.__version__, jax.devices())' 2>&1 | tail -1
    $py -c 'import shutil, jax._src.lib as l; print("ptxas", shutil.which("ptxas"), "cuda", getattr(l, "cuda_versions", None) and l.cuda_versions.cuda_runtime_get_version())' 2>&1 | tail -1
    for cb in on off; do
      d=$out/pc-nonuser-jax-$cb; rm -rf "$d"; mkdir -p "$d"
      flags=${XLA_FLAGS:-}; [ $cb = off ] && flags="$flags --xla_gpu_enable_command_buffer="
      XLA_FLAGS=$flags STOP_FILE=$d/stop $py "$job" jax --seconds 120 > "$d/job.log" 2>&1 &
      j=$!
      pid=$(wait_ready "$d/job.log") || { echo "jax ($cb): no ready line: $(tail -3 "$d/job.log")"; kill $j; continue; }
      sleep 1
      timeout 60 "$gt" profile --pid "$pid" --duration 2 --pc-sampling > "$d/pc.txt" 2>&1
      echo "jax, command buffers $cb: pc rc=$? $(grep -o 'counted [0-9]* samples in [0-9]* PC records ([0-9]* dropped, [0-9]* outside' "$d/pc.txt" | head -1)"
      grep -v '^ *[0-9]' "$d/pc.txt" | head -6 | cut -c1-250
      touch "$d/stop"; wait $j
      echo "jax ($cb): $(grep -m1 '^result' "$d/job.log" || tail -c 300 "$d/job.log")"
    done ;;
  container)
    # The job's /tmp is a fresh tmpfs; the checkout and $out are bound back where they lie under /tmp (the job reads
    # the one and writes its stop file's folder in the other). It is pid 1 in its PID namespace.
    contain() { # COMMAND...: runs it in mount and PID namespaces of its own, with a /tmp of its own
      unshare --mount --pid --fork --kill-child --mount-proc sh -c 'set -e; mount -t tmpfs t /mnt; mkdir /mnt/h
        mount --bind /tmp /mnt/h
        mount -t tmpfs t /tmp
        for k in "$0" "$1"; do case $k in /tmp/*) mkdir -p "$k"; mount --bind "/mnt/h/${k#/tmp/}" "$k";; esac; done
        shift; exec "$@"' "$root" "$out" "$@"
    }
    host_pid() { # PID: the descendant of PID that is pid 1 in a PID namespace of its own, as this shell sees it
      local q=$1 c
      for _ in 1 2 3 4; do
        c=$(pgrep -P "$q" | head -1); [ -n "$c" ] || return 1; q=$c
        awk '/^NSpid:/ { found = (NF > 2 && $NF == 1) } END { exit !found }' "/proc/$q/status" && { echo "$q"; return 0; }
      done
      return 1
    }
    build pc_graph_probe
    for kind in ${CONTAINER_KINDS:-eager graph} serve; do
      d=$out/container-$kind; rm -rf "$d"; mkdir -p "$d"
      if [ $kind = serve ]; then
        [ -x "$out/pc_graph_probe" ] || continue
        contain "$out/pc_graph_probe" serve 60000 200 > "$d/job.log" 2>&1 &
      else
        STOP_FILE=$d/stop contain $py "$job" "$kind" --seconds 120 > "$d/job.log" 2>&1 &
      fi
      j=$!
      ns_pid=$(wait_ready "$d/job.log") || { echo "$kind: no ready line: $(tail -3 "$d/job.log")"; kill $j; continue; }
      pid=$(host_pid $j) || { echo "$kind: its pid here not found (pid $ns_pid there)"; kill $j; continue; }
      echo "$kind: pid $pid (pid $ns_pid in its PID namespace), mount namespace $(readlink /proc/$pid/ns/mnt) (here $(readlink /proc/self/ns/mnt)), its /tmp: $(ls /proc/$pid/root/tmp | head -5 | tr '\n' ' ')"
      sleep 1
      timeout 60 "$gt" profile --pid "$pid" --duration 2 --pc-sampling > "$d/pc1.txt" 2>&1
      echo "$kind: pc rc=$? $(grep -o 'counted [0-9]* samples in [0-9]* PC records ([0-9]* dropped, [0-9]* outside' "$d/pc1.txt" | head -1)"
      grep -v '^ *[0-9]' "$d/pc1.txt" | head -4 | cut -c1-250
      timeout 90 "$gt" trace --pid "$pid" --duration 2 -o "$d/t.gputrace" > "$d/t.txt" 2>&1
      echo "$kind: trace rc=$? $(grep -iE 'kernels|error|refused|PID namespace' "$d/t.txt" | head -4 | tr '\n' ' ' | cut -c1-400)"
      timeout 90 "$gt" profile --pid "$pid" --duration 2 > "$d/metrics.txt" 2>&1
      echo "$kind: metrics rc=$? $(grep -ciE 'kernel|gemm|elementwise' "$d/metrics.txt") lines naming kernels"
      grep -iE 'error|refused|not ' "$d/metrics.txt" | head -3 | cut -c1-250
      timeout 60 "$gt" profile --pid "$pid" --duration 2 --pc-sampling > "$d/pc2.txt" 2>&1
      echo "$kind: pc after rc=$? $(grep -o 'counted [0-9]* samples in [0-9]* PC records ([0-9]* dropped, [0-9]* outside' "$d/pc2.txt" | head -1)"
      echo "$kind: its /tmp after: $(ls /proc/$pid/root/tmp | tr '\n' ' ' | cut -c1-300); here: $(ls /tmp | grep -c gpu-tools-) gpu-tools entries"
      # Pid 1 of a namespace takes from here only the signals it handles, and SIGKILL.
      [ $kind = serve ] && kill -9 "$pid" 2>/dev/null || touch "$d/stop"
      wait $j
      echo "$kind: rc=$? $(grep -m1 '^result' "$d/job.log" || tail -c 200 "$d/job.log")"
    done ;;
  pc-order)
    build pc_graph_probe || continue
    for v in ${PC_ORDER_VARIANTS:-eager eager-late-fn activity-first activity-first-late-fn subscribe-first register-first \
      enable-first activity-finalize-first prime-pc-activity-first ts-first ts-realtime-first period-first gtrace-first \
      thread-first tracer-first tracer-first-late-fn concurrent-first}; do
      timeout 60 "$out/pc_graph_probe" "$v" 200 200 2>&1 | tail -5
    done ;;
  pc-inject)
    build pc_graph_probe || continue
    export PROBE_INJECT=$root/.gpu/bin/libgpu_tools_inject.so
    for v in ${PC_INJECT_VARIANTS:-eager concurrent-first concurrent-quiet-first concurrent-quiet-enable-first \
      concurrent-quiet-disable-first concurrent-quiet-busy-first concurrent-kernel-first concurrent-api-first \
      concurrent-driver-first concurrent-runtime-first tracer-first inject-first inject-concurrent-first}; do
      timeout 90 "$out/pc_graph_probe" "$v" 200 200 2>&1 | grep -E '^(result|inject|error)' | tail -4
    done
    for a in ${PC_INJECT_ARGS:-"GPU_TOOLS_TRACE_KINDS=kernel" "GPU_TOOLS_TRACE_KINDS=kernel;GPU_TOOLS_FLIGHT_RECORDER=0" \
      "GPU_TOOLS_TRACE_KINDS=kernel,runtime,driver;GPU_TOOLS_FLIGHT_RECORDER=0" "GPU_TOOLS_TRACE_API=launches;GPU_TOOLS_FLIGHT_RECORDER=0" \
      "GPU_TOOLS_TRACE_LOG=debug"}; do
      echo "PROBE_INJECT_ARG=$a"
      PROBE_INJECT_ARG=$a timeout 90 "$out/pc_graph_probe" inject-first 200 200 > "$out/inject.txt" 2>&1
      grep -E '^(result|inject|error)' "$out/inject.txt" | tail -4
      case $a in *debug*) grep -iE 'cupti|enable|clock|thread' "$out/inject.txt" | cut -c1-200 | head -40 ;; esac
    done
    unset PROBE_INJECT
    for first in ${PC_INJECT_SERVE:-trace none}; do
      d=$out/pc-inject-$first; rm -rf "$d"; mkdir -p "$d"
      "$out/pc_graph_probe" serve 60000 200 > "$d/job.log" 2>&1 &
      j=$!
      pid=$(wait_ready "$d/job.log") || { echo "no ready line"; kill $j; continue; }
      sleep 1
      if [ $first = trace ]; then
        timeout 60 "$gt" trace --pid "$pid" --duration 2 -q ${PC_INJECT_TRACE_ARGS:-} -o "$d/t.gputrace" > "$d/t.txt" 2>&1
        echo "serve: trace rc=$? $(grep -E '^--- summary|error|kernel' "$d/t.txt" | head -3 | tr '\n' ' ' | cut -c1-300)"
      fi
      timeout 60 "$gt" profile --pid "$pid" --duration 2 --pc-sampling ${PC_INJECT_PC_ARGS:-} > "$d/pc.txt" 2>&1
      echo "serve ($first first): pc rc=$?"; grep -v '^ *[0-9]' "$d/pc.txt" | head -8 | cut -c1-250
      kill $j 2>/dev/null; wait $j
    done ;;
  hang)
    build hung_job
    build hang_probe || continue
    for v in query flush flush-forced ctx-sync-other; do timeout 60 "$out/hang_probe" "$v" 1500 2>&1 | tail -6; done ;;
  nvtx-state)
    $py - <<'PY' 2>&1 | tail -40
import subprocess, torch
torch.cuda.init(); torch.zeros(1, device="cuda")
paths = sorted({l.split()[-1] for l in open("/proc/self/maps") if ".so" in l and l.split()[-1].startswith("/")})
for p in paths:
    try:
        syms = subprocess.run(["readelf", "-sW", p], capture_output=True, text=True, timeout=60).stdout
    except Exception as e:
        print("readelf failed", p, e); continue
    has_symtab = ".symtab" in subprocess.run(["readelf", "-SW", p], capture_output=True, text=True).stdout
    n = [l.split()[-1] for l in syms.splitlines() if "nvtxGlobals_v3" in l or "nvtxEtiGetModuleFunctionTable_v3" in l]
    strings = subprocess.run(["grep", "-c", "NVTX_INJECTION64_PATH", p], capture_output=True, text=True).stdout.strip()
    if n or strings not in ("", "0"):
        print(p.split("/")[-1], "symtab" if has_symtab else "stripped", "nvtx symbols:", " ".join(sorted(set(n))), "env string:", strings)
PY
    ;;
  schedule | late)
    kind=profiler-schedule; [ "$part" = late ] && kind=profiler-late
    d=$out/$part; mkdir -p "$d"
    $py -X faulthandler "$job" $kind --seconds 24 > "$d/job.log" 2> "$d/job.err" &
    j=$!
    pid=$(wait_ready "$d/job.log") || { echo "no ready line"; tail -5 "$d/job.err"; continue; }
    sleep 3
    for n in 1 2 3 4; do
      GPU_TOOLS_TRACE_LOG=debug timeout 60 "$gt" trace --pid "$pid" --duration 2 -q -o "$d/w$n.gputrace" > "$d/w$n.txt" 2>&1
      echo "window $n rc=$? $(grep -E '^--- summary|error|warning' "$d/w$n.txt" | head -3 | tr '\n' ' ')"
      sleep 1.5
    done
    wait $j; echo "job rc=$?"
    grep -E '^(torch_profiler|result)' "$d/job.log"
    steps=$(grep -m1 '^result' "$d/job.log" | grep -o 'steps [0-9]*' | cut -d' ' -f2)
    $py "$job" $kind --steps "$steps" 2>/dev/null | grep -E '^(torch_profiler|result)' | sed 's/^/untouched: /'
    grep -v '^progress' "$d/job.err" | grep -iE 'gpu_tools|cupti' | cut -c1-300 | tail -60 ;;
  pc-graph-tool)
    d=$out/pc-graph-tool; mkdir -p "$d"
    $py "$job" graph --seconds 12 > "$d/job.log" 2> "$d/job.err" &
    j=$!
    pid=$(wait_ready "$d/job.log") || { echo "no ready line"; continue; }
    sleep 1
    GPU_TOOLS_TRACE_LOG=debug timeout 60 "$gt" profile --pid "$pid" --duration 2 --pc-sampling > "$d/pc.txt" 2>&1
    echo "pc-sampling rc=$?"; grep -v '^ *[0-9]' "$d/pc.txt" | head -20 | cut -c1-250
    wait $j; echo "job rc=$?" ;;
  serving)
    d=$out/serving; mkdir -p "$d"
    $py "$job" serving --seconds 20 > "$d/job.log" 2> "$d/job.err" &
    j=$!
    pid=$(wait_ready "$d/job.log") || { echo "no ready line"; tail -5 "$d/job.err"; continue; }
    sleep 1
    GPU_TOOLS_TRACE_LOG=debug timeout 60 "$gt" trace --pid "$pid" --duration 2 -q -o "$d/t.gputrace" > "$d/t.txt" 2>&1
    echo "trace rc=$? $(grep -E '^--- summary|error|warning' "$d/t.txt" | head -3 | tr '\n' ' ')"
    GPU_TOOLS_TRACE_LOG=debug timeout 60 "$gt" profile --pid "$pid" --duration 2 > "$d/m.txt" 2>&1
    echo "metrics rc=$?"; grep -v '^ *[0-9]' "$d/m.txt" | head -12 | cut -c1-250
    GPU_TOOLS_TRACE_LOG=debug timeout 60 "$gt" profile --pid "$pid" --duration 2 --pc-sampling > "$d/pc.txt" 2>&1
    echo "pc-sampling rc=$?"; grep -v '^ *[0-9]' "$d/pc.txt" | head -12 | cut -c1-250
    wait $j; echo "job rc=$? $(grep '^result' "$d/job.log")"
    grep -v '^progress' "$d/job.err" | grep -iE 'gpu_tools|cupti' | cut -c1-250 | tail -25 ;;
  nvtx-attach)
    # A job pushing NVTX ranges every step, never started with a tool: two attached windows must record them, the
    # job's own result must be its untouched one.
    d=$out/nvtx-attach; mkdir -p "$d"
    rm -f "$d/stop"
    STOP_FILE=$d/stop $py "$job" nvtx --seconds 40 > "$d/job.log" 2> "$d/job.err" &
    j=$!
    pid=$(wait_ready "$d/job.log") || { echo "no ready line"; tail -5 "$d/job.err"; continue; }
    sleep 1
    for n in 1 2; do
      GPU_TOOLS_TRACE_LOG=info timeout 60 "$gt" trace --pid "$pid" --duration 2 -o "$d/w$n.gputrace" > "$d/w$n.txt" 2>&1
      echo "window $n rc=$? $(grep -E 'summary|NVTX' "$d/w$n.txt" | head -6 | cut -c1-300 | tr '\n' ' ')"
      "$gt" stats "$d/w$n.gputrace" --report nvtx_sum 2>&1 | head -12
      sleep 1
    done
    touch "$d/stop"
    wait $j; echo "job rc=$? $(grep '^result' "$d/job.log")"
    grep -v '^progress' "$d/job.err" | grep -iE 'nvtx' | cut -c1-300 | tail -12 ;;
  serving-profile)
    d=$out/serving-profile; mkdir -p "$d"
    rm -f "$d/stop"
    STOP_FILE=$d/stop $py "$job" serving --seconds 60 > "$d/job.log" 2> "$d/job.err" &
    j=$!
    pid=$(wait_ready "$d/job.log") || { echo "no ready line"; tail -5 "$d/job.err"; continue; }
    sleep 1
    timeout 90 "$gt" profile --pid "$pid" --duration 2 --pc-sampling > "$d/pc1.txt" 2> "$d/pc1.err"; echo "pc1 rc=$?"
    tail -4 "$d/pc1.err" | cut -c1-400; head -5 "$d/pc1.txt" | cut -c1-200
    timeout 90 "$gt" profile --pid "$pid" --duration 4 > "$d/m.txt" 2> "$d/m.err"; echo "metrics rc=$?"
    tail -6 "$d/m.err" | cut -c1-400; head -14 "$d/m.txt" | cut -c1-220
    timeout 90 "$gt" profile --pid "$pid" --duration 2 --pc-sampling > "$d/pc2.txt" 2> "$d/pc2.err"; echo "pc2 rc=$?"
    tail -4 "$d/pc2.err" | cut -c1-400
    timeout 60 "$gt" trace --pid "$pid" --duration 1 -q -o "$d/t.gputrace" > "$d/t.txt" 2>&1
    echo "trace after rc=$? $(grep -E '^--- summary' "$d/t.txt")"
    timeout 60 "$gt" where --yes "$pid" > "$d/where.txt" 2>&1; echo "where rc=$?"; head -12 "$d/where.txt" | cut -c1-200
    touch "$d/stop"; wait $j; echo "job rc=$? $(grep '^result' "$d/job.log")" ;;
  hung-flight)
    # hung_job: a trace, then a kernel that hangs; `where` must name it from the flight recorder, a profile must be
    # refused by name at once; then released, the job runs on.
    d=$out/hung-flight; mkdir -p "$d"
    build hung_job || continue
    rm -f "$d/hang" "$d/release" "$d/stop"
    HANG_FILE=$d/hang RELEASE_FILE=$d/release STOP_FILE=$d/stop "$out/hung_job" --seconds 60 > "$d/job.log" 2>&1 &
    j=$!
    pid=$(wait_ready "$d/job.log") || { echo "no ready line"; continue; }
    timeout 60 "$gt" trace --pid "$pid" --duration 1 -o "$d/t.gputrace" > "$d/t.txt" 2>&1
    echo "trace rc=$? $(grep -E '^--- summary|flight|refuse' "$d/t.txt" | cut -c1-250 | tr '\n' ' ')"
    touch "$d/hang"; sleep 2
    t0=$(date +%s%N); timeout 60 "$gt" where --yes "$pid" > "$d/where.txt" 2>&1
    echo "where rc=$? ms=$((($(date +%s%N) - t0) / 1000000))"; cat "$d/where.txt" | cut -c1-220 | head -20
    t0=$(date +%s%N); timeout 90 "$gt" profile --pid "$pid" --duration 1 --pc-sampling > "$d/pc.txt" 2>&1
    echo "pc-sampling during the hang rc=$? ms=$((($(date +%s%N) - t0) / 1000000))"; tail -3 "$d/pc.txt" | cut -c1-300
    touch "$d/release"; sleep 1; touch "$d/stop"
    wait $j; echo "job rc=$? $(grep -E '^(released|result)' "$d/job.log" | tr '\n' ' ')" ;;
  after-pc)
    d=$out/after-pc; mkdir -p "$d"
    GPU_TOOLS_TRACE_LOG=debug $py -X faulthandler "$job" profiler-open --seconds 30 > "$d/job.log" 2> "$d/job.err" &
    j=$!
    pid=$(wait_ready "$d/job.log") || { echo "no ready line"; continue; }
    sleep 2
    n=0
    for tool in trace pc-sampling trace trace trace; do
      n=$((n + 1))
      case $tool in
      trace) GPU_TOOLS_TRACE_LOG=debug timeout 60 "$gt" trace --pid "$pid" --duration 2 -q -o "$d/w$n.gputrace" > "$d/w$n.txt" 2>&1 ;;
      pc-sampling) timeout 60 "$gt" profile --pid "$pid" --duration 2 --pc-sampling > "$d/w$n.txt" 2>&1 ;;
      esac
      echo "window $n $tool rc=$? $(grep -E '^--- summary|error|refus|stall' "$d/w$n.txt" | head -3 | cut -c1-300 | tr '\n' ' ')"
      sleep 1
    done
    wait $j; echo "job rc=$?"
    grep -E '^(torch_profiler |result)' "$d/job.log"
    grep -v '^progress' "$d/job.err" | grep -iE 'gpu_tools|cupti' | cut -c1-300 | tail -60 ;;
  esac
done
