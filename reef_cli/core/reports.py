"""Reports: feedback on recorded exchanges — a score, text or structured feedback, receipts.

``ReportIn`` validates what a client sends (finite score, no booleans, bounded sizes,
receipt-shaped references). ``save_report`` checks the references against the records
store (known receipts of one scenario) and stores the report; an ``id`` makes it
idempotent: the same content again is a no-op, different content is a conflict.
"""

from __future__ import annotations

import hashlib
import json
import math
import secrets
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from reef_cli.core.errors import ReefError
from reef_cli.core.json_shape import field_dict
from reef_cli.core.records import now_iso
from reef_cli.core.store.base import ReportRow, Store

MAX_FEEDBACK_CHARS = 64 * 1024
MAX_METADATA_CHARS = 16 * 1024
MAX_REFERENCES = 256
RECEIPT_PATTERN = r"^rec_[0-9a-f]{24}$"
REPORT_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"


class ReportInvalid(ReefError):
    """A report failed validation; ``field`` names what is wrong."""

    exit_code = 2
    http_status = 400

    def __init__(self, field: str, message: str, hint: str | None = None) -> None:
        super().__init__(f"{field}: {message}", hint)
        self.field = field

    def details(self) -> dict[str, Any]:
        return {"field": self.field}


class ReportConflict(ReefError):
    """A report with this id exists with different content."""

    exit_code = 4
    http_status = 409


def refuse_unknown(references: list[str], known: dict[str, str]) -> None:
    """``ReportInvalid`` naming the first receipt no record has (``known``: the ones that do)."""
    missing = [r for r in references if r not in known]
    if missing:
        raise ReportInvalid(
            "references",
            f"unknown receipt {missing[0]!r}",
            "send receipts from x-reef-agent-record-id headers of this server",
        )


class ReportIn(BaseModel):
    """The body of ``POST /reef/report``."""

    model_config = ConfigDict(extra="forbid")

    score: float | None = Field(None, description="a finite number; higher is better")
    feedback: str | dict[str, Any] | None = Field(
        None, description="text or a JSON object (at most 64 KiB)"
    )
    references: list[str] = Field(
        default_factory=list,
        max_length=MAX_REFERENCES,
        description="receipts (x-reef-agent-record-id) of records in one scenario",
    )
    metadata: dict[str, Any] | None = Field(None, description="free-form JSON (at most 16 KiB)")
    id: str | None = Field(
        None,
        pattern=REPORT_ID_PATTERN,
        description="a client-chosen id that makes the report idempotent",
    )

    @field_validator("score", mode="before")
    @classmethod
    def _score(cls, value: Any) -> Any:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError("must be a number (not a boolean or a string)")
        if not math.isfinite(float(value)):
            raise ValueError("must be finite")
        return value

    @field_validator("feedback", "metadata")
    @classmethod
    def _bounded(cls, value: Any, info: ValidationInfo) -> Any:
        limit = MAX_FEEDBACK_CHARS if info.field_name == "feedback" else MAX_METADATA_CHARS
        if value is not None and len(json.dumps(value)) > limit:
            raise ValueError(f"is larger than {limit} characters")
        return value

    @field_validator("references")
    @classmethod
    def _references(cls, value: list[str]) -> list[str]:
        import re

        for i, ref in enumerate(value):
            if not re.match(RECEIPT_PATTERN, ref):
                raise ValueError(f"item {i} ({ref[:40]!r}) is not a receipt like rec_<24 hex>")
        return list(dict.fromkeys(value))

    def content_hash(self, scenario: str) -> str:
        body = self.model_dump(exclude={"id"})
        body["scenario"] = scenario
        return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


@dataclass
class StoredReport:
    id: str
    scenario: str
    score: float | None
    feedback: Any
    references: list[str]
    metadata: Any
    created_at: str
    created: bool = True

    @classmethod
    def of(cls, row: ReportRow, *, created: bool) -> StoredReport:
        return cls(
            id=row.id,
            scenario=row.scenario,
            score=row.score,
            feedback=row.feedback,
            references=row.references,
            metadata=row.metadata,
            created_at=row.created_at,
            created=created,
        )

    def to_json(self) -> dict[str, Any]:
        return field_dict(self, leave_out=("created",))


def parse_report(data: Any) -> ReportIn:
    """Validate a decoded JSON body; raise ``ReportInvalid`` naming the first bad field."""
    from pydantic import ValidationError

    if not isinstance(data, dict):
        raise ReportInvalid("body", "must be a JSON object")
    try:
        report = ReportIn.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"]) or "body"
        msg = str(err["msg"]).removeprefix("Value error, ")
        raise ReportInvalid(loc, msg) from exc
    if report.score is None and report.feedback is None:
        raise ReportInvalid("score", "a report needs a score, feedback, or both")
    return report


def save_report(store: Store, report: ReportIn, scenario: str | None) -> StoredReport:
    """Check references, store the report; idempotent by ``report.id``.

    ``scenario`` is the caller's scenario; ``None`` means "the references' scenario".
    """
    known = store.exists(report.references)
    refuse_unknown(report.references, known)
    scenarios = set(known.values())
    if scenario is None:
        if len(scenarios) > 1:
            raise ReportInvalid("references", "receipts come from more than one scenario")
        scenario = scenarios.pop() if scenarios else "default"
    elif scenarios - {scenario}:
        other = sorted(scenarios - {scenario})[0]
        raise ReportInvalid(
            "references",
            f"a receipt belongs to scenario {other!r}, not {scenario!r}",
            "send the report with the same x-reef-scenario as the request",
        )
    digest = report.content_hash(scenario)
    row = ReportRow(
        id=report.id or "rep_" + secrets.token_hex(12),
        scenario=scenario,
        score=report.score,
        feedback=report.feedback,
        references=report.references,
        metadata=report.metadata,
        content_hash=digest,
        created_at=now_iso(),
    )
    stored, created = store.put_report(row)
    if not created and stored.content_hash != digest:
        raise ReportConflict(
            f"report {row.id!r} exists with different content",
            "use a new id, or resend exactly the same report",
        )
    return StoredReport.of(stored, created=created)


def list_reports(
    store: Store, *, scenario: str | None = None, record_id: str | None = None
) -> list[StoredReport]:
    return [
        StoredReport.of(row, created=False)
        for row in store.reports(scenario=scenario, record_id=record_id)
    ]
