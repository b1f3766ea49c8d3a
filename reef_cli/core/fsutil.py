"""Small filesystem helpers shared by the core: atomic writes, so no file is half-written."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


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
