"""State kept between processes: what each step of a run left in its container, and which later step
read it. Pure functions over a run's stages.

A run's steps, in the order the harness runs them, are each stage's compile step and then the stage.
What a step wrote comes from the runner's snapshots of the container (whoever wrote it: the submission,
torch, a compiler it started); what a step read comes from the worker's audit hook. A group of files
written by one step and read by a later one is state kept between processes: it can decide the later
step's outcome (a build the compile step made, a plan a killed stage left), and the harness gives every
submission an empty container, so it never comes from anywhere else.
"""
from __future__ import annotations

from diagnose.runs.runner.container import group_of
from diagnose.session import Run, StageResult
from diagnose.status import Status


def steps(run: Run) -> list[tuple[str, StageResult]]:
    """(label, record) of every step the run took, in order."""
    out = []
    for st in run.stages:
        if st.status == Status.SKIPPED:
            continue
        if st.compile_step is not None:
            out.append((f"{st.name}: compile step", st.compile_step))
        out.append((f"{st.name} stage", st))
    return out


def outside_reads(run: Run | None) -> list[str]:
    """Files outside its container that a run's steps read, beyond what this machine lends every run (its
    system, Python and CUDA installation): state of this machine's, which no harness container has. Where
    /tmp was not private, a read of it counts too. In the order first read."""
    out: list[str] = []
    for _, st in steps(run) if run is not None else []:
        for x in st.state.get("outside", []):
            if x.get("op") == "read" and x["path"] not in out:
                out.append(x["path"])
    return out


def depends_on_machine(run: Run | None) -> str:
    """'' when the run read nothing of this machine's state; else the words a conclusion uses for it."""
    paths = outside_reads(run)
    if not paths:
        return ""
    more = f" and {len(paths) - 3} more" if len(paths) > 3 else ""
    return f"this machine's {', '.join(paths[:3])}{more}"


def kept(run: Run) -> list[dict]:
    """One row per group of files the run's steps wrote: files and bytes as first written, which steps
    wrote it, and which later steps read it."""
    rows: dict[str, dict] = {}
    for label, st in steps(run):
        read = {group_of(p) for p in st.state.get("reads", [])}
        for g in sorted(read & set(rows)):
            if label not in rows[g]["read_by"]:
                rows[g]["read_by"].append(label)
        for g, w in sorted(st.state.get("written", {}).items()):
            row = rows.setdefault(g, {"group": g, "files": w["files"], "bytes": w["bytes"], "written_by": [],
                                      "read_by": []})
            if label not in row["written_by"]:
                row["written_by"].append(label)
    return sorted(rows.values(), key=lambda r: (not r["read_by"], -r["bytes"], r["group"]))


def carried(run: Run) -> set[str]:
    """The groups of files that a later step of this run read after an earlier step wrote them."""
    return {r["group"] for r in kept(run) if r["read_by"]}


def outside(run: Run) -> list[dict]:
    """Writes that landed outside the run's container (state that would stay on this machine)."""
    seen, out = set(), []
    for label, st in steps(run):
        for w in st.state.get("outside", []):
            if w["path"] not in seen:
                seen.add(w["path"])
                out.append({**w, "step": label})
    return out


def difference(a: Run, b: Run) -> str:
    """How two runs differ in state kept between their processes, in words; '' when they do not."""
    ca, cb = carried(a), carried(b)
    if ca == cb:
        return ""
    parts = []
    if ca - cb:
        parts.append(f"{a.id} read state an earlier process of it had written ({_list(ca - cb)}), {b.id} did not")
    if cb - ca:
        parts.append(f"{b.id} read state an earlier process of it had written ({_list(cb - ca)}), {a.id} did not")
    return "; ".join(parts)


def stale_lock(run: Run) -> str | None:
    """The failure in words when it is a build lock an earlier, killed step left: torch's cpp_extension
    build takes a `lock` file in its build directory and removes it when the build ends; a process killed
    mid-build never removes it, and the next process that loads the extension waits on it (FileBaton.wait)
    for as long as it lives. The harness kills its compile step at 120 s and runs the stage in the same
    container."""
    failed = run.failed_stage
    if failed is None or "file_baton" not in (failed.stacks or "") + str(failed.exception or ""):
        return None
    for label, st in steps(run):
        if st is failed:
            break
        locks = [g for g, w in st.state.get("written", {}).items() if "lock" in w.get("names", [])]
        if st.killed and locks:
            what = label.replace(": compile step", "") + " stage"
            step = f"compile step before the {what}" if label.endswith("compile step") else label
            return (f"the harness killed the {step} at its {st.budget_s:g} s limit in the middle of a torch "
                    f"extension build in {locks[0]}; the build's `lock` file stayed in the container, and the "
                    f"{failed.name} stage waited on that lock (torch's FileBaton.wait) until its "
                    f"{failed.budget_s:g} s ran out")
    return None


def _list(groups: set[str]) -> str:
    shown = sorted(groups)
    return ", ".join(shown[:3]) + (f" and {len(shown) - 3} more" if len(shown) > 3 else "")
