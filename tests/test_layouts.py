"""Every Python layout a user installs the tool into works: the run's file system is an allow-list
(runs/rootfs.py) that lends the interpreter that runs the tool whole, wherever it lives. Each case builds one layout
under a fake home directory (or under /tmp), reaches torch and the tool's other packages the way that layout does
(a .pth file in its site directory, as an editable or injected install leaves), and runs README command 1 through
it: the warmup verdict, cause and fix must come back. Before the allow-list, a venv under the home directory or
/tmp lost its pyvenv.cfg inside every run, and every worker died with "No module named 'torch'".

The layouts: a venv under ~ (most users'), a venv under /tmp, pipx's and uv's tool venvs (their console script
reached through a link in ~/.local/bin), a `--user` site, and a pyenv-style prefix under ~ reached through a link
(as pyenv's version aliases are).

The venv under ~ runs the README's first command exactly as a newcomer does (from a folder holding `examples/`,
no --out), so that one run also shows the README's sample lines (tests/test_readme.py's matching): one diagnosis
where two tests ran the same one.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, ROOT
from tests.test_readme import first_command, sample_lines, unmatched

pytestmark = pytest.mark.e2e

PY = f"python{sys.version_info.major}.{sys.version_info.minor}"
SITE = sysconfig.get_paths()["purelib"]          # where this suite's torch, typer, rich... are installed
README_1 = [str(EXAMPLES / "warmup_timeout.py"), "--stages", "test", "--budget", "20"]


def _pth(site_dir: Path) -> None:
    """torch and the tool's dependencies from this suite's site directory, the tool from this checkout: the lines a
    .pth file holds for an injected or editable install."""
    site_dir.mkdir(parents=True, exist_ok=True)
    (site_dir / "reach.pth").write_text(f"{SITE}\n{ROOT}\n")


def _venv(path: Path) -> Path:
    subprocess.run([sys.executable if sys.prefix == sys.base_prefix else _base_python(), "-m", "venv",
                    "--without-pip", str(path)], check=True, capture_output=True)
    _pth(path / "lib" / PY / "site-packages")
    return path / "bin" / "python"


def _base_python() -> str:
    return os.path.join(sys.base_prefix, "bin", PY)


def _console_script(venv: Path, link_dir: Path) -> Path:
    """The `diagnose` script pipx and uv put in the tool's venv, and their link to it in ~/.local/bin."""
    script = venv / "bin" / "diagnose"
    script.write_text(f"#!{venv}/bin/python\nimport sys\nfrom diagnose.cli.app import main\nsys.exit(main())\n")
    script.chmod(0o755)
    link_dir.mkdir(parents=True, exist_ok=True)
    (link_dir / "diagnose").symlink_to(script)
    return link_dir / "diagnose"


def _layout(name: str, home: Path, tmp_root: Path) -> list[str]:
    """The command that runs the tool in that layout."""
    if name == "venv_in_home":
        return [str(_venv(home / "venvs" / "x")), "-m", "diagnose"]
    if name == "venv_in_tmp":
        return [str(_venv(tmp_root / "venv")), "-m", "diagnose"]
    if name == "pipx":
        venv = home / ".local" / "share" / "pipx" / "venvs" / "diagnose"
        _venv(venv)
        return [str(_console_script(venv, home / ".local" / "bin"))]
    if name == "uv_tool":
        venv = home / ".local" / "share" / "uv" / "tools" / "diagnose"
        _venv(venv)
        return [str(_console_script(venv, home / ".local" / "bin"))]
    if name == "user_site":
        _pth(home / ".local" / "lib" / PY / "site-packages")
        return [_base_python(), "-m", "diagnose"]
    if name == "prefix_in_home":
        link = home / ".pyenv" / "versions" / "3"
        link.parent.mkdir(parents=True)
        link.symlink_to(sys.base_prefix)
        _pth(home / ".local" / "lib" / PY / "site-packages")       # its packages: the user's site, under ~
        return [str(link / "bin" / PY), "-m", "diagnose"]
    raise ValueError(name)


LAYOUTS = ("venv_in_home", "venv_in_tmp", "pipx", "uv_tool", "user_site", "prefix_in_home")


def _diagnose(name: str, base: Path) -> tuple[str, subprocess.CompletedProcess, Path]:
    home, out, cwd = base / name / "home", base / name / "out", base / name / "cwd"
    home.mkdir(parents=True)
    tmp_root = Path(tempfile.mkdtemp(prefix=f"diagnose-layout-{name}-", dir="/tmp"))
    try:
        cmd = _layout(name, home, tmp_root)
        # the README's command, once exactly, from a folder holding examples/ and with no --out, as the README runs
        # it; the other layouts with the warmup probe alone, which names the same cause and fix in a third of the runs
        if name == "venv_in_home":
            shutil.copytree(EXAMPLES, cwd / "examples")
            args = first_command()
        else:
            cwd.mkdir()
            args = ["run", *README_1, "--probes", "warmup", "--out", str(out)]
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
        env.update(HOME=str(home), PATH=f"{home / '.local' / 'bin'}:{env.get('PATH', '')}")
        res = subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=900, env=env, cwd=str(cwd))
        if name == "venv_in_home":      # without --out: reports/<stem>-<time> under the folder it ran from
            out = next(cwd.glob("reports/warmup_timeout-*"), cwd / "reports" / "none")
        return name, res, out
    finally:
        shutil.rmtree(tmp_root, ignore_errors=True)


@pytest.fixture(scope="module")
def diagnosed(tmp_path_factory):
    base = tmp_path_factory.mktemp("layouts")
    # The README's command first, with nothing of this fixture beside it: the README's sample names its runs (r8),
    # and a busier machine's solo reruns would number them otherwise. Then the other five (the warmup probe alone),
    # three at a time: each mostly waits on the warmup's sleeps.
    first = _diagnose(LAYOUTS[0], base)
    with ThreadPoolExecutor(max_workers=3) as pool:
        done = [first, *pool.map(lambda n: _diagnose(n, base), LAYOUTS[1:])]
    return {name: (res, out) for name, res, out in done}


# its tests share one xdist_group: under --dist loadgroup one worker runs them all, so the fixture is built once
@pytest.mark.xdist_group("layouts")
@pytest.mark.parametrize("layout", LAYOUTS)
def test_readme_command_1_finds_the_warmup_in_every_layout(diagnosed, layout):
    res, out = diagnosed[layout]
    text = res.stdout + res.stderr
    assert "No module named" not in text, text[-3000:]
    assert res.returncode == 1, text[-3000:]
    assert "TIMEOUT exceeded the 20 s budget" in res.stdout, text[-3000:]
    assert "1. warmup (confidence high)" in res.stdout and "fix: warmup N->1" in res.stdout, text[-3000:]
    assert (out / "report.md").exists()


@pytest.mark.xdist_group("layouts")
def test_the_readme_shows_what_its_first_command_prints(diagnosed):
    """The README's first command, run as a newcomer runs it (the venv under ~ above), prints each line of the
    README's sample block in order (tests/test_readme.py), and writes its report where no --out puts it."""
    res, out = diagnosed["venv_in_home"]
    assert res.returncode == 1, res.stdout + res.stderr        # as the README says: a problem was found
    assert unmatched(sample_lines(), res.stdout.splitlines()) == [], res.stdout
    assert (out / "report.md").exists() and out.parent.name == "reports", out
