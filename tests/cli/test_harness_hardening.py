"""`reef harness` hardening (issue 11): hardlinks and special files, hostile content as
one-line errors, `check` listing every problem, empty trees, pending installs."""

from __future__ import annotations

import json
import os
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from adapters._install import install_release, install_remote
from adapters.base import Routing
from reef_cli.cli.main import app
from reef_cli.core.errors import GateBlocked
from tests.cli.helpers import reef, reef_fails, reef_json, runner

PUBLISH = ("harness", "publish", "{tree}", "-s", "demo", "-m", "x")


def releases() -> list[int]:
    return [r["number"] for r in reef_json("harness", "versions", "-s", "demo")["releases"]]


def publish_fails(tree: Path, code: int = 3) -> str:
    return reef_fails(*[a.replace("{tree}", str(tree)) for a in PUBLISH], code=code)


# ---------------------------------------------------------------- item 6


def test_hardlinked_file_from_outside_is_not_published(tree: Path, tmp_path: Path) -> None:
    outside = tmp_path / "passwd"
    outside.write_text("root:x:0:0:root:/root:/bin/bash\n")
    os.link(outside, tree / "skills" / "write-tests" / "passwd.txt")
    line = publish_fails(tree)
    assert "skills/write-tests/passwd.txt: is hardlinked" in line and "cp " in line
    assert "root:x" not in line
    assert releases() == []


def test_fifo_in_the_tree_is_refused_not_waited_on(tree: Path) -> None:
    os.mkfifo(tree / "rules" / "pipe.md")
    line = publish_fails(tree)  # reading the FIFO would hang the publish
    assert "rules/pipe.md: is a FIFO (named pipe)" in line
    assert releases() == []


# ---------------------------------------------------------------- item 19


def _bad_name(tree: Path) -> None:
    skill = os.fsencode(tree / "skills" / "write-tests")
    with open(os.path.join(skill, b"caf\xe9.md"), "wb") as handle:
        handle.write(b"notes\n")


def _newline_name(tree: Path) -> None:
    (tree / "skills" / "write-tests" / "two\nlines.md").write_text("x\n")


def _deep_toml(tree: Path) -> None:
    (tree / "reef.toml").write_text("a = " + "[" * 5000 + "]" * 5000 + "\n")


def _toml_not_a_table(tree: Path) -> None:
    (tree / "reef.toml").write_text("format = 1\nrequires = 3\n")


def _latin1_body(tree: Path) -> None:
    (tree / "rules" / "latin.md").write_bytes("caf\xe9\n".encode("latin-1"))


def _huge(tree: Path) -> None:
    with (tree / "rules" / "huge.md").open("wb") as handle:
        handle.truncate(50 * 1024 * 1024)


def _deep_frontmatter(tree: Path) -> None:
    (tree / "skills" / "write-tests" / "SKILL.md").write_text(
        "---\nname: write-tests\ndescription: d\nk: " + "[" * 5000 + "]" * 5000 + "\n---\n"
    )


@pytest.mark.parametrize(
    ("prepare", "needle"),
    [
        (_bad_name, "skills/write-tests/caf\\xe9.md: file name is not UTF-8 (rename it)"),
        (_newline_name, "skills/write-tests/two\\nlines.md: file name holds a control"),
        (_deep_toml, "reef.toml: nested too deeply"),
        (_toml_not_a_table, "reef.toml: requires:"),
        (_latin1_body, "rules/latin.md: not UTF-8 text (byte 3); re-save it as UTF-8"),
        (_huge, "rules/huge.md: 52428800 bytes is over"),
        (_deep_frontmatter, "frontmatter is nested too deeply"),
    ],
    ids=lambda v: getattr(v, "__name__", "")[1:] or None,
)
def test_hostile_tree_is_one_line_with_the_fix(tree: Path, prepare, needle: str) -> None:
    prepare(tree)
    line = publish_fails(tree)  # reef_fails: exactly one line, no traceback
    assert needle in line and "(fix:" in line
    assert releases() == []
    result = runner.invoke(app, ["harness", "check", str(tree)], catch_exceptions=False)
    assert result.exit_code == 3 and "Traceback" not in result.output
    assert needle.split(":")[0] in result.output


