"""Running opencode through `reef serve`: where it keeps things, its environment, and the
argv of a one-shot ``opencode run``.

Verified against opencode 1.18.33 (``opencode debug paths``, runs against a scripted
server; see docs/adapters-opencode.md):

- Global config dir ``$XDG_CONFIG_HOME/opencode`` (``~/.config/opencode``); data dir
  ``$XDG_DATA_HOME/opencode`` holding the session store ``opencode.db`` (SQLite).
  ``OPENCODE_CONFIG_DIR`` adds one more config dir, read after the global one (its
  ``opencode.json(c)``, ``AGENTS.md``, ``skills/``, ``commands/``); ``OPENCODE_DB`` (an
  absolute path) moves the session store. A Reef-owned agent dir uses both, so its
  sessions live in it; the global config dir keeps opencode's own defaults.
- ``OPENCODE_DISABLE_AUTOUPDATE`` (no release check), ``OPENCODE_DISABLE_MODELS_FETCH`` (no
  models.dev catalog), ``OPENCODE_DISABLE_SHARE`` (no session sharing) keep a run local.
- opencode ``npm install``s ``@opencode-ai/plugin`` into every config dir at start unless
  the dir has ``node_modules/`` and a ``package-lock.json`` naming it; a headless run's
  dirs get both (``offline_dirs``), so it reaches nothing but `reef serve`.
- ``opencode run`` joins its positional words with spaces and quotes any word that holds
  a space: the prompt goes in split on spaces, after ``--``, and arrives verbatim.
  Permission asks are auto-rejected (no ``--auto``); ``--title`` skips the model call
  that would name the session.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from adapters.base import Routing

QUIET_ENV = {
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_SHARE": "1",
}
#: Only in headless runs: no ~/.claude/CLAUDE.md or ~/.claude/skills in a trial's context.
HEADLESS_ENV = {"OPENCODE_DISABLE_CLAUDE_CODE": "1", "OPENCODE_DISABLE_EXTERNAL_SKILLS": "1"}
DB = "opencode.db"
XDG = ".xdg"  # a headless run's XDG homes, inside its agent dir
PLUGIN_SDK = "@opencode-ai/plugin"
#: opencode's sub-commands (``opencode --help``): the wrapper picks the model only for
#: the TUI (no sub-command) and for ``run``.
SUBCOMMANDS = frozenset(
    {
        *("completion", "acp", "mcp", "attach", "run", "debug", "providers", "auth"),
        *("agent", "upgrade", "uninstall", "serve", "web", "models", "stats", "export"),
        *("import", "github", "pr", "session", "plugin", "plug", "db"),
    }
)


def _xdg(name: str, fallback: str) -> Path:
    value = os.environ.get(name)
    return Path(value).expanduser() if value else Path.home() / fallback


def default_config_dir() -> Path:
    """opencode's global config dir (``$XDG_CONFIG_HOME/opencode``)."""
    return _xdg("XDG_CONFIG_HOME", ".config") / "opencode"


def default_data_dir() -> Path:
    return _xdg("XDG_DATA_HOME", ".local/share") / "opencode"


def is_global(target: Path) -> bool:
    """Whether ``target`` is opencode's own global config dir (no override needed)."""
    return target.expanduser().resolve() == default_config_dir().resolve()


def db_path(target: Path) -> Path:
    """The session store for sessions run on ``target``: the global one for the global
    config dir (``$OPENCODE_DB`` honoured), else ``target/opencode.db``."""
    if not is_global(target):
        return target.expanduser().absolute() / DB
    override = os.environ.get("OPENCODE_DB")
    if override and override != ":memory:":
        return default_data_dir() / override if not os.path.isabs(override) else Path(override)
    return default_data_dir() / DB


def wrapper_env(target: Path, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """What to add to the caller's environment to run opencode on ``target``.

    The token and the session are read by opencode from ``REEF_TOKEN`` and
    ``REEF_SESSION_ID`` (``{env:…}`` in the config), which the caller sets; with no
    ``REEF_SESSION_ID`` the header goes out empty and `reef serve` can fall back to the
    ``x-session-id`` opencode sends (its own session id)."""
    env = dict(QUIET_ENV)
    if not is_global(target):
        where = target.expanduser().absolute()
        env["OPENCODE_CONFIG_DIR"] = str(where)
        env["OPENCODE_DB"] = str(where / DB)
    return env


def with_model(argv: list[str], model: str) -> list[str]:
    """``argv`` with ``--model reef/<id>`` for the TUI or ``run``, unless it picks one."""
    if {"-m", "--model"} & set(argv) or any(a.startswith("--model=") for a in argv):
        return list(argv)
    if argv and argv[0] == "run":
        return ["run", "--model", model, *argv[1:]]
    if argv and argv[0] in SUBCOMMANDS:
        return list(argv)
    return ["--model", model, *argv]


def run_argv(binary: str, model: str, prompt: str, title: str) -> list[str]:
    """``opencode run`` once, the prompt arriving verbatim (see the module docstring)."""
    return [binary, "run", "--model", model, "--title", title, "--", *prompt.split(" ")]


def headless_env(target: Path, routing: Routing, token: str, session_id: str) -> dict[str, str]:
    """A headless run's own variables: everything opencode keeps goes inside ``target``."""
    root = target / XDG
    return {
        **wrapper_env(target),
        **HEADLESS_ENV,
        "XDG_CONFIG_HOME": str(root / "config"),
        "XDG_DATA_HOME": str(root / "data"),
        "XDG_CACHE_HOME": str(root / "cache"),
        "XDG_STATE_HOME": str(root / "state"),
        routing.token_env: token,
        routing.session_env: session_id,
    }


def offline_dirs(target: Path) -> None:
    """Mark the run's config dirs as having opencode's plugin SDK, so no npm install starts."""
    lock = {"packages": {"": {"dependencies": {PLUGIN_SDK: "*"}}}}
    for folder in (target, target / XDG / "config" / "opencode"):
        (folder / "node_modules").mkdir(parents=True, exist_ok=True)
        lockfile = folder / "package-lock.json"
        if not lockfile.exists():
            lockfile.write_text(json.dumps(lock) + "\n", encoding="utf-8")


def title_of(prompt: str) -> str:
    """The session title ``--title`` gives (any non-default title skips the title call)."""
    words = " ".join(prompt.split())
    return (words[:60] or "reef run").strip()
