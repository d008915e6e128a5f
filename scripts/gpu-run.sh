#!/usr/bin/env bash
# Runs what scripts/gpu-stage staged, on a GPU host (which has no Rust toolchain). gpu-stage copies this file to
# .gpu/run.sh; it finds the staged files beside itself, so .gpu/ can be carried anywhere.
#
#   bash .gpu/run.sh                                        every staged test binary, then a pass/fail summary
#   bash .gpu/run.sh test|example|bench|bin NAME [ARGS...]  one binary, .gpu/bin/KIND-NAME
set -u
here=$(cd "$(dirname "$0")" && pwd)

# The binaries load CUPTI and the CUDA libraries at run time: add the usual CUDA install's folders.
for d in /usr/local/cuda/extras/CUPTI/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda/lib64; do
  [ -d "$d" ] && export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$d"
done
# The tests find the examples, bin-gpu-tools and the injection libraries here (gpu_tools_testing::STAGE_BIN).
export GPU_STAGE_BIN="$here/bin"
# gpu-tools would otherwise trace with the copy it embeds; the staged one is the one under test.
if [ -f "$here/bin/libgpu_tools_inject.so" ]; then
  export GPU_TOOLS_INJECT_LIB="${GPU_TOOLS_INJECT_LIB:-$here/bin/libgpu_tools_inject.so}"
fi
# The tests' C doubles: the folder compiled into the test binaries is on the build machine.
if [ -d "$here/doubles" ]; then
  export GPU_TOOLS_DOUBLES_DIR="${GPU_TOOLS_DOUBLES_DIR:-$here/doubles}"
fi

if [ $# -ge 1 ]; then
  case "$1" in
  test | example | bench | bin) ;;
  *)
    echo "usage: bash .gpu/run.sh [test|example|bench|bin NAME [ARGS...]]" >&2
    exit 2
    ;;
  esac
  [ $# -ge 2 ] || { echo "run.sh: $1 needs a NAME" >&2; exit 2; }
  exe="$here/bin/$1-$2"
  if [ ! -x "$exe" ]; then
    echo "run.sh: $1 $2 is not staged; staged as $1:" >&2
    for f in "$here/bin/$1-"*; do [ -e "$f" ] && echo "  ${f##*/"$1"-}" >&2; done
    exit 2
  fi
  shift 2
  exec "$exe" "$@"
fi

# One test thread: hardware tests share the GPU and its counters.
pass=0 fail=0
for t in "$here"/bin/test-*; do
  [ -x "$t" ] || continue
  echo "=== ${t##*/}"
  if "$t" --test-threads=1; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    echo "FAILED: ${t##*/}"
  fi
done
echo "test binaries: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
