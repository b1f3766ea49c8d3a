"""The model client: LiteLLM leaves logging alone; overlong output is cut at a word."""

from __future__ import annotations

import logging

from reef_cli.core.llm import ModelClient
from tests.fakes.scripted import Scripted


def test_litellm_leaves_no_filter_on_uvicorns_loggers(scripted: Scripted) -> None:
    scripted.push("fine")
    ModelClient("openai/scripted", api_base=scripted.api_base, retries=0).chat(
        [{"role": "user", "content": "hi"}]
    )
    import litellm  # imported by the call above; its import adds the filters

    assert litellm is not None
    for name in ("uvicorn", "uvicorn.access", "uvicorn.error"):
        stray = [f for f in logging.getLogger(name).filters if "litellm" in type(f).__module__]
        assert stray == [], name


def test_overlong_strings_are_cut_at_a_word() -> None:
    from reef_cli.core.llm import cut_at_word

    assert cut_at_word("reversible-database-migration-walkthrough", 40) == (
        "reversible-database-migration"
    )
    assert cut_at_word("short", 40) == "short"
    assert cut_at_word("exactly-ten", 7) == "exactly"
    assert cut_at_word("abcdefghijklmnop", 8) == "abcdefgh"  # no boundary: a hard cut
    assert cut_at_word("Write tests first. Then fix it", 20) == "Write tests first."


def test_an_embedded_call_gets_time_to_write_its_max_tokens() -> None:
    from reef_cli.core.llm import EMBEDDED, EMBEDDED_SECONDS_PER_TOKEN, ModelClient

    hosted = ModelClient("openai/x", api_base="http://127.0.0.1:1/v1", timeout=120)
    assert hosted.call_seconds(4000) == 120
    local = ModelClient(EMBEDDED, timeout=120)
    assert local.call_seconds(100) == 120  # short answers: the plain timeout
    assert local.call_seconds(1600) == 1600 * EMBEDDED_SECONDS_PER_TOKEN > 120
