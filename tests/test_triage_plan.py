"""What a triage decides before its cluster starts (diagnose/triage/): the cards a cluster made here spreads over,
which items a resume keeps, each command's hard limit, and the key that changes with every option that changes
the answer. Pure: no cluster, no process."""
from __future__ import annotations

import pytest

from diagnose.cli.options import Shared
from diagnose.errors import BadInput
from diagnose.triage.controller import cards_for
from diagnose.triage.inputs import items
from diagnose.triage.ledger import resume
from diagnose.triage.rows import Row
from diagnose.triage.task import hard_limit


def test_the_cards_are_those_visible_or_those_picked_and_never_one_for_two_workers():
    assert cards_for(["3", "5"], [], None, None) == ["3", "5"]
    assert cards_for(["3", "5"], ["1"], None, None) == ["5"]          # --gpus 1: the second visible card
    assert cards_for(["3", "5"], ["0"], "tcp://elsewhere:8786", 4) == []   # a cluster elsewhere: its own cards
    assert cards_for([], [], None, 3) == []                          # no GPU: CPU workers
    with pytest.raises(BadInput, match="--workers 3: more than the 2 GPU"):
        cards_for(["3", "5"], [], None, 3)


def test_a_resume_keeps_what_finished_and_runs_the_rest():
    todo = [{"key": k} for k in "abcd"]
    done = {"a": Row(key="a", status="crash", exit_code=1), "b": Row(key="b", status="lost"),
            "c": Row(key="c", status="inconclusive", exit_code=130), "z": Row(key="z", status="ok")}
    kept, rest = resume(todo, done)
    assert kept == [done["a"]] and [i["key"] for i in rest] == ["b", "c", "d"]


def test_the_hard_limit_is_the_stages_budgets_and_a_margin():
    assert hard_limit(30.0, None, "check") == 3 * (30 + 120) + 120
    assert hard_limit(None, 60.0, "run") == 8 * (3 * (600 + 60) + 120)


def test_every_option_that_changes_the_answer_changes_the_key(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.py").write_text("def custom_kernel(data):\n    return data\n")

    def key(depth: str, opts: Shared) -> str:
        flags = {"here": opts.argv(), "whole": opts.argv()}
        return items([tmp_path / "a.py"], depth, opts.answer(), tmp_path / "o", "o", flags)[0]["key"]
    base = key("check", Shared())
    changed = [key("run", Shared()), key("check", Shared(budget=30.0)), key("check", Shared(small=True)),
               key("check", Shared(task="identity")), key("check", Shared(compile_budget=10.0)),
               key("run", Shared(probes="none")), key("run", Shared(stages="test"))]
    assert base not in changed and len(set(changed)) == len(changed)
    # where it runs is not the answer: another card, or more runs at once, is the same row
    assert key("check", Shared(gpus="0", jobs=4)) == base
