"""Each checked output leaves the submission's process: kept in the stage's outputs folder with the generate_input
arguments of its input, for the verifier that judges it again after the stage, in a process that ran no submission
(worker/verify.py). The in-process check is the submission's to replace; what it was shown is kept before it runs,
so a check that mends its output on the way is no help.

NAME.json holds {case, index, kwargs} (and why the output could not be kept, where it could not); NAME.pt the
output, on the CPU. A case without a seed cannot be generated again the same way: its input is kept too.

The built-in model's stages know each input's arguments (worker/stages.py); under a problem's own evaluator, Keeper
finds which input a checked output answers, by identity or by content.
"""
from __future__ import annotations

import itertools
import json
import os
import weakref
from collections import OrderedDict

from diagnose.runs.protocol import output_key
from diagnose.tasks.loader import case_label

_serial = itertools.count()
MADE_CAP = 256      # inputs remembered at once, the latest kept (a 50-input benchmark case fits)


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


def leaves(x):
    """The values in an input or an output, through its tuples, lists and dicts."""
    if isinstance(x, (tuple, list)):
        for v in x:
            yield from leaves(v)
    elif isinstance(x, dict):
        for v in x.values():
            yield from leaves(v)
    else:
        yield x


def _is_tensor(x) -> bool:
    return hasattr(x, "dtype") and hasattr(x, "data_ptr")


def _print(data) -> list | None:
    """What finds this input again: a weak reference to each tensor (never keeping one alive), each plain value
    itself; None where a leaf is neither."""
    out = []
    for v in leaves(data):
        if _is_tensor(v):
            try:
                out.append(weakref.ref(v))
            except TypeError:
                return None
        elif v is None or isinstance(v, (int, float, str, bool)):
            out.append(("value", v))
        else:
            return None
    return out


def _bytes(t):
    import torch
    return t.detach().reshape(-1).contiguous().view(torch.uint8)


def _same(fp: list | None, data, structure: bool = False) -> bool:
    """Whether data is that input, or a copy of it (byte for byte: a NaN equals itself); structure=True: of its
    shape, dtype and device, each plain value equal."""
    values = list(leaves(data))
    if fp is None or len(fp) != len(values):
        return False
    pairs = []
    for f, v in zip(fp, values, strict=True):
        if isinstance(f, tuple):
            if _is_tensor(v) or f[1] != v:
                return False
            continue
        t = f()
        if t is None or not _is_tensor(v) or (t.shape, t.dtype, t.device) != (v.shape, v.dtype, v.device):
            return False
        pairs.append((t, v))
    if structure:
        return True
    try:
        return all(t is v or _bytes(t).equal(_bytes(v)) for t, v in pairs)
    except (RuntimeError, TypeError):
        return False


def _shape(kwargs: dict) -> str:
    return output_key(kwargs, seed=False)


class Keeper:
    """Under a problem's own evaluator, in each of its processes: which case a checked output answers, and whether it
    leaves the process. The evaluator generates and checks by itself, and often checks a copy (GPU MODE's
    `check_copy = _clone_data(data)`), or 50 inputs made with seed + 42 each, checked as copies of the list. So each
    input that may be kept is remembered with its arguments (by the object's id, and by weak references to its
    tensors), and a checked input is that object or a copy of one. Kept: each case whose exact arguments are checked,
    and the first output checked on each of the stage's shapes (a case less its seed)."""

    def __init__(self, keep: dict | None):
        keep = keep or {}
        self.dir, cases = keep.get("dir") or "", keep.get("cases") or []
        self.keys, self.shapes = {output_key(c) for c in cases}, {_shape(c) for c in cases}
        self.kept_keys: set[str] = set()
        self.kept_shapes: set[str] = set()
        self.open: OrderedDict[int, tuple] = OrderedDict()     # id -> (kwargs, key, shape, print), oldest first
        self.last: int | None = None

    def _wanted(self, key: str, shape: str) -> bool:
        return shape in self.shapes and key not in self.kept_keys and (key in self.keys or
                                                                        shape not in self.kept_shapes)

    def remember(self, data, kwargs: dict) -> None:
        """An input generate_input returned; only one that may be kept is remembered (what is kept only grows)."""
        key, shape = output_key(kwargs), _shape(kwargs)
        if not self.dir or not self._wanted(key, shape):
            return
        self.open[id(data)] = (kwargs, key, shape, _print(data))
        self.open.move_to_end(id(data))
        self.last = id(data)
        if len(self.open) > MADE_CAP:
            self.open.popitem(last=False)

    def checked(self, data, output) -> None:
        """Keep this checked output if it answers an input still wanted; O(1) once nothing is."""
        if not self.open:
            return
        hit = self.open.get(id(data))
        last = self.open.get(self.last)
        order = [hit] if hit is not None else []
        order += ([last] if last is not None else []) + list(self.open.values())
        found = next((e for e in order if _same(e[3], data)), None)
        if found is None and last is not None and _same(last[3], data, structure=True):
            # a copy taken before the kernel wrote into the input (pmpp's check_copy of (A, B, C), C the output
            # buffer the kernel fills) matches no input byte for byte any more: the latest input of its shape is it
            found = last
        if found is None:
            return
        kwargs, key, shape, _ = found
        self.kept_keys.add(key)
        self.kept_shapes.add(shape)
        keep(self.dir, case_label(kwargs), 0, kwargs, output, data)
        for i, (_, k, s, _) in list(self.open.items()):
            if not self._wanted(k, s):
                del self.open[i]
