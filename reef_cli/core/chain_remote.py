"""The git side of a chain remote: URLs, fetch, push with a lease, and the :class:`Link`
a publish goes through. Below the release chain (``Chain.publish`` and ``fast_forward``
use it); the per-scenario commands (``reef scenario remote``, pull, push) are
``core/remotes.py``, above the scenarios.

Fetching copies the remote's ``refs/reef/chain`` and ``refs/reef/weights`` (and their
``r<N>``/``w<N>`` tags) to remote-tracking refs under ``refs/remotes/reef/``; nothing local
moves then. A push sends a ref with a lease on the value last fetched
(``--force-with-lease=<ref>:<that value>``, ``--atomic`` with its tags), so it lands only
if nobody published there since; otherwise it is a ``ChainConflict``.

Publishing with a remote set goes through :class:`Link` (see ``Chain.publish``): fetch,
catch up, build on the head, push, and only then move the local ref. The remote's ref
is then the compare-and-swap that decides a race between machines.

Weight releases' bytes travel with git-lfs: a push of ``refs/reef/weights`` first runs
``git lfs push`` for the commits it sends, and a pull runs ``git lfs fetch`` before the
local weights ref moves, so no local release ever names bytes that are not there.
Everything runs ``git`` as a subprocess; this module imports no git library.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from reef_cli.core.errors import ChainDiverged, RemoteError

if TYPE_CHECKING:
    from reef_cli.core.releases import Chain

REMOTE = "reef"
TRACKING = f"refs/remotes/{REMOTE}/"
TRACKING_TAGS = TRACKING + "tags/"
FETCH_SPECS = (
    f"+refs/reef/*:{TRACKING}*",
    f"+refs/tags/r*:{TRACKING_TAGS}r*",
    f"+refs/tags/w*:{TRACKING_TAGS}w*",
)
# (label, ref, tag prefix): the chains a remote carries (the same as core.releases').
REFS = (("chain", "refs/reef/chain", "r"), ("weights", "refs/reef/weights", "w"))
NETWORK_TIMEOUT = 300.0  # seconds one git fetch or push may take
LFS_TIMEOUT = 3600.0  # a weight release's bytes can be gigabytes
PROBE_TIMEOUT = 60.0
_LOCKED = ("cannot lock ref", "unable to create", "file exists", ".lock")
_RACE = (
    "stale info",
    "fetch first",
    "non-fast-forward",
    "atomic push failed",
    "failed to update ref",
    "failed to lock",
    "cannot lock",
    "incorrect old value",
    "already exists",
)


# ---------------------------------------------------------------- URLs


def redact(text: str) -> str:
    """``text`` with any password (``https://user:secret@host``) or http token user hidden."""
    text = re.sub(r"(\b[a-z][a-z0-9+.-]*://)[^/@\s:]+:[^/@\s]*@", r"\1***@", text)
    return re.sub(r"(\bhttps?://)[^/@\s]+@", r"\1***@", text)


def normalize(url: str) -> str:
    """A local path becomes absolute (git would resolve a relative one against whatever
    directory a later fetch runs in); URLs and ``host:path`` are kept as they are."""
    text = url.strip()
    if not text:
        raise RemoteError("the remote URL is empty", "pass a git URL or the path of a bare repo")
    if "://" in text or re.match(r"^[^/]+:", text):
        return text
    return str(Path(text).expanduser().resolve())


# ---------------------------------------------------------------- git


def _env() -> dict[str, str]:
    # No prompts: git for http credentials; ssh has no terminal in the session of its own
    # that _git starts, so it fails rather than wait for a password (use ssh-agent).
    return dict(os.environ, GIT_TERMINAL_PROMPT="0", LC_ALL="C")


def _git(
    git_dir: Path | None, *args: str, timeout: float | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run git on ``git_dir`` (None: outside any repository) in a session of its own, as
    ``Chain._compare_and_swap`` does: a Ctrl-C of the publisher never kills git mid-write."""
    where = ["--git-dir", str(git_dir)] if git_dir is not None else []
    try:
        return subprocess.run(
            ["git", *where, *args],
            capture_output=True,
            text=True,
            input=stdin,
            stdin=None if stdin is not None else subprocess.DEVNULL,
            env=_env(),
            timeout=timeout,
            start_new_session=True,
        )
    except subprocess.TimeoutExpired as exc:
        raise RemoteError(
            f"git {args[0]} gave no answer within {timeout:.0f}s",
            "check the network and the remote, then run the command again",
        ) from exc


def _said(done: subprocess.CompletedProcess[str]) -> str:
    """git's complaint, one line, secrets hidden."""
    lines = [ln.strip() for ln in done.stderr.splitlines() if ln.strip()]
    fatal = [ln for ln in lines if ln.lower().startswith(("fatal:", "error:"))]
    return redact((fatal or lines or ["no message"])[0])[:300]


def rev(git_dir: Path, ref: str) -> str | None:
    done = _git(git_dir, "rev-parse", "--verify", "--quiet", ref + "^{commit}")
    return done.stdout.strip() or None if done.returncode == 0 else None


def is_ancestor(git_dir: Path, older: str, newer: str) -> bool:
    return _git(git_dir, "merge-base", "--is-ancestor", older, newer).returncode == 0


def number(git_dir: Path, commit: str | None) -> int | None:
    """The release number of ``commit`` (numbers are 1..N along first parents)."""
    if commit is None:
        return None
    return int(_git(git_dir, "rev-list", "--first-parent", "--count", commit).stdout.strip())


def relation(git_dir: Path, local: str | None, remote: str | None) -> str:
    """``empty``, ``same``, ``behind`` (local can fast-forward to the remote), ``ahead``
    (the remote lacks local releases) or ``diverged``."""
    if local is None and remote is None:
        return "empty"
    if local == remote:
        return "same"
    if local is None or (remote is not None and is_ancestor(git_dir, local, remote)):
        return "behind"
    if remote is None or is_ancestor(git_dir, remote, local):
        return "ahead"
    return "diverged"


def tracking(ref: str) -> str:
    """``refs/reef/chain`` -> ``refs/remotes/reef/chain``."""
    return TRACKING + ref.removeprefix("refs/reef/")


def url_of(git_dir: Path) -> str | None:
    """The remote's URL, or None. Reads the config file first: a chain without a remote
    (the common case) costs no git process."""
    config = git_dir / "config"
    try:
        if f'[remote "{REMOTE}"]' not in config.read_text(errors="replace"):
            return None
    except OSError:
        return None
    done = _git(git_dir, "config", "--get", f"remote.{REMOTE}.url")
    return done.stdout.strip() or None if done.returncode == 0 else None


def fetch(git_dir: Path, url: str) -> None:
    """Copy the remote's chain refs and tags to the remote-tracking refs (nothing local
    moves). Another fetch in this repository holding a ref lock is waited out."""
    argv = ["fetch", "--quiet", "--no-tags", "--no-write-fetch-head", REMOTE, *FETCH_SPECS]
    for attempt in range(8):
        done = _git(git_dir, *argv, timeout=NETWORK_TIMEOUT)
        if done.returncode == 0:
            return
        if not any(word in done.stderr.lower() for word in _LOCKED):
            break
        time.sleep(0.02 * (1 + attempt))
    name = _name_of(git_dir)
    raise RemoteError(
        f"cannot fetch from the chain remote {redact(url)}: {_said(done)}",
        f"check the URL and your access (`git ls-remote {redact(url)}`), or change it with "
        f"`reef scenario remote add {name} URL`",
    )


def _name_of(git_dir: Path) -> str:
    """The scenario a chain repository belongs to (``scenarios/<name>/chain.git``)."""
    return git_dir.parent.name


def probe(url: str) -> None:
    """Check that ``url`` is a git repository we can read (``git ls-remote``)."""
    done = _git(None, "ls-remote", url, "refs/reef/chain", timeout=PROBE_TIMEOUT)
    if done.returncode != 0:
        raise RemoteError(
            f"{redact(url)} is not a git repository Reef can reach: {_said(done)}",
            "pass the URL of a bare repository you can read (create one with "
            "`git init --bare --shared=group PATH`)",
        )


def _missing_tags(git_dir: Path, commit: str, prefix: str) -> list[str]:
    """Refspecs ``<commit>:refs/tags/<prefix><N>`` for releases up to ``commit`` whose tag
    the remote lacks (as last fetched)."""
    have = set(_git(git_dir, "for-each-ref", "--format=%(refname)", TRACKING_TAGS).stdout.split())
    commits = _git(git_dir, "rev-list", "--first-parent", "--reverse", commit).stdout.split()
    return [
        f"{sha}:refs/tags/{prefix}{n}"
        for n, sha in enumerate(commits, start=1)
        if f"{TRACKING_TAGS}{prefix}{n}" not in have
    ]


def _lfs(git_dir: Path, url: str, *args: str, config: Sequence[str] = ()) -> None:
    """``git [-c CONFIG] lfs ARGS``."""
    options = [part for item in config for part in ("-c", item)]
    done = _git(git_dir, *options, "lfs", *args, timeout=LFS_TIMEOUT)
    if done.returncode == 0:
        return
    said = _said(done)
    if "'lfs' is not a git command" in done.stderr:
        raise RemoteError(
            "weight releases need git-lfs to travel, and it is not installed",
            "install git-lfs (apt-get install git-lfs), then run the command again",
        )
    raise RemoteError(
        f"git lfs {args[0]} with {redact(url)} failed: {said}",
        "check the remote's lfs/objects and your access, then run the command again",
    )


def local_dir(url: str) -> Path | None:
    """The repository directory of a remote on this machine's disks (a path or file://)."""
    if url.startswith("file://"):
        from urllib.parse import unquote, urlparse

        return Path(unquote(urlparse(url).path))
    return None if "://" in url or re.match(r"^[^/]+:", url) else Path(url)


def _shared_mode(url: str) -> int | None:
    """The file mode a local remote made with ``git init --shared`` wants (0o640 for group,
    0o644 for all); None when it is not shared or not local."""
    where = local_dir(url)
    if where is None:
        return None
    done = _git(where, "config", "--get", "core.sharedRepository")
    value = done.stdout.strip().lower() if done.returncode == 0 else ""
    if value in ("group", "true", "1"):
        return 0o640
    if value in ("all", "world", "everybody", "2"):
        return 0o644
    if re.fullmatch(r"0?[0-7]{3}", value):
        return int(value, 8) & 0o666
    return None


def _share_lfs(url: str, mode: int) -> None:
    """git-lfs 3.3 hard-links objects into a local remote (keeping Reef's private 0600
    mode) and makes its directories with this process's umask: give the remote's copies
    its own inode and the shared mode, so teammates can read them (docs/remotes.md)."""
    import shutil
    import stat

    root = local_dir(url)
    if root is None or not (root / "lfs" / "objects").is_dir():
        return
    me = os.getuid()
    dir_mode = 0o2775 if mode & 0o004 else 0o2770
    objects = root / "lfs" / "objects"
    for path in [objects.parent, objects, *objects.rglob("*")]:
        info = path.lstat()
        if info.st_uid != me:
            continue
        if stat.S_ISDIR(info.st_mode):
            if stat.S_IMODE(info.st_mode) & dir_mode != dir_mode:
                path.chmod(dir_mode)
        elif stat.S_ISREG(info.st_mode) and stat.S_IMODE(info.st_mode) & mode != mode:
            tmp = path.with_name(f".{path.name}.share")
            shutil.copyfile(path, tmp)
            tmp.chmod(mode)
            os.replace(tmp, path)


def _push(
    git_dir: Path, url: str, updates: Sequence[tuple[str, str, str | None]], tags: Sequence[str]
) -> bool:
    """Push ``(new commit, ref, expected remote value)`` updates and tag refspecs in one
    atomic push, each ref leased on its expected value (None: it must not exist yet).
    True when it landed; False when a lease or the remote's ref lock said someone else
    moved it first; ``RemoteError`` for anything else. Weight commits' LFS objects go first.
    """
    for new, ref, expect in updates:
        if expect is not None and not is_ancestor(git_dir, expect, new):
            raise ChainDiverged(  # a lease alone would let the push rewrite the remote
                f"{ref}: {new[:12]} does not build on the remote's {expect[:12]}",
                f"run `reef scenario pull {_name_of(git_dir)}` first",
            )
        if ref.endswith("/weights"):
            mode = _shared_mode(url)
            # git-lfs makes the remote's directories by the *local* repository's setting
            shared = ["core.sharedRepository=group"] if mode else []
            _lfs(git_dir, url, "push", REMOTE, new, config=shared)
            if mode:
                _share_lfs(url, mode)
    leases = [f"--force-with-lease={ref}:{expect or ''}" for _, ref, expect in updates]
    specs = [f"{new}:{ref}" for new, ref, _ in updates] + list(tags)
    done = _git(
        git_dir, "push", "--porcelain", "--atomic", *leases, REMOTE, *specs, timeout=NETWORK_TIMEOUT
    )
    rejected = [ln for ln in done.stdout.splitlines() if ln.startswith("!")]
    if done.returncode == 0 and not rejected:
        moved = [f"update {tracking(ref)} {new}\n" for new, ref, _ in updates]
        moved += [
            f"update {TRACKING_TAGS}{spec.split('refs/tags/')[1]} {spec.split(':')[0]}\n"
            for spec in tags
        ]
        _git(git_dir, "update-ref", "--stdin", stdin="".join(moved))
        return True
    # With --atomic the remote names the ref it could not lock only on stderr; the lines
    # then say "atomic transaction failed" for every ref.
    raced = "cannot lock ref" in done.stderr.lower()
    if rejected and all(
        any(word in ln.lower() for word in _RACE) or (raced and "atomic transaction" in ln)
        for ln in rejected
    ):
        return False
    detail = redact(rejected[0].split("\t")[-1]) if rejected else _said(done)
    raise RemoteError(
        f"the chain remote {redact(url)} refused the push: {detail}",
        "check your write access to the remote, then run the command again",
    )


def _fetch_weights(git_dir: Path, url: str) -> None:
    """The LFS objects of every weight release the remote has (present ones are skipped)."""
    _lfs(git_dir, url, "fetch", "--all", REMOTE, tracking("refs/reef/weights"))


# ---------------------------------------------------------------- publishing


class Link:
    """One chain's remote, for ``Chain.publish``: catch up before building a release, push
    it before the local ref moves."""

    def __init__(self, chain: Chain, url: str) -> None:
        self.chain = chain
        self.url = url

    def catch_up(self) -> str | None:
        """Fetch, fast-forward the local ref if the remote is ahead; the remote's head (the
        lease for the push). Diverged: ``ChainDiverged``, nothing changed."""
        git_dir, ref = self.chain.git_dir, self.chain.ref
        fetch(git_dir, self.url)
        remote = rev(git_dir, tracking(ref))
        state = relation(git_dir, self.chain.head(), remote)
        if state == "diverged":
            raise _diverged(git_dir, ref, self.chain.head(), remote, self.url)
        if state == "behind" and remote is not None:
            if ref.endswith("/weights"):
                _fetch_weights(git_dir, self.url)
            self.chain.fast_forward(remote)
        return remote

    def push(self, commit: str, expect: str | None) -> bool:
        """Push the release ``commit`` and the tags the remote lacks; False when someone
        published there since ``expect`` was fetched."""
        tags = _missing_tags(self.chain.git_dir, commit, self.chain.tag_prefix)
        return _push(self.chain.git_dir, self.url, [(commit, self.chain.ref, expect)], tags)


def link(chain: Chain) -> Link | None:
    """The chain's remote link, or None when it has no remote."""
    url = url_of(chain.git_dir)
    return Link(chain, url) if url else None


def _diverged(
    git_dir: Path, ref: str, local: str | None, remote: str | None, url: str
) -> ChainDiverged:
    name = _name_of(git_dir)
    prefix = dict((r, p) for _, r, p in REFS).get(ref, "r")
    base = _git(git_dir, "merge-base", local or "", remote or "").stdout.strip() or None
    since = f" since {prefix}{number(git_dir, base)}" if base else " from the start"
    return ChainDiverged(
        f"{ref}: the local chain ({prefix}{number(git_dir, local)}) and the chain at "
        f"{redact(url)} ({prefix}{number(git_dir, remote)}) have diverged{since}; a pull "
        "never rewrites local history, so nothing was changed",
        f"to take the remote's chain, archive yours with `reef scenario delete {name}` and "
        f"run `reef scenario remote add {name} {redact(url)}`; then republish any tree of "
        "yours on top (docs/remotes.md)",
    )
