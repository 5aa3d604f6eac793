"""One owner for the session's conclusions (engine/conclusions.py): the engine settles the session once per change,
hands on only a session that changed, derives its claims once per change, and every later reader (the early verdict's
line, the files, the end-of-run summary) reuses them. Through the scripted runner, in this process."""
import ast
import threading
from pathlib import Path

from diagnose.analysis.audit import claims
from diagnose.engine import Engine
from diagnose.engine.observer import Observer
from diagnose.runs.runner.scripted import ScriptedRunner
from diagnose.runs.settings import Settings
from diagnose.session import Session
from diagnose.source.submission import Submission
from diagnose.status import Status
from diagnose.tasks.loader import load_task
from tests.test_engine import BUDGETS, STAGES, STORM, storm_script


class Heard(Observer):
    def __init__(self):
        self.changes, self.verdicts, self.runs, self.stages = [], [], [], 0
        self.lock = threading.Lock()

    def on_change(self, session, data, cl):
        with self.lock:
            self.changes.append((data, cl))

    def on_verdict(self, session, what, cl):
        self.verdicts.append((what, cl))

    def on_run_done(self, run):
        self.runs.append(run.id)

    def on_stage(self, run):
        self.stages += 1


def _engine(observer, world_size=None):
    sub = Submission(path=Path("/home/user/sub.py"), source=STORM, tree=ast.parse(STORM))
    session = Session(submission={"path": "sub.py", "name": "sub.py", "source": STORM},
                      task={"name": "t", "shape_set": "full"},
                      harness={"name": "gpumode", "stages": STAGES, "budgets": BUDGETS})
    task = load_task(None, "fp8-dual-gemm", small=True)
    if world_size:
        task.world_size = world_size
    settings = Settings(task=task, stages=tuple(STAGES), budgets=BUDGETS, jobs=2, gpu=True)
    return Engine(sub, session, settings, ScriptedRunner(storm_script, delay_s=0.01), observer=observer)


def test_the_session_is_handed_on_once_per_change_with_its_claims_derived_once(monkeypatch):
    derived, asked = [], []
    real = claims.derive
    monkeypatch.setattr(claims, "derive", lambda s: derived.append(1) or real(s))
    heard = Heard()
    eng = _engine(heard)
    real_save = eng.pool.save
    monkeypatch.setattr(eng.pool, "save", lambda: asked.append(1) or real_save())
    eng.diagnose()
    assert eng.errors == [] and eng.session.verdict.status == Status.TIMEOUT
    # every copy handed on differs from the one before it: an unchanged session is never saved again
    datas = [d for d, _ in heard.changes]
    assert len(datas) >= 5 and all(a != b for a, b in zip(datas, datas[1:], strict=False))
    assert len(asked) > len(datas), (len(asked), len(datas))      # the pool asked more often than it changed
    assert eng.concl.version == len(heard.changes)
    # claims derived once per change, none for the early verdict's line (it is given the settled ones)
    assert len(derived) == len(heard.changes)
    assert [w for w, _ in heard.verdicts] == ["verdict", "cause"]
    assert all(any(cl is c for _, c in heard.changes) for _, cl in heard.verdicts)
    # after the diagnosis, with nothing changed, the claims the CLI writes and prints are the last settled ones
    final = eng.claims()
    assert final is heard.changes[-1][1] and len(derived) == len(heard.changes)
    assert final == real(eng.session)
    # a change made after it (the CLI's own note, a stop) is settled again, once
    eng.ended(stopped_by=2)
    assert eng.claims() is not final and len(derived) == len(heard.changes) + 1
    assert eng.session.verdict.note.endswith("conclusions rest only on the runs that finished")
    assert eng.claims() is eng.claims() and len(derived) == len(heard.changes) + 1
    # the observer heard every run and stage through the one interface
    assert sorted(heard.runs) == sorted(r.id for r in eng.session.runs) and heard.stages > 0


def test_a_problem_this_machine_cannot_judge_is_settled_by_the_engine():
    eng = _engine(Heard(), world_size=64)
    assert eng.can_judge() is False
    v = eng.session.verdict
    assert v.status == Status.NEEDS_GPU and "needs 64 GPUs" in v.message and eng.session.complete
    assert claims.one(eng.claims(), "verdict").title == "NEEDS_GPU"
