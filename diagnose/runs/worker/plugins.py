"""The probes' own evidence: hooks that a spec names by module (WorkerSpec.hooks), loaded into the worker and
into every process a problem's evaluator spawns.

A probe that needs evidence no built-in watcher records keeps its whole worker side in its own module. The
worker imports that module by the name the spec gives (so nothing here imports a probe), and calls its
`install(api)` with the one handle below: what a hook may do, and nothing more.

- api.emit(**fields)              an event {k: "probe", probe: <name>, ...}: the runner keeps it, per probe,
                                  in the stage's `probe_facts` (runner/stage_facts.py), untouched
                                  (with slot=<text>, a running record: the runner keeps only the latest of
                                  each slot of a process, where its first stood, and not among the stage's
                                  events: progress said after every step, whose last a deadline still finds)
- api.on_phase(fn)                fn("begin"|"end", phase name, fields) around every phase of the harness
- api.on_import(module, patch)    patch(module) once that module is imported (now, if it already is); the
                                  harness's reference and submission too, which the worker loads from their files
- api.on_torch(fn)                fn(torch) once torch is imported, before the guard notes what judges timing
                                  (so a hook's watcher of a clock is the clock the guard knows)
- api.on_wrong(fn)                fn(check, data, output, case) once a check finds the submission's output wrong
                                  (the harness's own check, or a problem evaluator's, in whichever process ran it)
- api.on_stage_end(fn)            fn(stage) after the stage's own work returned, before the process ends
- api.on_sample(pattern, name)    the sampler counts time below a frame whose file holds `pattern` as inside the
                                  mechanism `name` (one of the probe's INFO.mechanisms), before the built-in ones
- api.submission_dir              the folder the submission's code runs from (its frames' files lie there)
- api.submission                  the submission's own file (a real path: a frame whose file it is, is its code)
- api.phase                       the harness's phase open now (None between phases)
- api.args                        what the run hands this probe's hook (WorkerSpec.hook_args[<probe>], JSON: a
                                  tuning run's, from the probe's plan); {} when nothing

A hook that raises is dropped, and says so in one event: the stage runs on as the harness would run it.
"""
from __future__ import annotations

import importlib
import os

_STAGE_END: list = []
_TORCH_UP: list = []
_WRONG: list = []


class Api:
    def __init__(self, probe: str, ch, submission: str, args: dict | None = None):
        self.probe, self._ch, self.args = probe, ch, dict(args or {})
        self.submission = os.path.realpath(submission)
        self.submission_dir = os.path.dirname(self.submission) + os.sep

    @property
    def phase(self) -> str | None:
        return self._ch.phase

    def emit(self, **fields) -> None:
        self._ch.emit("probe", probe=self.probe, **fields)

    def on_phase(self, fn) -> None:
        self._ch.watchers.append(fn)

    @staticmethod
    def on_import(module: str, patch) -> None:
        from diagnose.runs.worker import imports
        imports.after(module, patch)
        imports.install()

    @staticmethod
    def on_sample(pattern: str, name: str) -> None:
        from diagnose.runs.worker import sampler
        sampler.own_mechanism(pattern, name)

    @staticmethod
    def on_stage_end(fn) -> None:
        _STAGE_END.append(fn)

    @staticmethod
    def on_torch(fn) -> None:
        _TORCH_UP.append(fn)

    @staticmethod
    def on_wrong(fn) -> None:
        _WRONG.append(fn)


def _probe_of(module: str, otherwise: str) -> str:
    """The probe a hook module belongs to: its package under probes/ (probes.<name>.hook), else `otherwise`."""
    return module.split(".")[1] if module.startswith("probes.") and module.count(".") >= 2 else otherwise


def load(names, ch, submission: str, args: dict | None = None) -> None:
    """Install each named hook module, handed its probe's args; a probe's name is the module's package or its own
    name."""
    for name in names or ():
        probe = _probe_of(name, name)
        try:
            importlib.import_module(name).install(Api(probe, ch, submission, (args or {}).get(probe)))
        except Exception as e:  # noqa: BLE001 - a probe's hook must never change the harness's run
            ch.emit("probe", probe=probe, error=f"its hook did not install: {type(e).__name__}: {e}"[:300])


def _call(fns: list, args: tuple, ch, when: str) -> None:
    """Call each; one that raises is dropped, and its probe (named by the hook's module) says so once."""
    for fn in list(fns):
        try:
            fn(*args)
        except Exception as e:  # noqa: BLE001 - a probe's hook must never change the harness's run
            fns.remove(fn)
            probe = _probe_of(str(getattr(fn, "__module__", "") or ""), "?")
            ch.emit("probe", probe=probe, error=f"a hook failed {when}: {type(e).__name__}: {e}"[:300])


def torch_up(torch, ch) -> None:
    _call(_TORCH_UP, (torch,), ch, "once torch was imported")


def stage_end(stage: str, ch) -> None:
    _call(_STAGE_END, (stage,), ch, "at the stage's end")


def wrong(check, data, out, case: str, ch) -> None:
    _call(_WRONG, (check, data, out, case), ch, "after a wrong output")
