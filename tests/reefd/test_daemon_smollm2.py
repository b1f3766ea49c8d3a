"""The CPU end to end again on the embedded SmolLM2-135M (slow: two loads of the GGUF and a
LoRA step on two cores).

A real model's greedy answer changes only where its first two tokens are close: PPO's
clip lets one step raise a token's probability by at most 28%. So the test picks, with
the base weights, held-out prompts whose top two first tokens are within that margin,
rewards sampled answers that start with the runner-up, and lets the gate ask whether
the greedy answers now start with it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

pytest.importorskip("torch")
pytest.importorskip("transformers")

from reef_cli.core import embedded
from reefd.daemon import Daemon
from reefd.daemon_config import parse

pytestmark = pytest.mark.slow

CANDIDATE_PROMPTS = [
    "Name a colour.",
    "Name a fruit.",
    "Name an animal.",
    "Pick a number.",
    "Say a word.",
    "Name a city.",
    "Name a planet.",
    "Name a tree.",
    "Name a metal.",
    "Name a sport.",
    "Name a drink.",
    "Name a flower.",
    "Name a tool.",
    "Name a bird.",
    "Name a fish.",
    "Name a vegetable.",
    "Give me a name.",
    "Name a country.",
    "Name a shape.",
    "Name a season.",
]


def _close_calls(daemon: Daemon, prompts: list[str], ratio: float = 1.2) -> dict[str, str]:
    """prompt -> the runner-up first token's text, where the top two are within ``ratio``."""
    import torch

    from reefd.models import prompt_ids

    trainer = daemon.trainer
    tokenizer = daemon.loaded.tokenizer
    out: dict[str, str] = {}
    for prompt in prompts:
        ids = prompt_ids(tokenizer, [{"role": "user", "content": prompt}])
        with torch.no_grad():
            logits = trainer.model(torch.tensor([ids])).logits[0, -1]
        top = torch.topk(torch.softmax(logits, -1), 2)
        first, second = (float(p) for p in top.values)
        text = tokenizer.decode([int(top.indices[1])])
        if first / second < ratio and text.strip() and text.strip().isalpha():
            out[prompt] = text
    return out


@pytest.mark.skipif(
    embedded.gguf_path() is None and not embedded.is_installed(embedded.spec_named("smollm2-135m")),
    reason="the embedded SmolLM2 is not installed (reef model install smollm2-135m)",
)
def test_the_end_to_end_on_the_embedded_smollm2(tmp_path: Path) -> None:
    from reefd.models import state_checksum

    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(yaml.safe_dump({"tasks": [{"id": "p", "prompt": "x", "contains": "x"}]}))
    config = parse(
        {
            "scenario": "smol",
            "engine": {"kind": "torch", "model": "smollm2"},
            "serve": {"port": 0, "open": True},
            "recipe": {"name": "sao", "batch_size": 12, "max_staleness": 2},
            "trainer": {"mode": "lora", "lr": 0.002, "epochs": 4, "lora_r": 8},
            "sync": {"mode": "dist", "backend": "gloo"},
            "gate": {"tasks": str(tasks), "max_tokens": 3},
        }
    )
    d = Daemon(config).start()
    try:
        close = _close_calls(d, CANDIDATE_PROMPTS)
        if len(close) < 3:
            pytest.skip(f"only {len(close)} close first-token calls among the prompts")
        held = list(close)[: max(3, len(close) // 2)]
        train = [p for p in close if p not in held] or held
        tasks.write_text(
            yaml.safe_dump(
                {
                    "method": "bootstrap",
                    "repeats": 1,
                    "tasks": [
                        {"id": f"t{i}", "prompt": p, "regex": r"^\s*" + _escape(close[p].strip())}
                        for i, p in enumerate(held)
                    ],
                }
            )
        )
        base = d.client.checksum()
        scored = _reward_runner_up(d, train + held, close, want=12)
        assert scored >= 12
        d.recipe.batch_size = d.config.recipe.batch_size = scored  # train on all of them
        result = d.tick()
        assert result.state == "published", result
        assert d.client.weight_version() == "w1"
        trained = d.client.checksum()
        assert trained != base and trained == state_checksum(d.trainer.served_weights())
        resp = httpx.post(
            d.url + "/v1/chat/completions",
            json={"model": "s", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3},
            timeout=120,
        )
        record = _record(d, resp.headers["x-reef-agent-record-id"])
        assert record.weight_version == "w1"
        assert [r.tag for r in d.chain.releases()] == ["w1"]
        d.chain.rollback(0)
        d.tick()
        assert d.client.checksum() == base and d.client.weight_version() == "w2"
    finally:
        d.stop()


def _escape(text: str) -> str:
    import re

    return re.escape(text)


def _reward_runner_up(d: Daemon, prompts: list[str], close: dict[str, str], want: int) -> int:
    """Sample answers through the proxy; report 1 when one starts with the prompt's
    runner-up token, 0 otherwise, until ``want`` records are scored with both kinds."""
    scored = positives = 0
    seed = 0
    while scored < want * 3 and (scored < want or positives == 0 or positives == scored):
        prompt = prompts[seed % len(prompts)]
        resp = httpx.post(
            d.url + "/v1/chat/completions",
            json={
                "model": "s",
                "messages": [{"role": "user", "content": prompt}],
                "max_tokens": 3,
                "temperature": 1.0,
                "seed": seed,
            },
            timeout=120,
        )
        seed += 1
        text = resp.json()["choices"][0]["message"]["content"]
        good = text.strip().startswith(close[prompt].strip())
        positives += int(good)
        scored += 1
        httpx.post(
            d.url + "/reef/report",
            json={
                "score": 1.0 if good else 0.0,
                "references": [resp.headers["x-reef-agent-record-id"]],
            },
            timeout=30,
        )
    return scored


def _record(d: Daemon, receipt: str) -> Any:
    from reef_cli.core.store.sqlite import SQLiteStore

    assert d.flush_records()
    return SQLiteStore().get(receipt)
