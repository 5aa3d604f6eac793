"""The session: everything one diagnosis measured, and the only thing renderers read.

It is saved after every run (see cli.py) and can be re-rendered offline with `diagnose report`.
Raw evidence stays in it (every event, timing sample, exit code, signal, stack and output tail);
summaries are derived from it. Bump SCHEMA_VERSION on any change that breaks a reader.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields

SCHEMA_VERSION = 1
FAILURES = ("timeout", "crash", "wrong")


@dataclass
class Phase:
    name: str
    start_s: float
    end_s: float
    open: bool = False          # still running when the child died or was killed
    ok: bool = True


@dataclass
class StageResult:
    name: str
    status: str                 # ok | timeout | crash | wrong | at_risk | skipped
    wall_s: float = 0.0
    budget_s: float = 0.0
    phases: list[Phase] = field(default_factory=list)
    phase: str | None = None    # where it failed or was stopped
    message: str = ""
    site: dict | None = None    # {file, line, code} in the submission
    exit_code: int | None = None
    signal: str | None = None
    killed: str | None = None
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
    captures: list[dict] = field(default_factory=list)
    timing: dict = field(default_factory=dict)       # case -> raw samples and derived prediction
    predicted_s: float | None = None
    lock_wait_s: float = 0.0
    events: list[dict] = field(default_factory=list)

    @classmethod
    def from_dict(cls, d: dict) -> "StageResult":
        known = {f.name for f in fields(cls)}
        d = {k: v for k, v in d.items() if k in known}
        d["phases"] = [Phase(**p) for p in d.get("phases", [])]
        return cls(**d)

    def phase_s(self, prefix: str) -> float:
        """Total seconds of closed and open phases whose name starts with prefix."""
        return sum(p.end_s - p.start_s for p in self.phases if p.name.startswith(prefix))


@dataclass
class Run:
    id: str
    probe: str | None           # None: the submission as it is
    toggle: str | None = None   # e.g. "mode=default"
    variant: str | None = None  # unified diff against the submission, or None
    switches: dict = field(default_factory=dict)
    outcome: str = "ok"
    stages: list[StageResult] = field(default_factory=list)
    note: str = ""              # why the run stopped early, what it shares, ...
    source_sha: str = ""

    @classmethod
    def from_dict(cls, d: dict) -> "Run":
        known = {f.name for f in fields(cls)}
        d = {k: v for k, v in d.items() if k in known}
        d["stages"] = [StageResult.from_dict(s) for s in d.get("stages", [])]
        return cls(**d)

    def stage(self, name: str) -> StageResult | None:
        return next((s for s in self.stages if s.name == name), None)

    @property
    def failed_stage(self) -> StageResult | None:
        return next((s for s in self.stages if s.status in FAILURES), None)


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
    probes: list[dict] = field(default_factory=list)   # per probe: name, state (ran/not present/n/a), why
    runs: list[Run] = field(default_factory=list)
    verdict: dict = field(default_factory=dict)
    causes: list[dict] = field(default_factory=list)
    cleared: list[dict] = field(default_factory=list)   # suspects verified not to matter
    fix: dict | None = None
    complete: bool = False
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, default=str)

    @classmethod
    def from_dict(cls, d: dict) -> "Session":
        if not isinstance(d, dict) or "schema_version" not in d:
            raise ValueError("not a diagnose session (no schema_version)")
        if d["schema_version"] > SCHEMA_VERSION:
            raise ValueError(f"session schema {d['schema_version']} is newer than this diagnose "
                             f"understands ({SCHEMA_VERSION}); upgrade diagnose")
        known = {f.name for f in fields(cls)}
        d = {k: v for k, v in d.items() if k in known}
        d["runs"] = [Run.from_dict(r) for r in d.get("runs", [])]
        return cls(**d)

    @property
    def baseline(self) -> Run | None:
        return next((r for r in self.runs if r.probe is None), None)
