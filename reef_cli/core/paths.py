"""Where Reef keeps its state: one user directory, overridable with ``REEF_HOME``.

The state dir holds every recorded prompt and answer, the tokens and the release chains,
so it is private to its owner: the directory is 0700 and everything in it 0600 (0700 for
directories). One mechanism does it, not each writer: the first time a process looks up
:func:`state_dir`, :func:`private_umask` adds 077 to the process's umask, so every file
and directory it creates from then on — by Python, SQLite (records.sqlite3 and its -wal
and -shm) or git (the chains) — has no group or other bits. :func:`ensure_state_dir`
creates the dir 0700 and tightens one left group- or world-accessible by an older Reef
(or by hand): it walks the tree once, removing group and other bits, and says so on the
``reef.paths`` logger. Processes Reef starts on the person's behalf (the agent a wrapper
runs in the person's project) should get :func:`person_umask` back.
"""

from __future__ import annotations

import logging
import os
import stat
import threading
from pathlib import Path

from reef_cli.core.errors import ConfigError, StateError

# The ref a release chain moves on every publish, promote or rollback (inside its git dir).
CHAIN_REF = "refs/reef/chain"

PRIVATE_BITS = 0o077  # group and other: never set on anything in the state dir
DIR_MODE = 0o700
FILE_MODE = 0o600

log = logging.getLogger("reef.paths")
_umask_lock = threading.Lock()
_person_umask: int | None = None
_warned: set[Path] = set()


def private_umask() -> None:
    """From now on this process creates files 0600 and dirs 0700 (whatever else the
    person's umask masks stays masked). Idempotent; the first call remembers the umask
    it found, for :func:`person_umask`."""
    global _person_umask
    if _person_umask is not None:
        return
    with _umask_lock:
        if _person_umask is None:
            found = os.umask(PRIVATE_BITS)  # reading the umask means setting it
            os.umask(found | PRIVATE_BITS)
            _person_umask = found


def person_umask() -> int:
    """The umask this process had before :func:`private_umask` (its current one if never
    tightened): give it back to a child that writes the person's own files."""
    if _person_umask is not None:
        return _person_umask
    current = os.umask(PRIVATE_BITS)
    os.umask(current)
    return current


def state_dir() -> Path:
    """The state directory: ``$REEF_HOME`` or the platform's user data dir for ``reef``.

    Looking it up makes this process's new files private (see the module docstring)."""
    private_umask()
    override = os.environ.get("REEF_HOME")
    if override:
        if any(c < " " or c == "\x7f" or "\ud800" <= c <= "\udfff" for c in override):
            # every command prints this path: bytes that are not text would break the line
            raise ConfigError(
                "$REEF_HOME is not a printable UTF-8 path",
                "export REEF_HOME=/a/path/in/plain/text (or unset it for the default)",
            )
        return Path(override).expanduser()
    from platformdirs import user_data_path

    return user_data_path("reef", appauthor=False)


def ensure_state_dir() -> Path:
    """Create the state directory (0700) if needed and tighten it if it is group- or
    world-accessible; fail with a fix if it cannot be written."""
    root = state_dir()
    try:
        root.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    except OSError as exc:
        raise StateError(
            f"cannot create the state directory {root}: {exc.strerror}",
            "set REEF_HOME to a writable directory",
        ) from exc
    if not root.is_dir():
        raise StateError(f"state path {root} is not a directory", "set REEF_HOME elsewhere")
    if not os.access(root, os.W_OK):
        raise StateError(f"state directory {root} is not writable", "set REEF_HOME elsewhere")
    tighten(root)
    return root


def ensure_private_dir(path: Path) -> Path:
    """``path`` as a directory, created 0700 (with any missing parents) if it is missing."""
    private_umask()
    path.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    return path


def is_loose(mode: int) -> bool:
    """Whether a file mode gives its group or others any access."""
    return bool(stat.S_IMODE(mode) & PRIVATE_BITS)


def tighten(root: Path) -> bool:
    """If ``root`` is group- or world-accessible, remove group and other bits from it and
    everything under it (symlinks in it are left alone: their targets are not ours).
    Returns whether anything was changed. The root goes last, so a walk cut short is
    redone at the next start."""
    try:
        top = root.stat()  # the state dir itself may be a symlink to the real one
    except OSError:
        return False
    if not is_loose(top.st_mode):
        return False
    if top.st_uid != os.geteuid() and os.geteuid() != 0:
        if root not in _warned:  # once a process, not at every look-up
            _warned.add(root)
            log.warning(
                "state directory %s (mode %o) belongs to another user; cannot make it private",
                root,
                stat.S_IMODE(top.st_mode),
            )
        return False
    changed = 0
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            changed += _tighten_one(Path(dirpath) / name)
    try:
        os.chmod(root, stat.S_IMODE(top.st_mode) & ~PRIVATE_BITS)
    except OSError as exc:
        log.warning("cannot make the state directory %s private: %s", root, exc.strerror)
        return changed > 0
    log.warning(
        "reef: state directory %s was open to other users (mode %o): made it private "
        "(%d entries in it lost their group/other access)",
        root,
        stat.S_IMODE(top.st_mode),
        changed,
    )
    return True


def _tighten_one(path: Path) -> int:
    try:
        info = path.lstat()
        if stat.S_ISLNK(info.st_mode) or not is_loose(info.st_mode):
            return 0
        os.chmod(path, stat.S_IMODE(info.st_mode) & ~PRIVATE_BITS)
    except OSError:
        return 0
    return 1


def config_path() -> Path:
    return state_dir() / "config.toml"


def scenarios_dir() -> Path:
    return state_dir() / "scenarios"


def archive_dir() -> Path:
    return state_dir() / "archive"


def agent_dir(adapter: str, scenario: str) -> Path:
    """The agent folder Reef's wrappers own for one adapter and scenario."""
    return agents_dir() / f"{adapter}-{scenario}"


def agents_dir() -> Path:
    return state_dir() / "agents"


def private_file(path: Path) -> Path:
    """``path`` as an existing file with mode 0600 or tighter: created empty if missing,
    its group and other bits removed if it has any (for files a library opens itself,
    such as SQLite's database, whose -wal and -shm files copy its mode)."""
    private_umask()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    except FileExistsError:
        _tighten_one(path)
    else:
        os.close(fd)
    return path
