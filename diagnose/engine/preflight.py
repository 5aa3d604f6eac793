"""The preflight: the problem's reference run alone before any stage. A reference that cannot be imported is a
bad folder; one that cannot run here (no GPU of its kind, a package this machine lacks) makes the verdict
needs_gpu.
"""
from __future__ import annotations

from diagnose.engine.runs import RunPool
from diagnose.errors import BadInput
from diagnose.findings import CUT, Verdict, clip
from diagnose.session import Role
from diagnose.status import Status


def preflight(pool: RunPool) -> bool:
    """The problem's reference alone, before any stage: does it import, and can it run here? A
    reference that cannot be imported is a bad folder (BadInput); one that cannot run here makes
    the verdict needs_gpu. Returns whether the diagnosis goes on."""
    pool.quiet = True
    ref = pool.launch(Role.REFERENCE, None, "reference check", pool.source, stages=["reference"])
    pool.wait(ref)
    pool.quiet = False
    st = ref.stages[0] if ref.stages else None
    if st is None or st.status == Status.OK or st.status == Status.INTERRUPTED:
        pool.save()
        return st is not None and st.status == Status.OK
    werr = next((e for e in st.events if e["k"] == "worker_error"), None)
    missing = _missing_package(werr, pool.settings.problem)
    if missing:      # a package of the problem's own that this machine lacks: it cannot judge, the folder is fine
        pool.session.verdict = Verdict(
            Status.NEEDS_GPU, stage="reference", phase=st.phase,
            message=f"this machine cannot judge the problem: its reference imports '{missing}', which is not "
                    f"installed here", note=f"install '{missing}' (the problem's own dependency), or run it on "
                                            f"the machine the problem is set for", runs=[ref.id])
        pool.session.complete = True
        pool.save()
        return False
    if werr and st.status != Status.NEEDS_GPU and any(p.name == "reference_import" and not p.ok for p in st.phases):
        pool.quiet = True       # a bad folder leaves no report behind
        raise BadInput(f"{pool.settings.problem}/reference.py: fails to import: {werr['type']}: "
                       f"{clip(werr['message'].strip().splitlines()[0], 300) if werr['message'].strip() else ''}")
    env = next((e for e in st.events if e["k"] == "env"), {})
    msg = (st.message or "").replace("the worker failed before the stage: ", "")
    end = msg.find(". ", 0, 300)      # a long message: its first sentence, saying the rest was left out
    msg = msg if len(msg) <= 300 else msg[:end + 1] + CUT if end >= 0 else clip(msg, 300)
    where = f"{env['gpu']} (compute capability {env['capability']})" if env.get("gpu") else "no CUDA GPU"
    target = (f"the problem is set for {', '.join(pool.settings.gpus_for)}" if pool.settings.gpus_for else
              "it needs FP4 tensor cores (sm_100, B200 class)" if any(x in msg.lower() for x in
                                                                       ("fp4", "e2m1", "float4", "sm_100"))
              else "run it on the GPU the problem is set for")
    pool.session.verdict = Verdict(Status.NEEDS_GPU, stage="reference", phase=st.phase,
                                   message=f"the problem's own reference cannot run here: {msg}",
                                   note=f"this machine has {where}; {target}", runs=[ref.id])
    pool.session.complete = True
    pool.save()
    return False


def _missing_package(werr: dict | None, problem: str) -> str | None:
    """The third-party package a reference failed to import, when it is not a file of the problem folder."""
    import re
    from pathlib import Path
    if not werr or werr.get("type") != "ModuleNotFoundError":
        return None
    m = re.search(r"No module named '([^']+)'", werr.get("message", ""))
    if not m:
        return None
    top = m.group(1).split(".")[0]
    d = Path(problem) if problem else None
    if d is not None and ((d / f"{top}.py").exists() or (d / top).is_dir()):
        return None
    return top
