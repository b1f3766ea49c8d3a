"""What the adapter contract (tests/e2e/test_adapter_contract.py) needs to know per agent.

One ``Profile`` a row (its binary is the agents table's): the config file Reef merges into (with a
person's own settings, a corrupt version, an edit a person makes later and how to tell
Reef's part in it), the instructions file holding Reef's marked section, where a person
keeps their own skills and commands, and the agent's file-reading tool (the sandbox test
has the scripted model call it). Everything else the contract asks is the same for all.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from adapters.base import Routing

PERSON_RULE = b"# My notes\n\nAlways be kind (person-rule-0b7e).\n"
PERSON_SKILL = (
    b"---\nname: my-own-skill\ndescription: Mine, not Reef's (person-skill-5e1f).\n---\n\n"
    b"Do it my way.\n"
)
PERSON_COMMAND = b"---\ndescription: My own command (person-command-77aa)\n---\n\nDo $ARGUMENTS.\n"
PERSON_EDIT = "person-edit-after-install-3c9d"


@dataclass(frozen=True)
class Profile:
    name: str  # the adapter name (reef_cli.core.agents)
    config: str  # the agent's own config file, relative to the target
    config_format: str  # "json", "jsonc" (comments allowed) or "toml"
    person_config: bytes  # the person's config, as they wrote it
    person_settings: dict[str, Any]  # what must stay in it while Reef is installed
    corrupt_config: bytes  # not valid in the config's format
    instructions: str  # AGENTS.md / CLAUDE.md: Reef's rules go in a marked section
    skills_dir: str  # where the agent reads skills/<name>/SKILL.md from, relative
    commands_dir: str  # where the agent reads the person's own slash commands from
    #: does the config text hold Reef's part? None: Reef never writes the person's config
    #: (then it must stay byte for byte while installed)
    reef_in_config: Callable[[str, Routing], bool] | None
    read_call: Callable[[str], tuple[str, dict[str, Any]]]  # the agent's tool that reads a file

    def person_files(self) -> dict[str, bytes]:
        """A person's own files for this agent: config, instructions, a skill, a command."""
        return {
            self.config: self.person_config,
            self.instructions: PERSON_RULE,
            f"{self.skills_dir}/my-own-skill/SKILL.md": PERSON_SKILL,
            f"{self.commands_dir}/my-own.md": PERSON_COMMAND,
        }

    @property
    def comment(self) -> str:
        return "#" if self.config_format == "toml" else "//"

    def parse(self, text: str) -> dict[str, Any]:
        if self.config_format == "toml":
            data: Any = tomllib.loads(text)
        else:
            data = json.loads(_strip_jsonc(text) if self.config_format == "jsonc" else text)
        assert isinstance(data, dict)
        return data

    def edit_config(self, text: str) -> str:
        """The person changes a setting of their own while Reef is installed (a new
        top-level key, written by hand: before any [table], or right after the ``{``)."""
        if self.config_format == "toml":
            return f'# edited later\nperson_note = "{PERSON_EDIT}"\n' + text
        head, brace, tail = text.partition("{")
        assert brace, text
        return f'{head}{{\n  "person_note": "{PERSON_EDIT}",{tail}'


def _strip_jsonc(text: str) -> str:
    """JSON from JSONC as a person writes it: whole-line ``//`` comments, trailing commas."""
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("//")]
    return re.sub(r",(\s*[}\]])", r"\1", "\n".join(lines))


def _json(text: str) -> dict[str, Any]:
    data = json.loads(text)
    return data if isinstance(data, dict) else {}


def _pi_reef(text: str, routing: Routing) -> bool:
    return "reef" in _json(text).get("providers", {}) or routing.base_url in text


def _claude_reef(text: str, routing: Routing) -> bool:
    return " hook claude-code " in text or routing.base_url in text


def _url_reef(text: str, routing: Routing) -> bool:
    return routing.base_url in text


PI_MODELS = (
    b'{\n    "providers": {\n        "ollama": {\n'
    b'            "baseUrl": "http://127.0.0.1:11434/v1",\n'
    b'            "api": "openai-completions",\n            "apiKey": "ollama",\n'
    b'            "models": [{"id": "qwen"}]\n        }\n    }\n}\n'
)
CLAUDE_SETTINGS = (
    b'{\n    "model": "claude-sonnet-4-5",\n    "hooks": {\n        "UserPromptSubmit": [\n'
    b'            {"hooks": [{"type": "command", "command": "cat >> /dev/null"}]}\n'
    b"        ]\n    }\n}\n"
)
CODEX_CONFIG = b"""# My Codex settings (person-config-c0de)
model = "gpt-5-codex"
approval_policy = "on-request"  # ask me first

[model_providers.my-ollama]
name = "Ollama"
base_url = "http://127.0.0.1:11434/v1"
"""
OPENCODE_CONFIG = b"""{
  // My opencode settings (person-config-0c0d)
  "$schema": "https://opencode.ai/config.json",
  "theme": "tokyonight",
  "provider": {
    // my local models
    "ollama": {
      "npm": "@ai-sdk/openai-compatible",
      "options": {"baseURL": "http://127.0.0.1:11434/v1"},
      "models": {"qwen": {}}
    }
  }
}
"""

PROFILES: dict[str, Profile] = {
    "pi": Profile(
        name="pi",
        config="models.json",
        config_format="json",
        person_config=PI_MODELS,
        person_settings=json.loads(PI_MODELS),
        corrupt_config=b'{\n  "providers": {\n    "ollama": {"baseUrl": \n',
        instructions="AGENTS.md",
        skills_dir="skills",
        commands_dir="prompts",
        reef_in_config=_pi_reef,
        read_call=lambda path: ("read", {"path": path}),
    ),
    "claude-code": Profile(
        name="claude-code",
        config="settings.json",
        config_format="json",
        person_config=CLAUDE_SETTINGS,
        person_settings=json.loads(CLAUDE_SETTINGS),
        corrupt_config=b'{\n  "model": "claude-sonnet-4-5",\n  "hooks": {\n',
        instructions="CLAUDE.md",
        skills_dir="skills",
        commands_dir="commands",
        reef_in_config=_claude_reef,
        read_call=lambda path: ("Read", {"file_path": path}),
    ),
    "codex": Profile(
        name="codex",
        config="config.toml",
        config_format="toml",
        person_config=CODEX_CONFIG,
        person_settings=tomllib.loads(CODEX_CONFIG.decode()),
        corrupt_config=b'model = "gpt-5-codex"\n[model_providers.ollama\nname = "Ollama"\n',
        instructions="AGENTS.md",
        skills_dir="skills",
        commands_dir="prompts",
        reef_in_config=None,  # Reef's provider lives in its own reef.config.toml profile
        read_call=lambda path: ("exec_command", {"cmd": f"cat {path}"}),
    ),
    "opencode": Profile(
        name="opencode",
        config="opencode.jsonc",
        config_format="jsonc",
        person_config=OPENCODE_CONFIG,
        person_settings=json.loads(_strip_jsonc(OPENCODE_CONFIG.decode())),
        corrupt_config=b'{\n  "$schema": "https://opencode.ai/config.json",\n  "theme": \n',
        instructions="AGENTS.md",
        skills_dir="skills",
        commands_dir="commands",
        reef_in_config=_url_reef,
        read_call=lambda path: ("read", {"filePath": path}),
    ),
}


def profile(name: str) -> Profile:
    return PROFILES[name]
