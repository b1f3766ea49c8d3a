"""The persona file: a simulated user with hidden preferences (docs/personas.md).

A persona says which prompts the user asks (train prompts are sent through the proxy,
held-out ones only to the evaluation), the checks a reply must pass for the user to
accept it (each with the complaint the user sends when it fails), the facts the user
corrects, a lenient measure (the work is still done, whatever the format) and the
preference written as a rule by hand (the oracle control). The format is public: a
persona Reef has never seen runs with no code change, and a malformed one is a one-line
``PersonaInvalid`` naming the field.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from reef_cli.core import yaml_config
from reef_cli.core.errors import PersonaInvalid

# Each check has exactly one of these keys (its kind), and a complaint where it is strict.
REGEX_KINDS = ("forbid", "require", "starts_with", "last_line")
COUNT_KINDS = ("max_words", "min_words")
KINDS = (*REGEX_KINDS, *COUNT_KINDS, "words", "correct")
MAX_PROMPTS = 500


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Item(_Strict):
    """One prompt of a ``list`` source, with its gold answer where there is one."""

    prompt: str = Field(min_length=1, max_length=4000)
    answer: str | None = Field(None, max_length=200)


class Prompts(_Strict):
    source: Literal["reasoning-gym", "list"]
    dataset: str | None = None  # reasoning-gym only
    options: dict[str, Any] = Field(default_factory=dict)  # reasoning-gym only
    items: list[Item] | None = None  # list only
    train: int = Field(ge=1, le=MAX_PROMPTS)
    heldout: int = Field(ge=1, le=MAX_PROMPTS)
    seed: int = Field(1, ge=0, le=10_000)


class Check(_Strict):
    """One check; exactly one kind key is set (``check.kind``)."""

    forbid: str | None = None
    require: str | None = None
    starts_with: str | None = None
    last_line: str | None = None
    max_words: int | None = Field(None, ge=1, le=10_000)
    min_words: int | None = Field(None, ge=1, le=10_000)
    words: list[str] | None = None
    correct: Literal["last", "first", "any", "contains"] | None = None
    complaint: str | None = Field(None, min_length=1, max_length=400)

    @field_validator(*REGEX_KINDS)
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value, re.MULTILINE)
            except re.error as exc:
                raise ValueError(f"not a regular expression ({exc})") from exc
        return value

    @field_validator("words")
    @classmethod
    def _words(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and (not value or any(not w.strip() for w in value)):
            raise ValueError("a non-empty list of words")
        return value

    @property
    def kind(self) -> str:
        return next(k for k in KINDS if getattr(self, k) is not None)


class Persona(_Strict):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]{0,40}$")
    description: str = ""
    prompts: Prompts
    checks: list[Check] = Field(min_length=1, max_length=12)
    facts: list[str] = Field(default_factory=list, max_length=50)
    lenient: list[Check] = Field(default_factory=list, max_length=12)
    oracle: str | None = Field(None, max_length=2000)  # the preference as a rule, by hand
    max_tokens: int = Field(160, ge=16, le=2048)  # the reply's length cap

    def oracle_rule(self) -> str:
        """The hand-written rule (the ceiling control); without one, every check's
        complaint and every fact, in order."""
        if self.oracle:
            return self.oracle.strip()
        lines = [c.complaint for c in self.checks if c.complaint] + list(self.facts)
        return "\n".join(f"- {line}" for line in lines)


def _field(loc: tuple[Any, ...]) -> str:
    parts: list[str] = []
    for part in loc:
        if isinstance(part, int):
            parts[-1:] = [f"{parts[-1]}[{part}]" if parts else f"[{part}]"]
        else:
            parts.append(str(part))
    return ".".join(parts) or "(top level)"


def parse(data: Any, where: str = "persona") -> Persona:
    """A checked persona from parsed YAML; any problem is one ``PersonaInvalid`` line."""
    if not isinstance(data, dict):
        raise PersonaInvalid(f"{where}: not a mapping of keys", "see docs/personas.md")
    try:
        persona = Persona.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        name = _field(tuple(first["loc"]))
        message = str(first["msg"]).removeprefix("Value error, ")
        raise PersonaInvalid(
            f"{where}: {name}: {message}", "see docs/personas.md for the keys", field=name
        ) from None
    _cross_check(persona, where)
    return persona


def _cross_check(persona: Persona, where: str) -> None:
    for group in ("checks", "lenient"):
        for index, check in enumerate(getattr(persona, group)):
            name = f"{group}[{index}]"
            kinds = [k for k in KINDS if getattr(check, k) is not None]
            if len(kinds) != 1:
                raise PersonaInvalid(
                    f"{where}: {name}: needs exactly one check kind, has "
                    f"{', '.join(kinds) or 'none'}",
                    f"one of: {', '.join(KINDS)}",
                    field=name,
                )
            if group == "checks" and not check.complaint:
                raise PersonaInvalid(
                    f"{where}: {name}.complaint: missing",
                    "write what the user says when the check fails",
                    field=f"{name}.complaint",
                )
    prompts = persona.prompts
    if prompts.source == "reasoning-gym" and not prompts.dataset:
        raise PersonaInvalid(
            f"{where}: prompts.dataset: missing",
            "name a reasoning-gym dataset",
            field="prompts.dataset",
        )
    if prompts.source == "list":
        items = prompts.items or []
        if len(items) < prompts.train + prompts.heldout:
            raise PersonaInvalid(
                f"{where}: prompts.items: {len(items)} item(s) for train {prompts.train} + "
                f"heldout {prompts.heldout}",
                "add items or lower train/heldout",
                field="prompts.items",
            )
        first: dict[str, int] = {}  # a repeated prompt could land in train and held-out both
        for i, item in enumerate(items):
            seen = first.setdefault(" ".join(item.prompt.split()), i)
            if seen != i:
                raise PersonaInvalid(
                    f"{where}: prompts.items[{i}].prompt: repeats prompts.items[{seen}]",
                    "give each prompt once",
                    field=f"prompts.items[{i}].prompt",
                )
        needs_gold = any(c.correct for c in (*persona.checks, *persona.lenient))
        missing = [i for i, item in enumerate(items) if needs_gold and item.answer is None]
        if missing:
            raise PersonaInvalid(
                f"{where}: prompts.items[{missing[0]}].answer: missing (a `correct` check "
                "needs every item's answer)",
                "add the answer",
                field=f"prompts.items[{missing[0]}].answer",
            )


def load(path: Path | str) -> Persona:
    """The persona in ``path`` (YAML); unreadable or malformed: ``PersonaInvalid``."""
    file = Path(path)
    text = yaml_config.read_text(
        file, f"persona {file}", error=PersonaInvalid, fix="give a persona YAML file"
    )
    data = yaml_config.parse(text, file.name, error=PersonaInvalid, fix="fix the YAML syntax")
    return parse(data, file.name)
