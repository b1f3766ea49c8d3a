"""Where Reef keeps its state: one user directory, overridable with ``REEF_HOME``."""

from __future__ import annotations

import os
from pathlib import Path

from reef_cli.core.errors import StateError


def state_dir() -> Path:
    """The state directory: ``$REEF_HOME`` or the platform's user data dir for ``reef``."""
    override = os.environ.get("REEF_HOME")
    if override:
        return Path(override).expanduser()
    from platformdirs import user_data_path

    return user_data_path("reef", appauthor=False)


def ensure_state_dir() -> Path:
    """Create the state directory if needed; fail with a fix if it cannot be written."""
    root = state_dir()
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StateError(
            f"cannot create the state directory {root}: {exc.strerror}",
            "set REEF_HOME to a writable directory",
        ) from exc
    if not root.is_dir():
        raise StateError(f"state path {root} is not a directory", "set REEF_HOME elsewhere")
    if not os.access(root, os.W_OK):
        raise StateError(f"state directory {root} is not writable", "set REEF_HOME elsewhere")
    return root


def config_path() -> Path:
    return state_dir() / "config.toml"


def scenarios_dir() -> Path:
    return state_dir() / "scenarios"


def archive_dir() -> Path:
    return state_dir() / "archive"


def agent_dir(adapter: str, scenario: str) -> Path:
    """The agent folder Reef's wrappers own for one adapter and scenario."""
    return agents_dir() / f"{adapter}-{scenario}"


def agents_dir() -> Path:
    return state_dir() / "agents"
