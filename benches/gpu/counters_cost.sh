#!/usr/bin/env bash
# What `trace --counters` costs a PyTorch training loop (gpu-host/python/torch_train.py), against `trace` alone and
# the loop run natively: ROUNDS interleaved rounds of the three (native, trace, trace --counters), each the same
# STEPS steps; medians of the loop's own time (torch_train's cuda_ms: the whole CUDA part) and of the wall time;
# and the CPU time of the gpu-tools process itself (its threads: the receiving end, the PM decode threads, the
# counter thread; not the program's), read from /proc every 0.1 s while it runs (its last 0.1 s at most is missed).
# The bars of the issue: trace --counters at most 1.02x trace, at most 1.05x native.
# Stage first (scripts/gpu-stage; STAGE_ONLY='gpu-tools' is enough), then in the checkout that goes with .gpu/:
#   bash benches/gpu/counters_cost.sh           ROUNDS=7 STEPS=2000 INTERVAL=1ms to change them
set -u
root=$(cd "$(dirname "$0")/../.." && pwd); gt=$root/.gpu/bin/bin-gpu-tools; py=${PYTHON:-python3}
[ -x "$gt" ] || { echo "missing $gt (stage the workspace)"; exit 1; }
out=${OUT:-/tmp/counters_cost}; mkdir -p "$out"; rm -f "$out/results.txt"; unset GPU_TOOLS_INJECT_LIB
ROUNDS=${ROUNDS:-5}; STEPS=${STEPS:-1000}; INTERVAL=${INTERVAL:-1ms}
train=("$py" "$root/gpu-host/python/torch_train.py" --steps "$STEPS")
median() { sort -g | awk '{a[NR]=$1} END {if (NR) print (NR % 2 ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2); else print "-"}'; }
tck=$(getconf CLK_TCK)

# polled LOG CMD...: runs CMD (stdout and stderr to LOG); prints "WALL_MS CPU_MS RC": its wall time, the CPU time
# of its own process (user + system, its children not counted) as /proc last showed it, and its exit code.
polled() {
  local log=$1; shift
  local t0 t1 s stat="" pid rc
  t0=$(date +%s%N)
  "$@" > "$log" 2>&1 &
  pid=$!
  # Until it is gone, or a zombie (whose stat still holds its final times).
  while s=$(cat "/proc/$pid/stat" 2>/dev/null) && [ -n "$s" ]; do
    stat=$s
    case "${s##*) }" in Z*) break ;; esac
    sleep 0.1
  done
  wait "$pid"; rc=$?
  t1=$(date +%s%N)
  # Fields after "pid (comm) ": utime is the 12th, stime the 13th.
  echo "$(( (t1 - t0) / 1000000 )) $(echo "$stat" | awk -v t="$tck" '{ sub(/^.*\) /, ""); print int(($12 + $13) * 1000 / t) }') $rc"
}

echo "torch_train.py --steps $STEPS, $ROUNDS rounds, counters every $INTERVAL; $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
# One warm-up of each (caches, the embedded library written out).
"${train[@]}" > /dev/null 2>&1
"$gt" trace -q --counters -- "${train[@]}" > /dev/null 2>&1
for r in $(seq "$ROUNDS"); do
  for c in native trace counters; do
    case $c in
      native) m=$(polled "$out/$c$r.log" "${train[@]}") ;;
      trace) m=$(polled "$out/$c$r.log" "$gt" trace -q -o "$out/$c$r.gputrace" -- "${train[@]}") ;;
      counters) m=$(polled "$out/$c$r.log" "$gt" trace -q --counters --counter-interval "$INTERVAL" \
        -o "$out/$c$r.gputrace" -- "${train[@]}") ;;
    esac
    cuda=$(grep -o 'cuda_ms [0-9.]*' "$out/$c$r.log" | awk '{print $2}')
    read -r wall cpu rc <<< "$m"
    echo "$c ${cuda:--} $wall $cpu $rc" >> "$out/results.txt"
    printf 'round %d %-9s rc=%s cuda_ms=%s wall_ms=%s gpu-tools_cpu_ms=%s\n' "$r" "$c" "$rc" "${cuda:--}" "$wall" \
      "$([ $c = native ] && echo - || echo "$cpu")"
    [ "$c" = counters ] && grep '^counters:' "$out/$c$r.log"
  done
done

echo
printf '%-10s %12s %9s %9s %12s %9s %9s %16s\n' config cuda_ms x_native x_trace wall_ms x_native x_trace gpu-tools_cpu_ms
get() { grep "^$1 " "$out/results.txt" | awk -v f="$2" '{print $f}' | median; }
nc=$(get native 2); tc=$(get trace 2); nw=$(get native 3); tw=$(get trace 3)
for c in native trace counters; do
  mc=$(get $c 2); mw=$(get $c 3); cpu=$([ $c = native ] && echo - || get $c 4)
  printf '%-10s %12s %9.3f %9.3f %12s %9.3f %9.3f %16s\n' "$c" "$mc" \
    "$(awk -v a="$mc" -v b="$nc" 'BEGIN { print a / b }')" "$(awk -v a="$mc" -v b="$tc" 'BEGIN { print a / b }')" \
    "$mw" "$(awk -v a="$mw" -v b="$nw" 'BEGIN { print a / b }')" "$(awk -v a="$mw" -v b="$tw" 'BEGIN { print a / b }')" \
    "$cpu"
done
echo "(bars: counters <= 1.02x trace and <= 1.05x native; per-round values in $out/results.txt: config cuda_ms wall_ms cpu_ms rc)"
ls -l "$out/trace$ROUNDS.gputrace" "$out/counters$ROUNDS.gputrace"
