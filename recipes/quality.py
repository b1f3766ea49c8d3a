"""Quality checks on text a model wrote, for every recipe (Reefine, SkillClaw, GEPA).

Two layers, both returning gate ``Check``s whose ``detail`` carries the numbers:

- **deterministic** (``check_written``, ``check_answer``): the text addresses the ask's
  key terms (content words, simply stemmed); no template debris (``{{…}}``, ``#123456#``,
  runs of ``#hashtags``, URLs the ask never gave, HTML or markdown junk, degenerate
  repetition); no instruction that negates the ask or tells the agent to do nothing; a
  command asked for by name ("/changelog", "a changelog command") has that name; at least
  two actionable sentences; a ``why`` free of debris. An agent's answer must address the
  ask too, and not be a non-answer ("I will provide a response in two sentences.").
- **judged** (``judge``): a model — the job's, or a stronger one configured as the judge —
  scores the text against the ask with a rubric, as structured JSON (0..1); the check
  passes at ``threshold``. A judge that gives no valid answer yields an ``invalid``
  check, never a pass; the engine ends such a job ``invalid``.

Nothing here imports recipes, adapters or sandbox (docs/architecture.md).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

from pydantic import BaseModel, Field

from reef_cli.core.checks import Check
from reef_cli.core.errors import ModelError
from reef_cli.core.frontmatter import split_frontmatter
from reef_cli.core.llm import ModelClient

DEFAULT_THRESHOLD = 0.6
MIN_ACTIONABLE = 2

# ------------------------------------------------------------------ words and stems

_WORD = re.compile(r"[a-z][a-z0-9']*")
_STOP_TEXT = """
a about above after again against all also am an and any are as ask asked asking at be
because been before being below between both but by can could did do does doing done
down during each else etc ever every few for from further get gets getting go goes had
has have having he her here hers him his how i if in into is it its it's itself just let
lets like me more most much must my myself need needs no nor not now of off on once only
or other our ours out over own please same say says she should so some such sure than
that that's the their theirs them then there these they thing things this those through
to too under until up upon us very via want wants was way we were what when whenever
where which while who whom why will with within without would you your yours yourself
i'm i'll you're don't can't won't always never anything something everything one two
make makes made use uses used using add adds create new agent rule rules skill skills
command commands extension extensions slash pi
"""
# the ask's own framing ("add a skill", "an extension") is no key term either
STOPWORDS = frozenset(_STOP_TEXT.split())


def stem(word: str) -> str:
    """A small suffix-stripping stemmer: tests/testing/tested -> test, reproduces ->
    reproduc, libraries -> library. Good enough to match an ask's words in a body."""
    w = word.lower().strip("'")
    if w.endswith("'s"):
        w = w[:-2]
    if len(w) <= 3:
        return w
    if w.endswith("ies") and len(w) > 4:
        return w[:-3] + "y"  # libraries -> library
    for suffix in ("ations", "ation", "ings", "ing", "edly", "ed", "es", "ly", "s", "e"):
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            w = w[: -len(suffix)]
            doubled = len(w) >= 4 and w[-1] == w[-2] and w[-1] not in "lsz"
            if suffix in ("ing", "ings", "ed") and doubled:
                w = w[:-1]  # committ -> commit, running -> run
            break
    return w


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def key_terms(text: str) -> set[str]:
    """The content words of ``text``, stemmed (stop words and 1-2 letter words dropped)."""
    return {stem(w) for w in words(text) if w not in STOPWORDS and len(w) > 2}


def _matches(term: str, have: set[str]) -> bool:
    """``term`` is in ``have``, or one is a prefix of the other (doc / document)."""
    if term in have:
        return True
    return len(term) >= 3 and any(
        len(h) >= 3 and (h.startswith(term) or term.startswith(h)) for h in have
    )


def coverage(ask: str, text: str) -> tuple[int, int, int, list[str]]:
    """(terms of the ask found in text, terms in the ask, terms needed, missing terms)."""
    wanted = sorted(key_terms(ask))
    have = key_terms(text)
    hits = [t for t in wanted if _matches(t, have)]
    need = max(1, min(6, math.ceil(len(wanted) / 2))) if wanted else 0
    missing = [t for t in wanted if t not in hits]
    return len(hits), len(wanted), need, missing


