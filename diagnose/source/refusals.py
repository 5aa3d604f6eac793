"""What KernelBot refuses before it runs anything (its submission API checks the uploaded file first): a file
over 1 MB, an empty file, a file that is not UTF-8, and a file whose text contains "stream" anywhere, in any
case, a comment ("upstream") or a string ("streaming") included. Each refusal carries the harness's own
message, the line, and for the word, where it stands and a rewording that passes. Pure: bytes in, findings out.
"""
from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass

LIMIT_BYTES = 1_000_000
MESSAGES = {
    "empty": "Empty file submitted. Please provide a file with code.",
    "too_large": "Submission file is too large (limit: 1MB).",
    "not_utf8": "Failed to decode submission file content as UTF-8.",
    "stream": "Your code contains work on another stream. This is not allowed and may result in your "
              "disqualification. If you think this is a mistake, please contact us.",
}
# Words that pass for the usual ones a comment or a docstring uses (the check is a substring test on the
# lowercased text, so "up-stream" or "STREAM" would still be refused)
REWORD = {"upstream": "original", "downstream": "later", "streaming": "piece by piece",
          "streamed": "sent in pieces", "streams": "queues", "stream": "queue", "mainstream": "common",
          "livestream": "live video"}
_WORD = re.compile(r"[A-Za-z_]*stream[A-Za-z_]*", re.IGNORECASE)


@dataclass(frozen=True)
class Refusal:
    rule: str            # empty | too_large | not_utf8 | stream
    message: str         # KernelBot's own
    line: int | None = None
    where: str = ""      # stream: "comment", "string" or "code"
    text: str = ""       # the line as it stands
    reworded: str = ""   # the line as it would pass (a comment or a string), else ""

    def describe(self) -> str:
        at = f"line {self.line}: " if self.line else ""
        if self.rule == "stream":
            fix = (f"; reword the {self.where}: {self.reworded.strip()}" if self.reworded else
                   "; that is code working on another stream, which the harness does not allow")
            place = "in code" if self.where == "code" else f"in a {self.where}"
            return f"{at}\"{_WORD.search(self.text).group(0)}\" {place}{fix}"
        return f"{at}{self.message}"


def _kinds(text: str) -> dict[int, set[str]]:
    """Per line, what holds the word: comment, string or code (by Python's own tokenizer)."""
    out: dict[int, set[str]] = {}
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if "stream" not in tok.string.lower():
                continue
            kind = {tokenize.COMMENT: "comment", tokenize.STRING: "string"}.get(tok.type, "code")
            if tok.type == getattr(tokenize, "FSTRING_MIDDLE", -1):
                kind = "string"
            for n in range(tok.start[0], tok.end[0] + 1):
                out.setdefault(n, set()).add(kind)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    return out


def _reword(line: str) -> str:
    def sub(m):
        word = m.group(0)
        new = REWORD.get(word.lower())
        if new is None:
            new = re.sub("stream", "flow", word, flags=re.IGNORECASE)
        return new.capitalize() if word[:1].isupper() else new
    return _WORD.sub(sub, line)


def refusals(raw: bytes) -> list[Refusal]:
    """Every reason KernelBot would refuse this file, in the order it checks them (it stops at the first)."""
    if not raw:
        return [Refusal("empty", MESSAGES["empty"])]
    out = []
    if len(raw) > LIMIT_BYTES:
        out.append(Refusal("too_large", MESSAGES["too_large"], text=f"{len(raw):,} bytes"))
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        return out + [Refusal("not_utf8", MESSAGES["not_utf8"], line=line, text=f"byte {raw[e.start]:#04x}")]
    kinds = _kinds(text)
    for n, line in enumerate(text.splitlines(), 1):
        if "stream" in line.lower():
            where = kinds.get(n, {"code"})
            kind = "code" if "code" in where else ("comment" if "comment" in where else "string")
            out.append(Refusal("stream", MESSAGES["stream"], line=n, where=kind, text=line,
                               reworded="" if kind == "code" else _reword(line)))
    return out
