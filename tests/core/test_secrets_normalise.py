"""The scan sees what a publish carries (issue 23, item 4): keys in file names, keys split
over two lines, with a zero-width or bidi character inside, written as JSON ``\\u``
escapes, URL-encoded or base64 — each variant for several key formats, through
``scan_files`` and through a real ``reef harness publish`` that is refused with exit 3
naming the rule. Findings still point at the line the key starts on, and never show it.

The keys are the seeded fakes of test_secrets.py.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from pathlib import Path

import pytest

from reef_cli.core.secrets import Finding, scan_files, scan_text
from tests.cli.helpers import reef, reef_fails, reef_json
from tests.core.test_secrets import (
    ANTHROPIC,
    AWS_ID,
    GITHUB,
    GOOGLE,
    HUGGINGFACE,
    OPENAI,
    RNG,
    SLACK,
    STRIPE,
    anthropic,
    assert_no_leak,
    aws_key_id,
    github_classic,
    google,
    huggingface,
    openai_project,
    slack_bot,
    stripe_live,
)

_STATE = RNG.getstate()  # drawn without moving RNG, so other files' fakes stay as they were
FORMATS: dict[str, tuple[str, set[str]]] = {
    "anthropic": (anthropic(), ANTHROPIC),
    "openai": (openai_project(), OPENAI),
    "github": (github_classic(), GITHUB),
    "aws-key-id": (aws_key_id(), AWS_ID),
    "slack": (slack_bot(), SLACK),
    "google": (google(), GOOGLE),
    "huggingface": (huggingface(), HUGGINGFACE),
    "stripe": (stripe_live(), STRIPE),
}
RNG.setstate(_STATE)


def _wrapped(key: str) -> str:
    """Broken where neither half alone is a key (the first half is 10 characters)."""
    return f"{key[:10]}\n{key[10:]}"


def _zero_width(key: str) -> str:
    """A zero-width space and a bidi isolate, early, so no piece alone is a key."""
    return key[:8] + "\u200b" + key[8:16] + "\u2066" + key[16:]


def _json_escaped(key: str) -> str:
    return "".join(f"\\u{ord(c):04x}" for c in key)


def _json_escaped_dashes(key: str) -> str:
    """Only the separators escaped, as a careless serialiser or a hand might write it."""
    return "".join(f"\\u{ord(c):04x}" if c in "-_" else c for c in key)


def _percent(key: str) -> str:
    return "".join(f"%{ord(c):02X}" for c in key)


def _base64(key: str) -> str:
    return base64.b64encode(key.encode()).decode()


def _base64_assignment(key: str) -> str:
    return base64.urlsafe_b64encode(f"export API_KEY={key}\n".encode()).decode()


JSON_FILE = '{\n  "note": "x",\n  "k": "{K}"\n}\n'
URL_LINE = "# Deploy\n\nCall https://api.acme.dev/v1?key={K} daily.\n"
SKILL_JSON = "skills/write-tests/config.json"

# variant -> (how the key is written, the file it sits in: {K} is the written key)
VARIANTS: dict[str, tuple[Callable[[str], str], str, str]] = {
    "split-two-lines": (_wrapped, "rules/deploy.md", "# Deploy\n\nThe key is\n{K}\nfor now.\n"),
    "zero-width": (_zero_width, "rules/deploy.md", "# Deploy\n\nUse `{K}` for now.\n"),
    "json-u-escapes": (_json_escaped, SKILL_JSON, JSON_FILE),
    "json-u-dashes": (_json_escaped_dashes, SKILL_JSON, JSON_FILE),
    "url-encoded": (_percent, "rules/deploy.md", URL_LINE),
    "base64": (_base64, "rules/deploy.md", "# Deploy\n\nsecret blob:\n{K}\n"),
    "base64-assignment": (_base64_assignment, "rules/deploy.md", "# Deploy\n\nenv: {K}\n"),
}

# Every variant for every format, where the variant really hides the key.
CASES = [
    (v, f) for v in VARIANTS for f in FORMATS if FORMATS[f][0] not in VARIANTS[v][0](FORMATS[f][0])
]


def _case(variant: str, fmt: str) -> tuple[str, str, int, str, set[str]]:
    write, path, template = VARIANTS[variant]
    key, rules = FORMATS[fmt]
    text = template.replace("{K}", write(key))
    line = text[: text.index(write(key))].count("\n") + 1
    return path, text, line, key, rules


@pytest.mark.parametrize(("variant", "fmt"), CASES, ids=[f"{v}-{f}" for v, f in CASES])
def test_hidden_key_is_found_at_its_line(variant: str, fmt: str) -> None:
    path, text, line, key, rules = _case(variant, fmt)
    assert key not in text  # really hidden
    findings = scan_files({path: text})
    assert findings, f"{variant}/{fmt}: not found"
    assert {f.rule for f in findings} & rules, findings
    assert {(f.path, f.line) for f in findings} == {(path, line)}, findings
    assert_no_leak(" ".join(map(str, findings)), key, f"{variant}/{fmt}")


@pytest.mark.parametrize("fmt", list(FORMATS))
@pytest.mark.parametrize("where", ["file", "folder", "percent-encoded"])
def test_key_in_a_file_name_is_found_and_not_shown(fmt: str, where: str) -> None:
    key, rules = FORMATS[fmt]
    name = {
        "file": f"skills/x/{key}.md",
        "folder": f"skills/{key}/SKILL.md",
        "percent-encoded": f"rules/{_percent(key)}.md",
    }[where]
    findings = scan_files({name: "# Notes\n\nNothing secret here.\n"})
    assert findings and {f.rule for f in findings} & rules, findings
    assert all(f.line == 0 for f in findings)
    text = " ".join(map(str, findings)) + repr(findings)
    assert "in the file name" in text and "[redacted]" in text
    assert_no_leak(text, key, f"{where}/{fmt}")


def test_name_finding_keeps_the_rest_of_the_path() -> None:
    key, _ = FORMATS["anthropic"]
    [finding] = {f for f in scan_files({f"skills/x/{key}.md": "hi\n"})}
    assert finding == Finding("skills/x/[redacted]", 0, "anthropic-api-key")
    assert str(finding) == "anthropic-api-key in the file name skills/x/[redacted]"


def test_benign_paths_are_not_findings() -> None:
    paths = [
        "skills/sk-formal-register/SKILL.md",
        "skills/write-tests/reference/api-key-rotation.md",
        "rules/2f1e9c4b7a3d58e6f0c2b1a9d8e7f6c5b4a39281.md",  # a git SHA
        "commands/3f2504e0-4f89-41d3-9a0c-0305e82c3301.md",  # a UUID
        "skills/x/SGVsbG8sIFdvcmxkIQ==.md",  # base64 of prose
        "rules/caf%C3%A9-notes.md",
        "extensions/token-counter.ts",
    ]
    assert scan_files(dict.fromkeys(paths, "notes\n")) == []


def test_split_keeps_every_key_on_its_own_line() -> None:
    """Joining a wrapped key must not move a key that ends its line, nor the next one."""
    first, second = github_classic(), anthropic()
    text = f"a: {first}\n{second}\n"
    found = {(f.line, f.rule) for f in scan_text("rules/x.md", text)}
    assert (1, "github-token") in found and (2, "anthropic-api-key") in found
    assert {line for line, _ in found} == {1, 2}


def test_key_inside_a_long_line_is_found_across_window_edges() -> None:
    """Long lines are scanned in overlapping windows: a key anywhere is still found."""
    key = github_classic()
    filler = "lorem ipsum dolor sit amet " * 4000  # ~108 KB on one line
    for at in (0, 8192 - 20, 8192 - 1024 - 5, 8192 - 1024 + 3, 50_000, len(filler)):
        text = "# x\n" + filler[:at] + f" {key} " + filler[at:] + "\n"
        findings = scan_text("rules/x.md", text)
        assert [(f.line, f.rule) for f in findings] == [(2, "github-token")], at


# ---------------------------------------------------------------- through a real publish

PUBLISH_CASES = [
    ("name", "anthropic"),
    ("name", "github"),
    ("split-two-lines", "openai"),
    ("zero-width", "anthropic"),
    ("json-u-escapes", "github"),
    ("url-encoded", "slack"),
    ("base64", "aws-key-id"),
    ("base64-assignment", "stripe"),
]


@pytest.mark.parametrize(
    ("variant", "fmt"), PUBLISH_CASES, ids=[f"{v}-{f}" for v, f in PUBLISH_CASES]
)
def test_publish_is_refused_with_exit_3_naming_the_rule(
    variant: str, fmt: str, tmp_path: Path
) -> None:
    reef("scenario", "create", "demo")
    tree = tmp_path / "tree"
    reef("harness", "init", str(tree))
    key, rules = FORMATS[fmt]
    if variant == "name":
        (tree / "skills" / "write-tests" / f"{key}.md").write_text("# Notes\n\nNothing here.\n")
        where = "in the file name skills/write-tests/[redacted]"
    else:
        path, text, line, key, rules = _case(variant, fmt)
        (tree / path).parent.mkdir(parents=True, exist_ok=True)
        (tree / path).write_text(text)
        where = f"{path}:{line}"
    message = reef_fails("harness", "publish", str(tree), "-s", "demo", "-m", "x", code=3)
    assert "credential-scan" in message and where in message, message
    assert any(rule in message for rule in rules), message
    assert_no_leak(message, key, f"publish {variant}/{fmt}")
    assert reef_json("harness", "versions", "-s", "demo")["releases"] == []
