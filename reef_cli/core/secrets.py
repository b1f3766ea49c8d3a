"""Whole-tree credential scan: Reef's rules plus linear ports of detect-secrets' detectors.

A finding names the rule and ``file:line`` (or the file name, for a key in a path) and
never carries the secret itself, so it is safe to print, log and store. Obvious
placeholders (``sk-...``, ``YOUR_API_KEY``, ``<token>``) are not findings.

What is scanned is the text as a reader or a decoder would see it: zero-width and bidi
characters removed, values split by string concatenation, a line continuation or a
two-line wrap joined, and \\uXXXX escapes, %XX and printable base64 decoded. Every rule
is linear in the text (bounded, keyword-first, anchored where a run could be rescanned)
and long lines are scanned in overlapping windows, so no input can make a scan stall
(tests/core/test_secrets_linear.py, bench/secrets_scan.py).
"""

from __future__ import annotations

import base64
import bisect
import hashlib
import math
import re
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache


@dataclass(frozen=True, order=True)
class Finding:
    path: str
    line: int  # 0: the secret is in the file's name (its part is shown as [redacted])
    rule: str

    def __str__(self) -> str:
        if self.line == 0:
            return f"{self.rule} in the file name {self.path}"
        return f"{self.rule} at {self.path}:{self.line}"


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
            r"(?i)aws_?secret_?(?:access_?)?key\b[\"']?[ \t]*+(?::=|=>|[:=])[ \t]*+[\"'`]?"
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
        re.compile(
            r"eyJ(?<![A-Za-z0-9_-]eyJ)[A-Za-z0-9_-]{8,}+\.eyJ[A-Za-z0-9_-]{8,}+\.[A-Za-z0-9_-]{16,}"
        ),
    ),
    ("npm-token", re.compile(r"\bnpm_[A-Za-z0-9]{36}\b")),
    ("pypi-token", re.compile(r"\bpypi-AgE[A-Za-z0-9_-]{50,}")),
    ("linear-api-key", re.compile(r"\blin_api_[A-Za-z0-9]{40}\b")),
    ("notion-token", re.compile(r"\bntn_[A-Za-z0-9]{40,}\b")),
    ("sentry-token", re.compile(rf"\bsntry[us]_(?:[{_HEX}]{{64}}\b|eyJ[A-Za-z0-9_+/=-]{{40,}})")),
    ("doppler-token", re.compile(r"\bdp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,}\b")),
    # A bearer credential in a header, whatever its issuer (last: a known format wins).
    ("bearer-token", re.compile(r"\b[Bb]earer[ \t]++(?P<s>[A-Za-z0-9._~+/-]{24,}+=*+)")),
)

# Lowercase literals a text must hold for a rule to be tried there (a cheap `in` test
# first, so most rules never run on most files). A rule not named here always runs.
_KEYWORDS: dict[str, tuple[str, ...]] = {
    "anthropic-api-key": ("sk-ant-",),
    "openrouter-api-key": ("sk-or-v1-",),
    "langfuse-secret-key": ("sk-lf-",),
    "deepseek-api-key": ("sk-",),
    "openai-api-key": ("sk-",),
    "google-api-key": ("aiza", "aq."),
    "google-oauth-client-secret": ("gocspx-",),
    "google-oauth-access-token": ("ya29.",),
    "groq-api-key": ("gsk_",),
    "xai-api-key": ("xai-",),
    "huggingface-token": ("hf_", "api_org_"),
    "replicate-api-token": ("r8_",),
    "together-api-key": ("tgp_v1_",),
    "fireworks-api-key": ("fw_",),
    "perplexity-api-key": ("pplx-",),
    "voyage-api-key": ("pa-",),
    "cerebras-api-key": ("csk-",),
    "nvidia-api-key": ("nvapi-",),
    "databricks-token": ("dapi",),
    "langsmith-api-key": ("lsv2_",),
    "elevenlabs-api-key": ("sk_",),
    "jina-api-key": ("jina_",),
    "tavily-api-key": ("tvly-",),
    "anyscale-api-key": ("esecret_",),
    "friendli-token": ("flp_",),
    "pinecone-api-key": ("pcsk_",),
    "firecrawl-api-key": ("fc-",),
    "aws-access-key-id": ("akia", "asia", "abia", "acca", "a3t"),
    "aws-secret-access-key": ("secret",),
    "aws-bedrock-api-key": ("absk",),
    "azure-ad-client-secret": ("q~",),
    "digitalocean-token": ("_v1_",),
    "github-token": ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    "github-fine-grained-token": ("github_pat_",),
    "gitlab-token": ("gl",),
    "slack-token": ("xox",),
    "slack-app-token": ("xapp-",),
    "slack-webhook": ("hooks.slack.com",),
    "stripe-live-key": ("_live_",),
    "jwt": ("eyj",),
    "npm-token": ("npm_",),
    "pypi-token": ("pypi-",),
    "linear-api-key": ("lin_api_",),
    "notion-token": ("ntn_",),
    "sentry-token": ("sntry",),
    "doppler-token": ("dp.",),
    "bearer-token": ("bearer",),
}