def test_check_reports_every_problem_in_one_run(tree: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("x\n")
    os.link(outside, tree / "rules" / "linked.md")
    os.mkfifo(tree / "rules" / "pipe.md")
    (tree / "rules" / "passwd.md").symlink_to("/etc/passwd")
    (tree / "rules" / "blob.md").write_bytes(b"\x89PNG\x00\x00")
    _bad_name(tree)
    (tree / "rules" / "Bad.md").write_text("x\n")
    (tree / "junk.txt").write_text("x\n")
    key = "gh" + "p_" + "Zq8xW3vB7nM2kL5jH9gF4dS1aP6oI0uY3tR8"
    (tree / "commands" / "deploy.md").write_text(f"---\ndescription: d\n---\ntoken {key}\n")
    # a SKILL.md refused by the folder check is reported once, not also as "missing"
    skill = tree / "skills" / "other"
    skill.mkdir()
    os.link(outside, skill / "SKILL.md")
    data = json.loads(reef("harness", "check", str(tree), "--json", code=3))
    assert data["verdict"] == "blocked"
    checks = {c["name"]: c for c in data["checks"]}
    problems = checks["tree"]["findings"]
    for needle in (
        "rules/linked.md: is hardlinked",
        "rules/pipe.md: is a FIFO",
        "rules/passwd.md: symlinks",
        "rules/blob.md: binary file",
        "caf\\xe9.md: file name is not UTF-8",
        "skills/other/SKILL.md: is hardlinked",
        "rule name 'Bad' is not kebab-case",
        "junk.txt: unexpected entry",
    ):
        assert sum(needle in p for p in problems) == 1, (needle, problems)
    assert not any("missing SKILL.md" in p for p in problems)
    # the readable files were scanned too, in the same run
    assert checks["credential-scan"]["status"] == "failed"
    assert "commands/deploy.md:4" in checks["credential-scan"]["detail"]
    assert key not in json.dumps(data)
    text = reef("harness", "check", str(tree), code=3)
    assert "rules/pipe.md" in text and "junk.txt" in text and "commands/deploy.md:4" in text


def test_check_prints_file_names_literally(tree: Path) -> None:
    """A name like [red]x is shown as written, not read as console markup."""
    (tree / "rules" / "[bold]x.md").write_text("x\n")
    text = reef("harness", "check", str(tree), code=3)
    assert "rules/[bold]x.md" in text


# ---------------------------------------------------------------- item 18


def test_empty_tree_does_not_replace_the_live_harness(tree: Path, tmp_path: Path) -> None:
    reef("harness", "publish", str(tree), "-s", "demo", "-m", "first")
    empty = tmp_path / "empty"
    empty.mkdir()
    line = publish_fails(empty)
    assert "the tree is empty" in line and "replace r1 of demo" in line
    assert "--allow-empty" in line
    manifest_only = tmp_path / "manifest-only"
    manifest_only.mkdir()
    (manifest_only / "reef.toml").write_text("format = 1\n")
    assert "the tree is empty" in publish_fails(manifest_only)
    assert releases() == [1]
    # on purpose: published, and rolling back to it later still works
    shown = reef_json(
        "harness", "publish", str(empty), "-s", "demo", "-m", "clear", "--allow-empty"
    )
    assert shown["number"] == 2
    assert reef_json("harness", "show", "2", "-s", "demo")["files"] == []
    reef("harness", "rollback", "1", "-s", "demo")
    reef("harness", "rollback", "2", "-s", "demo")  # back to the empty one: a person's choice
    assert reef_json("harness", "show", "latest", "-s", "demo")["files"] == []
    assert releases() == [4, 3, 2, 1]


def test_empty_first_release_of_a_new_chain_is_fine(tmp_path: Path) -> None:
    reef("scenario", "create", "fresh")
    empty = tmp_path / "empty"
    empty.mkdir()
    first = reef_json("harness", "publish", str(empty), "-s", "fresh", "-m", "start")
    assert first["number"] == 1


# ---------------------------------------------------------------- item 8

ROUTING = Routing(base_url="http://127.0.0.1:9", scenario="demo")


@pytest.fixture
def pending(tree: Path) -> Path:
    reef("harness", "publish", str(tree), "-s", "demo", "-m", "first")
    (tree / "extensions").mkdir()
    (tree / "extensions" / "notify.ts").write_text("export default function () {}\n")
    assert reef_json("harness", "publish", str(tree), "-s", "demo", "-m", "ext")["status"] == (
        "pending"
    )
    return tree


@pytest.mark.parametrize("spec", ["2", "r2", "latest"])
def test_pending_release_is_not_installed(pending: Path, tmp_path: Path, spec: str) -> None:
    target = tmp_path / "agent"
    line = reef_fails(
        "harness",
        "install",
        "-a",
        "pi",
        "-s",
        "demo",
        "-r",
        spec,
        "--target",
        str(target),
        code=3,
    )
    assert "r2 of demo is pending review" in line
    assert "reef harness promote 2 -s demo" in line and "--allow-pending" in line
    assert not target.exists()


def test_allow_pending_installs_it_and_served_skips_it(pending: Path, tmp_path: Path) -> None:
    target = tmp_path / "agent"
    served = reef_json("harness", "install", "-a", "pi", "-s", "demo", "--target", str(target))
    assert served["release"] == 1  # "served" never resolves to a pending release
    assert not (target / "extensions" / "notify.ts").exists()
    done = reef_json(
        "harness",
        "install",
        "-a",
        "pi",
        "-s",
        "demo",
        "-r",
        "2",
        "--target",
        str(target),
        "--allow-pending",
    )
    assert done["release"] == 2
    assert (target / "extensions" / "notify.ts").exists()


def test_the_one_install_path_refuses_pending_for_every_caller(
    pending: Path, tmp_path: Path
) -> None:
    """`reef-pi install N`, quickstart and the in-agent installs all go through here."""
    for adapter in ("pi", "claude-code"):
        with pytest.raises(GateBlocked, match="pending review"):
            install_release(adapter, "demo", ROUTING, "2", tmp_path / adapter)
        assert not (tmp_path / adapter).exists()
    reef("harness", "promote", "2", "-s", "demo")
    installed, _ = install_release("pi", "demo", ROUTING, "latest", tmp_path / "pi")
    assert installed.number == 3


class _Harness(BaseHTTPRequestHandler):
    status = "pending"

    def do_GET(self) -> None:
        body = json.dumps(
            {
                "scenario": "demo",
                "release": {"number": 7, "status": self.status, "content_hash": "sha256:0"},
                "files": {"extensions/notify.ts": "export default function () {}\n"},
            }
        ).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def remote() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Harness)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_remote_pending_release_is_refused(
    remote: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REEF_TOKEN", "token")
    target = tmp_path / "agent"
    with pytest.raises(GateBlocked, match="r7 of demo is pending review"):
        install_remote("pi", "demo", remote, "token", "latest", target)
    assert not target.exists()
    line = reef_fails(
        "harness",
        "install",
        "-a",
        "pi",
        "-s",
        "demo",
        "--from",
        remote,
        "-r",
        "7",
        "--target",
        str(target),
        code=3,
    )
    assert "pending review" in line and not target.exists()
    installed, _ = install_remote("pi", "demo", remote, "token", "7", target, allow_pending=True)
    assert installed.number == 7 and (target / "extensions" / "notify.ts").exists()


def test_socket_in_tree_is_refused(tree: Path) -> None:
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tree / "rules" / "agent.sock"))
    try:
        assert "rules/agent.sock: is a socket" in publish_fails(tree)
    finally:
        sock.close()
