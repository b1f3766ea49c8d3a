"""OpenClaw-RL: a turn's reward is what happened next.

Records of one session, in order, are turns. A judge model scores turn t given turn
t+1 (the user's next message or the tool output that came back, read from the next
record's request): ``votes`` independent verdicts of +1 / 0 / -1, the majority wins and
a tie is 0. The session's last turn has no next state yet, so it is masked (no sample,
not consumed: it is judged once the next turn arrives) unless it is the session's only
turn. The reward is the advantage on every response token. A judge outage skips the
session for the round (nothing consumed); verdicts already given are kept in ``state``
so a waiting batch does not ask the judge again.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from pydantic import BaseModel, Field

from reef_cli.core.errors import ModelError
from reef_cli.core.llm import ModelClient
from reef_cli.core.records import Record
from reef_cli.core.store import Store
from reefd.weight_recipes.base import Batch, Sample
from reefd.weight_recipes.eligibility import eligible, settled
from reefd.weight_recipes.samples import request_messages, response_text, tokens_of

JUDGE_SYSTEM = (
    "You judge one reply of an AI assistant by what happened next. You see the conversation "
    "so far, the assistant's reply, and the next state: the user's next message or the output "
    "of the tool the reply called. Score 1 when the next state shows the reply helped (the "
    "user moves on or is satisfied, the tool call worked, the task progressed); -1 when it "
    "shows the reply failed (the user corrects, complains or asks again; the tool call "
    "errored because of the reply); 0 when the next state says neither. Answer with JSON "
    'only: {"score": -1, 0 or 1, "reason": one short sentence}.'
)
CONTEXT_CHARS = 4000
REPLY_CHARS = 3000
NEXT_CHARS = 2000


class Vote(BaseModel):
    score: int = Field(ge=-1, le=1)
    reason: str = Field(min_length=1, max_length=300)


def majority(votes: Sequence[int]) -> int:
    """The most common vote; a tie for the most (or no votes) is 0."""
    if not votes:
        return 0
    ranked = Counter(votes).most_common()
    if len(ranked) > 1 and ranked[0][1] == ranked[1][1]:
        return 0
    return int(ranked[0][0])


def turn_pairs(records: Iterable[Record]) -> list[tuple[Record, Record | None]]:
    """Each turn of one session with the turn after it (None for the last), in order."""
    ordered = sorted(records, key=lambda r: r.created_at)
    return [
        (record, ordered[i + 1] if i + 1 < len(ordered) else None)
        for i, record in enumerate(ordered)
    ]


def _render(messages: Sequence[dict[str, str]]) -> str:
    return "\n".join(f"{m['role']}: {m['content']}" for m in messages)


def next_state(record: Record, following: Record) -> str:
    """What came back after ``record``'s reply: the messages ``following``'s request adds
    after this turn's conversation and reply (or, if the client rewrote its history,
    those after its last assistant message)."""
    before = request_messages(record) or []
    after = request_messages(following) or []
    if len(after) > len(before) + 1:
        new = after[len(before) + 1 :]
    else:
        last = max((i for i, m in enumerate(after) if m["role"] == "assistant"), default=-1)
        new = after[last + 1 :] or after[-1:]
    return _render(new)


def judge_messages(record: Record, following: Record | None) -> list[dict[str, str]]:
    context = _render(request_messages(record) or [])[-CONTEXT_CHARS:]
    reply = (response_text(record) or "")[:REPLY_CHARS]
    after = (
        next_state(record, following)[:NEXT_CHARS]
        if following is not None
        else "(none: the conversation ended here; judge the reply on its own)"
    )
    return [
        {"role": "system", "content": JUDGE_SYSTEM},
        {
            "role": "user",
            "content": f"Conversation so far:\n{context}\n\nThe assistant's reply:\n{reply}\n\n"
            f"What came next:\n{after}",
        },
    ]


class OpenClawRL:
    name = "openclaw_rl"

    def __init__(
        self,
        judge: ModelClient,
        votes: int = 3,
        batch_size: int = 8,
        max_staleness: int = 2,
        *,
        tokenizer: Any = None,
        rollout_logprobs: bool = True,
        temperature: float = 0.7,
    ) -> None:
        self.judge = judge
        self.votes = max(1, votes)
        self.batch_size = batch_size
        self.max_staleness = max_staleness
        self.tokenizer = tokenizer
        self.rollout_logprobs = rollout_logprobs
        self.temperature = temperature
        self.state: dict[str, Any] = {"rewards": {}}

    def reward(self, record: Record, following: Record | None) -> int:
        """The majority of ``votes`` verdicts on ``record`` (ModelError: the judge is out)."""
        messages = judge_messages(record, following)
        votes = [
            self.judge.structured(
                messages, Vote, max_tokens=120, temperature=self.temperature
            ).score
            for _ in range(self.votes)
        ]
        return majority(votes)

    def batch(self, store: Store, scenario: str, current_version: str, consumed: set[str]) -> Batch:
        rewards: dict[str, int] = {
            k: int(v) for k, v in (self.state.get("rewards") or {}).items() if k not in consumed
        }
        self.state["rewards"] = rewards
        sessions: dict[str, list[Record]] = {}
        for record in store.iter(scenario=scenario):
            if record.is_turn:  # an embedding trains nothing
                sessions.setdefault(record.session_id or f"\0{record.id}", []).append(record)
        fresh = [r for turns in sessions.values() for r in turns if r.id not in consumed]
        kept, counts = eligible(fresh, current_version, self.max_staleness)
        kept_ids = {r.id for r in kept}
        dropped = [r.id for r in fresh if settled(r) and r.id not in kept_ids]
        samples: list[Sample] = []
        for turns in sessions.values():
            pairs = [(r, n) for r, n in turn_pairs(turns) if r.id in kept_ids]
            if not pairs:
                continue
            if len(samples) >= self.batch_size:
                counts.unscored += len(pairs)  # left for the next batch
                continue
            only = len(turns) == 1
            judged: list[tuple[Record, Record | None, Any]] = []
            for record, following in pairs:
                if following is None and not only:
                    counts.unscored += 1  # the last turn: masked until a next one comes
                    continue
                tokens = tokens_of(record, self.tokenizer, logprobs=self.rollout_logprobs)
                if tokens is None:
                    counts.failed += 1
                    dropped.append(record.id)
                    continue
                judged.append((record, following, tokens))
            taken: list[Sample] = []
            try:
                for record, following, tokens in judged:
                    if record.id not in rewards:
                        rewards[record.id] = self.reward(record, following)
                    taken.append(
                        Sample(
                            record.id,
                            tokens.prompt_ids,
                            tokens.response_ids,
                            float(rewards[record.id]),
                            tokens.old_logprobs,
                        )
                    )
            except ModelError:
                counts.unscored += len(judged)  # the judge is out: this session waits
                continue
            samples.extend(taken)
        counts.used = len(samples)
        return Batch(samples, counts, [s.record_id for s in samples] + dropped, dropped)
