"""The local console at ``/reef/ui``: what each scenario serves and learns, its chain and
release pages, the proposals inbox, jobs with live progress, and the records, as
server-rendered pages behind the same tokens as the API (docs/console.md)."""

from reef_cli.server.console.routes import install

__all__ = ["install"]
