"""Shared CLI output: one rich console (created on first use), JSON, error lines.

Text from data (reasons, names, messages, model output, file names) is untrusted: it goes
through ``safe`` (control characters spelled out, see ``core.controls``) and, where rich
reads markup, ``markup`` as well, so neither an escape sequence nor ``[bold red]`` in a
release reason reaches the terminal as such. The consoles spell out control characters
in whatever they render too, a net under the call sites."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

_console: Console | None = None
_err_console: Console | None = None


def safe(text: object, *, multiline: bool = True) -> str:
    """``text`` as a string with control characters (escapes, C1, bidi overrides) spelled
    out; ``multiline=False`` spells out line breaks and tabs too (a one-line field)."""
    from reef_cli.core.controls import visible

    return visible(str(text), multiline=multiline)


def markup(text: object, *, multiline: bool = True) -> str:
    """``safe`` text escaped for rich markup: ``[bold]`` in data prints as itself."""
    from rich.markup import escape

    return escape(safe(text, multiline=multiline))


def echo(text: object, err: bool = False) -> None:
    """``typer.echo`` for a line that quotes data."""
    import typer

    typer.echo(safe(text), err=err)


def json_text(data: Any, indent: int | None = 2) -> str:
    """JSON that keeps non-ASCII text readable but never carries a raw C1 or bidi
    control (C0 ones json escapes itself)."""
    from reef_cli.core.controls import json_visible

    return json_visible(json.dumps(data, indent=indent, ensure_ascii=False, default=str))


def _safe_console(**options: Any) -> Console:
    """A rich console that spells out control characters in every string and text
    segment it renders (rich's own styling is emitted as control segments, untouched)."""
    from rich.console import Console
    from rich.segment import Segment

    from reef_cli.core.controls import visible

    class SafeConsole(Console):
        def render_str(self, text: str, **kwargs: Any) -> Any:
            return super().render_str(visible(text), **kwargs)

        def render(self, renderable: Any, options: Any = None) -> Any:
            for segment in super().render(renderable, options):
                if segment.control or not segment.text:
                    yield segment
                else:
                    text = visible(segment.text)
                    yield segment if text == segment.text else Segment(text, segment.style)

    return SafeConsole(**options)


def console() -> Console:
    global _console
    if _console is None:
        _console = _safe_console(highlight=False)
    return _console


def err_console() -> Console:
    global _err_console
    if _err_console is None:
        _err_console = _safe_console(stderr=True, highlight=False)
    return _err_console


def print_json(data: Any) -> None:
    """Plain JSON on stdout (no colour, no wrapping) so it pipes into jq; ASCII-escaped,
    so no control character from data reaches the terminal."""
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
    sys.stdout.flush()


def error_line(text: str, prog: str = "reef") -> None:
    """The one red line a failed command prints on stderr."""
    from rich.markup import escape

    err_console().print(f"[bold red]{prog}: error:[/] {escape(safe(text))}", soft_wrap=True)


def warn(text: str) -> None:
    from rich.markup import escape

    err_console().print(f"[yellow]reef: warning:[/] {escape(safe(text))}", soft_wrap=True)
