"""Errors the pi adapter raises on purpose; each names the fix."""

from __future__ import annotations

from adapters._binary import AgentNotFound, AgentVersionUnsupported
from adapters._files import InstallError, NotInstalled

__all__ = ["InstallError", "NotInstalled", "PiNotFound", "PiUnsupported"]

PiNotFound = AgentNotFound  # the names pi's adapter exported before the shared ones
PiUnsupported = AgentVersionUnsupported
