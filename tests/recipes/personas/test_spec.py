"""The persona file format (docs/personas.md): the shipped personas load and split into
disjoint train and held-out prompts; each check kind passes and fails where it should;
every class of malformed file is one ``PersonaInvalid`` line naming the field, and through
`reef bench learn` exit 2 with one line and nothing written."""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from recipes.personas import Check, Persona, judge, load, parse, resolve, shipped, split
from recipes.personas.checks import passes
from reef_cli.core.errors import PersonaInvalid
from tests.cli.helpers import reef_fails

# ------------------------------------------------------------------ shipped personas


def test_reef_ships_at_least_four_personas() -> None:
    assert set(shipped()) >= {
        "answer-first",
        "conventional-commits",
        "creature-facts",
        "plain-prose",
    }


@pytest.mark.parametrize("name", sorted(shipped()))
def test_a_shipped_persona_loads_and_splits_disjoint_as_declared(name: str) -> None:
    if load(shipped()[name]).prompts.source == "reasoning-gym":
        pytest.importorskip("reasoning_gym")
    persona = resolve(name)
    assert persona.name == name
    assert all(c.complaint for c in persona.checks)  # every strict check says something
    one = split(persona)
    assert len(one.train) == persona.prompts.train
    assert len(one.heldout) == persona.prompts.heldout
    train_text = {p.text for p in one.train}
    held_text = {p.text for p in one.heldout}
    assert len(train_text) == len(one.train) and len(held_text) == len(one.heldout)
    assert not train_text & held_text  # a held-out prompt is never a train prompt
    assert not {p.id for p in one.train} & {p.id for p in one.heldout}
    if any(c.kind == "correct" for c in persona.checks):
        assert all(p.answer for p in [*one.train, *one.heldout])
    again = split(resolve(name))  # same seed, same prompts, same order
    assert again == one


def test_another_seed_draws_other_prompts() -> None:
    persona = resolve("plain-prose")
    other = persona.model_copy(
        update={"prompts": persona.prompts.model_copy(update={"seed": persona.prompts.seed + 1})}
    )
    assert [p.text for p in split(other).train] != [p.text for p in split(persona).train]


def test_a_persona_without_an_oracle_gets_every_complaint_and_fact_as_its_rule() -> None:
    data = minimal()
    data["facts"] = ["A glorp has 5 legs."]
    rule = parse(data).oracle_rule()
    assert rule == "- Please write plain sentences.\n- A glorp has 5 legs."


# ------------------------------------------------------------------ check kinds


def check(**fields: Any) -> Check:
    return Check.model_validate({"complaint": "no.", **fields})


