"""Lend a directory tree to the sandbox uid for one run, then give it back.

A root caller's sandbox runs as an unprivileged host uid (root-only files stay closed, and
RLIMIT_NPROC is enforced), so the work dir must belong to that uid while it runs. Afterwards
every entry gets its old owner back; new entries go to the tree's owner, with set-id bits
stripped.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path


def _entries(root: Path) -> Iterator[str]:
    yield str(root)
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            yield os.path.join(dirpath, name)


class Lease:
    def __init__(self, root: Path, uid: int, gid: int) -> None:
        self.root = root
        top = os.lstat(root)
        self.owner = (top.st_uid, top.st_gid)
        self.before: dict[str, tuple[int, int]] = {}
        for path in _entries(root):
            with contextlib.suppress(OSError):
                st = os.lstat(path)
                self.before[path] = (st.st_uid, st.st_gid)
                os.lchown(path, uid, gid)

    def give_back(self) -> None:
        for path in _entries(self.root):
            with contextlib.suppress(OSError):
                uid, gid = self.before.get(path, self.owner)
                os.lchown(path, uid, gid)
                st = os.lstat(path)
                if path not in self.before and stat.S_ISREG(st.st_mode) and st.st_mode & 0o6000:
                    os.chmod(path, stat.S_IMODE(st.st_mode) & ~0o6000)
