#!/usr/bin/env bash
# The 5-minute tour: a throwaway state dir, a starter tree, two releases, a diff, a rollback.
set -euo pipefail
cd "$(dirname "$0")/.."
REEF=".venv/bin/reef"
export REEF_HOME="${REEF_HOME:-$(mktemp -d)/reef}"
work="$(mktemp -d)"
step() { printf '\n\033[1;36m$ %s\033[0m\n' "$*"; "$@"; }

step $REEF doctor || true
step $REEF scenario create tour --description "the README tour"
step $REEF harness init "$work/tree"
step $REEF harness publish "$work/tree" --scenario tour --reason "first release"
cat > "$work/tree/rules/bug-fixing.md" <<'RULE'
When I ask you to fix a bug, first reproduce it with a failing test, then fix it,
then show the test passing.
RULE
step $REEF harness publish "$work/tree" --scenario tour --reason "reproduce bugs with a failing test first"
step $REEF harness versions --scenario tour
step $REEF harness diff previous latest --scenario tour
step $REEF harness rollback 1 --scenario tour
step $REEF harness diff 2 latest --scenario tour --stat
echo "export REEF_HOME=\"$REEF_HOME\"   # to keep exploring this state dir" 
