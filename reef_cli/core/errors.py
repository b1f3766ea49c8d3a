"""One exception tree for everything Reef raises on purpose.

Every error carries a one-line message and, where there is one, the fix. The CLI prints
``reef: error: <message> (fix: <hint>)`` and exits with ``exit_code``; the server maps the
same errors to JSON. Anything that is not a ``ReefError`` is a bug.
"""

from __future__ import annotations


class ReefError(Exception):
    """Base class: a failure the user can act on."""

    exit_code = 1

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def one_line(self) -> str:
        text = self.message if not self.hint else f"{self.message} (fix: {self.hint})"
        return " ".join(text.split())


class ConfigError(ReefError):
    """config.toml or an environment variable holds something Reef cannot use."""


class StateError(ReefError):
    """The state directory is missing, unwritable, or holds something unexpected."""


class ScenarioNotFound(ReefError):
    """No scenario by that name."""


class ScenarioExists(ReefError):
    """A scenario by that name already exists."""


class InvalidName(ReefError):
    """A scenario, rule, skill or command name is not kebab-case."""


class TreeError(ReefError):
    """A harness tree failed validation; ``problems`` lists every problem found."""

    exit_code = 3

    def __init__(self, message: str, hint: str | None = None, problems: list[str] | None = None):
        super().__init__(message, hint)
        self.problems = problems or [message]


class ReleaseNotFound(ReefError):
    """A release spec (``3``, ``r3``, ``latest`` …) names no release."""


class ChainCorrupt(ReefError):
    """The release chain's repository is not a readable git repository."""


class ChainConflict(ReefError):
    """Another publisher advanced the chain first and retries ran out."""

    exit_code = 4


class GateBlocked(ReefError):
    """The gate refused a candidate (a secret, an invalid tree, a budget, a loss)."""

    exit_code = 3

    def __init__(self, message: str, hint: str | None = None, findings: list[str] | None = None):
        super().__init__(message, hint)
        self.findings = findings or []


class SandboxUnavailable(ReefError):
    """Isolation was required but this machine cannot provide it (and it was not waived)."""

    exit_code = 5


class SandboxError(ReefError):
    """A sandboxed run could not be set up (bad work dir, bad policy, pasta failed …)."""


class ServeError(ReefError):
    """`reef serve` cannot start or reach what it needs."""


class AuthError(ReefError):
    """A missing or wrong token, or a token not allowed for this scenario."""


class BudgetExceeded(ReefError):
    """A job used up its model-call, token or wall-time budget; nothing was published."""

    exit_code = 6


class ModelError(ReefError):
    """The model could not be reached, timed out, or kept answering with unusable output."""


class AskRefused(ReefError):
    """An ask that cannot become a change: empty, too long, or against policy."""

    exit_code = 3
