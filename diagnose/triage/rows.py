"""A submission's row, from what its command left: the exit code and last lines, and its session.json.

Statuses: ok, at_risk, timeout, crash, wrong (the verdict's), refused (KernelBot would not run the file, or it is
no submission), inconclusive (this machine cannot judge it, the command was stopped, or it outlived its hard
limit), lost (its worker died twice: set by the CLI, which sees Dask's failure).
"""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from diagnose.findings import clip
from diagnose.status import NOT_LOOKED
from diagnose.triage.classes import cause_class

FIELDS = ("file", "leaderboard", "problem", "status", "class", "stage", "phase", "line", "cause", "fix", "wall_s",
          "report", "why", "key", "exit_code", "gpu", "host", "worker")
VERDICTS = {"ok": "ok", "at_risk": "at_risk", "timeout": "timeout", "crash": "crash", "wrong": "wrong",
            "tampered": "crash"}
_MARKUP = re.compile(r"\[/?[a-z ]*\]")


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
           gpu: str | None = None, host: str | None = None, since: float | None = None) -> dict:
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
    row["class"] = cause_class(row, s)
    row.update(digests)          # bookkeeping, after FIELDS: never in the tables
    return row


def _first_sentence(text: str) -> str:
    """The cause's first sentence, whole; where it quotes the submission's own output at length, cut at a clause
    end or a whole word, saying so (findings.clip)."""
    m = re.match(r"(.+?\.)(\s|$)", text)
    return clip(m.group(1) if m else text, 400)


def lost_row(item: dict, why: str) -> dict:
    row = dict.fromkeys(FIELDS)
    row.update(file=item["shown"], key=item["key"], status="lost", why=clip(why, 300))
    row["class"] = cause_class(row, None)
    return row
