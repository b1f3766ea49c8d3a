#!/bin/bash
# Meta-Harness on the embedded model, as docs/results.md pre-registers it: a fresh state
# dir (REEF_HOME, default a temporary folder), the starter tree as r1, reasoning-gym
# chain_sum 10/10/30 (seed 1), three attempts with pi as the proposer, then the A/A
# control. Writes evolve.json and aa.json next to the state dir; prints wall times.
set -eu
OUT=${1:-$(mktemp -d /tmp/reef-meta-harness-run.XXXXXX)}
REEF=${REEF:-$(dirname "$0")/../.venv/bin/reef}
export REEF_HOME="$OUT/home"
mkdir -p "$OUT"
echo "commit $(git -C "$(dirname "$0")" rev-parse --short HEAD); $(uptime)"
"$REEF" model install qwen2.5-coder-1.5b     # a fresh REEF_HOME holds no joined model yet
"$REEF" scenario create chain-sum
"$REEF" harness init "$OUT/starter"
"$REEF" harness publish "$OUT/starter" -m "the starter tree" -s chain-sum
"$REEF" tasks make reasoning-gym --datasets chain_sum --train 10 --val 10 --test 30 \
  --seed 1 -o "$OUT/chain_sum.yaml"
start=$(date +%s)
"$REEF" evolve --recipe meta-harness --adapter pi --iterations 3 --tasks "$OUT/chain_sum.yaml" \
  -s chain-sum -y --json > "$OUT/evolve.json" || echo "evolve exit $?"
echo "evolve wall $(( $(date +%s) - start )) s"
start=$(date +%s)
"$REEF" eval --tasks "$OUT/chain_sum.yaml" --releases 1,1 -s chain-sum --json > "$OUT/aa.json"
echo "A/A wall $(( $(date +%s) - start )) s; $(uptime)"
echo "results in $OUT"
