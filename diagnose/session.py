"""The session: everything one diagnosis measured and concluded, and the only thing renderers read.

Saved after every stage of every run, re-rendered offline with `diagnose report`. Raw evidence stays in it (events,
timing samples, exits, signals, stacks, output tails, lock waits, load); summaries are derived from it. Conclusions
are typed records, each naming the runs behind it. Bump SCHEMA_VERSION on any change that breaks a reader.
"""
from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field, fields, is_dataclass

from diagnose.findings import Cause, Cleared, Fix, Inconclusive, Verdict
from diagnose.status import ENDS_RUN, Status, Warning_

SCHEMA_VERSION = 5
READABLE = (2, 3, 4, 5)    # 2: the compile step was a stage of its own; 3, 4: LIFTED; every field since has a default
# Older schemas' per-probe StageResult fields -> the probe whose facts they are now, and the event of its hook each
# record reads as (a dict field is one record). One line each, in the order they left.
LIFTED = {
    "builds": ("extension_build", "built"),     # schema 3
    "helion": ("helion", "tuned"),              # schema 3
    "memo": ("search", "memo"),                 # schema 4
    "numerics": ("numerics", "wrong"),          # schema 4
    "autotune": ("autotune", "tuned"),          # schema 4
    "captures": ("graph_capture", "capture"),   # schema 4
}


@dataclass
class Phase:
    name: str
    start_s: float
    end_s: float
    open: bool = False          # still running when the child died or was stopped
    ok: bool = True
    held_s: float = 0.0         # of which paused or queued while another run timed (not the phase's own)

    @property
    def seconds(self) -> float:
        return max(0.0, self.end_s - self.start_s - self.held_s)


@dataclass
class Contention:
    """What else was happening while a stage ran: the evidence behind 'was this timing fair?'."""
    overlapped: list[str] = field(default_factory=list)   # ids of other runs alive during the stage
    # of those, the runs on its GPU (one on another GPU shares no GPU); None: not recorded (evidence.sharers)
    gpu_shared: list[str] | None = None
    run_delay_s: float = 0.0     # time the stage's processes were runnable but waited for a CPU
    paused_s: float = 0.0        # time it was paused so another run could time alone (not charged)
    load_per_cpu: float = 0.0    # mean 1-minute load average per CPU during the stage
    others_cpu_s: float = 0.0    # CPU seconds the rest of the host used meanwhile (other runs, other programs)
    cpus: int = 0

    @property
    def interference_s(self) -> float:
        """Time other work took from this stage and that still counted against its budget."""
        return self.run_delay_s


