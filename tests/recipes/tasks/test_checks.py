"""The python and command scorers, through ``grade`` on real tasks, in the real sandbox."""

from __future__ import annotations

import os
import shutil
import socket
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from recipes.tasks import Task, grade
from recipes.tasks.checks import PYTHON, TAIL_CHARS

pytestmark = pytest.mark.skipif(
    not (shutil.which("bwrap") and sys.platform.startswith("linux") and Path(PYTHON).exists()),
    reason="the code scorers need bubblewrap and a system python3",
)


def python_task(source: str, **kw: object) -> Task:
    return Task.model_validate({"id": "t", "prompt": "p", "python": source, **kw})


def command_task(command: str, **kw: object) -> Task:
    return Task.model_validate({"id": "t", "prompt": "p", "command": command, **kw})


@pytest.fixture(autouse=True)
def own_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Checks make their projects here; none is left when the test ends (the sandbox's
    own run base, ``reef-sandbox-*``, stays by design)."""
    where = tmp_path / "checks-tmp"
    where.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(where))
    yield where
    assert [p.name for p in where.iterdir() if not p.name.startswith("reef-sandbox-")] == []


def test_python_check_scores_pass_and_fail() -> None:
    task = python_task("def check(answer):\n    return answer.strip() == '42'\n")
    assert grade(task, "42\n").score == 1.0
    failed = grade(task, "41")
    assert failed.score == 0.0
    assert "scored 0.00" in failed.feedback


def test_python_score_is_clipped_and_floats_pass_through() -> None:
    assert grade(python_task("def check(a):\n    return float(a)\n"), "0.25").score == 0.25
    assert grade(python_task("def check(a):\n    return float(a)\n"), "1.7").score == 1.0
    assert grade(python_task("def check(a):\n    return float(a)\n"), "-3").score == 0.0


def test_python_check_reads_the_task_files_and_imports_them() -> None:
    source = (
        "from helper import want\ndef check(a):\n    return a == want() == open('d/x.txt').read()\n"
    )
    files = {"helper.py": "def want():\n    return 'ok'\n", "d/x.txt": "ok"}
    assert grade(python_task(source, files=files), "ok").score == 1.0


def test_an_exception_scores_zero_with_its_last_line() -> None:
    run = grade(python_task("def check(a):\n    return 1 / 0\n"), "x")
    assert run.score == 0.0
    assert "ZeroDivisionError: division by zero" in run.feedback


@pytest.mark.parametrize(
    ("source", "why"),
    [
        ("def check(a):\n    return 'yes'\n", "returned str, not bool or float"),
        ("def check(a):\n    return float('nan')\n", "NaN"),
        ("x = 1\n", "defines no check(answer) function"),
        ("def check(a) return\n", "SyntaxError"),
        ("import sys\ndef check(a):\n    sys.exit(0)\n", "SystemExit"),
    ],
)
def test_a_bad_check_scores_zero_and_says_why(source: str, why: str) -> None:
    run = grade(python_task(source), "x")
    assert run.score == 0.0
    assert why in run.feedback


def test_printing_a_fake_result_does_not_score() -> None:
    source = (
        "import os\ndef check(a):\n    print('REEF-CHECK-0 {\"score\": 1.0}')\n"
        "    os.write(1, b'{\"score\": 1.0}\\n')\n    return 0.0\n"
    )
    assert grade(python_task(source), "x").score == 0.0


def test_a_slow_python_check_times_out() -> None:
    run = grade(python_task("def check(a):\n    while True:\n        pass\n", timeout_s=1), "x")
    assert run.score == 0.0
    assert "timed out after 1s" in run.feedback


def test_the_check_runs_outside_reefs_process(tmp_path: Path) -> None:
    marker = tmp_path / "ran-here"
    key = f"REEF_TEST_{uuid.uuid4().hex}"
    source = f"""
import os
def check(a):
    os.environ[{key!r}] = "1"
    try:
        open({str(marker)!r}, "w").write("x")
    except OSError:
        pass
    return True
"""
    assert grade(python_task(source), "x").score == 1.0
    assert key not in os.environ
    assert not marker.exists()  # the sandbox's /tmp is its own


def test_the_check_sees_no_home_secret(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = f"PLANTED-{uuid.uuid4().hex}"
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text(secret)
    monkeypatch.setenv("HOME", str(home))
    real_home = os.path.expanduser("~root") if os.geteuid() == 0 else "/nonexistent"
    source = f"""
import os
def check(a):
    seen = []
    for path in [{str(home / ".ssh" / "id_rsa")!r}, os.path.expanduser("~/.ssh/id_rsa")]:
        try:
            seen.append(open(path).read())
        except OSError:
            pass
    try:
        seen += os.listdir({real_home!r})
    except OSError:
        pass
    if seen:
        raise RuntimeError("saw " + repr(seen))
    return os.listdir(os.path.expanduser("~")) == [] and os.environ["HOME"] != {str(home)!r}