# detect-secrets' pattern detectors, ported: three of its own regexes are quadratic (JWT,
# NPM and OpenAI rescan a run from every start: NPM's took 0.83 s on 16 KB of "//"), so
# Reef runs linear forms of all of them under the same rule names (of the library, only
# the JWT detector's well-formedness check is called; tests/core/test_secrets_linear.py
# checks each port finds what its detector finds).
# A start inside a run of the rule's own alphabet is refused by a lookbehind placed after
# the literal (so the regex engine still searches for the literal fast).
_DS = "detect-secrets:"
_DETECT_SECRETS: tuple[tuple[str, re.Pattern[str], tuple[str, ...]], ...] = (
    (
        _DS + "artifactory-credentials",
        re.compile(r"AKC(?<![^\s=:\"]AKC)[a-zA-Z0-9]{10,}+(?![^\s\"])"),
        ("akc",),
    ),
    (
        _DS + "artifactory-credentials",
        re.compile(r"AP[\dABCDEF](?<![^\s=:\"]AP.)[a-zA-Z0-9]{8,}+(?![^\s\"])"),
        ("ap",),
    ),
    (
        _DS + "aws-access-key",
        re.compile(r"(?:A3T[A-Z0-9]|ABIA|ACCA|AKIA|ASIA)[0-9A-Z]{16}"),
        ("akia", "asia", "abia", "acca", "a3t"),
    ),
    (
        _DS + "aws-access-key",
        re.compile(
            r"(?i)aws.{0,20}?(?:key|pwd|pw|password|pass|token).{0,20}?['\"](?P<s>[0-9a-zA-Z/+]{40})['\"]"
        ),
        ("aws",),
    ),
    (
        _DS + "azure-storage-account-access-key",
        re.compile(r"AccountKey=[a-zA-Z0-9+/=]{88}"),
        ("accountkey=",),
    ),
    (
        _DS + "basic-auth-credentials",
        re.compile(r"://[^:/?#\[\]@!$&'()*+,;=\s]++:(?P<s>[^:/?#\[\]@!$&'()*+,;=\s]++)@"),
        ("://",),
    ),
    (
        _DS + "discord-bot-token",
        re.compile(
            r"[MNO](?<![a-zA-Z\d_-][MNO])[a-zA-Z\d_-]{23,25}+\.[a-zA-Z\d_-]{6}\.[a-zA-Z\d_-]{27}"
        ),
        (),
    ),
    (_DS + "github-token", re.compile(r"(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9_]{36}"), ("gh",)),
    (
        _DS + "gitlab-token",
        re.compile(
            r"(?:glpat|gldt|glft|glsoat|glrt)-[A-Za-z0-9_\-]{20,50}(?!\w)"
            r"|GR1348941[A-Za-z0-9_\-]{20,50}(?!\w)"
            r"|glcbt-(?:[0-9a-fA-F]{2}_)?[A-Za-z0-9_\-]{20,50}(?!\w)"
            r"|glimt-[A-Za-z0-9_\-]{25}(?!\w)"
            r"|glptt-[A-Za-z0-9_\-]{40}(?!\w)"
            r"|glagent-[A-Za-z0-9_\-]{50,1024}(?!\w)"
            r"|gloas-[A-Za-z0-9_\-]{64}(?!\w)"
        ),
        ("gl", "gr1348941"),
    ),
    (
        # detect-secrets' class is [A-Za-z0-9-_=], where 9-_ is a range: kept as it is.
        _DS + "json-web-token",
        re.compile(r"eyJ(?<![A-Za-z0-9-_=]eyJ)[A-Za-z0-9-_=]{7,}+\.[A-Za-z0-9-_=]{2,}+\.?"),
        ("eyj",),
    ),
    (_DS + "mailchimp-access-key", re.compile(r"(?<=[0-9a-z]{32})-us[0-9]{1,2}"), ("-us",)),
    (
        _DS + "npm-tokens",
        re.compile(r":_authToken=(?<=/:_authToken=)[ \t]*+(?P<s>npm_.+|[A-Fa-f0-9-]{36})"),
        (":_authtoken=",),
    ),
    (
        _DS + "openai-token",
        re.compile(
            r"sk-(?<![A-Za-z0-9-_]sk-)[A-Za-z0-9-_]{20,200}?T3BlbkFJ"
            r"(?<=[A-Za-z0-9]{20}T3BlbkFJ)[A-Za-z0-9]{20}"
        ),
        ("t3blbkfj",),
    ),
    (
        _DS + "pypi-token",
        re.compile(r"pypi-AgE(?:IcHlwaS5vcmc|NdGVzdC5weXBpLm9yZw)[A-Za-z0-9-_]{70,}"),
        ("pypi-age",),
    ),
    (
        _DS + "sendgrid-api-key",
        re.compile(r"SG\.[a-zA-Z0-9_-]{22}\.[a-zA-Z0-9_-]{43}"),
        ("sg.",),
    ),
    (_DS + "slack-token", re.compile(r"(?i)xox(?:a|b|p|o|s|r)-(?:\d+-)+[a-z0-9]+"), ("xox",)),
    (
        _DS + "slack-token",
        re.compile(
            r"(?i)https://hooks\.slack\.com/services/T[a-zA-Z0-9_]+/B[a-zA-Z0-9_]+/[a-zA-Z0-9_]+"
        ),
        ("hooks.slack.com",),
    ),
    (_DS + "square-oauth-secret", re.compile(r"sq0csp-[0-9A-Za-z\\\-_]{43}"), ("sq0csp-",)),
    (_DS + "stripe-access-key", re.compile(r"(?:r|s)k_live_[0-9a-zA-Z]{24}"), ("k_live_",)),
    (_DS + "telegram-bot-token", re.compile(r"\d{8,10}:[0-9A-Za-z_-]{35}"), (":",)),
    (_DS + "twilio-api-key", re.compile(r"AC[a-z0-9]{32}|SK[a-z0-9]{32}"), ("ac", "sk")),
)
# Characters of a port's match that lie before it (the lookbehind-anchored Mailchimp rule).
_BACK = {_DS + "mailchimp-access-key": 32}

