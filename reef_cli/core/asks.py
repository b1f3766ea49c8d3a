"""Checking a person's ask before any model sees it: size, secrets, policy, ambiguity.

Lives in core because both the CLI and `reef serve` (``POST /reef/evolve``) refuse a bad
ask before queueing anything; the Reefine recipe checks again after clarification.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from reef_cli.core.errors import AskRefused

__all__ = [
    "MAX_ASK_CHARS",
    "AskRefused",
    "check_ask",
    "check_outgoing",
    "clarified",
    "clarifying_questions",
    "file_ask",
    "filed_asks",
    "mark_sent",
]

MAX_ASK_CHARS = 2000


# The ask `reef quickstart` and `POST /reef/quickstart` evolve when given none.
QUICKSTART_ASK = "when I ask you to fix a bug, reproduce it with a failing test first"


def check_ask(ask: str) -> str:
    """The ask, whitespace-normalised; ``AskRefused`` with the reason otherwise."""
    text = " ".join(ask.split())
    if not text:
        raise AskRefused("the ask is empty", 'say what should change, e.g. reef evolve "…"')
    if len(text) > MAX_ASK_CHARS:
        raise AskRefused(
            f"the ask is {len(text)} characters; at most {MAX_ASK_CHARS} fit in one change",
            "say it in a sentence or two; put long material in a skill file and publish it",
        )
    check_outgoing("ask", text)
    from reef_cli.core import policy  # its patterns compile on import: not at `reef --help`

    violations = policy.scan_text(text, "ask")
    if violations:
        raise AskRefused(
            f"the ask was refused: it would make the agent {violations[0].rule.replace('-', ' ')}",
            "Reef does not build harness changes that leak secrets or weaken the sandbox",
        )
    return text


def check_outgoing(what: str, text: str) -> None:
    """Refuse ``text`` that holds a credential before it is sent to any model (which may
    be hosted): the error names the rule and where, never the value. Used on the ask and
    on every piece of evidence a recipe sends out (transcripts, task files)."""
    from reef_cli.core.secrets import scan_text

    findings = scan_text(what, text)
    if findings:
        first = findings[0]
        raise AskRefused(
            f"the {what} holds what looks like a secret ({first.rule}, line {first.line}); "
            "nothing was sent to the model",
            "remove the secret; name the environment variable that holds it instead",
        )


_ACTION = (  # searched with ``re``'s cache: compiled on first use, not at `reef --help`
    r"\b(?:always|never|when|whenever|before|after|use|prefer|avoid|write|run|add|keep|make|"
    r"check|ask|reproduce|test|explain|review|follow|do|don't|should|must|please)\b"
)


def clarifying_questions(ask: str) -> list[str]:
    """Up to two questions when an ask is too vague to act on (asked unless --yes)."""
    questions = []
    words = ask.split()
    if len(words) < 4 or not re.search(_ACTION, ask, re.IGNORECASE):
        questions.append("What should the agent do differently? (one sentence, e.g. 'always …')")
    if not re.search(r"\b(?:when|whenever|if|before|after|always|every)\b", ask, re.IGNORECASE):
        questions.append("When should this apply? (e.g. 'when I ask for a bug fix'; empty: always)")
    return questions[:2]


def clarified(ask: str, answer: Callable[[str], str]) -> str:
    """The ask with the person's answers to its clarifying questions appended (each
    checked again); ``answer`` asks one question and returns the reply ('' skips it)."""
    ask = check_ask(ask)
    for question in clarifying_questions(ask):
        reply = answer(question).strip()
        if reply:
            ask = check_ask(f"{ask}. {reply}")
    return ask


# ------------------------------------------------------------------ asks filed in a session

ASKS_DIR = "asks"  # under the state dir: one JSON file per ask an agent's /evolve filed


def file_ask(
    ask: str,
    *,
    scenario: str,
    agent: str,
    installed_release: int | None,
    session: str | None,
    cwd: str,
    **extra: object,
) -> Path:
    """Keep an ask a person typed into an agent (``/evolve <ask>``) for `reef-<agent>
    evolve`: checked like any ask first (a credential or a refused change is one line, and
    nothing is written), then written atomically, private, as
    ``<state dir>/asks/<time>-<pid>-<random>.json`` — the format pi's extension writes."""
    import json
    import os
    import secrets as random
    from datetime import UTC, datetime

    from reef_cli.core import paths
    from reef_cli.core.fsutil import atomic_write_text

    text = check_ask(ask)
    folder = paths.ensure_state_dir() / ASKS_DIR
    folder.mkdir(mode=0o700, exist_ok=True)
    now = datetime.now(UTC)
    stamp = now.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    name = f"{stamp.replace(':', '-').replace('.', '-')}-{os.getpid()}-{random.token_hex(3)}"
    record = {
        "ask": text,
        "scenario": scenario,
        "installed_release": installed_release,
        "agent": agent,
        "reef_session": session,
        **extra,
        "cwd": cwd,
        "created_at": stamp,
    }
    path = folder / f"{name}.json"
    atomic_write_text(path, json.dumps(record, indent=2) + "\n", 0o600)
    return path


def filed_asks(scenario: str, agent: str) -> list[tuple[Path, dict[str, object]]]:
    """The asks ``agent``'s ``/evolve`` filed for ``scenario`` and nobody sent yet, oldest
    first, each with its file. A file that cannot be read as an ask is left where it is."""
    import json

    from reef_cli.core import paths

    folder = paths.state_dir() / ASKS_DIR
    out: list[tuple[Path, dict[str, object]]] = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            continue
        if (
            isinstance(data, dict)
            and isinstance(data.get("ask"), str)
            and data.get("scenario") == scenario
            and data.get("agent") == agent
        ):
            out.append((path, data))
    return out


def mark_sent(path: Path, job: str) -> Path:
    """Move a filed ask to ``asks/sent/``, with the id of the job it became: it is not
    sent twice, and what each ask became stays findable."""
    import json

    from reef_cli.core.fsutil import atomic_write_text

    data = json.loads(path.read_text(encoding="utf-8"))
    sent = path.parent / "sent"
    sent.mkdir(mode=0o700, exist_ok=True)
    target = sent / path.name
    atomic_write_text(target, json.dumps({**data, "job": job}, indent=2) + "\n", 0o600)
    path.unlink()
    return target
