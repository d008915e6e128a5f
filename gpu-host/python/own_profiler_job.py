# A job whose own torch.profiler ran one session before any attach ("profiled"), or none ("plain"), then a loop of
# matrix products for SECONDS: gpu-host/scripts/pc_own_profiler_probe.sh samples its PCs.
import os, sys, time
import torch
mode, seconds = sys.argv[1], float(sys.argv[2])
x = torch.randn(2048, 2048, device="cuda")
if mode == "profiled":
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as p:
        for _ in range(10):
            y = x @ x
        torch.cuda.synchronize()
    print("own profiler kernels", sum(1 for e in p.events() if e.device_type.name == "CUDA"), flush=True)
print("ready", os.getpid(), flush=True)
t0 = time.time()
n = 0
while time.time() - t0 < seconds:
    for _ in range(8):
        y = x @ x
    torch.cuda.synchronize()
    time.sleep(0.002)
    n += 1
print("done steps", n, flush=True)
