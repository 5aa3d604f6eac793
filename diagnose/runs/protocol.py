"""The contract between the parent (runner/) and the child worker (worker/): both import it, neither imports
the other.

Takes nothing; gives the worker spec (one typed record, written by the runner as JSON and read by the
worker), the environment variable names the two sides pass descriptors through, and the event kinds the
worker emits with the fields each must carry (the parent's event parser checks them).
"""
from __future__ import annotations

import enum
import json
from dataclasses import asdict, dataclass, field, fields

MARKER_ENV = "DIAGNOSE_RUN_MARKER"   # set in every process of a run: finds its descendants, detached ones too
FDS_ENV = "DIAGNOSE_FDS"             # "events,reply,stacks[,report]" descriptor numbers for the worker
DUMP_FD_ENV = "DIAGNOSE_DUMP_FD"     # the read end of the stack-dump request pipe
CHILD_ENV = "DIAGNOSE_CHILD"         # for a problem's own evaluator's subprocess: where to send its events
from diagnose.runs.jail_names import JAIL_ENV, JAIL_SCRIPT, STEP_PID, WALLS_ENV  # noqa: E402,F401 - shared names

NUM = (int, float)
# Event kinds the worker emits -> the fields each must carry, and their types. The child runs untrusted code:
# the parent's event parser (runner/events.py) keeps whatever does not fit as an anomaly.
EVENTS: dict[str, dict[str, tuple]] = {
    "worker_start": {"stage": (str,)},
    "env": {},
    "begin": {"name": (str,)},
    "end": {"name": (str,)},
    "compile": {},
    "compile_counters": {},
    "flush": {"bytes": (int,), "wanted": (int,)},
    "repeat": {"case": (str,), "n": (int,), "per_call_s": NUM},
    "timing": {"case": (str,), "per_call_s": (list,), "repeat_wall_s": (list,)},
    "check": {"case": (str,), "ok": (bool,)},
    "exception": {"type": (str,), "message": (str,)},
    "worker_error": {"type": (str,), "message": (str,)},
    "reached": {"line": (int,)},
    "lock": {"op": (str,), "id": (int,)},
    "stage_done": {"status": (str,)},
    "exit_clean": {},
    "tamper": {"what": (str,)},
    "needs_gpu": {"reason": (str,)},
    "evaluator": {"key": (str,), "value": (str,)},
    "gpu_quiet": {"waited_s": NUM, "quiet": (bool,)},
    "compile_call": {"caller_line": (int,)},
    "inductor_config": {"settings": (dict,)},
    "samples": {"phases": (dict,), "interval_s": NUM},
    "loops": {"counts": (dict,)},
    "evaluator_exit": {},
    "container": {"private": (list,)},
    "state": {"op": (str,)},
    "outlive": {"procs": (list,)},
    "probe": {"probe": (str,)},          # a probe's own hook (worker/plugins.py): its fields are the probe's
    "verified": {"case": (str,), "index": (int,), "ok": (bool,)},   # the verifier (worker/verify.py): one output
    "verify_done": {},
}
# Only the worker's own process may send these: they decide the stage's status. ("tamper" may come from
# any process of the run, the evaluator's pool workers included: forging one only convicts the forger.)
WORKER_ONLY = {"stage_done", "exit_clean", "worker_error", "exception", "lock", "needs_gpu",
               "evaluator_exit", "container", "outlive"}


class Depth(str, enum.Enum):
    """How a benchmark stage's timing loops run: sampled and predicted, or every repeat for real (--full)."""
    PREDICT = "predict"
    FULL = "full"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class WorkerSpec:
    """What one child process runs: a stage or (stage "compile") the harness's compile step."""
    submission: str                  # the submission's path inside the run's container
    stage: str
    task: dict                       # the task, as tasks.loader's Task.to_dict
    budget_s: float
    root: str                        # the run's container root
    stacks_prefix: str               # where stack dumps go
    depth: str = "predict"           # Depth: predict the timing loops from a sample, or run every repeat
    sample_repeats: int = 10
    sample_seconds: float = 3.0
    gpu_lock: bool = False           # ask the parent's arbiter before timing on the GPU
    flush_bytes: int | None = None   # L2 flush buffer (None: the harness's)
    watch: list = field(default_factory=list)   # edited lines to report when they execute
    sample: bool = True              # run the line sampler
    private_mounts: bool = True      # a private /tmp and /dev/shm where the kernel allows it
    tool_paths: list = field(default_factory=list)   # what the runner put on PYTHONPATH: the worker hides it
    argv: list = field(default_factory=list)         # sys.argv as the harness's process has it
    shared: list = field(default_factory=list)       # directories of this machine's the run may use (DIAGNOSE_SHARE)
    hooks: list = field(default_factory=list)        # the probes' own worker hooks, by module (worker/plugins.py)
    hook_args: dict = field(default_factory=dict)    # probe -> what its hook is handed as api.args (JSON)
    outputs: str = ""                # where each checked output is kept for the verifier ("": none kept)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> "WorkerSpec":
        data = json.loads(text)
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    @property
    def evaluated(self) -> bool:
        """Judged by the problem's own evaluator, not the worker's model of it."""
        return bool(self.task.get("evaluator")) and self.stage in ("test", "benchmark", "leaderboard")


@dataclass(frozen=True)
class VerifySpec:
    """What the verifier (worker/verify.py) judges after a stage: the outputs its processes kept, with the problem's
    own files as the parent copied them from the problem folder (never the run's work/, which the submission may
    have rewritten). expected: every output the stage must have kept, {case, index, kwargs}."""
    folder: str
    outputs: str
    expected: list

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> "VerifySpec":
        return cls(**json.loads(text))


def output_key(kwargs: dict, seed: bool = True) -> str:
    """The case a kept output belongs to, as both sides name it: its generate_input arguments, each value as text
    (an evaluator parses a case file's values itself), less a rank (each rank's input is of the same case); with
    seed=False, its shape (an evaluator may seed a case's inputs its own way: GPU MODE's adds 42 before the first)."""
    skip = {"rank"} if seed else {"rank", "seed"}
    return json.dumps(sorted((str(k), str(v)) for k, v in kwargs.items() if k not in skip))
