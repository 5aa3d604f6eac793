"""The autotune probe's section of report.md: what Triton's autotuner did in the baseline run, per kernel and key.
Markdown lines; `code` is the renderer's code span (it keeps this machine's paths out of the report)."""
from __future__ import annotations

from probes.autotune.facts import step_tunes

REPORT = ("## Autotuning", "Triton's autotuner per kernel and key")    # heading, its fold's summary


def _cfg(c: dict | None, code) -> str:
    if not c:
        return "—"
    kw = ", ".join(f"{k}={v}" for k, v in c.get("kwargs", {}).items())
    return code(f"{kw}; warps {c.get('num_warps')}, stages {c.get('num_stages')}")


def report(session, code) -> list[str]:
    base = session.baseline
    rows = [(st.name, t) for st in (base.stages if base else []) for t in step_tunes(st)]
    if not rows:
        return []
    out = [REPORT[0], "", "What Triton's autotuner did in the baseline run, per kernel and key (each config is "
           "compiled, then timed):", "", "| stage | kernel | key | configs tried | seconds | winner | best ms |",
           "|---|---|---|---|---|---|---|"]
    for stage, t in rows[:20]:
        winner = _cfg(t.get("winner"), code) if t.get("done") else \
            f"cut off; best so far {_cfg((t.get('best') or {}).get('config'), code)}"
        best = (t.get("best") or {}).get("ms")
        where = f" (L{t['line']})" if t.get("line") else ""
        out.append(f"| {stage} | {code(t['kernel'])}{where} | {code(t['key'])} | {t['tried']} | "
                   f"{t['seconds']:.2f} | {winner} | {'—' if best is None else f'{best:.4f}'} |")
    return out + [""]