_CHECKS: dict[str, Callable[[str, re.Match[str]], bool]] = {}  # filled below: keep a match?

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
    return _has_letter_and_digit(tail) and entropy(tail) >= 3.5


_WORDY = re.compile(r"[a-z]+\d{0,2}|\d+|[A-Z][a-z]+|[A-Z]+")

# A private key: its header, then (within the next few tokens) a long base64 run. Found
# by the header, then judged on a bounded stretch after it.
_PEM_HEADER = re.compile(r"-----BEGIN (?:[A-Z0-9]{1,32} ){0,4}PRIVATE KEY(?: BLOCK)?-----")
_PEM_TOKEN = re.compile(r"[\s\"'\\,+]*+([A-Za-z0-9+/=:\-]++)")
_PEM_RUN = re.compile(r"[A-Za-z0-9+/]{40,}+")
_PEM_REACH = 4096  # characters after the header that are looked at
_PEM_TOKENS = 7  # header lines (Proc-Type, DEK-Info) before the body, as detect-secrets allows

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
# The name a value is assigned to must hold one of these (judged on the whole name).
_SECRET_NAME = re.compile(
    r"(?i)api[_\-]?key|apikey|token|secret|passwd|password|pwd|access[_\-]?key|"
    r"private[_\-]?key|credential|auth|" + _PROVIDERS + r"[A-Za-z0-9]{0,32}[_\-.]?key"
)
# ``name = value`` found keyword-first: every name the rule accepts ends in, or holds, one
# of these words; the rest of the name is read backwards from the word (bounded). The
# value is bounded too, so a retry after a name that is not a secret's costs little.
_ASSIGNMENT = re.compile(
    r"(?i)(?P<key>(?:key|token|secret|passw(?:or)?d|pwd|credential|auth)[A-Za-z0-9_.\-]{0,64}+)"
    r"[\"']?[ \t]{0,32}+(?::=|=>|[:=])[ \t]{0,32}+[\"'`]?(?P<value>[^\s\"'`,;)]{16,128}+)"
)
_NAME_BEFORE = re.compile(r"[A-Za-z0-9_.\-]{0,64}+")  # matched on the reversed text

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

