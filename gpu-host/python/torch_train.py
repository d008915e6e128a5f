#!/usr/bin/env python3
"""A small PyTorch training loop for the tracer benchmark.

    python3 torch_train.py [--steps 5] [--batch 64] [--profile]

A small CNN with an Adam optimizer trains for a few steps on random data that is made on the host and copied to the
GPU each step; the loss is read back each step and the loop ends with torch.cuda.synchronize(). Prints
`torch_train steps N cuda_ms T`, T being the time of the whole CUDA part (model to the GPU, every step, the final
synchronize), which includes CUDA's and the libraries' first-use costs.

With --profile the whole CUDA part runs under torch.profiler (CPU and CUDA activities) and the script also prints
`torch_profiler kernels K memcpys M memsets S`: the profiler's GPU events counted by the categories it gives them
in its Chrome trace (`kernel`, `gpu_memcpy`, `gpu_memset`).
"""
import argparse
import json
import os
import sys
import tempfile
import time


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--profile", action="store_true", help="run the CUDA part under torch.profiler and count its GPU events")
    args = p.parse_args()

    import torch
    from torch import nn

    if not torch.cuda.is_available():
        print("torch_train: CUDA is not available", file=sys.stderr)
        return 1
    torch.manual_seed(0)
    # Data made on the host before any CUDA work, so that every copy happens inside the timed part.
    xs = [torch.randn(args.batch, 3, 32, 32) for _ in range(args.steps)]
    ys = [torch.randint(0, 10, (args.batch,)) for _ in range(args.steps)]

    def cuda_part():
        device = torch.device("cuda")
        model = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(32 * 8 * 8, 10),
        ).to(device)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        loss_fn = nn.CrossEntropyLoss()
        losses = []
        for x, y in zip(xs, ys):
            x = x.to(device)
            y = y.to(device)
            opt.zero_grad(set_to_none=False)
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        torch.cuda.synchronize()
        return losses

    t0 = time.perf_counter()
    if args.profile:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            losses = cuda_part()
    else:
        losses = cuda_part()
    cuda_ms = (time.perf_counter() - t0) * 1e3
    print(f"torch_train steps {args.steps} cuda_ms {cuda_ms:.1f} last_loss {losses[-1]:.4f}")
    if args.profile:
        fd, path = tempfile.mkstemp(suffix=".json")
        os.close(fd)
        try:
            prof.export_chrome_trace(path)
            with open(path) as f:
                events = json.load(f)["traceEvents"]
        finally:
            os.unlink(path)
        count = lambda cat: sum(1 for e in events if e.get("cat") == cat and e.get("ph") == "X")
        print(f"torch_profiler kernels {count('kernel')} memcpys {count('gpu_memcpy')} memsets {count('gpu_memset')}")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
