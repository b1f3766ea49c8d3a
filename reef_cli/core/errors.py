"""One exception tree for everything Reef raises on purpose.

Every error carries a one-line message and, where there is one, the fix. Each class
says how it is shown, so no caller keeps its own table:

- ``exit_code``: what the CLI exits with (``reef: error: <message> (fix: <hint>)``);
- ``http_status``: what `reef serve` answers, as ``{"error": {"message", "hint", "type"}}``;
- ``kind``: how an evolution job ends when the error stops it
  (``rejected`` — the candidate was refused; ``stopped`` — a budget ran out;
  ``failed`` — the work could not be done; ``invalid`` — the evidence could not be
  trusted, e.g. too many task runs hit a model outage).

Anything that is not a ``ReefError`` is a bug. docs/errors.md lists every class;
a test checks the list against this tree.

::

    ReefError                       1  500  failed
    ├── ConfigError                 1  500  failed
    ├── StateError                  1  500  failed
    ├── ScenarioNotFound            1  404  failed
    ├── ScenarioExists              1  409  failed
    ├── InvalidName                 1  400  rejected
    ├── InvalidText                 2  400  rejected
    ├── TreeError                   3  422  rejected
    ├── TreeNotFound                1  404  failed
    ├── ReleaseNotFound             1  404  failed
    ├── ChainCorrupt                1  500  failed
    ├── ChainConflict               4  409  failed
    │   └── ChainDiverged           4  409  failed
    ├── RemoteError                 3  502  failed
    ├── RemoteNotSet                1  404  failed
    ├── GateBlocked                 3  422  rejected
    ├── SandboxUnavailable          5  503  failed
    ├── SandboxError                1  500  failed
    ├── ServeError                  1  503  failed
    ├── AuthError                   1  401  failed
    ├── BudgetExceeded              6  422  stopped
    ├── BudgetInvalid               2  400  rejected
    ├── ModelError                  1  502  failed
    │   └── ModelCorrupt            1  500  failed
    ├── AskRefused                  3  422  rejected
    ├── TaskSetError                2  400  rejected
    ├── PersonaInvalid              2  400  rejected
    ├── OptionInvalid               2  400  rejected
    ├── EvaluationInvalid           3  422  invalid
    ├── ExtraMissing                2  501  failed
    └── EngineError                 1  502  failed
        └── EngineInconsistent      1  409  failed

Subclasses elsewhere (reports, records, jobs, adapters, the server) inherit from these.
"""

from __future__ import annotations

from typing import Any


class ReefError(Exception):
    """Base class: a failure the user can act on."""

    exit_code = 1
    http_status = 500
    kind = "failed"

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def one_line(self) -> str:
        text = self.message if not self.hint else f"{self.message} (fix: {self.hint})"
        return " ".join(text.split())

    def details(self) -> dict[str, Any]:
        """Extra fields for the JSON error body (e.g. the offending ``field``)."""
        return {}


class ConfigError(ReefError):
    """config.toml or an environment variable holds something Reef cannot use."""


class StateError(ReefError):
    """The state directory is missing, unwritable, or holds something unexpected."""


class ScenarioNotFound(ReefError):
    """No scenario by that name."""

    http_status = 404


class ScenarioExists(ReefError):
    """A scenario by that name already exists."""

    http_status = 409


class InvalidName(ReefError):
    """A scenario, rule, skill or command name is not kebab-case."""

    http_status = 400
    kind = "rejected"


class InvalidText(ReefError):
    """A reason or description that is too long or holds a control character (an escape
    sequence, a bidi override); ``field`` names it."""

    exit_code = 2
    http_status = 400
    kind = "rejected"

    def __init__(self, message: str, hint: str | None = None, field: str = "text") -> None:
        super().__init__(message, hint)
        self.field = field

    def details(self) -> dict[str, Any]:
        return {"field": self.field}


class TreeError(ReefError):
    """A harness tree failed validation; ``problems`` lists every problem found."""

    exit_code = 3
    http_status = 422
    kind = "rejected"

    def __init__(self, message: str, hint: str | None = None, problems: list[str] | None = None):
        super().__init__(message, hint)
        self.problems = problems or [message]


