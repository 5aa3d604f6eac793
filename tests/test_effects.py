"""A toggle's effect is measured, not assumed. Sessions saved by the version before this measure (real CPU runs of
the fixtures in tests/fixtures/trust) each cleared a suspect the runs do not clear; the audit now catches each one,
and concluding again on the same runs says what they show instead. Plus the diff arithmetic the measure rests on,
and hand-built sessions for a toggle that acts where another probe owns the statement."""
import json
from pathlib import Path

import pytest

from diagnose.analysis.audit.audit import audit
from diagnose.analysis.causes import bisector
from diagnose.analysis.effects.effect_lines import line_map
from diagnose.analysis.effects.effects import effect, one_suspect
from diagnose.session import Session
from diagnose.source.edits import unified_diff
from tests.builders import SOURCE, run, session

SESSIONS = Path(__file__).resolve().parent / "fixtures" / "trust" / "sessions"


def saved(name: str) -> Session:
    return Session.from_dict(json.loads((SESSIONS / f"{name}.json").read_text()))


def test_the_line_map_follows_kept_changed_and_moved_lines():
    before = "a = 1\nfor _ in range(10):\n    f()\nwork()\ndef k():\n    return 1\n"
    after = "a = 1\nfor _ in range(1):\n    f()\n\ndef k():\n    work()\n    return 1\n"
    lm = line_map(unified_diff(before, after), len(before.splitlines()))
    assert lm.same[1] == 1 and lm.same[3] == 3           # untouched lines keep their place
    assert lm.back(2) == 2 and lm.forward(2) == 2        # the loop header, edited in place
    assert lm.back(6) == 4                               # work() moved into k(), found by its text
    assert lm.back(7) == 6 and 4 in lm.deleted


@pytest.mark.parametrize("name,probe,said", [
    # README command 1: the import_init toggle found nothing to move, so its variant was the submission itself
    ("identical", "import_init", "the variant is the submission itself"),
    # 5 s of import work deferred into the first call, where the stage still timed out
    ("moved", "import_init", "only moved"),
    # the baseline timed out in a 15 s warmup before the search at each new shape ever ran
    ("not_reached", "search", "not reached"),
])
def test_a_clearing_the_runs_cannot_bear_is_caught_and_no_longer_made(name, probe, said):
    s = saved(name)
    assert probe in {c.probe for c in s.cleared}          # what the earlier version concluded
    found = [f for f in audit(s) if f.rule == "cleared-effect" and f.claim == f"{probe} is not the cause"]
    assert found and said in found[0].missing, [str(f) for f in audit(s)]
    bisector.conclude(s)                                   # the same runs, concluded again
    assert probe not in {c.probe for c in s.cleared}
    why = next(i.reason for i in s.inconclusive if i.probe == probe)
    assert said in why and "nothing shows" in why
    assert not [f for f in audit(s) if f.rule == "cleared-effect"]


def test_moved_work_is_measured_where_it_went():
    s = saved("moved")
    e = effect(s, s.baseline, s.run("r1"))
    assert e.reached and e.moved and not e.acted
    assert "import" in e.what and "moved: first_call" in e.what


def test_one_loop_taken_by_two_probes_is_one_suspect_not_an_interaction():
    """The warmup probe's cut and the search probe's pin act on one statement (L8): one suspect, named by the
    search, and never 'needs all of' the two."""
    edit = unified_diff(SOURCE, SOURCE.replace("range(10)", "range(1)"))
    runs = [run("r0", outcome="timeout", fail_at="test", site={"file": "/c/submission.py", "line": 8}),
            run("r1", "warmup", "warmup N->1", variant=edit),
            run("r2", "search", "search results pinned", variant=edit)]
    for st in runs[2].stages:      # pinned, the loop at L8 finds its answer and no longer runs
        st.samples["first_call:256x512x256"]["stack"]["8"] = 0
    s = session(runs)
    assert one_suspect(s, runs[1:]) == {"warmup": "search"}
    bisector.minimal_set(s, ["warmup", "search"], fails=lambda keep: bool(keep))
    bisector.conclude(s)
    assert [c.suspects for c in s.causes if c.changes_outcome] == [["search"]]
    why = next(i.reason for i in s.inconclusive if i.probe == "warmup")
    assert "same statement as search" in why and "never an interaction" in why
    assert audit(s) == [], [str(f) for f in audit(s)]


