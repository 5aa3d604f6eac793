"""Type aliases a submission may import (`from task import input_t, output_t`), as GPU MODE problems ship."""
from typing import Tuple

import torch

# (a, b1, b2, scale_a, scale_b1, scale_b2): a is (M, K), b1 and b2 are (N, K), all float8_e4m3fn, row-major;
# the scales are float32 0-dim tensors (tensor-wise scaling).
input_t = Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]
output_t = torch.Tensor  # (M, N) float16
