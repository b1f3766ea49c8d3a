"""Does GEPA make the harness better? Test-split score of r1 (empty) vs the evolved release.

    .venv/bin/python bench/evolution_gain.py                          # both sets, both models
    .venv/bin/python bench/evolution_gain.py --models smollm2-135m --sets reasoning-gym
    .venv/bin/python bench/evolution_gain.py --write docs/results.md

The plan — sets, seeds, budgets and the decision rule — is in docs/results.md, written
before the first run. Each (model, set) runs through the real CLI in a fresh state dir
(the embedded models' folder is shared, read-only in spirit): ``reef tasks make``, then
``reef evolve --recipe gepa`` from an empty tree, then ``reef eval`` twice — r1 against the
evolved release, and r1 against r1 (the A/A control: a second, independent run of the same
tree on the same tasks). Every number printed is a measurement with its command; none is
a test. A configured ``REEF_MODEL`` (a LiteLLM string) runs as one more model.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._provenance import provenance  # noqa: E402

REEF = str(ROOT / ".venv" / "bin" / "reef")

SETS: dict[str, dict[str, Any]] = {
    "reasoning-gym": {
        "make": [
            "reasoning-gym",
            "--datasets",
            "chain_sum",
            "--train",
            "20",
            "--val",
            "20",
            "--test",
            "60",
            "--seed",
            "1",
        ],
        "max_metric_calls": 150,
    },
    "human-eval": {
        "make": ["human-eval", "--train", "10", "--val", "10", "--test", "40", "--seed", "1"],
        "max_metric_calls": 60,
    },
}
MODELS = ("qwen2.5-coder-1.5b", "smollm2-135m")


def reef(args: list[str], env: dict[str, str], timeout: float = 7200) -> tuple[int, str, float]:
    started = time.monotonic()
    done = subprocess.run(
        [REEF, *args], env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    seconds = time.monotonic() - started
    if done.returncode not in (0, 3):  # 3: rejected / invalid, a result like any other
        sys.stderr.write(done.stderr[-2000:])
    return done.returncode, done.stdout, seconds


def shared_models(home: Path) -> None:
    """Link the person's embedded models into the fresh state dir (no second copy)."""
    from reef_cli.core.embedded import models_dir

    source = models_dir()
    if source.exists():
        (home / "models").symlink_to(source, target_is_directory=True)


def one_repeat(path: Path) -> None:
    """Greedy decoding is deterministic: one run per task and tree (the A/A control
    checks it), as the plan in docs/results.md says."""
    import yaml

    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data["repeats"] = 1
    path.write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")


def run_one(model: str, set_name: str) -> dict[str, Any]:
    home = Path(tempfile.mkdtemp(prefix="reef-gain-"))
    shared_models(home)
    env = {**os.environ, "REEF_HOME": str(home)}
    env.pop("REEF_MODEL", None)
    model_args: list[str] = []
    if model.startswith("model:"):  # a configured LiteLLM model
        model_args = ["--model", model.removeprefix("model:")]
    else:
        env["REEF_EMBEDDED_MODEL"] = model
    spec = SETS[set_name]
    tasks = home / "tasks.yaml"
    row: dict[str, Any] = {"model": model, "set": set_name, "state_dir": str(home)}
    rc, _, _ = reef(["tasks", "make", *spec["make"], "-o", str(tasks)], env)
    if rc != 0:
        return {**row, "error": "reef tasks make failed"}
    one_repeat(tasks)
    reef(["scenario", "create", "gain"], env)
    empty = home / "empty-tree"
    empty.mkdir()
    (empty / "reef.toml").write_text("format = 1\n")
    reef(["harness", "publish", str(empty), "-s", "gain", "--reason", "empty tree"], env)
    evolve = [
        "evolve",
        "--recipe",
        "gepa",
        "-s",
        "gain",
        "--tasks",
        str(tasks),
        "--max-metric-calls",
        str(spec["max_metric_calls"]),
        "--yes",
        "--json",
        *model_args,
    ]
    rc, out, seconds = reef(evolve, env)
    outcome = json.loads(out) if out.strip().startswith("{") else {"state": f"exit {rc}"}
    row.update(
        command="reef " + " ".join(evolve[:-1] if not model_args else evolve),
        state=outcome.get("state"),
        message=outcome.get("message"),
        release=outcome.get("release"),
        evolve_seconds=round(seconds, 1),
        gepa=(outcome.get("evidence") or {}).get("gepa"),
        budget=(outcome.get("evidence") or {}).get("budget"),
        gate=((outcome.get("evidence") or {}).get("evaluation") or {}).get("numbers"),
    )
    evolved = str(outcome["release"]) if outcome.get("release") else None
    for label, releases in (("gain", f"1,{evolved}" if evolved else None), ("aa", "1,1")):
        if releases is None:
            continue
        rc, out, seconds = reef(
            [
                "eval",
                "-s",
                "gain",
                "--tasks",
                str(tasks),
                "--releases",
                releases,
                "--json",
                *model_args,
                # the A/A control asks the model again: from the answer cache it could not
                # be anything but 0
                *(["--no-cache"] if label == "aa" else []),
            ],
            env,
        )
        row[label] = json.loads(out) if rc == 0 and out.strip().startswith("{") else None
        row[f"{label}_seconds"] = round(seconds, 1)
    return row


