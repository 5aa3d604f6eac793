"""The timed part of a benchmark or leaderboard stage, as the harness times it: the L2 flush between repeats,
each case timed repeat by repeat until its stopping rule (or a short sample whose full length is predicted),
and the cases a stage times.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from diagnose.runs import harness
from diagnose.tasks.loader import labels, stage_cases

if TYPE_CHECKING:
    from diagnose.runs.worker.ctx import Ctx


class _Flush:
    """The L2 flush: the harness writes a ~64 GiB fp32 tensor before every repeat. We allocate it once per
    case, after taking the timing lock, sized from the device's free memory at that moment (and say so
    when it had to be smaller), and free it when the case is timed, so that runs sharing a GPU never
    hold two. No flush on a CPU."""

    def __init__(self, ctx: Ctx, label: str):
        self.ctx, self.buf, self.nbytes, self.scaled = ctx, None, 0, False
        want = int(ctx.spec.flush_bytes or harness.L2_FLUSH_BYTES)
        if ctx.ins.cuda:
            torch = ctx.torch
            torch.cuda.empty_cache()
            free, _total = torch.cuda.mem_get_info()
            self.nbytes = max(0, min(want, int(free * 0.9) - (1 << 30))) // 4 * 4
            self.scaled = self.nbytes < want
            if self.nbytes:
                self.buf = torch.empty(self.nbytes // 4, dtype=torch.float32, device="cuda")
        ctx.ch.emit("flush", case=label, bytes=self.nbytes, wanted=want, scaled=self.scaled,
                    device="cuda" if ctx.ins.cuda else "cpu")

    def __call__(self):
        if self.buf is not None:
            self.buf.uniform_()   # written every repeat, as the harness's fresh random tensor is

    def release(self):
        if self.buf is not None:
            self.buf = None
            self.ctx.torch.cuda.empty_cache()


def time_case(ctx: Ctx, label: str, inputs: list) -> None:
    """Repeats of 50 back-to-back calls, each preceded by a sync and an L2 flush.

    --full applies the stopping rule for real; the default takes a short sample and lets the parent
    predict the rest from its mean and spread.
    """
    torch, cuda = ctx.torch, ctx.ins.cuda
    full = ctx.spec.depth == "full"
    max_n = harness.REPEAT_CAP if full else int(ctx.spec.sample_repeats)
    max_s = harness.CASE_WALL_CAP_S if full else float(ctx.spec.sample_seconds)
    per_call, walls = [], []
    with ctx.ins.exclusive(), ctx.ins.phase(f"timing:{label}", case=label):
        ctx.ins.gpu_quiet()
        flush = _Flush(ctx, label)
        case_t0 = time.perf_counter()
        while True:
            r0 = time.perf_counter()
            if cuda:
                torch.cuda.synchronize()
            flush()
            if cuda:
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                for i in range(harness.CALLS_PER_REPEAT):
                    ctx.kernel(inputs[i % len(inputs)])
                end.record()
                torch.cuda.synchronize()
                dur = start.elapsed_time(end) / 1e3 / harness.CALLS_PER_REPEAT
            else:
                c0 = time.perf_counter()
                for i in range(harness.CALLS_PER_REPEAT):
                    ctx.kernel(inputs[i % len(inputs)])
                dur = (time.perf_counter() - c0) / harness.CALLS_PER_REPEAT
            per_call.append(dur)
            walls.append(time.perf_counter() - r0)
            ctx.ch.emit("repeat", case=label, n=len(per_call), per_call_s=dur, wall_s=walls[-1])
            stop = harness.should_stop(per_call, time.perf_counter() - case_t0) if full else None
            if stop or len(per_call) >= max_n or (not full and time.perf_counter() - case_t0 > max_s
                                                  and len(per_call) >= 2):
                break
        flush.release()
    ctx.ch.emit("timing", case=label, depth="full" if full else "sample", per_call_s=per_call,
                repeat_wall_s=walls, stop_reason=stop or ("sample" if not full else "cap"))


def bench_cases(ctx: Ctx):
    cases = stage_cases(ctx.spec.task, ctx.spec.stage)
    return list(zip(labels(cases), cases, strict=True))
