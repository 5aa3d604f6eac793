"""Instruments inside the child: phases, GPU holds, torch's own compile metrics.

Compile metrics come from torch._dynamo.utils.get_compilation_metrics(), one record per frame compile;
field names move between torch versions, so every field is read with a default. New records are
streamed as they appear (a poller thread looks four times a second) and again when a phase ends, each
tagged with the phase it happened in: a run killed in the middle of a recompile storm still shows
every compile that finished before the kill.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import threading
import time

from diagnose.runs.worker.channel import Channel
from diagnose.runs.worker.compile_calls import CompileRecorder
from diagnose.runs.worker.gpu_lock import GpuLock
from diagnose.runs.worker.lines import LineTracker
from diagnose.runs.worker.sampler import LoopCounter, Sampler, loop_lines

# Microsecond fields of a compile record, and the name we report each under.
_US_FIELDS = {
    "dynamo_cumulative_compile_time_us": "dynamo_cum_us",
    "aot_autograd_cumulative_compile_time_us": "aot_cum_us",
    "inductor_cumulative_compile_time_us": "inductor_cum_us",
    "inductor_code_gen_cumulative_compile_time_us": "codegen_us",
    "triton_compile_time_us": "triton_us",
    "compile_time_autotune_time_us": "autotune_us",
    "runtime_triton_autotune_time_us": "runtime_autotune_us",
    "runtime_cudagraphify_time_us": "cudagraphify_us",
    "duration_us": "duration_us",
}
_OTHER_FIELDS = ("compile_id", "co_name", "co_filename", "co_firstlineno", "recompile_reason",
                 "num_graph_breaks", "cudagraph_skip_reason", "fail_type", "fail_reason",
                 "start_time_us", "entire_frame_compile_time_s", "inductor_fx_local_cache_hit_count",
                 "inductor_fx_local_cache_miss_count")
POLL_S = 0.25


def _record_dict(rec) -> dict:
    raw = dataclasses.asdict(rec) if dataclasses.is_dataclass(rec) else dict(getattr(rec, "__dict__", {}))
    out = {short: raw.get(long) for long, short in _US_FIELDS.items()}
    out.update({f: raw.get(f) for f in _OTHER_FIELDS})
    out = {k: (v if isinstance(v, (int, float, str, bool, type(None))) else str(v)) for k, v in out.items()}
    for k in ("recompile_reason", "fail_reason"):
        if isinstance(out.get(k), str):
            out[k] = out[k][:1500]
    return out


class Instruments:
    def __init__(self, ch: Channel, torch_mod, submission_path: str, lock: GpuLock, watch: list[int] = (),
                 sample: bool = True):
        self.ch, self.torch, self.lock = ch, torch_mod, lock
        self.submission_path = os.path.realpath(submission_path)
        self.cuda = torch_mod.cuda.is_available()
        self.lines = LineTracker(ch, submission_path, list(watch))
        self.loops = LoopCounter(ch)
        self.compiles = CompileRecorder(ch, torch_mod)
        self.compiles.install()
        self.sampler = Sampler(ch, submission_path, threading.main_thread().ident) if sample else None
        if self.sampler:
            self.sampler.start()
        self._seen_metrics = 0
        self._metrics_lock = threading.Lock()
        self._stop = threading.Event()
        self._poller = threading.Thread(target=self._poll, daemon=True, name="diagnose-metrics")
        self._poller.start()

    def stop(self) -> None:
        self._stop.set()
        if self.sampler:
            self.sampler.stop()
            self.sampler.join(2.0)
        self.loops.flush(None)

    def instrument(self, code, source: str) -> None:
        """A submission's code object, before it runs: watch its edited lines and count its loops."""
        self.lines.instrument(code)
        self.loops.instrument(code, loop_lines(source))

    # -- phases and GPU holds --------------------------------------------------------------------
    def exclusive(self):
        """The machine to ourselves: the parent pauses every other run until this ends."""
        return self.lock.exclusive()

    def gpu_quiet(self, max_wait_s: float = 3.0) -> None:
        """Other runs are paused, but kernels they launched before the pause may still be running. Wait
        until a tiny kernel comes back at idle latency (another context's kernel makes ours wait for a
        time slice, milliseconds), and say how long that took and whether it never got quiet."""
        if not self.cuda:
            return
        torch, x = self.torch, self.torch.empty(1, device="cuda")

        def latency() -> float:
            t = time.perf_counter()
            x.add_(0)
            torch.cuda.synchronize()
            return time.perf_counter() - t
        t0 = time.perf_counter()
        while True:
            lat = sorted(latency() for _ in range(5))[2]
            if lat < 5e-4 or time.perf_counter() - t0 > max_wait_s:
                break
            time.sleep(0.02)
        self.ch.emit("gpu_quiet", waited_s=round(time.perf_counter() - t0, 4), latency_us=round(lat * 1e6, 1),
                     quiet=lat < 5e-4)

    @contextlib.contextmanager
    def phase(self, name: str, sync: bool = True, **fields):
        self.ch.begin(name, **fields)
        ok = False
        try:
            yield
            if sync and self.cuda:
                self.torch.cuda.synchronize()
            ok = True
        finally:
            extra = {}
            if self.cuda:
                with contextlib.suppress(Exception):
                    extra["gpu_peak_mb"] = self.torch.cuda.max_memory_allocated() / 2**20
            self.flush_metrics(name)
            self.loops.flush(name)
            self.ch.end(name, ok=ok, **extra)

    # -- compile metrics ---------------------------------------------------------------------------
    def _poll(self) -> None:
        while not self._stop.wait(POLL_S):
            self.flush_metrics(self.ch.phase)

    def flush_metrics(self, phase: str | None) -> None:
        # Importing dynamo costs about a second: if nothing has imported it, nothing has compiled.
        if "torch._dynamo.utils" not in sys.modules:
            return
        with self._metrics_lock:
            try:
                from torch._dynamo.utils import counters, get_compilation_metrics
                recs = list(get_compilation_metrics())
            except (ImportError, RuntimeError):     # no dynamo here, or the deque moved while read: next time
                return
            if len(recs) > self._seen_metrics:
                self.compiles.snapshot_config()
            for rec in recs[self._seen_metrics:]:
                self.ch.emit("compile", phase=phase, **_record_dict(rec))
            if len(recs) > self._seen_metrics:
                breaks = {str(k)[:300]: v for k, v in list(counters.get("graph_break", {}).items())[:20]}
                self.ch.emit("compile_counters", phase=phase, graph_breaks=breaks,
                             unique_graphs=counters.get("stats", {}).get("unique_graphs", 0))
            self._seen_metrics = len(recs)
