"""Run an answer's code in a process of its own, for code checks (docs/tasks.md).

A verdict can be trusted only while the answer's code never runs in the process that
gives it: code running there can exit early, patch ``json`` or write the result itself.
Reef's scorers put this module on the sandbox's path as ``reef_check``. ``load(code)``
starts a child Python that runs the code and answers calls over a pipe; values cross as
tagged JSON data (never pickles), so nothing the answer returns can compare equal by
trickery, and a child that exits, hangs or dies only fails the call. Before the first child
starts, ``seal()`` makes the judging process unreachable to it: not dumpable (no ptrace, no
/proc/PID/fd or mem), and no writable directory left on its import path.

Standalone and stdlib-only: the child is this same file run as ``python3 -I -c SOURCE``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import subprocess
import sys
import traceback
from typing import Any

__all__ = ["Answer", "AnswerError", "Raised", "Ran", "call", "load", "python_code", "run", "seal"]

MAX_MESSAGE = 32 * 1024 * 1024  # bytes one reply may take: a bigger one fails the call
FENCE = re.compile(r"```([^\n`]*)\n(.*?)```", re.DOTALL)
_PYTHON = ("python", "py", "python3")
_TAGS = ("t", "d", "s", "f", "b")  # tuple, dict, set, frozenset, bytes (lists are arrays)

try:  # read now: by the time a child is started the answer may have rewritten the file
    with open(__file__, encoding="utf-8") as _own:
        SOURCE = _own.read()
except (NameError, OSError):  # run as -c: this is the child
    SOURCE = ""


class AnswerError(Exception):
    """The answer's code failed: it did not load, raised, exited, hung or returned a
    value that cannot cross to the check."""


class Raised(AnswerError):
    """A call raised; ``name`` is the exception's type name (``"ValueError"``)."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.name = name


class Ran:
    """What ``run`` saw: the exit status and both streams (text)."""

    def __init__(self, returncode: int | None, stdout: str, stderr: str, timed_out: bool):
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr
        self.timed_out = timed_out

    def __repr__(self) -> str:
        return f"Ran(returncode={self.returncode!r}, timed_out={self.timed_out!r})"


def python_code(answer: str) -> str:
    """The last ```python block of ``answer``, or all of it when it has none."""
    blocks = [code for lang, code in FENCE.findall(answer) if lang.strip().lower() in _PYTHON]
    return blocks[-1] if blocks else answer


# -- values across the pipe ----------------------------------------------------------


def encode(value: Any) -> Any:
    """``value`` as JSON data: None, bools, ints, floats, strings and lists stay as they
    are; tuples, dicts, sets, frozensets and bytes become one-key objects."""
    kind = type(value)
    if value is None or kind in (bool, int, float, str):
        return value
    for base in (bool, int, float, str):  # a subclass (an IntEnum, numpy's float64) as its base
        if isinstance(value, base):
            return base(value)
    if kind is list:
        return [encode(v) for v in value]
    if kind is tuple:
        return {"t": [encode(v) for v in value]}
    if kind is dict:
        return {"d": [[encode(k), encode(v)] for k, v in value.items()]}
    if kind in (set, frozenset):
        return {"s" if kind is set else "f": [encode(v) for v in value]}
    if kind is bytes:
        return {"b": value.hex()}
    raise TypeError(f"a {kind.__name__} cannot cross between the check and the answer")


def decode(data: Any) -> Any:
    """The plain value ``encode`` made ``data`` from; anything else is a ValueError."""
    if data is None or type(data) in (bool, int, float, str):
        return data
    if type(data) is list:
        return [decode(v) for v in data]
    if type(data) is dict and len(data) == 1:
        ((tag, items),) = data.items()
        if tag == "b" and type(items) is str:
            return bytes.fromhex(items)
        if tag in _TAGS and type(items) is list:
            if tag == "t":
                return tuple(decode(v) for v in items)
            if tag == "d":
                return {decode(k): decode(v) for k, v in (_pair(p) for p in items)}
            made = [decode(v) for v in items]
            return set(made) if tag == "s" else frozenset(made)
    raise ValueError("not a value the answer's process can send")


