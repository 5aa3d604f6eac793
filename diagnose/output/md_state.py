"""report.md's parts about the container: each stage's compile step, the state kept between processes, and
how a run was walled off. Split from markdown.py, which assembles them; text the submission controls goes
into code spans."""
from __future__ import annotations

from diagnose.analysis.verdict import carried, summary
from diagnose.output import md_public
from diagnose.output.text import code_span
from diagnose.session import Session, StageResult
from diagnose.status import Status


def _mb(n: int) -> str:
    return f"{n / 2**20:.1f} MB" if n >= 2**20 else f"{n / 2**10:.1f} KB" if n >= 2**10 else f"{n} B"


def compile_step(st: StageResult, s: Session) -> list[str]:
    """What the harness's compile step before this stage did, and that it decided nothing."""
    c = st.compile_step
    if c is None:
        return []
    phases = ", ".join(f"{p.name} {p.seconds:.2f} s{' (open)' if p.open else ''}" for p in c.phases)
    end = "ok" if c.status == Status.OK else f"{str(c.status).upper()}: {code_span(c.message)}"
    code = summary.source_line(s, c.site["line"]) if c.site else ""
    where = f" at line {c.site['line']}" + (f" {code_span(code)}" if code else "") if c.site else ""
    out = [f"Compile step before it (`python3 submission.py`, in the same container, {c.budget_s:g} s of its own): "
           f"{end}{where}, {c.charged_s:.2f} s ({phases or 'no phase'}). The harness ignores how this step ends; "
           f"the stage ran after it.", ""]
    if c.killed and c.stacks.strip():
        out += ["<details><summary>Stacks of the compile step when it was stopped</summary>", "",
                *md_public.stacks(c.stacks, 4000), "", "</details>", ""]
    return out


def state(s: Session) -> list[str]:
    base = s.baseline
    if base is None or not base.stages:
        return []
    if "container" not in s.harness:
        return ["## State kept between processes", "", "Not recorded: this session is from before each run had a "
                "container of its own.", ""]
    rows = carried.kept(base)
    out_w = carried.outside(base)
    spawned = [(label, a) for label, st in carried.steps(base) for a in st.state.get("spawned", [])]
    if not rows and not out_w and not spawned:
        return ["## State kept between processes", "", "The baseline's processes left nothing in its container.", ""]
    out = ["## State kept between processes", "",
           "What each step of the baseline run left in its container, and which later step read it (the harness "
           "gives every submission an empty container, shared by that submission's steps):", ""]
    if rows:
        out += ["| files | count | size | written by | read later by |", "|---|---|---|---|---|"]
        for r in rows[:15]:
            out.append(f"| {code_span(r['group'])} | {r['files']} | {_mb(r['bytes'])} | {', '.join(r['written_by'])} "
                       f"| {', '.join(r['read_by']) or '—'} |")
        if len(rows) > 15:
            out.append(f"| ({len(rows) - 15} more groups) | | | | |")
        out.append("")
    if out_w:
        out += ["Writes outside the container (they would stay on the machine that ran it):", ""]
        out += [f"- {w['step']}: {w['op']} {code_span(w['path'])}" for w in out_w[:10]] + [""]
    if spawned:
        out += ["Processes the submission's code started:", ""]
        out += [f"- {label}: {code_span(a)}" for label, a in spawned[:10]] + [""]
    return out


def env_sentence(env: dict) -> str:
    """The run's environment as a report states it: what of this machine's it did not get, with values."""
    def named(d: dict) -> str:
        return "; ".join(f"`{k}={v}`".replace("|", "\\|") for k, v in sorted(d.items()))
    parts = ["the harness container's: an allowlist of this machine's variables (PATH, locale, the CUDA "
             "installation and devices) and the container's own places"]
    if env.get("left_out"):
        parts.append(f"left out, though they change Python, compilers, caches, numerics or allocation: "
                     f"{named(env['left_out'])}")
    if env.get("replaced"):
        parts.append(f"replaced by the container's own: {named(env['replaced'])}")
    if env.get("others_left_out"):
        parts.append(f"{env['others_left_out']} other variable(s) of this machine's left out")
    if env.get("kept_on_request"):
        parts.append(f"kept at your request (DIAGNOSE_KEEP_ENV): {', '.join(env['kept_on_request'])}")
    return ". ".join(parts)


