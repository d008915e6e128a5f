#!/usr/bin/env python3
"""A PyTorch training job to attach to: deterministic, so that its result can be compared with an untouched run.

    python3 attach_target.py [--steps 6000] [--profile-steps 20 [--profile-at STEP]]

Trains an MLP with Adam on fixed random data for --steps steps. Prints `ready PID` when the first step is done,
`progress STEPS SECONDS` about every half second, then `result LOSS CHECKSUM` (the last loss and the sum of every
parameter, with enough digits to see any difference). With --profile-steps K it then runs K more steps under
torch.profiler and prints `torch_profiler kernels N`: the kernels the job's own profiler recorded. With
--profile-at STEP those K steps run under torch.profiler at that step of the loop instead, and the loop goes on.
"""
import argparse
import os
import sys
import time

# Deterministic cuBLAS, set by the job itself before CUDA starts.
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=6000)
    p.add_argument("--profile-steps", type=int, default=0)
    p.add_argument("--profile-at", type=int, default=0)
    p.add_argument("--width", type=int, default=1024)
    args = p.parse_args()

    import torch
    from torch import nn

    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    device = torch.device("cuda")
    w = args.width
    model = nn.Sequential(
        nn.Linear(w, w), nn.ReLU(), nn.Linear(w, w), nn.ReLU(), nn.Linear(w, w), nn.ReLU(), nn.Linear(w, 10)
    ).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    loss_fn = nn.CrossEntropyLoss()
    x = torch.randn(256, w, device=device)
    y = torch.randint(0, 10, (256,), device=device)

    def step():
        opt.zero_grad(set_to_none=False)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def profiled(k):
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(k):
                step()
            torch.cuda.synchronize()
        kernels = sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)
        print(f"torch_profiler kernels {kernels}", flush=True)

    loss = step()
    torch.cuda.synchronize()
    print(f"ready {os.getpid()}", flush=True)
    start = time.perf_counter()
    last = start
    for i in range(1, args.steps):
        if args.profile_steps and args.profile_at == i:
            profiled(args.profile_steps)
        loss = step()
        if i % 50 == 0:
            torch.cuda.synchronize()
            now = time.perf_counter()
            if now - last >= 0.5:
                print(f"progress {i} {now - start:.3f}", flush=True)
                last = now
    torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    checksum = sum(p.double().sum().item() for p in model.parameters())
    print(f"steps {args.steps} seconds {elapsed:.3f} ms_per_step {elapsed * 1e3 / max(args.steps - 1, 1):.4f}")
    print(f"result {loss.item():.10f} {checksum:.10f}", flush=True)

    if args.profile_steps and not args.profile_at:
        profiled(args.profile_steps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