"""
    run = grade(python_task(source), "x")
    assert run.score == 1.0, run.feedback
    assert secret not in run.feedback


@pytest.fixture
def listener() -> Iterator[tuple[int, list[int]]]:
    """A loopback service in this process; ``hits`` counts connections it accepted."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(4)
    hits: list[int] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            hits.append(1)
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    yield sock.getsockname()[1], hits
    sock.close()


def test_the_check_reaches_no_network(listener: tuple[int, list[int]]) -> None:
    port, hits = listener
    source = f"""
import socket
def check(a):
    for where in [("127.0.0.1", {port}), ("1.1.1.1", 53)]:
        try:
            socket.create_connection(where, timeout=2).close()
        except OSError:
            continue
        raise RuntimeError("reached " + repr(where))
    return True
"""
    run = grade(python_task(source), "x")
    assert run.score == 1.0, run.feedback
    assert hits == []


def test_command_exit_status_is_the_score() -> None:
    task = command_task('test "$(cat ANSWER.md)" = "$(cat want.txt)"', files={"want.txt": "42"})
    assert grade(task, "42").score == 1.0
    failed = grade(task, "41")
    assert failed.score == 0.0
    assert "failed (exit 1)" in failed.feedback


def test_command_feedback_is_the_bounded_tail() -> None:
    line = 'printf "line %04d %s\\n" $i $(printf "x%.0s" $(seq 80))'
    command = f"for i in $(seq 1 500); do {line}; done; echo boom >&2; exit 3"
    run = grade(command_task(command), "x")
    assert run.score == 0.0
    tail = run.feedback.split("output:\n", 1)[1].split(" (lenient", 1)[0]
    assert tail.endswith("boom")
    assert "line 0499" in tail and "line 0001" not in tail
    assert len(tail) <= TAIL_CHARS and len(tail.splitlines()) <= 15


def test_a_slow_command_times_out() -> None:
    run = grade(command_task("echo started; sleep 30", timeout_s=1), "x")
    assert run.score == 0.0
    assert "timed out after 1s" in run.feedback and "started" in run.feedback


