"""Record every torch.compile call as it happens: where it was called, what it compiles, with which mode,
options and flags, however the submission spells it (a decorator, a call, a lazy compile inside
custom_kernel, torch.compile(model), model.compile()). The compiled object returned is exactly the one
torch returns: the wrappers only watch.

Also snapshots the Inductor settings that change what a compile does (max_autotune, cudagraphs, ...),
whenever a compile record shows they changed since the last snapshot.
"""
from __future__ import annotations

import functools
import sys

from diagnose.runs.worker.channel import Channel

CONFIG_KEYS = ("max_autotune", "max_autotune_pointwise", "max_autotune_gemm", "coordinate_descent_tuning",
               "freezing", "triton.cudagraphs", "triton.cudagraph_trees")


def _short(v) -> object:
    if isinstance(v, (bool, int, float, type(None))):
        return v
    if isinstance(v, str):
        return v[:200]
    if isinstance(v, dict):
        return {str(k)[:80]: _short(x) for k, x in list(v.items())[:20]}
    return repr(v)[:200]


def _target(obj) -> dict:
    code = getattr(obj, "__code__", None)
    if code is None and hasattr(obj, "forward"):
        code = getattr(obj.forward, "__code__", None)
    kind = "module" if hasattr(obj, "forward") and hasattr(obj, "parameters") else "function"
    return {"target": getattr(obj, "__qualname__", type(obj).__name__)[:120], "target_kind": kind,
            "target_file": getattr(code, "co_filename", None), "target_line": getattr(code, "co_firstlineno", None)}


class CompileRecorder:
    def __init__(self, ch: Channel, torch_mod):
        self.ch, self.torch = ch, torch_mod
        self._config: dict | None = None

    def install(self) -> None:
        torch, rec = self.torch, self
        orig = torch.compile

        @functools.wraps(orig)
        def compile(model=None, *args, **kwargs):
            caller = sys._getframe(1)
            info = {"caller_file": caller.f_code.co_filename, "caller_line": caller.f_lineno,
                    "caller_func": caller.f_code.co_name,
                    "kwargs": {k: _short(v) for k, v in kwargs.items()}}
            if model is None:       # @torch.compile(mode=...): the decorator comes back, the target later
                inner = orig(*args, **kwargs)

                @functools.wraps(inner)
                def decorate(fn):
                    rec.ch.emit("compile_call", **info, **_target(fn), via="decorator")
                    return inner(fn)
                return decorate
            rec.ch.emit("compile_call", **info, **_target(model), via="call")
            return orig(model, *args, **kwargs)
        torch.compile = compile

        module_cls = torch.nn.Module
        orig_method = getattr(module_cls, "compile", None)
        if orig_method is not None:
            @functools.wraps(orig_method)
            def module_compile(self, *args, **kwargs):
                caller = sys._getframe(1)
                rec.ch.emit("compile_call", caller_file=caller.f_code.co_filename, caller_line=caller.f_lineno,
                            caller_func=caller.f_code.co_name, kwargs={k: _short(v) for k, v in kwargs.items()},
                            **_target(self), via="module.compile")
                return orig_method(self, *args, **kwargs)
            module_cls.compile = module_compile

    def snapshot_config(self) -> None:
        """Emit the Inductor settings when they differ from the last snapshot (called as compiles land)."""
        cfg = sys.modules.get("torch._inductor.config")
        if cfg is None:
            return
        now = {}
        for key in CONFIG_KEYS:
            obj, name = cfg, key
            if "." in key:
                head, name = key.split(".", 1)
                obj = getattr(cfg, head, None)
            try:
                now[key] = _short(getattr(obj, name))
            except AttributeError:      # a setting this torch does not have
                continue
        if now != self._config:
            self._config = now
            self.ch.emit("inductor_config", settings=now)