class TreeNotFound(ReefError):
    """The harness tree folder given does not exist (or is a file): a wrong path, not
    refused content, so it exits like the other not-found errors."""

    http_status = 404


class ReleaseNotFound(ReefError):
    """A release spec (``3``, ``r3``, ``latest`` …) names no release."""

    http_status = 404


class ChainCorrupt(ReefError):
    """The release chain's repository is not a readable git repository."""


class ScenarioInUse(ReefError):
    """A scenario an agent is installed from, or a job is working on, cannot be archived
    (an installed agent: unless forced)."""

    http_status = 409


class ChainConflict(ReefError):
    """Another publisher advanced the chain first and retries ran out."""

    exit_code = 4
    http_status = 409


class GateBlocked(ReefError):
    """The gate refused a candidate (a secret, an invalid tree, a budget, a loss)."""

    exit_code = 3
    http_status = 422
    kind = "rejected"

    def __init__(self, message: str, hint: str | None = None, findings: list[str] | None = None):
        super().__init__(message, hint)
        self.findings = findings or []


class SandboxUnavailable(ReefError):
    """Isolation was required but this machine cannot provide it (and it was not waived)."""

    exit_code = 5
    http_status = 503


class SandboxError(ReefError):
    """A sandboxed run could not be set up (bad work dir, bad policy, pasta failed …)."""


class ServeError(ReefError):
    """`reef serve` cannot start or reach what it needs."""

    http_status = 503


class AuthError(ReefError):
    """A missing or wrong token, or a token not allowed for this scenario."""

    http_status = 401


class BudgetExceeded(ReefError):
    """A job used up its model-call, token or wall-time budget; nothing was published."""

    exit_code = 6
    http_status = 422
    kind = "stopped"


class BudgetInvalid(ReefError):
    """A budget limit that cannot be used (zero, negative, not a number, or too few calls
    for the evaluation the job must run)."""

    exit_code = 2
    http_status = 400
    kind = "rejected"


class ModelError(ReefError):
    """The model could not be reached, timed out, or kept answering with unusable output."""

    http_status = 502


class ModelCorrupt(ModelError):
    """An embedded model file does not match its pinned size or sha256; it is not used."""

    http_status = 500


class AskRefused(ReefError):
    """An ask that cannot become a change: empty, too long, or against policy."""

    exit_code = 3
    http_status = 422
    kind = "rejected"


class TaskSetError(ReefError):
    """A task set file that cannot be used: unreadable, not YAML/JSONL, or invalid."""

    exit_code = 2
    http_status = 400
    kind = "rejected"


class PersonaInvalid(ReefError):
    """A persona file (a simulated user, docs/personas.md) that cannot be used."""

    exit_code = 2
    http_status = 400
    kind = "rejected"

    def __init__(self, message: str, hint: str | None = None, field: str | None = None) -> None:
        super().__init__(message, hint)
        self.field = field

    def details(self) -> dict[str, Any]:
        return {"field": self.field} if self.field else {}


class EvaluationInvalid(ReefError):
    """Scores that cannot be trusted (too many outages, a missing split); never a win."""

    exit_code = 3
    http_status = 422
    kind = "invalid"


class ExtraMissing(ReefError):
    """An optional part of Reef (an extra such as ``reef[tasks]``) is not installed."""

    exit_code = 2
    http_status = 501


class EngineError(ReefError):
    """reefd's inference engine (SGLang or the built-in torch engine) failed or refused."""

    http_status = 502


class EngineInconsistent(EngineError):
    """A weight update failed midway: the engine's weights are neither old nor new until
    the served weight release is reloaded from disk."""

    http_status = 409


class OptionInvalid(ReefError):
    """A recipe, or a recipe option, that does not exist, or a value it cannot use."""

    exit_code = 2
    http_status = 400
    kind = "rejected"


class ChainDiverged(ChainConflict):
    """The local chain and its remote's each hold releases the other lacks; a pull never
    rewrites local history, so a person chooses which to keep."""


class RemoteError(ReefError):
    """A scenario's chain remote cannot be reached, or refused a transfer for a reason other
    than another publisher's race (no such repository, no access, git-lfs missing)."""

    exit_code = 3
    http_status = 502


class RemoteNotSet(ReefError):
    """The scenario has no chain remote: push and pull need one."""

    http_status = 404
