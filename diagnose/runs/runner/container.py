"""A run's container: what a fresh harness container gives a submission, and nothing from this machine.

Every run (the baseline, each variant, each rerun) gets one directory, shared by the compile steps and
stages of that run, as the harness's steps share their container, and by no other run:

  home/       HOME and the XDG cache, config and data directories; every library keeps its default
              place under it (~/.cache/torch_extensions, ~/.cache/torch, ~/.triton/cache, ~/.nv)
  tmp/        TMPDIR; where the worker can make a private mount namespace, /tmp itself
  shm/        /dev/shm, where it can
  work/       the working directory: the harness writes a stage's files into it before the stage and
              removes them after it; whatever else the submission writes there stays for the next stage
  .diagnose/  the tool's own files (specs, stacks): never part of the container's state

The child's environment is this machine's, less every variable that points state somewhere else or
changes how torch, Inductor, Triton or Helion compile (the harness sets none of them); the names that
were left out are recorded, never their values.

Between steps the runner snapshots the container (`snapshot`): what a step added or changed is what that
step wrote, whoever wrote it (the submission, torch, or a compiler it started).
"""
from __future__ import annotations

import getpass
import os
import shutil
import site
import sys
from pathlib import Path

AREAS = ("home", "tmp", "shm", "work")
TOOL_DIR = ".diagnose"
# How a container path reads in a report, and how deep a group of files goes under each area (a build
# directory under ~/.cache/torch_extensions/py312_cu130/NAME is one group; /tmp/torchinductor_USER another).
SHOWN = {"home": "~", "tmp": "/tmp", "shm": "/dev/shm", "work": "."}
GROUP_DEPTH = {"home": 4, "tmp": 1, "shm": 1, "work": 1}
MAX_FILES = 20000          # a snapshot stops counting here: a submission may write millions of files

# Variables a harness container does not have: they point state elsewhere or change how code compiles.
DROP_NAMES = {"HOME", "TMPDIR", "TMP", "TEMP", "TORCH_HOME", "TORCH_EXTENSIONS_DIR", "PYTORCH_KERNEL_CACHE_PATH",
              "CUDA_CACHE_PATH", "CUDA_CACHE_DISABLE", "CUDA_CACHE_MAXSIZE", "PYTHONSTARTUP", "PYTHONUSERBASE",
              "PYTHONHOME", "TORCH_LOGS", "TORCH_TRACE", "TORCH_CUDA_ARCH_LIST", "MAX_JOBS"}
DROP_PREFIXES = ("XDG_", "TORCHINDUCTOR_", "TORCHDYNAMO_", "TORCH_COMPILE_", "TRITON_", "HELION_", "INDUCTOR_")


