"""Whole-tree credential scan: detect-secrets' pattern detectors plus Reef's own rules.

A finding names the rule and ``file:line`` and never carries the secret itself, so it is
safe to print, log and store. Obvious placeholders (``sk-...``, ``YOUR_API_KEY``,
``<token>``) are not findings. Values split across lines by string concatenation or a
line continuation are joined before scanning.
"""

from __future__ import annotations

import bisect
import hashlib
import math
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any


@dataclass(frozen=True, order=True)
class Finding:
    path: str
    line: int
    rule: str

    def __str__(self) -> str:
        return f"{self.rule} at {self.path}:{self.line}"


# Reef's own rules: the formats detect-secrets misses or matches too loosely — the key
# formats of the model providers LiteLLM routes to (where a key has a recognisable
# format; keys without one, e.g. Mistral's, Cohere's or Azure OpenAI's, are caught by the
# assignment rule below through the variable they are assigned to), and of the code
# hosts and services a coding agent's harness commonly touches. More specific rules come
# first: a value matched by two rules is reported once, under the first. A rule with a
# group named ``s`` reports that group (its context is not the secret).
_HEX = "0-9a-f"
_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    # -- model providers
    ("anthropic-api-key", re.compile(r"\bsk-ant-[a-z]{2,8}\d{0,3}-[A-Za-z0-9_-]{20,}")),
    ("openrouter-api-key", re.compile(rf"\bsk-or-v1-[{_HEX}]{{64}}\b")),
    (
        "langfuse-secret-key",
        re.compile(
            rf"\bsk-lf-[{_HEX}]{{8}}-[{_HEX}]{{4}}-[{_HEX}]{{4}}-[{_HEX}]{{4}}-[{_HEX}]{{12}}\b"
        ),
    ),
    # DeepSeek's form, shared by Alibaba DashScope (Qwen): sk- and 32 hex digits.
    ("deepseek-api-key", re.compile(rf"\bsk-[{_HEX}]{{32}}\b")),
    (
        "openai-api-key",
        re.compile(r"\bsk-(?:proj-|svcacct-|admin-|None-)?(?!ant-)[A-Za-z0-9_-]{20,}"),
    ),
    ("google-api-key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}")),
    ("google-api-key", re.compile(r"(?<![A-Za-z0-9_.-])AQ\.[A-Za-z0-9_-]{45,55}(?![A-Za-z0-9_-])")),
    ("google-oauth-client-secret", re.compile(r"\bGOCSPX-[A-Za-z0-9_-]{28}(?![A-Za-z0-9_-])")),
    ("google-oauth-access-token", re.compile(r"\bya29\.[A-Za-z0-9_-]{30,}")),
    ("groq-api-key", re.compile(r"\bgsk_[A-Za-z0-9]{52}\b")),
    ("xai-api-key", re.compile(r"\bxai-[A-Za-z0-9]{80}\b")),
    ("huggingface-token", re.compile(r"\b(?:hf_|api_org_)[A-Za-z0-9]{30,}")),
    ("replicate-api-token", re.compile(r"\br8_[A-Za-z0-9]{37}\b")),
    ("together-api-key", re.compile(r"\btgp_v1_[A-Za-z0-9_-]{40,}")),
    ("fireworks-api-key", re.compile(r"\bfw_[A-Za-z0-9]{20,}\b")),
    ("perplexity-api-key", re.compile(r"\bpplx-[A-Za-z0-9]{40,}\b")),
    ("voyage-api-key", re.compile(r"\bpa-[A-Za-z0-9_-]{40,}")),
    ("cerebras-api-key", re.compile(r"\bcsk-[A-Za-z0-9]{40,}\b")),
    ("nvidia-api-key", re.compile(r"\bnvapi-[A-Za-z0-9_-]{60,}")),
    ("databricks-token", re.compile(rf"\bdapi[{_HEX}]{{32}}(?:-\d+)?\b")),
    ("langsmith-api-key", re.compile(rf"\blsv2_(?:pt|sk)_[{_HEX}]{{32}}_[{_HEX}]{{10}}\b")),
    ("elevenlabs-api-key", re.compile(rf"\bsk_[{_HEX}]{{48}}\b")),
    ("jina-api-key", re.compile(r"\bjina_[A-Za-z0-9_-]{40,}")),
    ("tavily-api-key", re.compile(r"\btvly-(?:dev-|prod-)?[A-Za-z0-9]{24,}\b")),
    ("anyscale-api-key", re.compile(r"\besecret_[A-Za-z0-9]{20,}\b")),
    ("friendli-token", re.compile(r"\bflp_[A-Za-z0-9]{20,}\b")),
    ("pinecone-api-key", re.compile(r"\bpcsk_[A-Za-z0-9_]{40,}")),
    ("firecrawl-api-key", re.compile(rf"\bfc-[{_HEX}]{{32}}\b")),
    # -- clouds
    ("aws-access-key-id", re.compile(r"\b(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}\b")),
    (
        "aws-secret-access-key",
        re.compile(
            r"(?i)aws_?secret_?(?:access_?)?key\b[\"']?\s*(?::=|=>|[:=])\s*[\"'`]?"
            r"(?P<s>(?-i:[A-Za-z0-9/+]{40}))(?![A-Za-z0-9/+=])"
        ),
    ),
    ("aws-bedrock-api-key", re.compile(r"\bABSKQmVkcm9ja0FQSUtleS[A-Za-z0-9+/]{20,}={0,2}")),
    (
        "azure-ad-client-secret",
        re.compile(
            r"(?<![A-Za-z0-9_~.-])[A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.-]{31,34}(?![A-Za-z0-9_~.-])"
        ),
    ),
    ("digitalocean-token", re.compile(rf"\bdo[por]_v1_[{_HEX}]{{64}}\b")),
    # -- code hosts, chat, payments, packages, tools
    ("github-token", re.compile(r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,}\b")),
    ("github-fine-grained-token", re.compile(r"\bgithub_pat_[A-Za-z0-9_]{40,}")),
    (
        "gitlab-token",
        re.compile(r"\bgl(?:pat|dt|rt|ptt|ft|cbt|imt|oas|soat|agent)-[A-Za-z0-9_-]{20,}"),
    ),
    ("slack-token", re.compile(r"\bxox[abposre]-[A-Za-z0-9-]{10,}")),
    ("slack-app-token", re.compile(r"\bxapp-\d-[A-Z0-9]+-\d+-[a-z0-9]{32,}")),
    (
        "slack-webhook",
        re.compile(r"https://hooks\.slack\.com/services/T[A-Z0-9]+/B[A-Z0-9]+/[A-Za-z0-9]{16,}"),
    ),
    # Stripe's publishable pk_live_ keys are public by design; secret and restricted keys are not.
    ("stripe-live-key", re.compile(r"\b(?:sk|rk)_live_[0-9A-Za-z]{20,}")),
    (
        "jwt",
        re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{16,}"),
    ),
    ("npm-token", re.compile(r"\bnpm_[A-Za-z0-9]{36}\b")),
    ("pypi-token", re.compile(r"\bpypi-AgE[A-Za-z0-9_-]{50,}")),
    ("linear-api-key", re.compile(r"\blin_api_[A-Za-z0-9]{40}\b")),
    ("notion-token", re.compile(r"\bntn_[A-Za-z0-9]{40,}\b")),
    ("sentry-token", re.compile(rf"\bsntry[us]_(?:[{_HEX}]{{64}}\b|eyJ[A-Za-z0-9_+/=-]{{40,}})")),
    ("doppler-token", re.compile(r"\bdp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,}\b")),
    # A bearer credential in a header, whatever its issuer (last: a known format wins).
    ("bearer-token", re.compile(r"\b[Bb]earer\s+(?P<s>[A-Za-z0-9._~+/-]{24,}=*)")),
)