@dataclass
class StageResult:
    name: str
    status: Status
    wall_s: float = 0.0
    budget_s: float = 0.0
    charged_s: float = 0.0      # what counts against the budget: wall time less GPU lock waits
    phases: list[Phase] = field(default_factory=list)
    phase: str | None = None    # where it failed or was stopped
    message: str = ""
    site: dict | None = None    # {file, line, func, code} in the submission
    lost_worker: dict | None = None   # {how, phase}: the pool worker died, so the harness waits (runs/harness.py)
    exit_code: int | None = None
    signal: str | None = None
    killed: str | None = None   # deadline | max_rss | interrupted | parent
    cpu_s: float = 0.0
    user_s: float = 0.0
    peak_rss_mb: float = 0.0
    peak_gpu_mb: float | None = None
    processes: int = 0
    survivors: list[int] = field(default_factory=list)
    stdout_tail: str = ""
    stderr_tail: str = ""
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    stacks: str = ""
    exception: dict | None = None
    compile: list[dict] = field(default_factory=list)
    timing: dict = field(default_factory=dict)       # case -> raw samples and derived prediction
    predicted_s: float | None = None
    predicted_range: list | None = None   # [low, high] seconds: the prediction at the ends of its 95 % interval
    lock_waits: list[dict] = field(default_factory=list)   # {start_s, seconds, mode: wait|pause}, by the parent
    contention: Contention = field(default_factory=Contention)
    reached: list[int] = field(default_factory=list)   # watched (edited) lines that executed
    samples: dict = field(default_factory=dict)   # phase -> {lines, entries, module: {line: count}}; see hotspots
    sample_interval_s: float = 0.0
    sample_cost_s: float = 0.0                     # what sampling cost the child, measured by the child
    loops: dict = field(default_factory=dict)      # phase -> {loop header line: iterations} (Python 3.12+)
    compile_calls: list[dict] = field(default_factory=list)   # every torch.compile call, where and how
    evaluator: dict = field(default_factory=dict)      # the problem's own evaluator: its report lines
    # The harness's compile step (`python3 submission.py`) before it in the same container: shown, never deciding
    compile_step: "StageResult | None" = None
    state: dict = field(default_factory=dict)   # container: {written, reads, writes, outside, spawned, container}
    probe_facts: dict = field(default_factory=dict)    # probe -> what its own worker hook sent (worker/plugins.py)
    end_t: float | None = None     # time.time() as its process ended or was stopped: a probe's open event ran until
    start_t: float | None = None   # time.time() as its process started: a probe's event at t is t - start_t into it
    anomalies: list[str] = field(default_factory=list)  # impossible or malformed events seen
    events: list[dict] = field(default_factory=list)
    verified: dict | None = None   # the verifier's judgment of the kept outputs, after the stage (runner/verify.py)

    @property
    def lock_wait_s(self) -> float:
        """Seconds kept waiting for the GPU or paused for another run's timing, overlaps counted once (a run
        can be paused while it queues). An overrun, this run's own timing outliving its hold, is no wait."""
        return round(union_seconds([(w["start_s"], w["start_s"] + w["seconds"]) for w in self.lock_waits
                                    if w["mode"] != "overrun"]), 4)

    @property
    def seconds(self) -> float:
        """The stage's time against its budget: the prediction where there is one, else charged time (a timeout's
        too: a prediction from the cases timed before the deadline is not what it took)."""
        return self.charged_s if self.status == Status.TIMEOUT or self.predicted_s is None else self.predicted_s

    @classmethod
    def from_dict(cls, d: dict) -> "StageResult":
        known, facts = {f.name for f in fields(cls)}, d.get("probe_facts") or {}
        lifted = {probe: [*facts.get(probe, []), *({"event": ev, **r} for r in ([d[old]] if isinstance(d[old], dict)
                  else d[old]))] for old, (probe, ev) in LIFTED.items() if d.get(old)}   # after what its hook sent
        d = {k: v for k, v in d.items() if k in known}
        d["probe_facts"] = {**facts, **lifted}
        d["status"] = Status(d["status"])
        d["phases"] = [Phase(**p) for p in d.get("phases", [])]
        d["contention"] = Contention(**d.get("contention", {}))
        d["compile_step"] = cls.from_dict(d["compile_step"]) if d.get("compile_step") else None
        return cls(**d)

    def phase_s(self, prefix: str) -> float:
        """Total seconds of closed and open phases whose name starts with prefix (their own time: time
        spent paused for another run's timing section is not theirs)."""
        return sum(p.seconds for p in self.phases if p.name.startswith(prefix))


class Role(str, enum.Enum):
    BASELINE = "baseline"        # the submission as it is
    SINGLE = "single"            # one probe's toggle
    COMBINATION = "combination"  # the bisector's test: several suspects removed at once
    REPEAT = "repeat"            # --repeat N: the same variant again, for the spread
    CONFIRM = "confirm"          # a solo rerun that confirms a time-based conclusion
    REFERENCE = "reference"      # the problem's reference alone: can this machine judge it at all?
    TUNING = "tuning"            # a search run once outside any budget, for its result: never a timed run

    def __str__(self) -> str:
        return self.value


@dataclass
class Run:
    id: str
    probe: str | None           # None: the submission as it is
    toggle: str | None = None   # e.g. "mode=default"
    variant: str | None = None  # unified diff against the submission, or None
    role: Role = Role.BASELINE
    switches: dict = field(default_factory=dict)
    outcome: Status = Status.INCOMPLETE    # until a stage has finished
    stages: list[StageResult] = field(default_factory=list)
    note: str = ""              # why the run stopped early, what it shares, ...
    source_sha: str = ""
    watched: list[int] = field(default_factory=list)   # the variant's edited lines (variant numbering)
    confirms: str | None = None  # for a CONFIRM run: the run whose conclusion it checks
    solo: bool = False           # ran with no other run alive
    removed: list[str] = field(default_factory=list)   # COMBINATION: the suspects taken out

    @classmethod
    def from_dict(cls, d: dict) -> "Run":
        known = {f.name for f in fields(cls)}
        d = {k: v for k, v in d.items() if k in known}
        d["stages"] = [StageResult.from_dict(s) for s in d.get("stages", [])]
        d["outcome"] = Status(d["outcome"])
        d["role"] = Role(d.get("role", "baseline"))
        return cls(**d)

    def stage(self, name: str) -> StageResult | None:
        return next((s for s in self.stages if s.name == name), None)

    def settle(self) -> None:
        """Its outcome from its stages: the first that ended the run, else at risk if any was, else ok."""
        ended = self.failed_stage
        self.outcome = ended.status if ended else Status.AT_RISK if any(
            s.status == Status.AT_RISK for s in self.stages) else Status.OK

    @property
    def failed_stage(self) -> StageResult | None:
        return next((s for s in self.stages if s.status in ENDS_RUN), None)

    @property
    def reached(self) -> set[int]:
        return {ln for s in self.stages for ln in s.reached}

    @property
    def exercised(self) -> bool | None:
        """Did any edited line of this variant execute? None when nothing was watched."""
        return bool(self.reached & set(self.watched)) if self.watched else None


