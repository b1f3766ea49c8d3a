"""The release chain: an append-only, compare-and-swap chain of harness releases in git.

One bare repository per scenario. Each release is a commit whose tree is the harness
tree plus ``RELEASE.json`` (its metadata); its first parent is the previous release. The
chain head is ``refs/reef/chain``; it only ever moves by ``git update-ref REF NEW OLD``,
which git applies atomically, so two publishers racing can never both win: the loser
rebuilds on the new head and tries again (or gets ``ChainConflict`` when retries run
out). Objects are written before the ref moves, so a publish killed at any point leaves
either no new release or a whole one. Tags ``r<N>`` are conveniences, repaired on publish;
the chain ref is the truth. The same mechanism holds reefd's weight releases: a ``Chain``
on ``refs/reef/weights`` with tags ``w<N>`` (``WEIGHTS``), in the same repository.

With a chain remote (``core/chain_remote.py``) a publish first fetches and catches up with the
remote, then pushes the new release with a lease on the remote's chain ref, and moves the
local ref only after the push landed: the remote's ref is then the compare-and-swap that
decides a race between machines, and the loser rebuilds on the new head the same way.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass
from io import BytesIO
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from reef_cli.core import chain_remote
from reef_cli.core.clock import now_iso
from reef_cli.core.errors import ChainConflict, ChainCorrupt, ChainDiverged, ReleaseNotFound
from reef_cli.core.paths import CHAIN_REF
from reef_cli.core.tree import content_hash

if TYPE_CHECKING:
    import git

WEIGHTS_REF = "refs/reef/weights"
META_FILE = "RELEASE.json"
ZERO = "0" * 40
AUTHOR = b"Reef <reef@localhost>"
# git holds a ref lock for milliseconds; one older than this was left by a killed process.
STALE_LOCK_SECONDS = 5.0


class ReleaseMeta(BaseModel):
    """What ``RELEASE.json`` holds. Stable keys: documented in docs/json.md."""

    model_config = ConfigDict(extra="allow")

    number: int = Field(ge=1)
    parent: int | None = None
    source: str = Field(description="publish | rollback | promote | recipe:<name>")
    recipe: str | None = None
    reason: str = ""
    status: Literal["live", "pending"] = "live"
    points_to: int | None = Field(None, description="the release whose content this re-publishes")
    gate: dict[str, Any] = Field(default_factory=dict)
    content_hash: str
    created_at: str


@dataclass(frozen=True)
class Release:
    number: int
    commit: str
    meta: ReleaseMeta
    tag_prefix: str = "r"

    @property
    def tag(self) -> str:
        return f"{self.tag_prefix}{self.number}"

    def to_json(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "tag": self.tag,
            "commit": self.commit,
            **self.meta.model_dump(exclude={"number"}),
        }


class Chain:
    """The release chain of one scenario, stored in the bare repository ``git_dir``.

    ``ref`` and ``tag_prefix`` name which chain: the harness (``refs/reef/chain``, ``r<N>``)
    or reefd's weights (``refs/reef/weights``, ``w<N>``)."""

    def __init__(self, git_dir: Path, *, ref: str = CHAIN_REF, tag_prefix: str = "r") -> None:
        self.git_dir = git_dir
        self.ref = ref
        self.tag_prefix = tag_prefix
        self._repo: git.Repo | None = None

    # ------------------------------------------------------------ opening

    @classmethod
    def create(cls, git_dir: Path, *, ref: str = CHAIN_REF, tag_prefix: str = "r") -> Chain:
        import git

        git.Repo.init(git_dir, bare=True, mkdir=True)
        return cls(git_dir, ref=ref, tag_prefix=tag_prefix)

    @property
    def repo(self) -> git.Repo:
        if self._repo is None:
            import git

            if not self.git_dir.is_dir():
                raise ChainCorrupt(
                    f"release chain {self.git_dir} is missing",
                    "recreate the scenario with `reef scenario create`",
                )
            try:
                repo = git.Repo(self.git_dir)
                if not repo.bare:
                    raise git.InvalidGitRepositoryError(str(self.git_dir))
            except (git.InvalidGitRepositoryError, git.NoSuchPathError) as exc:
                raise ChainCorrupt(
                    f"{self.git_dir} is not a bare git repository, so it holds no release chain",
                    f"move it aside (mv {self.git_dir} {self.git_dir}.bak) and recreate the "
                    "scenario, or restore it from a backup",
                ) from exc
            self._repo = repo
        return self._repo

    # ------------------------------------------------------------ reading

    def head(self) -> str | None:
        """The commit the chain ref points at, or None for an empty chain."""
        import git

        try:
            return str(self.repo.git.rev_parse("--verify", "--quiet", self.ref + "^{commit}"))
        except git.GitCommandError:
            ref_file = self.git_dir / self.ref
            if ref_file.exists() or self._packed_has_chain():
                raise ChainCorrupt(
                    f"{self.git_dir}: {self.ref} points at no commit",
                    "restore the scenario from a backup",
                ) from None
            return None

    def _packed_has_chain(self) -> bool:
        packed = self.git_dir / "packed-refs"
        return packed.exists() and self.ref in packed.read_text(errors="replace")

    def _meta_of(self, commit: str) -> ReleaseMeta:
        try:
            blob = self.repo.commit(commit).tree / META_FILE
            return ReleaseMeta.model_validate_json(blob.data_stream.read())
        except (KeyError, ValueError, ValidationError) as exc:
            raise ChainCorrupt(
                f"{self.git_dir}: commit {commit[:12]} has no valid {META_FILE}",
                "restore the scenario from a backup",
            ) from exc

    def releases(self) -> list[Release]:
        """Every release, oldest first, by walking first parents from the head."""
        head = self.head()
        if head is None:
            return []
        out: list[Release] = []
        for commit in self.repo.git.rev_list("--first-parent", head).split():
            meta = self._meta_of(commit)
            out.append(Release(meta.number, commit, meta, self.tag_prefix))
        out.reverse()
        for expected, release in enumerate(out, start=1):
            if release.number != expected:
                raise ChainCorrupt(
                    f"{self.git_dir}: release numbers are not 1..N (found {release.tag} "
                    f"where {self.tag_prefix}{expected} belongs)",
                    "restore the scenario from a backup",
                )
        return out

    def latest(self) -> Release | None:
        head = self.head()
        if head is None:
            return None
        meta = self._meta_of(head)
        return Release(meta.number, head, meta, self.tag_prefix)

    def served(self) -> Release | None:
        """The newest live release: what agents get. Pending releases wait for promote."""
        for release in reversed(self.releases()):
            if release.meta.status == "live":
                return release
        return None

    def rollback_target(self) -> Release:
        """What a rollback restores when none is named (``reef harness rollback`` without
        RELEASE, ``POST /reef/scenarios/{s}/rollback`` without ``to``): **the release served
        before the current one** — the newest *live* release older than the served one
        whose content differs from it.

        Pending releases (proposals, rejected or not) are skipped: agents were never served
        them. So are live releases with the served release's content (a re-publish, or the
        release a rollback or promote copied): restoring one would change nothing. Rolling
        back twice therefore undoes the first rollback. This is not ``previous`` (the
        release before ``latest``, whatever its status), which names a position in the
        chain for ``diff``/``show``, not what agents got before.
        """
        releases = self.releases()
        served = self.served()
        if served is None:
            raise ReleaseNotFound(
                "there is nothing to roll back: no release is live yet"
                if releases
                else "there is nothing to roll back: this scenario has no releases yet",
                "name a release to restore (`reef harness versions` lists them)",
            )
        for release in reversed(releases):
            if (
                release.number < served.number
                and release.meta.status == "live"
                and release.meta.content_hash != served.meta.content_hash
            ):
                return release
        raise ReleaseNotFound(
            f"there is no earlier release to roll back to: no live release before "
            f"{served.tag} has other content",
            "name a release to restore (`reef harness versions` lists them)",
        )

    def get(self, number: int) -> Release:
        for release in self.releases():
            if release.number == number:
                return release
        raise ReleaseNotFound(
            f"release r{number} does not exist in this scenario",
            "list releases with `reef harness versions`",
        )

    def resolve(self, spec: str | int, installed: int | None = None) -> Release:
        """``3``, ``r3``, ``latest``, ``previous``, ``served`` or ``installed`` -> a release."""
        text = str(spec).strip().lower()
        releases = self.releases()
        if not releases:
            raise ReleaseNotFound(
                "this scenario has no releases yet", "publish one with `reef harness publish DIR`"
            )
        if text in ("latest", "head"):
            return releases[-1]
        if text == "previous":
            if len(releases) < 2:
                raise ReleaseNotFound("there is no previous release: only r1 exists")
            return releases[-2]
        if text == "served":
            served = self.served()
            if served is None:
                raise ReleaseNotFound(
                    "no live release yet (all are pending)", "reef harness promote N"
                )
            return served
        if text == "installed":
            if installed is None:
                raise ReleaseNotFound(
                    "no release is installed in an agent for this scenario",
                    "install one with `reef harness install`, or name a release number",
                )
            text = str(installed)
        number = text[len(self.tag_prefix) :] if text.startswith(self.tag_prefix) else text
        if not number.isdigit():
            raise ReleaseNotFound(
                f"{spec!r} is not a release",
                "use a number (3), a tag (r3), latest, previous, served or installed",
            )
        index = int(number)
        if not 1 <= index <= len(releases):
            prefix = self.tag_prefix
            raise ReleaseNotFound(
                f"release {prefix}{index} does not exist (this scenario has {prefix}1.."
                f"{prefix}{len(releases)})",
                "list releases with `reef harness versions`",
            )
        return releases[index - 1]

    def files(self, release: Release) -> dict[str, str]:
        """The harness tree of a release, ``{path: text}``, without RELEASE.json."""
        import git

        tree = self.repo.commit(release.commit).tree
        out: dict[str, str] = {}
        for item in tree.traverse():
            if isinstance(item, git.Blob) and item.path != META_FILE:
                out[str(item.path)] = item.data_stream.read().decode("utf-8")
        return dict(sorted(out.items()))

    # ------------------------------------------------------------ writing

    def publish(
        self,
        files: Mapping[str, str],
        *,
        source: str = "publish",
        reason: str = "",
        recipe: str | None = None,
        status: Literal["live", "pending"] = "live",
        points_to: int | None = None,
        gate: Mapping[str, Any] | None = None,
        extra: Mapping[str, Any] | None = None,
        retries: int = 20,
    ) -> Release:
        """Append ``files`` as release N+1; retry on a lost race, then raise ``ChainConflict``.

        Callers run the gate first: this function stores what it is given. With a remote,
        a race lost there (the push's lease failed) is retried the same way, and a chain
        that diverged from the remote's is a ``ChainDiverged`` at once.
        """
        if META_FILE in files:
            raise ValueError(f"{META_FILE} is reserved for release metadata")
        link = chain_remote.link(self)
        for attempt in range(retries + 1):
            expect = link.catch_up() if link is not None else None
            old = self.head()
            parent = self._meta_of(old).number if old else None
            number = (parent or 0) + 1
            meta = ReleaseMeta(
                number=number,
                parent=parent,
                source=source,
                recipe=recipe,
                reason=reason,
                status=status,
                points_to=points_to,
                gate=dict(gate or {}),
                content_hash=content_hash(files),
                created_at=now_iso(),
                **dict(extra or {}),
            )
            commit = self._write_commit(files, meta, old)
            if link is not None:
                landed = link.push(commit, expect)
                if landed:
                    self.fast_forward(commit)  # the remote has it: local follows
            else:
                landed = self._compare_and_swap(commit, old)
            if landed:
                release = Release(number, commit, meta, self.tag_prefix)
                self._repair_tags()
                return release
            time.sleep(random.uniform(0.005, 0.05) * (1 + attempt))
        lock = self.git_dir / (self.ref + ".lock")
        if lock.exists():
            raise ChainConflict(
                f"the release chain is locked by {lock}; gave up after {retries + 1} tries",
                f"if no publisher is running, remove {lock} (it is cleared automatically once "
                f"older than {STALE_LOCK_SECONDS:.0f}s)",
            )
        raise ChainConflict(
            f"another publisher kept advancing the chain; gave up after {retries + 1} tries",
            "run the command again (raise publish_retries with `reef config set` if it persists)",
        )

    def fast_forward(self, new: str) -> bool:
        """Move the ref to ``new`` when that only adds releases (the head is an ancestor of
        it), by compare-and-swap; False when the head holds ``new`` already. Anything else
        is a ``ChainDiverged``: history is never rewritten."""
        for attempt in range(50):
            old = self.head()
            if old == new or (old is not None and chain_remote.is_ancestor(self.git_dir, new, old)):
                return False
            if old is not None and not chain_remote.is_ancestor(self.git_dir, old, new):
                raise ChainDiverged(
                    f"{self.git_dir}: {self.ref} moved to {old[:12]}, which {new[:12]} does "
                    "not build on; a pull never rewrites local history",
                    "see docs/remotes.md (diverged chains)",
                )
            if self._compare_and_swap(new, old):
                self._repair_tags()
                return True
            time.sleep(0.005 * (1 + attempt))
        raise ChainConflict(
            f"{self.git_dir}: {self.ref} kept moving while it was fast-forwarded",
            "run the command again",
        )

    def _write_commit(self, files: Mapping[str, str], meta: ReleaseMeta, parent: str | None) -> str:
        blobs = {path: text.encode("utf-8") for path, text in files.items()}
        blobs[META_FILE] = (json.dumps(meta.model_dump(), indent=2, sort_keys=True) + "\n").encode()
        tree = self._write_tree(blobs)
        stamp = int(time.time())
        lines = [b"tree " + tree.encode()]
        if parent:
            lines.append(b"parent " + parent.encode())
        lines.append(b"author " + AUTHOR + b" %d +0000" % stamp)
        lines.append(b"committer " + AUTHOR + b" %d +0000" % stamp)
        summary = meta.reason.splitlines()[0][:200] if meta.reason.strip() else meta.source
        message = f"{self.tag_prefix}{meta.number}: {summary}\n".encode()
        return self._store(b"commit", b"\n".join(lines) + b"\n\n" + message)

    def _write_tree(self, blobs: Mapping[str, bytes]) -> str:
        """Write nested git tree objects for ``{posix path: bytes}``; return the root sha."""
        nested: dict[str, Any] = {}
        for path, data in blobs.items():
            node = nested
            *dirs, name = path.split("/")
            for part in dirs:
                node = node.setdefault(part, {})
            node[name] = data

        def write(node: dict[str, Any]) -> str:
            entries = []
            for name, value in node.items():
                if isinstance(value, dict):
                    entries.append((name + "/", b"40000", name, write(value)))
                else:
                    entries.append((name, b"100644", name, self._store(b"blob", value)))
            entries.sort(key=lambda e: e[0])  # git orders directories as if named "dir/"
            raw = b"".join(
                mode + b" " + name.encode() + b"\0" + bytes.fromhex(sha)
                for _, mode, name, sha in entries
            )
            return self._store(b"tree", raw)

        return write(nested)

    def _store(self, kind: bytes, data: bytes) -> str:
        from gitdb import IStream

        stream = self.repo.odb.store(IStream(kind, len(data), BytesIO(data)))
        return str(stream.hexsha.decode() if isinstance(stream.hexsha, bytes) else stream.hexsha)

    def _compare_and_swap(self, new: str, old: str | None) -> bool:
        """Move the chain ref from ``old`` to ``new`` atomically; False if someone beat us."""
        import subprocess

        lock = self.git_dir / (self.ref + ".lock")
        # In a session of its own: a publisher killed with its process group (Ctrl-C, a
        # job runner's SIGKILL) must not take git down while it holds the ref's lock —
        # git finishes its few milliseconds alone and the lock goes with it.
        argv = ["git", "--git-dir", str(self.git_dir), "update-ref", "-m", "reef publish"]
        done = subprocess.run(
            [*argv, self.ref, new, old or ZERO],
            capture_output=True,
            text=True,
            start_new_session=True,
            stdin=subprocess.DEVNULL,
        )
        if done.returncode == 0:
            return True
        stderr = done.stderr
        if "cannot lock ref" in stderr or "Unable to create" in stderr:
            self._clear_stale_lock(lock)
            return False
        raise ChainCorrupt(
            f"{self.git_dir}: git update-ref failed: {stderr.strip()[:200]}",
            "check the repository with `git fsck`",
        )

    @staticmethod
    def _clear_stale_lock(lock: Path) -> None:
        """A lock left by a killed git process would block publishing forever; clear old ones."""
        try:
            if time.time() - lock.stat().st_mtime > STALE_LOCK_SECONDS:
                lock.unlink()
        except FileNotFoundError:
            pass

    def _repair_tags(self) -> None:
        """Make ``refs/tags/r<N>`` exist for every release (a killed publish may skip it)."""
        import git

        existing = set(self.repo.git.for_each_ref("--format=%(refname)", "refs/tags/").split())
        for release in self.releases():
            ref = f"refs/tags/{release.tag}"
            if ref in existing:
                continue
            for _ in range(2):
                try:
                    self.repo.git.update_ref(ref, release.commit, ZERO)
                    break
                except git.GitCommandError:
                    # A tag's value is fixed by the append-only chain, so whoever holds its
                    # lock writes the same commit; a lock left by a killed git would block
                    # the tag for good, so it is removed and the write tried once more.
                    (self.git_dir / (ref + ".lock")).unlink(missing_ok=True)
