"""A sampled answer of the embedded model depends on its request and $REEF_EMBEDDED_SEED,
not on how many calls the process made before it: llama-cpp-python derives each call's
seed from the previous call's, so a GEPA reflection changed when the answer cache spared
the calls before it (bench/gepa_speed.py's rerun found it). Each case runs in its own
process (one model per process), on the lite model, sequential and batched."""

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

def ask(question, temperature):
    messages = [{"role": "user", "content": question}]
    raw = embedded_engine.chat(messages, max_tokens=24, temperature=temperature)
    return raw["choices"][0]["message"]["content"]

first = ask("Invent a name for a cat.", 0.9)
between = [ask(f"Say the number {i}.", 0.0) for i in range(3)]
again = ask("Invent a name for a cat.", 0.9)
print(json.dumps([first, again]))
"""


@pytest.mark.skipif(
    embedded.model_path(embedded.spec_named("smollm2-135m")) is None,
    reason="the lite embedded model is not installed (./install.sh --dev installs it)",
)
@pytest.mark.parametrize("slots", ["1", "2"])
def test_a_sampled_answer_does_not_depend_on_the_calls_before_it(slots: str) -> None:
    env = {**os.environ, "REEF_EMBEDDED_MODEL": "smollm2-135m", "REEF_EMBEDDED_SLOTS": slots}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    first, again = json.loads(done.stdout.strip().splitlines()[-1])
    assert first.strip()
    assert again == first
