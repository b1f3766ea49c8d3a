"""The one import guard for reefd's optional stack (torch, transformers, peft, safetensors).

`reef` and `reef serve` never import torch; reefd's modules import it through
``require()`` inside functions, so a machine without the extra gets one line that names
the install instead of a traceback.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from reef_cli.core.errors import ExtraMissing

INSTALL = "pip install 'reef[reefd]' (CPU: torch 2.13.0) or ./install.sh --reefd"


def require(module: str = "torch") -> ModuleType:
    """Import ``module`` (torch, transformers, peft, safetensors.torch) or raise ExtraMissing."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ExtraMissing(
            f"reefd needs {module.split('.')[0]}, which is not installed", INSTALL
        ) from exc


def available() -> bool:
    try:
        require("torch")
        require("transformers")
    except ExtraMissing:
        return False
    return True
