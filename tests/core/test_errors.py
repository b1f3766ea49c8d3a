"""Every ``ReefError`` says how it is shown (exit code, HTTP status, job end), and
docs/errors.md lists each one with the same numbers."""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

import pytest

from reef_cli.core.errors import ReefError

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("reef_cli", "adapters", "recipes", "sandbox", "reefd")
KINDS = {"rejected", "stopped", "failed", "invalid"}
ROW = re.compile(r"^\|\s*`(\w+)`\s*\|\s*(\d+)\s*\|\s*(\d{3})\s*\|\s*(\w+)\s*\|", re.MULTILINE)


def all_error_classes() -> list[type[ReefError]]:
    for top in PACKAGES:
        package = importlib.import_module(top)
        for info in pkgutil.walk_packages(package.__path__, top + "."):
            if ".templates" in info.name:
                continue
            importlib.import_module(info.name)
    found: list[type[ReefError]] = []
    todo: list[type[ReefError]] = [ReefError]
    while todo:
        cls = todo.pop()
        if cls.__module__.startswith(PACKAGES):  # not a test's own subclass
            found.append(cls)
        todo.extend(cls.__subclasses__())
    return sorted(found, key=lambda c: c.__name__)


def documented() -> dict[str, tuple[int, int, str]]:
    text = (ROOT / "docs" / "errors.md").read_text(encoding="utf-8")
    return {m[1]: (int(m[2]), int(m[3]), m[4]) for m in ROW.finditer(text)}


@pytest.mark.parametrize("cls", all_error_classes(), ids=lambda c: c.__name__)
def test_each_error_maps_to_a_documented_status(cls: type[ReefError]) -> None:
    assert 400 <= cls.http_status < 600, f"{cls.__name__}.http_status"
    assert cls.kind in KINDS, f"{cls.__name__}.kind"
    docs = documented()
    assert cls.__name__ in docs, f"docs/errors.md has no row for {cls.__name__}"
    assert docs[cls.__name__] == (cls.exit_code, cls.http_status, cls.kind), cls.__name__


def test_the_docs_list_no_class_that_does_not_exist() -> None:
    names = {c.__name__ for c in all_error_classes()}
    assert set(documented()) - names == set()


def test_a_new_error_needs_no_table_to_reach_the_client() -> None:
    """The server reads the class's attributes: a subclass is never silently a 500."""
    from fastapi.testclient import TestClient

    from reef_cli.server.app import create_app
    from reef_cli.server.serve_config import ServeConfig

    class Teapot(ReefError):
        http_status = 418

    app = create_app(ServeConfig(upstream="http://127.0.0.1:9/v1"), tokens=None)

    @app.api.get("/teapot")
    def teapot() -> None:
        raise Teapot("short and stout", "pour")

    response = TestClient(app.api).get("/teapot")
    assert response.status_code == 418
    assert response.json()["error"] == {
        "message": "short and stout",
        "hint": "pour",
        "type": "Teapot",
    }
