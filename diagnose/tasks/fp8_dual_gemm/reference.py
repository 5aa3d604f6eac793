"""FP8 dual GEMM: C = silu(sa*sb1 * a @ b1^T) * (sa*sb2 * a @ b2^T), float16 out.

Child-side only (imports torch). The reference computes in float32 from the same fp8 values, so the
check measures the submission's error, not the fp8 quantisation.

Tolerance: rtol = atol = 1e-2 against the float32 reference. The output is float16, whose rounding alone
is up to 4.9e-4 relative; GPU FP8 GEMMs accumulate in a different order than the reference. 1e-2 passes
every correct kernel we measured and still fails a wrong scale, a missing silu or a transposed operand.
"""
import math

import torch

RTOL = 1e-2
ATOL = 1e-2


def _device():
    return "cuda" if torch.cuda.is_available() else "cpu"


def generate_input(m: int, n: int, k: int, seed: int):
    # Generated on the device, as the harness does: the same seed gives the same inputs on every
    # machine of one device type (CPU and CUDA generators differ).
    dev = _device()
    gen = torch.Generator(device=dev).manual_seed(seed)
    a = torch.randn(m, k, generator=gen, device=dev).to(torch.float8_e4m3fn)
    b1 = torch.randn(n, k, generator=gen, device=dev).to(torch.float8_e4m3fn)
    b2 = torch.randn(n, k, generator=gen, device=dev).to(torch.float8_e4m3fn)
    # Scales keep the GEMM results near unit size whatever k is, so fp16 neither overflows nor flushes.
    scale_a = torch.tensor(1.0 / math.sqrt(k), dtype=torch.float32, device=dev)
    sb = 0.5 + torch.rand(2, generator=gen, device=dev)
    return a, b1, b2, scale_a, sb[0].clone(), sb[1].clone()


def ref_kernel(data):
    a, b1, b2, sa, sb1, sb2 = data
    af = a.float()
    r1 = (af @ b1.float().t()) * (sa * sb1)
    r2 = (af @ b2.float().t()) * (sa * sb2)
    return (torch.nn.functional.silu(r1) * r2).half()


def check_implementation(data, output):
    if not isinstance(output, torch.Tensor):
        return False, f"expected a torch.Tensor, got {type(output).__name__}"
    a, b1 = data[0], data[1]
    want_shape = (a.shape[0], b1.shape[0])
    if tuple(output.shape) != want_shape:
        return False, f"shape {tuple(output.shape)}, expected {want_shape}"
    if output.dtype != torch.float16:
        return False, f"dtype {output.dtype}, expected torch.float16"
    ref = ref_kernel(data).float()
    out = output.float()
    nan = torch.isnan(out).sum().item()
    if nan:
        return False, f"{nan} NaN values in the output"
    bad = ~torch.isclose(out, ref, rtol=RTOL, atol=ATOL)
    nbad = int(bad.sum().item())
    if nbad:
        idx = bad.nonzero()[0].tolist()
        return False, (f"{nbad} of {out.numel()} elements differ beyond rtol=atol={RTOL}; "
                       f"first at {tuple(idx)}: got {out[tuple(idx)].item():.5g}, "
                       f"expected {ref[tuple(idx)].item():.5g}")
    return True, "ok"
