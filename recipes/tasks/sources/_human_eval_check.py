"""HumanEval check, run by Reef's ``command`` scorer in the sandbox (``python3 check.py``).

Exit 0 when the code in ANSWER.md passes this problem's tests (``problem.json``).
Strict: the last ```python block, or the whole answer when it has none. ``--lenient``:
any fenced block (the last first), then the answer with its fence lines dropped.
The code is the whole function, or only its body (then the problem's prompt goes first).
"""

import json
import linecache
import os
import re
import sys
import traceback

FENCE = re.compile(r"```([^\n`]*)\n(.*?)```", re.DOTALL)
PYTHON = ("python", "py", "python3")


def candidates(answer, lenient):
    blocks = FENCE.findall(answer)
    if not lenient:
        python = [code for lang, code in blocks if lang.strip().lower() in PYTHON]
        return [python[-1] if python else answer]
    bare = "\n".join(ln for ln in answer.splitlines() if not ln.lstrip().startswith("```"))
    return [code for _, code in reversed(blocks)] + [bare]


def program(code, problem):
    entry = problem["entry_point"]
    whole = re.search(r"def\s+" + re.escape(entry) + r"\s*\(", code)
    body = code if whole else problem["prompt"] + code
    return body + "\n\n" + problem["test"] + "\n\ncheck(" + entry + ")\n"


def _exit(code=0):
    raise SystemExit(code)


def run(source):
    """None when the tests pass, else why not (the end of the traceback)."""
    space = {"__name__": "__humaneval__"}
    # Tracebacks then show the failing line of the solution or its tests.
    linecache.cache["solution.py"] = (len(source), None, source.splitlines(True), "solution.py")
    try:
        exec(compile(source, "solution.py", "exec"), space)
    except SystemExit as exc:
        return "the code exited (" + repr(exc.code) + ") before its tests finished"
    except BaseException:
        return traceback.format_exc(limit=-2).rstrip()
    return None


def main():
    with open("problem.json", encoding="utf-8") as f:
        problem = json.load(f)
    with open("ANSWER.md", encoding="utf-8") as f:
        answer = f.read()
    os._exit = _exit  # a solution may not end the check early and pass
    failures = []
    for code in candidates(answer, "--lenient" in sys.argv[1:]):
        why = run(program(code, problem))
        if why is None:
            print(problem["task_id"] + ": passed")
            return 0
        failures.append(why)
    print(problem["task_id"] + ": failed")
    print(failures[-1] if failures else "no code found in the answer")
    return 1


if __name__ == "__main__":
    sys.exit(main())
