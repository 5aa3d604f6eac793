"""The working baseline of the seed story (submission_best.py): a CUDA graph per shape around two FP8
GEMMs and a plain SiLU-multiply epilogue, 3 warmup iterations, nothing done at import."""
import torch
import torch.nn.functional as F

from task import input_t, output_t


@torch.compile(mode="max-autotune", fullgraph=True)
def _fused_silu_mul(r1: torch.Tensor, r2: torch.Tensor) -> torch.Tensor:
    return (F.silu(r1) * r2).half()


class _CUDAGraphCache:
    def __init__(self):
        self.graphs = {}

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


_graph_cache = _CUDAGraphCache()


def custom_kernel(data: input_t) -> output_t:
    a, b1 = data[0], data[1]
    M, K = a.shape
    N = b1.shape[0]
    entry = _graph_cache.get_or_create(M, N, K, data)
    for dst, src in zip(entry["static"], data):
        dst.copy_(src)
    entry["graph"].replay()
    return entry["output"].clone()
