from __future__ import annotations

from reef_cli.core.diff import diff_trees


def test_added_removed_modified_and_counts() -> None:
    old = {"a.md": "one\ntwo\n", "gone.md": "bye\n", "same.md": "s\n"}
    new = {"a.md": "one\n2\n", "new.md": "hi\nthere\n", "same.md": "s\n"}
    changes = {c.path: c for c in diff_trees(old, new, "r1", "r2")}
    assert set(changes) == {"a.md", "gone.md", "new.md"}
    assert (changes["a.md"].status, changes["a.md"].added, changes["a.md"].removed) == (
        "modified",
        1,
        1,
    )
    assert changes["new.md"].status == "added" and changes["new.md"].added == 2
    assert changes["gone.md"].status == "removed" and changes["gone.md"].removed == 1
    assert "--- r1/a.md\n+++ r2/a.md\n" in changes["a.md"].diff
    assert "--- /dev/null" in changes["new.md"].diff


def test_equal_trees_have_no_diff() -> None:
    assert diff_trees({"a": "x"}, {"a": "x"}) == []


def test_missing_final_newline_still_gives_line_based_output() -> None:
    [change] = diff_trees({"a": "x"}, {"a": "y"})
    assert change.diff.endswith("+y\n")


def test_a_file_diff_shows_its_counts_and_the_diff_unless_asked_not_to() -> None:
    [change] = diff_trees({}, {"a": ""})
    assert list(change.to_json().items()) == [
        ("path", "a"),
        ("status", "added"),
        ("added", 0),
        ("removed", 0),
        ("diff", ""),
    ]
    assert "diff" not in change.to_json(with_diff=False)