class Container:
    """One run's container directory (`root`), made empty."""

    def __init__(self, root: Path):
        self.root = root
        for area in AREAS + (TOOL_DIR,):
            (root / area).mkdir(parents=True, exist_ok=True)
        for sub in (".cache", ".config", ".local/share"):
            (root / "home" / sub).mkdir(parents=True, exist_ok=True)

    @property
    def work(self) -> Path:
        return self.root / "work"

    @property
    def tool(self) -> Path:
        return self.root / TOOL_DIR

    def env(self, base: dict[str, str]) -> dict[str, str]:
        """The child's environment: this machine's, less `dropped_env`, with the container's places."""
        dropped = set(dropped_env(base))
        env = {k: v for k, v in base.items() if k not in dropped}
        home, tmp = self.root / "home", self.root / "tmp"
        user = _user()
        env.update({
            "HOME": str(home), "TMPDIR": str(tmp), "TMP": str(tmp), "TEMP": str(tmp),
            "XDG_CACHE_HOME": str(home / ".cache"), "XDG_CONFIG_HOME": str(home / ".config"),
            "XDG_DATA_HOME": str(home / ".local/share"),
            # the libraries' own defaults, written out so that none can fall back to this machine's. Not
            # TORCH_EXTENSIONS_DIR: set, it changes the layout (no py312_cu130/ level); unset, torch builds
            # under XDG_CACHE_HOME, in the container, exactly where a harness container has it.
            "TORCH_HOME": str(home / ".cache/torch"),
            "PYTORCH_KERNEL_CACHE_PATH": str(home / ".cache/torch/kernels"),
            "TORCHINDUCTOR_CACHE_DIR": str(tmp / f"torchinductor_{user}"),
            "TRITON_HOME": str(home), "TRITON_CACHE_DIR": str(home / ".triton/cache"),
            "CUDA_CACHE_PATH": str(home / ".nv/ComputeCache"),
        })
        # A package installed with `pip install --user` lives under the user's own HOME: it is part of the
        # Python installation the harness would have, not state, so it stays importable.
        user_site = site.getusersitepackages() if site.ENABLE_USER_SITE else None
        extra = [p for p in (user_site,) if p and os.path.isdir(p) and p in sys.path]
        if extra:
            env["PYTHONPATH"] = os.pathsep.join([*filter(None, [env.get("PYTHONPATH")]), *extra])
        return env

    def snapshot(self) -> dict[str, tuple[int, int]]:
        """Every regular file in the container's areas: relative path -> (bytes, mtime in ns)."""
        out: dict[str, tuple[int, int]] = {}
        for area in AREAS:
            for dirpath, dirnames, filenames in os.walk(self.root / area):
                rel_dir = os.path.relpath(dirpath, self.root)
                for name in filenames:
                    try:
                        st = os.lstat(os.path.join(dirpath, name))
                    except OSError:
                        continue
                    if not _is_regular(st.st_mode):
                        continue
                    out[os.path.join(rel_dir, name)] = (st.st_size, st.st_mtime_ns)
                    if len(out) >= MAX_FILES:
                        return out
                dirnames.sort()
        return out

    def fill_from(self, other: "Container") -> None:
        """This (empty) container takes another one's whole state: a warm container."""
        for area in AREAS:
            shutil.copytree(other.root / area, self.root / area, symlinks=True, dirs_exist_ok=True,
                            ignore_dangling_symlinks=True)

    def place(self, files: dict[str, bytes]) -> None:
        """Write the stage's files into the working directory, as the harness writes its sources."""
        for name, data in files.items():
            path = self.work / name
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            elif path.exists() or path.is_symlink():
                path.unlink()
            path.write_bytes(data)

    def unplace(self, names) -> None:
        """Remove the stage's files again, as the harness does after each stage."""
        for name in names:
            try:
                (self.work / name).unlink()
            except (FileNotFoundError, IsADirectoryError, PermissionError):
                pass


# Variables every run gets a value of its own for (the container's places): not "left out", replaced.
REPLACED = {"HOME", "TMPDIR", "TMP", "TEMP", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "TORCH_HOME",
            "PYTORCH_KERNEL_CACHE_PATH", "TORCHINDUCTOR_CACHE_DIR", "TRITON_HOME", "TRITON_CACHE_DIR",
            "CUDA_CACHE_PATH"}


def dropped_env(base) -> list[str]:
    """The names of this machine's variables that a run does not get (their values are never recorded)."""
    return sorted(k for k in base if k in DROP_NAMES or k.startswith(DROP_PREFIXES))


def left_out(base) -> list[str]:
    """Of those, the ones no run gets any value for: what a report names."""
    return [k for k in dropped_env(base) if k not in REPLACED]


def changed(before: dict, after: dict) -> dict[str, int]:
    """Files a step added or changed: relative path -> bytes."""
    return {p: v[0] for p, v in after.items() if before.get(p) != v}


def group_of(rel: str) -> str:
    """The group a container path belongs to, as a report shows it: '~/.cache/torch_extensions/py312/ext'."""
    parts = Path(rel).parts
    if not parts or parts[0] not in SHOWN:
        return rel
    keep = parts[1:1 + GROUP_DEPTH[parts[0]]]
    shown = "/".join((SHOWN[parts[0]], *keep))
    return shown + ("/" if len(parts) - 1 > len(keep) else "")


def _is_regular(mode: int) -> bool:
    import stat
    return stat.S_ISREG(mode)


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())
