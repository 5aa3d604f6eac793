"""What the parent can tell about the machine without importing torch."""
from __future__ import annotations

import os

import psutil


def has_gpu() -> bool:
    vis = os.environ.get("CUDA_VISIBLE_DEVICES")
    if vis is not None and vis.strip() in ("", "-1"):
        return False
    gpus = "/proc/driver/nvidia/gpus"
    return os.path.exists("/dev/nvidiactl") or (os.path.isdir(gpus) and bool(os.listdir(gpus)))


def default_jobs() -> int:
    """Concurrent runs: a cold compile wants about 4 cores and 16 GiB, and more than 4 runs contend on
    the GPU timing lock more than they gain."""
    cpus = os.cpu_count() or 1
    mem_gb = psutil.virtual_memory().total / 2**30
    return max(1, min(cpus // 4, int(mem_gb // 16), 4))
