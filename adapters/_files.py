"""All-or-nothing installs into a folder the person also edits.

An install is planned in memory first (every existing file parsed, every problem found
before anything is written), then applied. Files Reef owns are written outright; files
the person owns too (``AGENTS.md``, ``settings.json`` …) are *merged*, and their
original bytes are kept under ``.reef/backup/`` the first time Reef touches them. On
uninstall a merged file that still holds exactly what Reef wrote gets its original
bytes back; one the person edited since keeps their edits and loses only Reef's part.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reef_cli.core.errors import ReefError
from reef_cli.core.fsutil import atomic_write_bytes, atomic_write_text

STATE_DIR = ".reef"
MANIFEST = "install.json"
#: What the manifest keeps for ``apply``/``remove``; the rest of it is the plan's record.
BOOKKEEPING = ("owned", "merged", "written", "originals")
BEGIN = "<!-- reef:begin (managed by Reef: edits here are replaced on the next install) -->"
END = "<!-- reef:end -->"


class InstallError(ReefError):
    """The agent folder cannot take the install; nothing was changed."""

    http_status = 409


class NotInstalled(InstallError):
    """The agent folder holds no Reef install."""


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ----------------------------------------------------------------- marked sections


def with_section(original: str | None, body: str) -> str:
    """``original`` with Reef's marked section replaced or appended."""
    section = f"{BEGIN}\n{body.rstrip()}\n{END}\n"
    text = original or ""
    start, end = text.find(BEGIN), text.find(END)
    if start != -1 and end != -1 and end > start:
        return text[:start] + section + text[end + len(END) :].lstrip("\n")
    if not text:
        return section
    sep = "\n" if text.endswith("\n") else "\n\n"
    return text + sep + section


def without_section(text: str) -> str:
    """``text`` with Reef's marked section (and the blank line put before it) taken out."""
    start, end = text.find(BEGIN), text.find(END)
    if start == -1 or end == -1 or end < start:
        return text
    head, tail = text[:start], text[end + len(END) :]
    tail = tail[1:] if tail.startswith("\n") else tail
    if not tail and head.endswith("\n\n"):
        head = head[:-1]
    return head + tail


def unsection(text: str) -> str | None:
    """A rules file without Reef's section; None when nothing else is left in it."""
    left = without_section(text)
    return left if left.strip() else None


def read_text(path: Path) -> str | None:
    """A file the install merges into, as UTF-8 text (bytes kept: CRLFs stay); None when
    there is none; ``InstallError`` when it cannot be read as text."""
    if not path.is_file():
        return None
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InstallError(
            f"{path} is not UTF-8 text; nothing was installed",
            f"save {path.name} as UTF-8, then install again",
        ) from exc
    except OSError as exc:
        raise InstallError(
            f"cannot read {path} ({exc.strerror or exc}); nothing was installed",
            f"fix or move {path.name} aside, then install again",
        ) from exc


def parse_json_object(text: str | None, where: str, name: str | None = None) -> dict[str, Any]:
    """A JSON object from a shared file's text ({} when absent or blank); a clear error,
    naming ``where`` and how to fix ``name``, when it is anything else."""
    if text is None or not text.strip():
        return {}
    fix = name or where
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise InstallError(
            f"{where} is not valid JSON ({exc}); nothing was installed",
            f"fix or move {fix} aside, then install again",
        ) from exc
    if not isinstance(data, dict):
        raise InstallError(f"{where} must hold a JSON object; nothing was installed", f"fix {fix}")
    return data


def read_json_object(path: Path, name: str | None = None) -> dict[str, Any]:
    """``parse_json_object`` of a file, which must be UTF-8 if it exists."""
    if not path.exists():
        return {}
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InstallError(
            f"{path} is not UTF-8 text; nothing was installed",
            f"fix or move {name or path} aside, then install again",
        ) from exc
    return parse_json_object(text, str(path), name)


