"""A run's container: what a fresh harness container gives a submission, and nothing from this machine.

Every run (the baseline, each variant, each rerun) gets one directory, shared by the compile steps and
stages of that run, as the harness's steps share their container, and by no other run:

  home/       HOME and the XDG cache, config and data directories; every library keeps its default
              place under it (~/.cache/torch_extensions, ~/.cache/torch, ~/.triton/cache, ~/.nv)
  tmp/        TMPDIR; where the worker can make a private mount namespace, /tmp itself
  shm/        /dev/shm, where it can
  vartmp/     /var/tmp, where it can (and home/ is bound over this machine's real home directory too)
  work/       the working directory: the harness writes a stage's files into it before the stage and
              removes them after it; whatever else the submission writes there stays for the next stage
  .diagnose/  the tool's own files (specs, stacks): never part of the container's state

The child's environment is the harness container's: a short allowlist of this machine's variables (ALLOWED)
and the container's own places; nothing else of this machine's reaches a run. The variables left out or
replaced that change Python, compilers, caches, numerics or allocation are recorded with their values.

Between steps the runner snapshots the container (`snapshot`): what a step added or changed is what that
step wrote, whoever wrote it (the submission, torch, or a compiler it started).
"""
from __future__ import annotations

import getpass
import os
import re
import shutil
import site
import sys
from pathlib import Path

from diagnose.runs.runner import TOOL_ROOT

AREAS = ("home", "tmp", "shm", "vartmp", "work")
TOOL_DIR = ".diagnose"
SPAWNED_DIR = ".diagnose/spawned"   # where the processes a problem's evaluator spawns write their stacks: one of
                                    # two parts of the tool's folder a run may write (the jail keeps the rest read-only)
OUTPUTS_DIR = ".diagnose/outputs"   # the other: where a stage's processes keep the outputs they checked, for the
                                    # verifier (runner/verify.py)
# How a container path reads in a report, and how deep a group of files goes under each area (a build
# directory under ~/.cache/torch_extensions/py312_cu130/NAME is one group; /tmp/torchinductor_USER another).
SHOWN = {"home": "~", "tmp": "/tmp", "shm": "/dev/shm", "vartmp": "/var/tmp", "work": "."}
GROUP_DEPTH = {"home": 4, "tmp": 1, "shm": 1, "vartmp": 1, "work": 1}
MAX_FILES = 20000          # a snapshot stops counting here: a submission may write millions of files

# The harness's container environment is its image's own, plus POPCORN_*: nothing of the competitor's
# machine. A run gets this machine's values of these names only, and the container's places below. What a
# harness container has: a search path, a locale, the CUDA installation it was built with and the devices it
# may use. Three NVLink-multicast switches stay as this machine sets them: a program that uses multicast
# can put shared GPUs out of service.
ALLOWED = {"PATH", "LANG", "LANGUAGE", "TZ", "TERM", "USER", "LOGNAME", "SHELL", "HOSTNAME", "LD_LIBRARY_PATH",
           "CUDA_HOME", "CUDA_PATH", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES",
           "VIRTUAL_ENV", "CONDA_PREFIX", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE",
           "NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS"}
ALLOWED_PREFIXES = ("LC_",)
KEEP_ENV = "DIAGNOSE_KEEP_ENV"     # NAME,NAME: variables the user asks to pass on anyway (named in the report)
# Left out or replaced, these change Python, compilers, caches, numerics or allocation: a report names them
# with their values. Any other variable left out is only counted (it may hold a secret).
_CONSEQUENTIAL = re.compile(
    r"^(PYTHON.*|TORCH.*|PYTORCH.*|TRITON.*|INDUCTOR.*|HELION.*|CUTE.*|CUTLASS.*|NUMBA.*|CUPY.*|CUDA.*|NVCC.*|"
    r"NVIDIA_TF32_OVERRIDE|CUBLAS.*|CUBLASLT.*|CUDNN.*|NCCL.*|OMP_.*|MKL.*|KMP_.*|XDG_.*|.*_CACHE.*|HOME|TMPDIR|"
    r"TMP|TEMP|CC|CXX|CPP|LD|CFLAGS|CXXFLAGS|CPPFLAGS|LDFLAGS|LD_PRELOAD|MAX_JOBS|TORCH_CUDA_ARCH_LIST)$")


