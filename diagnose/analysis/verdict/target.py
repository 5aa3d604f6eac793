"""The GPU a pass here is meant for: the submission's `#!POPCORN gpu` header and the GPUs the problem runs on,
against this machine's. When they differ, which conclusions carry over and which do not, in a few words that
the console's first lines and the report both give. Pure: from session.harness["target"].
"""
from __future__ import annotations


def _token(label: str) -> str:
    """'B200_Nebius' -> 'b200', 'NVIDIA H100 80GB HBM3' stays searchable as 'nvidiah10080gbhbm3'."""
    return label.split("_")[0].replace(" ", "").lower()


def matches(label: str, here: list[str]) -> bool:
    tok = _token(label)
    return bool(tok) and any(tok in n.replace(" ", "").lower() for n in here)


def mismatch(session) -> str | None:
    """One line when this machine is not the GPU the header or the problem names; None when it is (or
    nothing names one)."""
    t = session.harness.get("target") or {}
    here = t.get("here") or []
    mine = ", ".join(here) if here else "no GPU"
    head, gpus = t.get("header_gpu"), t.get("gpus") or []
    if head and not matches(head, here):
        return (f"target: the header asks for {head} (line {t.get('header_line')}), and this machine has {mine}: "
                f"kernel times here do not carry over")
    if gpus and not any(matches(g, here) for g in gpus):
        return (f"target: the problem runs on {', '.join(gpus)}, and this machine has {mine}: kernel times here "
                f"do not carry over")
    return None


def paragraph(session) -> str | None:
    """The report's target paragraph: never silence when something names a GPU."""
    t = session.harness.get("target") or {}
    head, gpus, here = t.get("header_gpu"), t.get("gpus") or [], t.get("here") or []
    if not head and not gpus:
        return None
    named = "; ".join(x for x in (f"the header asks for {head}" if head else "",
                                  f"the problem runs on {', '.join(gpus)}" if gpus else "") if x)
    board = f" (leaderboard `{t['leaderboard']}`)" if t.get("leaderboard") else ""
    if mismatch(session) is None:
        return (f"This machine has {', '.join(here)}: {named}{board}, so the stage times carry over, up to the "
                f"runner's own load and the queue, which no run here measures.")
    mine = ", ".join(here) if here else "no GPU"
    return (f"This machine has {mine}: {named}{board}. What carries over: whether the file imports, compiles "
            f"and builds, and whether its code passes the checks where it runs on both; compile, build, import "
            f"and autotune times, roughly (the CPU and the compilers do that work). What does not: kernel µs per "
            f"call and the benchmark stages' times; configs tuned here are this GPU's; and a kernel that needs the "
            f"other architecture (tcgen05, FP4, sm_100 features) cannot run here at all.")
