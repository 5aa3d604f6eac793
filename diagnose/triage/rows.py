"""A submission's row, from what its command left: the exit code and last lines, and its session.json.

Statuses: ok, at_risk, timeout, crash, wrong (the verdict's), refused (KernelBot would not run the file, or it is
no submission), inconclusive (this machine cannot judge it, the command was stopped, or it outlived its hard
limit), lost (its worker died twice: set by the CLI, which sees Dask's failure).

A row is a Row: typed, made from its dict (this module's own, or a ledger line read back) by Row.from_dict alone, and
written by to_dict as the JSON it always was, so every ledger line and table stays byte for byte what it was.
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, fields, replace
from pathlib import Path

from diagnose.findings import clip
from diagnose.status import NOT_LOOKED
from diagnose.triage.classes import cause_class as class_of

FIELDS = ("file", "leaderboard", "problem", "status", "class", "stage", "phase", "line", "cause", "fix", "wall_s",
          "report", "why", "key", "exit_code", "gpu", "host", "worker")
VERDICTS = {"ok": "ok", "at_risk": "at_risk", "timeout": "timeout", "crash": "crash", "wrong": "wrong",
            "tampered": "crash"}
_MARKUP = re.compile(r"\[/?[a-z ]*\]")


@dataclass(frozen=True)
class Row:
    """One submission's row. Its fields in the order its JSON has its keys: FIELDS (every row has each), then the
    keys a row has only when something said them (its session, its task): absent, they are None and not written."""
    file: str | None = None
    leaderboard: str | None = None
    problem: str | None = None
    status: str | None = None
    cause_class: str | None = None          # its JSON key is "class" (classes.py)
    stage: str | None = None
    phase: str | None = None
    line: int | None = None
    cause: str | None = None
    fix: str | None = None
    wall_s: float | None = None
    report: str | None = None
    why: str | None = None
    key: str | None = None
    exit_code: int | None = None
    gpu: str | None = None
    host: str | None = None
    worker: str | None = None
    tried: tuple[str, ...] | None = None              # from the session: what the run tried beyond its walls
    isolation_missing: tuple[str, ...] | None = None  # and the walls this machine lacked
    session_sha256: str | None = None                 # the files as the task read them (ledger.py)
    report_sha256: str | None = None                  # None beside a session digest: report.md was unreadable
    started_at: float | None = None                   # from the task (overhead.py)
    ended_at: float | None = None
    command_s: float | None = None

    @classmethod
    def from_dict(cls, d: dict) -> Row:
        """The one way a row is made. A key it lacks (a ledger line from before that key) is None, as `row.get`
        read it; a key it does not know (the line's `sig`) is left out, as every reader ignored it."""
        got = {f.name: d.get(_KEYS.get(f.name, f.name)) for f in fields(cls)}
        for name in ("tried", "isolation_missing"):
            if isinstance(got[name], list):
                got[name] = tuple(got[name])
        return cls(**got)

    def to_dict(self) -> dict:
        """The row's JSON, key for key and in the order this module always wrote it."""
        out = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name in FIELD_NAMES or v is not None or getattr(self, _WITH.get(f.name, f.name)) is not None:
                out[_KEYS.get(f.name, f.name)] = list(v) if isinstance(v, tuple) else v
        return out


_KEYS = {"cause_class": "class"}          # a field whose JSON key is a Python keyword
FIELD_NAMES = frozenset({"cause_class"} | set(FIELDS) - {"class"})
_WITH = {"report_sha256": "session_sha256"}   # written whenever the key it goes with is, even as null


def _last_line(text: str) -> str:
    lines = [_MARKUP.sub("", x).strip() for x in text.strip().splitlines() if x.strip()]
    return clip(lines[-1], 300) if lines else ""


def _session(item: dict, since: float | None) -> tuple[dict | None, dict]:
    """The command's session.json, if this command wrote it (one left by an earlier attempt is not its answer),
    and the sha256 of it and of report.md as read here: the report a row links to is the one its task read."""
    path = Path(item["report_dir"]) / "session.json"
    try:
        if since is not None and path.stat().st_mtime < since:
            return None, {}
        data = path.read_bytes()
        s = json.loads(data.decode("utf-8"))
    except (OSError, ValueError):
        return None, {}
    if not isinstance(s, dict):
        return None, {}
    try:
        report = hashlib.sha256((path.parent / "report.md").read_bytes()).hexdigest()
    except OSError:
        report = None
    return s, {"session_sha256": hashlib.sha256(data).hexdigest(), "report_sha256": report}


def row_of(item: dict, settings: dict, code: int | None, out: str, err: str, wall: float, killed_at: float | None,
           gpu: str | None = None, host: str | None = None, since: float | None = None) -> Row:
    s, digests = _session(item, since)
    row = dict.fromkeys(FIELDS)
    row.update(file=item["shown"], key=item["key"], exit_code=code, wall_s=round(wall, 1), gpu=gpu, host=host,
               report=item.get("report") if s is not None else None)
    if s is not None:
        v = s.get("verdict") or {}
        site = v.get("site") or {}
        # a session that ran no probe (check) has no cause: its statement that the cause was not looked for
        top = (s.get("causes") or [None])[0] or next((i for i in s.get("inconclusive") or []
                                                      if i.get("probe") == NOT_LOOKED), None) or {}
        target = (s.get("harness") or {}).get("target") or {}
        # the line is the top cause's (where the time went, where a wrong value came from), else where the verdict
        # stopped: a deadline that lands in the harness's own step (cloning inputs) stops in no line of the file
        row.update(leaderboard=target.get("leaderboard"), problem=(s.get("task") or {}).get("name"),
                   stage=v.get("stage"), phase=v.get("phase"), line=(top.get("site") or site).get("line"),
                   cause=_first_sentence(top.get("narrative") or top.get("reason") or ""),
                   fix=(s.get("fix") or {}).get("toggle"))
        # what the run tried beyond its walls, and which walls this machine lacked (runs/jail.py): said in the row
        row["tried"] = list(((s.get("harness") or {}).get("container") or {}).get("tried") or [])
        row["isolation_missing"] = list(((s.get("harness") or {}).get("isolation") or {}).get("missing") or [])
        row["status"] = VERDICTS.get(v.get("status"), "inconclusive")
        if row["status"] == "inconclusive":
            row["why"] = clip(f"{v.get('status')}: {v.get('message') or ''}".strip(), 300)
        elif row["status"] != "ok":
            row["why"] = clip(v.get("message") or "", 300)
    if killed_at is not None:
        row.update(status="inconclusive", why=f"the command did not end within its hard limit of {killed_at:.0f} s "
                                              f"(its stages' budgets, compile steps and a margin)")
    elif "REFUSED by KernelBot" in out:
        row.update(status="refused", why=next(_MARKUP.sub("", x).strip() for x in out.splitlines() if "REFUSED" in x))
    elif code == 2:          # bad input: not a submission here (no custom_kernel, its folder missing): run again
        row.update(status="inconclusive", why=_last_line(err) or _last_line(out))
    elif s is None or code in (70, 130, 143) or code is None or code < 0:
        row.update(status="inconclusive", why=row.get("why") or _last_line(err) or _last_line(out) or
                   f"the command ended with exit code {code} and wrote no session")
    row.update(digests)          # bookkeeping, after FIELDS: never in the tables
    made = Row.from_dict(row)
    return replace(made, cause_class=class_of(made, s))


def _first_sentence(text: str) -> str:
    """The cause's first sentence, whole; where it quotes the submission's own output at length, cut at a clause
    end or a whole word, saying so (findings.clip)."""
    m = re.match(r"(.+?\.)(\s|$)", text)
    return clip(m.group(1) if m else text, 400)


def lost_row(item: dict, why: str) -> Row:
    row = Row.from_dict({"file": item["shown"], "key": item["key"], "status": "lost", "why": clip(why, 300)})
    return replace(row, cause_class=class_of(row, None))