# (check, a reply that passes, a reply that fails, the gold answer)
CASES: dict[str, tuple[Check, str, str, str | None]] = {
    "forbid": (
        check(forbid=r"\*\*|^#+ "),
        "Plain words here.\nAnd more.",
        "Fine.\n# A heading\nText.",
        None,
    ),
    "require": (check(require=r"^Source: \S+"), "Text.\nSource: docs", "Text, no source.", None),
    "starts_with": (
        check(starts_with=r"fix(\(\w+\))?: "),
        "\n\nfix(api): retry on 503\n\nbody",
        "Fixed the retry on 503.",
        None,
    ),
    "last_line": (
        check(last_line=r"^Answer: \d+$"),
        "Working: 2 + 3.\nAnswer: 5\n\n",
        "Answer: 5\nHope that helps.",
        None,
    ),
    "max_words": (
        check(max_words=5),
        "one two three four five",
        "one two three four five six",
        None,
    ),
    "min_words": (check(min_words=4), "one two three four", "one two three", None),
    "words": (
        check(words=["color", "center"]),
        "The colour is centred; colorful is another word.",
        "Pick a Color for it.",
        None,
    ),
    "correct-last": (
        check(correct="last"),
        "First 3, then 4; in total 1,234",
        "It is 1234, or rather 1233",
        "1234",
    ),
    "correct-last-yes-no": (
        check(correct="last"),
        "No at first sight; on reflection: yes.",
        "Yes, I think; well, no.",
        "yes",
    ),
    "correct-first": (
        check(correct="first"),
        "Answer: 1,234\nWorking: 1,000 + 200 + 34 = 1234, from 3 parts",
        "Of 3 parts, 1,000 + 200 + 34 make 1234",
        "1234",
    ),
    "correct-any": (
        check(correct="any"),
        "10 packs of 7 make 70 pencils, so 7 packs hold 70 / 10 x 7 as well",
        "10 packs of 7 make 71 pencils",
        "70",
    ),
    "correct-any-yes-no": (
        check(correct="any"),
        "Is it? Yes.",
        "No, it is not.",
        "yes",
    ),
    "correct-contains": (
        check(correct="contains"),
        "It REVERSES the string.",
        "It sorts the string.",
        "reverse",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_check_kind_passes_and_fails_on_hand_made_replies(case: str) -> None:
    item, good, bad, gold = CASES[case]
    assert passes(item, good, gold), f"{case} should pass: {good!r}"
    assert not passes(item, bad, gold), f"{case} should fail: {bad!r}"


@pytest.mark.parametrize("case", sorted(CASES))
def test_an_empty_reply_fails_every_check(case: str) -> None:
    item, _good, _bad, gold = CASES[case]
    assert not passes(item, "", gold)
    assert not passes(item, "  \n\t\n", gold)


def test_correct_without_a_gold_answer_never_passes() -> None:
    assert not passes(check(correct="last"), "it is 5", None)
    assert not passes(check(correct="contains"), "it is 5", None)


def test_judge_names_every_failed_kind_and_the_first_complaint() -> None:
    checks = [
        check(forbid=r"\*\*", complaint="No bold."),
        check(min_words=3, complaint="Say more."),
        check(correct="last", complaint="Wrong."),
    ]
    assert judge(checks, "it is **4** ok", "4").failed == ("forbid",)
    verdict = judge(checks, "**5**", "4")
    assert not verdict.passed
    assert verdict.failed == ("forbid", "min_words", "correct")
    assert verdict.complaint == "No bold."
    assert judge(checks, "it is 4 plainly", "4").passed
    assert judge(checks, "it is 4 plainly", "4").complaint is None


# ------------------------------------------------------------------ malformed personas


def minimal() -> dict[str, Any]:
    return {
        "name": "tiny",
        "prompts": {
            "source": "list",
            "train": 2,
            "heldout": 1,
            "items": [{"prompt": f"question {i}", "answer": str(i)} for i in range(3)],
        },
        "checks": [{"forbid": r"\*\*", "complaint": "Please write plain sentences."}],
    }


def changed(path: str, value: Any) -> dict[str, Any]:
    """``minimal()`` with the key at dotted ``path`` set (``None``: removed)."""
    data = copy.deepcopy(minimal())
    *head, last = path.split(".")
    where: Any = data
    for part in head:
        where = where[int(part)] if part.isdigit() else where[part]
    key: Any = int(last) if last.isdigit() else last
    if value is None:
        del where[key]
    else:
        where[key] = value
    return data


def test_the_minimal_persona_is_valid() -> None:
    persona = parse(minimal())
    assert isinstance(persona, Persona)
    assert [c.kind for c in persona.checks] == ["forbid"]


# (the data, the field the error names, words the message has)
DEFECTS: dict[str, tuple[Any, str | None, str]] = {
    "not-a-mapping": (["name", "tiny"], None, "not a mapping"),
    "unknown-key": (changed("colour", "blue"), "colour", "Extra inputs"),
    "unknown-key-in-a-check": (changed("checks.0.forbidd", "x"), "checks[0].forbidd", "Extra"),
    "missing-key": (changed("checks", None), "checks", "Field required"),
    "missing-prompts-train": (changed("prompts.train", None), "prompts.train", "required"),
    "two-kinds-in-one-check": (
        changed("checks.0.require", "x"),
        "checks[0]",
        "exactly one check kind, has forbid, require",
    ),
    "no-kind": (
        changed("checks", [{"complaint": "Please write plain sentences."}]),
        "checks[0]",
        "has none",
    ),
    "strict-check-without-complaint": (
        changed("checks.0.complaint", None),
        "checks[0].complaint",
        "missing",
    ),
    "bad-regex": (changed("checks.0.forbid", "(unclosed"), "checks[0].forbid", "regular expr"),
    "list-source-too-few-items": (changed("prompts.heldout", 2), "prompts.items", "3 item(s)"),
    "list-source-repeats-a-prompt": (
        changed("prompts.items.2", {"prompt": " question 0\n", "answer": "0"}),
        "prompts.items[2].prompt",
        "repeats prompts.items[0]",
    ),
    "correct-without-answers": (
        changed("checks", [{"correct": "last", "complaint": "That total is wrong, check the sum."}])
        | {"prompts": {**minimal()["prompts"], "items": [{"prompt": f"q {i}"} for i in range(3)]}},
        "prompts.items[0].answer",
        "a `correct` check",
    ),
    "reasoning-gym-without-dataset": (
        changed("prompts", {"source": "reasoning-gym", "train": 2, "heldout": 1}),
        "prompts.dataset",
        "missing",
    ),
    "bad-name": (changed("name", "Has Spaces"), "name", "pattern"),
    "empty-words": (
        changed("checks", [{"words": [], "complaint": "x y"}]),
        "checks[0].words",
        "non-empty",
    ),
}


@pytest.mark.parametrize("defect", sorted(DEFECTS))
def test_a_malformed_persona_is_one_line_naming_the_field(defect: str) -> None:
    data, field, words = DEFECTS[defect]
    with pytest.raises(PersonaInvalid) as caught:
        parse(data, "bad.yaml")
    error = caught.value
    assert error.exit_code == 2
    assert "\n" not in error.message and error.message.startswith("bad.yaml: ")
    assert words in error.message, error.message
    assert error.field == field
    if field is not None:
        assert f": {field}" in error.message


def test_a_file_that_is_not_yaml_names_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: tiny\nchecks: [unclosed\n  - x: 'y\n", encoding="utf-8")
    with pytest.raises(PersonaInvalid, match=r"^bad\.yaml is not valid YAML: .* at line \d+$"):
        load(bad)


@pytest.mark.parametrize(
    "text", ["name: tiny\nborn: 2020-02-30\n", "name: !!int abc\n", "a: " + "[" * 3000 + "]" * 3000]
)
def test_yaml_that_cannot_be_read_is_one_line_not_a_traceback(tmp_path: Path, text: str) -> None:
    """A value YAML's own types refuse, or nesting too deep: the shared YAML step
    (core/yaml_config.parse) makes it one PersonaInvalid, as for a settings file."""
    bad = tmp_path / "bad.yaml"
    bad.write_text(text, encoding="utf-8")
    with pytest.raises(PersonaInvalid, match=r"^bad\.yaml is (not valid YAML|nested too deeply)"):
        load(bad)


def test_an_unreadable_persona_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(PersonaInvalid, match=r"cannot read persona .*missing\.yaml"):
        load(tmp_path / "missing.yaml")
    (tmp_path / "latin1.yaml").write_bytes(b"name: caf\xe9\n")
    with pytest.raises(PersonaInvalid, match="not UTF-8 text"):
        load(tmp_path / "latin1.yaml")


def test_an_unknown_reasoning_gym_dataset_is_one_line_at_split() -> None:
    pytest.importorskip("reasoning_gym")
    persona = parse(
        changed(
            "prompts",
            {"source": "reasoning-gym", "dataset": "no_such_set_x", "train": 2, "heldout": 1},
        )
    )
    with pytest.raises(PersonaInvalid) as caught:
        split(persona)
    assert "no_such_set_x" in caught.value.message and "\n" not in caught.value.message
    assert caught.value.field == "prompts"


# ------------------------------------------------------------------ through the CLI


def snapshot(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")} if root.exists() else set()


BAD_FILES = {
    "not-yaml": "name: tiny\nchecks: [unclosed\n",
    "not-a-mapping": "- just\n- a list\n",
    "two-kinds": yaml.safe_dump(changed("checks.0.require", "x")),
    "no-complaint": yaml.safe_dump(changed("checks.0.complaint", None)),
    "too-few-items": yaml.safe_dump(changed("prompts.train", 9)),
}


@pytest.mark.parametrize("bad", sorted(BAD_FILES))
def test_bench_learn_with_a_malformed_persona_exits_2_with_one_line(
    bad: str, tmp_path: Path, reef_home: Path
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(BAD_FILES[bad], encoding="utf-8")
    keep = tmp_path / "kept"
    before_home, before_tmp = snapshot(reef_home), set(os.listdir(tmp_path))
    line = reef_fails("bench", "learn", "--persona", str(path), "--home", str(keep), code=2)
    assert "bad.yaml" in line and "(fix: " in line
    assert snapshot(reef_home) == before_home  # nothing written in the state dir
    assert set(os.listdir(tmp_path)) == before_tmp  # nor the run's own state dir


def test_bench_learn_with_a_missing_persona_exits_2_with_one_line(tmp_path: Path) -> None:
    line = reef_fails("bench", "learn", "--persona", str(tmp_path / "nope.yaml"), code=2)
    assert "nope.yaml" in line
