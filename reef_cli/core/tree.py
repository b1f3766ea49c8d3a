"""Harness trees: an agent-neutral folder of rules, skills, commands and extensions.

::

    rules/<name>.md           always-on instructions
    skills/<name>/SKILL.md    Agent Skills: frontmatter name + description, then the body
    commands/<name>.md        slash commands: frontmatter description (+ argument-hint)
    extensions/<name>.ts      pi extensions (code: the gate publishes them as pending)
    reef.toml                 format version and what the tree requires

A tree is loaded into typed models, validated as a whole (every problem is collected, not
just the first), and rendered back to a canonical ``{path: text}`` mapping, so the same
tree always produces the same bytes and the same content hash.
"""

from __future__ import annotations

import errno
import hashlib
import os
import shlex
import stat
import tomllib
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from reef_cli.core.errors import TreeError, TreeNotFound
from reef_cli.core.frontmatter import check_shape, split_frontmatter, with_frontmatter
from reef_cli.core.names import is_kebab

TREE_FORMAT = 1
MANIFEST = "reef.toml"
KINDS = ("rules", "skills", "commands", "extensions")
IGNORED_NAMES = frozenset({".git", ".DS_Store"})
MAX_DESCRIPTION = 1024


@dataclass(frozen=True)
class Limits:
    """Size bounds; the defaults come from ``Settings.max_file_kib`` / ``max_tree_kib``."""

    max_file_bytes: int = 256 * 1024
    max_tree_bytes: int = 2048 * 1024
    max_files: int = 500


class Requires(BaseModel):
    model_config = ConfigDict(extra="forbid")
    binaries: list[str] = Field(default_factory=list)
    env: list[str] = Field(default_factory=list)


class Manifest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    format: int = TREE_FORMAT
    requires: Requires = Field(default_factory=Requires)


class Rule(BaseModel):
    name: str
    body: str
    meta: dict[str, Any] = Field(default_factory=dict)


class Skill(BaseModel):
    name: str
    description: str
    body: str
    meta: dict[str, Any] = Field(default_factory=dict)
    files: dict[str, str] = Field(default_factory=dict, description="other files in the skill dir")


class Command(BaseModel):
    name: str
    description: str
    body: str
    argument_hint: str | None = None
    meta: dict[str, Any] = Field(default_factory=dict)


class Extension(BaseModel):
    name: str
    source: str


class HarnessTree(BaseModel):
    """A whole harness tree. ``files()`` is its canonical form; ``content_hash()`` names it."""

    manifest: Manifest = Field(default_factory=Manifest)
    rules: list[Rule] = Field(default_factory=list)
    skills: list[Skill] = Field(default_factory=list)
    commands: list[Command] = Field(default_factory=list)
    extensions: list[Extension] = Field(default_factory=list)

    def files(self) -> dict[str, str]:
        out: dict[str, str] = {MANIFEST: _render_manifest(self.manifest)}
        for rule in self.rules:
            out[f"rules/{rule.name}.md"] = with_frontmatter(rule.meta, rule.body)
        for skill in self.skills:
            head = {"name": skill.name, "description": skill.description, **skill.meta}
            out[f"skills/{skill.name}/SKILL.md"] = with_frontmatter(head, skill.body)
            for rel, text in skill.files.items():
                out[f"skills/{skill.name}/{rel}"] = text
        for cmd in self.commands:
            head = {"description": cmd.description}
            if cmd.argument_hint is not None:
                head["argument-hint"] = cmd.argument_hint
            out[f"commands/{cmd.name}.md"] = with_frontmatter({**head, **cmd.meta}, cmd.body)
        for ext in self.extensions:
            out[f"extensions/{ext.name}.ts"] = ext.source
        return dict(sorted(out.items()))

    def content_hash(self) -> str:
        return content_hash(self.files())

    def render(self, dest: Path) -> list[Path]:
        """Write the canonical files under ``dest``; refuses a non-empty destination."""
        if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
            raise TreeError(
                f"{dest} exists and is not an empty directory",
                "choose a new directory or empty this one",
            )
        written = []
        for rel, text in self.files().items():
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
            written.append(target)
        return written

    def summary(self) -> dict[str, list[str]]:
        return {
            "rules": [r.name for r in self.rules],
            "skills": [s.name for s in self.skills],
            "commands": [c.name for c in self.commands],
            "extensions": [e.name for e in self.extensions],
        }


