"""HumanEval check, run by Reef's ``command`` scorer in the sandbox (``python3 check.py``).

Exit 0 when the code in ANSWER.md passes this problem's tests (``problem.json``).
Strict: the last ```python block, or the whole answer when it has none. ``--lenient``:
any fenced block (the last first), then the answer with its fence lines dropped.
The code is the whole function, or only its body (then the problem's prompt goes first).

The answer's code never runs in this process: ``reef_check`` (which the scorer provides)
runs it in a child, and the problem's tests run here, calling the candidate across a pipe.
Whatever the answer does - exit, exec, patch modules, kill itself - the tests here fail.
"""

import json
import linecache
import os
import re
import sys
import traceback

try:
    import reef_check  # in the sandbox: the scorer puts it on PYTHONPATH
except ImportError:  # imported as a module of Reef's (its tests walk every module)
    from recipes.tasks import reef_check

FENCE = re.compile(r"```([^\n`]*)\n(.*?)```", re.DOTALL)
PYTHON = ("python", "py", "python3")


def candidates(answer, lenient):
    blocks = FENCE.findall(answer)
    if not lenient:
        python = [code for lang, code in blocks if lang.strip().lower() in PYTHON]
        return [python[-1] if python else answer]
    bare = "\n".join(ln for ln in answer.splitlines() if not ln.lstrip().startswith("```"))
    return [code for _, code in reversed(blocks)] + [bare]


def solution(code, problem):
    """The answer's program: its code, after the problem's prompt if it is a body only."""
    entry = problem["entry_point"]
    whole = re.search(r"def\s+" + re.escape(entry) + r"\s*\(", code)
    return code if whole else problem["prompt"] + code


def run(code, problem):
    """None when the tests pass, else why not (the end of the traceback)."""
    entry = problem["entry_point"]
    # The prompt's helpers (e.g. poly, encode_cyclic) and the tests are the problem's own.
    tests = problem["prompt"] + "\n\n" + problem["test"] + "\n"
    linecache.cache["tests.py"] = (len(tests), None, tests.splitlines(True), "tests.py")
    try:
        with reef_check.load(solution(code, problem)) as answer:
            candidate = answer.function(entry)
            space: dict = {"__name__": "__humaneval__"}
            exec(compile(tests, "tests.py", "exec"), space)
            space[entry] = candidate  # tests may call the entry point by name
            space["check"](candidate)
    except reef_check.AnswerError as exc:
        return str(exc)
    except BaseException:
        return traceback.format_exc(limit=-2).rstrip()
    return None


def main():
    with open("problem.json", encoding="utf-8") as f:
        problem = json.load(f)
    with open("ANSWER.md", encoding="utf-8") as f:
        answer = f.read()
    os.unlink("problem.json")  # the answer's process has no tests to read answers from
    reef_check.seal()  # before any of the answer's code runs
    failures = []
    for code in candidates(answer, "--lenient" in sys.argv[1:]):
        why = run(code, problem)
        if why is None:
            print(problem["task_id"] + ": passed")
            return 0
        failures.append(why)
    print(problem["task_id"] + ": failed")
    print(failures[-1] if failures else "no code found in the answer")
    return 1


if __name__ == "__main__":
    sys.exit(main())
