"""Progress display for long work: a rich bar on a terminal, silence otherwise."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def scan_progress(label: str) -> Iterator[Callable[[str], None]]:
    """Yield a ``tick(item)`` callback that advances a transient spinner with the item name."""
    import sys

    if not sys.stderr.isatty():
        yield lambda _item: None
        return
    from rich.progress import Progress, SpinnerColumn, TextColumn

    from reef_cli.cli._output import err_console

    with Progress(
        SpinnerColumn(), TextColumn("{task.description}"), console=err_console(), transient=True
    ) as progress:
        task = progress.add_task(label)

        from reef_cli.cli._output import markup

        def tick(item: str) -> None:  # a file name in the tree: the description is markup
            progress.update(task, description=f"{label}: {markup(item, multiline=False)}")

        yield tick
