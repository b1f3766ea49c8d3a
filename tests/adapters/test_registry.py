"""Agents are registered through the ``reef.adapters`` entry points, Reef's own exactly as a
third party's: a dummy agent installed from a temporary folder (its package plus a
``.dist-info`` naming one row, no edit to Reef) works through `reef harness install`,
`reef doctor`, the help texts, the harvest's folder guess and the wrappers; a broken
entry point is left out with one warning; an unknown ``--adapter`` is one clear line."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from reef_cli.core import agents, plugins, scenarios
from reef_cli.core.errors import OptionInvalid
from reef_cli.core.publishing import publish_files
from reef_cli.core.tree import starter_tree
from tests.contributing import install

BIN = Path(sys.executable).parent
OWN = ("claude-code", "codex", "opencode", "pi")


def _distribution(root: Path, name: str, entry_points: str) -> None:
    info = root / f"{name}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(entry_points)


def _package(root: Path, name: str, files: dict[str, str]) -> None:
    (root / name).mkdir()
    for rel, text in files.items():
        (root / name / rel).write_text(text)


@pytest.fixture
def plugin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The dummy agent's package and distribution in a folder on ``sys.path`` and on
    ``PYTHONPATH`` (for the `reef` subprocesses); the registry read afresh."""
    root = tmp_path / "site"
    root.mkdir()
    install(root, "dummy_agent", "dummy_agent")  # CONTRIBUTING.md's worked example
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.setenv("PYTHONPATH", str(root))
    plugins.forget()
    yield root
    plugins.forget()
    for name in [m for m in sys.modules if m.split(".")[0] in ("dummy_agent", "broken_agent")]:
        del sys.modules[name]


@pytest.fixture
def broken(plugin_dir: Path) -> Path:
    """A second plugin whose row cannot be imported."""
    _package(plugin_dir, "broken_agent", {"__init__.py": "import not_a_module_9e4b\n"})
    _distribution(plugin_dir, "broken_agent", "[reef.adapters]\nbroken = broken_agent:AGENT\n")
    plugins.forget()
    return plugin_dir


@pytest.fixture
def team() -> None:
    scenarios.create("team")
    publish_files("team", starter_tree().files(), reason="the first one")


def reef(*args: str, tool: str = "reef") -> subprocess.CompletedProcess[str]:
    """The real console script, in a fresh process (REEF_HOME and PYTHONPATH inherited)."""
    return subprocess.run(
        [str(BIN / tool), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ),
    )


# ----------------------------------------------------------------- in process


def test_reefs_own_agents_are_registered_by_entry_point() -> None:
    plugins.forget()
    assert agents.names() == OWN
    assert all(agent.module.endswith(".adapter") for agent in agents.registered())
    assert agents.get("claude").name == "claude-code"  # an alias
    import adapters

    assert type(adapters.get("pi")).__name__ == "PiAdapter"


def test_an_agents_row_module_is_light() -> None:
    """Listing the agents imports no adapter code: only each package's row."""
    code = (
        "import sys; from reef_cli.core import agents; agents.registered(); "
        "print(sorted(m for m in sys.modules if m.startswith('adapters')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout.replace("'", '"')) == [
        "adapters",
        "adapters.claude_code",
        "adapters.codex",
        "adapters.opencode",
        "adapters.pi",
    ]


def test_a_plugins_agent_is_read_like_reefs_own(plugin_dir: Path, tmp_path: Path) -> None:
    assert agents.names() == (*OWN, "dummy")  # Reef's own first
    assert agents.get("dum").name == "dummy"
    assert "dummy" in agents.names_text()
    import adapters
    from adapters.harvest_all import _guess_adapter

    adapter = adapters.get("dummy")
    assert type(adapter).__name__ == "DummyAdapter" and adapter.name == "dummy"
    folder = tmp_path / "some-agent"
    folder.mkdir()
    (folder / "dummy.json").write_text("{}")
    assert _guess_adapter(folder) == "dummy"  # its marks, from its row


def test_an_unknown_name_names_the_registered_ones(plugin_dir: Path) -> None:
    with pytest.raises(OptionInvalid) as caught:
        agents.get("vim")
    assert caught.value.message == "unknown adapter 'vim'"
    assert caught.value.hint == "use one of: claude-code, codex, opencode, pi, dummy"


