"""Task runners: how one task is answered on one tree.

A runner answers a task with a tree installed and grades the answer (``scoring.grade``).
Two kinds exist, and a task set names which (``runner:``):

- ``DirectRunner`` — one model call, the tree rendered as the system prompt (rules, then
  each skill's name, description and body). It measures what the harness *text* does to
  the model, fast and deterministic at temperature 0; ``harness_in="user"`` puts the
  text at the top of the user turn instead, for small models that ignore system prompts.
- the agent runners (``recipes.engine.trial.AgentRunner.run_task``) — the real agent, in the
  sandbox, through a recording proxy.
"""

from __future__ import annotations

import re
from typing import Literal, Protocol

from recipes.tasks.model import Task
from recipes.tasks.scoring import TaskRun, grade
from reef_cli.core.errors import ModelError
from reef_cli.core.frontmatter import split_frontmatter
from reef_cli.core.llm import ModelClient

DIRECT = "direct"
ANSWER_TOKENS = 512


class TaskRunner(Protocol):
    def run_task(self, files: dict[str, str], task: Task) -> TaskRun: ...


def parallelism(runner: object) -> int:
    """How many tasks ``runner`` may run at once (1 unless it says more: an agent's trial
    owns its sandbox and proxy, one at a time)."""
    return max(1, int(getattr(runner, "parallelism", 1)))


_COMMENT = re.compile(r"[ \t]*<!--.*?-->", re.DOTALL)


def render_harness(files: dict[str, str]) -> str:
    """The tree as one prompt: rules in path order, then skills (name, description, body).
    Commands and extensions are for agents, not for a bare model, and are left out, and so
    are HTML comments: notes for people (SkillClaw's citations), not instructions."""
    parts: list[str] = []
    for path in sorted(p for p in files if p.startswith("rules/") and p.endswith(".md")):
        _meta, body = split_frontmatter(files[path], path)
        body = _COMMENT.sub("", body)
        if body.strip():
            parts.append(body.strip())
    for path in sorted(p for p in files if p.startswith("skills/") and p.endswith("/SKILL.md")):
        found, body = split_frontmatter(files[path], path)
        meta = found or {}
        name = str(meta.get("name") or path.split("/")[1])
        description = str(meta.get("description") or "").strip()
        head = f"## Skill: {name}" + (f"\n{description}" if description else "")
        parts.append(f"{head}\n\n{body.strip()}")
    return "\n\n".join(parts)


class DirectRunner:
    """One model call per task: the harness as the system prompt (or in the user turn)."""

    def __init__(
        self,
        model: ModelClient,
        *,
        harness_in: Literal["system", "user"] = "system",
        judge: ModelClient | None = None,
        max_tokens: int = ANSWER_TOKENS,
    ) -> None:
        self.model = model
        self.harness_in = harness_in
        self.judge = judge or model
        self.max_tokens = max_tokens

    @property
    def parallelism(self) -> int:
        """Tasks worth running at once: one model call each, so the model's own."""
        return self.model.parallelism

    def describe(self) -> dict[str, str]:
        return {"runner": DIRECT, "model": self.model.describe(), "harness_in": self.harness_in}

    def messages(self, files: dict[str, str], task: Task) -> list[dict[str, str]]:
        harness = render_harness(files)
        if not harness:
            return [{"role": "user", "content": task.prompt}]
        if self.harness_in == "user":
            return [{"role": "user", "content": f"{harness}\n\n---\n\n{task.prompt}"}]
        return [{"role": "system", "content": harness}, {"role": "user", "content": task.prompt}]

    def run_task(self, files: dict[str, str], task: Task) -> TaskRun:
        """Answer ``task`` with ``files`` as the harness; a model outage scores None (budget
        errors propagate: the job stops)."""
        try:
            completion = self.model.chat(
                self.messages(files, task), max_tokens=self.max_tokens, temperature=0.0
            )
        except ModelError as exc:
            return TaskRun(None, "", f"model outage: {exc.message}")
        return grade(task, completion.text, judge=self.judge)
