"""The triage's ledger on disk (its meaning is triage/ledger.py's): the key, made once with O_EXCL, mode 0600, and
each row appended as one line, written whole. Only the CLI writes files."""
from __future__ import annotations

import os

from diagnose.errors import BadInput
from diagnose.triage.ledger import KEY_BYTES, Ledger


class LedgerFile(Ledger):
    def key(self) -> bytes:
        """The key, made on first use: O_EXCL, so a file put there first is never taken for ours unread."""
        if self._key is None:
            self._key = self._read_key()
        if self._key is None:
            new = os.urandom(KEY_BYTES)
            try:
                fd = os.open(self.key_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            except FileExistsError:
                self._key = self._read_key()
                if self._key is None:
                    raise BadInput(f"{self.key_path}: appeared and went while the triage made it") from None
                return self._key
            with os.fdopen(fd, "wb") as fh:
                fh.write(new)
                fh.flush()
                os.fsync(fh.fileno())
            self._key = new
        return self._key

    def append(self, row: dict) -> None:
        line = self.line(row)
        with open(self.path, "ab") as fh:
            # after a line a kill cut short, a new line: else this row would be glued to it, and lost
            cut = fh.tell() > 0 and _last_byte(self.path) != b"\n"
            fh.write((b"\n" if cut else b"") + line)   # one write: whole or absent


def _last_byte(path) -> bytes:
    with open(path, "rb") as fh:
        fh.seek(-1, os.SEEK_END)
        return fh.read(1)