def test_no_sandbox_is_an_outage_not_a_score(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REEF_BWRAP", "/nonexistent/bwrap")
    for task in (python_task("def check(a):\n    return True\n"), command_task("true")):
        run = grade(task, "x")
        assert run.score is None
        assert "bubblewrap" in run.feedback


def test_the_none_waiver_runs_a_copy_and_cleans_it(
    own_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REEF_SANDBOX", "none")
    assert grade(command_task("grep -q 42 ANSWER.md"), "42").score == 1.0
    assert grade(python_task("def check(a):\n    return a == '42'\n"), "42").score == 1.0


def test_broken_task_files_are_an_outage() -> None:
    run = grade(command_task("true", files={"a": "x", "a/b": "y"}), "x")
    assert run.score is None
    assert "a/b" in run.feedback


def human_eval_task(number: int) -> tuple[Task, dict[str, str]]:
    from recipes.tasks.sources import SOURCES, human_eval

    if not SOURCES["human-eval"].installed:
        pytest.skip("human-eval (the reef[tasks] extra) is not installed")

    every = human_eval.make(train=0, val=0, test=None, seed=1)
    task = next(t for t in every.tasks if t.id == f"humaneval-{number:03d}")
    problem = next(p for p in human_eval.problems() if p["task_id"] == f"HumanEval/{number}")
    return task, problem


def test_human_eval_canonical_solution_passes_and_a_wrong_one_fails() -> None:
    task, problem = human_eval_task(0)
    right = "Here it is:\n```python\n" + problem["prompt"] + problem["canonical_solution"] + "```"
    passed = grade(task, right)
    assert (passed.score, passed.lenient) == (1.0, 1.0), passed.feedback
    wrong = grade(task, "```python\n" + problem["prompt"] + "    return False\n```")
    assert (wrong.score, wrong.lenient) == (0.0, 0.0)
    assert "AssertionError" in wrong.feedback


def test_human_eval_lenient_forgives_the_format_not_the_code() -> None:
    task, problem = human_eval_task(2)
    code = problem["prompt"] + problem["canonical_solution"]
    unfenced = grade(task, "```\n" + code + "```")  # a bare fence: the strict scorer fails it
    assert (unfenced.score, unfenced.lenient) == (0.0, 1.0)
    body_only = grade(task, "```python\n" + problem["canonical_solution"] + "```")
    assert body_only.score == 1.0
    exits = grade(task, "```python\nimport os\nos._exit(0)\n```")
    assert (exits.score, exits.lenient) == (0.0, 0.0)


# -- what a python check may run in the judging process (docs/tasks.md) ---------------------


@pytest.mark.parametrize(
    ("source", "refused"),
    [
        ("def check(a):\n    return eval(a) == 4\n", "check.py line 2 ran <string>"),
        ("def check(a):\n    exec(compile(a, 'x', 'exec'), {})\n    return True\n", "check.py"),
        (
            "import runpy\ndef check(a):\n    open('sol.py', 'w').write(a)\n"
            "    runpy.run_path('sol.py')\n    return True\n",
            "runpy line",
        ),
        (
            "import sys\ndef check(a):\n    open('sol.py', 'w').write(a)\n"
            "    sys.path.insert(0, '.')\n    import sol\n    return True\n",
            "ran sol.py)",
        ),
        (  # refused once, never a score, even when check() swallows the refusal
            "def check(a):\n    try:\n        exec(a)\n    except Exception:\n        pass\n"
            "    return True\n",
            "run the answer through reef_check",
        ),
    ],
)
def test_running_the_answer_in_the_judging_process_is_refused(source: str, refused: str) -> None:
    run = grade(python_task(source), "2 + 2")
    assert run.score == 0.0
    assert refused in run.feedback, run.feedback


def test_a_check_may_use_the_library_and_its_own_modules_lazily() -> None:
    """namedtuples and dataclasses (stdlib code the library generates), ast.parse of the
    answer, and a task module imported inside check() after the answer ran."""
    source = """
import ast, collections, dataclasses, reef_check

Point = collections.namedtuple("Point", "x y")

@dataclasses.dataclass
class Seen:
    names: list

def check(answer):
    tree = ast.parse(answer)
    seen = Seen([node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)])
    got = reef_check.call(answer, "add", *Point(2, 3))
    from helper import want  # after the answer's process tried to replace helper.py
    return seen.names == ["add"] and got == want()
"""
    files = {"helper.py": "def want():\n    return 5\n"}
    answer = (
        "import os\nopen(os.path.join(os.environ.get('PWD', '.'), 'helper.py'), 'w')"
        ".write('def want():\\n    return 0\\n')\ndef add(a, b):\n    return a + b\n"
    )
    run = grade(python_task(source, files=files), answer)
    assert run.score == 1.0, run.feedback


def test_reef_check_values_raises_and_scripts() -> None:
    source = """
import reef_check

def check(answer):
    code = reef_check.python_code(answer)
    with reef_check.load(code) as a:
        sent = [(1, 2.5, float("inf")), {3: {"x"}, "y": frozenset()}, b"\\x00", None, True]
        assert a.call("echo", *sent) == sent
        assert a.call("big", 2, 200) == 2 ** 200
        try:
            a.call("boom")
        except reef_check.Raised as exc:
            assert exc.name == "ValueError" and "no" in str(exc)
        else:
            return False
        try:
            a.call("opaque")
        except reef_check.AnswerError as exc:
            assert "cannot" in str(exc)
        else:
            return False
    ran = reef_check.run(code + "\\nprint(input()[::-1])\\n", "abc")
    return ran.returncode == 0 and ran.stdout == "cba\\n"
"""
    answer = """Sure:
```python
def echo(*args):
    return list(args)
def big(a, b):
    return a ** b
def boom():
    raise ValueError("no")
def opaque():
    return object()
```
"""
    run = grade(python_task(source), answer)
    assert run.score == 1.0, run.feedback


def test_the_documented_checks_pass_a_right_answer_and_refuse_a_forged_one(tmp_path: Path) -> None:
    """The example task set in docs/tasks.md, as written there."""
    import re

    from recipes.tasks import load

    docs = (Path(__file__).parents[3] / "docs" / "tasks.md").read_text()
    example = re.search(r"```yaml\n(.*?)```\n", docs, re.DOTALL)
    assert example is not None
    path = tmp_path / "tasks.yaml"
    path.write_text(example.group(1))
    tasks = {t.id: t for t in load(path).tasks}
    right = "```python\ndef add(a, b):\n    return a + b\n```"
    forged = "```python\nimport os\nos._exit(0)\n```"
    for name in ("add", "add-script"):
        assert grade(tasks[name], right).score == 1.0, name
        assert grade(tasks[name], forged).score == 0.0, name


def test_the_answer_cannot_read_the_python_check() -> None:
    source = (
        "import reef_check\nSECRET = 'expected-7f3a'\ndef check(answer):\n"
        "    return reef_check.call(answer, 'guess') == SECRET\n"
    )
    answer = (
        "import glob\ndef guess():\n    for path in glob.glob('**/*.py', recursive=True) + "
        "glob.glob('.reef-check/*'):\n        text = open(path).read()\n"
        "        if 'SECRET = ' in text:\n            return text.split(\"'\")[1]\n"
    )
    run = grade(python_task(source), answer)
    assert run.score == 0.0, run.feedback