class Container:
    """One run's container directory (`root`), made empty."""

    def __init__(self, root: Path):
        self.root = root
        for area in AREAS + (TOOL_DIR, SPAWNED_DIR, OUTPUTS_DIR):
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
        env = {k: v for k, v in base.items() if k not in dropped and k != KEEP_ENV}
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

    def _area(self, area: str) -> int:
        """A descriptor of one of the container's areas, never through a link: what a run (or a process it left
        running) put in the container is the run's, and the tool, which writes there, follows none of it."""
        root = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            return os.open(area, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=root)
        finally:
            os.close(root)

    def place(self, files: dict[str, bytes]) -> None:
        """Write the stage's files into the working directory, as the harness writes its sources: each a new file,
        made where nothing is (a link a lingering process puts back meanwhile makes it try again, never follow)."""
        work = self._area("work")
        try:
            for name, data in files.items():
                _write_new(work, name, data)
        finally:
            os.close(work)

    def cases_file(self, lines: list[str]) -> Path:
        """The stage's cases, where kernelbot's NamedTemporaryFile puts them: a tmpXXXXXXXX in the container's
        /tmp, removed with the stage's files."""
        import secrets
        tmp = self._area("tmp")
        try:
            name = "tmp" + secrets.token_hex(4)
            _write_new(tmp, name, "".join(line + "\n" for line in lines).encode())
        finally:
            os.close(tmp)
        return self.root / "tmp" / name

    def unplace(self, names) -> None:
        """Remove the stage's files again, as the harness does after each stage."""
        for name in names:
            path = Path(name)
            area = "tmp" if path.is_absolute() else "work"      # an absolute path: the cases file
            try:
                fd = self._area(area)
            except OSError:
                continue
            try:
                os.unlink(path.name if path.is_absolute() else name, dir_fd=fd)
            except (FileNotFoundError, IsADirectoryError, PermissionError):
                pass
            finally:
                os.close(fd)


def _write_new(dir_fd: int, name: str, data: bytes) -> None:
    """A new regular file `name` in that directory, whatever was there (a file, a link, a folder) removed first."""
    for _ in range(20):
        try:
            st = os.lstat(name, dir_fd=dir_fd)
        except FileNotFoundError:
            st = None
        if st is not None:
            import stat as st_mod
            if st_mod.S_ISDIR(st.st_mode):
                shutil.rmtree(name, dir_fd=dir_fd)
            else:
                os.unlink(name, dir_fd=dir_fd)
        try:
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=dir_fd)
        except FileExistsError:
            continue            # put back meanwhile: remove it again
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        return
    raise OSError(f"{name}: something kept putting a file back in its place")


# Variables every run gets a value of its own for (the container's places): not "left out", replaced.
REPLACED = {"HOME", "TMPDIR", "TMP", "TEMP", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "TORCH_HOME",
            "PYTORCH_KERNEL_CACHE_PATH", "TORCHINDUCTOR_CACHE_DIR", "TRITON_HOME", "TRITON_CACHE_DIR",
            "CUDA_CACHE_PATH"}


def kept_by_request(base) -> set[str]:
    return {n.strip() for n in (base.get(KEEP_ENV) or "").split(",") if n.strip()}


def _allowed(name: str, asked: set[str]) -> bool:
    return name in ALLOWED or name.startswith(ALLOWED_PREFIXES) or name in asked


def dropped_env(base) -> list[str]:
    """The names of this machine's variables that a run does not get from it."""
    asked = kept_by_request(base)
    return sorted(k for k in base if not _allowed(k, asked) or k in REPLACED)


def left_out(base) -> list[str]:
    """Of those, the ones no run gets any value for."""
    return [k for k in dropped_env(base) if k not in REPLACED]


def env_record(base) -> dict:
    """What a report says about the run's environment: each consequential variable of this machine's that
    was left out or replaced, with its value; how many others were left out; what was kept on request."""
    dropped = dropped_env(base)
    named = [k for k in dropped if _CONSEQUENTIAL.match(k)]
    values = dict(base)
    if "PYTHONPATH" in values:      # diagnose's own folder, where it runs from a checkout: the tool, not state
        rest = [p for p in values["PYTHONPATH"].split(os.pathsep) if p and os.path.realpath(p) != TOOL_ROOT]
        values["PYTHONPATH"] = os.pathsep.join(rest)
        named = [k for k in named if k != "PYTHONPATH" or rest]
    return {"left_out": {k: values[k] for k in named if k not in REPLACED},
            "replaced": {k: base[k] for k in named if k in REPLACED},
            "others_left_out": len([k for k in dropped if k not in named and k != KEEP_ENV]),
            "kept_on_request": sorted(kept_by_request(base) & set(base))}


def changed(before: dict, after: dict) -> dict[str, int]:
    """Files a step added or changed: relative path -> bytes."""
    return {p: v[0] for p, v in after.items() if before.get(p) != v}


def written_groups(before: dict, after: dict) -> dict[str, dict]:
    """What a step wrote, by the group a report shows it in: files, bytes, and the first names."""
    written: dict[str, dict] = {}
    for path, size in changed(before, after).items():
        g = written.setdefault(group_of(path), {"files": 0, "bytes": 0, "names": []})
        g["files"] += 1
        g["bytes"] += size
        if len(g["names"]) < 12:
            g["names"].append(os.path.basename(path))
    return written


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


def child_env(box: Container, gpu: str | None) -> dict:
    """The environment of a run's step: the container's (Container.env), the tool importable, the card pinned."""
    env = box.env(dict(os.environ))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (TOOL_ROOT, env.get("PYTHONPATH")) if p)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = gpu
    return env