def with_changes(files: Mapping[str, str], changes: Mapping[str, str | None]) -> dict[str, str]:
    """``files`` with each changed path's new text, or without it where the text is None
    (a proposal's change, POST /reef/harness/proposals)."""
    tree = dict(files)
    for path, text in changes.items():
        if text is None:
            tree.pop(path, None)
        else:
            tree[path] = text
    return tree


def content_hash(files: Mapping[str, str]) -> str:
    """sha256 over sorted (path, text) pairs: equal trees hash equal, whatever the order."""
    digest = hashlib.sha256()
    for rel in sorted(files):
        try:
            data = files[rel].encode("utf-8")
            name = rel.encode("utf-8")
        except UnicodeEncodeError as exc:  # the gate refuses these; never a traceback
            raise TreeError(
                f"{shown(rel)}: file name or text is not UTF-8",
                "rename the file or re-save it as UTF-8",
            ) from exc
        digest.update(name + b"\0" + str(len(data)).encode() + b"\0" + data)
    return "sha256:" + digest.hexdigest()


# ---------------------------------------------------------------- reading a folder

# Deeper than this is no harness tree (skills/<name>/<a>/<b>/… is the deepest real use).
MAX_DEPTH = 12

# Bidirectional-text controls: a name that reads differently from what it is.
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")

_SPECIAL = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISDOOR, "a door"),
    (stat.S_ISPORT, "an event port"),
    (stat.S_ISWHT, "a whiteout"),
)


def shown(rel: str) -> str:
    """``rel`` safe to print on one line: control characters, bidi controls and bytes that
    are not UTF-8 (``os`` hands those over as lone surrogates) are escaped."""
    out = []
    for char in rel:
        if "\udc80" <= char <= "\udcff":  # an undecodable byte (surrogateescape)
            out.append(f"\\x{ord(char) - 0xDC00:02x}")
        elif _bad_char(char):
            out.append(char.encode("unicode_escape").decode("ascii"))
        else:
            out.append(char)
    return "".join(out)


def _bad_char(char: str) -> bool:
    return unicodedata.category(char) in ("Cc", "Cs") or char in _BIDI


def name_problem(rel: str) -> str | None:
    """Why the path ``rel`` cannot be a file name in a tree, or ``None``."""
    if any("\udc80" <= char <= "\udcff" for char in rel):
        return f"{shown(rel)}: file name is not UTF-8 (rename it)"
    if any(_bad_char(char) for char in rel):
        return (
            f"{shown(rel)}: file name holds a control character such as a newline or tab "
            "(rename it)"
        )
    return None


@dataclass
class FolderScan:
    """What ``scan_folder`` found: the files it could read and every problem."""

    files: dict[str, str]
    problems: list[str]
    refused: set[str]  # paths (as read) that were not read because of a problem


def read_folder(root: Path, limits: Limits = Limits()) -> dict[str, str]:
    """Read every file under ``root`` as UTF-8 text, enforcing the safety rules first.

    Only regular files with a single link are read: no symlinks, hardlinks (they may be
    a file from outside the tree), FIFOs, sockets, devices or other file systems; no
    binary, non-UTF-8 or oversize files; file names must be printable UTF-8. Size is
    checked before reading, so a 50 MB file is never loaded. Any problem raises a
    ``TreeError`` that lists them all.
    """
    found = scan_folder(root, limits)
    if found.problems:
        raise invalid(root, found.problems)
    return found.files


