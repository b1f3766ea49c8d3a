"""`GET /reef/harness/install` (the POSIX sh install script) and `reef harness install
--from URL` against a running `reef serve`."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import httpx
import pytest

from adapters.pi.adapter import PiAdapter
from reef_cli.core import agents, installs, scenarios
from reef_cli.core.publishing import publish_files
from tests.cli.helpers import reef_fails, reef_json
from tests.server.conftest import TOKEN

SH = shutil.which("sh") or "/bin/sh"
FILES = {
    "reef.toml": "format = 1\n",
    "rules/house-style.md": "# House style\n\nUse tabs (reef-install-sh-5e1a).\n",
    "skills/tidy/SKILL.md": "---\nname: tidy\ndescription: Tidy the repo\n---\n\nTidy it.\n",
}


def _script(url: str, *, scenario: str = "team", adapter: str = "pi") -> httpx.Response:
    return httpx.get(
        f"{url}/reef/harness/install",
        params={"adapter": adapter, "scenario": scenario},
        headers={"authorization": f"Bearer {TOKEN}"},
        timeout=10,
    )


def _fake_bin(folder: Path, *names: str) -> Path:
    """Executables that print their name and arguments, one per line."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        path = folder / name
        path.write_text(f'#!/bin/sh\necho "{name}"\nfor a in "$@"; do echo "$a"; done\n')
        path.chmod(0o755)
    return folder


def _run(script: Path, path: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [SH, str(script)],
        env={"PATH": path, "HOME": str(script.parent), **env},
        capture_output=True,
        text=True,
        timeout=30,
    )


@pytest.fixture
def served(make_stack):
    scenarios.create("team")
    publish_files("team", FILES, reason="first", reviewed=True)
    return make_stack()


def test_install_script_text_syntax_and_checks(served, tmp_path: Path) -> None:
    response = _script(served.url)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/x-shellscript")
    text = response.text
    assert text.startswith("#!/bin/sh\n") and "set -eu" in text
    assert f"reef harness install --adapter pi --scenario team --from {served.url}" in text
    assert "Installed r1: run reef-pi with REEF_SCENARIO=team." in text
    script = tmp_path / "install.sh"
    script.write_text(text)
    syntax = subprocess.run([SH, "-n", str(script)], capture_output=True, text=True)
    assert syntax.returncode == 0, syntax.stderr

    # No `reef` on PATH: a clear message and a non-zero exit, nothing else runs.
    bare = _fake_bin(tmp_path / "bare", "reef-pi", "pi")
    no_reef = _run(script, f"{bare}:/usr/bin:/bin", REEF_TOKEN=TOKEN)
    assert shutil.which("reef", path=f"{bare}:/usr/bin:/bin") is None
    assert no_reef.returncode != 0
    assert "reef install: reef is not installed" in no_reef.stderr
    assert no_reef.stdout == ""

    # Everything there but the token: says how to get one.
    full = _fake_bin(tmp_path / "full", "reef", "reef-pi", "pi")
    no_token = _run(script, f"{full}:/usr/bin:/bin")
    assert no_token.returncode != 0 and "REEF_TOKEN is not set" in no_token.stderr

    # All there: it runs `reef harness install --from` with the arguments it was given.
    done = _run(script, f"{full}:/usr/bin:/bin", REEF_TOKEN=TOKEN)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[:9] == [
        "reef",
        "harness",
        "install",
        "--adapter",
        "pi",
        "--scenario",
        "team",
        "--from",
        served.url,
    ]
    assert lines[-1] == "Installed r1: run reef-pi with REEF_SCENARIO=team."


def test_install_script_refuses_bad_requests(served, tmp_path: Path) -> None:
    assert _script(served.url, adapter="vim").status_code == 400
    anonymous = httpx.get(f"{served.url}/reef/harness/install", params={"adapter": "pi"})
    assert anonymous.status_code == 401
    assert _script(served.url, scenario="missing").status_code == 404

    scenarios.create("empty")
    text = _script(served.url, scenario="empty").text
    assert "no live release" in text and "rNone" not in text
    script = tmp_path / "empty.sh"
    script.write_text(text)
    full = _fake_bin(tmp_path / "full", "reef", "reef-pi", "pi")
    done = _run(script, f"{full}:/usr/bin:/bin", REEF_TOKEN=TOKEN)
    assert done.returncode != 0 and "scenario empty has no live release yet" in done.stderr
    assert done.stdout == ""  # `reef harness install` never ran


