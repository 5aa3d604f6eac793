"""What this machine lends a run, read-only: the places its allow-list file system (runs/rootfs.py) binds beside
the system's own.

A step runs the interpreter that runs the tool, so the run gets that interpreter whole, wherever it lives (a venv
under the home directory or /tmp, pipx's and uv's tool venvs, a `--user` site, a conda or pyenv prefix): its
prefixes (a venv's pyvenv.cfg sits there), every sys.path entry and .pth target as this process has them, and
the folders an editable install's finder maps packages to. The tool itself is its two packages, never the folder
around them (a checkout's reports, tests and a user's other files stay out). Then what programs the run starts
need: the folders on PATH and LD_LIBRARY_PATH, CUDA_HOME, and the library folders ld.so.conf names.
"""
from __future__ import annotations

import ast
import glob
import os
import site
import sys

from diagnose.runs.runner import TOOL_ROOT

TOOL_PACKAGES = ("diagnose", "probes")


def lent_paths(environ=None) -> list[str]:
    """The places a run reads from this machine (each an existing file or folder), the tool's as its packages."""
    env = os.environ if environ is None else environ
    home = os.path.realpath(os.path.expanduser("~"))
    found = [sys.executable, sys.prefix, sys.base_prefix, sys.exec_prefix, *python_path(), *_editable_targets(),
             *_linked_entries(python_path()),
             env.get("CUDA_HOME"), env.get("CUDA_PATH"), *_split(env.get("LD_LIBRARY_PATH")), *_ld_so_conf(),
             *_split(env.get("PATH")), *_prefixes(_split(env.get("PATH")), home)]
    tool = os.path.realpath(TOOL_ROOT)
    out: list[str] = []
    for p in found:
        if not p or not os.path.exists(p):
            continue
        real = os.path.realpath(p)
        if real in ("/", home) or real == tool and not _is_site(real):
            continue          # never the whole machine, the whole home, or the checkout around the tool
        out.append(os.path.abspath(p))
    out += [os.path.join(TOOL_ROOT, pkg) for pkg in TOOL_PACKAGES if os.path.isdir(os.path.join(TOOL_ROOT, pkg))]
    return list(dict.fromkeys(out))


def python_path() -> list[str]:
    """sys.path as a fresh interpreter of this installation has it, less the folder the tool was started in."""
    paths = [p for p in sys.path[1:] if p]
    if site.ENABLE_USER_SITE:
        paths.append(site.getusersitepackages())
    return paths


def _editable_targets() -> list[str]:
    """The folders that editable installs' finders (setuptools' __editable___*_finder.py) map packages to: an
    import reaches them through the finder, never through sys.path."""
    out = []
    for d in {p for p in sys.path if p and os.path.isdir(p)}:
        for finder in glob.glob(os.path.join(d, "__editable___*_finder.py")):
            out += _mapping(finder)
    return out


def _linked_entries(paths: list[str]) -> list[str]:
    """What the links in an import folder point to: a package linked in from elsewhere (uv's symlink link mode
    links each one from its cache) imports only where the run can follow the link."""
    out = []
    for d in paths:
        try:
            entries = list(os.scandir(d))
        except OSError:
            continue
        out += [os.path.realpath(e.path) for e in entries if e.is_symlink()]
    return out


def _mapping(path: str) -> list[str]:
    try:
        with open(path, encoding="utf-8") as fh:
            tree = ast.parse(fh.read())
    except (OSError, SyntaxError, ValueError):
        return []
    out = []
    for node in tree.body:
        target = node.target if isinstance(node, ast.AnnAssign) else (node.targets[0] if isinstance(node, ast.Assign)
                                                                       else None)
        if isinstance(target, ast.Name) and target.id in ("MAPPING", "NAMESPACES") and node.value is not None:
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                continue
            for v in value.values():
                out += v if isinstance(v, list) else [v]
    return [p for p in out if isinstance(p, str)]


def _ld_so_conf() -> list[str]:
    out = []
    for conf in ["/etc/ld.so.conf", *sorted(glob.glob("/etc/ld.so.conf.d/*.conf"))]:
        try:
            with open(conf) as fh:
                out += [line.strip() for line in fh if line.strip().startswith("/")]
        except OSError:
            continue
    return out


def _prefixes(path_dirs: list[str], home: str) -> list[str]:
    """The installation around each bin/ folder on PATH outside the home directory, where it is one (a lib/ or
    libexec/ beside it: a compiler in /opt/gcc/bin runs its cc1plus from /opt/gcc/libexec): a program on PATH that
    cannot find its own files fails the build it runs. Any other folder around a bin/ stays out."""
    out = []
    for d in path_dirs:
        real = os.path.realpath(d)
        top = os.path.dirname(real)
        installed = any(os.path.isdir(os.path.join(top, d)) for d in ("lib", "lib64", "libexec"))
        if installed and os.path.basename(real) in ("bin", "sbin") and top not in ("/", "/usr", "/usr/local") \
                and not (top + "/").startswith(home.rstrip("/") + "/") and top != home:
            out.append(top)
    return out


def _split(value: str | None) -> list[str]:
    return [p for p in (value or "").split(os.pathsep) if p]


def _is_site(path: str) -> bool:
    return os.path.basename(path) in ("site-packages", "dist-packages")
