#!/usr/bin/env python3
"""A 2-rank (or N-rank) DDP job over NCCL, to attach to; run with torchrun:

    torchrun --nproc-per-node 2 ddp_job.py [--steps 3000] [--backend nccl|gloo] [--hang-rank R --hang-at S]
        [--slow-rank R]

Each rank trains a small MLP wrapped in DistributedDataParallel on its GPU (LOCAL_RANK; over gloo, LOCAL_RANK modulo
the GPUs it sees, so that ranks can share one GPU, which NCCL refuses). Rank 0 prints
`ready PID` after the first step and `result LOSS` at the end. With --hang-rank R, rank R skips one all_reduce at
step --hang-at, so every other rank waits in NCCL forever: a hung collective, to look at with `where`. With
--slow-rank R, rank R runs --slow-matmuls extra 2048x2048 matrix products each step before its backward pass: a
straggler, whose all-reduces the other ranks wait in (`stats --report stragglers`).

The rank, the size and the local rank come from torchrun's RANK, WORLD_SIZE, LOCAL_RANK (with MASTER_ADDR and
MASTER_PORT); under srun without torchrun, set them from SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID.
"""
import argparse
import os
import sys


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--backend", choices=("nccl", "gloo"), default="nccl")
    p.add_argument("--hang-rank", type=int, default=-1)
    p.add_argument("--hang-at", type=int, default=50)
    p.add_argument("--slow-rank", type=int, default=-1)
    p.add_argument("--slow-matmuls", type=int, default=40)
    args = p.parse_args()
    import torch
    import torch.distributed as dist
    from torch import nn

    local = int(os.environ["LOCAL_RANK"])
    if args.backend == "gloo":
        local %= torch.cuda.device_count()
        torch.cuda.set_device(local)
        dist.init_process_group("gloo")
    else:
        torch.cuda.set_device(local)
        dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10)).cuda()
    ddp = nn.parallel.DistributedDataParallel(model, device_ids=[local])
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
    x = torch.randn(128, 1024, device="cuda")
    y = torch.randint(0, 10, (128,), device="cuda")
    flag = torch.ones(1, device="cuda")
    extra = torch.randn(2048, 2048, device="cuda")
    for step in range(args.steps):
        if step == args.hang_at and args.hang_rank >= 0:
            if rank != args.hang_rank:
                dist.all_reduce(flag)
            torch.cuda.synchronize()
            if rank == args.hang_rank:
                print(f"rank {rank} skipped an all_reduce at step {step}", flush=True)
        opt.zero_grad()
        loss = nn.functional.cross_entropy(ddp(x), y)
        if rank == args.slow_rank:
            for _ in range(args.slow_matmuls):
                extra = extra @ extra
                extra = extra / extra.norm()
        loss.backward()
        opt.step()
        if step == 0:
            torch.cuda.synchronize()
            print(f"ready {os.getpid()} rank {rank}", flush=True)
    torch.cuda.synchronize()
    if rank == 0:
        print(f"result {loss.item():.8f}", flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