def test_with_no_row_at_all_the_fix_is_to_reinstall(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(agents, "registered", lambda: ())
    with pytest.raises(OptionInvalid) as caught:
        agents.get("pi")
    assert "reinstall Reef" in (caught.value.hint or "")


def test_a_broken_entry_point_is_left_out_with_one_warning(
    broken: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="reef"):
        assert agents.names() == (*OWN, "dummy")
        assert agents.names() == (*OWN, "dummy")  # read once: no second warning
    [warning] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "broken = broken_agent:AGENT (broken_agent)" in warning
    assert "ModuleNotFoundError" in warning and "not_a_module_9e4b" in warning


# ----------------------------------------------------------------- the real CLI


def test_reef_harness_install_installs_a_plugins_agent(
    plugin_dir: Path, team: None, tmp_path: Path, reef_home: Path
) -> None:
    target = tmp_path / "dummy-home"
    done = reef("harness", "install", "--adapter", "dummy", "-s", "team", "--target", str(target))
    assert done.returncode == 0, done.stderr
    assert f"Installed r1 of team into {target} (dummy)." in " ".join(done.stdout.split())
    files = starter_tree().files()
    assert files and all((target / rel).read_text() == text for rel, text in files.items())
    manifest = json.loads((target / ".reef-dummy.json").read_text())
    assert manifest["adapter"] == "dummy" and manifest["release"] == 1
    ledger = (reef_home / "installs.json").read_text()
    assert '"dummy"' in ledger and str(target.resolve()) in ledger

    removed = reef("harness", "uninstall", "--adapter", "dummy", "--target", str(target))
    assert removed.returncode == 0, removed.stderr
    assert not target.exists() or not any(target.iterdir())


def test_reef_doctor_checks_a_plugins_agent(plugin_dir: Path) -> None:
    done = reef("doctor", "--json")
    rows = {row["name"]: row for row in json.loads(done.stdout)}
    assert rows["dummy-agent-7c1d"]["status"] == "warn"  # not installed here
    assert rows["dummy-agent-7c1d"]["fix"] == "pip install dummy-agent"  # where to get it
    for own in ("claude", "codex", "opencode", "pi", "pi-0.73"):
        assert own in rows, own


def test_the_help_texts_name_a_plugins_agent(plugin_dir: Path) -> None:
    for command in (["harness", "install"], ["harness", "uninstall"], ["sessions", "harvest"]):
        done = reef(*command, "--help")
        assert done.returncode == 0, done.stderr
        text = " ".join(done.stdout.split())
        assert "claude-code, codex, opencode, pi or dummy" in text, command
        assert "{adapters}" not in text


def test_a_plugins_wrapper_runs_through_the_generic_entry(plugin_dir: Path) -> None:
    """A plugin's console script ``reef-dummy = "reef_cli.cli.wrappers:run"``: the wrapper
    is the row whose ``wrapper`` is the script's name."""
    script = plugin_dir / "reef-dummy"
    script.write_text(
        f"#!{sys.executable}\nimport sys\nfrom reef_cli.cli.wrappers import run\nrun()\n"
    )
    script.chmod(0o755)
    done = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "Usage: reef-dummy" in done.stdout and "versions" in done.stdout

    stray = plugin_dir / "reef-stray"
    stray.write_text(script.read_text())
    stray.chmod(0o755)
    done = subprocess.run([str(stray), "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().startswith(
        "reef: error: no registered agent has the wrapper 'reef-stray'"
    )
    assert "reef-dummy" in done.stderr and "reef-pi" in done.stderr


def test_reefs_own_wrappers_still_run(plugin_dir: Path) -> None:
    for agent in agents.registered():
        if agent.name == "dummy":
            continue
        done = reef("--help", tool=agent.wrapper)
        assert done.returncode == 0, (agent.wrapper, done.stderr)
        assert f"Usage: {agent.wrapper}" in done.stdout


def test_a_broken_plugin_leaves_the_cli_working_with_one_warning(broken: Path) -> None:
    done = reef("harness", "install", "--help")
    assert done.returncode == 0, done.stderr
    assert "claude-code, codex, opencode, pi or dummy" in " ".join(done.stdout.split())
    warnings = [line for line in done.stderr.splitlines() if "left out" in line]
    assert len(warnings) == 1 and "broken_agent" in warnings[0], done.stderr
    assert "Traceback" not in done.stderr


def test_an_unknown_adapter_is_one_line_naming_the_registered_ones(
    plugin_dir: Path, team: None
) -> None:
    done = reef("harness", "install", "--adapter", "vim", "-s", "team")
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    assert lines == [
        "reef: error: unknown adapter 'vim' "
        "(fix: use one of: claude-code, codex, opencode, pi, dummy)"
    ]
