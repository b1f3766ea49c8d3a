"""What a proposer's model calls show it writing, in each dialect, and which paths land
outside its workspace."""

from __future__ import annotations

import json

import pytest

from recipes.meta_harness.watch import outside, watch_for, written_paths

ROOT = "/tmp/reef-meta-harness-x"


def openai(name: str, arguments: dict[str, str]) -> dict:
    call = {"type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
    return {
        "messages": [{"role": "user", "content": "go"}, {"role": "assistant", "tool_calls": [call]}]
    }


def test_each_dialect_names_the_files_written() -> None:
    assert written_paths(openai("write", {"path": "next/tree/rules/a.md"})) == [
        "next/tree/rules/a.md"
    ]
    assert written_paths(openai("edit", {"path": "b.md", "oldText": "x"})) == ["b.md"]
    assert written_paths(openai("read", {"path": "/etc/passwd"})) == []  # a read writes nothing
    anthropic = {
        "messages": [
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "ok"},
                    {"type": "tool_use", "name": "Write", "input": {"file_path": "/etc/x"}},
                    {"type": "tool_use", "name": "MultiEdit", "input": {"file_path": "c.md"}},
                ],
            }
        ]
    }
    assert written_paths(anthropic) == ["/etc/x", "c.md"]
    patch = "*** Begin Patch\n*** Add File: next/tree/rules/d.md\n+x\n*** Update File: ../e.md\n"
    responses = {
        "input": [
            {"type": "function_call", "name": "write_file", "arguments": '{"path": "f.md"}'},
            {"type": "custom_tool_call", "name": "apply_patch", "input": patch},
        ]
    }
    assert written_paths(responses) == ["f.md", "next/tree/rules/d.md", "../e.md"]


@pytest.mark.parametrize(
    "path, out",
    [
        ("next/tree/rules/a.md", False),
        (f"{ROOT}/next/NOTES.md", False),
        ("./next/../scratch.md", False),
        ("../escape.md", True),
        ("next/../../escape.md", True),
        ("/etc/passwd", True),
        (f"{ROOT}-other/x.md", True),  # a sibling whose name starts the same
        ("/tmp/../" + ROOT.lstrip("/") + "/x.md", False),
    ],
)
def test_outside_is_judged_on_the_path(path: str, out: bool) -> None:
    assert outside(path, ROOT) is out


def test_the_watch_stops_at_the_first_write_outside() -> None:
    watch = watch_for(ROOT)
    assert watch(openai("write", {"path": "next/tree/rules/a.md"})) is None
    assert watch(openai("write", {"path": "/home/me/.bashrc"})) == (
        "the proposer wrote outside its workspace (/home/me/.bashrc)"
    )
    assert watch("not a body") is None and watch({"messages": "nonsense"}) is None
