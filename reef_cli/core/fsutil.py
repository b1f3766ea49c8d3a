"""Small filesystem helpers shared by the core: atomic writes (no file is half-written),
forgiving reads of state files, and change keys."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def atomic_write_bytes(path: Path, data: bytes, mode: int | None = None) -> None:
    """Write ``data`` to ``path`` via a temp file + rename: readers see old or new, never half.

    The file is created 0600 (``mkstemp``) unless ``mode`` says otherwise; a missing
    parent is created under the process umask (private in the state dir, see ``paths``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str, mode: int | None = None) -> None:
    atomic_write_bytes(path, text.encode("utf-8"), mode)


def read_json_object(path: Path) -> dict[str, Any]:
    """The JSON object in ``path``; ``{}`` when the file is missing, unreadable, not JSON or
    not an object (state files: a damaged one reads as empty and is rewritten)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):  # RecursionError: nested too deeply
        return {}
    return data if isinstance(data, dict) else {}


def stat_key(path: str | Path) -> tuple[int, int, int] | None:
    """``(inode, mtime_ns, size)`` of ``path``, None when it is missing: a cheap "has this
    file changed" key (a rename onto it changes the inode even within one mtime tick)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)