def _pair(item: Any) -> tuple[Any, Any]:
    if type(item) is not list or len(item) != 2:
        raise ValueError("a dict item is not a [key, value] pair")
    return item[0], item[1]


# -- the check's side -----------------------------------------------------------------


_sealed: list[bool] = []


def seal() -> None:
    """Make this (the judging) process unreachable to the answer's processes; ``load`` and
    ``run`` call it before the answer's first process starts.

    Not dumpable: a child of the same user cannot ptrace it, open /proc/PID/fd or /proc/PID/mem.
    No directory this process can write is left on ``sys.path``, so no module the answer
    plants is imported later. Raises (the check fails) where that cannot be done."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE, 0
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")
    kept = []
    for entry in sys.path:  # (root may write anywhere; then only the interpreter's own dirs)
        path = os.path.abspath(entry or os.curdir)
        system = path.startswith(os.path.join(sys.base_prefix, "lib", ""))
        if os.path.exists(path) and (system or not os.access(path, os.W_OK)):
            kept.append(path)
    sys.path[:] = kept
    sys.path_importer_cache.clear()
    _sealed.append(True)


class Answer:
    """The answer's code, loaded in a child process. Use as a context manager."""

    def __init__(self, code: str, *, timeout: float | None = None) -> None:
        if not SOURCE:
            raise RuntimeError("reef_check cannot start a child from inside a child")
        if not _sealed:
            seal()
        self.timeout = timeout
        self._buffer = b""
        self._proc = subprocess.Popen(
            [sys.executable or "/usr/bin/python3", "-I", "-c", SOURCE, "--serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            close_fds=True,
            start_new_session=True,
        )
        try:
            self._ask({"code": code})
        except BaseException:
            self.close()
            raise

    def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """``name(*args, **kwargs)`` in the child; its value, decoded."""
        return self._ask({"call": name, "args": encode(list(args)), "kwargs": encode(kwargs)})

    def function(self, name: str) -> Any:
        """A callable that calls ``name`` in the child (for tests written as
        ``check(candidate)``)."""

        def candidate(*args: Any, **kwargs: Any) -> Any:
            return self.call(name, *args, **kwargs)

        candidate.__name__ = name
        return candidate

    def close(self) -> None:
        """Kill the child and everything it started."""
        proc = self._proc
        for stream in (proc.stdin, proc.stdout):
            with contextlib.suppress(OSError):
                if stream:
                    stream.close()
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, 9)
        proc.wait()

    def __enter__(self) -> Answer:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _ask(self, message: dict[str, Any]) -> Any:
        proc = self._proc
        assert proc.stdin is not None
        try:
            proc.stdin.write(json.dumps(message).encode() + b"\n")
            proc.stdin.flush()
        except OSError:
            raise AnswerError(self._ended()) from None
        reply = self._line()
        try:
            found = json.loads(reply)
        except (ValueError, RecursionError):
            raise AnswerError("the answer's process sent something that is not a reply") from None
        if type(found) is not dict:
            raise AnswerError("the answer's process sent something that is not a reply")
        if "value" in found:
            try:
                return decode(found["value"])
            except (ValueError, TypeError, RecursionError) as exc:
                raise AnswerError(f"the answer's process sent a bad value: {exc}") from None
        if "raised" in found:
            raise Raised(str(found.get("name", "Exception")), str(found["raised"]))
        raise AnswerError(str(found.get("error", "the answer's process sent no value")))

    def _line(self) -> bytes:
        """The child's next reply line; a dead, silent or flooding child is an AnswerError."""
        proc = self._proc
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        while b"\n" not in self._buffer:
            if self.timeout is not None and not select.select([fd], [], [], self.timeout)[0]:
                raise AnswerError(f"the answer gave no reply within {self.timeout:g}s")
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise AnswerError(self._ended())
            self._buffer += chunk
            if len(self._buffer) > MAX_MESSAGE:
                raise AnswerError(f"the answer's reply is over {MAX_MESSAGE} bytes")
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line

    def _ended(self) -> str:
        try:
            code = self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return "the answer's process closed its pipe"
        return f"the answer's process ended (exit {code}) before it replied"