def test_harness_install_from_a_running_serve(
    served, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REEF_TOKEN", TOKEN)
    target = tmp_path / "agent"
    data = reef_json(
        "harness",
        "install",
        "--adapter",
        "pi",
        "--scenario",
        "team",
        "--from",
        served.url,
        "--target",
        str(target),
    )
    assert data["release"] == 1 and data["target"] == str(target)
    assert "reef-install-sh-5e1a" in (target / "AGENTS.md").read_text()
    assert (target / "skills" / "tidy" / "SKILL.md").exists()
    info = PiAdapter().installed(target)
    assert info is not None and info["release"] == 1 and info["scenario"] == "team"
    assert info["base_url"] == served.url  # pi is routed through the serve it came from
    [row] = installs.for_scenario("team")
    assert (row.adapter, row.target, row.release) == ("pi", str(target.resolve()), 1)

    # A wrong token is one clear error, and nothing is installed or recorded.
    monkeypatch.setenv("REEF_TOKEN", "wrong")
    other = tmp_path / "other"
    line = reef_fails(
        "harness", "install", "-a", "pi", "-s", "team", "--from", served.url, "--target", str(other)
    )
    assert "401" in line and not other.exists()
    assert len(installs.for_scenario("team")) == 1


def test_install_script_finds_reefs_pinned_agent_beside_its_venv(served, tmp_path: Path) -> None:
    """A standard install has pi only in <repo>/.tools/bin, not on PATH."""
    script = tmp_path / "install.sh"
    script.write_text(_script(served.url).text)
    repo = tmp_path / "repo"
    venv_bin = _fake_bin(repo / ".venv" / "bin", "reef", "reef-pi")
    tools = repo / ".tools" / "bin"
    missing = _run(script, f"{venv_bin}:/usr/bin:/bin", REEF_TOKEN=TOKEN)
    assert missing.returncode != 0 and "pi is not installed" in missing.stderr
    _fake_bin(tools, "pi")
    done = _run(script, f"{venv_bin}:/usr/bin:/bin", REEF_TOKEN=TOKEN)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[:3] == ["reef", "harness", "install"]


def test_install_script_checks_what_the_release_requires(make_stack, tmp_path: Path) -> None:
    scenarios.create("needs")
    files = {
        **FILES,
        "reef.toml": (
            'format = 1\n\n[requires]\nbinaries = ["reef-fake-jq"]\nenv = ["GITHUB_TOKEN"]\n'
        ),
    }
    publish_files("needs", files, reason="needs a tool", reviewed=True)
    stack = make_stack()
    script = tmp_path / "install.sh"
    script.write_text(_script(stack.url, scenario="needs").text)
    full = _fake_bin(tmp_path / "full", "reef", "reef-pi", "pi")
    no_jq = _run(script, f"{full}:/usr/bin:/bin", REEF_TOKEN=TOKEN, GITHUB_TOKEN="x")
    assert no_jq.returncode != 0 and "r1 needs the program reef-fake-jq" in no_jq.stderr
    assert no_jq.stdout == ""
    _fake_bin(full, "reef-fake-jq")
    no_env = _run(script, f"{full}:/usr/bin:/bin", REEF_TOKEN=TOKEN)
    assert no_env.returncode != 0 and "r1 needs $GITHUB_TOKEN set" in no_env.stderr
    done = _run(script, f"{full}:/usr/bin:/bin", REEF_TOKEN=TOKEN, GITHUB_TOKEN="x")
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("agent", agents.registered(), ids=lambda a: a.name)
def test_every_agent_has_an_install_script(served, tmp_path: Path, agent: agents.Agent) -> None:
    """`?adapter=` takes every agent of the table; the script checks that agent's binary and
    wrapper and installs for it."""
    response = _script(served.url, adapter=agent.name)
    assert response.status_code == 200, response.text
    script = tmp_path / "install.sh"
    script.write_text(response.text)
    assert f"--adapter {agent.name} --scenario team" in response.text
    missing = _run(script, f"{_fake_bin(tmp_path / 'some', 'reef', agent.wrapper)}:/usr/bin:/bin")
    assert missing.returncode != 0 and f"{agent.binary} is not installed" in missing.stderr
    assert agent.package in missing.stderr  # where to get it
    everything = _fake_bin(tmp_path / "all", "reef", agent.wrapper, agent.binary)
    done = _run(script, f"{everything}:/usr/bin:/bin", REEF_TOKEN=TOKEN)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[3:5] == ["--adapter", agent.name]
    assert (
        done.stdout.splitlines()[-1]
        == f"Installed r1: run {agent.wrapper} with REEF_SCENARIO=team."
    )