def test_a_fix_that_also_takes_other_work_away_says_so_and_is_not_high():
    """The warmup toggle's run also lost the time of another loop (L8 is the suspect's; a second loop at import is
    not): the cause says what else went, and is not credited to the warmup alone with high confidence."""
    src = SOURCE + "\nfor _ in range(18):\n    f(None)\n"
    edit = unified_diff(src, src.replace("range(10)", "range(1)").replace("range(18)", "range(1)"))
    base = run("r0", outcome="timeout", fail_at="test", site={"file": "/c/submission.py", "line": 8})
    fix = run("r1", "warmup", "warmup N->1", variant=edit)
    for st in base.stages[:1]:
        st.samples["submission_import"] = {"stack": {"11": 500}}
    s = session([base, fix])
    s.submission["source"] = src
    bisector.minimal_set(s, ["warmup"], fails=None)
    bisector.conclude(s)
    cause = s.causes[0]
    assert cause.suspects == ["warmup"] and "also took away" in cause.narrative and "L10" in cause.narrative
    assert str(cause.confidence) != "high"


def test_a_cause_says_what_its_runs_show_when_no_single_toggle_fixed_it():
    """The warmup and the search each fail the budget alone: the earlier version said "removing it gets past it"
    on the baseline alone. Concluded again, the cause cites the runs: only without both did it pass, and the run
    without the warmup alone still timed out."""
    s = saved("not_reached")
    assert [f.rule for f in audit(s) if f.claim == "cause 1"] == ["cause-fixes"]
    bisector.conclude(s)
    cause = s.causes[0]
    without_warmup = next(r.id for r in s.runs if r.toggle == "warmup N->1")
    assert "removing it gets past it" not in cause.narrative
    assert "taken away too it gets past it" in cause.narrative and f"{without_warmup} still timeout" in cause.narrative
    assert len(cause.evidence) > 1 and audit(s) == [], [str(f) for f in audit(s)]


def test_one_loop_taken_by_two_probes_in_a_real_run_is_one_suspect():
    """A search written as `while idx < len(_CHUNKS)`: the earlier version's warmup probe cut the same loop, and
    'warmup is not the cause' followed. It is the search, under another name."""
    s = saved("two_probes_one_loop")
    assert {f.rule for f in audit(s) if f.claim == "warmup is not the cause"} >= {"one-suspect", "cleared-effect"}
    bisector.conclude(s)
    assert "warmup" not in {c.probe for c in s.cleared}
    assert "same statement as search" in next(i.reason for i in s.inconclusive if i.probe == "warmup")
    assert all(c.suspects != ["warmup", "search"] for c in s.causes)


def test_a_fix_that_also_cut_an_import_time_self_test_says_so():
    """The warmup probe's N->1 also cut an 18-step self-test at import (L24): the earlier version credited the
    warmup alone and said nothing of it."""
    s = saved("outside_work")
    assert any(f.rule == "fix-credit" and "L24" in f.missing for f in audit(s))
    bisector.conclude(s)
    cause = s.causes[0]
    assert cause.suspects == ["warmup"] and "also took away L24, which ran in import" in cause.narrative
    assert str(cause.confidence) != "high" and audit(s) == [], [str(f) for f in audit(s)]


def test_a_pin_that_passes_by_skipping_a_warmup_under_the_same_guard_is_not_the_searchs_credit():
    """A warmup (15 s) and a search (15 s) under one `if key not in _best:`, budget 12: the baseline ran out in
    the warmup and never reached the search. Pinning `_best` passes, because it skips the warmup too: the search
    is not credited with it (an earlier build of this measure took a pass without line samples as unmeasured)."""
    s = saved("pin_under_shared_guard")
    bisector.conclude(s)
    assert not any("search" in c.suspects for c in s.causes)
    why = next(i.reason for i in s.inconclusive if i.probe == "search")
    assert "got past the failure, but not reached" in why
    assert audit(s) == [], [str(f) for f in audit(s)]


def test_a_warmup_cut_that_still_runs_out_at_a_later_shape_is_neither_unchanged_nor_cleared():
    """Three 6 s warmup steps per new shape, budget 13: N->1 finished the first shape the baseline never did,
    and ran out in the same loop at the second. The toggle acted; it is not 'not the cause', and not 'ran
    unchanged' either."""
    s = saved("later_shape")
    r1 = next(r for r in s.runs if r.toggle == "warmup N->1")
    e = effect(s, s.baseline, r1)
    assert e.acted and "got past it there" in e.what
    bisector.conclude(s)
    assert "warmup" not in {c.probe for c in s.cleared}
    why = next(i.reason for i in s.inconclusive if i.probe == "warmup")
    assert "only later" in why and "ran unchanged" not in why