# Each wall of a run's jail (runs/jail.py), by the name a missing one is recorded under, and what it gives the run
JAIL_WALLS = {
    "pid namespace": "its own process space (it sees no process of the tool or of another run)",
    "network namespace": "its own network (a loopback of its own: no port of the tool's, Dask's or this machine's)",
    "read-only file system": "a read-only view of every other file (the out folders hidden)",
    "private /dev": "a /dev with only what a GPU program opens",
    "capabilities dropped": "no capability beyond a Docker container's",
    "syscalls refused": "no keyring, mount or namespace calls (as Docker's default seccomp profile refuses them)",
}


ALLOW_LIST = ("a file system of its own that shows only the system, the Python that runs it and the tool (read-only) "
              "and its container: no file of yours, of another run or of the tool's out folders")


def jail_sentence(walls: dict, checked: dict) -> str:
    """What walled each run off from the tool, other runs and this machine, and what was missing (as the run's
    jail said, and as the check from inside a run found: runs/runner/stages.py)."""
    missing = sorted(set(walls.get("missing") or []) | set(checked.get("missing") or []))
    held = [said for name, said in JAIL_WALLS.items() if name not in missing] if walls.get("jail") else []
    if held and walls.get("fs") == "allow-list" and "read-only file system" not in missing:
        held[held.index(JAIL_WALLS["read-only file system"])] = ALLOW_LIST
    if held and walls.get("unprivileged"):
        held.append("no privilege on this machine (nobody, outside its user namespace): no file it could not read "
                    "as that user, a mode-600 one of root's included")
    out = ("each step in a jail: " + ", ".join(held)) if held else "no jail of its own"
    return out + (f"; missing here: {', '.join(missing)}" if missing else "")


def container_rows(s: Session) -> list[tuple[str, str]]:
    h = s.harness
    if "container" not in h:
        return [("compile caches", "cold at the start of every run (fresh empty directories); HOME, TMPDIR and "
                                   "other state on disk were this machine's (a session from before each run had a "
                                   "container of its own)")]
    box = h["container"]
    walls = box.get("walls")
    private = (walls or {}).get("private") or []
    how = ("how /tmp and /dev/shm were walled off is not recorded (no run reported it)" if walls is None else
           f"{', '.join(private)} private to it ({walls.get('namespace')} namespace)" if private else
           "its environment only: absolute paths such as /tmp are shared with this machine")
    why = f" ({walls['why']})" if walls and walls.get("why") else ""
    if walls and "jail" in walls:      # sessions before the run's jail (runs/jail.py) say nothing of it
        how += "; " + jail_sentence(walls, h.get("isolation") or {})
    dropped = box.get("dropped_env") or []
    rows = [("container", "a fresh one per run, shared by that run's steps and by no other run: its own HOME, XDG "
                          "directories, TMPDIR, torch/Inductor/Triton/CUDA caches and extension builds, and working "
                          f"directory; {how}{why}")]
    if box.get("tried"):
        rows.append(("tried", "beyond its run, from inside: " + "; ".join(box["tried"])))
    env = box.get("env")
    if env is not None:
        rows.append(("environment", env_sentence(env)))
    elif dropped:
        rows.append(("environment", f"this machine's, less {len(dropped)} variable(s) a harness container does not "
                                    f"have: {', '.join(dropped[:12])}{' …' if len(dropped) > 12 else ''}"))
    if box.get("files"):
        rows.append(("files", f"written into the working directory before each stage, as the harness does: "
                              f"{', '.join(box['files'])}"))
    if box.get("shared"):
        rows.append(("shared", f"this machine's {', '.join(box['shared'])}, in place for every run (DIAGNOSE_SHARE):"
                               f" state outside every container"))
    if "compile_step" in h:
        limit = h['budgets'].get('compile', 120)
        rows.append(("compile step", f"`python3 submission.py` before each stage, {limit:g} s, "
                                     "its ending recorded and ignored" if h["compile_step"] else
                     "not run (--stages without compile): the stages ran on a container no compile step prepared"))
    if "ranking_by" in h:
        rows.append(("ranking_by", f"{h['ranking_by']}: " + ("benchmark and leaderboard time the last benchmark case "
                                                              "only" if h["ranking_by"] == "last" else
                                                              "benchmark and leaderboard time every benchmark case")))
    return rows
