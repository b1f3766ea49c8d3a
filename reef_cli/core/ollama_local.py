"""A local Ollama server, if one answers: its models are offered as Reef's model.

Checked with the ``ollama`` client and a short timeout, so `reef doctor` and
`reef config show` stay quick when no server runs.
"""

from __future__ import annotations

import os

DEFAULT_HOST = "http://127.0.0.1:11434"


def host() -> str:
    return os.environ.get("OLLAMA_HOST") or DEFAULT_HOST


def local_models(timeout: float = 0.5) -> list[str] | None:
    """Model names the local Ollama serves, or None when no server answers."""
    try:
        import ollama

        listing = ollama.Client(host=host(), timeout=timeout).list()
    except Exception:  # not installed, not running, or not Ollama: all mean "none here"
        return None
    return sorted(str(m.model) for m in listing.models if m.model)