def load(code: str, *, timeout: float | None = None) -> Answer:
    """Start a child that runs ``code``; raises AnswerError when the code fails to load.
    ``timeout``: seconds each reply may take (default: the check's own time limit)."""
    return Answer(code, timeout=timeout)


def call(code: str, name: str, *args: Any, **kwargs: Any) -> Any:
    """Load ``code`` in a child and return ``name(*args, **kwargs)`` from there."""
    with Answer(code) as answer:
        return answer.call(name, *args, **kwargs)


def run(code: str, stdin: str = "", *, timeout: float | None = None) -> Ran:
    """Run ``code`` as a script (``__name__ == "__main__"``) in a child Python."""
    if not _sealed:
        seal()
    proc = subprocess.Popen(
        [sys.executable or "/usr/bin/python3", "-I", "-c", code],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        close_fds=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(stdin.encode(), timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        timed_out = True
        out, err = b"", b""
    finally:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, 9)
        proc.wait()
    text = (out.decode(errors="replace"), err.decode(errors="replace"))
    return Ran(None if timed_out else proc.returncode, *text, timed_out)


# -- the answer's side (the child) ----------------------------------------------------


def _serve() -> None:
    """Run the code sent first, then answer calls, one JSON line each way. The answer's own
    prints go to stderr; it can write to the pipe itself, but only as its own reply."""
    requests = os.fdopen(os.dup(0), "rb")
    replies = os.fdopen(os.dup(1), "wb")
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(2, 1)

    def reply(found: dict[str, Any]) -> None:
        try:
            text = json.dumps(found)
        except (TypeError, ValueError, RecursionError) as exc:
            text = json.dumps({"error": f"the answer's value cannot be sent: {exc}"})
        replies.write(text.encode() + b"\n")
        replies.flush()

    space: dict[str, Any] = {"__name__": "__answer__", "__builtins__": __builtins__}
    for raw in requests:
        message = json.loads(raw)
        if "code" in message:
            try:
                exec(compile(message["code"], "solution.py", "exec"), space)
            except SystemExit as exc:
                reply({"error": f"the answer's code exited ({exc.code!r}) while loading"})
                continue
            except BaseException:
                reply({"error": "the answer's code failed to load: " + _last(sys.exc_info())})
                continue
            reply({"value": None})
            continue
        found = space.get(message["call"])
        if not callable(found):
            reply({"error": f"the answer defines no function {message['call']}()"})
            continue
        try:
            value = found(*decode(message["args"]), **decode(message["kwargs"]))
        except SystemExit as exc:
            reply({"error": f"the answer exited ({exc.code!r}) during the call"})
            continue
        except BaseException as exc:
            reply({"raised": _last(sys.exc_info()), "name": type(exc).__name__})
            continue
        try:
            reply({"value": encode(value)})
        except (TypeError, RecursionError) as exc:
            reply({"error": f"the answer returned a value that cannot be checked: {exc}"})


def _last(info: Any) -> str:
    """The exception's last line, with the answer's line that raised it when there is one."""
    kind, exc, tb = info
    where = [f for f in traceback.extract_tb(tb) if f.filename == "solution.py"]
    line = traceback.format_exception_only(kind, exc)[-1].strip()
    return f"solution.py line {where[-1].lineno}: {line}" if where else line


if __name__ == "__main__" and sys.argv[1:] == ["--serve"]:
    _serve()
