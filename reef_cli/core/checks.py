"""The gate: decides whether a candidate tree may become a release.

This module holds the static checks every publish runs — tree validation and the
whole-tree credential scan. Budgets and paired evaluation (used by recipes) build on
the same ``Verdict`` shape, which is stored in each release's metadata.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from reef_cli.core.errors import GateBlocked, TreeError
from reef_cli.core.json_shape import field_dict
from reef_cli.core.tree import HarnessTree, Limits, parse_files


@dataclass
class Check:
    name: str
    status: str  # passed | failed | pending | invalid
    detail: str = ""
    findings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return field_dict(self, drop_empty=True)


@dataclass
class Verdict:
    checks: list[Check]
    tree: HarnessTree | None = None

    @property
    def passed(self) -> bool:
        return all(c.status in ("passed", "pending") for c in self.checks)

    @property
    def pending(self) -> bool:
        return self.passed and any(c.status == "pending" for c in self.checks)

    @property
    def verdict(self) -> str:
        if not self.passed:
            return "blocked"
        return "pending" if self.pending else "passed"

    def to_json(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "checks": [c.to_json() for c in self.checks]}

    def raise_if_blocked(self) -> None:
        if self.passed:
            return
        failed = [c for c in self.checks if c.status not in ("passed", "pending")]
        first = failed[0]
        raise GateBlocked(
            f"gate blocked the publish: {first.name}: {first.detail}",
            _hint_for(first.name),
            findings=[f for c in failed for f in c.findings],
        )


def _hint_for(check: str) -> str:
    return {
        "credential-scan": "remove the secret (read it from an environment variable instead)",
        "tree": "fix the file named; `reef harness check DIR` lists every problem",
        "policy-scan": "remove the instruction named; Reef does not ship it",
    }.get(check, "see `reef harness show` for the gate's numbers")


def static_checks(
    files: Mapping[str, str],
    limits: Limits = Limits(),
    progress: Callable[[str], None] | None = None,
) -> Verdict:
    """Tree validation + credential scan + the extension review rule. Never raises on bad
    content: every problem becomes a failed check, so the verdict can be shown and stored."""
    from reef_cli.core.secrets import scan_files

    checks: list[Check] = []
    tree: HarnessTree | None = None
    try:
        tree = parse_files(files, limits=limits)
        checks.append(Check("tree", "passed", f"{len(files)} files"))
    except TreeError as exc:
        checks.append(Check("tree", "failed", exc.problems[0], findings=exc.problems))
    findings = scan_files(files, progress)
    if findings:
        listed = ", ".join(str(f) for f in findings[:5])
        more = f" and {len(findings) - 5} more" if len(findings) > 5 else ""
        checks.append(
            Check(
                "credential-scan",
                "failed",
                f"{len(findings)} possible secret(s): {listed}{more}",
                findings=[str(f) for f in findings],
            )
        )
    else:
        checks.append(Check("credential-scan", "passed", f"{len(files)} files clean"))
    from reef_cli.core import policy

    violations = policy.scan_files(files)
    if violations:
        checks.append(
            Check(
                "policy-scan",
                "failed",
                f"text that would make the agent leak secrets or weaken isolation: "
                f"{', '.join(str(v) for v in violations[:3])}",
                findings=[str(v) for v in violations],
            )
        )
    else:
        checks.append(Check("policy-scan", "passed", "no exfiltration or sandbox-escape text"))
    if tree is not None and tree.extensions:
        names = ", ".join(e.name for e in tree.extensions)
        checks.append(
            Check(
                "extension-review",
                "pending",
                f"extensions are code ({names}): published as pending until "
                "`reef harness promote N`",
            )
        )
    return Verdict(checks, tree)
