"""The numerics probe's worker side (worker/plugins.py loads it into every stage's process, and into every process
a problem's evaluator spawns): the settings the reference computes under (its ref_kernel watched as the reference
module is loaded, by the harness or by the evaluator), the submission's (read after its first call), and, once a
check finds an output wrong, how far that output is from the reference's own.

Event (probe_facts["numerics"], read back by facts.py), once per process, at the first wrong output: {event: "wrong",
case, stats: {elements, max_abs, max_rel, non_finite, rtol, atol, outside, worst} | None, reference: settings | None,
submission: settings | None}. Imports nothing of diagnose's: it runs in the submission's process.
"""
from __future__ import annotations

from probes.numerics.watch import Settings, error_stats, read, tolerance


class Watch:
    """One process's numerics evidence."""

    def __init__(self, api):
        self.api = api
        self.torch = None
        self.ref: Settings | None = None
        self.ref_fn = None
        self.sub: dict | None = None
        self.said = False

    def up(self, torch) -> None:
        self.torch = torch

    def reference(self, module) -> None:
        fn = getattr(module, "ref_kernel", None)
        if callable(fn) and self.torch is not None:
            self.ref = Settings(self.torch)
            module.ref_kernel = self.ref_fn = self.ref.watch(fn)

    def phase(self, what: str, name: str, fields: dict) -> None:
        if what == "end" and name.startswith("first_call:"):
            self.submission()

    def submission(self) -> None:
        if self.sub is None and self.torch is not None:
            self.sub = read(self.torch)

    def wrong(self, check, data, out, case: str) -> None:
        """After a failed check: the errors against the reference's own output, and both sides' settings."""
        self.submission()
        if self.said:
            return
        self.said = True
        stats = None
        try:
            if self.ref_fn is not None:
                stats = error_stats(self.torch, out, self.ref_fn(data), *tolerance(check))
        except Exception:  # noqa: BLE001 - evidence only: the check has already said wrong
            stats = None
        self.api.emit(event="wrong", case=case, stats=stats, reference=self.ref.seen if self.ref else None,
                      submission=self.sub)


def install(api) -> None:
    watch = Watch(api)
    api.on_torch(watch.up)
    api.on_import("reference", watch.reference)
    api.on_phase(watch.phase)
    api.on_wrong(watch.wrong)
