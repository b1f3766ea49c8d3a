"""A scripted model on a real port for recipe tests, reached through LiteLLM like any
configured endpoint (``openai/<name>`` + ``api_base``); the ``scripted`` fixture is in
tests/conftest.py."""

from __future__ import annotations

import json
import threading
from collections import deque
from typing import Any

from tests.fakes.server_thread import ServerThread
from tests.fakes.upstream import FakeUpstream, Turn


def draft_json(**overrides: Any) -> str:
    draft = {
        "kind": "rule",
        "name": "failing-test-first",
        "description": "Reproduce bugs with a failing test first",
        "body": "Before fixing a bug, write a failing test that reproduces it (reef-e2e-7c1d). "
        "Run it to see it fail, then fix the bug and run it again.",
        "why": "The developer wants bugs reproduced before they are fixed.",
    }
    draft.update(overrides)
    return json.dumps(draft)


def junk_draft() -> str:
    """A draft the quality gate refuses (template debris, hashtags): a job that reaches
    the gate with it ends ``rejected`` without a trial."""
    return draft_json(
        name="tips",
        description="Helpful tips #coding #tips",
        body="Visit {{url}} for more. #coding #tips",
        why="Because #123456#",
    )


def judgement(score: float = 0.9, reason: str = "It does what the request asks.") -> str:
    return json.dumps({"score": score, "reason": reason})


def is_judge_request(body: dict[str, Any]) -> bool:
    """A quality-gate judge call (``recipes.quality.judge``), told apart by its
    system prompt, so tests script it apart from the draft and the agent's calls."""
    from recipes.quality import JUDGE_SYSTEM

    messages = body.get("messages") or []
    first = messages[0] if messages and isinstance(messages[0], dict) else {}
    return first.get("role") == "system" and first.get("content") == JUDGE_SYSTEM


def is_follow_request(body: dict[str, Any]) -> bool:
    """A follow-check verdict call (``recipes.reefine.follow``), told apart by its system
    prompt, so tests script the verdicts apart from the answers (the main script)."""
    from recipes.reefine.follow import FOLLOW_SYSTEM

    messages = body.get("messages") or []
    first = messages[0] if messages and isinstance(messages[0], dict) else {}
    return first.get("role") == "system" and first.get("content") == FOLLOW_SYSTEM


def follows(yes: bool, reason: str = "scripted") -> str:
    return json.dumps({"follows": yes, "reason": reason})


# Reefine's follow check, per check prompt: the served tree's verdict, then the change's.
FOLLOWED = (False, True) * 3  # 3 wins: the change is followed


class Scripted:
    def __init__(self) -> None:
        self.fake = FakeUpstream(
            default=Turn(text="I will write a failing test first."), chooser=self._choose
        )
        self.server = ServerThread(self.fake.app, timeout_graceful_shutdown=1)
        self._judge: deque[Turn] = deque()
        self._follow: deque[Turn] = deque()
        self._lock = threading.Lock()

    def _choose(self, _path: str, body: dict[str, Any]) -> Turn | None:
        queue = (
            self._judge
            if is_judge_request(body)
            else self._follow
            if is_follow_request(body)
            else None
        )
        if queue is None:
            return None
        with self._lock:
            return queue.popleft() if queue else None  # None: the main script

    def push_follow(self, *verdicts: bool | str) -> None:
        """Answers for the follow check's verdict calls, in order (a bool: that verdict; a
        string: the raw answer); ``FOLLOWED`` passes it. With none left, the main script."""
        with self._lock:
            self._follow.extend(
                Turn(text=v if isinstance(v, str) else follows(v)) for v in verdicts
            )

    def follow_calls(self) -> list[Any]:
        return [
            e for e in self.inference() if isinstance(e.body, dict) and is_follow_request(e.body)
        ]

    def push_judge(self, *scores: float | str, stall: float = 0.0) -> None:
        """Answers for the judge's calls, in order (a float: a judgement with that score;
        a string: the raw answer), each after ``stall`` seconds. With none left, a judge
        call takes the main script."""
        with self._lock:
            self._judge.extend(
                Turn(text=s if isinstance(s, str) else judgement(s), stall=stall) for s in scores
            )

    def judge_calls(self) -> list[Any]:
        return [
            e for e in self.inference() if isinstance(e.body, dict) and is_judge_request(e.body)
        ]

    @property
    def api_base(self) -> str:
        return self.server.url + "/v1"

    def push(self, *texts: str, **turn: Any) -> None:
        self.fake.push(*(Turn(text=text, **turn) for text in texts))

    def inference(self) -> list[Any]:
        return [e for e in self.fake.log if e.path == "/v1/chat/completions"]
