"""First thing in a worker process the submission spawned while the search probe watched (processes.py adds it to
the worker's command line): the hook's clocks, each read of the submission's code sent up the pipe it was handed.
"""
from __future__ import annotations

import builtins
import sys

from probes.search import processes
from probes.search.hook import Hook


class _ChildApi:
    """What a spawned worker's hook needs of the worker's api: where the submission's code lies, and a patch once
    a module is imported (the worker's own import hook is not there: the import statement is watched instead, only
    until every module waited for has come)."""
    args: dict = {}

    def __init__(self, root: str):
        self.submission_dir = root
        self.waiting: dict[str, list] = {}
        self.plain_import = None

    def emit(self, **fields) -> None:
        pass        # a worker says nothing of its own: its reads go up the pipe

    def on_import(self, module: str, patch) -> None:
        if module in sys.modules:
            patch(sys.modules[module])
            return
        self.waiting.setdefault(module, []).append(patch)
        if self.plain_import is None:
            self.plain_import = builtins.__import__
            builtins.__import__ = self._import

    def _import(self, *a, **k):
        got = self.plain_import(*a, **k)
        for name in [n for n in self.waiting if _imported(n)]:
            for patch in self.waiting.pop(name):
                try:
                    patch(sys.modules[name])
                except Exception:  # noqa: BLE001 - watching never changes what the import does
                    pass
        if not self.waiting:
            builtins.__import__ = self.plain_import
        return got


def _imported(name: str) -> bool:
    """The module has run to its end (while it runs, its own imports come here too, and it holds nothing yet)."""
    mod = sys.modules.get(name)
    return mod is not None and not getattr(getattr(mod, "__spec__", None), "_initializing", False)


def child(wfd: int, root: str) -> None:
    """First thing in a spawned worker: its clocks watched, each read of the submission's code sent up `wfd`."""
    try:
        api = _ChildApi(root)
        hook = Hook(api)
        hook.patch_clocks()
        api.on_import("torch", hook.events)
        hook.search = processes.Upstream(wfd, root)
        hook.bridge = processes.bridge(hook, wfd)
    except Exception:  # noqa: BLE001 - the worker runs as it would without the probe
        pass
