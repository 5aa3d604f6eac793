"""A small example that runs anywhere (CPU or GPU): a compiled epilogue warmed up 40 times per new shape,
each warmup step 0.5 s (20 s per new shape). Under a 20 s budget it times out; `diagnose run` finds the warmup loop."""
import time

import torch
import torch.nn.functional as F


@torch.compile(backend="eager")
def _epilogue(r1, r2):
    return (F.silu(r1) * r2).half()


_seen = set()


def custom_kernel(data):
    a, b1, b2, sa, sb1, sb2 = data
    r1 = torch._scaled_mm(a, b1.t(), sa, sb1, out_dtype=torch.float32)
    r2 = torch._scaled_mm(a, b2.t(), sa, sb2, out_dtype=torch.float32)
    if r1.shape not in _seen:
        for _ in range(40):
            _epilogue(r1, r2)
            time.sleep(0.5)
        _seen.add(r1.shape)
    return _epilogue(r1, r2)
