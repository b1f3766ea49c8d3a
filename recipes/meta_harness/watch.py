"""What a proposer writes, read from its model calls: every file-writing tool call in
the conversation an agent sends, in the three dialects Reef's agents speak.

The sandbox already keeps the agent's writes inside its work dir and a throwaway home;
this is how Reef *notices* an attempt to write elsewhere and stops the agent at its next
model call, so the attempt is counted and its candidate never scored. A shell command
that writes a file is not parsed here: the sandbox alone stops that one."""

from __future__ import annotations

import json
import posixpath
from collections.abc import Iterator
from pathlib import PurePosixPath
from typing import Any

# tool names (lowercased) that write a file, across pi, Claude Code, Codex CLI, opencode
WRITE_TOOLS = frozenset(
    {"write", "edit", "multiedit", "write_file", "edit_file", "create_file", "notebookedit"}
)
PATCH_TOOLS = frozenset({"apply_patch", "patch"})
PATH_KEYS = ("path", "file_path", "filePath", "filename", "notebook_path")
PATCH_HEADS = ("*** Add File: ", "*** Update File: ", "*** Delete File: ", "*** Move to: ")


def _arguments(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw  # a freeform tool's input (Codex's apply_patch)
    return raw


def tool_calls(body: Any) -> Iterator[tuple[str, Any]]:
    """``(tool name, arguments)`` of every tool call the assistant made in a request body:
    OpenAI chat (``tool_calls``), Anthropic (``tool_use`` blocks), Responses
    (``function_call`` / ``custom_tool_call`` items)."""
    if not isinstance(body, dict):
        return
    for message in body.get("messages") or []:
        if not isinstance(message, dict):
            continue
        for call in message.get("tool_calls") or []:
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict):
                yield str(function.get("name", "")), _arguments(function.get("arguments"))
        content = message.get("content")
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_use":
                yield str(block.get("name", "")), block.get("input")
    items = body.get("input")
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and item.get("type") == "function_call":
            yield str(item.get("name", "")), _arguments(item.get("arguments"))
        elif isinstance(item, dict) and item.get("type") == "custom_tool_call":
            yield str(item.get("name", "")), item.get("input")


def written_paths(body: Any) -> list[str]:
    """The paths the conversation's file-writing tool calls name, as the agent gave them."""
    found: list[str] = []
    for name, arguments in tool_calls(body):
        tool = name.lower()
        if tool in WRITE_TOOLS and isinstance(arguments, dict):
            found += [str(arguments[k]) for k in PATH_KEYS if isinstance(arguments.get(k), str)]
        elif tool in PATCH_TOOLS:
            text = arguments.get("input") if isinstance(arguments, dict) else arguments
            for line in str(text or "").splitlines():
                for head in PATCH_HEADS:
                    if line.startswith(head):
                        found.append(line[len(head) :].strip())
    return found


def outside(path: str, root: str) -> bool:
    """Whether ``path`` (relative paths are the agent's, from ``root``, its work dir)
    lands outside ``root``, judged on the text alone: ``..`` climbs, a symlink cannot
    be made to point out (the sandbox's folder holds only what Reef and the agent wrote)."""
    joined = path if PurePosixPath(path).is_absolute() else posixpath.join(root, path)
    resolved = posixpath.normpath(joined)
    return not (resolved == root or resolved.startswith(root.rstrip("/") + "/"))


def watch_for(root: str) -> Any:
    """A ``Watch`` that stops an agent once it has asked to write outside ``root``."""

    def watch(body: Any) -> str | None:
        for path in written_paths(body):
            if outside(path, root):
                return f"the proposer wrote outside its workspace ({path[:200]})"
        return None

    return watch
