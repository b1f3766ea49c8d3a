"""Using a LiteLLM model leaves `reef serve`'s logging as Reef configured it."""

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
