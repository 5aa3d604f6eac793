"""trace.json: every run's stages and phases as a Chrome / Perfetto trace (open in ui.perfetto.dev).

One process per run, one thread per stage; times are each stage's own clock, in microseconds. A stage's
message names no path of this machine (public.py): the trace goes along with the report.
"""
import json

from diagnose.analysis.verdict import summary
from diagnose.output import public
from diagnose.session import Session


def render(session: Session, cl=None) -> str:
    """The trace states no claim: `cl` (the renderers' shared signature) goes unread."""
    events, scrub = [], public.scrubber(session)
    for pid, run in enumerate(session.runs, 1):
        name = str(run.role) if run.probe is None else f"{run.probe}: {run.toggle}"
        events.append({"ph": "M", "name": "process_name", "pid": pid, "args": {"name": f"{run.id} {name}"}})
        for tid, st in enumerate(run.stages, 1):
            events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": st.name}})
            if not st.phases and not st.wall_s:
                continue
            events.append({"ph": "X", "name": f"{st.name} ({st.status})", "pid": pid, "tid": tid, "ts": 0,
                           "dur": st.wall_s * 1e6, "args": {"status": str(st.status), "message": scrub(st.message)}})
            for w in st.lock_waits:
                events.append({"ph": "X", "name": f"GPU lock wait ({w['mode']})", "pid": pid, "tid": tid,
                               "ts": w["start_s"] * 1e6, "dur": w["seconds"] * 1e6})
            for p in st.phases:
                events.append({"ph": "X", "name": p.name, "pid": pid, "tid": tid, "ts": p.start_s * 1e6,
                               "dur": max(0.0, p.end_s - p.start_s) * 1e6, "args": {"open": p.open}})
            t0 = st.events[0]["t"] if st.events else 0
            for e in st.events:    # the sampler's raw samples: where the main thread was, as instants
                if e["k"] == "samples":
                    for t, phase, line in e.get("raw") or []:
                        events.append({"ph": "i", "s": "t", "name": f"L{line}", "pid": pid, "tid": tid,
                                       "ts": max(0.0, t - t0) * 1e6, "args": {"phase": phase}})
            for c in summary.probe_spans(st):     # the probes' own spans (a CUDA graph capture), each as it ran
                end = c["end_s"] if c["end_s"] is not None else st.wall_s
                events.append({"ph": "X", "name": c["name"], "pid": pid, "tid": tid,
                               "ts": c["start_s"] * 1e6, "dur": (end - c["start_s"]) * 1e6})
    return json.dumps({"traceEvents": events, "displayTimeUnit": "ms"}) + "\n"
