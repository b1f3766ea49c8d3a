"""Acceptance tests for the whole-tree credential scan (reef_cli.core.secrets + the gate).

Every secret below is a FAKE, generated at import time from a seeded RNG in the real
format of its issuer, so no secret-shaped literal sits in this file for other scanners to
trip over. Set ``REEF_SECRETS_SEED`` to explore other values; failures print the seed.

For every secret the scan must report it at the file and line where it starts, under a
sensible rule name, and neither the finding nor the gate's error may repeat any part of
it. For every benign look-alike (placeholders, references, hashes, ids, prose) the scan
must stay silent.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import random
import string
import uuid
from dataclasses import dataclass, field

import pytest

from reef_cli.core.checks import static_checks
from reef_cli.core.errors import GateBlocked
from reef_cli.core.secrets import Finding, scan_files, scan_text

SEED = int(os.environ.get("REEF_SECRETS_SEED", "20250611"))
RNG = random.Random(SEED)

LOWER = string.ascii_lowercase
UPPER = string.ascii_uppercase
DIGITS = string.digits
ALNUM = string.ascii_letters + DIGITS
URLSAFE = ALNUM + "-_"
BASE64 = ALNUM + "+/"
HEX = "0123456789abcdef"


def rand(n: int, alphabet: str = ALNUM) -> str:
    """``n`` random characters; mixed classes guaranteed where the alphabet has them,
    as in every real generated credential."""
    while True:
        value = "".join(RNG.choice(alphabet) for _ in range(n))
        wanted = [cls for cls in (LOWER, UPPER, DIGITS) if set(cls) & set(alphabet)]
        if all(set(value) & set(cls) for cls in wanted):
            return value


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def rand_bytes(n: int) -> bytes:
    return bytes(RNG.getrandbits(8) for _ in range(n))


# ---------------------------------------------------------------- fake credentials


def openai_legacy() -> str:
    return "sk-" + rand(20) + "T3Blbk" + "FJ" + rand(20)


def openai_project() -> str:
    return "sk-" + "proj-" + rand(74, URLSAFE) + "T3Blbk" + "FJ" + rand(74, URLSAFE)


def anthropic() -> str:
    return "sk-" + "ant-api03-" + rand(93, URLSAFE) + "AA"


def aws_key_id() -> str:
    return "AK" + "IA" + rand(16, UPPER + "234567")


def aws_secret() -> str:
    return rand(40, BASE64)


def github_classic() -> str:
    return "gh" + "p_" + rand(36)


def github_oauth() -> str:
    return "gh" + "o_" + rand(36)


def github_fine_grained() -> str:
    return "github" + "_pat_" + "11" + rand(20, UPPER + DIGITS) + "_" + rand(59)


def gitlab() -> str:
    return "gl" + "pat-" + rand(20, URLSAFE)


def slack_bot() -> str:
    return "xo" + "xb-" + rand(12, DIGITS) + "-" + rand(13, DIGITS) + "-" + rand(24)


def slack_user() -> str:
    digits = "-".join(rand(n, DIGITS) for n in (12, 12, 13))
    return "xo" + "xp-" + digits + "-" + rand(32, HEX)


def google() -> str:
    return "AI" + "za" + "Sy" + rand(33, URLSAFE)


def huggingface() -> str:
    return "hf" + "_" + rand(34, string.ascii_letters)


def stripe_live() -> str:
    return "sk" + "_live_" + "51" + rand(97)


def jwt() -> str:
    header = b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    claims = {
        "sub": str(uuid.UUID(int=RNG.getrandbits(128))),
        "iat": 1718000000 + RNG.randrange(10**6),
    }
    payload = b64url(json.dumps(claims).encode())
    return f"{header}.{payload}.{b64url(rand_bytes(32))}"


def high_entropy(n: int = 32, alphabet: str = ALNUM + "!@#^&_-+=") -> str:
    return rand(n, alphabet)


@dataclass(frozen=True)
class Pem:
    kind: str  # "RSA ", "EC ", "OPENSSH " or "" (PKCS#8)
    body_lines: tuple[str, ...]

    @property
    def begin(self) -> str:
        return f"-----BEGIN {self.kind}PRIVATE" + " KEY-----"

    @property
    def end(self) -> str:
        return f"-----END {self.kind}PRIVATE" + " KEY-----"

    @property
    def body(self) -> str:
        return "".join(self.body_lines)

    def block(self, newline: str = "\n") -> str:
        return newline.join([self.begin, *self.body_lines, self.end])


def pem(kind: str) -> Pem:
    """A private key block with a real-looking DER prefix and a random body."""
    prefix, size = {
        "RSA ": (bytes.fromhex("308204a40201000282010100"), 1180),  # -> MIIEpAIBAAKCAQEA
        "": (bytes.fromhex("308204bd020100300d06092a864886f70d0101010500"), 1170),
        "EC ": (bytes.fromhex("30770201010420"), 112),
        "OPENSSH ": (b"openssh-key-v1\0\0\0\0\x04none", 380),
    }[kind]
    text = base64.b64encode(prefix + rand_bytes(size)).decode()
    width = 70 if kind == "OPENSSH " else 64
    return Pem(kind, tuple(text[i : i + width] for i in range(0, len(text), width)))


# ---------------------------------------------------------------- rule families

OPENAI = {"openai-api-key", "detect-secrets:openai-token"}
ANTHROPIC = {"anthropic-api-key"}
AWS_ID = {"aws-access-key-id", "detect-secrets:aws-access-key"}
AWS_SECRET = {"aws-secret-access-key", "high-entropy-assignment", "detect-secrets:aws-access-key"}
GITHUB = {"github-token", "github-fine-grained-token", "detect-secrets:github-token"}
GITLAB = {"gitlab-token", "detect-secrets:gitlab-token"}
SLACK = {"slack-token", "detect-secrets:slack-token"}
GOOGLE = {"google-api-key"}
HUGGINGFACE = {"huggingface-token"}
STRIPE = {"stripe-live-key", "detect-secrets:stripe-access-key"}
JWT = {"jwt", "detect-secrets:json-web-token"}
PRIVATE_KEY = {"private-key"}
ENTROPY = {"high-entropy-assignment"}


# ---------------------------------------------------------------- tree scaffolding


def skill_md(name: str, body: str = "Use the bundled config.\n", extra: str = "") -> str:
    return f"---\nname: {name}\ndescription: Helper skill {name} for tests.\n{extra}---\n{body}"


def command_md(body: str, extra: str = "") -> str:
    return f"---\ndescription: A command used by the tests.\n{extra}---\n{body}"


def companions(path: str) -> dict[str, str]:
    """Files that make ``path`` part of a valid harness tree (the SKILL.md of its skill)."""
    parts = path.split("/")
    if parts[0] == "skills" and parts[-1] != "SKILL.md":
        return {f"skills/{parts[1]}/SKILL.md": skill_md(parts[1])}
    return {}


@dataclass(frozen=True)
class SecretCase:
    id: str
    path: str
    text: str
    secret: str  # the sensitive value, joined if it is split across lines
    rules: set[str]
    starts: str = ""  # a fragment on the line where the secret starts (default: secret[:16])
    line: int = field(init=False)

    def __post_init__(self) -> None:
        start = self.text.index(self.starts or self.secret[:16])
        object.__setattr__(self, "line", self.text[:start].count("\n") + 1)

    def files(self) -> dict[str, str]:
        return {**companions(self.path), self.path: self.text}


def split_at(value: str, at: int) -> tuple[str, str]:
    return value[:at], value[at:]


def _secret_cases() -> list[SecretCase]:
    cases: list[SecretCase] = []

    def case(id: str, kind: str, template: str, secret: str, rules: set[str], **kw: str) -> None:
        name = id
        path = {
            "rule": f"rules/{name}.md",
            "command": f"commands/{name}.md",
            "ext": f"extensions/{name}.ts",
            "json": f"skills/{name}/config.json",
            "skill": f"skills/{name}/SKILL.md",
            "skill-doc": f"skills/{name}/reference.md",
        }[kind]
        text = template.replace("{NAME}", name)
        for key, value in kw.items():
            text = text.replace("{" + key + "}", value)
        cases.append(
            SecretCase(id, path, text.replace("{S}", secret), secret, rules, kw.get("A", ""))
        )

    # ---- markdown prose and code blocks
    s = openai_legacy()
    case(
        "openai-legacy-in-md",
        "rule",
        "# Evals\n\nRun them with the key `{S}` for now.\n",
        s,
        OPENAI,
    )
    s = openai_project()
    case(
        "openai-project-in-md-env",
        "rule",
        "# Setup\n\n```sh\nexport OPENAI_API_KEY={S}\npython run.py\n```\n",
        s,
        OPENAI,
    )
    s = anthropic()
    case(
        "anthropic-in-md", "rule", "# Models\n\nUse Claude.\nANTHROPIC_API_KEY={S}\n", s, ANTHROPIC
    )
    s = aws_key_id()
    case(
        "aws-key-id-in-md",
        "skill-doc",
        "## Credentials\n\n```ini\n[default]\naws_access_key_id = {S}\nregion = eu-west-1\n```\n",
        s,
        AWS_ID,
    )
    s = aws_secret()
    case(
        "aws-secret-in-md",
        "skill-doc",
        "## Credentials\n\n```ini\n[default]\nregion = eu-west-1\n"
        "aws_secret_access_key = {S}\n```\n",
        s,
        AWS_SECRET,
    )
    s = github_classic()
    case(
        "github-classic-in-md-url",
        "rule",
        "# Cloning\n\nClone with\n`git clone https://{S}@github.com/acme/infra.git`\n",
        s,
        GITHUB,
    )
    s = gitlab()
    case("gitlab-in-md", "command", command_md("Push with token {S} to the mirror.\n"), s, GITLAB)
    s = slack_bot()
    case("slack-bot-in-md", "rule", "# Notify\n\nPost to #ci using bot token {S}.\n", s, SLACK)
    s = google()
    case(
        "google-in-md-url",
        "skill-doc",
        "Geocode:\n\n    curl 'https://maps.googleapis.com/maps/api/geocode/json?address=x&key={S}'\n",
        s,
        GOOGLE,
    )
    s = huggingface()
    case(
        "huggingface-in-md",
        "rule",
        "# Models\n\n```\nhuggingface-cli login --token {S}\n```\n",
        s,
        HUGGINGFACE,
    )
    s = stripe_live()
    case("stripe-in-md", "command", command_md("Refund with the live key:\n\n    {S}\n"), s, STRIPE)
    s = jwt()
    case("jwt-in-md", "rule", "# API\n\n```\nAuthorization: Bearer {S}\n```\n", s, JWT)
    s = high_entropy()
    case(
        "password-assignment-in-md",
        "rule",
        "# DB\n\n```\nDB_HOST=db\nDB_PASSWORD={S}\n```\n",
        s,
        ENTROPY,
    )
    s = high_entropy(32, ALNUM)
    case(
        "access-token-in-md-url-query",
        "rule",
        "# Hooks\n\nSend events to https://hooks.acme.dev/ingest?access_token={S} daily.\n",
        s,
        ENTROPY,
    )
    key = pem("RSA ")
    case(
        "rsa-pem-block-in-md",
        "skill-doc",
        "## Deploy key\n\n```\n{S}\n```\n",
        key.body,
        PRIVATE_KEY,
        S=key.block(),
        A=key.begin,
    )
    key = pem("RSA ")
    encrypted = Pem(
        "RSA ",
        (
            "Proc-Type: 4,ENCRYPTED",
            f"DEK-Info: AES-128-CBC,{rand(32, HEX).upper()}",
            "",
            *key.body_lines,
        ),
    )
    case(
        "encrypted-legacy-pem-in-md",
        "rule",
        "# Backup key\n\n{S}\n",
        key.body,
        PRIVATE_KEY,
        S=encrypted.block(),
        A=key.begin,
    )
    s = high_entropy(40, URLSAFE)
    case(
        "token-in-url-path-assignment",
        "rule",
        "# Alerts\n\nwebhook_token_url: https://alerts.acme.dev/hooks/{S}\n",
        s,
        ENTROPY,
    )
    key = pem("OPENSSH ")
    case(
        "openssh-pem-block-in-md",
        "rule",
        "# SSH\n\nPut this in ~/.ssh/id_ed25519:\n\n{S}\n",
        key.body,
        PRIVATE_KEY,
        S=key.block(),
        A=key.begin,
    )

    # ---- TypeScript
    s = openai_project()
    case(
        "openai-project-in-ts",
        "ext",
        'import OpenAI from "openai";\n\nconst client = new OpenAI({ apiKey: "{S}" });\n',
        s,
        OPENAI,
    )
    s = github_fine_grained()
    case(
        "github-fine-grained-in-ts",
        "ext",
        'import { Octokit } from "octokit";\nconst octokit = new Octokit({ auth: "{S}" });\n',
        s,
        GITHUB,
    )
    s = slack_user()
    case("slack-user-in-ts", "ext", 'export const slack = {\n  token: "{S}",\n};\n', s, SLACK)
    s = stripe_live()
    case(
        "stripe-in-ts",
        "ext",
        'import Stripe from "stripe";\nconst stripe = new Stripe("{S}");\n',
        s,
        STRIPE,
    )
    s = jwt()
    case("jwt-in-ts", "ext", "// service account\nconst SERVICE_JWT = '{S}';\n", s, JWT)
    s = aws_key_id()
    case(
        "aws-key-id-in-ts",
        "ext",
        'const s3 = new S3Client({\n  credentials: { accessKeyId: "{S}" },\n});\n',
        s,
        AWS_ID,
    )
    s = high_entropy(32, ALNUM)
    case(
        "webhook-secret-in-ts",
        "ext",
        'export const webhookSecret = "whsec_{S}";\n',
        "whsec_" + s,
        ENTROPY,
    )

    # ---- JSON (a skill's config file)
    s = openai_legacy()
    text = json.dumps({"provider": "openai", "openai": {"api_key": s, "model": "gpt-4o"}}, indent=2)
    case("openai-legacy-in-json", "json", text + "\n", s, OPENAI)
    s = google()
    case("google-in-json", "json", json.dumps({"maps": {"apiKey": s}}, indent=2) + "\n", s, GOOGLE)
    s = huggingface()
    case(
        "huggingface-in-json", "json", json.dumps({"hf_token": s}, indent=2) + "\n", s, HUGGINGFACE
    )
    s = gitlab()
    case("gitlab-in-json", "json", json.dumps({"remote": "gitlab", "token": s}) + "\n", s, GITLAB)
    s = github_oauth()
    case(
        "github-oauth-in-json",
        "json",
        json.dumps({"oauth": {"access": s}}, indent=2) + "\n",
        s,
        GITHUB,
    )
    s = high_entropy(40, URLSAFE)
    case(
        "client-secret-in-json",
        "json",
        json.dumps({"client_id": "reef-agent", "client_secret": s}, indent=2) + "\n",
        s,
        ENTROPY,
    )
    # letters up to a late "_": once mistaken for a "prefix_" with a short, placeholder tail
    s = rand(34, string.ascii_letters) + "_" + rand(1, DIGITS) + "_" + rand(3, string.ascii_letters)
    case("late-underscore-secret-in-json", "json", json.dumps({"secret": s}) + "\n", s, ENTROPY)
    # base64 may start with "/" and hold more: it must not pass for a path
    no_slash = ALNUM + "+"
    s = "/" + "/".join([rand(10, no_slash), rand(12, no_slash), rand(12, no_slash), rand(2, UPPER)])
    case(
        "aws-secret-like-a-path",
        "rule",
        "```ini\naws_secret_access_key = {S}\n```\n",
        s,
        AWS_SECRET,
    )
    key = pem("")
    account = {
        "type": "service_account",
        "project_id": "acme-prod",
        "private_key": key.block() + "\n",
        "client_email": "agent@acme-prod.iam.gserviceaccount.com",
    }
    case(
        "gcp-service-account-pem-in-json",
        "json",
        json.dumps(account, indent=2) + "\n",
        key.body,
        PRIVATE_KEY,
        A='"private_key"',
    )

    # ---- YAML frontmatter of a SKILL.md
    s = anthropic()
    case(
        "anthropic-in-skill-frontmatter",
        "skill",
        skill_md("{NAME}", extra="env:\n  ANTHROPIC_API_KEY: {S}\n"),
        s,
        ANTHROPIC,
    )
    s = slack_bot()
    case(
        "slack-in-skill-frontmatter",
        "skill",
        skill_md("{NAME}", extra="slack_token: {S}\n"),
        s,
        SLACK,
    )
    s = aws_secret()
    case(
        "aws-secret-in-skill-frontmatter",
        "skill",
        skill_md("{NAME}", extra='aws:\n  region: us-east-1\n  AWS_SECRET_ACCESS_KEY: "{S}"\n'),
        s,
        AWS_SECRET,
    )
    s = high_entropy(28, ALNUM)
    case(
        "api-token-in-skill-frontmatter",
        "skill",
        skill_md("{NAME}", extra="api_token: {S}\n"),
        s,
        ENTROPY,
    )
    s = jwt()
    case("jwt-in-skill-frontmatter", "skill", skill_md("{NAME}", extra="bearer: {S}\n"), s, JWT)
    key = pem("EC ")
    block = "\n".join("  " + line for line in key.block().splitlines())
    case(
        "ec-pem-in-skill-frontmatter",
        "skill",
        skill_md("{NAME}", extra="signing_key: |\n{S}\n"),
        key.body,
        PRIVATE_KEY,
        S=block,
        A=key.begin,
    )

    # ---- split across lines
    s = anthropic()
    a, b = split_at(s, 40)
    case(
        "anthropic-split-ts-concat",
        "ext",
        'const apiKey =\n  "{A}" +\n  "{B}";\nexport default apiKey;\n',
        s,
        ANTHROPIC,
        A=a,
        B=b,
    )
    s = stripe_live()
    a, b = split_at(s, 30)
    case("stripe-split-ts-concat", "ext", 'const key = "{A}"\n  + "{B}";\n', s, STRIPE, A=a, B=b)
    s = openai_project()
    a, b = split_at(s, 60)
    case(
        "openai-split-backslash-continuation",
        "rule",
        "# Shell\n\n```sh\nexport OPENAI_API_KEY={A}\\\n{B}\n```\n",
        s,
        OPENAI,
        A=a,
        B=b,
    )
    s = jwt()
    a, b = split_at(s, 50)
    case(
        "jwt-split-backslash-in-curl",
        "skill-doc",
        'Call it:\n\n    curl -H "Authorization: Bearer {A}\\\n{B}" https://api.acme.dev\n',
        s,
        JWT,
        A=a,
        B=b,
    )
    s = github_fine_grained()
    a, b = split_at(s, 35)
    case(
        "github-pat-split-python-implicit-concat",
        "rule",
        '# Python\n\n```python\nTOKEN = ("{A}"\n         "{B}")\n```\n',
        s,
        GITHUB,
        A=a,
        B=b,
    )
    s = anthropic()
    a, b = split_at(s, 15)  # neither half is a key on its own
    case(
        "anthropic-split-ts-template-literals",
        "ext",
        "const apiKey =\n  `{A}` +\n  `{B}`;\n",
        s,
        ANTHROPIC,
        A=a,
        B=b,
    )
    key = pem("RSA ")
    lines = [key.begin + "\\n", *(line + "\\n" for line in key.body_lines), key.end]
    concat = " +\n".join(f'  "{line}"' for line in lines)
    case(
        "rsa-pem-split-ts-concat",
        "ext",
        "export const DEPLOY_KEY =\n{S};\n",
        key.body,
        PRIVATE_KEY,
        S=concat,
        A=key.begin,
    )
    return cases


SECRET_CASES = _secret_cases()


# ---------------------------------------------------------------- benign look-alikes


# The realistic benign texts draw from their own generator, so adding one never changes
# the fake keys other test files derive from RNG.
BENIGN_RNG = random.Random(SEED + 1)

MARKDOWN_DOC = """# Deploying the agent

