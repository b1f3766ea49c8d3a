"""Provider key formats (issue 11, item 21): every provider LiteLLM routes to that has a
recognisable key format, plus the code hosts and services a harness commonly touches.

Each fake is generated from a seeded RNG in its issuer's format (prefix, alphabet,
length), never a real key; prefixes are split in the source so no key-shaped literal sits
in this file. Each must be found at its line, under its rule, without any part of it in
the finding. Keys without a format (Mistral, Cohere, Azure OpenAI …) are found through the
variable they are assigned to. Placeholders, short strings and names stay quiet.
"""

from __future__ import annotations

import base64
import string

import pytest

from reef_cli.core.checks import static_checks
from reef_cli.core.secrets import scan_text

# One seeded generator and alphabet set for every fake key (REEF_SECRETS_SEED explores).
from tests.core.test_secrets import ALNUM, DIGITS, HEX, LOWER, RNG, SEED, UPPER, URLSAFE, rand


def uuid_hex() -> str:
    return "-".join(rand(n, HEX) for n in (8, 4, 4, 4, 12))


def p(*parts: str) -> str:
    """A prefix, written in pieces so this file holds no key-shaped literal."""
    return "".join(parts)


# (id, rule, fake key) — formats as their issuers document or show them.
KEYS: list[tuple[str, str, str]] = [
    ("openai-legacy", "openai-api-key", p("s", "k-") + rand(20) + "T3Blbk" + "FJ" + rand(20)),
    ("openai-project", "openai-api-key", p("sk-", "proj-") + rand(156, URLSAFE)),
    ("openai-service-account", "openai-api-key", p("sk-", "svcacct-") + rand(156, URLSAFE)),
    ("openai-admin", "openai-api-key", p("sk-", "admin-") + rand(156, URLSAFE)),
    ("anthropic-api03", "anthropic-api-key", p("sk-", "ant-api03-") + rand(93, URLSAFE) + "AA"),
    (
        "anthropic-admin01",
        "anthropic-api-key",
        p("sk-", "ant-admin01-") + rand(93, URLSAFE) + "AA",
    ),
    ("google-aiza", "google-api-key", p("AI", "za") + "Sy" + rand(33, URLSAFE)),
    ("gemini-aq", "google-api-key", p("A", "Q.") + rand(50, URLSAFE)),
    ("google-oauth-secret", "google-oauth-client-secret", p("GOC", "SPX-") + rand(28, URLSAFE)),
    ("google-access-token", "google-oauth-access-token", p("ya", "29.") + rand(120, URLSAFE)),
    ("groq", "groq-api-key", p("gs", "k_") + rand(52)),
    ("xai", "xai-api-key", p("xa", "i-") + rand(80)),
    ("huggingface", "huggingface-token", p("h", "f_") + rand(34, string.ascii_letters)),
    ("replicate", "replicate-api-token", p("r", "8_") + rand(37)),
    ("together", "together-api-key", p("tgp", "_v1_") + rand(43, URLSAFE)),
    ("fireworks", "fireworks-api-key", p("f", "w_") + rand(24)),
    ("perplexity", "perplexity-api-key", p("pp", "lx-") + rand(48)),
    ("deepseek", "deepseek-api-key", p("s", "k-") + rand(32, HEX)),
    ("openrouter", "openrouter-api-key", p("sk-", "or-v1-") + rand(64, HEX)),
    ("voyage", "voyage-api-key", p("p", "a-") + rand(43, URLSAFE)),
    ("cerebras", "cerebras-api-key", p("cs", "k-") + rand(48, LOWER + DIGITS)),
    ("nvidia", "nvidia-api-key", p("nv", "api-") + rand(64, URLSAFE)),
    ("databricks", "databricks-token", p("da", "pi") + rand(32, HEX)),
    ("langsmith", "langsmith-api-key", p("ls", "v2_pt_") + rand(32, HEX) + "_" + rand(10, HEX)),
    ("langfuse", "langfuse-secret-key", p("sk-", "lf-") + uuid_hex()),
    ("elevenlabs", "elevenlabs-api-key", p("s", "k_") + rand(48, HEX)),
    ("jina", "jina-api-key", p("ji", "na_") + rand(60, URLSAFE)),
    ("tavily", "tavily-api-key", p("tv", "ly-dev-") + rand(32)),
    ("anyscale", "anyscale-api-key", p("esec", "ret_") + rand(26, LOWER + DIGITS)),
    ("friendli", "friendli-token", p("fl", "p_") + rand(40)),
    ("pinecone", "pinecone-api-key", p("pc", "sk_") + rand(6) + "_" + rand(64)),
    ("firecrawl", "firecrawl-api-key", p("f", "c-") + rand(32, HEX)),
    ("aws-key-id", "aws-access-key-id", p("AK", "IA") + rand(16, UPPER + "234567")),
    ("aws-session-key-id", "aws-access-key-id", p("AS", "IA") + rand(16, UPPER + "234567")),
    (
        "aws-bedrock",
        "aws-bedrock-api-key",
        p("AB", "SK") + base64.b64encode(b"BedrockAPIKey-" + RNG.randbytes(90)).decode(),
    ),
    (
        "azure-ad-client-secret",
        "azure-ad-client-secret",
        rand(3) + rand(1, DIGITS) + p("Q", "~") + rand(34, ALNUM + "_~.-"),
    ),
    ("digitalocean", "digitalocean-token", p("do", "p_v1_") + rand(64, HEX)),
    ("github-classic", "github-token", p("gh", "p_") + rand(36)),
    (
        "github-fine-grained",
        "github-fine-grained-token",
        p("github", "_pat_") + "11" + rand(20, UPPER + DIGITS) + "_" + rand(59),
    ),
    ("gitlab-pat", "gitlab-token", p("gl", "pat-") + rand(20, URLSAFE)),
    ("gitlab-runner", "gitlab-token", p("gl", "rt-") + rand(20, URLSAFE)),
    (
        "slack-bot",
        "slack-token",
        p("xo", "xb-") + rand(12, DIGITS) + "-" + rand(13, DIGITS) + "-" + rand(24),
    ),
    (
        "slack-app",
        "slack-app-token",
        p("xa", "pp-")
        + "1-A"
        + rand(10, UPPER + DIGITS)
        + "-"
        + rand(13, DIGITS)
        + "-"
        + rand(64, HEX),
    ),
    ("stripe-secret", "stripe-live-key", p("sk", "_live_") + "51" + rand(97)),
    ("stripe-restricted", "stripe-live-key", p("rk", "_live_") + "51" + rand(97)),
    ("npm", "npm-token", p("np", "m_") + rand(36)),
    ("linear", "linear-api-key", p("lin", "_api_") + rand(40)),
    ("notion", "notion-token", p("nt", "n_") + rand(46)),
    ("sentry-user", "sentry-token", p("sntr", "yu_") + rand(64, HEX)),
    ("doppler", "doppler-token", p("dp", ".pt.") + rand(43)),
]

