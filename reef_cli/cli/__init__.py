"""Thin typer shells over ``reef_cli.core``; one sub-command group per file.

CLI modules import only typer at module level; everything else is imported inside the
command functions, so ``reef --help`` stays fast.
"""
