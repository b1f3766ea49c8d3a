"""`reef eval`: score releases on a task set, with intervals, a paired comparison and a plot."""

from __future__ import annotations


def eval_releases() -> None:
    """Score releases on a task set (being written)."""
