#!/usr/bin/env python3
"""Every example and every subcommand of every workspace binary behaves like a command-line tool.

Finds the examples and binaries with `cargo metadata` (the `[[example]]`/`[[bin]]` entries and the files cargo
discovers, whoever added them), builds them, and runs each one, and each subcommand a binary lists under
"Commands:" in its --help:
  - with `--help`: exit 0 and a usage text on stdout, which opens with its own description (not the crate's);
  - with an argument none takes: exit 2 and a usage line on stderr;
and, on this machine without GPUs, runs the ones that must fail readably without one: the error is the `Display`
text of the load error (it lists the places searched), never Rust's `Debug` form, and no output file is left.

Usage (from the repository root): python3 .ci/examples_cli.py [TARGET_DIR]
Prints one line per check and exits 1 if any failed, after running all of them.
"""

import json
import os
import re
import subprocess
import sys
import tempfile

BAD_ARGUMENT = "--no-such-option-for-any-example"
# Rust's Debug form of a struct or tuple variant, e.g. `NotFound { library: "...", attempts: [Attempt {`.
DEBUG_FORM = re.compile(r"\b[A-Z][A-Za-z0-9]*(?: \{ [a-z_]+: |\(\")")
# Commands that run without a GPU argument and must stop at a missing vendor library here (no GPU, no ROCm).
NO_DEVICE_RUNS = {("rocprof_trace",), ("checkpoint_replay",), ("activity_tracer",),
                  ("rocprofiler_sdk_tool",), ("gpu-tools", "top")}
# Commands that read saved traces: given a file that is not a trace, each must fail (exit 1) with a message naming
# it, and write nothing (the arguments after the input file; OUT is a path in the run's folder).
BAD_TRACE_RUNS = {("gpu-tools", "stats"): [], ("gpu-tools", "export"): ["--chrome", "OUT.json.gz"],
                  ("gpu-tools", "analyze"): [], ("gpu-tools", "diff"): ["notes.txt"]}
TIMEOUT_S = 120

failures = []


def check(name, what, ok, detail=""):
    print(f"{'ok  ' if ok else 'FAIL'} {name}: {what}" + (f"\n     {detail}" if detail and not ok else ""))
    if not ok:
        failures.append(f"{name}: {what}")


def run(argv, cwd=None):
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S, stdin=subprocess.DEVNULL,
                           cwd=cwd)
        return p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        return None, "", f"timed out after {TIMEOUT_S} s"


def subcommands(help_text):
    """The names listed under "Commands:" in a clap --help text (without `help`)."""
    names, listing = [], False
    for line in help_text.splitlines():
        if line.strip() == "Commands:":
            listing = True
            continue
        if listing:
            if not line.startswith("  ") or not line.strip():
                break
            name = line.split()[0]
            if name != "help":
                names.append(name)
    return names


def check_command(name, argv, descriptions):
    code, out, err = run(argv + ["--help"])
    first = out.strip().splitlines()[0] if out.strip() else ""
    check(name, "--help exits 0 with a usage text", code == 0 and "Usage:" in out,
          f"exit {code}; stdout: {out[:300]!r}; stderr: {err[:300]!r}")
    check(name, "--help opens with its own description", first and not any(first.startswith(d) for d in descriptions),
          f"first line: {first!r}")
    code, out, err = run(argv + [BAD_ARGUMENT])
    check(name, f"{BAD_ARGUMENT} exits 2 with a usage line", code == 2 and "Usage:" in err,
          f"exit {code}; stdout: {out[:300]!r}; stderr: {err[:300]!r}")


def main():
    target = sys.argv[1] if len(sys.argv) > 1 else "target"
    meta = json.loads(subprocess.check_output(
        ["cargo", "metadata", "--format-version", "1", "--no-deps"], text=True))
    examples = sorted((pkg["name"], t["name"]) for pkg in meta["packages"] for t in pkg["targets"]
                      if "example" in t["kind"])
    bins = sorted((pkg["name"], t["name"]) for pkg in meta["packages"] for t in pkg["targets"]
                  if "bin" in t["kind"] and pkg["name"] != "xtask")
    # Crate descriptions a --help must not open with (clap's default `about`).
    descriptions = [pkg["description"][:40] for pkg in meta["packages"] if pkg.get("description")]
    if not examples or not bins:
        sys.exit("no examples or no binaries found")
    print(f"{len(examples)} examples: " + ", ".join(name for _, name in examples))
    print(f"{len(bins)} binaries: " + ", ".join(name for _, name in bins))
    # The release configuration .ci/run builds once for all its release steps (what scripts/gpu-stage builds, less
    # xtask): it enables every example; nothing is built again.
    subprocess.check_call(["cargo", "build", "--release", "--workspace", "--exclude", "xtask", "--examples", "--bins",
                           "--features", "nvidia-hw-tests,amd-hw-tests", "--target-dir", target])
    release = os.path.abspath(os.path.join(target, "release"))
    commands = [(name, [os.path.join(release, "examples", name)]) for _, name in examples]
    for _, name in bins:
        binary = os.path.join(release, name)
        commands.append((name, [binary]))
        _, out, _ = run([binary, "--help"])
        commands += [(f"{name} {sub}", [binary, sub]) for sub in subcommands(out)]
    for name, argv in commands:
        if not os.access(argv[0], os.X_OK):
            check(name, "was built", False, f"no executable {argv[0]}")
            continue
        check_command(name, argv, descriptions)
        if tuple(name.split(" ", 1)) in NO_DEVICE_RUNS:
            with tempfile.TemporaryDirectory() as cwd:
                code, out, err = run(argv, cwd=cwd)
                left = os.listdir(cwd)
            text = out + err
            readable = code not in (0, None) and "not loaded; tried" in text and not DEBUG_FORM.search(text)
            check(name, "without a GPU: fails with the load error's Display text", readable,
                  f"exit {code}; output: {text[:600]!r}")
            check(name, "without a GPU: leaves no file behind", not left, f"left: {left}")
        extra = BAD_TRACE_RUNS.get(tuple(name.split(" ", 1)))
        if extra is not None:
            with tempfile.TemporaryDirectory() as cwd:
                with open(os.path.join(cwd, "notes.txt"), "w") as f:
                    f.write("not a trace\n")
                code, out, err = run(argv + ["notes.txt"] + extra, cwd=cwd)
                left = sorted(os.listdir(cwd))
            check(name, "a file that is not a trace: exit 1 naming it", code == 1 and "notes.txt" in err,
                  f"exit {code}; stderr: {err[:400]!r}")
            check(name, "a file that is not a trace: nothing written", left == ["notes.txt"], f"left: {left}")
    if failures:
        print(f"\n{len(failures)} checks failed:")
        for f in failures:
            print(f"  {f}")
        sys.exit(1)
    print(f"\nall {len(commands)} commands behave as tools")


if __name__ == "__main__":
    main()
