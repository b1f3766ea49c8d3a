"""Run untrusted commands (agent trials, evaluation tasks) isolated with bubblewrap + pasta.

    result = sandbox.run(["pi", "-p", "fix the bug"], workdir,
                         allow=[("127.0.0.1", gateway_port)], limits=Limits.for_node())

Modes: ``bwrap`` (the default) or ``none``, which only an explicit waiver selects
(``REEF_SANDBOX=none``, ``REEF_PROPOSER_SANDBOX=none`` or ``unsandboxed=True``). When
isolation is unavailable and not waived, ``run`` raises ``SandboxUnavailable``.
"""

from __future__ import annotations

from ._check import CheckRow, check, doctor_rows
from ._policy import Limits, Policy, Result
from ._run import mode, run

__all__ = ["CheckRow", "Limits", "Policy", "Result", "check", "doctor_rows", "mode", "run"]
