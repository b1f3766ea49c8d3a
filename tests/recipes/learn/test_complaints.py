"""What the simulated user says: the first failed check's complaint, and the facts the
prompt touches — named by what tells a fact apart, not by a word every fact shares."""

from __future__ import annotations

from recipes.learn.live import complaint_for
from recipes.personas import Prompt, parse

PERSONA = parse(
    {
        "name": "facts",
        "prompts": {
            "source": "list",
            "train": 1,
            "heldout": 1,
            "items": [{"prompt": "a", "answer": "1"}, {"prompt": "b", "answer": "2"}],
        },
        "checks": [{"correct": "last", "complaint": "That total is wrong."}],
        "facts": ["A glorp has 5 legs.", "A zibbet has 7 legs.", "Our staging port is 8443."],
    }
)


def said(text: str) -> str | None:
    return complaint_for(PERSONA, Prompt("p", text, "1"), "That total is wrong.")


def test_only_the_facts_the_prompt_names_go_with_the_complaint() -> None:
    assert said("How many legs do 2 glorps have?") == "That total is wrong. A glorp has 5 legs."
    both = said("Legs of 1 glorp and 3 zibbets?")
    assert both == "That total is wrong. A glorp has 5 legs. A zibbet has 7 legs."
    assert said("How many legs do 3 spiders have?") == "That total is wrong."  # "legs" alone


def test_an_accepted_reply_says_nothing() -> None:
    assert complaint_for(PERSONA, Prompt("p", "2 glorps?", "10"), None) is None