_TOKEN = re.compile(r"[A-Za-z0-9_\-+/=.]{1,128}")

_REFERENCE = re.compile(
    r"^(?:[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*|\[[^\]]*\])+(?:\(.*)?|[A-Z][A-Z0-9_]+|\$\w+)$"
)

# -- normalising: the text as a reader (or a decoder) sees it

# Joins for values split across lines: "abc" +\n "def", "abc"\n"def", `abc` +\n `def`, and
# backslash-newline.
_SPLIT = re.compile(r"[\"'`][ \t]*+\+?[ \t]*+\\?\r?\n[ \t]*+\+?[ \t]*+[\"'`]|\\\r?\n[ \t]*+")
# Zero-width and bidi control characters: invisible, so a key can hide them inside.
_INVISIBLE = re.compile("[\u00ad\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]+")
# A token that starts like a key and ends its line, the next line continuing its alphabet:
# a key wrapped (or broken on purpose) over two lines.
_KEY_STARTS = (
    "sk-", "sk_", "rk_", "akia", "asia", "abia", "acca", "a3t", "aiza", "aq.", "gocspx-",
    "ya29.", "gsk_", "xai-", "hf_", "api_org_", "r8_", "tgp_v1_", "fw_", "pplx-", "pa-",
    "csk-", "nvapi-", "dapi", "lsv2_", "jina_", "tvly-", "esecret_", "flp_", "pcsk_", "fc-",
    "absk", "dop_", "doo_", "dor_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_",
    "glpat-", "gldt-", "glrt-", "glptt-", "glft-", "glcbt-", "glimt-", "gloas-", "glsoat-",
    "glagent-", "xox", "xapp-", "eyj", "npm_", "pypi-", "lin_api_", "ntn_", "sntry", "dp.",
    "sg.", "sq0csp-", "akc",
)  # fmt: skip
_WRAPPED = re.compile(
    r"(?i)(?<![A-Za-z0-9_+/=.~-])(?P<t>(?:"
    + "|".join(re.escape(p) for p in _KEY_STARTS)
    + r")[A-Za-z0-9_+/=.~-]{0,1024}+)\r?\n[ \t]{0,64}+(?=[A-Za-z0-9_+/=~-])"
)
# Escapes a key can be written in: JSON/JS \uXXXX and \xXX, \/ and URL %XX (ASCII only).
_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})|\\x([0-9a-fA-F]{2})|%([0-9a-fA-F]{2})|\\(/)")
# A base64 (or base64url) run; decoded in place when it decodes to printable text. Runs
# over 4 KB are not decoded (they are scanned as they are).
_BASE64 = re.compile(
    r"[A-Za-z0-9+/_-](?<![A-Za-z0-9+/=_-].)[A-Za-z0-9+/_-]{15,4095}+={0,2}+(?![A-Za-z0-9+/=_-])"
)
_NOT_TEXT = str.maketrans("", "", "\t\r\n")

