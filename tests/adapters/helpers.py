"""What the adapter tests share: a harness tree, a release of it, a stand-in agent binary,
a snapshot of a folder (to check that nothing changed, byte for byte) and a hook run."""

from __future__ import annotations

import io
import json
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from adapters.base import ReleaseToInstall


def tree(rule: str, *, extra: dict[str, str] | None = None) -> dict[str, str]:
    """A harness tree: one rule, one skill with a second file, one command."""
    return {
        "reef.toml": "format = 1\n",
        "rules/style.md": f"# Style\n\n{rule}\n",
        "skills/fix-bugs/SKILL.md": (
            "---\nname: fix-bugs\ndescription: Reproduce a bug with a failing test first.\n"
            "---\n\nSteps.\n"
        ),
        "skills/fix-bugs/checklist.md": "- reproduce\n",
        "commands/review.md": (
            "---\ndescription: Review the diff\nargument-hint: '[files]'\n---\n\n"
            "Review $ARGUMENTS.\n"
        ),
        **(extra or {}),
    }


def release(number: int = 1, files: dict[str, str] | None = None) -> ReleaseToInstall:
    return ReleaseToInstall("demo", number, files or tree("Rule (rule-x)."), "sha256:x", number)


def fake_agent(
    folder: Path,
    name: str,
    version: str,
    *,
    code: int = 0,
    to_stderr: bool = False,
    then: str = "echo ran",
) -> str:
    """A stand-in agent binary ``folder/name``: ``--version`` prints ``version`` (on stderr
    with ``to_stderr``) and exits ``code``; any other call runs the shell line ``then``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    redirect = " >&2" if to_stderr else ""
    path.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = "--version" ]; then echo {shlex.quote(version)}{redirect}; exit {code}; fi\n'
        f"{then}\n"
    )
    path.chmod(0o755)
    return str(path)


def snapshot(root: Path, *, folders: bool = True) -> dict[str, bytes | None]:
    """Every path under ``root``: a file's bytes, or None for a folder (``folders=False``:
    files only)."""
    if not root.exists():
        return {}
    return {
        str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None)
        for p in sorted(root.rglob("*"))
        if folders or p.is_file()
    }


def hook_output(
    main: Callable[[list[str]], int],
    event: str,
    config: Path,
    payload: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
) -> Any:
    """What a hook's ``main`` prints (parsed) for ``event`` with ``payload`` on stdin, as
    the agent runs it; None when it prints nothing. It must exit 0."""
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps(payload)))
    monkeypatch.setattr(sys, "stdout", out)
    assert main([event, "--config", str(config)]) == 0
    text = out.getvalue().strip()
    return json.loads(text) if text else None
