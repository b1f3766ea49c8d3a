"""Shared CLI output: one rich console (created on first use), JSON, error lines."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

_console: Console | None = None
_err_console: Console | None = None


def console() -> Console:
    global _console
    if _console is None:
        from rich.console import Console

        _console = Console(highlight=False)
    return _console


def err_console() -> Console:
    global _err_console
    if _err_console is None:
        from rich.console import Console

        _err_console = Console(stderr=True, highlight=False)
    return _err_console


def print_json(data: Any) -> None:
    """Plain JSON on stdout (no colour, no wrapping) so it pipes into jq."""
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
    sys.stdout.flush()


def error_line(text: str, prog: str = "reef") -> None:
    """The one red line a failed command prints on stderr."""
    from rich.markup import escape

    err_console().print(f"[bold red]{prog}: error:[/] {escape(text)}", soft_wrap=True)


def warn(text: str) -> None:
    from rich.markup import escape

    err_console().print(f"[yellow]reef: warning:[/] {escape(text)}", soft_wrap=True)