# Contexts a key turns up in; ``{K}`` is the key, line 3 is where it sits.
CONTEXTS = [
    ("env", "rules/{id}.md", "# Setup\n\n```sh\nexport PROVIDER_SECRET_VALUE={K}\n```\n", 4),
    ("prose", "rules/{id}.md", "# Models\n\nCall it with `{K}` for now.\n", 3),
    ("json", "skills/{id}/config.json", '{\n  "provider": "x",\n  "key": "{K}"\n}\n', 3),
    ("ts", "extensions/{id}.ts", 'const client = new Client({\n  key: "{K}",\n});\n', 2),
]


def slices(secret: str, width: int = 12) -> list[str]:
    return [secret[i : i + width] for i in range(len(secret) - width + 1)]


def files_for(path: str, text: str) -> dict[str, str]:
    out = {path: text}
    if path.startswith("skills/"):
        name = path.split("/")[1]
        out[f"skills/{name}/SKILL.md"] = (
            f"---\nname: {name}\ndescription: Helper skill for tests.\n---\nUse the config.\n"
        )
    return out


@pytest.mark.parametrize(("id", "rule", "key"), KEYS, ids=[k[0] for k in KEYS])
@pytest.mark.parametrize(("where", "path", "template", "line"), CONTEXTS, ids=lambda c: c)
def test_provider_key_is_found_named_and_never_shown(
    id: str, rule: str, key: str, where: str, path: str, template: str, line: int
) -> None:
    path = path.format(id=id)
    text = template.replace("{K}", key)
    findings = scan_text(path, text)
    context = f"{id} in {where} [seed {SEED}]"
    assert findings, f"{context}: not found"
    assert {f.line for f in findings} == {line}, f"{context}: {findings}"
    assert rule in {f.rule for f in findings}, f"{context}: {findings}"
    shown = "\n".join(str(f) for f in findings) + repr(findings)
    assert not [s for s in slices(key) if s in shown], f"{context}: the finding leaks the key"
    verdict = static_checks(files_for(path, text))
    scan = next(c for c in verdict.checks if c.name == "credential-scan")
    assert scan.status == "failed" and f"{path}:{line}" in scan.detail
    assert not [s for s in slices(key) if s in scan.detail + "".join(scan.findings)]


