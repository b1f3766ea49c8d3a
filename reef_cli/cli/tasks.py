"""`reef tasks`: the shipped task sets and how to make a task-set file from one."""

from __future__ import annotations

import typer

app = typer.Typer(help="Task sets: list the shipped ones, make a task-set file.", no_args_is_help=True)
