"""Each checked output leaves the submission's process: kept in the stage's outputs folder with the generate_input
arguments of its input, for the verifier that judges it again after the stage, in a process that ran no submission
(worker/verify.py). The in-process check is the submission's to replace; what it was shown is kept before it runs,
so a check that mends its output on the way is no help.

NAME.json holds {case, index, kwargs} (and why the output could not be kept, where it could not); NAME.pt the
output, on the CPU. A case without a seed cannot be generated again the same way: its input is kept too.
"""
from __future__ import annotations

import itertools
import json
import os

_serial = itertools.count()


def _portable(x):
    """A copy the verifier loads without running anything (torch.load's weights_only): tensors on the CPU,
    containers as plain ones."""
    if hasattr(x, "detach") and hasattr(x, "to") and hasattr(x, "dtype"):
        return x.detach().to("cpu", copy=True)
    if isinstance(x, tuple):       # a namedtuple too: its class is code, which the verifier will not load
        return tuple(_portable(v) for v in x)
    if isinstance(x, list):
        return [_portable(v) for v in x]
    if isinstance(x, dict):
        return {k: _portable(v) for k, v in x.items()}
    return x


def keep(folder: str, case: str, index: int, kwargs: dict, output, data=None) -> None:
    """Keep one checked output (and, for a case without a seed, its input). Never raises: what could not be kept
    is missing for the verifier, and a missing output is never a pass."""
    if not folder:
        return
    import torch
    base = os.path.join(folder, f"{os.getpid()}-{next(_serial)}")
    meta = {"case": case, "index": index, "kwargs": kwargs}
    try:
        torch.save({"output": _portable(output),
                    **({"input": _portable(data)} if "seed" not in kwargs and data is not None else {})}, base + ".pt")
    except Exception as e:  # noqa: BLE001 - an output torch cannot save: the verifier says so
        meta["error"] = f"{type(e).__name__}: {str(e)[:300]}"
    try:
        with open(base + ".json", "w") as fh:
            json.dump(meta, fh, default=str)
    except OSError:
        pass
