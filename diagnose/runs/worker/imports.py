"""The worker's one import hook: what runs as a module is first imported, in the worker and in every process a
problem's evaluator spawns (bootstrap.py installs it there too). One finder first on sys.meta_path serves every
user: each probe's own hook, its library watchers among them (plugins.py), and the evaluator's phase wrapper
(hooks.py).

- after(name, patch)          patch(module) once the module has run, and at once if it already has. A watcher
                              only watches: a patch that raises is dropped and the import goes on as it would.
- ran(name, module)            the worker loaded that module itself, from its file (the built-in harness's
                              reference and submission): its patches, as after an import
- instead(name, run, where)   the module is found on the path entries where() gives (the evaluator's working
                              folder first), and run(module, loader) executes it in place of its loader: the
                              phase wrapper compiles the submission itself. What run raises is the import's error.
- install()                   puts the finder in place (once per process).
"""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys

_AFTER: dict[str, list] = {}
_INSTEAD: dict[str, tuple] = {}


def _apply(patch, module) -> None:
    try:
        patch(module)
    except Exception:  # noqa: BLE001 - watching must never change what the import does
        pass


def after(name: str, patch) -> None:
    _AFTER.setdefault(name, []).append(patch)
    if name in sys.modules:
        _apply(patch, sys.modules[name])


def ran(name: str, module) -> None:
    for patch in list(_AFTER.get(name, ())):
        _apply(patch, module)


def instead(name: str, run, where) -> None:
    _INSTEAD[name] = (run, where)


class _Loader(importlib.abc.Loader):
    """A module's own loader, run (or replaced) and then patched."""

    def __init__(self, inner, name: str):
        self.inner, self.name = inner, name

    def create_module(self, spec):
        return self.inner.create_module(spec)

    def __getattr__(self, attr):      # get_source, get_filename, is_package ...: the module's own loader's
        return getattr(self.inner, attr)

    def exec_module(self, module):
        own = _INSTEAD.get(self.name)
        if own is None:
            self.inner.exec_module(module)
        else:
            own[0](module, self.inner)
        for patch in list(_AFTER.get(self.name, ())):
            _apply(patch, module)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name in _INSTEAD:
            spec = importlib.machinery.PathFinder.find_spec(name, _INSTEAD[name][1]())
        elif name in _AFTER:
            spec = next((s for f in sys.meta_path if f is not self and hasattr(f, "find_spec")
                         if (s := f.find_spec(name, path, target)) is not None), None)
        else:
            return None
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None
        spec.loader = _Loader(spec.loader, name)
        return spec


def install() -> None:
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
