"""Verify each edit before it enters the candidate: deterministic checks first, then one
verifier call. An edit that fails any is dropped, with the reason kept in evidence.

Dropped when it cites no session, or a session that is not in this batch; holds a
credential (the reason never repeats it); deletes guidance (a line of the old body is
gone: skills only grow); is too large (body over ``MAX_BODY``, description over
``MAX_DESCRIPTION`` characters) or empty; has a name that is not kebab-case; holds
debris (``quality.debris_in``, the same ask-free check the gate runs); changes nothing;
or when the verifier — does the edit follow from the cited feedback? — scores it below
the threshold or gives no verdict (an outage is never a pass).
"""

from __future__ import annotations

from recipes.quality import Judgement, debris_in
from recipes.skillclaw.decide import Edit, session_lines
from recipes.skillclaw.guard import clean, holds_credential
from recipes.skillclaw.merge import guidance, keeps_items, lost_lines
from recipes.skillclaw.signals import Scored
from recipes.skillclaw.skills import SkillText
from reef_cli.core.errors import ModelError
from reef_cli.core.llm import ModelClient
from reef_cli.core.names import is_kebab

MAX_BODY = 4000
MAX_DESCRIPTION = 300
DEFAULT_THRESHOLD = 0.6
HELD = "held a credential"


def problems(edit: Edit, before: SkillText | None, after: SkillText) -> list[str]:
    """Why the deterministic checks refuse ``edit`` (``before`` -> ``after``); [] passes."""
    if holds_credential(edit.skill, edit.description, edit.body, edit.why, *edit.unknown):
        return [HELD]  # first, and alone: no other reason may quote the text
    if holds_credential(after.name, after.description, after.body):
        return [HELD]
    out: list[str] = []
    if edit.unknown:
        out.append(f"cites sessions not in this batch: {', '.join(edit.unknown[:5])}")
    elif not edit.sessions:
        out.append("cites no session")
    if not is_kebab(after.name):
        out.append(f"skill name {after.name[:40]!r} is not kebab-case")
    if not after.body.strip():
        out.append("the body is empty")
    if len(after.body.strip()) > MAX_BODY:
        out.append(f"the body is {len(after.body.strip())} characters (at most {MAX_BODY})")
    if not after.description.strip():
        out.append("the description is empty")
    if len(after.description) > MAX_DESCRIPTION:
        out.append(
            f"the description is {len(after.description)} characters (at most {MAX_DESCRIPTION})"
        )
    if before is not None:
        lost = lost_lines(before.body, after.body)
        if lost:
            out.append(
                f"deletes guidance: {len(lost)} line(s) of the old body are gone "
                f"(first: {lost[0][:60]!r})"
            )
        if edit.merge is not None and not keeps_items(after.body, before.body, edit.body):
            out.append("the merge lost a list item")
        if (before.body.strip(), before.description) == (after.body.strip(), after.description):
            out.append("changes nothing")
    junk = debris_in(after.body.strip(), "") + debris_in(after.description, "")
    if junk:
        out.append("debris: " + "; ".join(junk[:3]))
    return out


SYSTEM = (
    "You check one proposed change to a coding agent's skill against the sessions it "
    "cites. Score from 0 to 1 how well the change follows from what those sessions show: "
    "1 = it fixes exactly what the feedback points at; 0.5 = related but generic; 0 = "
    "unrelated to the feedback, or against it. Answer with JSON only: "
    '{"score": number from 0 to 1, "reason": one short sentence}.'
)
_EXAMPLE = (
    "Change: improve_skill write-tests\nNew lines:\n3. Run the new tests and show they pass "
    "before you say you are done.\n\nCited sessions:\nS1 score 0.00\nUser: add a test for "
    "the date parser\nAgent: I wrote test_parse.\nFeedback: you forgot to run it, it fails",
    Judgement(score=0.9, reason="The new step fixes the missed test run in S1."),
)


def shown_change(edit: Edit, before: SkillText | None, after: SkillText) -> str:
    """What changed, as the verifier reads it: new lines, or the old and new description."""
    if edit.kind == "optimize_description":
        return (
            f"Old description: {before.description if before else ''}\n"
            f"New description: {after.description}"
        )
    old = set(guidance(before.body)) if before is not None else set()
    added = [line for line in guidance(after.body) if line not in old]
    return "New lines:\n" + "\n".join(added)[:2500]


def messages_for(
    edit: Edit, before: SkillText | None, after: SkillText, cited: list[Scored]
) -> list[dict[str, str]]:
    sessions = "\n".join(line for item in cited[:6] for line in session_lines(item))
    prompt = (
        f"Change: {edit.kind} {after.name}\n{shown_change(edit, before, after)}\n\n"
        f"Cited sessions:\n{sessions}"
    )
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": _EXAMPLE[0]},
        {"role": "assistant", "content": _EXAMPLE[1].model_dump_json()},
        {"role": "user", "content": prompt},
    ]


def verifier(
    model: ModelClient,
    edit: Edit,
    before: SkillText | None,
    after: SkillText,
    cited: list[Scored],
    threshold: float,
) -> str | None:
    """Why the verifier refuses ``edit`` (None: it passed); sets ``edit.verifier``.
    Budget errors propagate: the job stops."""
    messages = messages_for(edit, before, after, cited)
    if not clean(messages):
        return "the verifier's prompt held a credential"
    try:
        verdict = model.structured(messages, Judgement, max_tokens=120, temperature=0.0)
    except ModelError as exc:
        return f"the verifier gave no verdict ({exc.message[:120]})"
    edit.verifier = round(verdict.score, 4)
    if verdict.score < threshold:
        return f"the verifier scored it {verdict.score:.2f} (threshold {threshold:.2f})"
    return None