@dataclass
class Session:
    submission: dict
    task: dict
    harness: dict
    command: list[str] = field(default_factory=list)
    created: str = ""
    tool_version: str = ""
    schema_version: int = SCHEMA_VERSION
    environment: dict = field(default_factory=dict)
    scan: list[dict] = field(default_factory=list)
    probes: list[dict] = field(default_factory=list)   # per probe: name, state, why, evidence, toggles
    runs: list[Run] = field(default_factory=list)
    verdict: Verdict = field(default_factory=lambda: Verdict(Status.INCOMPLETE, message="no run finished"))
    causes: list[Cause] = field(default_factory=list)
    cleared: list[Cleared] = field(default_factory=list)
    inconclusive: list[Inconclusive] = field(default_factory=list)
    fix: Fix | None = None
    warnings: list[dict] = field(default_factory=list)  # {kind: Warning_, message}
    edit_bisect: dict = field(default_factory=dict)     # `diagnose bisect`: edits, tested combinations, minimal set
    bisection: dict = field(default_factory=dict)       # the search: removers, minimal set, checked
    complete: bool = False
    notes: list[str] = field(default_factory=list)
    verdict_at_s: float | None = None   # seconds into the diagnosis when the verdict was decided and stated
    cause_at_s: float | None = None     # ... when the causes were (every decisive toggle and combination ended)
    diagnosis_s: float | None = None    # seconds the whole diagnosis took

    def to_dict(self) -> dict:
        return _plain(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, default=str)

    @classmethod
    def from_dict(cls, d: dict) -> "Session":
        if not isinstance(d, dict) or "schema_version" not in d or "runs" not in d:
            raise ValueError("not a diagnose session (no schema_version)")
        if d["schema_version"] not in READABLE:
            newer = d["schema_version"] > SCHEMA_VERSION
            raise ValueError(f"session schema {d['schema_version']} is {'newer' if newer else 'older'} than this "
                             f"diagnose reads ({SCHEMA_VERSION}); {'upgrade diagnose' if newer else 'run it again'}")
        known = {f.name for f in fields(cls)}
        d = {k: v for k, v in d.items() if k in known}
        d["runs"] = [Run.from_dict(r) for r in d.get("runs", [])]
        d["verdict"] = Verdict.from_dict(d["verdict"])
        d["causes"] = [Cause.from_dict(c) for c in d.get("causes", [])]
        d["cleared"] = [Cleared.from_dict(c) for c in d.get("cleared", [])]
        d["inconclusive"] = [Inconclusive(**c) for c in d.get("inconclusive", [])]
        d["fix"] = Fix.from_dict(d["fix"]) if d.get("fix") else None
        return cls(**d)

    @property
    def baseline(self) -> Run | None:
        return next((r for r in self.runs if r.role == Role.BASELINE), None)

    def run(self, rid: str) -> Run | None:
        return next((r for r in self.runs if r.id == rid), None)

    def warn(self, kind: Warning_, message: str) -> None:
        if not any(w["kind"] == kind and w["message"] == message for w in self.warnings):
            self.warnings.append({"kind": kind, "message": message})


def _plain(x):
    """A copy in plain data: dataclasses to dicts, enums to their values (what the JSON and renderers see). Not
    `asdict`, which deep-copies every leaf: a save copies megabytes of events (0.04 s here, asdict 0.4 s)."""
    t = type(x)
    if t is str or t is int or t is float or t is bool or x is None:
        return x
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_plain(v) for v in x]
    if t is tuple:
        return tuple(_plain(v) for v in x)
    if isinstance(x, enum.Enum):
        return x.value
    if is_dataclass(x) and not isinstance(x, type):
        return {f.name: _plain(getattr(x, f.name)) for f in fields(x)}
    return x


def union_seconds(spans: list[tuple[float, float]]) -> float:
    """The length of the union of (start, end) spans."""
    total, end = 0.0, None
    for a, b in sorted(spans):
        if end is None or a > end:
            total += b - a
            end = b
        elif b > end:
            total += b - end
            end = b
    return total
