"""Resolve the task a run uses: the built-in FP8 dual GEMM, or a user's GPU MODE problem directory.

Parent side, never imports torch: it reads task.yml and checks the folder statically. A GPU MODE folder
says in `files` which files the harness puts together and under which names (the reference, `task.py`,
`../utils.py`, an evaluator such as `../eval_better_bench.py` renamed to `eval.py`, and `@SUBMISSION@`),
and in `config.main` which of them it runs. Every run directory is assembled the same way, and a folder
whose evaluator is there is judged by that evaluator itself (worker/evaluator.py).

A folder that cannot work is bad input, found before anything runs: a `files` source that does not
exist, a reference that does not bind generate_input and check_implementation (by def, assignment or
import: `check_implementation = make_match_reference(ref_kernel)` counts), a malformed task.yml.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from diagnose.errors import BadInput
from diagnose.source.bindings import binds_dynamically, bound_names

BUILTIN = {"fp8-dual-gemm": Path(__file__).parent / "fp8_dual_gemm"}
REQUIRED_FUNCS = ("generate_input", "check_implementation")
SUBMISSION = "@SUBMISSION@"
# The harness's `ranking_by` (task default `last`): with `last`, the benchmark and leaderboard stages get
# only the last benchmark case; with `mean` or `geom`, every one.
RANKINGS = ("last", "mean", "geom")


@dataclass
class Task:
    name: str
    directory: str           # the problem folder (or the built-in one)
    tests: list[dict]
    benchmarks: list[dict]
    shape_set: str           # "full" or "small": which case lists were taken
    builtin: bool
    timeouts: dict = field(default_factory=dict)   # stage -> seconds, from task.yml where it sets them
    files: list[list[str]] = field(default_factory=list)   # [name, absolute source or @SUBMISSION@]
    evaluator: str | None = None         # the file the harness runs (config.main), when the folder ships it
    evaluator_source: str | None = None  # where it came from, as task.yml names it ("../eval.py")
    world_size: int = 1                  # GPUs a multi_gpu problem needs
    gpus: list[str] = field(default_factory=list)   # the GPUs the problem is set for (task.yml `gpus`)
    ranking_by: str = "last"

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


def _check_reference(ref: Path, shown: str) -> None:
    if not ref.is_file():
        raise BadInput(f"{shown}: no reference.py in the problem directory")
    try:
        tree = ast.parse(ref.read_text(encoding="utf-8"), filename=str(ref))
    except (SyntaxError, UnicodeDecodeError, RecursionError, ValueError) as e:
        raise BadInput(f"{ref}: cannot parse: {e}") from None
    names = bound_names(tree)
    missing = [f for f in REQUIRED_FUNCS if f not in names]
    if missing and binds_dynamically(tree):
        return      # a star import or globals() may bind them: the reference check in a child will say
    if missing:
        other = sorted(n for n in names if n.startswith(("generate_", "check_", "reference_")))
        hint = f" (it defines {', '.join(other)}: not the GPU MODE interface)" if other else ""
        raise BadInput(f"{ref}: does not define {' or '.join(missing)}; the harness calls generate_input(**case) and "
                       f"check_implementation(data, output){hint}")


def _files(doc: dict, d: Path, yml: Path) -> list[list[str]]:
    raw = doc.get("files")
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise BadInput(f"{yml}: 'files' must be a list of {{name, source}}")
    out = []
    for i, f in enumerate(raw):
        if not (isinstance(f, dict) and isinstance(f.get("name"), str) and isinstance(f.get("source"), str)):
            raise BadInput(f"{yml}: files[{i}] must be a mapping with 'name' and 'source'")
        name, src = f["name"], f["source"]
        if "/" in name or name in ("", ".", ".."):
            raise BadInput(f"{yml}: files[{i}]: {name!r} is not a plain file name")
        if src == SUBMISSION:
            out.append([name, SUBMISSION])
            continue
        path = (d / src).resolve()
        if not path.is_file():
            raise BadInput(f"{yml}: files[{i}]: {src} (as {name}) does not exist")
        out.append([name, str(path)])
    if not any(s == SUBMISSION for _, s in out):
        raise BadInput(f"{yml}: 'files' has no {SUBMISSION} entry: where would the submission go?")
    return out


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
    files = _files(doc, d, yml)
    ref = next((Path(s) for n, s in files if n == "reference.py"), d / "reference.py")
    _check_reference(ref, str(d))
    main = (doc.get("config") or {}).get("main") if isinstance(doc.get("config"), dict) else None
    evaluator, evaluator_source = None, None
    if main and any(n == main for n, _ in files):
        evaluator = main
        evaluator_source = next(f["source"] for f in doc["files"] if f["name"] == main)
    use_small = small and "small_tests" in doc
    prefix = "small_" if use_small else ""
    timeouts = {}
    for key, stage in (("test_timeout", "test"), ("benchmark_timeout", "benchmark"),
                       ("ranked_timeout", "leaderboard")):
        if key in doc:
            if not isinstance(doc[key], (int, float)) or isinstance(doc[key], bool) or doc[key] <= 0:
                raise BadInput(f"{yml}: {key} must be a positive number of seconds")
            timeouts[stage] = float(doc[key])
    tests, benchmarks = _cases(doc, prefix + "tests", yml), _cases(doc, prefix + "benchmarks", yml)
    world = 1
    if doc.get("multi_gpu"):
        world = max([int(c.get("world_size", 1)) for c in tests + benchmarks if isinstance(c.get("world_size"), int)]
                    or [1])
    gpus = [str(g) for g in doc.get("gpus") or []] if isinstance(doc.get("gpus"), list) else []
    ranking = doc.get("ranking_by", "last")
    if ranking not in RANKINGS:
        raise BadInput(f"{yml}: ranking_by must be one of {', '.join(RANKINGS)}, got {ranking!r}")
    return Task(name=str(doc.get("name", task_name if builtin else d.name)), directory=str(d), tests=tests,
                benchmarks=benchmarks, shape_set="small" if use_small else "full", builtin=builtin,
                timeouts=timeouts if not builtin else {}, files=files, evaluator=evaluator,
                evaluator_source=evaluator_source, world_size=world, gpus=gpus, ranking_by=ranking)


# kernelbot builds a task's sources from its `files:` alone. A folder without them (ours, or a checkout's
# draft) gets the files every GPU MODE task names: its evaluator, its reference, their helpers, the task.
DEFAULT_FILES = ("eval.py", "reference.py", "utils.py", "task.py")


def stage_files(task: Task, source: str) -> dict[str, bytes]:
    """The files the harness writes into the working directory before a stage: every `files` entry under
    its name, the submission as @SUBMISSION@; a folder without `files` gives DEFAULT_FILES, where it has them."""
    sub = source.encode("utf-8")
    if task.files:
        out = {name: sub if src == SUBMISSION else Path(src).read_bytes() for name, src in task.files}
    else:
        d = Path(task.directory)
        out = {n: (d / n).read_bytes() for n in DEFAULT_FILES if (d / n).is_file()}
    out["submission.py"] = out.get("submission.py", sub) if task.files else sub
    return out


def stage_cases(task: dict, stage: str) -> list[dict]:
    """The cases a stage runs: the tests; or the benchmarks, only the last one under `ranking_by: last`."""
    if stage not in ("benchmark", "leaderboard"):
        return task["tests"]
    return task["benchmarks"][-1:] if task.get("ranking_by", "last") == "last" else task["benchmarks"]


def case_label(case: dict) -> str:
    """A short, stable name for a case: '256x4096x7168' for m/n/k problems, else 'key=value,...'."""
    shown = {k: v for k, v in case.items() if k != "seed"}
    if set(shown) == {"m", "n", "k"} or set(shown) == {"m", "n", "k", "l"} and shown.get("l") == 1:
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


def spec_line(case: dict) -> str:
    """A case in the evaluators' test-file format: 'key: value; key: value'."""
    return "; ".join(f"{k}: {v}" for k, v in case.items())
