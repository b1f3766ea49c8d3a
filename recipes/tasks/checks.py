"""The code scorers, ``python`` and ``command``: run only in Reef's sandbox.

Task code and the answer it judges are untrusted, so neither is ever exec'd in Reef's
process: each check gets a fresh temp project (the task's files plus ``ANSWER.md``), runs
under ``sandbox.run`` with no network, and is removed afterwards. A check that fails, raises
or runs out of time scores 0.0; a sandbox that cannot run at all is an outage (``None``),
never a score.

Inside the sandbox the answer's code must not run in the process that gives the verdict
(it could exit early or write the verdict itself): checks run it through ``reef_check``
(``recipes/tasks/reef_check.py``, importable there), in a child that cannot reach the judge.
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
CHECK_DIR = ".reef-check"  # Reef's own files in the project: reef_check.py, the python check
HELPER = (Path(__file__).parent / "reef_check.py").read_text(encoding="utf-8")
TAIL_LINES = 15
TAIL_CHARS = 1500
KEEP_CHARS = 64 * 1024  # output kept while a command runs; only its tail is reported
MEMORY_MB, FILE_MB, PIDS = 2048, 256, 128  # a check is small: a test run, not a build

# Runs in the sandbox as ``python3 -I -c RUNNER MARK``: the judging process. fd 1 is handed
# to stderr before the check runs, so what check() prints cannot pass for the result line;
# the result goes to a private fd no child inherits, and ``reef_check.seal()`` keeps the
# answer's processes (started through ``reef_check``) out of this one. The task's modules are
# imported from what was read before anything ran. An audit hook refuses code that check()
# would run here (exec, eval, runpy, a written module…); once it has refused, no score.
RUNNER = r"""
import json, math, os, sys, traceback
mark, dumps = sys.argv[1], json.dumps
out = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
root = os.getcwd()
refused = []
try:
    sys.path.insert(0, os.path.join(root, ".reef-check"))
    import importlib.abc, importlib.util, reef_check
    with open(".reef-check/check.py", encoding="utf-8") as f:
        source = f.read()
    os.unlink(".reef-check/check.py")  # the answer's processes cannot read the answer key
    with open("ANSWER.md", encoding="utf-8") as f:
        answer = f.read()
    modules = {}
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != ".reef-check")
        for name in sorted(n for n in names if n.endswith(".py")):
            path = os.path.join(folder, name)
            parts = os.path.relpath(path, root)[:-3].split(os.sep)
            package = parts[-1] == "__init__"
            with open(path, encoding="utf-8", errors="replace") as f:
                modules[".".join(parts[:-1] if package else parts)] = (path, f.read(), package)
            for i in range(1, len(parts)):
                there = os.path.join(root, *parts[:i], "__init__.py")
                modules.setdefault(".".join(parts[:i]), (there, "", True))
    reef_check.seal()
    trusted = {}  # id -> code: the code this process may run (by identity, kept alive)

    class TaskFiles(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        def find_spec(self, name, path=None, target=None):
            if name not in modules:
                return None
            where, _, package = modules[name]
            spec = importlib.util.spec_from_loader(name, self, origin=where, is_package=package)
            spec.has_location = True
            return spec

        def create_module(self, spec):
            return None

        def exec_module(self, module):
            where, text, package = modules[module.__spec__.name]
            module.__file__ = where
            if package:
                module.__path__ = [os.path.dirname(where)]
            code = compile(text, where, "exec")
            trusted[id(code)] = code
            exec(code, module.__dict__)

    sys.meta_path.insert(len(sys.meta_path) - 1, TaskFiles())
    system = tuple(os.path.join(p, "") for p in sys.path) + ("<frozen ",)
    RUNS_CODE = {"runpy", "code", "codeop", "doctest", "timeit", "pdb", "bdb", "profile",
                 "cProfile", "trace", "pydoc"}

    def short(name):
        return name[8:-1] if name.startswith("<frozen ") else os.path.basename(name)

    def audit(event, args):
        if event != "exec" or id(args[0]) in trusted:
            return
        frame = sys._getframe(1)
        caller = frame.f_code.co_filename
        made = getattr(args[0], "co_filename", "") or "code"
        if caller.startswith(system) and (
            made.startswith(system)
            or (made.startswith("<") and short(caller).removesuffix(".py") not in RUNS_CODE)
        ):
            return
        why = (f"check() ran code in the judging process ({short(caller)} line "
               f"{frame.f_lineno} ran {short(made)}); run the answer through reef_check")
        refused.append(why)
        raise RuntimeError(why)

    sys.addaudithook(audit)
    code = compile(source, "check.py", "exec")
    trusted[id(code)] = code
    space = {"__name__": "__check__"}
    exec(code, space)
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
if refused:
    found = {"error": refused[0]}
out.write(mark + " " + dumps(found) + "\n")
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
    """``argv`` run with no network in a fresh project holding ``files``, ``ANSWER.md``,
    ``extra`` and ``reef_check`` (importable: PYTHONPATH); the project is always removed.
    A sandbox that cannot run is an outage."""
    root = Path(tempfile.mkdtemp(prefix="reef-check-"))
    try:
        name = ""
        ours = {f"{CHECK_DIR}/reef_check.py": HELPER, **extra}
        try:
            for name, text in {**files, ANSWER_FILE: answer, **ours}.items():
                path = root / name
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8", errors="replace")
        except OSError as exc:  # a broken task (a file where a dir must be), not the answer
            return Checked(None, f"cannot write the task's file {name}: {exc.strerror}")
        limits = sandbox.Limits(wall_s=timeout, memory_mb=MEMORY_MB, file_mb=FILE_MB, pids=PIDS)
        try:
            env = {"PYTHONPATH": str(root.resolve() / CHECK_DIR)}
            result = sandbox.run(argv, root, allow=(), env=env, limits=limits, on_output=on_output)
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
