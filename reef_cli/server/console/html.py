"""The console's page frame and the small HTML pieces every page uses. All text from a
chain, a record or a job goes through ``e`` (escaped); the pages load no external
resource and run no inline script, so the CSP below can forbid both."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from html import escape
from typing import Any
from urllib.parse import quote

from reef_cli import __version__

BASE = "/reef/ui"
#: Own files only: no inline script or style, no other origin, forms post here, no frame.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
#: The release page (core.release_page) keeps its inline stylesheet and runs no script.
RELEASE_CSP = (
    "default-src 'none'; img-src data:; style-src 'unsafe-inline'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)
HEADERS = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
    "cache-control": "no-store",
}
NAV = (("scenarios", "Scenarios", ""), ("inbox", "Inbox", "/inbox"), ("jobs", "Jobs", "/jobs"),
       ("records", "Records", "/records"))  # fmt: skip


def e(value: Any) -> str:
    return escape("" if value is None else str(value), quote=True)


def url(*parts: Any, **query: Any) -> str:
    """A console URL: each part quoted as one path segment, empty query values dropped."""
    path = BASE + "".join("/" + quote(str(p), safe="") for p in parts)
    pairs = [
        f"{quote(k)}={quote(str(v), safe='')}" for k, v in query.items() if v not in (None, "")
    ]
    return path + ("?" + "&".join(pairs) if pairs else "")


def badge(status: Any) -> str:
    text = e(status or "-")
    return f'<span class="badge {text}">{text}</span>'


def table(head: Sequence[str], rows: Iterable[Sequence[str]], empty: str) -> str:
    """A table of already-escaped cells, or a note when there are no rows."""
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    if not body:
        return f'<p class="note">{e(empty)}</p>'
    heads = "".join(f'<th scope="col">{e(h)}</th>' for h in head)
    return f"<table><thead><tr>{heads}</tr></thead><tbody>{body}</tbody></table>"


def section(name: str, title: str, body: str) -> str:
    heading = f'<h2 id="{e(name)}-h">{e(title)}</h2>'
    return f'<section id="{e(name)}" aria-labelledby="{e(name)}-h">{heading}{body}</section>'


def hidden_csrf(csrf: str) -> str:
    return f'<input type="hidden" name="csrf" value="{e(csrf)}">'


def action_form(action: str, csrf: str, label: str, fields: dict[str, Any], cls: str = "") -> str:
    """A one-button POST form; the CSRF token rides along as a hidden field."""
    inputs = "".join(
        f'<input type="hidden" name="{e(k)}" value="{e(v)}">' for k, v in fields.items()
    )
    css = f' class="{e(cls)}"' if cls else ""
    return (
        f'<form method="post" action="{e(action)}" class="inline">{hidden_csrf(csrf)}{inputs}'
        f'<button type="submit"{css}>{e(label)}</button></form>'
    )


_CURRENT = ' aria-current="page"'


def nav_bar(current: str, csrf: str | None, who: str) -> str:
    """The top bar: a skip link (the first Tab stop), the sections, who is signed in."""
    links = "".join(
        f'<a href="{BASE}{path}"{_CURRENT if key == current else ""}>{e(label)}</a>'
        for key, label, path in NAV
    )
    out = (
        f'<a class="skip" href="#main">Skip to content</a><header class="bar">'
        f'<a class="brand" href="{BASE}">Reef</a><nav aria-label="console">{links}</nav>'
        f'<span class="who">{e(who)}</span>'
    )
    if csrf is not None:
        out += action_form(url("logout"), csrf, "Sign out", {}, "quiet")
    return out + "</header>"


def frame(
    title: str, body: str, *, current: str, csrf: str | None, who: str, notice: str = ""
) -> str:
    """A whole console page."""
    flash = f'<p class="flash" role="status">{e(notice)}</p>' if notice else ""
    meta = f'<meta name="reef-csrf" content="{e(csrf)}">' if csrf else ""
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"{meta}<title>{e(title)} · Reef console</title>"
        f'<link rel="stylesheet" href="{BASE}/static/console.css">'
        f'<script src="{BASE}/static/console.js" defer></script></head><body>'
        f"{nav_bar(current, csrf, who)}"
        f'<main id="main" tabindex="-1"><h1>{e(title)}</h1>{flash}{body}</main>'
        f'<footer class="note">Reef {e(__version__)}</footer></body></html>\n'
    )