# Keys with no format of their own: found through the name they are assigned to.
FORMATLESS = [
    ("mistral", "MISTRAL_API_KEY={K}", rand(32)),
    ("mistral-short-name", "MISTRAL_KEY={K}", rand(32)),
    ("cohere", 'cohereKey: "{K}"', rand(40)),
    ("azure-openai", "AZURE_API_KEY={K}", rand(32, HEX)),
    ("azure-header", 'headers = {"api-key": "{K}"}', rand(32, HEX)),
    ("deepinfra", "DEEPINFRA_TOKEN={K}", rand(32)),
    ("together-legacy", "TOGETHERAI_API_KEY={K}", rand(64, HEX)),
    ("watsonx", "WATSONX_APIKEY={K}", rand(44, URLSAFE)),
    ("cloudflare", "CLOUDFLARE_API_TOKEN={K}", rand(40, URLSAFE)),
    ("aws-secret", "aws_secret_access_key = {K}", rand(40, ALNUM + "+/")),
    ("bearer-header", 'curl -H "Authorization: Bearer {K}" https://api.acme.dev', rand(40)),
]


@pytest.mark.parametrize(("id", "template", "key"), FORMATLESS, ids=[f[0] for f in FORMATLESS])
def test_formatless_key_is_found_through_its_name(id: str, template: str, key: str) -> None:
    text = "# Setup\n\n" + template.replace("{K}", key) + "\n"
    findings = scan_text(f"rules/{id}.md", text)
    assert findings and {f.line for f in findings} == {3}, f"{id} [seed {SEED}]: {findings}"
    assert not [s for s in slices(key) if s in repr(findings)]


BENIGN = [
    # placeholders, one per family
    "GROQ_API_KEY=" + p("gs", "k_") + "your-groq-key-here",
    "XAI_API_KEY=" + p("xa", "i-") + "...",
    "export XAI_API_KEY=<" + p("xa", "i-") + "key>",
    "REPLICATE_API_TOKEN=" + p("r", "8_") + "*" * 37,
    "OPENROUTER_API_KEY=" + p("sk-", "or-v1-") + "0" * 64,
    "DEEPSEEK_API_KEY=" + p("s", "k-") + "x" * 32,
    "PERPLEXITY_API_KEY=" + p("pp", "lx-") + "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
    "NVIDIA_API_KEY=" + p("nv", "api-") + "YOUR_KEY",
    "DATABRICKS_TOKEN=" + p("da", "pi") + "<token>",
    "VOYAGE_API_KEY=" + p("p", "a-") + "...",
    "CEREBRAS_API_KEY=" + p("cs", "k-") + "********",
    "FIREWORKS_API_KEY=" + p("f", "w_") + "example",
    "TAVILY_API_KEY=" + p("tv", "ly-") + "YOUR_API_KEY",
    "MISTRAL_API_KEY=${MISTRAL_API_KEY}",
    "cohere_key = os.environ['COHERE_API_KEY']",
    'curl -H "Authorization: Bearer $OPENAI_API_KEY" https://api.openai.com/v1/models',
    "Stripe's publishable key " + p("pk", "_live_") + rand(24) + " goes in the page.",
    # short strings and prefixes in prose
    "Groq keys start with " + p("gs", "k_") + ", xAI keys with " + p("xa", "i-") + ".",
    p("s", "k-") + "abc and " + p("r", "8_") + "short are too short to be keys.",
    "Voyage keys start with pa- and Cerebras keys with csk-.",
    # names that share a prefix
    "Use `pa-system-announcement-template-for-the-reef-release` for the notice.",
    "The `fw_update_handler_for_the_firmware_flashing_tool` runs last.",
    "Read `jina_reader_integration_guide_for_the_search_skill_v-two` first.",
    "Authorization: Bearer-token-authentication-is-described-in-the-rfc",
    "Release notes live in pa-2024-release-notes-for-the-reef-project-v2-final.md.",
    "Tag it 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.",
    "sort_key: created_at_timestamp_v2",
    "primary_key: customer_account_number_2",
]


@pytest.mark.parametrize("text", BENIGN)
def test_placeholders_short_strings_and_names_stay_quiet(text: str) -> None:
    assert scan_text("rules/x.md", text + "\n") == []
