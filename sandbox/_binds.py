"""What the sandbox sees of the host file system: system dirs read-only, plus the files the
command needs to run - never a home dir, Reef's state dir or a secret dir.

The guarantee (see docs/sandbox.md, "What the command sees"): besides the system dirs, the
work dir, the sandbox HOME and what the caller names in ``ro_binds``, only the program's
own files are visible:

- a program outside every home dir keeps the old rule: its install prefix (``P`` for
  ``P/bin/tool``, else the program's dir), unless that prefix holds a home, the state dir
  or a secret dir;
- a program under a home dir (``~/.local/bin/claude``, ``~/bin/tool``, a venv or a Node
  install in ``~``) gets its install prefix only when that is a self-contained install
  (a venv, a Python or Node install, an npm prefix) holding no protected dir; otherwise
  only its own file (every hop of its symlink chain) is bound at its own path;
- a script's interpreter (``#!/path`` or ``#!/usr/bin/env NAME``) is handled the same way.

Nothing that is, holds or lies in the state dir or a secret dir is ever bound; where that
would be needed (an explicit bind, the work dir, or the program itself) the run is refused
with a ``SandboxError`` that names the fix.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from reef_cli.core.errors import SandboxError

SYSTEM_DIRS = ("/usr", "/etc")
TOP_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
SANDBOX_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SECRET_DIRS_ENV = "REEF_SANDBOX_SECRET_DIRS"
# Credential stores under each home dir: refused even as an explicit ro_bind.
HOME_SECRETS = (
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".kube",
    ".docker",
    ".config/gcloud",
    ".config/gh",
    ".config/reef",
    ".password-store",
    ".netrc",
    ".git-credentials",
    ".pypirc",
    ".npmrc",
    ".claude/.credentials.json",
    ".claude.json",
    ".pi/agent/auth.json",
)
MAX_HOPS = 8


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


def _both(path: str | Path) -> set[str]:
    """A path as written (made absolute) and as resolved: either spelling must match."""
    p = os.path.abspath(os.path.expanduser(str(path)))
    return {p, os.path.realpath(p)}


def _holds(outer: str, inner: str) -> bool:
    return inner == outer or inner.startswith(outer.rstrip("/") + "/")


@dataclass(frozen=True)
class Protected:
    """What the sandbox never shows: ``homes`` (whole) and ``secrets`` (any part of them).

    Paths are kept as normalised strings: these checks run for every bind of every run."""

    homes: frozenset[str]
    secrets: frozenset[str]
    state: frozenset[str]
    _spellings: dict[str, set[str]] = field(default_factory=dict, compare=False, repr=False)

    def both(self, path: str | Path) -> set[str]:
        """``_both(path)``, resolved once per run (an instance serves one run)."""
        key = str(path)
        found = self._spellings.get(key)
        if found is None:
            found = self._spellings[key] = _both(key)
        return found

    @classmethod
    def now(cls) -> Protected:
        """From the caller's environment: $HOME, the uid's (and a sudo user's) home, the
        Reef state dir, ``$REEF_SANDBOX_SECRET_DIRS`` and the credential stores in each home."""
        homes: set[str] = set()
        names = [os.environ.get("HOME", "")]
        with contextlib.suppress(KeyError):
            names.append(pwd.getpwuid(os.getuid()).pw_dir)
        sudo_user = os.environ.get("SUDO_USER")
        if sudo_user:
            with contextlib.suppress(KeyError):
                names.append(pwd.getpwnam(sudo_user).pw_dir)
        for name in names:
            if name and name != "/":
                homes |= _both(name)
        state = _both(_state_dir())
        secrets: set[str] = set(state)
        for entry in os.environ.get(SECRET_DIRS_ENV, "").split(os.pathsep):
            if entry.strip():
                secrets |= _both(entry.strip())
        for home in homes:
            for rel in HOME_SECRETS:
                secrets.add(f"{home}/{rel}")
        return cls(frozenset(homes), frozenset(secrets), frozenset(state))

    def secret_overlap(self, path: str | Path) -> str | None:
        """The protected path that ``path`` is, holds or lies in (None: none)."""
        for p in self.both(path):
            for s in self.secrets:
                if _holds(p, s) or _holds(s, p):
                    return s
        return None

    def holds_home(self, path: str | Path) -> str | None:
        for p in self.both(path):
            for h in self.homes:
                if _holds(p, h):
                    return h
        return None

    def in_home(self, path: str | Path) -> bool:
        return any(_holds(h, p) for p in self.both(path) for h in self.homes)

    def describe(self, hit: str) -> str:
        if hit in self.state:
            return f"Reef's state dir {hit}"
        if hit in self.homes:
            return f"the home dir {hit}"
        return f"the secret path {hit}"

    def check_bind(self, path: str | Path, what: str) -> None:
        """Refuse a caller-chosen bind (``ro_binds``, the work dir, ``home=``) that would
        show a home dir whole, or any part of the state dir or a secret dir."""
        hit = self.secret_overlap(path) or self.holds_home(path)
        if hit is not None:
            raise SandboxError(
                f"refusing to show {what} {path} in the sandbox: it is, holds or lies in "
                f"{self.describe(hit)}",
                f"pass a narrower path outside it (or a copy); extra secret dirs come from "
                f"${SECRET_DIRS_ENV}",
            )


def _state_dir() -> Path:
    """Where ``reef_cli.core.paths.state_dir()`` points (``$REEF_HOME``, else the user data
    dir), worked out without calling it: that call also tightens this process's umask,
    which a process that only runs sandboxes must not get as a side effect. Without
    platformdirs (a bare system Python running the sandbox) the same Linux default."""
    override = os.environ.get("REEF_HOME")
    if override:
        return Path(override).expanduser()
    try:
        from platformdirs import user_data_path

        return user_data_path("reef", appauthor=False)
    except ImportError:
        data = os.environ.get("XDG_DATA_HOME") or os.path.expanduser("~/.local/share")
        return Path(data) / "reef"


def find_program(program: str, path_env: str | None = None) -> tuple[str | None, bool]:
    """Where ``program`` is on the host, and whether the sandbox's PATH finds it too."""
    if "/" in program:
        return os.path.abspath(program), True
    found = shutil.which(program, path=path_env or SANDBOX_PATH)
    if found:
        return os.path.abspath(found), True
    found = shutil.which(program)
    return (os.path.abspath(found), False) if found else (None, False)


def program_binds(
    program: str, path_env: str | None = None, guard: Protected | None = None
) -> list[Path]:
    """Paths to bind read-only (each at its own path) so ``program`` can run inside."""
    found, _ = find_program(program, path_env)
    if not found:
        return []
    out: list[Path] = []
    _add_program(found, path_env, guard or Protected.now(), out, 0)
    return out


def _chain(path: str) -> list[str]:
    """``path`` and every hop of its symlink chain, ending at the real file."""
    hops = [path]
    cur = path
    for _ in range(MAX_HOPS):
        if not os.path.islink(cur):
            break
        cur = os.path.normpath(os.path.join(os.path.dirname(cur), os.readlink(cur)))
        hops.append(cur)
    real = os.path.realpath(path)
    if real not in hops:
        hops.append(real)
    # A hop spelled through a symlinked dir may not exist as written: the real path covers it.
    return [h for h in hops if os.path.exists(h)]


def _add_program(
    path: str, path_env: str | None, guard: Protected, out: list[Path], depth: int
) -> None:
    for hop in _chain(path):
        if is_system(hop):
            continue
        hit = guard.secret_overlap(hop)
        if hit is not None:
            raise SandboxError(
                f"refusing to run {path}: it lies in {guard.describe(hit)}, which the "
                "sandbox never shows",
                "install the program elsewhere (e.g. /usr/local, a venv or ~/.local/bin) or "
                "run a copy of it",
            )
        target = _prefix(Path(hop), guard) or Path(hop)
        if not any(_holds(str(b), str(target)) for b in out):
            out[:] = [b for b in out if not _holds(str(target), str(b))] + [target]
    if depth < 3:
        interp = _interpreter(os.path.realpath(path), path_env)
        if interp:
            _add_program(interp, path_env, guard, out, depth + 1)


def _prefix(hop: Path, guard: Protected) -> Path | None:
    """The dir to bind for ``hop`` instead of the file alone, or None."""
    parts = hop.parts
    npm = "node_modules" in parts
    if npm:
        prefix: Path = Path(*parts[: parts.index("node_modules")])  # an npm prefix
    else:
        prefix = hop.parent.parent if hop.parent.name == "bin" else hop.parent
    if str(prefix) in ("/", "") or is_system(prefix):
        return None
    if guard.secret_overlap(prefix) or guard.holds_home(prefix):
        return None
    if guard.in_home(prefix) and not (npm or _is_install(prefix)):
        return None
    return prefix


def _is_install(prefix: Path) -> bool:
    """A self-contained install: a venv or conda env, a Python or a Node install."""
    if (prefix / "pyvenv.cfg").is_file() or (prefix / "conda-meta").is_dir():
        return True
    if (prefix / "bin" / "node").exists() and (
        (prefix / "lib" / "node_modules").is_dir() or (prefix / "include" / "node").is_dir()
    ):
        return True
    lib = prefix / "lib"
    with contextlib.suppress(OSError):
        return any(
            e.name.startswith("python") and (lib / e.name / "os.py").is_file()
            for e in os.scandir(lib)
        )
    return False


def _interpreter(path: str, path_env: str | None) -> str | None:
    """The interpreter a ``#!`` script names (through ``/usr/bin/env NAME``), or None."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(256)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    words = head[2:].split(b"\n", 1)[0].decode(errors="replace").split()
    if not words:
        return None
    if os.path.basename(words[0]) != "env":
        return words[0] if words[0].startswith("/") else None
    rest = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
    if not rest:
        return None
    found, _ = find_program(rest[0], path_env)
    return found


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