# Rules whose prefix is short or generic: the rest of the value must look generated (mixed
# letters and digits, not a word), or ``pa-…`` and ``fw_…`` would match names.
_NEEDS_RANDOM = frozenset(
    {
        "google-api-key",
        "google-oauth-access-token",
        "fireworks-api-key",
        "perplexity-api-key",
        "voyage-api-key",
        "cerebras-api-key",
        "nvidia-api-key",
        "jina-api-key",
        "tavily-api-key",
        "anyscale-api-key",
        "friendli-token",
        "pinecone-api-key",
        "together-api-key",
        "azure-ad-client-secret",
        "notion-token",
        "bearer-token",
    }
)
_PREFIX = re.compile(r"^(?:[A-Za-z0-9]{1,10}[-_.~])+?(?=[A-Za-z0-9+/]{16})")


def _generated(secret: str) -> bool:
    """The part after the prefix has letters and digits and enough entropy, and is not a
    name made of words (``pa-2024-release-notes-v2``)."""
    tail = _PREFIX.sub("", secret, count=1)
    chunks = [c for c in re.split(r"[-_.~]", tail) if c]
    if len(chunks) >= 2 and all(_WORDY.fullmatch(c) for c in chunks):
        return False
    return (
        any(c.isdigit() for c in tail) and any(c.isalpha() for c in tail) and entropy(tail) >= 3.5
    )


_WORDY = re.compile(r"[a-z]+\d{0,2}|\d+|[A-Z][a-z]+|[A-Z]+")


