"""Policy screen: text that tries to make an agent leak secrets or escape isolation.

Used twice: on a person's ask before any model sees it, and by the gate on every tree a
recipe drafts (a model may write such text whatever it was asked). The patterns are
deliberately narrow — an instruction to *send* credentials somewhere or to *turn off*
the sandbox — so ordinary advice like "never print secrets" passes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

_SECRET_WORDS = (
    r"(?:secrets?|credentials?|api[ _-]?keys?|tokens?|passwords?|private keys?|ssh keys?)"
)
_SECRET_FILES = (
    r"(?:~/\.ssh|\.ssh/id_\w+|id_rsa|\.env\b|\.aws/credentials|\.netrc|environment variables|"
    r"\$\((?:env|printenv)\)|\bprintenv\b|/etc/shadow)"
)
_SECRETISH = rf"(?:{_SECRET_WORDS}|{_SECRET_FILES})"
# Prose verbs need only a secret-ish word; network tools need a secret *source* (a key
# file, the environment), so `curl -H "Authorization: Bearer <token>"` in docs passes.
_SEND = r"(?:send|upload|post|exfiltrate|leak|transmit|forward|email|paste)"
_TOOL = r"(?:curl|wget|nc|netcat|scp)"
_DISABLE = r"(?:disable|turn off|bypass|skip|escape|get around|remove|switch off)"

RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "exfiltrate-secrets",
        re.compile(
            rf"\b{_SEND}\b[^.\n]{{0,80}}{_SECRETISH}|\b{_TOOL}\b[^\n]{{0,80}}{_SECRET_FILES}|"
            rf"{_SECRETISH}[^.\n]{{0,60}}\b(?:to|into)\s+"
            r"(?:https?://|a (?:remote|external)|my server|pastebin|webhook|an? (?:url|endpoint))",
            re.IGNORECASE,
        ),
    ),
    (
        "disable-sandbox",
        re.compile(
            rf"\b{_DISABLE}\b[^.\n]{{0,40}}\b(?:the\s+)?(?:sandbox|bwrap|bubblewrap|isolation|"
            r"network restrictions?)|REEF_(?:PROPOSER_)?SANDBOX\s*=\s*none|--unsandboxed",
            re.IGNORECASE,
        ),
    ),
    (
        "dump-secrets",
        re.compile(
            r"\b(?:cat|print|show|read|dump|display)\b[^.\n]{0,40}(?:~/\.ssh|id_rsa|/etc/shadow|"
            r"\.aws/credentials|\.netrc|all environment variables)",
            re.IGNORECASE,
        ),
    ),
)

_NEGATION = re.compile(
    r"\b(?:never|don'?t|do not|must not|mustn'?t|refuse to|avoid)\b[^.\n]{0,30}$", re.IGNORECASE
)


@dataclass(frozen=True)
class Violation:
    rule: str
    where: str

    def __str__(self) -> str:
        return f"{self.rule} at {self.where}"


def scan_text(text: str, where: str = "text") -> list[Violation]:
    found = []
    for number, line in enumerate(text.splitlines() or [text], start=1):
        for rule, pattern in RULES:
            for match in pattern.finditer(line):
                if _NEGATION.search(line[: match.start()]):
                    continue  # "never send secrets to …" is the opposite of a violation
                found.append(Violation(rule, f"{where}:{number}"))
                break
    return found


def scan_files(files: Mapping[str, str]) -> list[Violation]:
    return [v for path in sorted(files) for v in scan_text(files[path], path)]
