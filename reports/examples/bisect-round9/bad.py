"""Round 9 of the seed story (rebuilt from the four engineers' write-ups).

What the team changed from the working baseline, all at once:
  - a fused SiLU-multiply epilogue under torch.compile(mode="max-autotune", fullgraph=True);
  - 10 warmup iterations instead of 3;
  - the fused kernel warmed up at import, from the graph cache's __init__;
  - the CUDA graph capture kept, now around the compiled function.
"""
import torch
import torch.nn.functional as F

from task import input_t, output_t


@torch.compile(mode="max-autotune", fullgraph=True)
def _fused_silu_mul(r1: torch.Tensor, r2: torch.Tensor) -> torch.Tensor:
    return (F.silu(r1) * r2).half()


class _SantosGraphCache:
    def __init__(self):
        self.graphs = {}
        self._warmup_fused_kernel()

    def _warmup_fused_kernel(self):
        # Compile the fused epilogue at import so that the first call is fast.
        r1 = torch.randn(256, 4096, device="cuda")
        r2 = torch.randn(256, 4096, device="cuda")
        for _ in range(10):
            _fused_silu_mul(r1, r2)
        torch.cuda.synchronize()

    def get_or_create(self, M, N, K, data):
        key = (M, N, K)
        if key not in self.graphs:
            self.graphs[key] = self._create_graph(M, N, K, data)
        return self.graphs[key]

    def _create_graph(self, M, N, K, data):
        static = tuple(t.clone() for t in data)
        a0, b1s, b2s, sa, sb1, sb2 = static
        for _ in range(10):
            r1 = torch._scaled_mm(a0, b1s.t(), sa, sb1, out_dtype=torch.float32)
            r2 = torch._scaled_mm(a0, b2s.t(), sa, sb2, out_dtype=torch.float32)
            _ = _fused_silu_mul(r1, r2)
        torch.cuda.synchronize()

        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            r1 = torch._scaled_mm(a0, b1s.t(), sa, sb1, out_dtype=torch.float32)
            r2 = torch._scaled_mm(a0, b2s.t(), sa, sb2, out_dtype=torch.float32)
            output = _fused_silu_mul(r1, r2)
        return {"graph": graph, "static": static, "output": output}


_santos_cache = _SantosGraphCache()


def custom_kernel(data: input_t) -> output_t:
    a, b1 = data[0], data[1]
    M, K = a.shape
    N = b1.shape[0]
    entry = _santos_cache.get_or_create(M, N, K, data)
    for dst, src in zip(entry["static"], data):
        dst.copy_(src)
    entry["graph"].replay()
    return entry["output"].clone()