# Long lines are scanned in windows of this many characters, overlapping by _OVERLAP:
# a secret up to _OVERLAP characters long is seen whole in one window; a longer one is
# still found, cut at a window's end. Nothing is skipped.
_WINDOW = 8192
_OVERLAP = 1024
_MAX_FINDINGS = 1000  # per file


def entropy(value: str) -> float:
    total = len(value)
    if not total:
        return 0.0
    return -sum(n / total * math.log2(n / total) for n in Counter(value).values())


_NAME_PREFIX = re.compile(r"^[a-z]+[_-](?:[a-z]+[_-])?")
_LETTER = re.compile(r"[^\W\d_]")
_DIGIT = re.compile(r"\d")


def _has_letter_and_digit(value: str) -> bool:
    return bool(_LETTER.search(value) and _DIGIT.search(value))


def is_placeholder(secret: str) -> bool:
    lowered = secret.lower()
    for marker in _PLACEHOLDER_MARKERS:
        if marker in lowered:
            return True
    tail = _NAME_PREFIX.sub("", lowered, count=1)
    return len(set(tail)) < min(6, len(tail) / 2)  # sk-aaaa…, ghp_0000…: a few chars repeated


@lru_cache(maxsize=4096)
def _assignment_is_secret(value: str) -> bool:
    """(Cached: text that repeats one assignment is judged once.)"""
    if not _has_letter_and_digit(value) or _REFERENCE.match(value) or is_placeholder(value):
        return False
    if _URL_OR_PATH.match(value):
        return any(_looks_random(part) for part in _URL_PART.findall(value))
    return _looks_random(value)


@lru_cache(maxsize=4096)
def _is_secret_name(name: str) -> bool:
    return _SECRET_NAME.search(name) is not None


def _looks_random(value: str) -> bool:
    if len(value) < 16 or is_placeholder(value):
        return False
    return _has_letter_and_digit(value) and entropy(value) >= 3.5


def _jwt_is_valid(text: str, match: re.Match[str]) -> bool:
    from detect_secrets.plugins.jwt import JwtTokenDetector

    return bool(JwtTokenDetector.is_formally_valid(match.group(0)))


def _npm_has_registry(text: str, match: re.Match[str]) -> bool:
    """detect-secrets wants ``//host/`` before ``:_authToken`` on the same line (looked
    for in the 256 characters before it)."""
    start = max(text.rfind("\n", max(0, match.start() - 256), match.start()) + 1, 0)
    return "//" in text[max(start, match.start() - 256) : match.start() - 1]


_CHECKS[_DS + "json-web-token"] = _jwt_is_valid
_CHECKS[_DS + "npm-tokens"] = _npm_has_registry


class _View:
    """A text derived from a file's text (cleaned, joined, decoded), and where each of its
    characters came from: copied stretches map one to one, replaced ones to where the
    replaced text began."""

    def __init__(
        self,
        text: str,
        parent: _View | None = None,
        segments: tuple[list[int], list[int], list[bool]] = ([0], [0], [False]),
    ) -> None:
        self.text = text
        self._parent = parent
        self._starts, self._origins, self._fixed = segments

    def origin(self, offset: int) -> int:
        """The offset in the file's text that ``offset`` here came from."""
        if self._parent is None:
            return offset
        piece = bisect.bisect_right(self._starts, offset) - 1
        source = self._origins[piece]
        if not self._fixed[piece]:
            source += offset - self._starts[piece]
        return self._parent.origin(source)

    def derive(
        self, pattern: re.Pattern[str], replace: Callable[[re.Match[str]], str | None]
    ) -> _View:
        """This text with each match replaced by ``replace(match)`` (None keeps it); this
        view itself when nothing changed."""
        text = self.text
        pieces: list[str] = []
        starts: list[int] = []
        origins: list[int] = []
        fixed: list[bool] = []
        cursor = length = 0
        for match in pattern.finditer(text):
            new = replace(match)
            if new is None:
                continue
            for piece, origin, is_fixed in (
                (text[cursor : match.start()], cursor, False),
                (new, match.start(), True),
            ):
                if piece:
                    starts.append(length)
                    origins.append(origin)
                    fixed.append(is_fixed)
                    pieces.append(piece)
                    length += len(piece)
            cursor = match.end()
        if not starts and cursor == 0:
            return self
        starts.append(length)
        origins.append(cursor)
        fixed.append(False)
        pieces.append(text[cursor:])
        return _View("".join(pieces), self, (starts, origins, fixed))


