"""Resolve the task a run uses: the built-in FP8 dual GEMM, or a user's GPU MODE problem directory.

Parent side: reads task.yml and checks that reference.py exists and defines what the harness calls, by
parsing it (never importing it: it imports torch).
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from diagnose.errors import BadInput

BUILTIN = {"fp8-dual-gemm": Path(__file__).parent / "fp8_dual_gemm"}
REQUIRED_FUNCS = ("generate_input", "check_implementation")


@dataclass
class Task:
    name: str
    directory: str           # copied into every run's working directory
    tests: list[dict]
    benchmarks: list[dict]
    shape_set: str           # "full" or "small": which case lists were taken
    builtin: bool
    timeouts: dict = field(default_factory=dict)   # stage -> seconds, from task.yml where it sets them

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def _cases(doc: dict, key: str, where: Path) -> list[dict]:
    cases = doc.get(key)
    if not isinstance(cases, list) or not cases:
        raise BadInput(f"{where}: '{key}' must be a non-empty list of cases")
    for i, c in enumerate(cases):
        if not isinstance(c, dict) or not all(isinstance(k, str) for k in c):
            raise BadInput(f"{where}: {key}[{i}] must be a mapping of keyword arguments, got {c!r}")
    return cases


def _check_reference(ref: Path) -> None:
    if not ref.is_file():
        raise BadInput(f"{ref.parent}: no reference.py in the problem directory")
    try:
        tree = ast.parse(ref.read_text(encoding="utf-8"), filename=str(ref))
    except (SyntaxError, UnicodeDecodeError) as e:
        raise BadInput(f"{ref}: cannot parse: {e}") from None
    names = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    names |= {a.asname or a.name for n in tree.body if isinstance(n, ast.ImportFrom) for a in n.names}
    missing = [f for f in REQUIRED_FUNCS if f not in names]
    if missing:
        raise BadInput(f"{ref}: does not define {', '.join(missing)}")


def load_task(problem: str | None, task_name: str, small: bool) -> Task:
    """`problem` is a directory path or None (then the built-in `task_name`)."""
    if problem is None:
        if task_name not in BUILTIN:
            raise BadInput(f"unknown task '{task_name}'; built-in tasks: {', '.join(BUILTIN)}")
        d, builtin = BUILTIN[task_name], True
    else:
        d, builtin = Path(problem), False
        if not d.is_dir():
            raise BadInput(f"{d}: --problem must be a directory holding reference.py and task.yml")
    d = d.resolve()
    _check_reference(d / "reference.py")
    yml = d / "task.yml"
    if not yml.is_file():
        raise BadInput(f"{d}: no task.yml in the problem directory")
    try:
        doc = yaml.safe_load(yml.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        first = str(e).strip().splitlines()[0]
        raise BadInput(f"{yml}: malformed YAML: {first}") from None
    if not isinstance(doc, dict):
        raise BadInput(f"{yml}: must be a mapping with 'tests' and 'benchmarks'")
    use_small = small and "small_tests" in doc
    prefix = "small_" if use_small else ""
    timeouts = {}
    for key, stage in (("test_timeout", "test"), ("benchmark_timeout", "benchmark"),
                       ("ranked_timeout", "leaderboard")):
        if key in doc:
            if not isinstance(doc[key], (int, float)) or doc[key] <= 0:
                raise BadInput(f"{yml}: {key} must be a positive number of seconds")
            timeouts[stage] = float(doc[key])
    return Task(
        name=str(doc.get("name", task_name if builtin else d.name)),
        directory=str(d),
        tests=_cases(doc, prefix + "tests", yml),
        benchmarks=_cases(doc, prefix + "benchmarks", yml),
        shape_set="small" if use_small else "full",
        builtin=builtin,
        timeouts=timeouts if not builtin else {},
    )


def case_label(case: dict) -> str:
    """A short, stable name for a case: '256x4096x7168' for m/n/k problems, else 'key=value,...'."""
    shown = {k: v for k, v in case.items() if k != "seed"}
    if set(shown) == {"m", "n", "k"}:
        return f"{shown['m']}x{shown['n']}x{shown['k']}"
    return ",".join(f"{k}={v}" for k, v in shown.items()) or "case"


def labels(cases: list[dict]) -> list[str]:
    """Labels for a case list, made unique: a repeated shape gets '#2', '#3'."""
    out, seen = [], {}
    for c in cases:
        base = case_label(c)
        seen[base] = seen.get(base, 0) + 1
        out.append(base if seen[base] == 1 else f"{base}#{seen[base]}")
    return out
