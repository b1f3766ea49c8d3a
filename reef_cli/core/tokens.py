"""Access tokens for `reef serve`.

- The *main* token: ``$REEF_TOKEN``, else ``<state dir>/token`` (generated on first use,
  mode 0600). It may do everything.
- *Scenario tokens*: ``<state dir>/tokens.json`` holds ``{name, sha256, scenarios}`` for
  tokens limited to named scenarios. Only the hash is stored; the token is shown once.

Tokens are compared as SHA-256 digests with ``hmac.compare_digest`` (constant time).
A running server holds a ``FileTokens``: it re-reads both files when they change, so a
token created or revoked with `reef token` takes effect without a restart.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reef_cli.core import paths
from reef_cli.core.errors import AuthError, ConfigError, StateError
from reef_cli.core.fsutil import atomic_write_text, stat_key
from reef_cli.core.names import check_name

log = logging.getLogger("reef.tokens")

TOKEN_FILE = "token"
TOKENS_FILE = "tokens.json"
PREFIX = "reef_"


def token_path() -> Path:
    return paths.state_dir() / TOKEN_FILE


def tokens_path() -> Path:
    return paths.state_dir() / TOKENS_FILE


def digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


def generate() -> str:
    return PREFIX + secrets.token_urlsafe(32)


def _usable(token: str, where: str, fix: str) -> str:
    """``token`` if an HTTP header can carry it (visible ASCII), else a one-line error."""
    if all("!" <= c <= "~" for c in token):
        return token
    error = ConfigError if where.startswith("$") else StateError
    raise error(f"the token in {where} holds characters a header cannot carry", fix)


def main_token(create: bool = True) -> str | None:
    """``$REEF_TOKEN``, or the stored token (generated and stored 0600 when ``create``)."""
    env = os.environ.get("REEF_TOKEN")
    if env and env.strip():
        return _usable(
            env.strip(), "$REEF_TOKEN", "unset REEF_TOKEN, or export the token `reef token` prints"
        )
    path = token_path()
    if path.exists():
        renew = f"delete {path} and run `reef token` for a new one"
        try:
            text = path.read_text(encoding="utf-8").strip()
        except UnicodeDecodeError:
            raise StateError(f"the token in {path} is not text", renew) from None
        if text:
            return _usable(text, str(path), renew)
    if not create:
        return None
    paths.ensure_state_dir()
    token = generate()
    fd = None
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, (token + "\n").encode())
    except FileExistsError:
        return path.read_text(encoding="utf-8").strip()  # another process won the race
    except OSError as exc:
        raise StateError(f"cannot store the token in {path}: {exc.strerror}") from exc
    finally:
        if fd is not None:
            os.close(fd)
    return token


@dataclass(frozen=True)
class ScopedToken:
    name: str
    sha256: str
    scenarios: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "scenarios": list(self.scenarios)}


def _load_scoped() -> list[ScopedToken]:
    path = tokens_path()
    if not path.exists():
        return []
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        found = [
            ScopedToken(str(t["name"]), str(t["sha256"]), tuple(t["scenarios"]))
            for t in data["tokens"]
        ]
        if not all(
            isinstance(t, dict) and isinstance(t["scenarios"], list) for t in data["tokens"]
        ) or not all(isinstance(s, str) for t in found for s in t.scenarios):
            raise TypeError("scenarios must be a list of names")
        return found
    except (ValueError, KeyError, TypeError, RecursionError) as exc:
        raise StateError(
            f"{path} is not a valid token list", f"fix or delete {path} (tokens in it stop working)"
        ) from exc


def _save_scoped(tokens: list[ScopedToken]) -> None:
    paths.ensure_state_dir()
    data = {"tokens": [{**t.to_json(), "sha256": t.sha256} for t in tokens]}
    atomic_write_text(tokens_path(), json.dumps(data, indent=2) + "\n", mode=0o600)


def list_scoped() -> list[ScopedToken]:
    return _load_scoped()


def create_scoped(name: str, scenarios: list[str]) -> str:
    """Create a token limited to ``scenarios``; return it (shown once, stored hashed)."""
    check_name("token", name)
    if not scenarios:
        raise AuthError("a scenario token needs at least one scenario", "pass --scenario NAME")
    for s in scenarios:
        check_name("scenario", s)
    existing = _load_scoped()
    if any(t.name == name for t in existing):
        raise AuthError(f"a token named {name!r} exists", "revoke it first or pick another name")
    token = generate()
    existing.append(ScopedToken(name, digest(token).hex(), tuple(scenarios)))
    _save_scoped(existing)
    return token


def revoke_scoped(name: str) -> None:
    existing = _load_scoped()
    kept = [t for t in existing if t.name != name]
    if len(kept) == len(existing):
        raise AuthError(f"no token named {name!r}", "see `reef token list`")
    _save_scoped(kept)


@dataclass(frozen=True)
class Grant:
    """What a presented token may do: everything (``scenarios is None``) or named scenarios."""

    name: str
    scenarios: frozenset[str] | None

    def allows(self, scenario: str) -> bool:
        return self.scenarios is None or scenario in self.scenarios


class TokenSet:
    """The tokens a server accepts, as digests. ``check`` is constant-time per entry."""

    def __init__(self, main: str | None, scoped: list[ScopedToken] | None = None) -> None:
        self._main = digest(main) if main else None
        self._scoped = [(bytes.fromhex(t.sha256), t) for t in (scoped or [])]

    @property
    def open(self) -> bool:
        return self._main is None and not self._scoped

    def check(self, presented: str | None) -> Grant | None:
        if presented is None:
            return None
        got = digest(presented)
        found: Grant | None = None
        if self._main is not None and hmac.compare_digest(got, self._main):
            found = Grant("main", None)
        for want, token in self._scoped:
            if hmac.compare_digest(got, want) and found is None:
                found = Grant(token.name, frozenset(token.scenarios))
        return found


MAIN_CHECK_SECONDS = 1.0  # how stale a running server's view of the main token may be


class FileTokens(TokenSet):
    """The tokens a running `reef serve` accepts, kept in step with their files.

    ``check`` stats ``tokens.json`` (one ``stat``, about a microsecond) and re-reads it when
    its inode, mtime or size moved, so `reef token create` / `revoke` apply from the next
    request; the main token file is looked at once a second at most (rotating it is rare).
    ``reload`` re-reads both whatever they look like (`reef serve` calls it on SIGHUP). A
    tokens.json that cannot be read accepts no scenario token until it is fixed (fail
    closed: a damaged file must not keep a revoked token alive)."""

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        on_main: Callable[[str], None] | None = None,
    ) -> None:
        """``on_main`` is told each main token read (the server's log redaction learns a
        rotated one before any line could carry it)."""
        super().__init__(None, [])
        self._clock = clock
        self._on_main = on_main
        self._scoped_path, self._main_path = tokens_path(), token_path()  # resolved once
        self._lock = threading.Lock()
        self._current = TokenSet(None, [])
        self._scoped_key: object = ()
        self._main_key: object = ()
        self._main_checked = 0.0
        self.reload()

    @property
    def open(self) -> bool:
        return False  # a server that checks tokens never turns open, whatever the files say

    def check(self, presented: str | None) -> Grant | None:
        scoped_key = stat_key(self._scoped_path)
        main_due = self._clock() - self._main_checked >= MAIN_CHECK_SECONDS
        if scoped_key != self._scoped_key or (main_due and self._main_changed()):
            self._load(scoped_key)
        return self._current.check(presented)

    def reload(self) -> None:
        """Re-read the main token and tokens.json now."""
        self._load(stat_key(self._scoped_path), force=True)

    def _main_changed(self) -> bool:
        self._main_checked = self._clock()
        return self._main_stale()

    def _load(self, scoped_key: object, force: bool = False) -> None:
        with self._lock:
            if not force and scoped_key == self._scoped_key and not self._main_stale():
                return  # another thread loaded it meanwhile
            main_key = stat_key(self._main_path)
            try:
                main = main_token(create=False)
            except OSError as exc:
                log.error("cannot read the main token (%s): it is not accepted", exc.strerror)
                main = None
            except (StateError, ConfigError) as exc:
                log.error("%s: the main token is not accepted", exc.one_line())
                main = None
            try:
                scoped = _load_scoped()
            except StateError as exc:
                log.error("%s: no scenario token is accepted until it is fixed", exc.one_line())
                scoped = []
            except OSError as exc:
                log.error(
                    "cannot read %s (%s): no scenario token is accepted", self._scoped_path, exc
                )
                scoped = []
            if main and self._on_main is not None:
                self._on_main(main)
            self._current = TokenSet(main, scoped)
            first = self._scoped_key == ()
            self._scoped_key, self._main_key = scoped_key, main_key
            self._main_checked = self._clock()
            if not first:
                log.info("tokens reloaded: the main token and %d scenario token(s)", len(scoped))

    def _main_stale(self) -> bool:
        return stat_key(self._main_path) != self._main_key