# ------------------------------------------------------------------ the ask's named command

_SLASH = re.compile(r"(?:^|[\s\"'`(])/([a-z][a-z0-9]*(?:-[a-z0-9]+)*)\b", re.I)
_CALLED = re.compile(
    r"\bcommand\s+(?:called|named)\s+[\"'`/]?([a-z][a-z0-9]*(?:-[a-z0-9]+)*)", re.I
)
_A_X_COMMAND = re.compile(
    r"\b(?:a|an|the)\s+(?:new\s+)?[\"'`]?([a-z][a-z0-9]*(?:-[a-z0-9]+)*)[\"'`]?\s+"
    r"(?:slash\s+)?command\b",
    re.I,
)
_NOT_NAMES = frozenset({"slash", "new", "custom", "simple", "single", "shell", "git", "bash"})


def asked_command_name(ask: str) -> str | None:
    """The command name the ask gives: "/changelog", "a command called ship-it", "a
    changelog command" -> ``changelog``; None when it names none."""
    for pattern in (_SLASH, _CALLED, _A_X_COMMAND):
        for match in pattern.finditer(ask):
            name = match.group(1).lower()
            if name not in _NOT_NAMES and "/" not in name:
                return name
    return None


# ------------------------------------------------------------------ debris

_DEBRIS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("template placeholder", re.compile(r"\{\{.*?\}\}|\{%.*?%\}|\[\[.*?\]\]", re.S)),
    ("#…# marker", re.compile(r"#[A-Za-z0-9_]{2,}#")),
    ("long number", re.compile(r"#\d{4,}\b")),
    (
        "HTML",
        re.compile(
            r"</?(?:div|span|p|br|hr|a|img|table|tr|td|th|ul|ol|li|b|i|u|s|strong|em|h[1-6]"
            r"|script|style|html|body|head|iframe|font|center|button|input|form)\b[^>]*>",
            re.I,
        ),
    ),
    ("special token", re.compile(r"<\|[a-z_]+\|>|\[/?INST\]|<</?SYS>>|<s>|</s>", re.I)),
    (
        "placeholder",
        re.compile(
            r"\[(?:insert|your|placeholder|name of|todo)[^\]]*\]|<(?:insert|your)[^>]*>"
            r"|\[(?:[a-z]+[-_ ])*(?:name|team|project|url|link|value|path|here)\](?!\()"
            r"|lorem ipsum|\bXXX\b",
            re.I,
        ),
    ),
    (
        "prompt injection",
        re.compile(
            r"\b(?:ignore|disregard|forget) (?:all |any )?(?:the )?(?:previous|prior|above|earlier)"
            r" (?:instructions?|prompts?|rules?)\b",
            re.I,
        ),
    ),
    ("markdown junk", re.compile(r"!\[[^\]]*\]\([^)]*\)|\[\]\([^)]*\)|\[[^\]]*\]\(\)")),
    ("rule run", re.compile(r"[*_=~]{5,}|-{8,}|#{4,}(?!\s)")),
)
_HASHTAG = re.compile(r"(?:^|(?<=\s))#[A-Za-z][A-Za-z0-9_]+")
_URL = re.compile(r"\b(?:https?://|www\.)[^\s)>\]\"'`]+", re.I)
_CODE_DEBRIS = (
    "template placeholder",
    "#…# marker",
    "special token",
    "placeholder",
    "prompt injection",
)


def _sentences(text: str) -> list[str]:
    text = re.sub(r"```.*?```", " ", text, flags=re.S)
    parts = re.split(r"(?<=[.!?])\s+|\n+", text)
    return [p.strip(" \t-*>#0123456789.)") for p in parts if p.strip(" \t-*>#")]


