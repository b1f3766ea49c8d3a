"""`reef sessions harvest|list|show` over real pi and Claude Code transcripts (fixtures)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from reef_cli.core import installs
from reef_cli.core.records import Record
from reef_cli.core.store.sqlite import SQLiteStore
from tests.cli.helpers import reef, reef_fails, reef_json

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
PI_FILE = FIXTURES / "pi" / "session-1.6.jsonl"
PI_ID = "01a22c37-7c95-76a8-9299-e311597905a3"
PI_REEF_SESSION = "80b6e633-8cb7-4484-ab10-9fd2545c48fd"
PI_RECEIPTS = ["rec_e9ec34fa6f11c2c28c076550", "rec_9f07121dcb310dbacd3f79b3"]
CC_FILE = FIXTURES / "claude_code" / "skill-and-bash.jsonl"
CC_ID = "11111111-2222-4333-8444-555555555555"


def _pi_target(root: Path, extra_lines: list[str] | None = None) -> Path:
    folder = root / "sessions" / "--tmp-work--"
    folder.mkdir(parents=True)
    lines = PI_FILE.read_text().splitlines(keepends=True)
    if extra_lines:
        lines[3:3] = [line + "\n" for line in extra_lines]  # in the middle of the file
    (folder / f"2026-11-30T11-29-23-605Z_{PI_ID}.jsonl").write_text("".join(lines))
    return root


def _cc_target(root: Path) -> Path:
    folder = root / "projects" / "-tmp-reef-fixture-home-project"
    folder.mkdir(parents=True)
    shutil.copy(CC_FILE, folder / f"{CC_ID}.jsonl")
    return root


def _store_pi_records() -> None:
    store = SQLiteStore()
    try:
        for i, rid in enumerate(PI_RECEIPTS):
            store.insert(
                Record(
                    id=rid,
                    scenario="e2e",
                    client_dialect="openai",
                    upstream_dialect="openai",
                    session_id=PI_REEF_SESSION,
                    input_tokens=10,
                    output_tokens=2,
                    status=200,
                    created_at=f"2026-11-30T11:29:2{4 + i}.000000Z",
                )
            )
    finally:
        store.close()


def test_harvest_pi_target_links_records_and_shows_the_transcript(tmp_path: Path) -> None:
    _store_pi_records()
    target = _pi_target(tmp_path / "agent")

    out = reef("sessions", "harvest", "--adapter", "pi", "--target", str(target))
    assert out.strip() == "stored 1 session(s) from 1 folder(s); 1 link to records"

    store = SQLiteStore()
    [row] = store.harvested()
    assert (row.agent, row.session_id, row.record_session_id) == ("pi", PI_ID, PI_REEF_SESSION)
    assert [t["role"] for t in row.turns] == ["user", "assistant", "tool", "assistant"]
    assert row.turns[1]["tool_calls"][0]["name"] == "read"
    assert row.skills_used == ["bisect-regressions"] and row.receipts == PI_RECEIPTS
    assert row.model and row.cwd and row.started_at == "2026-11-30T11:29:23.605Z"

    # One row per session, even when harvested twice; the second harvest replaces it.
    first_at = row.harvested_at
    reef("sessions", "harvest", "--adapter", "pi", "--target", str(target))
    [again] = store.harvested()
    assert again.harvested_at > first_at and again.turns == row.turns
    assert store.conn.execute("SELECT COUNT(*) FROM harvested_sessions").fetchone()[0] == 1

    # list: the record session and the transcript are one row, marked as both.
    [listed] = reef_json("sessions", "list")
    assert listed["session_id"] == PI_REEF_SESSION and listed["records"] == 2
    assert listed["has_records"] is True and listed["harvested"] is True
    assert listed["agent"] == "pi" and listed["transcript_id"] == PI_ID and listed["turns"] == 4
    table = reef("sessions", "list")
    assert "pi" in table and "e2e" in table

    # show, by the records' session id or by pi's own id: transcript summary + records.
    for key in (PI_REEF_SESSION, PI_ID):
        shown = reef("sessions", "show", key)
        assert f"transcript: pi session {PI_ID}" in shown
        assert "turns: 4 (1 user, 2 assistant, 1 tool)" in shown
        assert "tool calls: read×1" in shown
        assert "skills used: bisect-regressions" in shown
        assert all(rid in shown for rid in PI_RECEIPTS)
    data = reef_json("sessions", "show", PI_ID)
    assert [r["id"] for r in data["records"]] == PI_RECEIPTS
    [summary] = data["transcripts"]
    assert summary["tool_calls"] == {"read": 1} and summary["turns"] == 4


def test_harvest_without_target_reads_ledger_and_wrapper_dirs(
    tmp_path: Path, reef_home: Path
) -> None:
    pi_target = _pi_target(tmp_path / "pi-agent")
    installs.record("e2e", "pi", pi_target, 1, "h" * 8)
    _cc_target(reef_home / "agents" / "claude-code-e2e")  # a wrapper-owned folder
    installs.record("e2e", "pi", tmp_path / "gone", 1, "h" * 8)  # a target since removed

    data = reef_json("sessions", "harvest")
    assert data["stored"] == 2 and data["linked"] == 0 and data["skipped_lines"] == 0
    assert sorted(t["adapter"] for t in data["targets"]) == ["claude-code", "pi"]
    assert all(t["error"] is None for t in data["targets"])

    rows = {(h.agent, h.session_id): h for h in SQLiteStore().harvested()}
    assert set(rows) == {("pi", PI_ID), ("claude-code", CC_ID)}
    assert rows[("claude-code", CC_ID)].skills_used == ["write-tests"]
    assert rows[("claude-code", CC_ID)].record_session_id == CC_ID

    # Transcripts without records are listed, marked as such; show says "records: none".
    listed = {s["transcript_id"]: s for s in reef_json("sessions", "list")}
    assert listed[CC_ID]["has_records"] is False and listed[CC_ID]["records"] == 0
    assert listed[CC_ID]["agent"] == "claude-code" and listed[CC_ID]["turns"] == 6
    assert "none" in reef("sessions", "list")
    shown = reef("sessions", "show", CC_ID)
    assert "skills used: write-tests" in shown and "records: none" in shown

    # --adapter narrows the targets; --since in the future finds nothing.
    only_pi = reef_json("sessions", "harvest", "--adapter", "pi")
    assert [t["adapter"] for t in only_pi["targets"]] == ["pi"] and only_pi["stored"] == 1
    later = reef("sessions", "harvest", "--since", "2999-01-01T00:00Z")
    assert later.startswith("stored 0 session(s) from 2 folder(s)")


def test_harvest_guesses_the_adapter_from_the_folder(tmp_path: Path) -> None:
    out = reef("sessions", "harvest", "--target", str(_cc_target(tmp_path / "claude")))
    assert out.startswith("stored 1 session(s)")
    assert [h.agent for h in SQLiteStore().harvested()] == ["claude-code"]


def test_corrupt_transcript_lines_are_skipped_and_counted(tmp_path: Path) -> None:
    target = _pi_target(tmp_path / "agent", extra_lines=['{"type": "message", "id": "cut', "[1]"])
    out = reef("sessions", "harvest", "--adapter", "pi", "--target", str(target))
    assert out.strip() == (
        "stored 1 session(s) from 1 folder(s); 0 link to records; "
        "skipped 2 unreadable transcript line(s)"
    )
    [row] = SQLiteStore().harvested()
    assert len(row.turns) == 4 and row.receipts == PI_RECEIPTS


def test_bad_input_is_one_clear_line(tmp_path: Path) -> None:
    unknown_adapter = reef_fails("sessions", "harvest", "--adapter", "vim", code=2)
    assert "unknown adapter 'vim'" in unknown_adapter and "use one of: " in unknown_adapter
    missing = reef_fails("sessions", "harvest", "--adapter", "pi", "--target", str(tmp_path / "x"))
    assert "does not exist" in missing
    (tmp_path / "plain").mkdir()
    unknown = reef_fails("sessions", "harvest", "--target", str(tmp_path / "plain"))
    assert "cannot tell which agent" in unknown and "--adapter" in unknown
    assert "not an ISO date" in reef_fails("sessions", "harvest", "--since", "yesterday")
    assert "no records or transcript" in reef_fails("sessions", "show", "nope")
    # Nothing was written by any of these.
    assert SQLiteStore().harvested() == []


def test_nothing_installed_is_not_an_error() -> None:
    out = reef("sessions", "harvest")
    assert out.strip() == (
        "stored 0 session(s) from 0 folder(s); 0 link to records "
        "(no installs known: pass --target DIR)"
    )
    assert json.loads(reef("sessions", "list", "--json")) == []


def test_a_folder_without_an_install_is_told_apart_by_its_agents_marks(tmp_path: Path) -> None:
    from adapters.harvest_all import _guess_adapter

    marks = {
        "codex": ("config.toml", "sessions/"),
        "opencode": ("opencode.jsonc",),
        "pi": ("sessions/",),
        "claude-code": ("projects/",),
    }
    for agent, paths in marks.items():
        folder = tmp_path / agent
        for rel in paths:
            where = folder / rel
            if rel.endswith("/"):
                where.mkdir(parents=True, exist_ok=True)
            else:
                where.parent.mkdir(parents=True, exist_ok=True)
                where.write_text("")
        assert _guess_adapter(folder) == agent
