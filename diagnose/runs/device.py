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


def visible_gpus() -> list[str]:
    """The GPUs this process may use, without importing torch: as CUDA_VISIBLE_DEVICES names them, else 0..n-1."""
    if not has_gpu():
        return []
    vis = os.environ.get("CUDA_VISIBLE_DEVICES")
    if vis is not None:
        return [x.strip() for x in vis.split(",") if x.strip() and x.strip() != "-1"]
    gpus = "/proc/driver/nvidia/gpus"
    return [str(i) for i in range(len(os.listdir(gpus)) if os.path.isdir(gpus) else 1)]


def gpu_count() -> int:
    """GPUs this process may use (CUDA_VISIBLE_DEVICES respected)."""
    return len(visible_gpus())


def default_jobs() -> int:
    """Concurrent runs: a run is mostly one busy core (imports, Dynamo) with bursts of compile workers, and a
    cold compile wants about 8 GiB. Under 8 cores the bursts take the other half; from 8 up, a run per core (on
    a 16-core H100 host, Round 9's causes stood at 1.29x its cold run with 16 runs at once, 1.46x with 12 and
    2.43x with 8: the first wave then starts whole), up to 16."""
    cpus = os.cpu_count() or 1
    mem_gb = psutil.virtual_memory().total / 2**30
    per_core = cpus if cpus >= 8 else cpus // 2
    return max(1, min(per_core, int(mem_gb // 8), 16))


def gpu_names() -> list[str]:
    """This machine's NVIDIA GPU models, from the driver's own files (no process, no torch)."""
    import glob
    out = []
    for info in sorted(glob.glob("/proc/driver/nvidia/gpus/*/information")):
        try:
            with open(info) as fh:
                out += [line.split(":", 1)[1].strip() for line in fh if line.startswith("Model:")]
        except OSError:
            pass
    # A process pinned to some cards (a triage task) has those cards, not the machine's: CUDA_VISIBLE_DEVICES by
    # index picks from the driver's list (by bus; CUDA's own order is fastest first, the same for one model)
    vis = [x.strip() for x in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if x.strip()]
    if vis and all(x.isdigit() and int(x) < len(out) for x in vis):
        return [out[int(x)] for x in vis]
    return out
