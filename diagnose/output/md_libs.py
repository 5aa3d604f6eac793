"""report.md's parts about the libraries that spend time for the submission: Triton's autotuner, and each probe's
own section (torch's extension builds), from the baseline run's own records. Split from markdown.py, which
assembles them."""
from __future__ import annotations

from functools import partial

from diagnose.output.text import code_span
from diagnose.session import Session


def _cfg(c: dict | None) -> str:
    if not c:
        return "—"
    kw = ", ".join(f"{k}={v}" for k, v in c.get("kwargs", {}).items())
    return code_span(f"{kw}; warps {c.get('num_warps')}, stages {c.get('num_stages')}")


def autotuning(s: Session) -> list[str]:
    base = s.baseline
    rows = [(st.name, t) for st in (base.stages if base else []) for t in st.autotune]
    if not rows:
        return []
    out = ["## Autotuning", "", "What Triton's autotuner did in the baseline run, per kernel and key (each config is "
           "compiled, then timed):", "", "| stage | kernel | key | configs tried | seconds | winner | best ms |",
           "|---|---|---|---|---|---|---|"]
    for stage, t in rows[:20]:
        winner = _cfg(t.get("winner")) if t.get("done") else \
            f"cut off; best so far {_cfg((t.get('best') or {}).get('config'))}"
        best = (t.get("best") or {}).get("ms")
        where = f" (L{t['line']})" if t.get("line") else ""
        out.append(f"| {stage} | {code_span(t['kernel'])}{where} | {code_span(t['key'])} | {t['tried']} | "
                   f"{t['seconds']:.2f} | {winner} | {'—' if best is None else f'{best:.4f}'} |")
    return out + [""]


def probe_sections() -> list:
    """Each probe's own section of the report (its `report` hook, probes/spec.py), in the registry's order: a
    part like the ones above, given the renderer's code span."""
    from probes import REGISTRY
    return [partial(m.report, code=code_span) for m in REGISTRY if hasattr(m, "report")]
