"""numerics: is a wrong result only the numeric settings the reference computes under?

A reference may compute inside settings the submission never sets: TF32 off for cuDNN or cuBLAS, a
float32 matmul precision, deterministic algorithms, another default dtype (pmpp's conv2d reference runs in a
DeterministicContext, which turns cuDNN's TF32 off; torch's default leaves it on for convolutions).
Present when the baseline's result was wrong and the settings seen while the reference computed differ from
those seen while custom_kernel did (its worker hook, hook.py; read back by facts.py). Toggle: the submission
sets the reference's values itself, right after its imports; if that alone makes it pass, the settings were the
whole difference.
"""
from __future__ import annotations

import ast
import json
from functools import partial

from diagnose.source.edits import apply_edits
from probes.base import ABSENT, CANNOT_TOGGLE, RUN, Plan, PlanContext, ProbeInfo, Toggle
from probes.numerics.facts import step_wrong

INFO = ProbeInfo("numerics", "numeric settings the reference computes under and the submission does not",
                 "the settings seen while the reference and custom_kernel computed, in the baseline run",
                 "the reference's settings, set by the submission", needs_baseline=True, bisect=False,
                 describe="computing under other numeric settings than the reference (TF32, matmul precision, "
                          "deterministic algorithms, default dtype)", sites=(), takes_away="measure",
                 hook="probes.numerics.hook")

# The words that carry its evidence in a run (event kinds, fact keys): probes/spec.py
WORDS = ("numerics", "wrong_detail")    # its StageResult field and its event kind before it had a hook

STATEMENTS = {
    "cuda.matmul.allow_tf32": "torch.backends.cuda.matmul.allow_tf32 = {v!r}",
    "cudnn.allow_tf32": "torch.backends.cudnn.allow_tf32 = {v!r}",
    "float32_matmul_precision": "torch.set_float32_matmul_precision({v!r})",
    "deterministic_algorithms": "torch.use_deterministic_algorithms({v!r})",
    "cudnn.deterministic": "torch.backends.cudnn.deterministic = {v!r}",
    "cudnn.benchmark": "torch.backends.cudnn.benchmark = {v!r}",
    "default_dtype": "torch.set_default_dtype(torch.{v})",
}


def seen(run) -> dict | None:
    """{reference: settings, submission: settings} from the baseline's stages, where both were seen."""
    for st in (run.stages if run else []):
        n = step_wrong(st)
        if n.get("reference") and n.get("submission"):
            return n
    return None


def differing(n: dict) -> dict:
    ref, sub = n["reference"], n["submission"]
    return {k: ref[k] for k in STATEMENTS if k in ref and k in sub and ref[k] != sub[k]}


def apply_settings(source: str, settings: str) -> str:
    """Set the given settings (JSON) right after the module's last top-level import."""
    want = json.loads(settings)
    tree = ast.parse(source)
    imports = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    at = (imports[-1].end_lineno if imports else 0) + 1
    lines = ["import torch  # diagnose: the reference's numeric settings"] + \
        [STATEMENTS[k].format(v=v) for k, v in want.items()]
    return apply_edits(source, [([at, 0, at, 0], "\n".join(lines) + "\n")])


def plan(ctx: PlanContext) -> Plan:
    base = ctx.baseline
    if base is None or str(base.outcome) != "wrong":
        return Plan(ABSENT, "the baseline's results were not wrong")
    n = seen(base)
    if n is None:
        return Plan(ABSENT, "the reference's numeric settings were not seen (it has no ref_kernel, or it never ran)")
    diff = differing(n)
    if not diff:
        return Plan(ABSENT, "the reference and custom_kernel computed under the same numeric settings",
                    evidence={"settings": n["reference"]})
    said = ", ".join(f"{k}={v} (the submission: {n['submission'][k]})" for k, v in diff.items())
    if not ctx.scan.entry_is_def and ctx.scan.error:
        return Plan(CANNOT_TOGGLE, f"the reference computes under {said}; the source cannot be edited")
    label = "the reference's numeric settings: " + ", ".join(f"{k}={v}" for k, v in diff.items())
    return Plan(RUN, f"the reference computes under {said}",
                [Toggle(INFO.name, label, partial(apply_settings, settings=json.dumps(diff)), removes=True)],
                evidence={"reference": n["reference"], "submission": n["submission"]})


def measure(base, run) -> tuple[bool | None, bool | None, str]:
    """What its toggle took away (INFO.takes_away "measure"): the numeric settings the submission computed under, in
    the baseline's run against the variant's."""
    def settings(r) -> dict:
        return next((n["submission"] for st in r.stages if (n := step_wrong(st)).get("submission")), {})
    b, v = settings(base), settings(run)
    if not b:
        return None, None, f"{base.id} recorded no numeric settings"
    if not v:     # recorded only beside a wrong result: a run that computed right has none to compare
        return True, None, f"{run.id} recorded no numeric settings (none are kept for a right result)"
    changed = sorted(k for k in set(b) | set(v) if b.get(k) != v.get(k))
    return True, bool(changed), f"settings changed: {', '.join(changed) or 'none'}"


def wrong_by(step) -> str:
    """A wrong output in numbers, from the worker's comparison with the reference's own output."""
    x = step_wrong(step).get("stats")
    if not x or x.get("max_abs") is None:
        return ""
    tol = " ".join(f"{k}={x[k]:g}" for k in ("rtol", "atol") if x.get(k) is not None)
    out = f"max abs error {x['max_abs']:.3g}, max rel error {x['max_rel']:.3g}"
    if x.get("outside") is not None:
        out += f"; {x['outside']:,} of {x['elements']:,} elements outside {tol or 'the tolerance'}"
    if x.get("worst"):
        w = x["worst"][0]
        out += f"; worst at {w['index']}: got {w['got']:.8g}, expected {w['expected']:.8g}"
    return out


def failure(step) -> list[str]:
    """Its lines in the report's Failure section: the worst elements against the reference's own output, and the
    settings each side computed under where they differ."""
    n, out = step_wrong(step), []
    x = n.get("stats")
    if x and x.get("worst"):
        out += [f"Against the reference's own output ({n.get('case')}): {wrong_by(step)}.", "",
                "| index | got | expected |", "|---|---|---|"]
        out += [f"| {w['index']} | {w['got']} | {w['expected']} |" for w in x["worst"]] + [""]
    ref, mine = n.get("reference"), n.get("submission")
    if ref and mine and ref != mine:
        out += ["Numeric settings while each side computed: " + "; ".join(
            f"{k}: reference {ref[k]}, submission {mine.get(k)}" for k in ref if ref[k] != mine.get(k)) + ".", ""]
    return out


# What the tests expect of this probe (probes/spec.py EXPECTED): its plan's state on reports/examples/round9.py
# (tests/test_probes.py)
EXPECTED = {
    "round9": ABSENT,
}