def debris_in(text: str, ask: str, *, code: bool = False) -> list[str]:
    """What looks like template debris or junk in ``text``; each entry names it."""
    found: list[str] = []
    for label, pattern in _DEBRIS:
        if code and label not in _CODE_DEBRIS:
            continue
        match = next((m for m in pattern.finditer(text) if m.group(0) not in ask), None)
        if match:  # text the ask itself holds is the person's, not debris
            found.append(f"{label} {match.group(0)[:40]!r}")
    if not code:
        tags = _HASHTAG.findall(text)
        if len(tags) >= 2:
            found.append(f"{len(tags)} hashtags ({' '.join(tags[:3])})")
    given = {u.rstrip(".,;:").lower() for u in _URL.findall(ask)}
    for url in _URL.findall(text):
        url = url.rstrip(".,;:")
        if not any(url.lower().startswith(g) or g.startswith(url.lower()) for g in given):
            found.append(f"a URL the ask never gave ({url[:60]})")
            break
    if not code and text.count("```") % 2:
        found.append("an unclosed code fence")
    lines = [s.lower() for s in _sentences(text) if len(s) > 8]
    for line in set(lines):
        if lines.count(line) >= 3:
            found.append(f"a sentence repeated {lines.count(line)} times ({line[:40]!r})")
            break
    return found


# ------------------------------------------------------------------ negation

_NOTHING = re.compile(
    r"\b(?:do(?:es)? nothing|don'?t do anything|do not do anything|take no action|no action"
    r" is needed|(?:do not|don'?t|never) (?:make|change|modify|touch) (?:any(?:thing)?|the"
    r" code|files?)|make no changes|(?:do not|don'?t|never) (?:make|apply) (?:any )?changes"
    r"|ignore (?:the|this|these|all|any) (?:request|instructions?|ask)|(?:do not|don'?t)"
    r" respond|say nothing)\b",
    re.I,
)
_NEGATOR = re.compile(
    r"\b(?:never|do not|don'?t|avoid|stop|refuse to|must not|should not)\s+", re.I
)
_ALWAYS = re.compile(r"\b(?:always|must|make sure to|be sure to)\s+", re.I)
_CONDITIONAL = frozenset({"before", "until", "unless", "without", "if", "when", "while", "after"})
_CLAUSE_END = re.compile(r"[.,;:!?\n(]")


def _clauses(text: str, opener: re.Pattern[str]) -> list[tuple[list[str], bool]]:
    """The words after each ``opener`` up to the end of its clause, and whether the clause
    turned conditional ("never fix it *until* …" negates only an order, not the act)."""
    out = []
    for match in opener.finditer(text):
        rest = _CLAUSE_END.split(text[match.end() :], maxsplit=1)[0]
        taken: list[str] = []
        conditional = False
        for w in words(rest)[:8]:
            if w in _CONDITIONAL:
                conditional = True
                break
            taken.append(w)
        out.append((taken, conditional))
    return out


def _verb(clause: list[str]) -> str | None:
    for w in clause:
        if w not in STOPWORDS and len(w) > 1:
            return stem(w)
    return None


def negations_of(ask: str, text: str) -> list[str]:
    """Instructions in ``text`` that negate the ask or tell the agent to do nothing."""
    found: list[str] = []
    nothing = _NOTHING.search(text)
    if nothing and not _NOTHING.search(ask):
        found.append(f"tells the agent to do nothing ({nothing.group(0)!r})")
    asked_always = [_verb(c) for c, _cond in _clauses(ask, _ALWAYS)]
    asked_never = [_verb(c) for c, cond in _clauses(ask, _NEGATOR) if not cond]
    for clause, cond in _clauses(text, _NEGATOR):
        verb = _verb(clause)
        if cond or verb is None:
            continue
        if verb in asked_always and verb not in asked_never:
            found.append(f"says not to {' '.join(clause[:5])!r} where the ask says always")
            break
        overlap = key_terms(" ".join(clause)) & (key_terms(ask) - _negated_terms(ask))
        if len(overlap) >= 2:
            found.append(f"negates the ask ({' '.join(clause[:5])!r})")
            break
    for clause, _cond in _clauses(text, _ALWAYS):
        verb = _verb(clause)
        if verb is not None and verb in asked_never and verb not in asked_always:
            found.append(f"says always {' '.join(clause[:5])!r} where the ask says never")
            break
    return found


