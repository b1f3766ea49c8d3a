#!/usr/bin/env bash
# Every check CI runs: lint, types, docs drift, tests. Run via `./install.sh --dev --check`.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
echo "--- ruff"
$PY -m ruff check .
$PY -m ruff format --check .
echo "--- mypy"
$PY -m mypy
echo "--- docs/cli.md is generated from --help"
$PY -m reef_cli.cli.docgen --check
echo "--- pytest"
$PY -m pytest -q -p no:cacheprovider
