"""The extension_build probe's worker side: each load_inline / cpp_extension.load build, as it starts and as it
ends (worker/plugins.py loads this module by name into every stage's process and the evaluator's).

torch.utils.cpp_extension is not imported here before the submission imports it (it imports setuptools): the
worker's import hook wraps it as it is first imported. The wrapper only watches: the build and what it
returns are unchanged.

Events (probe_facts["extension_build"], read back by facts.py):
- {event: "start", name, found_lock}: said at once, since a build the deadline cuts off never reaches its end
- {event: "built", name, ok, seconds, sources, cflags, cuda_cflags, with_cuda, built: [{output, seconds}],
  found_lock, arch_list}: what ninja built (.ninja_log, per output) and whether another's lock was there first
Imports nothing of diagnose's: it runs in the submission's process.
"""
from __future__ import annotations

import inspect
import os
import time


def _ninja_log(build_dir: str | None) -> list[tuple[int, int, str]]:
    """(start ms, end ms, output) per line of the build directory's .ninja_log."""
    out = []
    try:
        with open(os.path.join(build_dir or "", ".ninja_log")) as fh:
            for line in fh:
                parts = line.rstrip("\n").split("\t")
                if len(parts) >= 4 and parts[0].isdigit() and parts[1].isdigit():
                    out.append((int(parts[0]), int(parts[1]), parts[3]))
    except OSError:
        pass
    return out


def _said(a: dict, ok: bool, t0: float, before: list, lock: bool) -> dict:
    after = _ninja_log(a.get("build_directory"))
    built = [{"output": o, "seconds": round((e - s) / 1000, 3)} for s, e, o in after[len(before):]]
    return dict(name=str(a.get("name")), ok=ok, seconds=round(time.perf_counter() - t0, 4),
                sources=[os.path.basename(str(x)) for x in (a.get("sources") or [])][:20],
                cflags=[str(x) for x in (a.get("extra_cflags") or [])][:30],
                cuda_cflags=[str(x) for x in (a.get("extra_cuda_cflags") or [])][:30],
                with_cuda=a.get("with_cuda"), built=built[:50], found_lock=lock,
                arch_list=os.environ.get("TORCH_CUDA_ARCH_LIST"))


def patch(mod, emit) -> bool:
    orig = getattr(mod, "_jit_compile", None)
    if orig is None or getattr(orig, "_diagnose_watched", False):
        return False
    try:
        sig = inspect.signature(orig)
    except (TypeError, ValueError):
        return False

    def _jit_compile(*args, **kwargs):
        try:
            a = sig.bind_partial(*args, **kwargs).arguments
        except TypeError:
            a = {}
        build_dir = a.get("build_directory")
        before = _ninja_log(build_dir)
        lock = bool(build_dir) and os.path.exists(os.path.join(build_dir, "lock"))
        emit(event="start", name=str(a.get("name")), found_lock=lock)
        t0, ok = time.perf_counter(), False
        try:
            out = orig(*args, **kwargs)
            ok = True
            return out
        finally:
            try:
                emit(event="built", **_said(a, ok, t0, before, lock))
            except Exception:  # noqa: BLE001 - watching must never change the build's own ending
                pass

    _jit_compile._diagnose_watched = True
    mod._jit_compile = _jit_compile
    return True


def install(api) -> None:
    api.on_import("torch.utils.cpp_extension", lambda mod: patch(mod, api.emit))
    # the sampler's names for time inside a build (INFO.mechanisms): the wait on another's lock first, since it
    # happens inside the build's own frames
    api.on_sample("torch/utils/file_baton.py", "lock_wait:build")
    api.on_sample("torch/utils/cpp_extension.py", "extension_build")
