"""The parts of a stage record that come from one kind of event each: timing samples and their predictions,
line samples, state kept on disk, a probe's own events, a problem evaluator's report.
Takes a stage's events; fills its StageResult.
"""

from __future__ import annotations

import os

from diagnose.runs import harness
from diagnose.session import StageResult
from diagnose.status import Status

# What the runner keeps of a probe's events per stage (any process of the run can write them): its events, and apart
# from them its running records (a `slot`: the latest of each per process), so that a flood of the one never pushes
# out the other, nor another probe's (each has its own). The parser keeps at most 50,000 events of a stage in all.
PROBE_FACTS_CAP = 2000
PROBE_SLOTS_CAP = 1000


def timing_of(events: list[dict]) -> dict:
    out = {}
    for ev in events:
        if ev["k"] == "timing":
            entry = {k: ev[k] for k in ("per_call_s", "repeat_wall_s", "depth", "stop_reason")}
            if len(ev["per_call_s"]) >= 2:
                p = harness.predict_case(ev["per_call_s"], ev["repeat_wall_s"])
                entry["predicted"] = {"repeats": p.repeats, "seconds": round(p.seconds, 3), "reason": p.reason,
                                      "cv": round(p.cv, 5), "low_s": round(p.low_s, 3), "high_s": round(p.high_s, 3)}
            out[ev["case"]] = entry
    return out


def fill_samples(st: StageResult, ev: list[dict]) -> None:
    """Sum the sampler's and the loop counter's streamed deltas per phase; keep the compile calls."""
    for e in ev:
        if e["k"] == "samples":
            st.sample_interval_s = e["interval_s"]
            st.sample_cost_s = max(st.sample_cost_s, float(e.get("cost_s") or 0))
            for phase, kinds in e["phases"].items():
                if not isinstance(kinds, dict):
                    continue
                tgt = st.samples.setdefault(str(phase), {})
                for kind, counts in kinds.items():
                    if isinstance(counts, dict):
                        c = tgt.setdefault(str(kind), {})
                        for line, n in counts.items():
                            # a line number; for mechanisms, "line|mechanism"
                            if str(line).split("|", 1)[0].isdigit() and isinstance(n, int):
                                c[str(line)[:80]] = c.get(str(line)[:80], 0) + n
        elif e["k"] == "loops":
            c = st.loops.setdefault(str(e.get("phase")), {})
            for line, n in e["counts"].items():
                if str(line).isdigit() and isinstance(n, int):
                    c[str(line)] = c.get(str(line), 0) + n
        elif e["k"] == "compile_call" and len(st.compile_calls) < 200:
            st.compile_calls.append({k: v for k, v in e.items() if k not in ("k", "pid")})


def state_of(ev: list[dict]) -> dict:
    """What the child said about state that outlives it (worker/state.py), and how its container was
    walled off (worker/container.py). The paths it kept reachable name this machine's layout: only their
    count is kept."""
    rec: dict = {"reads": [], "writes": [], "outside": [], "spawned": [], "cut": False}
    for e in ev:
        if e["k"] == "container" and "container" not in rec:
            rec["container"] = {"namespace": e.get("namespace"), "private": e.get("private"),
                                "kept": len(e.get("kept") or []), "why": e.get("why")}
            if "jail" in e:     # the run's own process space, network and file system (runs/jail.py)
                rec["container"].update(jail=e.get("jail"), missing=list(e.get("missing") or []),
                                        hidden=len(e.get("hidden") or []))
            if e.get("fs"):     # an allow-list file system (runs/rootfs.py), and whom the run was on this machine
                rec["container"].update(fs=e["fs"], unprivileged=e.get("uid") not in (None, 0))
        elif e["k"] != "state":
            continue
        elif e["op"] == "spawn":
            rec["spawned"].append(str(e.get("argv", ""))[:300])
        elif e["op"] == "cut":
            rec["cut"] = True
        elif e["op"] == "reach":       # what it tried beyond its run (worker/state.py): held by its jail
            rec.setdefault("reached", []).append(str(e.get("path"))[:200])
        elif e.get("missing") is True:
            # a read of a path not there in its run: what it tried, where this machine has that file (its walls
            # held); nothing it read, so no state it depends on
            if isinstance(e.get("path"), str) and os.path.isfile(e["path"]):
                rec.setdefault("reached", []).append(f"read {e['path'][:200]} (not there in its run)")
        elif isinstance(e.get("path"), str):
            if e.get("inside") is False:
                rec["outside"].append({"op": e["op"], "path": e["path"]})
            elif e["op"] == "read":
                rec["reads"].append(e["path"])
            else:
                rec["writes"].append({"op": e["op"], "path": e["path"]})
    return rec


