"""The built-in torch engine on a real uvicorn server: OpenAI chat with token ids and
logprobs, and every weight update of SGLang's contract — gloo broadcasts from a rank-0
trainer in this process, disk, shared tensors, LoRA — checked by the engine's checksum."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

import httpx  # noqa: E402

from reef_cli.server.thread import ServerThread  # noqa: E402
from reefd import models  # noqa: E402
from reefd.engine.torch_server import Engine, create_engine_app  # noqa: E402
from reefd.sync import buckets, group  # noqa: E402

MESSAGES = [{"role": "user", "content": "hello there"}]


@dataclass
class Served:
    url: str
    client: httpx.Client
    engine: Engine
    loaded: models.Loaded

    def chat(self, **body: Any) -> dict[str, Any]:
        request = {"messages": MESSAGES, "max_tokens": 8, "temperature": 0, **body}
        answer = self.client.post("/v1/chat/completions", json=request)
        assert answer.status_code == 200, answer.text
        return dict(answer.json())

    def post(self, path: str, **body: Any) -> httpx.Response:
        return self.client.post(path, json=body)

    def checksum(self) -> str:
        answer = self.post("/weights_checker", action="checksum").json()
        assert answer["success"], answer
        return str(answer["checksum"])

    def version(self) -> str:
        return str(self.client.get("/model_info").json()["weight_version"])


@pytest.fixture
def serve() -> Iterator[Callable[..., Served]]:
    """``serve(token_delay=...)`` -> a tiny engine on a free port, stopped after the test."""
    stack: list[tuple[ServerThread, httpx.Client]] = []

    def start(**options: Any) -> Served:
        loaded = models.load("tiny")
        app = create_engine_app(loaded, group_timeout=20.0, **options)
        server = ServerThread(app).start()
        client = httpx.Client(base_url=server.url, timeout=30.0)
        stack.append((server, client))
        return Served(server.url, client, app.state.engine, loaded)

    yield start
    for server, client in reversed(stack):
        client.close()
        server.stop()


@pytest.fixture
def served(serve: Callable[..., Served]) -> Served:
    return serve()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _new_weights(seed: int) -> dict[str, Any]:
    return {k: v.clone() for k, v in models.load(f"tiny:{seed}").model.state_dict().items()}


class Trainer:
    """Rank 0 of a weight-update group, the way a sync drives it: every request is sent
    in a thread while this side joins or broadcasts."""

    def __init__(self, served: Served, name: str = "reefd-test") -> None:
        self.served = served
        self.name = name
        self.pool = ThreadPoolExecutor(2)
        port = _free_port()
        body = {
            "master_address": "127.0.0.1",
            "master_port": port,
            "rank_offset": 1,
            "world_size": 2,
            "group_name": name,
            "backend": "gloo",
        }
        sent = self.pool.submit(served.post, "/init_weights_update_group", **body)
        self.group = group.join("gloo", "127.0.0.1", port, 0, 2, name, timeout=20.0)
        answer = sent.result(30).json()
        assert answer["success"], answer

    def send(self, bucket: list[buckets.TensorSpec], **extra: Any) -> Future[httpx.Response]:
        body = {
            "names": [s.name for s in bucket],
            "dtypes": [s.dtype for s in bucket],
            "shapes": [list(s.shape) for s in bucket],
            "group_name": self.name,
            "flush_cache": False,
            "load_format": "flattened_bucket",
            **extra,
        }
        return self.pool.submit(self.served.post, "/update_weights_from_distributed", **body)

    def push(
        self, tensors: dict[str, Any], version: str, bucket_bytes: int = 64 * 1024
    ) -> list[dict[str, Any]]:
        plan = buckets.plan([buckets.spec_of(n, t) for n, t in tensors.items()], bucket_bytes)
        answers = []
        for index, bucket in enumerate(plan):
            last = index == len(plan) - 1
            sent = self.send(bucket, weight_version=version if last else None)
            self.group.broadcast(buckets.flatten(tensors, bucket), src=0)
            answers.append(sent.result(30).json())
        return answers

    def close(self) -> None:
        answer = self.served.post("/destroy_weights_update_group", group_name=self.name).json()
        assert answer["success"], answer
        self.group.destroy()
        self.pool.shutdown()


def _sse(response: httpx.Response) -> Iterator[Any]:
    for line in response.iter_lines():
        if not line:
            continue
        assert line.startswith("data: "), line
        payload = line.removeprefix("data: ")
        yield payload if payload == "[DONE]" else json.loads(payload)


def _streamed_text(served: Served, **body: Any) -> str:
    request = {"messages": MESSAGES, "temperature": 0, "stream": True, **body}
    with served.client.stream("POST", "/v1/chat/completions", json=request) as response:
        chunks = [c for c in _sse(response) if c != "[DONE]"]
    return "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])


def _wait_for(check: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.01)


# --- chat --------------------------------------------------------------------------------


def test_non_streamed_answers_carry_ids_logprobs_and_version(served: Served) -> None:
    answer = served.chat(max_tokens=12)
    choice = answer["choices"][0]
    ids, logprobs = choice["token_ids"], choice["logprobs"]["content"]
    assert answer["object"] == "chat.completion" and answer["model"] == "tiny"
    assert len(ids) == len(logprobs) == answer["usage"]["completion_tokens"] == 12
    assert choice["finish_reason"] == "length"
    assert answer["prompt_token_ids"] == models.prompt_ids(served.loaded.tokenizer, MESSAGES)
    assert answer["metadata"] == {"weight_version": "base"}
    assert choice["message"] == {
        "role": "assistant",
        "content": served.loaded.tokenizer.decode(ids, skip_special_tokens=True),
    }
    # Greedy is deterministic, and the logprobs are what a trainer recomputes in one pass.
    again = served.chat(max_tokens=12)["choices"][0]
    assert again["token_ids"] == ids and again["logprobs"] == choice["logprobs"]
    full = torch.tensor([answer["prompt_token_ids"] + ids])
    with torch.no_grad():
        logits = served.loaded.model(full).logits[0].float().log_softmax(-1)
    start = len(answer["prompt_token_ids"])
    expected = [float(logits[start - 1 + i, t]) for i, t in enumerate(ids)]
    assert [e["logprob"] for e in logprobs] == pytest.approx(expected, abs=1e-4)


def test_sampling_is_seeded_and_stop_strings_cut(served: Served) -> None:
    one = served.chat(temperature=1.0, seed=7, max_tokens=16)["choices"][0]["token_ids"]
    assert served.chat(temperature=1.0, seed=7, max_tokens=16)["choices"][0]["token_ids"] == one
    other = served.chat(temperature=1.0, top_p=0.9, seed=8, max_tokens=16)["choices"][0]
    assert other["token_ids"] != one
    text = served.chat(max_tokens=12)["choices"][0]["message"]["content"]
    stop = text[4:6]
    cut = served.chat(max_tokens=12, stop=[stop])["choices"][0]
    assert cut["message"]["content"] == text[: text.find(stop)]
    assert cut["finish_reason"] == "stop"
    streamed = _streamed_text(served, max_tokens=12, stop=stop)  # never shows part of the stop
    assert streamed == cut["message"]["content"]


def test_streamed_answers_are_sse_chunks_ending_with_done(served: Served) -> None:
    whole = served.chat(max_tokens=10)["choices"][0]["message"]["content"]
    body = {
        "messages": MESSAGES,
        "max_tokens": 10,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
        "logprobs": True,
    }
    with served.client.stream("POST", "/v1/chat/completions", json=body) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        events = list(_sse(response))
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    assert text == whole
    finals = [c for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]]
    assert [c["choices"][0]["finish_reason"] for c in finals] == ["length"]
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 10
    logprobs = [c["choices"][0]["logprobs"] for c in chunks[1:-2]]
    assert len(logprobs) == 10 and all(lp["content"][0]["logprob"] < 0 for lp in logprobs)


def test_status_endpoints_and_bad_requests(served: Served) -> None:
    client = served.client
    assert client.get("/health").status_code == 200
    assert client.get("/v1/models").json()["data"][0]["id"] == "tiny"
    info = client.get("/model_info").json()
    assert info["is_generation"] and info["model_path"] == "tiny"
    assert client.get("/server_info").json()["tp_size"] == 1
    values = served.post("/get_weights_by_name", name="lm_head.weight", truncate_size=5).json()
    expected = served.loaded.model.state_dict()["lm_head.weight"].reshape(-1)[:5].tolist()
    assert values == pytest.approx(expected)
    assert served.post("/get_weights_by_name", name="nope").status_code == 400
    assert served.post("/weights_checker", action="snapshot").json()["success"] is False
    assert client.post("/v1/chat/completions", json={"max_tokens": 3}).status_code == 400
    assert client.post("/v1/chat/completions", content=b"{").status_code == 400
    too_long = [{"role": "user", "content": "x" * 600}]
    refused = client.post("/v1/chat/completions", json={"messages": too_long})
    assert refused.status_code == 400 and "context" in refused.json()["error"]["message"]
    assert served.checksum() == models.state_checksum(served.loaded.model)


# --- weight updates ----------------------------------------------------------------------


def test_a_gloo_broadcast_from_the_trainer_swaps_the_weights(served: Served) -> None:
    before = served.checksum()
    answer_before = served.chat()
    trainer = Trainer(served)
    try:
        new = _new_weights(1)
        answers = trainer.push(new, "w1")
        assert len(answers) > 1 and all(a["success"] for a in answers), answers
        assert [a["weight_version"] for a in answers][-2:] == ["base", "w1"]
        assert served.checksum() == models.state_checksum(new) != before
        assert served.version() == "w1"
        answer = served.chat()
        assert answer["metadata"]["weight_version"] == "w1"
        assert answer["choices"][0]["logprobs"] != answer_before["choices"][0]["logprobs"]

        # load_format null: one broadcast per tensor, in list order
        newer = _new_weights(2)
        specs = [buckets.spec_of(n, t) for n, t in sorted(newer.items())]
        sent = trainer.send(specs, load_format=None, weight_version="w2")
        for spec in specs:
            trainer.group.broadcast(newer[spec.name].contiguous(), src=0)
        assert sent.result(30).json()["success"]
        assert served.checksum() == models.state_checksum(newer)
        assert served.version() == "w2"
    finally:
        trainer.close()
    assert served.post("/destroy_weights_update_group", group_name="reefd-test").status_code == 400


def test_a_bad_update_is_refused_after_the_broadcast_and_changes_nothing(served: Served) -> None:
    before = served.checksum()
    trainer = Trainer(served)
    try:
        weight = torch.ones(64, 64)
        for name, tensor in (("model.nope.weight", weight), ("lm_head.weight", weight)):
            specs = [
                buckets.spec_of("model.norm.weight", torch.zeros(64)),
                buckets.spec_of(name, tensor),
            ]
            sent = trainer.send(specs, weight_version="w9")
            flat = torch.cat([torch.zeros(64), tensor.reshape(-1)])
            trainer.group.broadcast(flat, src=0)  # returns: the engine still received it
            answer = sent.result(30)
            assert answer.status_code == 400
            assert answer.json()["success"] is False and name in answer.json()["message"]
        assert served.checksum() == before and served.version() == "base"
        # the group is still usable afterwards
        assert all(a["success"] for a in trainer.push(_new_weights(3), "w1"))
    finally:
        trainer.close()
    orphan = served.post(
        "/update_weights_from_distributed",
        names=["lm_head.weight"],
        dtypes=["float32"],
        shapes=[[259, 64]],
        group_name="never-made",
        load_format="flattened_bucket",
    )
    assert orphan.status_code == 400 and "never-made" in orphan.json()["message"]


def test_requests_during_an_update_queue_behind_it_and_all_succeed(
    serve: Callable[..., Served],
) -> None:
    served = serve(token_delay=0.01)
    trainer = Trainer(served)
    pool = ThreadPoolExecutor(8)
    try:
        first = pool.submit(served.chat, max_tokens=30)
        _wait_for(lambda: served.engine.generating == 1)
        new = _new_weights(4)
        specs = [buckets.spec_of(n, t) for n, t in new.items()]
        update = trainer.send(specs, weight_version="w1")
        time.sleep(0.3)  # the update is queued behind the first answer, then waits for data
        during = [pool.submit(served.chat, max_tokens=3) for _ in range(4)]
        started = time.monotonic()
        assert served.client.get("/health").status_code == 200
        assert time.monotonic() - started < 1.0  # the event loop is not blocked
        trainer.group.broadcast(buckets.flatten(new, buckets.plan(specs, 1 << 30)[0]), src=0)
        assert update.result(30).json()["success"]
        assert first.result(30)["metadata"]["weight_version"] == "base"
        assert [f.result(30)["metadata"]["weight_version"] for f in during] == ["w1"] * 4
    finally:
        pool.shutdown()
        trainer.close()


def test_update_from_disk(served: Served, tmp_path: Path) -> None:
    safetensors = pytest.importorskip("safetensors.torch")
    new = _new_weights(5)
    safetensors.save_file(new, str(tmp_path / "model.safetensors"))
    answer = served.post("/update_weights_from_disk", model_path=str(tmp_path), weight_version="w3")
    assert answer.json()["success"], answer.text
    assert served.checksum() == models.state_checksum(new) and served.version() == "w3"
    missing = served.post("/update_weights_from_disk", model_path=str(tmp_path / "none"))
    assert missing.status_code == 400 and served.version() == "w3"


def test_update_from_shared_tensors(served: Served) -> None:
    ipc = pytest.importorskip("reefd.sync.ipc")
    new = _new_weights(6)
    shared = [(n, t.clone()) for n, t in sorted(new.items())]
    payload = ipc.serialize_named_tensors(shared)
    answer = served.post(
        "/update_weights_from_tensor",
        serialized_named_tensors=[payload],
        load_format=None,
        flush_cache=False,
        weight_version="w4",
    )
    assert answer.json()["success"], answer.text
    assert served.checksum() == models.state_checksum(new) and served.version() == "w4"
    refused = served.post("/update_weights_from_tensor", serialized_named_tensors=["not base64!"])
    assert refused.status_code == 400 and served.version() == "w4"


def test_lora_load_changes_the_answers_and_unload_restores_them(
    served: Served, tmp_path: Path
) -> None:
    peft = pytest.importorskip("peft")
    config = peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "down_proj"])
    trained = peft.get_peft_model(models.load("tiny").model, config)
    for name, param in trained.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(param, std=0.5)
    trained.save_pretrained(tmp_path / "a1")
    before, answer = served.checksum(), served.chat()

    loaded = served.post("/load_lora_adapter", lora_name="a1", lora_path=str(tmp_path / "a1"))
    assert loaded.json()["success"], loaded.text
    assert served.checksum() == models.state_checksum(trained) != before
    assert served.version() == "a1"
    adapted = served.chat()
    assert adapted["metadata"]["weight_version"] == "a1"
    assert adapted["choices"][0]["logprobs"] != answer["choices"][0]["logprobs"]
    again = served.post("/load_lora_adapter", lora_name="a1", lora_path=str(tmp_path / "a1"))
    assert again.status_code == 400

    # the next version loads beside it and serves; the old one then goes (as LoraSync does)
    with torch.no_grad():
        for name, param in trained.named_parameters():
            if "lora_B" in name:
                param.mul_(-1.0)
    trained.save_pretrained(tmp_path / "a2")
    second = served.post(
        "/load_lora_adapter", lora_name="a2", lora_path=str(tmp_path / "a2"), weight_version="w2"
    )
    assert second.json()["success"], second.text
    assert served.checksum() == models.state_checksum(trained) and served.version() == "w2"
    assert served.post("/unload_lora_adapter", lora_name="a1").json()["success"]
    assert served.checksum() == models.state_checksum(trained) and served.version() == "w2"

    unloaded = served.post("/unload_lora_adapter", lora_name="a2")
    assert unloaded.json()["success"], unloaded.text
    assert served.checksum() == before and served.version() == "base"
    assert served.chat()["choices"][0] == answer["choices"][0]
    assert served.post("/unload_lora_adapter", lora_name="a1").status_code == 400
    assert (
        served.post("/load_lora_adapter", lora_name="x", lora_path=str(tmp_path)).status_code == 400
    )


# --- scheduling --------------------------------------------------------------------------


def test_flush_cache_never_waits_and_a_gone_client_stops_its_generation(
    serve: Callable[..., Served],
) -> None:
    served = serve(token_delay=0.01)
    assert served.post("/flush_cache").status_code == 200
    body = {"messages": MESSAGES, "max_tokens": 400, "temperature": 0, "stream": True}
    with served.client.stream("POST", "/v1/chat/completions", json=body):
        _wait_for(lambda: served.engine.generating == 1)
        # no prefix cache: nothing to wait for, even mid-generation (SGLang's 400 while
        # busy is what the client retries: tests/reefd/engine/test_client.py)
        assert served.post("/flush_cache").json()["success"] is True
    # 400 tokens take 4 s; the closed stream stops the generation at its next token
    started = time.monotonic()
    _wait_for(lambda: served.engine.generating == 0, timeout=2.0)
    assert time.monotonic() - started < 2.0


def test_pause_holds_new_generations_until_continue(serve: Callable[..., Served]) -> None:
    served = serve(token_delay=0.005)
    pool = ThreadPoolExecutor(2)
    try:
        running = pool.submit(served.chat, max_tokens=40)
        _wait_for(lambda: served.engine.generating == 1)
        assert served.post("/pause_generation", mode="in_place").json()["success"]
        waiting = pool.submit(served.chat, max_tokens=3)
        assert running.result(10)["choices"][0]["finish_reason"] == "length"  # in flight: done
        time.sleep(0.3)
        assert not waiting.done()
        assert served.client.get("/server_info").json()["paused"] is True
        assert served.post("/continue_generation").json()["success"]
        assert waiting.result(10)["usage"]["completion_tokens"] == 3
    finally:
        pool.shutdown()


def test_join_is_asynchronous_so_the_engine_keeps_serving(served: Served) -> None:
    """/init_weights_update_group waits for the trainer on a thread of its own."""
    port = _free_port()
    body = {
        "master_address": "127.0.0.1",
        "master_port": port,
        "rank_offset": 1,
        "world_size": 2,
        "group_name": "late",
        "backend": "gloo",
    }
    done = threading.Event()
    pool = ThreadPoolExecutor(1)
    sent = pool.submit(lambda: (served.post("/init_weights_update_group", **body), done.set())[0])
    time.sleep(0.2)
    assert not done.is_set()
    assert served.chat(max_tokens=2)["usage"]["completion_tokens"] == 2  # serving meanwhile
    trainer_group = group.join("gloo", "127.0.0.1", port, 0, 2, "late", timeout=20.0)
    assert sent.result(30).json()["success"]
    again = served.post("/init_weights_update_group", **body)
    assert again.status_code == 400 and "exists" in again.json()["message"]
    assert served.post("/destroy_weights_update_group", group_name="late").json()["success"]
    trainer_group.destroy()
    pool.shutdown()