def scan_folder(root: Path, limits: Limits = Limits()) -> FolderScan:
    """Like ``read_folder`` but returns the readable files and the problems instead of
    raising (``reef harness check`` shows them all). Only a missing root raises.

    Folders are walked by file descriptor without following links, and each file is
    opened with ``O_NOFOLLOW | O_NONBLOCK`` and checked again with ``fstat``, so a file
    swapped for a link or a FIFO after the first look is refused, never followed or
    waited on.
    """
    if not root.exists() and not root.is_symlink():
        raise TreeNotFound(
            f"harness tree {root} does not exist",
            f"check the path, or create a tree there with `reef harness init {root}`",
        )
    if root.is_symlink():
        raise TreeError(f"harness tree {root} is a symlink", "pass the tree's folder itself")
    if not root.is_dir():
        raise TreeNotFound(f"harness tree {root} is not a directory", "pass the tree's folder")
    scan = FolderScan({}, [], set())
    base = root.resolve()
    device = base.lstat().st_dev
    total = 0
    over_size = over_count = False
    entries = 0

    def refuse(rel: str, problem: str) -> None:
        scan.problems.append(problem)
        scan.refused.add(rel)

    def walk_error(exc: OSError) -> None:
        where = os.path.basename(os.fsdecode(exc.filename)) if exc.filename else "."
        refuse(where, f"{shown(where)}: cannot read this folder ({exc.strerror})")

    for dirpath, dirnames, filenames, dirfd in os.fwalk(
        base, follow_symlinks=False, onerror=walk_error
    ):
        here = _rel_str(dirpath, base)
        depth = 0 if here == "." else here.count("/") + 1
        keep = []
        for name in sorted(dirnames):
            if name in IGNORED_NAMES:
                continue
            rel = _join(here, name)
            entries += 1
            problem = name_problem(rel) or _entry_problem(rel, name, dirfd, device, folder=True)
            if problem is None and depth + 1 > MAX_DEPTH:
                problem = f"{shown(rel)}: nested deeper than {MAX_DEPTH} folders"
            if problem:
                refuse(rel, problem)
            else:
                keep.append(name)
        dirnames[:] = keep
        for name in sorted(filenames):
            if name in IGNORED_NAMES:
                continue
            rel = _join(here, name)
            entries += 1
            problem = name_problem(rel) or _entry_problem(rel, name, dirfd, device)
            if problem:
                refuse(rel, problem)
                continue
            if over_size or over_count:
                continue  # still look at every entry's kind and name, read no more
            try:
                size = os.stat(name, dir_fd=dirfd, follow_symlinks=False).st_size
            except OSError as exc:  # gone since the first look
                refuse(rel, f"{rel}: cannot read it ({exc.strerror})")
                continue
            if size > limits.max_file_bytes:
                refuse(rel, f"{rel}: {size} bytes is over the {limits.max_file_bytes}-byte limit")
                continue
            if len(scan.files) >= limits.max_files:
                scan.problems.append(f"tree has more than {limits.max_files} files")
                over_count = True
                continue
            if total + size > limits.max_tree_bytes:
                scan.problems.append(
                    f"tree is over the {limits.max_tree_bytes}-byte limit at {rel}"
                )
                over_size = True
                continue
            try:
                data = _read_regular(rel, name, dirfd, device, limits.max_file_bytes)
                scan.files[rel] = decode_text(data, rel)
                total += len(data)
            except TreeError as exc:
                refuse(rel, exc.message)
        if entries > 4 * limits.max_files:
            scan.problems.append(
                f"tree has more than {4 * limits.max_files} entries (files and folders)"
            )
            break
    return scan


def _join(here: str, name: str) -> str:
    return name if here == "." else f"{here}/{name}"


def _rel_str(path: str | bytes, base: Path) -> str:
    text = os.fsdecode(path)
    rel = os.path.relpath(text, base)
    return rel.replace(os.sep, "/")


def _kind_problem(rel: str, info: os.stat_result, device: int, folder: bool) -> str | None:
    mode = info.st_mode
    if stat.S_ISLNK(mode):
        return f"{rel}: symlinks are not allowed (copy the file in instead)"
    if info.st_dev != device:
        return f"{rel}: is on another file system (a mount point); copy the files in instead"
    if folder:
        return None if stat.S_ISDIR(mode) else f"{rel}: not a regular file or folder"
    for test, what in _SPECIAL:
        if test(mode):
            return f"{rel}: is {what}, not a regular file (remove it)"
    if not stat.S_ISREG(mode):
        return f"{rel}: not a regular file (remove it)"
    if info.st_nlink > 1:
        path, copy = shlex.quote(rel), shlex.quote(rel + ".copy")
        return (
            f"{rel}: is hardlinked ({info.st_nlink} links), so it may be a file from outside "
            f"the tree; replace it with a copy (cp {path} {copy} && mv {copy} {path})"
        )
    return None


def _entry_problem(
    rel: str, name: str, dirfd: int, device: int, folder: bool = False
) -> str | None:
    try:
        info = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
    except OSError as exc:
        return f"{rel}: cannot read it ({exc.strerror})"
    return _kind_problem(rel, info, device, folder)


