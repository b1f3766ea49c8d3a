"""Compact JSON (no spaces after ``,`` and ``:``) from encoders made once.

``json.dumps`` with any option builds a new ``JSONEncoder`` on every call, about 4 µs
on two slow cores; these run per request, per stream event or per stored row. The text
is what ``json.dumps(value, separators=(",", ":"))`` gives, with or without
``ensure_ascii``."""

from __future__ import annotations

import json

ascii_compact = json.JSONEncoder(separators=(",", ":")).encode
"""Non-ASCII characters escaped (``\\u00e9``), as ``json.dumps`` does by default."""

unicode_compact = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
"""Non-ASCII characters as they are (the caller encodes the text as UTF-8)."""