def _unescape(match: re.Match[str]) -> str | None:
    digits = match.group(1) or match.group(2) or match.group(3)
    if digits is None:
        return match.group(4)
    code = int(digits, 16)
    if match.group(3) is not None and code >= 0x80:
        return None  # a byte of a UTF-8 sequence: left as it is
    return None if 0xD800 <= code <= 0xDFFF else chr(code)


def _unbase64(match: re.Match[str]) -> str | None:
    run = match.group(0).rstrip("=")
    urlsafe = "-" in run or "_" in run
    if len(run) % 4 == 1 or (urlsafe and ("+" in run or "/" in run)):
        return None
    try:
        data = base64.b64decode(
            run + "=" * (-len(run) % 4), altchars=b"-_" if urlsafe else None, validate=True
        )
        decoded = data.decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        return None
    return decoded if decoded.translate(_NOT_TEXT).isprintable() else None


def _views(text: str) -> list[_View]:
    """What is scanned: the text without invisible characters and with concatenations
    joined; then, where they differ from it, the same with keys wrapped over two lines
    joined, and with escapes, percent-encoding and printable base64 decoded."""
    clean = _View(text).derive(_INVISIBLE, lambda m: "").derive(_SPLIT, lambda m: "")
    views = [clean]
    lowered = clean.text.lower()
    if any(start in lowered for start in _KEY_STARTS):
        views.append(clean.derive(_WRAPPED, lambda m: m.group("t")))
    views.append(clean.derive(_ESCAPE, _unescape).derive(_BASE64, _unbase64))
    return [clean, *(view for view in views[1:] if view is not clean)]


def _windows(length: int) -> Iterator[tuple[int, int, int]]:
    """(start, end, limit): scan [start, end), keep matches starting before limit."""
    start = 0
    while True:
        end = start + _WINDOW
        if end >= length:
            yield start, length, length
            return
        yield start, end, end - _OVERLAP
        start = end - _OVERLAP


Hit = tuple[str, int, str]  # rule, offset in the scanned text, the secret


def _hits(text: str) -> Iterator[Hit]:
    """Every rule's candidates in one text (not yet judged as placeholders)."""
    lowered = text.lower()

    def wanted(keywords: tuple[str, ...]) -> bool:
        return not keywords or any(k in lowered for k in keywords)

    rules = [(rule, pattern) for rule, pattern in _RULES if wanted(_KEYWORDS.get(rule, ()))]
    ports = [(rule, pattern) for rule, pattern, keys in _DETECT_SECRETS if wanted(keys)]
    assignments = wanted(("key", "token", "secret", "passw", "pwd", "credential", "auth"))
    for start, end, limit in _windows(len(text)):
        for rule, pattern in rules:
            group = "s" if "s" in pattern.groupindex else 0
            for match in pattern.finditer(text, start, end):
                if match.start() >= limit:
                    break
                secret = match.group(group)
                if rule in _NEEDS_RANDOM and not _generated(secret):
                    continue
                yield rule, match.start(group), secret
        for rule, pattern in ports:
            group = "s" if "s" in pattern.groupindex else 0
            back = _BACK.get(rule, 0)
            check = _CHECKS.get(rule)
            for match in pattern.finditer(text, start, end):
                if match.start() >= limit:
                    break
                if check and not check(text, match):
                    continue
                offset = match.start(group) - back
                # Judge the whole token a match sits in, so ghp_xxxx… stays quiet.
                token = _TOKEN.match(text, offset)
                yield rule, offset, token.group(0) if token else match.group(group)
        if assignments:
            yield from _assignments(text, start, end, limit)
    if "private key" in lowered:
        yield from _private_keys(text)


