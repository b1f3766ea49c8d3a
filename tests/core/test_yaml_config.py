"""The shared YAML settings loader (core/yaml_config.py) that `reef serve -c` and `reefd
start -c` both use: every bad input is one clear line of the caller's error class, with its
fix, no traceback, and nothing written."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict, Field, model_validator

from reef_cli.core import yaml_config
from reef_cli.core.errors import ConfigError, ReefError, ServeError

FIX = "pass a readable YAML file to -c"


class _Inner(BaseModel):
    model_config = ConfigDict(extra="forbid")
    size: int = Field(1, ge=1)


class _Settings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    port: int = 1
    inner: _Inner = Field(default_factory=_Inner)
    mode: str = "a"

    @model_validator(mode="after")
    def _pair(self) -> _Settings:
        if self.mode == "b" and self.port == 1:
            raise ValueError("mode b needs a port other than 1")
        return self


# name -> (bytes written, the message's part after "<path> ")
BAD: dict[str, tuple[bytes, str]] = {
    "not-utf8": (b"\xff\xfe x: 1\n", "is not UTF-8 text (byte 0 is not)"),
    "syntax": (b"port: 1\nhost: [1,\n  2\nmode: x\n", "is not valid YAML: expected ',' or ']'"),
    "bad-indent": (b"a: 1\n b: 2\n", "is not valid YAML: mapping values are not allowed here"),
    "nul": (b"a: 1\nkey\x00: 1\n", "is not valid YAML: unacceptable character #x0000"),
    "two-documents": (
        b"--- {a: 1}\n--- {b: 2}\n",
        "is not valid YAML: expected a single document in the stream, but found another "
        "document at line 2",
    ),
    "impossible-date": (b"a: 2020-02-30\n", "is not valid YAML: a value it cannot read (day"),
    "bad-int-tag": (b"a: !!int abc\n", "is not valid YAML: a value it cannot read"),
    "python-tag": (b"a: !!python/object:os.system x\n", "is not valid YAML: could not determine"),
    "deep": (b"a: " + b"{b: " * 3000 + b"1" + b"}" * 3000 + b"\n", "is nested too deeply"),
    "top-list": (b"- 1\n- 2\n", "must hold a mapping of settings (key: value lines), not a list"),
    "top-string": (b'"just a string"\n', "must hold a mapping of settings"),
    "top-number": (b"3\n", "must hold a mapping of settings (key: value lines), not a number"),
    "top-false": (b"false\n", "must hold a mapping of settings (key: value lines), not a boolean"),
}


def _one_line(exc: ReefError) -> str:
    line = exc.one_line()
    assert "\n" not in line and exc.hint == FIX, line
    assert "Traceback" not in line
    return line


@pytest.mark.parametrize("error", [ServeError, ConfigError])
@pytest.mark.parametrize("case", sorted(BAD))
def test_each_bad_file_is_one_line_of_the_callers_error(
    tmp_path: Path, case: str, error: type[ReefError]
) -> None:
    data, want = BAD[case]
    path = tmp_path / "settings.yaml"
    path.write_bytes(data)
    before = sorted(os.listdir(tmp_path))
    with pytest.raises(error) as caught:
        yaml_config.load_mapping(path, error=error, fix=FIX)
    assert type(caught.value) is error
    line = _one_line(caught.value)
    assert line.startswith(f"{path} {want}"), line
    assert sorted(os.listdir(tmp_path)) == before  # nothing written
    assert path.read_bytes() == data


def test_a_syntax_error_says_the_line(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("port: 1\nhost: a\n  mode: b\n")
    with pytest.raises(ServeError) as caught:
        yaml_config.load_mapping(path, error=ServeError, fix=FIX)
    assert caught.value.message == (
        f"{path} is not valid YAML: mapping values are not allowed here at line 3"
    )
    path.write_text("a: 1\nb: 2\nc\x00: 3\n")
    with pytest.raises(ServeError, match=r"unacceptable character #x0000 .* at line 3$"):
        yaml_config.load_mapping(path, error=ServeError, fix=FIX)


def test_missing_and_unreadable(tmp_path: Path) -> None:
    missing = tmp_path / "none.yaml"
    with pytest.raises(ConfigError) as caught:
        yaml_config.load_mapping(missing, error=ConfigError, fix=FIX)
    assert _one_line(caught.value).startswith(f"cannot read {missing}: No such file or directory")
    with pytest.raises(ConfigError, match=r"cannot read .*: Is a directory"):
        yaml_config.load_mapping(tmp_path, error=ConfigError, fix=FIX)
    assert not missing.exists()
    if os.geteuid() != 0:  # root reads anything
        locked = tmp_path / "locked.yaml"
        locked.write_text("a: 1\n")
        locked.chmod(0)
        with pytest.raises(ConfigError, match=r"cannot read .*: Permission denied"):
            yaml_config.load_mapping(locked, error=ConfigError, fix=FIX)


def test_a_good_file_an_empty_one_and_keys_as_text(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("port: 2\ninner: {size: 3}\n1: one\n")
    assert yaml_config.load_mapping(path, error=ServeError, fix=FIX) == {
        "port": 2,
        "inner": {"size": 3},
        "1": "one",
    }
    for empty in ("", "# only a comment\n", "---\n", "~\n"):
        path.write_text(empty)
        assert yaml_config.load_mapping(path, error=ServeError, fix=FIX) == {}


def test_validate_names_the_key(tmp_path: Path) -> None:
    def refused(data: dict[str, object]) -> str:
        with pytest.raises(ConfigError) as caught:
            yaml_config.validate(_Settings, data, error=ConfigError, what="x.yaml", fix=FIX)
        return _one_line(caught.value)

    assert yaml_config.validate(
        _Settings, {"port": 5}, error=ConfigError, what="x.yaml", fix=FIX
    ) == _Settings(port=5)
    assert refused({"port": "many"}).startswith("x.yaml 'port': Input should be a valid integer")
    assert refused({"inner": {"size": 0}}).startswith(
        "x.yaml 'inner.size': Input should be greater than or equal to 1 (fix:"
    )
    assert refused({"bogus": 1}).startswith("x.yaml 'bogus': Extra inputs are not permitted")
    # a rule about no single key: no '?' in its place, and no "Value error, " prefix
    assert refused({"mode": "b"}).startswith("x.yaml: mode b needs a port other than 1 (fix:")
    # more than one problem: the first, and how many more
    assert "(and 2 more problems)" in refused({"port": "x", "mode": [1], "zz": 1})
    assert "(and 1 more problem)" in refused({"port": "x", "zz": 1})
    # a key holding an escape sequence is shown escaped, not sent to the terminal
    assert "\x1b" not in refused({"\x1b[2J": 1})