def person_json_object(text: str) -> dict[str, Any] | None:
    """The JSON object a shared file holds at uninstall, or None when the person has broken
    it since: then uninstall leaves their bytes alone rather than failing."""
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def dump_json(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


# ----------------------------------------------------------------- the plan


@dataclass
class Merge:
    """A file shared with the person: how to put Reef's part in and take it out."""

    apply: Callable[[str | None], str]
    remove: Callable[[str], str | None]  # None: the file should not exist without Reef


@dataclass
class Plan:
    target: Path
    owned: dict[str, str] = field(default_factory=dict)
    merged: dict[str, Merge] = field(default_factory=dict)
    record: dict[str, Any] = field(default_factory=dict)

    def own(self, rel: str, text: str) -> None:
        self.owned[rel] = text

    def merge(self, rel: str, merge: Merge) -> None:
        self.merged[rel] = merge


def refuse_overwrites(plan: Plan, folders: tuple[str, ...] = ()) -> None:
    """Stop the install before it overwrites a file of the person's (uninstall would delete
    it), puts Reef's files into a folder of theirs under one of ``folders`` (``skills``:
    a skill is its folder), or merges into something that is not a regular file."""
    previous = set((load_manifest(plan.target) or {}).get("owned", []))
    found: set[str] = set()
    for rel in sorted(plan.owned):
        if rel in previous or rel.startswith(f"{STATE_DIR}/"):
            continue
        path = plan.target / rel
        if path.exists() or path.is_symlink():
            found.add(rel)
            continue
        parts = rel.split("/")
        if parts[0] in folders and len(parts) > 2:
            folder = "/".join(parts[:2])
            ours = any(p.startswith(folder + "/") for p in previous)
            if (plan.target / folder).exists() and not ours:
                found.add(folder + "/")
    if found:
        raise InstallError(
            f"installing would overwrite your own {', '.join(sorted(found))} in {plan.target}; "
            "nothing was installed",
            "rename or move those files (or the skill/command in the release), then install again",
        )
    for rel in plan.merged:
        path = plan.target / rel
        if path.exists() and not path.is_file():
            raise InstallError(
                f"{path} is not a regular file; nothing was installed", f"move {rel} aside"
            )


def load_manifest(target: Path) -> dict[str, Any] | None:
    path = target / STATE_DIR / MANIFEST
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _check_writable(target: Path) -> None:
    probe_dir = target
    while not probe_dir.exists():
        probe_dir = probe_dir.parent
    if not probe_dir.is_dir() or not os.access(probe_dir, os.W_OK | os.X_OK):
        raise InstallError(
            f"{probe_dir} is not a writable directory; nothing was installed",
            "fix its permissions or choose another target folder",
        )
    try:
        target.mkdir(parents=True, exist_ok=True)
        probe = target / f".reef-write-probe-{os.getpid()}"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise InstallError(
            f"cannot write into {target} ({exc.strerror}); nothing was installed",
            "fix its permissions or choose another target folder",
        ) from exc


def _mode(path: Path) -> int | None:
    """The permission bits of an existing file (kept when Reef rewrites or restores it)."""
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        return None


def apply(plan: Plan) -> None:
    """Write the plan; on any failure put back what was already written."""
    target = plan.target
    _check_writable(target)
    previous = load_manifest(target) or {}
    backups_dir = target / STATE_DIR / "backup"
    originals: dict[str, str | None] = dict(previous.get("originals", {}))
    # Compute every new text before writing anything (merges may raise on bad input).
    texts: dict[str, str] = dict(plan.owned)
    for rel, merge in plan.merged.items():
        path = target / rel
        # bytes -> str without newline translation: a CRLF file keeps its CRLFs
        current = path.read_bytes().decode("utf-8") if path.exists() else None
        texts[rel] = merge.apply(current)
    stale = [rel for rel in previous.get("owned", []) if rel not in texts]

    undo: list[tuple[Path, bytes | None, int | None]] = []
    new_backups: list[Path] = []
    state_existed = (target / STATE_DIR).exists()
    try:
        for rel, text in texts.items():
            path = target / rel
            before = path.read_bytes() if path.exists() else None
            mode = _mode(path)
            if rel in plan.merged and rel not in originals:
                originals[rel] = None
                if before is not None:
                    new_backups.append(backups_dir / rel)
                    atomic_write_bytes(backups_dir / rel, before, mode)
                    originals[rel] = sha(before)
            undo.append((path, before, mode))
            atomic_write_text(path, text, mode)
        for rel in stale:
            path = target / rel
            if path.exists():
                undo.append((path, path.read_bytes(), _mode(path)))
                path.unlink()
                _prune(path.parent, target)
        manifest = {
            **plan.record,
            "owned": sorted(plan.owned),
            "merged": sorted(set(plan.merged) | set(previous.get("merged", []))),
            "written": {rel: sha(text.encode()) for rel, text in texts.items()},
            "originals": originals,
        }
        atomic_write_text(target / STATE_DIR / MANIFEST, json.dumps(manifest, indent=2) + "\n")
    except BaseException:
        for path, before, mode in reversed(undo):
            try:  # the path that failed was never written: it must not stop the rest
                if before is None:
                    path.unlink(missing_ok=True)
                    _prune(path.parent, target)  # folders this install created
                else:
                    atomic_write_bytes(path, before, mode)
            except OSError:
                continue
        for backup in new_backups:
            backup.unlink(missing_ok=True)
            _prune(backup.parent, target)
        if not state_existed:
            shutil.rmtree(target / STATE_DIR, ignore_errors=True)
        raise


def remove(target: Path, unmerge: dict[str, Callable[[str], str | None]]) -> bool:
    """Undo an install; returns False when nothing was installed in ``target``."""
    manifest = load_manifest(target)
    if manifest is None:
        return False
    written: dict[str, str] = manifest.get("written", {})
    originals: dict[str, str | None] = manifest.get("originals", {})
    backups_dir = target / STATE_DIR / "backup"
    for rel in manifest.get("owned", []):
        path = target / rel
        if path.exists():
            path.unlink()
            _prune(path.parent, target)
    for rel in manifest.get("merged", []):
        path = target / rel
        backup = backups_dir / rel
        current = path.read_bytes() if path.exists() else None
        untouched = current is not None and sha(current) == written.get(rel)
        if untouched and originals.get(rel) and backup.exists():
            atomic_write_bytes(path, backup.read_bytes(), _mode(backup))
        elif untouched and originals.get(rel) is None:
            path.unlink()
            _prune(path.parent, target)
        elif current is not None and rel in unmerge:
            left = unmerge[rel](current.decode("utf-8"))
            if left is None:
                path.unlink()
            else:
                atomic_write_text(path, left, _mode(path))
    shutil.rmtree(target / STATE_DIR, ignore_errors=True)
    return True


def _prune(directory: Path, stop: Path) -> None:
    """Remove now-empty folders Reef created, up to (not including) ``stop``."""
    while directory != stop and directory.is_relative_to(stop):
        try:
            directory.rmdir()
        except OSError:
            return
        directory = directory.parent