def fmt_ci(values: Any) -> str:
    return f"[{values[0]:+.3f}, {values[1]:+.3f}]" if values else "–"


def comparison(report: dict[str, Any] | None) -> dict[str, Any]:
    """The second release's comparison against the first, from `reef eval --json`."""
    if not report:
        return {}
    return (report.get("releases") or [{}, {}])[-1].get("vs_first") or {}


def table(rows: list[dict[str, Any]]) -> str:
    head = (
        "| model | set | GEPA ended | val seed → best | metric calls | model calls | "
        "test r1 → evolved | Δ [95% CI] | W/L/T | p | lenient Δ [95% CI] | A/A Δ [95% CI] | "
        "wall s |\n|" + "---|" * 13
    )
    lines = [head]
    for row in rows:
        gepa = row.get("gepa") or {}
        gain = comparison(row.get("gain"))
        aa = comparison(row.get("aa"))
        lenient = gain.get("lenient") or {}
        val = (
            f"{gepa.get('seed_val_score', 0):.3f} → {gepa.get('best_val_score', 0):.3f}"
            if gepa
            else "–"
        )
        means = (
            f"{gain['incumbent_mean']:.3f} → {gain['candidate_mean']:.3f}"
            if "candidate_mean" in gain
            else "nothing published"
        )
        wall = sum(row.get(k) or 0 for k in ("evolve_seconds", "gain_seconds", "aa_seconds"))
        lines.append(
            f"| {row['model']} | {row['set']} | {row.get('state')} | {val} | "
            f"{gepa.get('metric_calls', '–')} | {(row.get('budget') or {}).get('calls', '–')} | "
            f"{means} | {gain.get('mean_diff', 0):+.3f} {fmt_ci(gain.get('diff_ci95'))} | "
            f"{gain.get('wins', '–')}/{gain.get('losses', '–')}/{gain.get('ties', '–')} | "
            f"{gain.get('p', '–')} | "
            f"{lenient.get('mean_diff', 0):+.3f} {fmt_ci(lenient.get('ci95'))} | "
            f"{aa.get('mean_diff', 0):+.3f} {fmt_ci(aa.get('diff_ci95'))} | {wall:.0f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--sets", default=",".join(SETS))
    parser.add_argument("--json", type=Path, help="also write every row as JSON here")
    args = parser.parse_args()
    models = [m for m in args.models.split(",") if m]
    if os.environ.get("REEF_MODEL"):
        models.append("model:" + os.environ["REEF_MODEL"])
    rows = []
    for model in models:
        for set_name in args.sets.split(","):
            print(f"== {model} on {set_name}", file=sys.stderr, flush=True)
            row = run_one(model, set_name)
            rows.append(row)
            print(json.dumps(row, default=str)[:2000], file=sys.stderr, flush=True)
    print(provenance("evolution_gain.py"), end="\n\n")
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2, default=str))


if __name__ == "__main__":
    main()
