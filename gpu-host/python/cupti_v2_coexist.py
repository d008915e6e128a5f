#!/usr/bin/env python3
"""Can a tool's CUPTI subscriber live beside torch.profiler's (Kineto's)? A probe of CUPTI's multiple-subscriber
(`_v2`) calls, run inside a PyTorch process.

    python3 cupti_v2_coexist.py LIBCUPTI MODE

LIBCUPTI is loaded before torch (same soname `libcupti.so.13`: torch then uses it too). MODE says what the
"tool" does before torch.profiler runs:
  none     nothing (torch.profiler alone)
  v1       cuptiSubscribe (as CUPTI 13.0 tools must)
  v2       cuptiSubscribe_v2 with allowMultipleSubscribers = 1, driver API callbacks enabled
  v2-act   as v2, and kernel activity records on its own buffers (cuptiActivityRegisterCallbacks_v2,
           cuptiActivityEnable_v2)
Prints the CUPTI version, each call's result, torch.profiler's CUDA kernel count for 50 matmuls, and what the
tool's subscriber saw (callbacks; with v2-act, kernel records).
"""
import ctypes
import sys

if len(sys.argv) != 3 or sys.argv[2] not in ("none", "v1", "v2", "v2-act"):
    print(__doc__, file=sys.stderr)
    raise SystemExit(2)
lib_path, mode = sys.argv[1], sys.argv[2]
cupti = ctypes.CDLL(lib_path, mode=ctypes.RTLD_GLOBAL)
ver = ctypes.c_uint32(0)
cupti.cuptiGetVersion(ctypes.byref(ver))
print(f"CUPTI API {ver.value}, v2 calls: {hasattr(cupti, 'cuptiSubscribe_v2')}", flush=True)

import torch  # noqa: E402  (after CUPTI: torch binds to the loaded soname)

CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p)
seen = {"callbacks": 0, "kernels": 0, "buffers": 0}


def on_callback(_user, _domain, _cbid, _data):
    seen["callbacks"] += 1


callback = CALLBACK(on_callback)


class Params(ctypes.Structure):
    _fields_ = [
        ("structSize", ctypes.c_size_t),
        ("subscriberName", ctypes.c_char_p),
        ("oldSubscriberName", ctypes.c_char_p),
        ("oldSubscriberSize", ctypes.c_size_t),
        ("allowMultipleSubscribers", ctypes.c_uint8),
        ("padding", ctypes.c_uint8 * 7),
    ]


REQUEST = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t),
                           ctypes.POINTER(ctypes.c_size_t), ctypes.c_void_p)
COMPLETE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_void_p)
buffers = {}
sub = ctypes.c_void_p()


def on_request(buf, size, max_records, _info):
    b = ctypes.create_string_buffer((1 << 20) + 8)
    addr = (ctypes.addressof(b) + 7) & ~7
    buffers[addr] = b
    buf[0] = addr
    size[0] = 1 << 20
    max_records[0] = 0


def on_complete(buf, _size, valid, _info):
    seen["buffers"] += 1
    rec = ctypes.c_void_p()
    while cupti.cuptiActivityGetNextRecord_v2(sub, ctypes.c_void_p(buf), ctypes.c_size_t(valid),
                                              ctypes.byref(rec)) == 0:
        if ctypes.cast(rec, ctypes.POINTER(ctypes.c_uint32))[0] == 10:  # CONCURRENT_KERNEL
            seen["kernels"] += 1
    buffers.pop(buf, None)


request, complete = REQUEST(on_request), COMPLETE(on_complete)

x = torch.randn(1024, 1024, device="cuda")
torch.cuda.synchronize()
if mode == "v1":
    print(f"tool: cuptiSubscribe -> {cupti.cuptiSubscribe(ctypes.byref(sub), callback, None)}", flush=True)
    print(f"tool: enable driver domain -> {cupti.cuptiEnableDomain(1, sub, 1)}", flush=True)
elif mode.startswith("v2"):
    old = ctypes.create_string_buffer(64)
    p = Params(ctypes.sizeof(Params), b"probe", ctypes.cast(old, ctypes.c_char_p), 64, 1)
    r = cupti.cuptiSubscribe_v2(ctypes.byref(sub), callback, None, ctypes.byref(p))
    print(f"tool: cuptiSubscribe_v2(allowMultipleSubscribers=1) -> {r} (old subscriber {old.value!r})", flush=True)
    print(f"tool: enable driver domain -> {cupti.cuptiEnableDomain(1, sub, 1)}", flush=True)
    if mode == "v2-act":
        print(f"tool: cuptiActivityRegisterCallbacks_v2 -> "
              f"{cupti.cuptiActivityRegisterCallbacks_v2(sub, request, complete)}", flush=True)
        print(f"tool: cuptiActivityEnable_v2(CONCURRENT_KERNEL) -> "
              f"{cupti.cuptiActivityEnable_v2(sub, 10, None)}", flush=True)

from torch.profiler import ProfilerActivity, profile  # noqa: E402

before = dict(seen)
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
    for _ in range(50):
        y = x @ x
    torch.cuda.synchronize()
kernels = sum(1 for e in prof.events() if str(e.device_type).endswith("CUDA"))
for _ in range(50):
    y = x @ x
torch.cuda.synchronize()
if mode == "v2-act":
    print(f"tool: cuptiActivityFlushAll -> {cupti.cuptiActivityFlushAll(1)}", flush=True)
print(f"torch.profiler CUDA events {kernels}", flush=True)
print(f"tool saw: {seen['callbacks'] - before['callbacks']} callbacks during torch.profiler, "
      f"{seen['callbacks']} in all; {seen['kernels']} kernel records in {seen['buffers']} buffers", flush=True)