def _assignments(text: str, start: int, end: int, limit: int) -> Iterator[Hit]:
    position = start
    while match := _ASSIGNMENT.search(text, position, end):
        if match.start() >= limit:
            return
        before = _NAME_BEFORE.match(text[max(0, match.start() - 64) : match.start()][::-1])
        name = (before.group(0)[::-1] if before else "") + match.group("key")
        value = match.group("value")
        if _is_secret_name(name) and _assignment_is_secret(value):
            yield "high-entropy-assignment", match.start("value"), value
            position = match.end()
        else:  # the value may hold the next name (a=…&token=…): look again from it
            position = match.start("value")


def _private_keys(text: str) -> Iterator[Hit]:
    for header in _PEM_HEADER.finditer(text):
        position, reach = header.end(), min(len(text), header.end() + _PEM_REACH)
        for _ in range(_PEM_TOKENS):
            token = _PEM_TOKEN.match(text, position, reach)
            if not token:
                break
            run = _PEM_RUN.search(token.group(1))
            if run:
                yield "private-key", header.start(), run.group(0)[-40:]
                break
            position = token.end()


def _scan(text: str) -> dict[tuple[int, str], tuple[str, int]]:
    """{(offset in ``text``, secret's digest): (rule, offset)} for every finding, across
    every view of the text; the first rule to find a secret at a place names it. Stops at
    _MAX_FINDINGS (a text that full of secrets is refused either way)."""
    found: dict[tuple[int, str], tuple[str, int]] = {}
    for view in _views(text):
        for rule, offset, secret in _hits(view.text):
            if is_placeholder(secret) or _IDENTIFIER.fullmatch(secret):
                continue
            origin = view.origin(offset)
            digest = hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()
            found.setdefault((origin, digest), (rule, origin))
            if len(found) >= _MAX_FINDINGS:
                return found
    return found


def _line_numbers(text: str, offsets: list[int]) -> dict[int, int]:
    lines: dict[int, int] = {}
    line, previous = 1, 0
    for offset in sorted(set(offsets)):
        line += text.count("\n", previous, offset)
        lines[offset] = line
        previous = offset
    return lines


def scan_text(path: str, text: str) -> list[Finding]:
    """Every finding in one file, de-duplicated: one per rule per line."""
    hits = list(_scan(text).values())
    lines = _line_numbers(text, [offset for _rule, offset in hits])
    return sorted({Finding(path, lines[offset], rule) for rule, offset in hits})


def scan_name(path: str) -> list[Finding]:
    """Findings in a file's path itself (``skills/x/sk-ant-….md``), at line 0, with each
    path part that holds a secret shown as ``[redacted]``."""
    hits = list(_scan(path).values())
    if not hits:
        return []
    parts = path.split("/")
    bounds = [0]
    for part in parts:
        bounds.append(bounds[-1] + len(part) + 1)
    for _rule, offset in hits:
        parts[bisect.bisect_right(bounds, offset) - 1] = "[redacted]"
    shown = "/".join(parts)
    return sorted({Finding(shown, 0, rule) for rule, _offset in hits})


def scan_files(
    files: Mapping[str, str], progress: Callable[[str], None] | None = None
) -> list[Finding]:
    """Scan a whole tree ``{path: text}``, each path as well as its text; findings sorted
    by path and line."""
    findings: list[Finding] = []
    for path in sorted(files):
        if progress:
            progress(path)
        findings.extend(scan_name(path))
        findings.extend(scan_text(path, files[path]))
    return sorted(findings)