def _negated_terms(ask: str) -> set[str]:
    return {t for clause, _ in _clauses(ask, _NEGATOR) for t in key_terms(" ".join(clause))}


# ------------------------------------------------------------------ actionable sentences

_NOT_IMPERATIVE_TEXT = (
    "the a an this that it its is are was were i we they he she there these those my our "
    "here which what who"
)
_NOT_IMPERATIVE = frozenset(_NOT_IMPERATIVE_TEXT.split())
_MODAL = re.compile(r"\b(?:you (?:must|should|will|need to)|must|should|make sure|be sure)\b", re.I)


def actionable_sentences(text: str) -> list[str]:
    """Sentences an agent can act on: at least three words with a content word, starting
    with an instruction (an imperative, "always …", "when …, …") or holding a modal."""
    out = []
    for sentence in _sentences(text):
        ws = words(sentence)
        if len(ws) < 3 or not key_terms(sentence):
            continue
        if ws[0] not in _NOT_IMPERATIVE or _MODAL.search(sentence):
            out.append(sentence)
    return out


# ------------------------------------------------------------------ what a model wrote


@dataclass
class Written:
    """One change's model-written text, as the gate checks it."""

    kind: str  # rule | skill | command | extension
    name: str
    body: str
    description: str = ""
    why: str = ""


def written_of(files: Mapping[str, str], kind: str, name: str, path: str, why: str) -> Written:
    text = files.get(path, "")
    meta, body = split_frontmatter(text, path) if path.endswith(".md") else (None, text)
    description = str((meta or {}).get("description") or "")
    return Written(kind, name, body.strip(), description, why)


def check_written(ask: str, text: Written) -> list[Check]:
    """The deterministic checks on one change a model wrote; one ``Check`` each."""
    checks: list[Check] = []
    code = text.kind == "extension"
    prose = " ".join([text.description, text.body]) if not code else text.description
    hits, total, need, missing = coverage(ask, f"{text.description} {text.body}")
    status = "passed" if hits >= need else "failed"
    detail = f"{hits} of {total} key terms of the ask (need {need})"
    if missing:
        detail += f"; missing: {', '.join(missing[:6])}"
    checks.append(Check("quality-on-topic", status, detail))
    junk = debris_in(text.body, ask, code=code) + debris_in(text.description, ask)
    checks.append(
        Check("quality-debris", "failed" if junk else "passed", "; ".join(junk) or "0 found")
    )
    negated = negations_of(ask, prose)
    checks.append(
        Check(
            "quality-negation",
            "failed" if negated else "passed",
            "; ".join(negated) or "0 instructions against the ask",
        )
    )
    asked = asked_command_name(ask)
    if asked is not None:
        ok = text.kind == "command" and text.name == asked
        checks.append(
            Check(
                "quality-command-name",
                "passed" if ok else "failed",
                f"asked /{asked}, got {text.kind} {text.name}",
            )
        )
    if not code:
        n = len(actionable_sentences(text.body))
        checks.append(
            Check(
                "quality-actionable",
                "passed" if n >= MIN_ACTIONABLE else "failed",
                f"{n} actionable sentence(s) (need {MIN_ACTIONABLE})",
            )
        )
    why_junk = debris_in(text.why, ask)
    checks.append(
        Check(
            "quality-why",
            "failed" if why_junk else "passed",
            "; ".join(why_junk) or f"{len(text.why)} chars, no debris",
        )
    )
    return checks


_NON_ANSWER = re.compile(
    r"^\s*(?:i will|i'll|i am going to|i can|let me)\s+(?:provide|give|write|send|offer)\s+"
    r"(?:you\s+)?(?:a|an|my|the)?\s*(?:response|answer|reply|summary)\b",
    re.I,
)


