"""`diagnose bisect GOOD BAD`: which of my edits made it time out (or crash, or go wrong)?

Takes two versions of a submission (two files, or one file at two git revisions); writes, under the
output folder: good.py and bad.py as compared, session.json and report.md of the search (every tested
combination as a row), minimal.py (GOOD with the minimal edits) and, in diagnosis/, the usual diagnosis
of minimal.py, so the report says which edits and why. Exit 0: the minimal edits were found and
verified; 1: no minimal set could be verified; 2: bad input (GOOD does not pass, BAD does not fail,
they do not differ); 3: this machine cannot judge them.
"""
from __future__ import annotations

import datetime as dt
import time
from pathlib import Path

from diagnose.cli.options import Shared
from diagnose.cli.wiring import Signals, diagnose_prepared, engine_for, err, out, progress_for, verbosity
from diagnose.errors import BadInput, CannotJudge


def _texts(first: Path, second: Path | None, git: str | None) -> tuple[str, str]:
    if git:
        if second is not None:
            raise BadInput("--git takes one PATH (the file at both revisions), not two files")
        from diagnose.runs.runner.git_show import versions
        return versions(git, first)
    if second is None:
        raise BadInput("bisect needs GOOD and BAD (two files), or --git REV_GOOD..REV_BAD PATH")
    texts = []
    for p in (first, second):
        try:
            texts.append(p.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise BadInput(f"{p}: no such file") from None
        except (IsADirectoryError, UnicodeDecodeError) as e:
            raise BadInput(f"{p}: not a Python source file ({type(e).__name__})") from None
    return texts[0], texts[1]


def bisect(first: Path, second: Path | None, git: str | None, opts: Shared, out_dir: Path | None,
           diagnose_after: bool, quiet: bool, verbose: bool, runner: str | None) -> int:
    from diagnose.cli.files import OutDir, write_atomic
    from diagnose.cli.prepare import Inputs, prepare
    from diagnose.engine.edit_search import EditSearch
    from diagnose.source import ast_diff
    good_text, bad_text = _texts(first, second, git)
    outdir = OutDir(out_dir or Path("reports") / f"bisect-{first.stem}-{dt.datetime.now():%Y%m%d-%H%M%S-%f}",
                    "--out")
    paths = {}
    for name, text in (("good.py", good_text), ("bad.py", bad_text)):
        paths[name] = outdir.path / name
        write_atomic(paths[name], text)
    # both must be submissions we can run: the same checks as `run`; GOOD's is the search's own
    prep = prepare(Inputs(paths["good.py"], opts.but(probes="none")))
    prepare(Inputs(paths["bad.py"], opts.but(probes="none")))
    edits = ast_diff.edits(good_text, bad_text)
    if not edits:
        raise BadInput("GOOD and BAD do not differ in any statement (only in comments or layout)")
    prep.session.command = ["diagnose", "bisect", str(first)] + ([str(second)] if second else []) + \
        (["--git", git] if git else [])
    progress, shown = progress_for(prep, verbosity(quiet, verbose))
    if not quiet:
        _say_edits(edits)
    t0 = time.monotonic()
    with Signals() as sig:
        alone = prep.settings.but(confirm=False)      # prepared with --probes none: no probe, no search
        eng, save = engine_for(prep, alone, sig.stop, outdir, progress, runner_spec=runner)
        try:
            with shown:
                found = EditSearch(eng.pool, edits, eng.concl).run()
        except CannotJudge as e:
            err.print(f"cannot judge here: {e}", markup=False)
            return 3
        except KeyboardInterrupt:
            save(prep.session, eng.claims())
            err.print(f"interrupted: partial report written to {outdir.path}", markup=False)
            return sig.code or 130
        finally:
            eng.runner.close()
    prep.session.diagnosis_s = round(time.monotonic() - t0, 1)
    save(prep.session, eng.claims())
    minimal = found["minimal"]
    out.print(f"{'FOUND' if minimal else 'INCONCLUSIVE'} {prep.session.verdict.message} "
              f"({found['runs']} runs of {found['exhaustive']} subsets)", markup=False)
    for e in (x for x in found["edits"] if x["id"] in minimal):
        out.print(f"  {e['id']} {e['summary']}", markup=False)
    if minimal and diagnose_after and not sig.code:
        code, diag, cl = _diagnose_minimal(outdir, ast_diff.apply(good_text, [x for x in edits if x.id in minimal]),
                                           opts, quiet, verbose, runner)
        from diagnose.analysis.audit import claims
        top = claims.by_kind(cl, "cause")
        prep.session.edit_bisect["diagnosis"] = {
            "report": "diagnosis/report.md", "exit": code, "verdict": str(diag.verdict.status),
            "top_cause": top[0].title if top else None, "fix": diag.fix.toggle if diag.fix else None}
        prep.session.notes.append(f"the diagnosis of GOOD with the minimal edits: diagnosis/report.md (exit {code})")
        save(prep.session, eng.claims())
    out.print(f"  report: {outdir.path / 'report.md'}", markup=False)
    return sig.code or (0 if minimal else 1)


def _say_edits(edits) -> None:
    err.print(f"{len(edits)} edit(s) between GOOD and BAD; every subset would be {2 ** len(edits)} runs")
    for e in edits:
        err.print(f"  {e.id} {e.summary()}", markup=False)


def _diagnose_minimal(outdir, source: str, opts: Shared, quiet: bool, verbose: bool, runner: str | None):
    """The usual diagnosis of GOOD plus the minimal edits, so the report says why they fail."""
    from diagnose.cli.exits import exit_code
    from diagnose.cli.files import OutDir, write_atomic
    from diagnose.cli.prepare import Inputs, prepare
    path = outdir.path / "minimal.py"
    write_atomic(path, source)
    prep = prepare(Inputs(path, opts))
    eng, code = diagnose_prepared(prep, OutDir(outdir.path / "diagnosis", "--out"), quiet, verbose, runner)
    return code or exit_code(prep.session), prep.session, eng.claims()
