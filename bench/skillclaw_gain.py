"""Does SkillClaw learn from served traffic? Test-split score before vs after, with A/A.

    .venv/bin/python bench/skillclaw_gain.py                       # both embedded models
    .venv/bin/python bench/skillclaw_gain.py --models smollm2-135m --sessions 12

The plan is in docs/results.md. For each model, in a fresh state dir (the embedded models'
folder linked in): make a reasoning-gym task set, publish an empty r1, put the task set in
the scenario (so the gate evaluates on its test split), start the real `reef serve` on the
embedded model, answer each **train** prompt as its own session through the proxy (the
OpenAI wire format, ``x-reef-scenario`` / ``x-reef-session`` headers), score each answer
with the task's own scorer and send it as a report (``POST /reef/report``: score and a
feedback sentence, referencing the receipt). Then `reef evolve --recipe skillclaw` learns
from those sessions, and `reef eval` compares r1 with the result and r1 with itself.
Every number is a measurement printed with its command; none is a test.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
REEF = str(ROOT / ".venv" / "bin" / "reef")
sys.path.insert(0, str(ROOT))

from bench._provenance import provenance  # noqa: E402
from bench.evolution_gain import comparison, fmt_ci, one_repeat, reef, shared_models  # noqa: E402

MODELS = ("qwen2.5-coder-1.5b", "smollm2-135m")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def serve(env: dict[str, str], port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [REEF, "serve", "--port", str(port), "--open"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    import httpx

    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.5)
    proc.kill()
    raise SystemExit("reef serve did not come up")


def traffic(port: int, tasks_file: Path, sessions: int) -> dict[str, Any]:
    """Answer train prompts through the proxy, one session each, and report their scores."""
    import httpx

    from recipes.tasks import grade, load

    tasks = load(tasks_file).split("train")[:sessions]
    base = f"http://127.0.0.1:{port}"
    scores = []
    with httpx.Client(timeout=600) as client:
        for i, task in enumerate(tasks):
            reply = client.post(
                f"{base}/v1/chat/completions",
                headers={"x-reef-scenario": "sc", "x-reef-session": f"bench-{i:03d}"},
                json={
                    "model": "embedded",
                    "messages": [{"role": "user", "content": task.prompt}],
                    "max_tokens": 400,
                    "temperature": 0,
                },
            )
            reply.raise_for_status()
            receipt = reply.headers["x-reef-agent-record-id"]
            answer = reply.json()["choices"][0]["message"]["content"] or ""
            run = grade(task, answer)
            scores.append(run.score or 0.0)
            client.post(
                f"{base}/reef/report",
                headers={"x-reef-scenario": "sc"},
                json={"score": run.score, "feedback": run.feedback, "references": [receipt]},
            ).raise_for_status()
    return {"sessions": len(tasks), "mean_served_score": sum(scores) / max(1, len(scores))}


def run_one(model: str, sessions: int) -> dict[str, Any]:
    home = Path(tempfile.mkdtemp(prefix="reef-skillclaw-"))
    shared_models(home)
    env = {**os.environ, "REEF_HOME": str(home), "REEF_EMBEDDED_MODEL": model}
    env.pop("REEF_MODEL", None)
    tasks = home / "tasks.yaml"
    make = ["tasks", "make", "reasoning-gym", "--datasets", "chain_sum", "--train"]
    make += [str(sessions), "--val", "1", "--test", "60", "--seed", "2", "-o", str(tasks)]
    reef(make, env)
    one_repeat(tasks)
    reef(["scenario", "create", "sc"], env)
    empty = home / "empty-tree"
    empty.mkdir()
    (empty / "reef.toml").write_text("format = 1\n")
    reef(["harness", "publish", str(empty), "-s", "sc", "--reason", "empty tree"], env)
    (home / "scenarios" / "sc" / "tasks.yaml").write_text(tasks.read_text())
    row: dict[str, Any] = {"model": model, "state_dir": str(home)}
    port = free_port()
    proc = serve(env, port)
    started = time.monotonic()
    try:
        row.update(traffic(port, tasks, sessions))
    finally:
        proc.terminate()
        proc.wait(30)
    row["traffic_seconds"] = round(time.monotonic() - started, 1)
    evolve = ["evolve", "--recipe", "skillclaw", "-s", "sc", "--yes", "--json"]
    rc, out, seconds = reef(evolve, env)
    outcome = json.loads(out) if out.strip().startswith("{") else {"state": f"exit {rc}"}
    evidence = outcome.get("evidence") or {}
    row.update(
        command="reef " + " ".join(evolve),
        state=outcome.get("state"),
        message=outcome.get("message"),
        release=outcome.get("release"),
        evolve_seconds=round(seconds, 1),
        skillclaw={k: v for k, v in (evidence.get("skillclaw") or {}).items() if k != "receipts"},
        budget=evidence.get("budget"),
    )
    evolved = str(outcome["release"]) if outcome.get("release") else None
    for label, releases in (("gain", f"1,{evolved}" if evolved else None), ("aa", "1,1")):
        if releases is None:
            continue
        eval_args = ["eval", "-s", "sc", "--tasks", str(tasks), "--releases", releases, "--json"]
        rc, out, seconds = reef(eval_args, env)
        row[label] = json.loads(out) if rc == 0 and out.strip().startswith("{") else None
        row[f"{label}_seconds"] = round(seconds, 1)
    return row


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| model | sessions | served score | SkillClaw ended | edits (dropped) | "
        "test r1 → after | Δ [95% CI] | W/L/T | p | A/A Δ [95% CI] | model calls | wall s |",
        "|" + "---|" * 12,
    ]
    for row in rows:
        gain, aa = comparison(row.get("gain")), comparison(row.get("aa"))
        claw = row.get("skillclaw") or {}
        means = (
            f"{gain['incumbent_mean']:.3f} → {gain['candidate_mean']:.3f}"
            if "candidate_mean" in gain
            else "nothing published"
        )
        wall = sum(
            row.get(k) or 0
            for k in ("traffic_seconds", "evolve_seconds", "gain_seconds", "aa_seconds")
        )
        lines.append(
            f"| {row['model']} | {row.get('sessions')} | {row.get('mean_served_score', 0):.3f} | "
            f"{row.get('state')} | {len(claw.get('edits') or [])} "
            f"({len(claw.get('dropped') or [])}) | {means} | "
            f"{gain.get('mean_diff', 0):+.3f} {fmt_ci(gain.get('diff_ci95'))} | "
            f"{gain.get('wins', '–')}/{gain.get('losses', '–')}/{gain.get('ties', '–')} | "
            f"{gain.get('p', '–')} | {aa.get('mean_diff', 0):+.3f} {fmt_ci(aa.get('diff_ci95'))} | "
            f"{(row.get('budget') or {}).get('calls', '–')} | {wall:.0f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--sessions", type=int, default=16)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows = []
    for model in [m for m in args.models.split(",") if m]:
        print(f"== {model}", file=sys.stderr, flush=True)
        rows.append(run_one(model, args.sessions))
        print(json.dumps(rows[-1], default=str)[:2000], file=sys.stderr, flush=True)
    print(provenance("skillclaw_gain.py"), end="\n\n")
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2, default=str))


if __name__ == "__main__":
    main()
