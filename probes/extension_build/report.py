"""The extension_build probe's section of report.md: every build of the baseline run and what ninja built in
it. Markdown lines; `code` is the renderer's code span (it keeps this machine's paths out of the report)."""
from __future__ import annotations

from probes.extension_build.facts import step_builds

REPORT = ("## Extension builds", "every extension build and what ninja built")    # heading, its fold's summary


def report(session, code) -> list[str]:
    base = session.baseline
    rows = [(f"{st.name}: compile step", b) for st in (base.stages if base else []) if st.compile_step
            for b in step_builds(st.compile_step)] + [(f"{st.name} stage", b) for st in (base.stages if base else [])
                                                      for b in step_builds(st)]
    if not rows:
        return []
    out = [REPORT[0], "", "Every load_inline / cpp_extension.load call of the baseline run, and what ninja "
           "built in it (per output: nvcc or the C++ compiler, then the link):", "",
           "| step | extension | seconds | ended | built (seconds each) |", "|---|---|---|---|---|"]
    for step, b in rows[:12]:
        cut = b.get("ok") is None
        ended = "ok" if b.get("ok") else ("cut off, waiting on another process's build lock" if b.get("found_lock")
                                          else "cut off, still building") if cut else "failed"
        built = ", ".join(f"{code(o['output'])} {o['seconds']:.1f}" for o in (b.get("built") or [])[:6]) or \
            ("—" if cut else "nothing (already built)")
        out.append(f"| {step} | {code(str(b.get('name')))} | {float(b.get('seconds') or 0):.2f} | {ended} | "
                   f"{built} |")
    return out + [""]
