"""One loader for Reef's YAML settings files: `reef serve -c serve.yaml` (server/serve_config.py)
and `reefd start -c reefd.yaml` (reefd/daemon_config.py); ``parse`` is the YAML step alone, which
task sets and personas use too.

Every way such a file can be wrong is one line, raised as the caller's error class (each
config keeps its own: ``ServeError``, ``ConfigError``) with the caller's fix, and nothing is
written:

- missing or unreadable (a folder, no permission): ``cannot read PATH: <reason>``;
- not UTF-8: ``PATH is not UTF-8 text (byte N is not)``;
- a YAML syntax error: ``PATH is not valid YAML: <problem> at line N``;
- a value YAML's own types refuse (``2020-02-30``, ``!!int abc``):
  ``PATH is not valid YAML: <the value's problem>``;
- nesting deeper than Python can follow: ``PATH is nested too deeply to be settings``;
- anything but a mapping at the top (a list, a string, a number; an empty file is ``{}``):
  ``PATH must hold a mapping of settings (key: value lines), not a list``;
- a value the config's model refuses (``validate``): ``<what> 'KEY': <problem>``, naming the
  first bad key (dotted: ``reef.batch_size``), and how many more there are.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from reef_cli.core.errors import ReefError

M = TypeVar("M", bound=BaseModel)

_KINDS = {list: "a list", str: "a string", int: "a number", float: "a number", bool: "a boolean"}


def load_mapping(path: Path, *, error: type[ReefError], fix: str) -> dict[str, Any]:
    """Read ``path`` as YAML and return its top-level mapping (keys as strings); an empty
    file is ``{}``. Anything wrong is one ``error(message, fix)``."""
    text = read_text(path, str(path), error=error, fix=fix)
    data = parse(text, path, error=error, fix=fix)
    if data is None:
        return {}
    if not isinstance(data, dict):
        kind = _KINDS.get(type(data), type(data).__name__)
        raise error(f"{path} must hold a mapping of settings (key: value lines), not {kind}", fix)
    return {str(key): value for key, value in data.items()}


def read_text(path: Path, name: str, *, error: type[ReefError], fix: str) -> str:
    """``path``'s text (``name``: how messages call it, e.g. ``task set PATH``); unreadable
    or not UTF-8 is one ``error(message, fix)``."""
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise error(f"cannot read {name}: {exc.strerror or exc}", fix) from None
    except UnicodeDecodeError as exc:
        raise error(f"{name} is not UTF-8 text (byte {exc.start} is not)", fix) from None


def parse(text: str, path: Path | str, *, error: type[ReefError], fix: str) -> Any:
    """``text`` (the file ``path``) as YAML data: every way YAML can refuse it is one
    ``error(message, fix)``; the settings files above, task sets and personas alike."""
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise error(f"{path} is not valid YAML: {first_line(exc, text)}", fix) from None
    except RecursionError:
        raise error(f"{path} is nested too deeply to read", fix) from None
    except (ValueError, KeyError, TypeError, OverflowError) as exc:
        # safe_load's constructors raise these for a well-formed but impossible value
        # (a date 2020-02-30, `!!int abc`, `!!bool maybe`): no mark says where.
        detail = " ".join(str(exc).split())[:200] or type(exc).__name__
        raise error(f"{path} is not valid YAML: a value it cannot read ({detail})", fix) from None
    return data


def first_line(exc: Exception, text: str = "") -> str:
    """A YAML error's problem and where, on one line (its text spans several)."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None)
    context = getattr(exc, "context", None)
    if problem and context and str(problem).startswith("but "):
        problem = f"{context}, {problem}"  # "expected a single document…, but found another"
    reason = getattr(exc, "reason", None)  # a ReaderError: a character YAML does not allow
    position = getattr(exc, "position", None)
    if problem is None and reason is not None and isinstance(position, int):
        character = getattr(exc, "character", None)
        what = f"character #x{character:04x}" if isinstance(character, int) else "a character"
        line = text[:position].count("\n") + 1
        return f"unacceptable {what} ({reason}) at line {line}"
    problem = " ".join(str(problem or type(exc).__name__).split())[:300]
    return f"{problem} at line {mark.line + 1}" if mark is not None else problem


def validation_line(exc: ValidationError) -> tuple[str | None, str]:
    """``(dotted key or None, problem)`` of a ValidationError's first error; the problem
    says how many more there are."""
    errors = exc.errors()
    err = errors[0]
    key = ".".join(str(p) for p in err["loc"]) or None
    msg = " ".join(str(err["msg"]).removeprefix("Value error, ").split())
    if len(errors) > 1:
        more = len(errors) - 1
        msg += f" (and {more} more problem{'s' if more > 1 else ''})"
    return key, msg


def validate(
    model: type[M], data: dict[str, Any], *, error: type[ReefError], what: str, fix: str
) -> M:
    """``model`` from ``data``, or one ``error`` line naming the first bad key:
    ``<what> 'KEY': <problem>`` (``<what>: <problem>`` when it is about no one key)."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        key, msg = validation_line(exc)
        where = f"{what} {key!r}" if key else what
        raise error(f"{where}: {msg}", fix) from exc
    except RecursionError:
        raise error(f"{what}: nested too deeply to be settings", fix) from None
