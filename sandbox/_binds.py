"""What the sandbox sees of the host file system: system dirs read-only, plus the
interpreter a command needs (a pyenv/venv Python, a Node under /opt) - never $HOME."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

SYSTEM_DIRS = ("/usr", "/etc")
TOP_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
SANDBOX_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def is_system(path: str | Path) -> bool:
    p = str(path)
    return any(p == d or p.startswith(d + "/") for d in (*SYSTEM_DIRS, *TOP_LINKS))


def top_level_args() -> list[str]:
    """Mirror merged-/usr symlinks (or bind the real dirs) for /bin, /lib, …"""
    args: list[str] = []
    for d in SYSTEM_DIRS:
        args += ["--ro-bind", d, d]
    for d in TOP_LINKS:
        if os.path.islink(d):
            args += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            args += ["--ro-bind", d, d]
    return args


def program_binds(program: str, path_env: str | None = None) -> list[Path]:
    """Prefixes to bind read-only so ``program`` can run inside: its install prefix and,
    for a symlinked one (a venv's python), the prefix the link resolves to."""
    found = program if "/" in program else shutil.which(program, path=path_env or SANDBOX_PATH)
    if not found:
        found = shutil.which(program)
    if not found:
        return []
    out: list[Path] = []
    for candidate in (Path(os.path.abspath(found)), Path(os.path.realpath(found))):
        if is_system(candidate):
            continue
        prefix = candidate.parent.parent if candidate.parent.name == "bin" else candidate.parent
        if str(prefix) in ("/", "") or prefix in out:
            continue
        out.append(prefix)
    return out


def ancestors_args(targets: list[str], made: set[str]) -> list[str]:
    """``--perms 0755 --dir`` for every parent of a mount point, so a host dir's 0700
    parent (``/root``, ``/tmp/pytest-of-root``) does not make the mount unreachable."""
    args: list[str] = []
    for target in targets:
        parts = Path(target).parts
        for i in range(2, len(parts)):
            parent = str(Path(*parts[:i]))
            if parent in made or is_system(parent) or parent in ("/tmp", "/var/tmp"):
                continue
            made.add(parent)
            args += ["--perms", "0755", "--dir", parent]
    return args
