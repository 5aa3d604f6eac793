"""What a tuning run's searches kept, as the hook sends it at the stage's end: each place a phase changed, as source
text that makes its contents again (watch.literal_text), for pin.py to write back where the code reads it.

A mapping is sent as every entry its phases added, not only what it held at the end: a cache bounded to four shapes
has dropped the first test shape by the fifth, and a pin of its end state leaves that shape to search again. A dict
of the module's keeps what it held at the end too (entries made at import); a mapping of a library's (os.environ, a
weak table) only what the searches' phases added to it.
"""
from __future__ import annotations

from probes.search.watch import literal_text


def entry_texts(pairs) -> dict[str, tuple[str | None, str | None]]:
    """Per key's text, its value's text or why it has none: what a phase added to a mapping, taken at the phase's
    end (a weak table's value may be gone by the stage's end)."""
    out = {}
    for k, v in pairs:
        kt, why = literal_text(k)
        if kt is not None:
            out[kt] = literal_text(v)
        else:       # one entry no literal holds: the mapping cannot be written (its `why` says which)
            out[f"<key {len(out)}>"] = (None, f"its key {why}")
    return out


def mapping_text(kind: str, end, added: dict) -> tuple[str | None, str | None, int]:
    """(text, why not, entries) of a mapping place: its end state (a dict of the module's) with every entry its
    phases added that it no longer holds, or (a mapping of a library's) only what they added, at its latest value."""
    if end is None and not added:
        return None, "it was not there at the end", 0
    entries: dict[str, tuple] = {}
    if kind == "dict" and end is not None:
        entries.update(entry_texts(list(end.items())))
    for k, got in added.items():
        if kind == "dict" or k not in entries:
            entries.setdefault(k, got)
    if kind != "dict" and end is not None:
        now = entry_texts([(k, end.get(k)) for k in list(end)])
        entries.update({k: now[k] for k in entries if k in now and now[k][0] is not None})
    bad = next((why for _, (t, why) in entries.items() if t is None), None)
    if bad is not None:
        return None, bad, len(entries)
    return "{" + ", ".join(f"{k}: {t}" for k, (t, _) in entries.items()) + "}", None, len(entries)


def record(path: str, kind: str, value, added: dict | None, method: bool) -> dict:
    """The `kept` event of one place."""
    if kind in ("dict", "mapping"):
        text, why, n = mapping_text(kind, value, added or {})
    else:
        text, why = literal_text(value) if value is not None else (None, "it was not there at the end")
        n = len(value) if isinstance(value, (dict, list)) else None
    return {"what": "kept", "path": path, "kind": kind, "method": method, "entries": n, "text": text, "error": why}
