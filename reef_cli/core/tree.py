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

import hashlib
import os
import stat
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field

from reef_cli.core.errors import TreeError
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
            out[f"rules/{rule.name}.md"] = _with_frontmatter(rule.meta, rule.body)
        for skill in self.skills:
            head = {"name": skill.name, "description": skill.description, **skill.meta}
            out[f"skills/{skill.name}/SKILL.md"] = _with_frontmatter(head, skill.body)
            for rel, text in skill.files.items():
                out[f"skills/{skill.name}/{rel}"] = text
        for cmd in self.commands:
            head = {"description": cmd.description}
            if cmd.argument_hint is not None:
                head["argument-hint"] = cmd.argument_hint
            out[f"commands/{cmd.name}.md"] = _with_frontmatter({**head, **cmd.meta}, cmd.body)
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


def content_hash(files: Mapping[str, str]) -> str:
    """sha256 over sorted (path, text) pairs: equal trees hash equal, whatever the order."""
    digest = hashlib.sha256()
    for rel in sorted(files):
        data = files[rel].encode("utf-8")
        digest.update(rel.encode("utf-8") + b"\0" + str(len(data)).encode() + b"\0" + data)
    return "sha256:" + digest.hexdigest()


# ---------------------------------------------------------------- reading a folder


def read_folder(root: Path, limits: Limits = Limits()) -> dict[str, str]:
    """Read every file under ``root`` as UTF-8 text, enforcing the safety rules first.

    No symlinks, nothing outside the tree, no special files, no binary or oversize files.
    Size is checked with ``lstat`` before reading, so a 50 MB file is never loaded.
    """
    if not root.exists():
        raise TreeError(
            f"harness tree {root} does not exist", "create one with `reef harness init`"
        )
    if root.is_symlink() or not root.is_dir():
        raise TreeError(f"harness tree {root} is not a directory", "pass the tree's folder")
    problems: list[str] = []
    files: dict[str, str] = {}
    total = 0
    base = root.resolve()
    for dirpath, dirnames, filenames in os.walk(base, followlinks=False):
        here = Path(dirpath)
        dirnames[:] = sorted(d for d in dirnames if d not in IGNORED_NAMES)
        for name in list(dirnames):
            if (here / name).is_symlink():
                problems.append(f"{_rel(here / name, base)}: symlinks are not allowed")
                dirnames.remove(name)
        for name in sorted(filenames):
            if name in IGNORED_NAMES:
                continue
            path = here / name
            rel = _rel(path, base)
            info = path.lstat()
            if stat.S_ISLNK(info.st_mode):
                problems.append(f"{rel}: symlinks are not allowed (copy the file in instead)")
                continue
            if not stat.S_ISREG(info.st_mode):
                problems.append(f"{rel}: not a regular file")
                continue
            if info.st_size > limits.max_file_bytes:
                problems.append(
                    f"{rel}: {info.st_size} bytes is over the {limits.max_file_bytes}-byte limit"
                )
                continue
            total += info.st_size
            if total > limits.max_tree_bytes:
                problems.append(f"tree is over the {limits.max_tree_bytes}-byte limit at {rel}")
                break
            if len(files) >= limits.max_files:
                problems.append(f"tree has more than {limits.max_files} files")
                break
            try:
                files[rel] = decode_text(path.read_bytes(), rel)
            except TreeError as exc:
                problems.append(exc.message)
    if problems:
        raise invalid(root, problems)
    return files


def decode_text(data: bytes, rel: str) -> str:
    if b"\0" in data:
        raise TreeError(f"{rel}: binary file (harness trees hold UTF-8 text only)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TreeError(f"{rel}: not UTF-8 text (byte {exc.start})") from exc


def _rel(path: Path, base: Path) -> str:
    return path.relative_to(base).as_posix()


def invalid(where: object, problems: list[str]) -> TreeError:
    more = f" (and {len(problems) - 1} more problem(s))" if len(problems) > 1 else ""
    return TreeError(
        f"harness tree {where} is invalid: {problems[0]}{more}",
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
        total += len(text.encode("utf-8"))
        if len(text.encode("utf-8")) > limits.max_file_bytes:
            problems.append(f"{rel}: over the {limits.max_file_bytes}-byte limit")
            continue
        if "\0" in text:
            problems.append(f"{rel}: binary file (harness trees hold UTF-8 text only)")
            continue
        parts = PurePosixPath(rel).parts
        if not parts or rel.startswith("/") or ".." in parts or "\\" in rel:
            problems.append(f"{rel}: path escapes the tree")
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
            problems.append(exc.message)
    if total > limits.max_tree_bytes:
        problems.append(f"tree is {total} bytes, over the {limits.max_tree_bytes}-byte limit")
    for name, skill_files in sorted(skill_parts.items()):
        try:
            tree.skills.append(_parse_skill(name, skill_files))
        except TreeError as exc:
            problems.append(exc.message)
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


def split_frontmatter(text: str, rel: str) -> tuple[dict[str, Any] | None, str]:
    """Split ``---``-delimited YAML frontmatter from the body; ``None`` if there is none."""
    if not text.startswith("---\n") and not text.startswith("---\r\n"):
        return None, text
    lines = text.splitlines(keepends=True)
    for index in range(1, len(lines)):
        if lines[index].rstrip("\r\n") == "---":
            raw = "".join(lines[1:index])
            body = "".join(lines[index + 1 :])
            break
    else:
        raise TreeError(f"{rel}:1: frontmatter opened with --- but never closed")
    try:
        data = yaml.safe_load(raw) if raw.strip() else {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 2 if mark is not None else 1
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise TreeError(f"{rel}:{line}: malformed frontmatter ({problem})") from exc
    if not isinstance(data, dict):
        raise TreeError(f"{rel}:2: frontmatter must be a mapping of key: value")
    return {str(k): v for k, v in data.items()}, body


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
        raise TreeError(f"{rel}: not valid TOML ({exc})") from exc
    from pydantic import ValidationError

    try:
        manifest = Manifest.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise TreeError(f"{rel}: {where}: {err['msg']}") from exc
    if manifest.format != TREE_FORMAT:
        raise TreeError(
            f"{rel}: format {manifest.format} is not supported (expected {TREE_FORMAT})"
        )
    return manifest


# ---------------------------------------------------------------- rendering


def _render_manifest(manifest: Manifest) -> str:
    import tomli_w

    return tomli_w.dumps(manifest.model_dump())


def _with_frontmatter(meta: Mapping[str, Any], body: str) -> str:
    if not meta:
        return body
    head = yaml.safe_dump(dict(meta), sort_keys=False, allow_unicode=True, width=1000)
    return f"---\n{head}---\n{body}"


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
