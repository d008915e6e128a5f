#!/usr/bin/env bash
# Trace file format 3 on a GPU host (CUDA 13, Python with PyTorch): a real trace written by `gpu-tools trace -o`
# is format 3; `stats` reads it (exit 0); 200 copies with one byte changed each (random offsets, random XOR) are
# all refused with exit 1 and a message naming where (format 2: 9 of 100 read with exit 0, 8 with other numbers);
# copies cut inside the last chunk are "truncated", exit 3; the committed fixtures read. Stage first, on the
# build machine:
#
#   STAGE_ONLY='gpu-tools' scripts/gpu-stage
#
# then on the GPU host, in the repository checkout that goes with .gpu/:
#   bash gpu-host/scripts/trace_file_checksums.sh
# It prints a summary line per check and the exit codes counted; nothing is left outside $OUT (default .gpu/out).
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
stage="$root/.gpu"
bin="$stage/bin"
out="${OUT:-$stage/out}/checksums"
gt="$bin/bin-gpu-tools"
export GPU_STAGE_BIN="$bin"
[ -f "$bin/libgpu_tools_inject.so" ] && export GPU_TOOLS_INJECT_LIB="$bin/libgpu_tools_inject.so"
for d in /usr/local/cuda/extras/CUPTI/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda/lib64; do
  [ -d "$d" ] && export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$d"
done
mkdir -p "$out"
trace="$out/torch.gputrace"

printf '=== record (%s)\n' "$(date +%T)"
"$gt" trace -q -o "$trace" -- python3 "$root/gpu-host/python/torch_train.py" --steps 20
echo "trace rc=$? size=$(stat -c %s "$trace") version=$(od -An -tu2 -j8 -N2 "$trace" | tr -d ' ')"
"$gt" stats --report cuda_gpu_kern_sum --format json "$trace" >"$out/good.json"
echo "stats rc=$?"

printf '=== 200 one-byte changes (%s)\n' "$(date +%T)"
python3 - "$gt" "$trace" "$out" <<'PY'
import collections, os, random, subprocess, sys
gt, trace, out = sys.argv[1:]
data = open(trace, "rb").read()
good = open(os.path.join(out, "good.json"), "rb").read()
rng = random.Random(26)
codes, clean_but_other, messages = collections.Counter(), 0, collections.Counter()
for i in range(200):
    at, x = rng.randrange(len(data)), rng.randrange(1, 256)
    b = bytearray(data); b[at] ^= x
    p = os.path.join(out, "changed.gputrace"); open(p, "wb").write(b)
    r = subprocess.run([gt, "stats", "--report", "cuda_gpu_kern_sum", "--format", "json", p], capture_output=True)
    codes[r.returncode] += 1
    if r.returncode == 0 and r.stdout != good:
        clean_but_other += 1
    err = r.stderr.decode(errors="replace")
    messages["names a byte" if "at byte" in err else ("file header" if "file header" in err else err.strip()[:60])] += 1
print("exit codes:", dict(codes), "| exit 0 with other numbers:", clean_but_other, "| messages:", dict(messages))
PY

printf '=== cut inside the last chunk (%s)\n' "$(date +%T)"
size=$(stat -c %s "$trace")
for cut in 5 40 300; do
  head -c $((size - cut)) "$trace" >"$out/cut.gputrace"
  "$gt" stats --report cuda_gpu_kern_sum "$out/cut.gputrace" >/dev/null 2>"$out/cut.err"
  echo "cut $cut bytes: rc=$? $(head -c 160 "$out/cut.err")"
done

printf '=== committed fixtures, the current format and one of format 2 (%s)\n' "$(date +%T)"
for f in "$root"/tests/fixtures/traces/*.gputrace; do
  "$gt" stats --report processes "$f" >/dev/null
  echo "$(basename "$f"): rc=$?"
done
rm -f "$out/changed.gputrace" "$out/cut.gputrace"