The agent reads its key from `OPENAI_API_KEY`; never write it into a file.

## Steps

1. Create a token at <https://github.com/settings/tokens?type=beta&description=reef%20agent>.
2. Run `reef serve --port 8080` and open http://localhost:8080/reef/status.
3. Check the [changelog](https://example.org/docs/changes#v2.3.1-release-notes).

| setting | default | meaning |
|---|---|---|
| `max_tokens` | 4096 | the answer's length cap |
| `token_file` | `~/.config/reef/token` | where the server's token lives |

> Tip: `sha256sum build.tar.gz` prints the digest to compare against the release page.
"""

LONG_URLS = (
    "Search: https://www.google.com/search?q=reef%20harness%20%22api%20key%22%20rotation"
    "&oq=reef+harness&aqs=chrome..69i57j33i160l2.4123j0j7&sourceid=chrome&ie=UTF-8\n"
    "Résumé: https://example.org/caf%C3%A9/r%C3%A9sum%C3%A9?ref=%2Fhome%2Fdocs%3Fpage%3D2\n"
    "Encoded path: https://cdn.example.com/assets/%5Bv2%5D/file%20name%20(1).pdf\n"
)

JSON_ESCAPES = (
    '{"name": "Caf\\u00e9 M\\u00fcller", "emoji": "\\ud83d\\ude00", "path": "src\\/main.ts",'
    ' "quote": "\\u201chello\\u201d", "tab": "a\\tb"}\n'
)

SVG_BASE64 = base64.b64encode(
    b'<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16">'
    b'<circle cx="8" cy="8" r="7" fill="#2a7ae2"/></svg>'
).decode()

GREETING_BASE64 = base64.b64encode(b"Hello, World! This is only prose.").decode()

LOREM = (
    "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor\n"
    "incididunt ut labore et dolore magna aliqua. Ut enim ad minim veniam, quis nostrud\n"
    "exercitation ullamco laboris nisi ut aliquip ex ea commodo consequat. Duis aute irure\n"
    "dolor in reprehenderit in voluptate velit esse cillum dolore eu fugiat nulla pariatur.\n"
) * 5

WRAPPED_PROSE = (
    "A JWT's header always begins with eyJ\nbecause it is base64 of a JSON object.\n"
    "Slovak strings live in files named sk-\nformal.json and sk-\ninformal.json.\n"
    "Hugging Face tokens start with hf_\nand GitHub ones with ghp_\nin their docs.\n"
)


def code_with_hashes() -> str:
    digest = hashlib.sha256(BENIGN_RNG.randbytes(32)).hexdigest()
    md5 = hashlib.md5(BENIGN_RNG.randbytes(8)).hexdigest()
    return (
        "import { createHash } from 'node:crypto';\n"
        f"const EXPECTED_SHA256 = '{digest}';\n"
        f'const LEGACY_MD5 = "{md5}";\n'
        "export function verify(data: Buffer): boolean {\n"
        "  return createHash('sha256').update(data).digest('hex') === EXPECTED_SHA256;\n"
        "}\n"
    )


def git_log() -> str:
    lines = []
    for n in range(12):
        sha = "".join(BENIGN_RNG.choice(HEX) for _ in range(40))
        lines.append(
            f"commit {sha}\nAuthor: Dev {n} <dev{n}@example.org>\n\n    fix #{n}: {sha[:7]}\n"
        )
    return "\n".join(lines)


def png_base64() -> str:
    return base64.b64encode(b"\x89PNG\r\n\x1a\n" + BENIGN_RNG.randbytes(600)).decode()


def pem_certificate() -> str:
    body = base64.b64encode(BENIGN_RNG.randbytes(700)).decode()
    lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    return "-----BEGIN CERTIFICATE-----\n" + "\n".join(lines) + "\n-----END CERTIFICATE-----\n"


def minified_line() -> str:
    words = ["render", "state", "props", "useMemo", "value", "index", "items", "map", "key"]
    pick = BENIGN_RNG.choice
    parts = [
        f"{pick(words)}{n}=>{pick(words)}[{n}]+{BENIGN_RNG.randint(0, 99999)}" for n in range(2000)
    ]
    return "export const f=(" + ";".join(parts) + ");\n"


@dataclass(frozen=True)
class BenignCase:
    id: str
    path: str
    text: str

    def files(self) -> dict[str, str]:
        return {**companions(self.path), self.path: self.text}


def _benign_cases() -> list[BenignCase]:
    sha1 = rand(40, HEX)
    sha256 = hashlib.sha256(rand_bytes(64)).hexdigest()
    run_id = uuid.UUID(int=RNG.getrandbits(128), version=4)
    integrity = base64.b64encode(hashlib.sha512(rand_bytes(16)).digest()).decode()
    tiny_gif = base64.b64encode(
        b"GIF89a\x01\x00\x01\x00\x80\x00\x00\xff\xff\xff\x00\x00\x00!"
    ).decode()
    raw: list[tuple[str, str, str]] = [
        ("openai-ellipsis", "rule", "Set `OPENAI_API_KEY` to your key (it looks like `sk-...`).\n"),
        (
            "openai-xxx",
            "rule",
            "```\nOPENAI_API_KEY=sk-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n```\n",
        ),
        (
            "openai-stars",
            "rule",
            "Keys are shown masked, e.g. sk-proj-************************abcd.\n",
        ),
        ("anthropic-ellipsis", "rule", "```sh\nexport ANTHROPIC_API_KEY=sk-ant-api03-...\n```\n"),
        ("your-api-key", "skill-doc", 'client = OpenAI(api_key="YOUR_API_KEY")\n'),
        (
            "angle-token",
            "rule",
            'curl -H "Authorization: Bearer <token>" https://api.acme.dev/v1/models\n',
        ),
        (
            "shell-var-in-frontmatter",
            "command",
            command_md("Run it.\n", "api_key: ${OPENAI_API_KEY}\n"),
        ),
        ("process-env-ts", "ext", "const apiKey = process.env.ANTHROPIC_API_KEY;\n"),
        ("process-env-bracket-ts", "ext", 'const token = process.env["GITHUB_TOKEN"] ?? "";\n'),
        ("config-reference-ts", "ext", "const apiKey = config.providers.openai.apiKey;\n"),
        ("template-literal-ts", "ext", "const headers = { Authorization: `Bearer ${token}` };\n"),
        ("os-environ", "skill-doc", '```python\ntoken = os.environ["GITHUB_TOKEN"]\n```\n'),
        ("os-getenv", "skill-doc", 'api_key = os.getenv("OPENAI_API_KEY")\n'),
        ("getpass", "skill-doc", 'password = getpass.getpass("Password: ")\n'),
        ("max-tokens-frontmatter", "command", command_md("Summarise.\n", "max_tokens: 4096\n")),
        ("token-count", "rule", "```python\ntoken_count = 12345678901234567890\n```\n"),
        (
            "token-settings-json",
            "json",
            '{"tokenizer": "cl100k_base", "max_output_tokens": 8192}\n',
        ),
        (
            "commit-sha-prose",
            "rule",
            f"The regression came in with commit {sha1}; revert it first.\n",
        ),
        ("uuid", "rule", f"Run {run_id} is the failing one.\n"),
        ("uuid-in-json", "json", json.dumps({"run_id": str(run_id)}) + "\n"),
        ("aws-docs-key-id", "skill-doc", "aws_access_key_id = AKIAIOSFODNN7EXAMPLE\n"),
        (
            "aws-docs-secret",
            "skill-doc",
            "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n",
        ),
        ("akia-prose", "rule", "AWS access key ids start with AKIA and have 20 characters.\n"),
        ("sha256-content-hash", "rule", f"content_hash: sha256:{sha256}\n"),
        (
            "docker-digest",
            "skill",
            skill_md("{NAME}", extra=f"image: ghcr.io/acme/agent@sha256:{sha256}\n"),
        ),
        ("npm-integrity", "json", json.dumps({"integrity": "sha512-" + integrity}) + "\n"),
        ("hunter2", "rule", "```yaml\nuser: admin\npassword: hunter2\n```\n"),
        ("password-prose", "rule", "Never paste a password or an API token into a rule.\n"),
        (
            "password-default-env",
            "command",
            command_md("Start db.\n", 'password: "${DB_PASSWORD:-postgres}"\n'),
        ),
        (
            "pem-header-docs",
            "rule",
            "A key looks like\n\n-----BEGIN RSA PRIVATE KEY-----\n...\n"
            "-----END RSA PRIVATE KEY-----\n",
        ),
        (
            "pem-header-prose",
            "rule",
            "Never commit anything that starts with `-----BEGIN PRIVATE KEY-----`.\n",
        ),
        ("base64-tiny-image", "rule", f"![dot](data:image/gif;base64,{tiny_gif})\n"),
        (
            "urls",
            "rule",
            "Create a token at https://github.com/settings/tokens or https://platform.openai.com/api-keys.\n",
        ),
        (
            "oauth-endpoint-ts",
            "ext",
            'const auth_endpoint = "https://login.microsoftonline.com/common/oauth2/v2.0/token";\n',
        ),
        (
            "password-file-path",
            "command",
            command_md("Db.\n", "passwordFile: /run/secrets/db_password_v2\n"),
        ),
        (
            "token-file-flag",
            "rule",
            "Run `reef serve --auth-token-file=~/.config/reef/token2.txt`.\n",
        ),
        (
            "sk-locale-identifier",
            "rule",
            "Slovak copy lives in `locales/sk-formal-register-translations.json`.\n",
        ),
        (
            "token-url",
            "skill",
            skill_md("{NAME}", extra="token_url: https://oauth2.googleapis.com/token\n"),
        ),
        (
            "kebab-identifiers",
            "rule",
            "Use `skill-ant-helper`, `task-proj-tracker` and `ask-anthropic-docs`.\n",
        ),
        (
            "github-actions-secret",
            "command",
            command_md("CI.\n", "GITHUB_TOKEN: ${{ secrets.GITHUB_TOKEN }}\n"),
        ),
        ("ghp-xxx", "rule", "GITHUB_TOKEN=ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\n"),
        ("jwt-truncated", "rule", "Send `Authorization: Bearer eyJhbGciOi...` on every call.\n"),
        ("jinja-template-json", "json", '{"auth_token": "{{ auth_token }}"}\n'),
        ("slack-placeholder", "rule", "SLACK_BOT_TOKEN=xoxb-your-bot-token\n"),
        ("google-placeholder", "rule", "GOOGLE_API_KEY=AIza...\n"),
        ("hf-placeholder", "rule", "HF_TOKEN=hf_...\n"),
        (
            "env-var-name-reference",
            "command",
            command_md("Deploy.\n", "api_key_env: ANTHROPIC_API_KEY\n"),
        ),
        ("redacted", "rule", "api_key: [REDACTED] (rotated on 2024-06-01)\n"),
        # -- realistic text the normalising steps (decoding, joining, windows) must leave quiet
        ("markdown-doc", "rule", MARKDOWN_DOC),
        ("code-with-hashes", "ext", code_with_hashes()),
        (
            "uuids",
            "rule",
            "".join(
                f"- run {uuid.UUID(int=BENIGN_RNG.getrandbits(128), version=4)}\n"
                for _ in range(20)
            ),
        ),
        ("git-log", "rule", git_log()),
        ("png-data-url", "rule", f"![chart](data:image/png;base64,{png_base64()})\n"),
        ("svg-data-url", "rule", f'<img src="data:image/svg+xml;base64,{SVG_BASE64}">\n'),
        ("base64-prose", "rule", f"Encoded greeting: {GREETING_BASE64}\n"),
        ("long-urls-percent", "rule", LONG_URLS),
        ("json-unicode-escapes", "json", JSON_ESCAPES),
        ("pem-certificate", "rule", pem_certificate()),
        ("lorem-ipsum", "rule", LOREM),
        ("wrapped-prose", "rule", WRAPPED_PROSE),
        ("minified-code-line", "ext", minified_line()),
        (
            "zero-width-joiners",
            "rule",
            "Emoji like \U0001f469\u200d\U0001f4bb and \u200bsoft\u00adbreaks stay.\n",
        ),
    ]
    cases = []
    for id, kind, template in raw:
        path = {
            "rule": f"rules/{id}.md",
            "command": f"commands/{id}.md",
            "ext": f"extensions/{id}.ts",
            "json": f"skills/{id}/config.json",
            "skill": f"skills/{id}/SKILL.md",
            "skill-doc": f"skills/{id}/reference.md",
        }[kind]
        cases.append(BenignCase(id, path, template.replace("{NAME}", id)))
    return cases


BENIGN_CASES = _benign_cases()


def test_corpus_is_big_and_varied() -> None:
    assert len(SECRET_CASES) >= 30
    assert len(BENIGN_CASES) >= 30
    assert len({c.id for c in SECRET_CASES + BENIGN_CASES}) == len(SECRET_CASES) + len(BENIGN_CASES)
    suffixes = {c.path.rsplit(".", 1)[-1] for c in SECRET_CASES}
    assert {"md", "ts", "json"} <= suffixes
    assert any(c.path.endswith("/SKILL.md") for c in SECRET_CASES)
    assert sum(c.secret not in c.text for c in SECRET_CASES) >= 5  # really split cases
    for c in SECRET_CASES:  # the scaffolding is a valid tree, so the gate reaches the scan
        assert static_checks(c.files()).checks[0].status == "passed", c.id


# ---------------------------------------------------------------- helpers


def slices(secret: str, width: int = 12) -> list[str]:
    return [secret[i : i + width] for i in range(len(secret) - width + 1)]


def assert_no_leak(text: str, secret: str, what: str) -> None:
    leaked = [piece for piece in slices(secret) if piece in text]
    assert not leaked, f"{what} leaks part of the secret ({leaked[0]!r}) [seed {SEED}]"


# ---------------------------------------------------------------- secrets are found


@pytest.mark.parametrize("case", SECRET_CASES, ids=lambda c: c.id)
def test_secret_is_found_at_its_line(case: SecretCase) -> None:
    findings = scan_text(case.path, case.text)
    where = f"{case.id} [seed {SEED}]"
    assert findings, f"{where}: secret not found"
    assert {f.path for f in findings} == {case.path}, where
    assert {f.line for f in findings} == {case.line}, (
        f"{where}: expected every finding on line {case.line}, got {findings}"
    )
    assert {f.rule for f in findings} & case.rules, f"{where}: rules {findings} not in {case.rules}"
    for finding in findings:
        assert str(finding).endswith(f"at {case.path}:{case.line}")
        assert_no_leak(str(finding), case.secret, f"{where}: str(finding)")
        assert_no_leak(repr(finding), case.secret, f"{where}: repr(finding)")


@pytest.mark.parametrize("case", SECRET_CASES, ids=lambda c: c.id)
def test_gate_blocks_secret_without_leaking_it(case: SecretCase) -> None:
    verdict = static_checks(case.files())
    assert not verdict.passed
    assert verdict.verdict == "blocked"
    scan = next(c for c in verdict.checks if c.name == "credential-scan")
    assert scan.status == "failed"
    assert f"{case.path}:{case.line}" in scan.detail
    with pytest.raises(GateBlocked) as raised:
        verdict.raise_if_blocked()
    error = raised.value
    assert error.exit_code == 3
    assert "credential-scan" in error.message
    assert f"{case.path}:{case.line}" in error.message
    assert scan.findings and all(f"{case.path}:{case.line}" in f for f in scan.findings)
    assert set(scan.findings) <= set(error.findings)
    where = f"{case.id} [seed {SEED}]"
    assert_no_leak(error.message, case.secret, f"{where}: GateBlocked message")
    assert_no_leak(error.one_line(), case.secret, f"{where}: GateBlocked one_line()")
    assert_no_leak(str(error), case.secret, f"{where}: str(GateBlocked)")
    assert_no_leak("\n".join(error.findings), case.secret, f"{where}: GateBlocked findings")
    assert_no_leak(json.dumps(verdict.to_json()), case.secret, f"{where}: verdict JSON")


def test_scan_files_finds_every_secret_in_one_tree() -> None:
    tree: dict[str, str] = {}
    for case in SECRET_CASES:
        tree.update(case.files())
    seen: list[str] = []
    findings = scan_files(tree, progress=seen.append)
    assert seen == sorted(tree)
    assert findings == sorted(findings)
    located = {(f.path, f.line) for f in findings}
    for case in SECRET_CASES:
        assert (case.path, case.line) in located, case.id
    companion_paths = set(tree) - {c.path for c in SECRET_CASES}
    assert not [f for f in findings if f.path in companion_paths]
    assert all(isinstance(f, Finding) for f in findings)


def test_gate_message_caps_the_list_and_leaks_nothing() -> None:
    tree: dict[str, str] = {}
    for case in SECRET_CASES:
        tree.update(case.files())
    with pytest.raises(GateBlocked) as raised:
        static_checks(tree).raise_if_blocked()
    error = raised.value
    assert "and" in error.message and "more" in error.message  # only the first 5 are listed
    assert len(error.findings) >= len(SECRET_CASES)
    text = "\n".join([error.message, error.one_line(), *error.findings])
    for case in SECRET_CASES:
        assert_no_leak(text, case.secret, case.id)


def test_one_finding_per_secret_per_line() -> None:
    s = github_classic()
    text = f"a: {s}\nb: {s} {s}\n"
    findings = scan_text("rules/x.md", text)
    lines = [f.line for f in findings if f.rule in GITHUB]
    assert sorted(set(lines)) == [1, 2]
    assert len([f for f in findings if f.line == 2 and f.rule == "github-token"]) == 1


# ---------------------------------------------------------------- look-alikes pass


@pytest.mark.parametrize("case", BENIGN_CASES, ids=lambda c: c.id)
def test_benign_look_alike_is_not_flagged(case: BenignCase) -> None:
    assert scan_text(case.path, case.text) == [], f"{case.id}: {case.text!r}"
    verdict = static_checks(case.files())
    scan = next(c for c in verdict.checks if c.name == "credential-scan")
    assert scan.status == "passed", scan.detail


def test_benign_tree_passes_as_a_whole() -> None:
    tree: dict[str, str] = {}
    for case in BENIGN_CASES:
        tree.update(case.files())
    assert scan_files(tree) == []
