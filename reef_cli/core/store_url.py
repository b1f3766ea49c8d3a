"""What a database URL says: its scheme, the SQLite path it names, what makes it unusable,
and how it is shown (never with its password). Text only: which URL is in use
(``store.database_url``) reads the settings, which show a URL through ``shown_url``."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

ENV = "REEF_DATABASE_URL"
POSTGRES_SCHEMES = ("postgresql", "postgres")


def sqlite_path(url: str) -> str | None:
    """The absolute file path a ``sqlite:///PATH`` URL names (``sqlite:////abs`` too), or
    None when ``url`` is no such URL."""
    prefix = "sqlite:///"
    if not url.lower().startswith(prefix) or len(url) == len(prefix):
        return None
    return "/" + url[len(prefix) :].lstrip("/")


def postgres_problem(url: str) -> str | None:
    """What makes ``url`` (a postgres/postgresql one) no URL a driver can take, or None.
    Checked before connecting, so ``postgres:/bad`` is one line, not the driver's error."""
    head = url.split(":", 1)[0].lower()
    if not url[len(head) + 1 :].startswith("//"):
        return "it does not start with postgresql://"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 -- raises on a port that is no number in 0..65535
    except ValueError as exc:
        return f"it is not a URL ({exc})"
    if any(ord(c) < 32 or ord(c) == 127 for c in url):
        return "it holds a control character"
    return None


def scheme_of(url: str) -> str:
    return url.split(":", 1)[0].lower() if ":" in url else ""


def shown_url(url: str) -> str:
    """``url`` with its password replaced by ``***`` (for messages and logs)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparseable URL>"
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    netloc = f"{parts.username or ''}:***@{host}"
    return urlunsplit(parts._replace(netloc=netloc))


def password_of(url: str | None) -> str | None:
    """The password in ``url`` (for the log filter to hide), or None."""
    if not url:
        return None
    try:
        return urlsplit(url).password
    except ValueError:
        return None
