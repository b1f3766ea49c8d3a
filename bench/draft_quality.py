"""How often Reefine publishes a draft a person would keep, per embedded model, side by side.

    .venv/bin/python bench/draft_quality.py                       # every installed model
    .venv/bin/python bench/draft_quality.py --models smollm2-135m --limit 5
    .venv/bin/python bench/draft_quality.py --write docs/results.md

Each ask of the fixed public set (bench/draft_asks.yaml) runs the whole evolve path — the
draft, the quality gate, the real pi trial in the sandbox through a recording gateway, the
judge — on a fresh state dir, once per model. Each model runs in its own child process, so
its peak RSS is its own. Reported per model: asks published (or pending), how many
published drafts fail the deterministic quality checks (junk that got through: the issue's
acceptance is 0), asks refused or rejected as expected, seconds per evolve (median and max)
and peak RSS. No timing here is a test; it is a measurement, printed with its command.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
ASKS = ROOT / "bench" / "draft_asks.yaml"
sys.path.insert(0, str(ROOT))

from bench._provenance import provenance  # noqa: E402


def load_asks(path: Path, limit: int | None) -> list[dict[str, Any]]:
    import yaml

    asks = list(yaml.safe_load(path.read_text(encoding="utf-8"))["asks"])
    return asks[:limit] if limit else asks


def junk_in_release(ask: str, scenario: Any, outcome: Any) -> list[str]:
    """Deterministic quality failures of what a published release wrote (empty: kept)."""
    from recipes import quality

    chain = scenario.chain()
    files = chain.files(chain.get(outcome.release))
    problems: list[str] = []
    for change in outcome.evidence.get("changes", []):
        written = quality.written_of(
            files, change["kind"], change["name"], change["path"], change.get("why", "")
        )
        problems += quality.failures(quality.check_written(ask, written))
    return problems


def run_one(item: dict[str, Any]) -> dict[str, Any]:
    """One ask, the whole evolve path, in a fresh state dir."""
    from recipes import engine
    from reef_cli.core import scenarios
    from reef_cli.core.publishing import publish_files
    from reef_cli.core.tree import starter_tree

    home = Path(tempfile.mkdtemp(prefix="reef-bench-"))
    (home / "models").symlink_to(os.environ["REEF_BENCH_MODELS"])  # joined models, shared
    os.environ["REEF_HOME"] = str(home)
    scenario = scenarios.create("bench")
    publish_files(scenario, starter_tree().files(), reason="start")
    started = time.monotonic()
    outcome = engine.evolve(engine.EvolveRequest(scenario=scenario, ask=item["ask"]))
    seconds = time.monotonic() - started
    row: dict[str, Any] = {
        "id": item["id"],
        "group": item.get("group"),
        "expect": item.get("expect"),
        "state": outcome.state,
        "seconds": round(seconds, 2),
        "message": outcome.message[:160],
    }
    changes = outcome.evidence.get("changes") or []
    if changes:
        row["kind"], row["name"] = changes[0]["kind"], changes[0]["name"]
    if outcome.state in ("published", "pending") and outcome.release is not None:
        row["junk"] = junk_in_release(item["ask"], scenario, outcome)
        row["path"] = changes[0]["path"] if changes else None
        chain = scenario.chain()
        files = chain.files(chain.get(outcome.release))
        row["text"] = files.get(row["path"] or "", "")[:1200]
    return row


def child(model: str, asks_file: Path, limit: int | None) -> None:
    """Run every ask on ``model``; one JSON line per ask on stdout."""
    from rich.progress import Progress

    os.environ["REEF_EMBEDDED_MODEL"] = model
    os.environ.pop("REEF_MODEL", None)
    items = load_asks(asks_file, limit)
    with Progress(transient=True, console=None) as bar:
        task = bar.add_task(model, total=len(items))
        for item in items:
            bar.update(task, description=f"{model}: {item['id']}")
            print(json.dumps(run_one(item)), flush=True)
            bar.advance(task)
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"peak_rss_mb": round(rss_mb)}), flush=True)


def summarise(model: str, rows: list[dict[str, Any]], rss_mb: float | None) -> dict[str, Any]:
    kept = [r for r in rows if r["state"] in ("published", "pending")]
    junk = [r for r in kept if r.get("junk")]
    publishable = [r for r in rows if r["expect"] in ("published", "pending")]
    refusals = [r for r in rows if r["expect"] in ("refused", "rejected")]
    held = [r for r in refusals if r["state"] not in ("published", "pending")]
    seconds = [r["seconds"] for r in rows]
    return {
        "model": model,
        "asks": len(rows),
        "published": len(kept),
        "published_of_publishable": f"{sum(r in kept for r in publishable)}/{len(publishable)}",
        "junk_published": len(junk),
        "refused_as_expected": f"{len(held)}/{len(refusals)}",
        "median_s": round(statistics.median(seconds), 1) if seconds else None,
        "max_s": round(max(seconds), 1) if seconds else None,
        "peak_rss_mb": rss_mb,
    }


def installed_models() -> list[str]:
    from reef_cli.core import embedded

    return [name for name in embedded.names() if embedded.is_installed(embedded.spec_named(name))]


def markdown(summaries: list[dict[str, Any]], rows: dict[str, list[dict[str, Any]]]) -> str:
    head = (
        "| model | asks | published | of publishable | junk published | held back as expected "
        "| s / evolve (median, max) | peak RSS |\n|---|---|---|---|---|---|---|---|\n"
    )
    body = "".join(
        f"| {s['model']} | {s['asks']} | {s['published']} | {s['published_of_publishable']} | "
        f"{s['junk_published']} | {s['refused_as_expected']} | {s['median_s']}, {s['max_s']} | "
        f"{s['peak_rss_mb']} MB |\n"
        for s in summaries
    )
    detail = []
    for model, model_rows in rows.items():
        detail.append(f"\n### {model}\n\n| ask | expected | ended | kind/name | s | note |\n")
        detail.append("|---|---|---|---|---|---|\n")
        for r in model_rows:
            note = "; ".join(r.get("junk") or []) or r["message"].replace("|", "/")
            kind = f"{r.get('kind', '')}/{r.get('name', '')}" if r.get("kind") else ""
            detail.append(
                f"| {r['id']} | {r['expect']} | {r['state']} | {kind} | {r['seconds']} | "
                f"{note[:120]} |\n"
            )
    return head + body + "".join(detail)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", help="comma-separated registry names (default: installed)")
    parser.add_argument("--asks", type=Path, default=ASKS)
    parser.add_argument("--limit", type=int, help="only the first N asks")
    parser.add_argument("--write", type=Path, help="also write the report (markdown) here")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.asks, args.limit)
        return
    from reef_cli.core import embedded

    models = args.models.split(",") if args.models else installed_models()
    os.environ["REEF_BENCH_MODELS"] = str(embedded.models_dir())
    summaries, all_rows = [], {}
    for model in models:
        argv = [sys.executable, __file__, "--child", model, "--asks", str(args.asks)]
        if args.limit:
            argv += ["--limit", str(args.limit)]
        done = subprocess.run(argv, stdout=subprocess.PIPE, text=True, check=False)
        lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        rows = [line for line in lines if "id" in line]
        rss = next((line["peak_rss_mb"] for line in lines if "peak_rss_mb" in line), None)
        if done.returncode != 0:
            print(f"{model}: the run stopped early (exit {done.returncode})", file=sys.stderr)
        all_rows[model] = rows
        summaries.append(summarise(model, rows, rss))
    report = markdown(summaries, all_rows)
    print(report)
    if args.write:
        args.write.write_text(
            f"# Draft quality per embedded model\n\n{provenance('draft_quality.py')}\n\n{report}",
            encoding="utf-8",
        )


if __name__ == "__main__":
    main()
