"""Phases around a problem's own evaluator: wrap the reference's generate_input and
check_implementation, and the submission's custom_kernel, as those modules are imported (imports.py), in whichever
process imports them (the evaluator's, or the pool worker it spawns).

The evaluator runs them; the wrappers only mark time. A shape's first custom_kernel call is its
`first_call:<case>` phase; its first generate_input and check are `generate:` and `check:` phases; later
calls pass straight through, so the evaluator's timing loops are left alone. The submission is compiled
by the worker, so its edited lines and loops are watched as in the built-in harness.
"""
from __future__ import annotations

import functools
import inspect
import os
import sys

from diagnose.runs.worker import plugins
from diagnose.runs.worker.outputs import Keeper
from diagnose.tasks.loader import case_label


class _State:
    def __init__(self, keep: dict | None = None):
        self.label: str | None = None
        self.seen: set[tuple[str, str]] = set()
        self.keeper = Keeper(keep)      # which checked outputs leave this process, for the verifier

    def once(self, kind: str) -> str | None:
        """The phase name for the first `kind` call of the current case, else None."""
        if self.label is None or (kind, self.label) in self.seen:
            return None
        self.seen.add((kind, self.label))
        return f"{kind}:{self.label}"


def _arguments(sig, args, kwargs) -> dict:
    """generate_input's arguments by name, however the evaluator passed them."""
    try:
        return dict(sig.bind(*args, **kwargs).arguments) if sig is not None else dict(kwargs)
    except TypeError:
        return dict(kwargs)


def _checked(state: _State, sig, args, kwargs) -> None:
    """The checked output leaves this process if it answers an input still wanted (outputs.Keeper)."""
    pair = list(args) if len(args) >= 2 else list(_arguments(sig, args, kwargs).values())
    if len(pair) >= 2:
        state.keeper.checked(pair[0], pair[1])


def _signature(fn):
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        return None


def _wrap_generate(fn, ins, state: _State):
    sig = _signature(fn)

    @functools.wraps(fn)
    def generate_input(*args, **kwargs):
        state.label = case_label({k: v for k, v in kwargs.items() if k != "rank"})
        name = state.once("generate")
        if name is None or ins.ch.phases:
            data = fn(*args, **kwargs)
        else:
            with ins.phase(name, sync=False):
                data = fn(*args, **kwargs)
        state.keeper.remember(data, _arguments(sig, args, kwargs))
        return data
    return generate_input


def _wrap_check(fn, ins, state: _State):
    sig = _signature(fn)

    @functools.wraps(fn)
    def check_implementation(*args, **kwargs):
        _checked(state, sig, args, kwargs)      # before the check, which may mend what it checks
        name = state.once("check")
        if name is None or ins.ch.phases:
            res = fn(*args, **kwargs)
        else:
            with ins.phase(name, sync=False):
                res = fn(*args, **kwargs)
        if len(args) >= 2 and not _passed(res):
            plugins.wrong(fn, args[0], args[1], state.label or "case", ins.ch)
        return res
    return check_implementation


def _passed(res) -> bool:
    from diagnose.runs.worker.stages import verdict_of
    return verdict_of(res)[0]


def _wrap_kernel(fn, ins, state: _State, guard):
    @functools.wraps(fn)
    def custom_kernel(*args, **kwargs):
        name = state.once("first_call")
        if name is None or ins.ch.phases:
            return fn(*args, **kwargs)
        with ins.phase(name, case=state.label):
            out = fn(*args, **kwargs)
        guard.verify(f"after {name}")    # once per shape, outside the evaluator's timed calls
        return out
    return custom_kernel


def _exec(h: "Hooks", name: str, module, inner) -> None:
    """The module's import, marked: the submission compiled here (its lines watched) inside submission_import,
    its custom_kernel wrapped; the reference's functions wrapped after its own loader ran it."""
    if name == "submission":
        with open(module.__file__, "rb") as fh:
            raw = fh.read()
        code = compile(raw, module.__file__, "exec", dont_inherit=True)
        h.ins.instrument(code, raw.decode("utf-8", "replace"))
        with h.ins.phase("submission_import") if not h.ins.ch.phases else _null():
            exec(code, module.__dict__)
        h.guard.verify("after the submission's import")
        if callable(getattr(module, "custom_kernel", None)):
            module.custom_kernel = _wrap_kernel(module.custom_kernel, h.ins, h.state, h.guard)
        return
    inner.exec_module(module)
    if callable(getattr(module, "generate_input", None)):
        h.judges["generate_input"] = module.generate_input
        module.generate_input = _wrap_generate(module.generate_input, h.ins, h.state)
    if callable(getattr(module, "check_implementation", None)):
        h.judges["check_implementation"] = module.check_implementation
        module.check_implementation = _wrap_check(module.check_implementation, h.ins, h.state)
    h.guard.watch_module(name)


class _null:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


class Hooks:
    NAMES = ("reference", "submission")

    def __init__(self, ins, guard, keep: dict | None = None):
        self.ins, self.state, self.guard = ins, _State(keep), guard
        self.judges: dict = {}

    def install(self) -> None:
        """Through the worker's one import hook (imports.py): each module found in the evaluator's folder first."""
        from diagnose.runs.worker import imports
        for name in self.NAMES:
            imports.instead(name, lambda module, inner, n=name: _exec(self, n, module, inner),
                            lambda: [os.getcwd()] + sys.path)
        imports.install()
