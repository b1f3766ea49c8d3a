"""Lend a directory tree to the sandbox uid for one run, then give it back.

A root caller's sandbox runs as an unprivileged host uid (root-only files stay closed, and
RLIMIT_NPROC is enforced), so the work dir must belong to that uid while it runs. Afterwards
every entry gets its old owner back and new entries go to the tree's owner; a set-uid or
set-gid bit the run added - on a file or a directory - is stripped.

What is needed to give a tree back is small and plain (``as_dict``): the tree's owner plus
the entries that differed from it (another owner, or set-id bits of their own). It is saved
in the run's record before anything is lent, so a caller killed mid-run can be cleaned up
by its watchdog or by the next run's sweep (``_runs``).
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

SETID = stat.S_ISUID | stat.S_ISGID


def _entries(root: Path) -> Iterator[str]:
    yield str(root)
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            yield os.path.join(dirpath, name)


class Lease:
    """``Lease.survey(root)`` records the owners; ``lend`` chowns; ``give_back`` restores."""

    def __init__(self, root: Path, owner: tuple[int, int], odd: dict[str, list[int]]) -> None:
        self.root = root
        self.owner = owner
        # path -> [uid, gid, set-id bits] for entries unlike the tree's owner
        self.odd = odd

    @classmethod
    def survey(cls, root: Path) -> Lease:
        top = os.lstat(root)
        owner = (top.st_uid, top.st_gid)
        odd: dict[str, list[int]] = {}
        for path in _entries(root):
            with contextlib.suppress(OSError):
                st = os.lstat(path)
                bits = st.st_mode & SETID if not stat.S_ISLNK(st.st_mode) else 0
                if (st.st_uid, st.st_gid) != owner or bits:
                    odd[path] = [st.st_uid, st.st_gid, bits]
        return cls(root, owner, odd)

    def as_dict(self) -> dict[str, Any]:
        return {"root": str(self.root), "owner": list(self.owner), "odd": self.odd}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Lease:
        uid, gid = data["owner"]
        return cls(Path(data["root"]), (int(uid), int(gid)), dict(data.get("odd", {})))

    def lend(self, uid: int, gid: int) -> None:
        for path in _entries(self.root):
            with contextlib.suppress(OSError):
                os.lchown(path, uid, gid)

    def give_back(self) -> None:
        """Old owners back, new entries to the tree's owner, added set-id bits stripped.

        Only called once nothing in the sandbox runs any more."""
        for path in _entries(self.root):
            with contextlib.suppress(OSError):
                uid, gid, keep = self.odd.get(path, [*self.owner, 0])
                st = os.lstat(path)
                if stat.S_ISLNK(st.st_mode):
                    if (st.st_uid, st.st_gid) != (uid, gid):
                        os.lchown(path, uid, gid)
                    continue
                mode = stat.S_IMODE(st.st_mode)
                if (st.st_uid, st.st_gid) != (uid, gid):
                    os.lchown(path, uid, gid)  # may clear set-id bits of a file itself
                want = (mode & ~SETID) | (mode & keep)
                if mode & SETID or want != mode:
                    now = stat.S_IMODE(os.lstat(path).st_mode)
                    if now != want:
                        os.chmod(path, want)
