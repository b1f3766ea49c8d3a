"""The one HTTP client for an inference engine: SGLang or reefd's torch engine.

Both speak SGLang's endpoints (the spec's engine contract), so the daemon and every
weight sync drive them through this class alone. It is synchronous (httpx) on purpose:
the weight syncs run a request in a thread while the calling thread broadcasts, and a
plain blocking call is the simplest thing to put in a thread. Every failure, whether the
transport, an HTTP status or ``success: false``, becomes one ``EngineError`` whose
message names the endpoint, so the daemon can show it as is.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

import httpx

from reef_cli.core.errors import EngineError

HINT = "check the engine's log; `reefd status` shows its URL"


class EngineClient:
    """``EngineClient("http://127.0.0.1:30000")``: one method per engine endpoint."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout: float = 120.0,
        flush_retries: int = 20,
        flush_wait: float = 0.25,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.flush_retries = flush_retries
        self.flush_wait = flush_wait
        # trust_env off: the engine is on this host or the cluster network, and a proxy
        # from the environment must not sit between a trainer and its engine.
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout, trust_env=False)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> EngineClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- transport ---------------------------------------------------------------------

    def _request(
        self, method: str, endpoint: str, body: dict[str, Any] | None = None
    ) -> httpx.Response:
        try:
            return self._http.request(method, endpoint, json=body)
        except httpx.TimeoutException:
            raise EngineError(
                f"engine {endpoint} at {self.base_url} did not answer within {self.timeout:g} s",
                HINT,
            ) from None
        except httpx.HTTPError as exc:
            reason = " ".join(str(exc).split()) or type(exc).__name__
            raise EngineError(
                f"engine {endpoint} at {self.base_url} unreachable: {reason}", HINT
            ) from None

    def _call(self, method: str, endpoint: str, body: dict[str, Any] | None = None) -> Any:
        """The JSON answer of a 2xx; anything else (or ``success: false``) -> EngineError."""
        response = self._request(method, endpoint, body)
        answer = _json(response)
        if response.status_code >= 300:
            raise EngineError(
                f"engine {endpoint} answered {response.status_code}: {_reason(response, answer)}",
                HINT,
            )
        if answer is _NOT_JSON:
            raise EngineError(
                f"engine {endpoint} answered {response.status_code} without JSON: "
                f"{_snippet(response.text)}",
                HINT,
            )
        if isinstance(answer, dict) and answer.get("success") is False:
            raise EngineError(
                f"engine {endpoint} refused: {_snippet(str(answer.get('message') or 'no reason'))}",
                HINT,
            )
        return answer

    def _post(self, endpoint: str, body: dict[str, Any]) -> Any:
        return self._call("POST", endpoint, body)

    # -- state -------------------------------------------------------------------------

    def health(self) -> bool:
        """True when the engine answers /health with 200; never raises."""
        try:
            return self._http.get("/health").status_code == 200
        except httpx.HTTPError:
            return False

    def model_info(self) -> dict[str, Any]:
        return _dict(self._call("GET", "/model_info"), "/model_info")

    def server_info(self) -> dict[str, Any]:
        return _dict(self._call("GET", "/server_info"), "/server_info")

    def weight_version(self) -> str | None:
        version = self.model_info().get("weight_version")
        return None if version is None else str(version)

    def checksum(self) -> str:
        answer = _dict(self._post("/weights_checker", {"action": "checksum"}), "/weights_checker")
        checksum = answer.get("checksum")
        if not isinstance(checksum, str):
            raise EngineError("engine /weights_checker answered without a checksum", HINT)
        return checksum

    def get_weights_by_name(self, name: str, truncate_size: int = 10) -> list[Any]:
        answer = self._post("/get_weights_by_name", {"name": name, "truncate_size": truncate_size})
        if isinstance(answer, dict) and "parameter" in answer:  # some builds wrap the list
            answer = answer["parameter"]
        if not isinstance(answer, list):
            raise EngineError(f"engine /get_weights_by_name has no weights named {name!r}", HINT)
        return answer

    # -- distributed weight updates ----------------------------------------------------

    def init_weights_update_group(
        self,
        master_address: str,
        master_port: int,
        rank_offset: int,
        world_size: int,
        group_name: str,
        backend: str,
    ) -> dict[str, Any]:
        """Returns once the engine's ranks have joined (the trainer joins concurrently)."""
        return self._post(
            "/init_weights_update_group",
            {
                "master_address": master_address,
                "master_port": int(master_port),
                "rank_offset": int(rank_offset),
                "world_size": int(world_size),
                "group_name": group_name,
                "backend": backend,
            },
        )

    def update_weights_from_distributed(
        self,
        names: Sequence[str],
        dtypes: Sequence[str],
        shapes: Sequence[Sequence[int]],
        *,
        group_name: str,
        weight_version: str | None = None,
        flush_cache: bool = False,
        load_format: str | None = "flattened_bucket",
    ) -> dict[str, Any]:
        """Returns after the engine has received the broadcast and loaded the bucket."""
        return self._post(
            "/update_weights_from_distributed",
            {
                "names": list(names),
                "dtypes": list(dtypes),
                "shapes": [[int(d) for d in shape] for shape in shapes],
                "group_name": group_name,
                "flush_cache": flush_cache,
                "weight_version": weight_version,
                "load_format": load_format,
            },
        )

    def destroy_weights_update_group(self, group_name: str) -> dict[str, Any]:
        return self._post("/destroy_weights_update_group", {"group_name": group_name})

    # -- other weight updates ----------------------------------------------------------

    def update_weights_from_disk(self, model_path: str, weight_version: str) -> dict[str, Any]:
        return self._post(
            "/update_weights_from_disk",
            {"model_path": str(model_path), "weight_version": weight_version},
        )

    def update_weights_from_tensor(
        self,
        serialized: str | Sequence[str],
        weight_version: str | None,
        *,
        flush_cache: bool = False,
        load_format: str | None = None,
    ) -> dict[str, Any]:
        """``serialized``: one ipc.serialize_named_tensors string per engine TP rank."""
        items = [serialized] if isinstance(serialized, str) else list(serialized)
        return self._post(
            "/update_weights_from_tensor",
            {
                "serialized_named_tensors": items,
                "load_format": load_format,
                "flush_cache": flush_cache,
                "weight_version": weight_version,
            },
        )

    def load_lora_adapter(
        self, name: str, path: str, *, weight_version: str | None = None
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"lora_name": name, "lora_path": str(path)}
        if weight_version is not None:
            body["weight_version"] = weight_version
        return self._post("/load_lora_adapter", body)

    def unload_lora_adapter(self, name: str) -> dict[str, Any]:
        return self._post("/unload_lora_adapter", {"lora_name": name})

    # -- scheduling --------------------------------------------------------------------

    def flush_cache(self) -> None:
        """Flush the prefix cache; the engine answers 400 while a generation runs, so wait
        and retry (up to ``flush_retries`` times)."""
        for _ in range(self.flush_retries + 1):
            response = self._request("POST", "/flush_cache")
            if response.status_code < 300:
                return  # SGLang answers plain text here, reefd's engine JSON: both fine
            if response.status_code != 400:
                reason = _reason(response, _json(response))
                raise EngineError(
                    f"engine /flush_cache answered {response.status_code}: {reason}", HINT
                )
            time.sleep(self.flush_wait)
        raise EngineError(
            f"engine /flush_cache still busy after {self.flush_retries + 1} tries "
            f"{self.flush_wait:g} s apart",
            "a generation kept running: retry when the engine is idle",
        )

    def pause_generation(self, mode: str = "in_place") -> dict[str, Any]:
        return self._post("/pause_generation", {"mode": mode})

    def continue_generation(self) -> dict[str, Any]:
        return self._post("/continue_generation", {})


_NOT_JSON: Any = object()


def _json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except (json.JSONDecodeError, UnicodeDecodeError, ValueError):
        return _NOT_JSON


def _snippet(text: str, limit: int = 200) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _reason(response: httpx.Response, answer: Any) -> str:
    if isinstance(answer, dict):
        for key in ("message", "detail", "error"):
            value = answer.get(key)
            if isinstance(value, dict):
                value = value.get("message")
            if value:
                return _snippet(str(value))
    return _snippet(response.text) or response.reason_phrase or "no body"


def _dict(answer: Any, endpoint: str) -> dict[str, Any]:
    if not isinstance(answer, dict):
        raise EngineError(f"engine {endpoint} answered {type(answer).__name__}, not an object")
    return answer
