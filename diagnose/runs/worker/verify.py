"""The verifier: after a judged stage whose own account is ok, a process that never ran the submission judges every
output the stage's processes kept (worker/outputs.py), with the problem's own check_implementation and its
tolerances, from a copy of the problem's files the parent made from the problem folder. Each input is generated
again from the arguments that made it. It runs after the stage, outside every timed section.

`python -s -m diagnose.runs.worker.verify SPEC.json` (VerifySpec; -s: no user site directory, where a run's HOME
could hold a .pth file that patches torch at start-up). It sends one `verified` event per output the stage had
to keep (missing: none was kept), then `verify_done`, on the event channel every step gets.
"""
from __future__ import annotations

import faulthandler
import glob
import importlib.util
import json
import os
import signal
import sys
import time

from diagnose.runs.protocol import FDS_ENV, VerifySpec, output_key
from diagnose.runs.worker.channel import Channel
from diagnose.runs.worker.outputs import leaves

CAP = 4       # kept outputs judged per expected one (each process of an evaluator keeps its own first)


def _reference(folder: str):
    """The copy's reference.py, its helpers (utils.py, task.py) found beside it."""
    sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location("reference", os.path.join(folder, "reference.py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules["reference"] = mod
    spec.loader.exec_module(mod)
    return mod


def _kept(folder: str) -> list[tuple[dict, str]]:
    out = []
    for path in sorted(glob.glob(os.path.join(folder, "*.json"))):
        try:
            with open(path) as fh:
                meta = json.load(fh)
        except (OSError, ValueError):
            continue
        if isinstance(meta, dict) and isinstance(meta.get("kwargs"), dict) and isinstance(meta.get("index"), int):
            out.append((meta, path[:-len(".json")] + ".pt"))
    return out


def _to(x, device):
    """The kept output on the device of the input it answers (kept on the CPU)."""
    if hasattr(x, "to") and hasattr(x, "dtype"):
        return x.to(device)
    if isinstance(x, (tuple, list)):
        return type(x)(_to(v, device) for v in x)
    if isinstance(x, dict):
        return {k: _to(v, device) for k, v in x.items()}
    return x


def _judge(torch, ref, kwargs: dict, meta: dict, pt: str) -> tuple[bool, str]:
    from diagnose.runs.worker.stages import verdict_of
    if meta.get("error"):
        return False, f"the output could not leave the submission's process: {meta['error']}"
    try:
        kept = torch.load(pt, map_location="cpu", weights_only=True)    # runs nothing of what it reads
        output = kept["output"]
    except Exception as e:  # noqa: BLE001 - unreadable: not an output the check could pass
        return False, f"the kept output could not be read: {type(e).__name__}: {str(e)[:300]}"
    try:
        data = kept["input"] if "seed" not in kwargs and "input" in kept else ref.generate_input(**kwargs)
    except Exception as e:  # noqa: BLE001 - arguments no case of the task's has: nothing it answers
        return False, f"its input could not be made again from {kwargs}: {type(e).__name__}: {str(e)[:300]}"
    device = next((v.device for v in leaves(data) if hasattr(v, "device")), "cpu")
    try:
        return verdict_of(ref.check_implementation(data, _to(output, device)))
    except Exception as e:  # noqa: BLE001 - the check choking on the output means the output is wrong
        return False, f"check raised {type(e).__name__}: {str(e)[:300]}"


def _theirs(want: dict, kept: list) -> list[tuple[dict, str, dict]]:
    """The kept outputs that answer an expected one, each with what its input is made from again: those of the
    case's exact arguments (made from the case's own typed values: an evaluator parsed them from text), or, where
    the case allows (match "shape"), those of its shape, made with the seed they were made with."""
    at = [(m, p) for m, p in kept if m["index"] == want["index"]]
    exact = [(m, p, {**m["kwargs"], **want["kwargs"]}) for m, p in at
             if output_key(m["kwargs"]) == output_key(want["kwargs"])]
    if exact or want.get("match") != "shape":
        return exact[:CAP]
    shape, typed = output_key(want["kwargs"], seed=False), {k: v for k, v in want["kwargs"].items() if k != "seed"}
    return [(m, p, {**m["kwargs"], **typed}) for m, p in at if output_key(m["kwargs"], seed=False) == shape][:CAP]


def verify(spec: VerifySpec, ch: Channel) -> None:
    import torch
    ref = _reference(spec.folder)
    kept = _kept(spec.outputs)
    for want in spec.expected:
        t0 = time.perf_counter()
        mine = _theirs(want, kept)
        verdicts = [_judge(torch, ref, kwargs, m, p) for m, p, kwargs in mine]
        bad = next((msg for ok, msg in verdicts if not ok), None)
        ch.emit("verified", case=want["case"], index=want["index"], ok=bool(mine) and bad is None,
                missing=not mine, outputs=len(mine), message=str(bad or "")[:2000],
                ms=round((time.perf_counter() - t0) * 1000, 3))
    ch.emit("verify_done")


def main(spec_path: str) -> int:
    import site
    # -s keeps the container home's user site out; a --user site of this machine's reaches this process by
    # PYTHONPATH, as the worker's does, and its .pth files with it (the worker does the same: worker/main.py)
    for path in os.environ.get("PYTHONPATH", "").split(os.pathsep)[1:]:
        if path:
            site.addsitedir(path)
    ev_fd, _reply, stacks_fd = (int(x) for x in os.environ.pop(FDS_ENV, "").split(",")[:3])
    stacks = os.fdopen(stacks_fd, "w")      # where a hang's stacks go, as the worker's do
    faulthandler.enable(file=stacks, all_threads=True)
    faulthandler.register(signal.SIGUSR1, file=stacks, all_threads=True)
    with open(spec_path) as fh:
        spec = VerifySpec.from_json(fh.read())
    verify(spec, Channel(ev_fd))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
