"""The session's files are written off the engine's threads: what lands on disk is what the live session
renders, the newest copy wins (never an older one over a later write), copies that pile up cost one write,
and a write that failed in the background is raised where the CLI hears it."""
import threading
import time

import pytest

from diagnose.cli import files
from diagnose.cli.files import FILES, OutDir, Saver
from diagnose.output import RENDERERS
from tests.test_engine import STORM, diagnose, storm_script


@pytest.fixture(scope="module")
def live():
    """A session as the engine leaves it in memory (enums, tuples, int keys), never read back from JSON."""
    session, _ = diagnose(STORM, storm_script)
    return session


def _wait_for(pred, timeout=20.0):
    end = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < end, "the saver never wrote"
        time.sleep(0.02)


def test_a_background_write_is_byte_for_byte_what_the_live_session_renders(tmp_path, live):
    out = OutDir(tmp_path / "out")
    saver = Saver(out)
    saver(live)
    _wait_for(lambda: all((out.path / n).exists() for n in FILES))
    for name, fmt in FILES.items():
        assert (out.path / name).read_text(encoding="utf-8") == RENDERERS[fmt](live), name


def test_the_newest_copy_wins_and_copies_that_pile_up_cost_one_write(tmp_path, live, monkeypatch):
    written, first = [], threading.Event()

    def slow_save(path, session, cl=None):       # a write that takes long: later copies arrive while it runs
        written.append(session.verdict.message)
        first.set()
        time.sleep(0.5)
        real(path, session, cl)
    real = files.save_all
    monkeypatch.setattr(files, "save_all", slow_save)
    out = OutDir(tmp_path / "out")
    saver = Saver(out)
    message = live.verdict.message
    try:
        live.verdict.message = "copy 0"
        saver(live)
        assert first.wait(10)
        for i in range(1, 20):
            live.verdict.message = f"copy {i}"
            saver(live)
        live.verdict.message = "final"
        saver.now(live)         # returns once the final write is on disk
        time.sleep(1.0)         # and the thread, still holding a copy, must not write an older one over it
        on_disk = (out.path / "report.md").read_text(encoding="utf-8")
    finally:
        live.verdict.message = message
    assert "final" in on_disk and "copy 19" not in on_disk
    assert written[0] == "copy 0" and written[-1] == "final"
    assert len(written) <= 3, written     # copy 0, perhaps copy 19, then the final write: never one per copy


def test_a_failed_background_write_is_raised_by_the_next_synchronous_one(tmp_path, live, monkeypatch):
    calls = []

    def failing(path, session, cl=None):
        calls.append(1)
        if len(calls) == 1:
            raise OSError(28, "No space left on device")
    monkeypatch.setattr(files, "save_all", failing)
    saver = Saver(OutDir(tmp_path / "out"))
    saver(live)
    _wait_for(lambda: calls)
    time.sleep(1.0)         # the thread keeps the error as soon as the write raised
    with pytest.raises(OSError, match="No space left"):
        saver.now(live)
    saver.now(live)         # said once: the next write goes on


def test_without_an_output_directory_nothing_is_written(live, monkeypatch):
    seen = []
    monkeypatch.setattr(files, "save_all", lambda *a: seen.append(a))
    saver = Saver(None)
    saver(live)
    saver.on_change(live, live.to_dict(), [])
    assert saver.now(live) == [] and saver._thread is None and seen == []


def test_the_claims_the_engine_settled_are_what_the_files_state(tmp_path, live, monkeypatch):
    """A copy handed on with its claims is rendered from them: never derived a second time off the engine."""
    from diagnose.analysis.audit import claims
    settled = claims.derive(live)
    calls = []
    real = claims.derive
    monkeypatch.setattr(claims, "derive", lambda s: calls.append(s) or real(s))
    out = OutDir(tmp_path / "out")
    saver = Saver(out)
    saver.on_change(live, live.to_dict(), settled)
    _wait_for(lambda: all((out.path / n).exists() for n in FILES))
    saver.now(live, settled)
    assert calls == []
    for name, fmt in FILES.items():
        assert (out.path / name).read_text(encoding="utf-8") == RENDERERS[fmt](live), name
    assert len(calls) == 2          # the renderers called without claims (md, json) derive them: the check can see