def fill_probes(st: StageResult, ev: list[dict]) -> None:
    """Each probe's own events."""
    slots: dict[tuple, int] = {}
    counts: dict[str, list[int]] = {}      # per probe: [events kept, slots kept]
    for e in ev:      # a probe's own evidence (worker/plugins.py): kept as its hook sent it, for the probe to read
        if e["k"] == "probe" and isinstance(e.get("probe"), str):
            probe = e["probe"][:40]
            kept, n = st.probe_facts.setdefault(probe, []), counts.setdefault(probe, [0, 0])
            rec = {k: v for k, v in e.items() if k not in ("k", "pid", "probe")}
            # a running record (its slot, per process): the latest replaces the one before, where that stood
            slot = (probe, e.get("pid"), str(e["slot"])[:200]) if "slot" in e else None
            if slot in slots:
                kept[slots[slot]] = rec
            elif slot is not None and n[1] < PROBE_SLOTS_CAP:
                slots[slot], n[1] = len(kept), n[1] + 1
                kept.append(rec)
            elif slot is None and n[0] < PROBE_FACTS_CAP:
                n[0] += 1
                kept.append(rec)


def needs_gpu_reason(ev: list[dict]) -> str | None:
    return next((e["reason"] for e in ev if e["k"] == "needs_gpu"), None)


def parse_report(text: str) -> dict[str, str]:
    """A problem evaluator's report: one 'key: value' per line, in order."""
    out: dict[str, str] = {}
    for line in text.splitlines()[:5000]:
        key, sep, value = line.partition(": ")
        if sep and key.strip() and " " not in key.strip():
            out[key.strip()] = value.strip()[:2000]
    return out


def report_failure(rep: dict[str, str]) -> tuple[str | None, str]:
    """(phase, message) of the first failing case the evaluator reported."""
    for key, value in rep.items():
        parts = key.split(".")
        if len(parts) == 3 and parts[2] == "status" and value == "fail":
            kind, idx = parts[0], parts[1]
            spec = rep.get(f"{kind}.{idx}.spec", "")
            case = {}
            for item in spec.split(";"):
                k, _, v = item.partition(":")
                if k.strip():
                    case[k.strip()] = int(v) if v.strip().lstrip("+-").isdigit() else v.strip()
            from diagnose.tasks.loader import case_label
            return f"check:{case_label(case) if case else kind + '.' + idx}", \
                rep.get(f"{kind}.{idx}.error", "the evaluator reported a failure")
    return None, "the evaluator reported check: fail"


def predict_stage(st: StageResult) -> None:
    """Predicted seconds for the whole stage: measured time outside the timing loops, plus each case's
    predicted timing loop from its sample."""
    if not st.timing:
        st.predicted_s = st.charged_s if st.status in (Status.OK, Status.AT_RISK) else None
        return
    measured_loops = sum(p.seconds for p in st.phases if p.name.startswith("timing:"))
    predicted = [t.get("predicted", {}) for t in st.timing.values()]
    rest = st.charged_s - measured_loops
    st.predicted_s = round(rest + sum(p.get("seconds", 0.0) for p in predicted), 3)
    st.predicted_range = [round(rest + sum(p.get(k, p.get("seconds", 0.0)) for p in predicted), 3)
                          for k in ("low_s", "high_s")]