def _read_regular(rel: str, name: str, dirfd: int, device: int, max_bytes: int) -> bytes:
    """Open without following a link and without blocking, check what was opened, read
    at most ``max_bytes``."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    try:
        fd = os.open(name, flags, dir_fd=dirfd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise TreeError(f"{rel}: symlinks are not allowed (copy the file in instead)") from exc
        raise TreeError(f"{rel}: cannot read it ({exc.strerror})") from exc
    try:
        problem = _kind_problem(rel, os.fstat(fd), device, folder=False)
        if problem:  # it changed since the first look
            raise TreeError(problem)
        chunks = []
        left = max_bytes + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 16))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        raise TreeError(f"{rel}: cannot read it ({exc.strerror})") from exc
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > max_bytes:
        raise TreeError(f"{rel}: over the {max_bytes}-byte limit")
    return data


def decode_text(data: bytes, rel: str) -> str:
    if b"\0" in data:
        raise TreeError(f"{rel}: binary file (harness trees hold UTF-8 text only)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TreeError(f"{rel}: not UTF-8 text (byte {exc.start}); re-save it as UTF-8") from exc


def invalid(where: object, problems: list[str]) -> TreeError:
    more = f" (and {len(problems) - 1} more problem(s))" if len(problems) > 1 else ""
    return TreeError(
        f"harness tree {shown(str(where))} is invalid: {problems[0]}{more}",
        "fix the file named and try again; `reef harness check DIR` lists every problem",
        problems=problems,
    )


# ---------------------------------------------------------------- parsing files


def load_tree(root: Path, limits: Limits = Limits()) -> HarnessTree:
    """Read, parse and validate the folder ``root``."""
    return parse_files(read_folder(root, limits), where=root, limits=limits)


def parse_files(
    files: Mapping[str, str], where: object = "tree", limits: Limits = Limits()
) -> HarnessTree:
    """Build a validated ``HarnessTree`` from ``{posix path: text}``; collect every problem."""
    problems: list[str] = []
    tree = HarnessTree()
    skill_parts: dict[str, dict[str, str]] = {}
    total = 0
    for rel in sorted(files):
        text = files[rel]
        bad_name = name_problem(rel)
        if bad_name:
            problems.append(bad_name)
            continue
        try:
            size = len(text.encode("utf-8"))
        except UnicodeEncodeError as exc:  # a lone surrogate, e.g. from "\ud800" in JSON
            problems.append(f"{rel}: not UTF-8 text (character {exc.start}); re-save it as UTF-8")
            continue
        total += size
        if size > limits.max_file_bytes:
            problems.append(f"{rel}: over the {limits.max_file_bytes}-byte limit")
            continue
        if "\0" in text:
            problems.append(f"{rel}: binary file (harness trees hold UTF-8 text only)")
            continue
        parts = PurePosixPath(rel).parts
        if not parts or rel.startswith("/") or ".." in parts or "\\" in rel:
            problems.append(f"{rel}: path escapes the tree")
            continue
        if "/".join(parts) != rel:
            problems.append(f"{rel}: not a plain relative path (write it as {'/'.join(parts)})")
            continue
        if len(parts) > MAX_DEPTH + 1:
            problems.append(f"{rel}: nested deeper than {MAX_DEPTH} folders")
            continue
        try:
            if rel == MANIFEST:
                tree.manifest = _parse_manifest(text, rel)
            elif parts[0] == "rules" and len(parts) == 2 and rel.endswith(".md"):
                tree.rules.append(_parse_rule(parts[1][:-3], text, rel))
            elif parts[0] == "commands" and len(parts) == 2 and rel.endswith(".md"):
                tree.commands.append(_parse_command(parts[1][:-3], text, rel))
            elif parts[0] == "extensions" and len(parts) == 2 and rel.endswith(".ts"):
                tree.extensions.append(_parse_extension(parts[1][:-3], text, rel))
            elif parts[0] == "skills" and len(parts) >= 3:
                skill_parts.setdefault(parts[1], {})["/".join(parts[2:])] = text
            else:
                problems.append(f"{rel}: {_where_it_belongs(parts)}")
        except TreeError as exc:
            problems.extend(exc.problems)
    if total > limits.max_tree_bytes:
        problems.append(f"tree is {total} bytes, over the {limits.max_tree_bytes}-byte limit")
    for name, skill_files in sorted(skill_parts.items()):
        try:
            tree.skills.append(_parse_skill(name, skill_files))
        except TreeError as exc:
            problems.extend(exc.problems)
    if problems:
        raise invalid(where, problems)
    return tree


def _where_it_belongs(parts: tuple[str, ...]) -> str:
    if parts[0] in KINDS:
        expected = {
            "rules": "rules/<name>.md",
            "skills": "skills/<name>/SKILL.md",
            "commands": "commands/<name>.md",
            "extensions": "extensions/<name>.ts",
        }[parts[0]]
        return f"unexpected path; {parts[0]} must look like {expected}"
    return f"unexpected entry; a tree holds only {', '.join(KINDS)} and {MANIFEST}"


def _require_str(meta: dict[str, Any], key: str, rel: str) -> str:
    value = meta.pop(key, None)
    if not isinstance(value, str) or not value.strip():
        raise TreeError(f"{rel}: frontmatter needs a non-empty '{key}'")
    if key == "description" and len(value) > MAX_DESCRIPTION:
        raise TreeError(f"{rel}: description is over {MAX_DESCRIPTION} characters")
    return value


def _check_kebab(kind: str, name: str, rel: str) -> None:
    if not is_kebab(name):
        raise TreeError(f"{rel}: {kind} name {name!r} is not kebab-case (e.g. 'fix-bugs')")


def _parse_rule(name: str, text: str, rel: str) -> Rule:
    _check_kebab("rule", name, rel)
    meta, body = split_frontmatter(text, rel)
    if not body.strip():
        raise TreeError(f"{rel}: rule is empty")
    return Rule(name=name, body=body, meta=meta or {})


def _parse_command(name: str, text: str, rel: str) -> Command:
    _check_kebab("command", name, rel)
    meta, body = split_frontmatter(text, rel)
    if meta is None:
        raise TreeError(f"{rel}: commands need frontmatter with a description")
    description = _require_str(meta, "description", rel)
    hint = meta.pop("argument-hint", None)
    if hint is not None and not isinstance(hint, str):
        raise TreeError(f"{rel}: 'argument-hint' must be text")
    return Command(name=name, description=description, argument_hint=hint, body=body, meta=meta)


def _parse_extension(name: str, text: str, rel: str) -> Extension:
    _check_kebab("extension", name, rel)
    if not text.strip():
        raise TreeError(f"{rel}: extension is empty")
    return Extension(name=name, source=text)


def _parse_skill(name: str, files: dict[str, str]) -> Skill:
    rel = f"skills/{name}/SKILL.md"
    _check_kebab("skill", name, rel)
    if "SKILL.md" not in files:
        raise TreeError(f"skills/{name}/: missing SKILL.md")
    meta, body = split_frontmatter(files["SKILL.md"], rel)
    if meta is None:
        raise TreeError(f"{rel}: needs frontmatter with name and description")
    declared = _require_str(meta, "name", rel)
    if declared != name:
        raise TreeError(f"{rel}: frontmatter name {declared!r} differs from the folder {name!r}")
    description = _require_str(meta, "description", rel)
    others = {k: v for k, v in files.items() if k != "SKILL.md"}
    return Skill(name=name, description=description, body=body, meta=meta, files=others)


def _parse_manifest(text: str, rel: str) -> Manifest:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TreeError(f"{rel}: not valid TOML ({' '.join(str(exc).split())})") from exc
    except RecursionError as exc:
        raise TreeError(
            f"{rel}: nested too deeply; it holds only format = 1 and a [requires] table"
        ) from exc
    check_shape(data, rel)
    from pydantic import ValidationError

    try:
        manifest = Manifest.model_validate(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            where = ".".join(str(p) for p in err["loc"])
            problems.append(f"{rel}: {where + ': ' if where else ''}{err['msg']}")
        raise TreeError(problems[0], problems=problems) from exc
    if manifest.format != TREE_FORMAT:
        raise TreeError(
            f"{rel}: format {manifest.format} is not supported (expected {TREE_FORMAT})"
        )
    return manifest


# ---------------------------------------------------------------- rendering


def _render_manifest(manifest: Manifest) -> str:
    import tomli_w

    return tomli_w.dumps(manifest.model_dump())


def starter_tree() -> HarnessTree:
    """A small, useful tree for `reef harness init`."""
    return HarnessTree(
        rules=[
            Rule(
                name="working-style",
                body=(
                    "# Working style\n\n"
                    "- Read the relevant code before changing it.\n"
                    "- Keep changes small and explain what you changed and why.\n"
                    "- Run the project's tests before saying a task is done.\n"
                ),
            )
        ],
        skills=[
            Skill(
                name="write-tests",
                description="Write focused tests for new or changed behaviour. Use when adding "
                "a feature or fixing a bug.",
                body=(
                    "\n# Write tests\n\n"
                    "1. Find the test file that mirrors the module you touch.\n"
                    "2. Write one test per behaviour, named after the behaviour.\n"
                    "3. Run it, watch it fail for the right reason, then make it pass.\n"
                ),
            )
        ],
        commands=[
            Command(
                name="review",
                description="Review the current diff for bugs and unclear code",
                argument_hint="[path]",
                body=(
                    "\nReview the uncommitted changes in $ARGUMENTS (or the whole repo).\n"
                    "List real bugs first, then unclear names, then missing tests.\n"
                ),
            )
        ],
    )