_PRIVATE_KEY = re.compile(
    r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----[\s\"'\\n,+]*"
    r"(?:[A-Za-z0-9+/=:\-]+[\s\"'\\n,+]*){0,6}[A-Za-z0-9+/]{40,}"
)

# Providers whose keys have no recognisable format: ``MISTRAL_KEY=…``, ``cohereKey: …``.
_PROVIDERS = (
    r"(?:openai|anthropic|claude|gemini|google|vertex|groq|mistral|codestral|cohere|xai|grok|"
    r"together|fireworks|perplexity|deepseek|openrouter|replicate|huggingface|hf|voyage|"
    r"cerebras|nvidia|nim|databricks|azure|bedrock|aws|deepinfra|ai21|anyscale|sambanova|"
    r"novita|nebius|nscale|jina|elevenlabs|deepgram|assemblyai|tavily|exa|serper|langfuse|"
    r"langsmith|wandb|pinecone|cloudflare|watsonx|ibm|clarifai|featherless|friendli|"
    r"hyperbolic|lambda|baseten|predibase|moonshot|dashscope|qwen|zhipu|volcengine|minimax|"
    r"litellm|master)"
)
_ASSIGNMENT = re.compile(
    r"(?i)(?P<key>[A-Za-z0-9_.\-]*(?:api[_\-]?key|apikey|token|secret|passwd|password|pwd|"
    r"access[_\-]?key|private[_\-]?key|credential|auth|"
    + _PROVIDERS
    + r"[A-Za-z0-9]*[_\-.]?key)[A-Za-z0-9_.\-]*)"
    r"[\"']?\s*(?::=|=>|[:=])\s*[\"'`]?(?P<value>[^\s\"'`,;)]{16,})"
)

_PLACEHOLDER_MARKERS = (
    "...",
    "xxxx",
    "your",
    "example",
    "placeholder",
    "redacted",
    "changeme",
    "replace",
    "insert",
    "dummy",
    "<",
    ">",
    "{{",
    "${",
    "***",
    "$(",
    "%s",
    "fake-",
    "not-a-",
)

# Lowercase words joined by - or _ (``sk-code-review-helper``): a name, never a generated key.
_IDENTIFIER = re.compile(r"[a-z]+(?:[-_][a-z]+)+")

# A URL or a filesystem path is judged by its parts: a secret only if one part is.
# (A bare "/" starts a path only in lowercase: base64 secrets may start with "/" too.)
_URL_OR_PATH = re.compile(r"^(?:[A-Za-z][A-Za-z0-9+.-]*://|~/|\.\.?/|/[a-z0-9._/-]*$)")
_URL_PART = re.compile(r"[^/?&#=:@.]+")

_TOKEN = re.compile(r"[A-Za-z0-9_\-+/=.]+")

_REFERENCE = re.compile(
    r"^(?:[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*|\[[^\]]*\])+(?:\(.*)?|[A-Z][A-Z0-9_]+|\$\w+)$"
)

# Joins for values split across lines: "abc" +\n "def", "abc"\n"def", `abc` +\n `def`, and
# backslash-newline.
_SPLIT = re.compile(r"[\"'`]\s*\+?\s*\\?\r?\n\s*\+?\s*[\"'`]|\\\r?\n\s*")


def entropy(value: str) -> float:
    counts: dict[str, int] = {}
    for char in value:
        counts[char] = counts.get(char, 0) + 1
    total = len(value)
    return -sum(n / total * math.log2(n / total) for n in counts.values())


def is_placeholder(secret: str) -> bool:
    lowered = secret.lower()
    if any(marker in lowered for marker in _PLACEHOLDER_MARKERS):
        return True
    tail = re.sub(r"^[a-z]+[_-](?:[a-z]+[_-])?", "", lowered)
    return len(set(tail)) < min(6, len(tail) / 2)  # sk-aaaa…, ghp_0000…: a few chars repeated


def _assignment_is_secret(value: str) -> bool:
    if _REFERENCE.match(value) or is_placeholder(value):
        return False
    if _URL_OR_PATH.match(value):
        return any(_looks_random(part) for part in _URL_PART.findall(value))
    return _looks_random(value)


def _looks_random(value: str) -> bool:
    if len(value) < 16 or is_placeholder(value):
        return False
    has_letter = any(c.isalpha() for c in value)
    has_digit = any(c.isdigit() for c in value)
    return has_letter and has_digit and entropy(value) >= 3.5


@lru_cache(maxsize=1)
def _detect_secrets_plugins() -> tuple[Any, ...]:
    """The pattern-based detectors of detect-secrets (its entropy and keyword plugins are
    replaced by the assignment rule above, which knows about placeholders and references)."""
    from detect_secrets.plugins import (
        artifactory,
        aws,
        azure_storage_key,
        basic_auth,
        discord,
        github_token,
        gitlab_token,
        jwt,
        mailchimp,
        npm,
        openai,
        pypi_token,
        sendgrid,
        slack,
        square_oauth,
        stripe,
        telegram_token,
        twilio,
    )

    classes = (
        artifactory.ArtifactoryDetector,
        aws.AWSKeyDetector,
        azure_storage_key.AzureStorageKeyDetector,
        basic_auth.BasicAuthDetector,
        discord.DiscordBotTokenDetector,
        github_token.GitHubTokenDetector,
        gitlab_token.GitLabTokenDetector,
        jwt.JwtTokenDetector,
        mailchimp.MailchimpDetector,
        npm.NpmDetector,
        openai.OpenAIDetector,
        pypi_token.PypiTokenDetector,
        sendgrid.SendGridDetector,
        slack.SlackDetector,
        square_oauth.SquareOAuthDetector,
        stripe.StripeDetector,
        telegram_token.TelegramBotTokenDetector,
        twilio.TwilioKeyDetector,
    )
    return tuple(cls() for cls in classes)


def _plugin_rule(plugin: Any) -> str:
    return "detect-secrets:" + re.sub(r"[^a-z0-9]+", "-", str(plugin.secret_type).lower()).strip(
        "-"
    )


class _Joined:
    """Text with split values joined, and a map from joined offsets back to source lines."""

    def __init__(self, text: str) -> None:
        pieces: list[str] = []
        origins: list[int] = []  # joined offset where each piece starts -> source offset
        starts: list[int] = []
        cursor = 0
        joined_len = 0
        for match in _SPLIT.finditer(text):
            starts.append(joined_len)
            origins.append(cursor)
            pieces.append(text[cursor : match.start()])
            joined_len += match.start() - cursor
            cursor = match.end()
        starts.append(joined_len)
        origins.append(cursor)
        pieces.append(text[cursor:])
        self.text = "".join(pieces)
        self._starts = starts
        self._origins = origins
        self._newlines = [i for i, c in enumerate(text) if c == "\n"]

    def source_line(self, offset: int) -> int:
        piece = bisect.bisect_right(self._starts, offset) - 1
        source = self._origins[piece] + (offset - self._starts[piece])
        return bisect.bisect_left(self._newlines, source) + 1


def _lines_with_offsets(text: str) -> Iterator[tuple[int, str]]:
    offset = 0
    for line in text.splitlines(keepends=True):
        yield offset, line.rstrip("\r\n")
        offset += len(line)


def scan_text(path: str, text: str) -> list[Finding]:
    """Every finding in one file, de-duplicated: one per secret value per line."""
    joined = _Joined(text)
    found: dict[tuple[int, str], Finding] = {}

    def add(rule: str, offset: int, secret: str) -> None:
        if is_placeholder(secret) or _IDENTIFIER.fullmatch(secret):
            return
        line = joined.source_line(offset)
        key = (line, hashlib.sha256(secret.encode()).hexdigest())
        found.setdefault(key, Finding(path, line, rule))

    for match in _PRIVATE_KEY.finditer(joined.text):
        add("private-key", match.start(), match.group(0)[-40:])
    for offset, line in _lines_with_offsets(joined.text):
        for rule, pattern in _RULES:
            for match in pattern.finditer(line):
                group = "s" if "s" in pattern.groupindex else 0
                secret = match.group(group)
                if rule in _NEEDS_RANDOM and not _generated(secret):
                    continue
                add(rule, offset + match.start(group), secret)
        for match in _ASSIGNMENT.finditer(line):
            value = match.group("value")
            if _assignment_is_secret(value):
                add("high-entropy-assignment", offset + match.start("value"), value)
        for plugin in _detect_secrets_plugins():
            for secret in plugin.analyze_string(line):
                # Some detectors yield only a regex group (GitHub's yields "ghp"): judge the
                # whole token it sits in, so placeholders like ghp_xxxx… stay quiet.
                position = max(line.find(secret), 0)
                token = _TOKEN.match(line, position)
                add(_plugin_rule(plugin), offset + position, token.group(0) if token else secret)
    return sorted(found.values())


def scan_files(
    files: Mapping[str, str], progress: Callable[[str], None] | None = None
) -> list[Finding]:
    """Scan a whole tree ``{path: text}``; findings sorted by path and line."""
    findings: list[Finding] = []
    for path in sorted(files):
        if progress:
            progress(path)
        findings.extend(scan_text(path, files[path]))
    return findings