def check_answer(ask: str, answer: str, probe: str = "") -> Check:
    """The deterministic minimum for an agent's trial answer: it addresses the ask's key
    terms (words only the probe's framing used do not count) and is not a non-answer."""
    answer = answer.strip()
    if not answer:
        return Check("answer-follows-ask", "failed", "empty answer")
    wanted = key_terms(ask)
    framing = key_terms(probe) - wanted
    have = key_terms(answer) - framing
    hits = sorted(t for t in wanted if _matches(t, have))
    need = min(3, max(1, math.ceil(len(wanted) / 3))) if wanted else 0
    detail = f"{len(hits)} of {len(wanted)} key terms of the ask (need {need})"
    problems = []
    if len(hits) < need:
        problems.append("it does not address the ask")
    if _NON_ANSWER.search(answer) and len(hits) < need + 1:
        problems.append("it describes a response instead of giving one")
    nothing = _NOTHING.search(answer)
    if nothing and not _NOTHING.search(ask):
        problems.append(f"it says it will do nothing ({nothing.group(0)!r})")
    if problems:
        return Check("answer-follows-ask", "failed", f"{detail}: {'; '.join(problems)}")
    return Check("answer-follows-ask", "passed", detail)


# ------------------------------------------------------------------ the judge


class Judgement(BaseModel):
    """A 0..1 score and a one-sentence reason: every judge's answer in Reef (the gate's,
    a task's rubric, SkillClaw's session judge and verifier)."""

    score: float = Field(ge=0.0, le=1.0)
    reason: str = Field(min_length=1, max_length=300)


JUDGE_SYSTEM = (
    "You are a strict reviewer of changes to a coding agent's instructions. Score how well "
    "the text follows the developer's request, from 0 to 1. Rubric: 1.0 = it does exactly "
    "what the request asks, specifically and actionably; 0.7 = on the request with small "
    "gaps; 0.4 = vague, generic or only partly on the request; 0.0 = off topic, junk, "
    "contradicts the request or tells the agent to do nothing. Answer with JSON only: "
    '{"score": number from 0 to 1, "reason": one short sentence}.'
)

_JUDGE_EXAMPLES = [
    (
        "Request: always run the linter before you commit\nKind: rule\nText:\nBefore every "
        "commit, run the project's linter. Fix what it reports, then commit.",
        Judgement(score=0.9, reason="Runs the linter before each commit, as asked."),
    ),
    (
        "Request: always run the linter before you commit\nKind: rule\nText:\nBe friendly. "
        "#coding #tips Visit {{url}} for more.",
        Judgement(score=0.0, reason="Off topic and full of template debris."),
    ),
]


def judge_messages(ask: str, subject: str, text: str) -> list[dict[str, str]]:
    out = [{"role": "system", "content": JUDGE_SYSTEM}]
    for prompt, verdict in _JUDGE_EXAMPLES:
        out.append({"role": "user", "content": prompt})
        out.append({"role": "assistant", "content": verdict.model_dump_json()})
    out.append({"role": "user", "content": f"Request: {ask}\n{subject}\nText:\n{text[:3000]}"})
    return out


def judge(
    model: ModelClient,
    ask: str,
    subject: str,
    text: str,
    *,
    name: str = "judge",
    threshold: float = DEFAULT_THRESHOLD,
) -> Check:
    """The judge's score for ``text`` against ``ask`` as a check: ``passed`` at or above
    ``threshold``, ``failed`` below it, ``invalid`` when the judge gave no valid answer
    (an outage is never a pass). Budget errors propagate: the job stops."""
    try:
        verdict = model.structured(
            judge_messages(ask, subject, text), Judgement, max_tokens=120, temperature=0.0
        )
    except ModelError as exc:
        return Check(
            name, "invalid", f"the judge ({model.describe()}) gave no verdict: {exc.message}"
        )
    status = "passed" if verdict.score >= threshold else "failed"
    return Check(
        name,
        status,
        f"score {verdict.score:.2f} (threshold {threshold:.2f}) by {model.describe()}: "
        f"{verdict.reason[:200]}",
    )


def failures(checks: list[Check]) -> list[str]:
    """One line per check that did not pass, for feedback and the job's message."""
    return [f"{c.name}: {c.detail}" for c in checks if c.status not in ("passed", "pending")]
