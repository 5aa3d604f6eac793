"""report.md's parts about the libraries that spend time for the submission: Triton's autotuner and torch's
extension builds, from the baseline run's own records. Split from markdown.py, which assembles them."""
from __future__ import annotations

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


def builds(s: Session) -> list[str]:
    base = s.baseline
    rows = [(f"{st.name}: compile step", b) for st in (base.stages if base else []) if st.compile_step
            for b in st.compile_step.builds] + [(f"{st.name} stage", b) for st in (base.stages if base else [])
                                                 for b in st.builds]
    if not rows:
        return []
    out = ["## Extension builds", "", "Every load_inline / cpp_extension.load call of the baseline run, and what ninja "
           "built in it (per output: nvcc or the C++ compiler, then the link):", "",
           "| step | extension | seconds | ended | built (seconds each) |", "|---|---|---|---|---|"]
    for step, b in rows[:12]:
        cut = b.get("ok") is None
        ended = "ok" if b.get("ok") else ("cut off, waiting on another process's build lock" if b.get("found_lock")
                                          else "cut off, still building") if cut else "failed"
        built = ", ".join(f"{code_span(o['output'])} {o['seconds']:.1f}" for o in (b.get("built") or [])[:6]) or \
            ("—" if cut else "nothing (already built)")
        out.append(f"| {step} | {code_span(str(b.get('name')))} | {float(b.get('seconds') or 0):.2f} | {ended} | "
                   f"{built} |")
    return out + [""]
