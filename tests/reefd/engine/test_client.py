"""EngineClient against a real server: the fake SGLang one, and sockets that misbehave."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

pytest.importorskip("torch")

from fastapi import FastAPI
from fastapi.responses import PlainTextResponse

from reef_cli.core.errors import EngineError
from reef_cli.server.thread import ServerThread
from reefd.engine.client import EngineClient
from tests.fakes.fake_sglang import FakeSGLang


@pytest.fixture
def fake() -> Iterator[FakeSGLang]:
    with FakeSGLang(flush_busy=3, tp_size=2) as engine:
        yield engine


def test_state_endpoints(fake: FakeSGLang) -> None:
    client = EngineClient(fake.url)
    assert client.health() is True
    assert client.model_info()["is_generation"] is True
    assert client.server_info()["tp_size"] == 2
    assert client.weight_version() == "base"
    assert len(client.checksum()) == 64
    assert fake.calls[-1].body == {"action": "checksum"}


def test_flush_cache_retries_on_400(fake: FakeSGLang) -> None:
    client = EngineClient(fake.url, flush_wait=0.01)
    client.flush_cache()  # SGLang answers plain text, not JSON: still a success
    assert fake.endpoints() == ["/flush_cache"] * 4


def test_flush_cache_gives_up(fake: FakeSGLang) -> None:
    client = EngineClient(fake.url, flush_retries=1, flush_wait=0.01)
    with pytest.raises(EngineError, match=r"/flush_cache still busy after 2 tries"):
        client.flush_cache()


def test_request_bodies(fake: FakeSGLang) -> None:
    client = EngineClient(fake.url)
    client.pause_generation()
    client.continue_generation()
    with pytest.raises(EngineError):
        client.unload_lora_adapter("w1")
    with pytest.raises(EngineError):
        client.update_weights_from_disk("/nowhere", "w1")
    assert [(c.endpoint, c.body) for c in fake.calls] == [
        ("/pause_generation", {"mode": "in_place"}),
        ("/continue_generation", {}),
        ("/unload_lora_adapter", {"lora_name": "w1"}),
        ("/update_weights_from_disk", {"model_path": "/nowhere", "weight_version": "w1"}),
    ]


def test_refusal_names_the_endpoint_and_the_reason(fake: FakeSGLang) -> None:
    client = EngineClient(fake.url)
    with pytest.raises(EngineError) as caught:
        client.destroy_weights_update_group("nope")
    line = caught.value.one_line()
    assert "/destroy_weights_update_group" in line
    assert "The group to be destroyed does not exist." in line
    assert "\n" not in line


def test_get_weights_by_name_missing(fake: FakeSGLang) -> None:
    with pytest.raises(EngineError, match="/get_weights_by_name"):
        EngineClient(fake.url).get_weights_by_name("model.norm.weight")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_unreachable_engine() -> None:
    client = EngineClient(f"http://127.0.0.1:{free_port()}", timeout=2)
    assert client.health() is False
    with pytest.raises(EngineError) as caught:
        client.server_info()
    assert "/server_info" in caught.value.message and "unreachable" in caught.value.message


def serve_raw(handler: str) -> tuple[socket.socket, int]:
    """A socket that accepts one connection and closes it ("close") or stays silent."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)

    def run() -> None:
        held: list[socket.socket] = []
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            conn.recv(65536)
            if handler == "close":
                conn.close()
            else:
                held.append(conn)

    threading.Thread(target=run, daemon=True).start()
    return listener, listener.getsockname()[1]


def test_connection_dropped() -> None:
    listener, port = serve_raw("close")
    try:
        with pytest.raises(EngineError, match=r"/update_weights_from_distributed .*unreachable"):
            EngineClient(f"http://127.0.0.1:{port}", timeout=5).update_weights_from_distributed(
                ["a"], ["float32"], [[1]], group_name="g"
            )
    finally:
        listener.close()


def test_timeout() -> None:
    listener, port = serve_raw("silent")
    try:
        with pytest.raises(EngineError, match=r"/flush_cache .*did not answer within 0.2 s"):
            EngineClient(f"http://127.0.0.1:{port}", timeout=0.2).flush_cache()
    finally:
        listener.close()


def test_answers_that_are_not_json_or_not_ok() -> None:
    app = FastAPI()

    @app.get("/model_info")
    def model_info() -> PlainTextResponse:
        return PlainTextResponse("hello")

    @app.post("/load_lora_adapter")
    def load() -> PlainTextResponse:
        return PlainTextResponse("boom\ntrace", status_code=500)

    with ServerThread(app) as srv:
        client = EngineClient(srv.url)
        with pytest.raises(EngineError, match=r"/model_info answered 200 without JSON: hello"):
            client.model_info()
        with pytest.raises(EngineError) as caught:
            client.load_lora_adapter("w1", "/tmp/x")
        assert caught.value.message == "engine /load_lora_adapter answered 500: boom trace"
