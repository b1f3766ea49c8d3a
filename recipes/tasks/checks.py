"""The code scorers, ``python`` and ``command``: run only in Reef's sandbox.

Task code and the answer it judges are untrusted, so neither is ever exec'd in Reef's
process: each check gets a fresh temp project (the task's files plus ``ANSWER.md``), runs
under ``sandbox.run`` with no network, and is removed afterwards. A check that fails, raises
or runs out of time scores 0.0; a sandbox that cannot run at all is an outage (``None``),
never a score.
"""

from __future__ import annotations

import json
import math
import secrets
import shutil
import tempfile
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import sandbox
from reef_cli.core.errors import SandboxError, SandboxUnavailable

PYTHON = "/usr/bin/python3"  # the system interpreter: the sandbox binds /usr read-only
ANSWER_FILE = "ANSWER.md"
CHECK_DIR = ".reef-check"  # Reef's own files inside the project (the python check's source)
TAIL_LINES = 15
TAIL_CHARS = 1500
KEEP_CHARS = 64 * 1024  # output kept while a command runs; only its tail is reported
MEMORY_MB, FILE_MB, PIDS = 2048, 256, 128  # a check is small: a test run, not a build

# Runs in the sandbox as ``python3 -I -c RUNNER MARK``. fd 1 is handed to stderr before the
# check runs, so what check() prints cannot pass for the result line.
RUNNER = r"""
import json, math, os, sys, traceback
mark = sys.argv[1]
out = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
sys.path.insert(0, os.getcwd())
try:
    with open(".reef-check/check.py", encoding="utf-8") as f:
        source = f.read()
    with open("ANSWER.md", encoding="utf-8") as f:
        answer = f.read()
    space = {"__name__": "__check__"}
    exec(compile(source, "check.py", "exec"), space)
    check = space.get("check")
    if not callable(check):
        raise TypeError("the python scorer defines no check(answer) function")
    value = check(answer)
    if not isinstance(value, (bool, int, float)):
        raise TypeError(f"check() returned {type(value).__name__}, not bool or float")
    if math.isnan(value):
        raise ValueError("check() returned NaN")
    found = {"score": float(value)}
except BaseException as exc:
    found = {"error": traceback.format_exception_only(type(exc), exc)[-1].strip()}
out.write(mark + " " + json.dumps(found) + "\n")
out.flush()
"""


@dataclass
class Checked:
    score: float | None  # None: the sandbox could not run the check (an outage)
    feedback: str


def run_python(source: str, answer: str, files: dict[str, str], timeout: float) -> Checked:
    """Score ``answer`` with the ``check(answer)`` that ``source`` defines, in the sandbox."""
    if not Path(PYTHON).exists():
        return Checked(None, f"no system Python at {PYTHON} to run the python check")
    mark = f"REEF-CHECK-{secrets.token_hex(8)}"
    extra = {f"{CHECK_DIR}/check.py": source}
    ran = _sandboxed([PYTHON, "-I", "-c", RUNNER, mark], files, answer, extra, timeout, None)
    if isinstance(ran, Checked):
        return ran
    if ran.timed_out:
        return Checked(0.0, f"the python check timed out after {timeout:g}s")
    found = _result_line(ran.stdout, mark)
    if found is None:
        why = f"killed ({ran.killed_by})" if ran.killed_by else f"exit {ran.returncode}"
        return Checked(0.0, f"the python check ended without a score ({why}): {_last(ran)}")
    if "error" in found:
        return Checked(0.0, f"the python check failed: {found['error']}")
    value = min(1.0, max(0.0, float(found["score"])))  # type: ignore[arg-type]
    return Checked(value, f"the python check scored {value:.2f}")


def run_command(command: str, answer: str, files: dict[str, str], timeout: float) -> Checked:
    """Run ``bash -c command`` on the task's files plus ``ANSWER.md``: exit 0 scores 1."""
    chunks: deque[str] = deque()
    kept = [0]

    def keep(_stream: str, text: str) -> None:  # both streams in arrival order, bounded
        chunks.append(text)
        kept[0] += len(text)
        while kept[0] > KEEP_CHARS and len(chunks) > 1:
            kept[0] -= len(chunks.popleft())

    ran = _sandboxed(["bash", "-c", command], files, answer, {}, timeout, keep)
    if isinstance(ran, Checked):
        return ran
    shown = _tail("".join(chunks))
    name = " ".join(command.split())[:80]
    if ran.timed_out:
        verdict, value = f"timed out after {timeout:g}s", 0.0
    elif ran.returncode == 0:
        verdict, value = "passed (exit 0)", 1.0
    else:
        why = f"killed ({ran.killed_by})" if ran.killed_by else f"exit {ran.returncode}"
        verdict, value = f"failed ({why})", 0.0
    text = f"the command `{name}` {verdict}"
    return Checked(value, f"{text}; output:\n{shown}" if shown else text)


def _sandboxed(
    argv: list[str],
    files: dict[str, str],
    answer: str,
    extra: dict[str, str],
    timeout: float,
    on_output: Callable[[str, str], None] | None,
) -> sandbox.Result | Checked:
    """``argv`` run with no network in a fresh project holding ``files``, ``ANSWER.md`` and
    ``extra``; the project is always removed. A sandbox that cannot run is an outage."""
    root = Path(tempfile.mkdtemp(prefix="reef-check-"))
    try:
        name = ""
        try:
            for name, text in {**files, ANSWER_FILE: answer, **extra}.items():
                path = root / name
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8", errors="replace")
        except OSError as exc:  # a broken task (a file where a dir must be), not the answer
            return Checked(None, f"cannot write the task's file {name}: {exc.strerror}")
        limits = sandbox.Limits(wall_s=timeout, memory_mb=MEMORY_MB, file_mb=FILE_MB, pids=PIDS)
        try:
            result = sandbox.run(argv, root, allow=(), limits=limits, on_output=on_output)
        except (SandboxUnavailable, SandboxError) as exc:
            return Checked(None, f"the sandbox could not run the check: {exc.one_line()}")
        if result.workdir != root.resolve():  # the `none` mode ran in a throwaway copy
            base = result.workdir.parent
            gone = base if base.name.startswith("reef-unsandboxed-") else result.workdir
            shutil.rmtree(gone, ignore_errors=True)
        return result
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _result_line(stdout: str, mark: str) -> dict[str, object] | None:
    """The runner's result: the last line that starts with this run's mark."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(mark + " "):
            try:
                found = json.loads(line[len(mark) + 1 :])
            except ValueError:
                return None
            if isinstance(found, dict) and ("error" in found or _is_score(found.get("score"))):
                return found
            return None
    return None


def _is_score(value: object) -> bool:
    return isinstance(value, (int, float)) and not math.isnan(value)


def _last(ran: sandbox.Result) -> str:
    lines = [ln for ln in (ran.stderr + ran.stdout).splitlines() if ln.strip()]
    return lines[-1][-300:] if lines else "no output"


def _tail(text: str) -> str:
    """The last ``TAIL_LINES`` lines, at most ``TAIL_CHARS`` characters."""
    shown = "\n".join(text.rstrip().splitlines()[-TAIL_LINES:])
    return shown if len(shown) <= TAIL_CHARS else "…" + shown[-(TAIL_CHARS - 1) :]
