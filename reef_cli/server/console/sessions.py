"""Console sign-in: a browser cannot send a bearer header from a link, so a person signs
in once with a Reef token and the console keeps a session behind an opaque cookie.

The cookie names a random session id; the token stays in this process's memory and is
checked again on every request, so a revoked or rotated token (`reef token` and a
reload) ends its sessions at once. Each session has its own CSRF token, which every
console form carries and every console write compares (the synchronizer-token pattern;
the cookie is also ``SameSite=Strict`` and writes check ``Origin``). Sessions are this
process's: behind several replicas, route a person to one (sticky sessions).
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field

from reef_cli.core.tokens import Grant
from reef_cli.server.auth import Authenticator

COOKIE = "reef_console"
COOKIE_PATH = "/reef/ui"
IDLE_SECONDS = 12 * 3600  # a session unused this long is gone
MAX_SESSIONS = 1000  # the oldest goes first: sign-ins cannot grow memory without bound


@dataclass
class Session:
    id: str
    token: str | None  # None on an open server (no tokens: loopback only)
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    seen: float = field(default_factory=time.monotonic)


class Sessions:
    """The console's sessions, bounded in number and idle time."""

    def __init__(self, auth: Authenticator) -> None:
        self.auth = auth
        self._lock = threading.Lock()
        self._by_id: OrderedDict[str, Session] = OrderedDict()

    def sign_in(self, token: str | None) -> Session | None:
        """A new session for ``token``, or None when the token is wrong. An open server
        takes no token."""
        if not self.auth.open and self._grant(token) is None:
            return None
        session = Session(secrets.token_urlsafe(32), None if self.auth.open else token)
        with self._lock:
            self._by_id[session.id] = session
            while len(self._by_id) > MAX_SESSIONS:
                self._by_id.popitem(last=False)
        return session

    def find(self, session_id: str | None) -> tuple[Session, Grant] | None:
        """The live session a cookie names and its grant now, or None (signed out, idle
        too long, the token revoked)."""
        if not session_id:
            return None
        now = time.monotonic()
        with self._lock:
            session = self._by_id.get(session_id)
            if session is None:
                return None
            if now - session.seen > IDLE_SECONDS:
                del self._by_id[session_id]
                return None
            session.seen = now
            self._by_id.move_to_end(session_id)
        grant = self._grant(session.token)
        if grant is None:
            self.sign_out(session_id)
            return None
        return session, grant

    def sign_out(self, session_id: str) -> None:
        with self._lock:
            self._by_id.pop(session_id, None)

    def _grant(self, token: str | None) -> Grant | None:
        if self.auth.open:
            return self.auth.grant({})
        if not token:
            return None
        return self.auth.grant({"authorization": f"Bearer {token}"}, allow_api_key=False)


def csrf_ok(session: Session, sent: str | None) -> bool:
    """Whether a form carried this session's CSRF token (compared in constant time)."""
    return bool(sent) and hmac.compare_digest(session.csrf, sent or "")
