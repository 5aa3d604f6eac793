"""Before a diagnosis on a GPU machine: do the Helion fixtures compile and match their references with Helion's
default config (no search), and how long does one quick search of one shape take?"""
import os
import sys
import time

import torch

os.environ.setdefault("HELION_AUTOTUNE_EFFORT", "none")
sys.path[:0] = [".problems/helion", ".problems/helion/fp8_quant_py"]


def load(path, name):
    import importlib.util
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


CASES = [("fp8_quant_py", "helion_fp8_quant_no_config.py", dict(num_tokens=8, hidden_dim=4096, group_size=128, seed=1)),
         ("causal_conv1d_py", "helion_causal_conv1d_no_config.py", dict(B=2, D=128, S=128, W=4, seed=1))]
for folder, sub, case in CASES:
    d = f".problems/helion/{folder}"
    sys.path[:1] = [d]
    for m in ("reference", "task"):
        sys.modules.pop(m, None)
    ref = load(f"{d}/reference.py", "reference")
    sub_mod = load(f"tests/fixtures/gpu/{sub}", "sub_" + folder)
    t0 = time.perf_counter()
    try:
        data = ref.generate_input(**case)
        out = sub_mod.custom_kernel(data)
        torch.cuda.synchronize()
        verdict = ref.check_implementation(ref.generate_input(**case), out)
        print(folder, "check:", verdict, f"{time.perf_counter() - t0:.1f} s")
    except Exception as e:  # noqa: BLE001
        print(folder, "FAILED", type(e).__name__, str(e)[:600])
