"""The triage's ledger, OUT/triage.jsonl: one row a line, each written whole, only by the triage's controller (the
CLI process, cli/ledger_file.py) from what a task returned through Dask. Nothing a run can write is believed: each
row carries a keyed digest (`sig`: HMAC-SHA256 over the row's canonical JSON, sorted keys, without `sig` itself)
under a key only the controller holds, OUT/.triage-key (32 random bytes, made on first use with O_EXCL, mode 0600,
never printed, never in a row). On resume a row counts only if its digest checks; any other (forged, or from a
triage without that key) is ignored, its file is checked again, and the triage says how many.

Each submission's key is made of its content, every setting that changes its answer, and its path (key_of): a
second triage with the same inputs and settings keeps the rows that finished and runs the rest (resume).

A row also holds the sha256 of its session.json and report.md as its task read them (task.py, rows.py): a report
changed since is shown as such (output/triage.py), never as the row's own.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import stat
from pathlib import Path

from diagnose.errors import BadInput
from diagnose.triage.rows import Row

JSONL, KEY_FILE, SIG = "triage.jsonl", ".triage-key", "sig"
KEY_BYTES = 32
RERUN = ("lost",)          # rows that say nothing about the submission: a second triage runs them again


def rerun(row: Row) -> bool:
    """A row that says nothing about the submission: a lost worker, bad input, or a command that was stopped."""
    return row.status in RERUN or row.exit_code in (2, 130, 143)


def key_of(path: Path, settings: dict) -> str:
    """The submission's content, every setting that changes its answer, and where it lies (two files with the
    same content are two rows)."""
    h = hashlib.sha256(path.read_bytes())
    h.update(json.dumps(settings, sort_keys=True, default=str).encode())
    h.update(str(path.resolve()).encode())
    return h.hexdigest()[:16]


def resume(items: list[dict], done: dict[str, Row]) -> tuple[list[Row], list[dict]]:
    """The rows kept from a triage before (signed, and about the submission), and the items still to run."""
    keep = {i["key"]: done[i["key"]] for i in items if i["key"] in done and not rerun(done[i["key"]])}
    return list(keep.values()), [i for i in items if i["key"] not in keep]


def _plain(row: dict) -> dict:
    """The row as JSON gives it back (a Path a string, a tuple a list): what is signed is what is read."""
    return json.loads(json.dumps(row, default=str))


def _canonical(row: dict) -> bytes:
    body = {k: v for k, v in row.items() if k != SIG}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str).encode()


def sign(key: bytes, row: dict) -> str:
    return hmac.new(key, _canonical(row), hashlib.sha256).hexdigest()


def verify(key: bytes, row: dict) -> bool:
    sig = row.get(SIG)
    return isinstance(sig, str) and hmac.compare_digest(sig, sign(key, row))


class Ledger:
    """OUT/triage.jsonl and its key, as read: what a triage here signed, and each row's line signed. Only the CLI
    writes them (cli/ledger_file.py makes the key and appends the lines), holding OUT (cli/files.OutDir): no other
    triage writes here."""

    def __init__(self, root: Path):
        self.root, self.path, self.key_path = root, root / JSONL, root / KEY_FILE
        self._key: bytes | None = None
        self._digests: dict[str, tuple[tuple[int, int], str | None]] = {}    # report.md: (mtime, size) -> sha256

    def _read_key(self) -> bytes | None:
        """The key, or None where there is none yet. A file that is not one (a link, another size) is bad input:
        no row could be checked by it, and none may be signed by it."""
        try:
            fd = os.open(self.key_path, os.O_RDONLY | os.O_NOFOLLOW)
        except FileNotFoundError:
            return None
        except OSError as e:
            raise BadInput(f"{self.key_path}: cannot read this triage's key: {e.strerror}; remove it to start the "
                           f"ledger again (every file is then checked again)") from None
        with os.fdopen(fd, "rb") as fh:
            st = os.fstat(fh.fileno())
            key = fh.read(KEY_BYTES + 1)
        if not stat.S_ISREG(st.st_mode) or len(key) != KEY_BYTES:
            raise BadInput(f"{self.key_path}: not a triage key ({KEY_BYTES} bytes); remove it to start the ledger "
                           f"again (every file is then checked again)")
        return key

    def key(self) -> bytes:
        """The key, which must exist by now (the CLI makes it, cli/ledger_file.py)."""
        if self._key is None:
            self._key = self._read_key()
        if self._key is None:
            raise BadInput(f"{self.key_path}: went while the triage ran")
        return self._key

    def done(self) -> tuple[dict[str, Row], str | None]:
        """Rows a previous triage here wrote and signed, each read once into its Row: the last one per key. A line
        cut short by a kill is skipped. Also one sentence on the rows ignored (None when none was)."""
        if not self.path.is_file():
            return {}, None
        rows, ignored = {}, 0
        key = self._read_key()
        self._key = key
        for line in self.path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                r = json.loads(line)
            except ValueError:
                continue
            row = Row.from_dict(r) if isinstance(r, dict) else None
            if row is None or not (isinstance(row.key, str) and row.key):
                continue
            if key is None or not verify(key, r):
                ignored += 1
                continue
            rows[row.key] = row
        if not ignored:
            return rows, None
        if key is None:
            return rows, (f"triage: {ignored} row(s) in {JSONL} but no key ({KEY_FILE}) to check them by: none is "
                          f"believed, their files are checked again")
        return rows, (f"triage: {ignored} row(s) in {JSONL} were not written by a triage here (no valid signature): "
                      f"ignored, their files are checked again")

    def line(self, row: Row) -> bytes:
        """The row as its ledger line, signed: one JSON line, written whole by the CLI."""
        body = _plain(row.to_dict())
        body[SIG] = sign(self.key(), body)
        return (json.dumps(body) + "\n").encode()

    def changed_reports(self, rows: list[Row]) -> set[str]:
        """Keys of the rows whose report.md is no longer (or never was) the one their task read: gone, changed,
        or never digested. A report's digest is taken again only when its mtime or size moved."""
        changed = set()
        for r in rows:
            if not r.report:
                continue
            want = r.report_sha256
            if not want or self._digest(self.root / r.report / "report.md") != want:
                changed.add(r.key)
        return changed

    def _digest(self, path: Path) -> str | None:
        try:
            st = path.stat()
        except OSError:
            return None
        stamp = (st.st_mtime_ns, st.st_size)
        seen = self._digests.get(str(path))
        if seen and seen[0] == stamp:
            return seen[1]
        try:
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError:
            digest = None
        self._digests[str(path)] = (stamp, digest)
        return digest
