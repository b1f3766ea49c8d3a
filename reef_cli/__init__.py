"""Reef: a coding agent's harness as a versioned, gated artifact that evolves from use.

The public front is deliberately small; everything else lives in ``reef_cli.core``.
Nothing heavy is imported here so that ``reef --help`` stays fast.
"""

__version__ = "0.1.0"
