"""The last check before text leaves SkillClaw: no credential reaches a model, the tree
or the release metadata.

``core.evidence`` already withholds every turn and feedback text that holds one; this
scans again what is built from them (a prompt joins many texts, and the scanner also
joins values split across lines), and every text a model wrote before it is kept.
"""

from __future__ import annotations

from collections.abc import Iterable

from reef_cli.core.secrets import scan_text


def holds_credential(*texts: str) -> bool:
    return any(scan_text("skillclaw", text) for text in texts if text)


def clean(messages: Iterable[dict[str, str]]) -> bool:
    """True when no message of a prompt holds a credential (so it may be sent)."""
    return not holds_credential(*(str(m.get("content") or "") for m in messages))
