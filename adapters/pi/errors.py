"""Errors the pi adapter raises on purpose; each names the fix."""

from __future__ import annotations

from adapters._files import InstallError
from reef_cli.core.errors import ReefError

__all__ = ["InstallError", "NotInstalled", "PiNotFound", "PiUnsupported"]


class PiNotFound(ReefError):
    """No pi binary where Reef looked."""

    exit_code = 5
    http_status = 503


class PiUnsupported(ReefError):
    """The pi binary is a version Reef does not support (or does not answer --version)."""

    exit_code = 5
    http_status = 503


class NotInstalled(ReefError):
    """The agent dir holds no Reef install."""

    http_status = 409
