"""Weight releases: reefd's checkpoints and adapters on the scenario's release chain.

A weight release is a commit on ``refs/reef/weights`` (tags ``w<N>``), in the same bare
repository and with the same compare-and-swap as the harness chain, so a publish is
atomic and two publishers cannot lose one. Its tree is text only: ``MANIFEST.json``
(base model, kind, every tensor's name, dtype, shape and sha256, the metrics) and git-lfs
pointer files (spec v1) — plus, for a LoRA adapter, its ``adapter_config.json``. The bytes
live where git-lfs keeps them, ``<git dir>/lfs/objects/<oid[0:2]>/<oid[2:4]>/<oid>``, so
``git lfs`` on a clone finds them, and identical content is stored once (a rollback adds
no bytes). Objects are written and fsynced before the ref moves: a publish killed at any
point leaves no release whose bytes are missing. Every read checks the sha256s.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import struct
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from reef_cli.core import paths
from reef_cli.core.errors import ChainCorrupt, ConfigError, ReleaseNotFound
from reef_cli.core.releases import WEIGHTS_REF, Chain, Release
from reefd._torch import require

MANIFEST = "MANIFEST.json"
FULL_FILE = "model.safetensors"
ADAPTER_FILE = "adapter_model.safetensors"
ADAPTER_CONFIG = "adapter_config.json"
POINTER_VERSION = "https://git-lfs.github.com/spec/v1"
FORMAT = 1
TAG_PREFIX = "w"
Kind = Literal["full", "lora"]

_POINTER = re.compile(
    r"version https://git-lfs\.github\.com/spec/v1\noid sha256:([0-9a-f]{64})\nsize (\d+)\n\Z"
)
_CHUNK = 1 << 20


def _fix(where: object) -> str:
    return f"restore {where} from a backup, or roll back to an intact weight release"


@dataclass(frozen=True)
class Pointer:
    """A git-lfs pointer: the object's sha256 and size."""

    oid: str
    size: int

    def text(self) -> str:
        return f"version {POINTER_VERSION}\noid sha256:{self.oid}\nsize {self.size}\n"

    @classmethod
    def parse(cls, text: str, where: str) -> Pointer:
        found = _POINTER.match(text)
        if found is None:
            raise ChainCorrupt(f"{where} is not a git-lfs pointer file", _fix(where))
        return cls(found.group(1), int(found.group(2)))


class WeightChain:
    """The weight releases of one scenario's chain repository (``git_dir``)."""

    def __init__(self, git_dir: Path) -> None:
        self.git_dir = git_dir
        self.chain = Chain(git_dir, ref=WEIGHTS_REF, tag_prefix=TAG_PREFIX)
        # gitpython's Repo keeps git helper processes: one publisher at a time per instance
        # (other instances and processes are kept apart by the ref's compare-and-swap).
        self._lock = threading.Lock()

    @classmethod
    def for_scenario(cls, name: str, *, create: bool = False) -> WeightChain:
        """The weight chain of scenario ``name`` (created first when ``create``)."""
        from reef_cli.core import scenarios

        scenario = scenarios.get_or_create(name) if create else scenarios.get(name)
        return cls(scenario.chain_dir)

    # ------------------------------------------------------------ objects

    @property
    def objects_dir(self) -> Path:
        return self.git_dir / "lfs" / "objects"

    def object_path(self, oid: str) -> Path:
        return self.objects_dir / oid[0:2] / oid[2:4] / oid

    def _store_safetensors(self, tensors: dict[str, Any]) -> tuple[Pointer, dict[str, str]]:
        """Serialize plain CPU ``tensors`` into the object store; (pointer, tensor name ->
        sha256 of its bytes)."""
        st = require("safetensors.torch")
        tmp_dir = paths.ensure_private_dir(self.git_dir / "lfs" / "tmp")
        fd, name = tempfile.mkstemp(prefix="publish-", suffix=".safetensors", dir=tmp_dir)
        os.close(fd)
        tmp = Path(name)
        try:
            st.save_file(tensors, str(tmp))
            os.chmod(tmp, paths.FILE_MODE)
            oid, size, hashes = _digest(tmp)
            self._place(tmp, oid, size)
        finally:
            tmp.unlink(missing_ok=True)
        return Pointer(oid, size), hashes

    def _place(self, tmp: Path, oid: str, size: int) -> None:
        """Move ``tmp`` (its bytes hash to ``oid``) into the store, durably. An intact object
        already there is kept; a damaged one is replaced."""
        target = self.object_path(oid)
        if target.is_file() and _file_sha(target) == (oid, size):
            return
        with open(tmp, "rb+") as handle:
            os.fsync(handle.fileno())
        parent = paths.ensure_private_dir(target.parent)
        os.replace(tmp, target)
        for directory in (parent, parent.parent, parent.parent.parent):
            _fsync_dir(directory)

    def _verified(
        self, pointer: Pointer, path_in_release: str, release: Release, *, tensors: bool = False
    ) -> tuple[Path, dict[str, str]]:
        """The object a pointer names, after checking its size and sha256 (with
        ``tensors``: and each tensor's sha256, from the same pass over the bytes)."""
        target = self.object_path(pointer.oid)
        if not target.is_file():
            raise ChainCorrupt(
                f"weight release {release.tag}: object for {path_in_release} is missing ({target})",
                _fix(target),
            )
        if tensors:
            oid, size, hashes = _digest(target)
        else:
            (oid, size), hashes = _file_sha(target), {}
        if (oid, size) != (pointer.oid, pointer.size):
            raise ChainCorrupt(
                f"weight release {release.tag}:{path_in_release} ({target}): the bytes do not "
                "match their sha256",
                _fix(target),
            )
        return target, hashes

    # ------------------------------------------------------------ reading

    def releases(self) -> list[Release]:
        return self.chain.releases()

    def served(self) -> Release | None:
        """The newest weight release (a rollback is a new release, so it is served)."""
        return self.chain.served()

    def get(self, number: int) -> Release:
        return self.chain.resolve(number)

    def files(self, release: Release) -> dict[str, str]:
        """The release's text tree (MANIFEST.json, pointers, adapter config)."""
        return self.chain.files(release)

    def manifest(self, release: Release) -> dict[str, Any]:
        files = self.files(release)
        return _manifest_of(files, release)

    def pointers(self, release: Release) -> dict[str, Pointer]:
        """Each LFS file of the release -> its pointer (checked against the manifest)."""
        files = self.files(release)
        manifest = _manifest_of(files, release)
        out: dict[str, Pointer] = {}
        for path, entry in manifest["files"].items():
            where = f"weight release {release.tag}: {path}"
            if path not in files:
                raise ChainCorrupt(
                    f"{where} is in MANIFEST.json but not in the release", _fix(where)
                )
            pointer = Pointer.parse(files[path], where)
            if (pointer.oid, pointer.size) != (entry.get("oid"), entry.get("size")):
                raise ChainCorrupt(f"{where}: the pointer and MANIFEST.json disagree", _fix(where))
            out[path] = pointer
        return out

    def verify(self, release: Release) -> None:
        """Raise ChainCorrupt unless every object of ``release`` is present and intact."""
        for path, pointer in self.pointers(release).items():
            self._verified(pointer, path, release)

    def load(self, release: Release) -> dict[str, Any]:
        """The release's tensors (CPU), after checking every sha256 against the manifest."""
        st = require("safetensors.torch")
        manifest = self.manifest(release)
        path = _weights_file(manifest)
        pointer = self.pointers(release)[path]
        target, hashes = self._verified(pointer, path, release, tensors=True)
        expected = {t["name"]: t for t in manifest["tensors"]}
        if set(hashes) != set(expected) or any(
            hashes[name] != entry["sha256"] for name, entry in expected.items()
        ):
            raise ChainCorrupt(
                f"weight release {release.tag}: tensors differ from MANIFEST.json",
                _fix(target),
            )
        tensors: dict[str, Any] = st.load_file(str(target))
        for name, entry in expected.items():
            tensor = tensors[name]
            if _dtype_name(tensor.dtype) != entry["dtype"] or list(tensor.shape) != list(
                entry["shape"]
            ):
                raise ChainCorrupt(
                    f"weight release {release.tag}: tensor {name} differs from MANIFEST.json",
                    _fix(target),
                )
        return tensors

    def materialize(self, release: Release, directory: Path) -> Path:
        """Write the release as files an engine loads (``model.safetensors``, or the adapter
        and its config) into ``directory``; every copy is checked against its sha256."""
        manifest = self.manifest(release)
        files = self.files(release)
        paths.ensure_private_dir(directory)
        for path, pointer in self.pointers(release).items():
            source, _ = self._verified(pointer, path, release)
            target = directory / path
            paths.ensure_private_dir(target.parent)
            tmp = target.with_name(f".{target.name}.tmp")
            shutil.copyfile(source, tmp)
            os.chmod(tmp, paths.FILE_MODE)
            if _file_sha(tmp) != (pointer.oid, pointer.size):
                tmp.unlink(missing_ok=True)
                raise ChainCorrupt(
                    f"weight release {release.tag}: copying {path} to {directory} changed it",
                    f"check the disk holding {directory}",
                )
            os.replace(tmp, target)
        if manifest["kind"] == "lora":
            (directory / ADAPTER_CONFIG).write_text(files[ADAPTER_CONFIG], encoding="utf-8")
        return directory

    # ------------------------------------------------------------ writing

    def publish(
        self,
        tensors: Mapping[str, Any],
        *,
        base_model: str,
        kind: Kind,
        metrics: Mapping[str, Any] | None = None,
        gate: Mapping[str, Any] | None = None,
        source: str = "publish",
        reason: str = "",
        lora_config: Mapping[str, Any] | None = None,
        points_to: int | None = None,
    ) -> Release:
        """Store ``tensors`` and append them as release w<N+1>. Callers run the gate first.

        ``source`` is ``recipe:<name>`` for a trained release. The objects are durable
        before the ref moves, so the release never names missing bytes."""
        if kind not in ("full", "lora"):
            raise ConfigError(f"weight release kind {kind!r} is not full or lora")
        if kind == "lora" and lora_config is None:
            raise ConfigError("a lora weight release needs its lora_config")
        if not tensors:
            raise ConfigError("a weight release needs at least one tensor")
        plain = _plain(tensors)
        pointer, hashes = self._store_safetensors(plain)
        path = FULL_FILE if kind == "full" else ADAPTER_FILE
        manifest: dict[str, Any] = {
            "format": FORMAT,
            "base_model": base_model,
            "kind": kind,
            "tensors": [
                {
                    "name": name,
                    "dtype": _dtype_name(tensor.dtype),
                    "shape": [int(d) for d in tensor.shape],
                    "sha256": hashes[name],
                }
                for name, tensor in plain.items()
            ],
            "files": {path: {"oid": pointer.oid, "size": pointer.size}},
            "metrics": dict(metrics or {}),
            "lora_config": dict(lora_config) if lora_config is not None else None,
        }
        files = {MANIFEST: _json(manifest), path: pointer.text()}
        if kind == "lora":
            files[ADAPTER_CONFIG] = _json(dict(lora_config or {}))
        return self._append(
            files,
            source=source,
            reason=reason,
            gate=gate,
            points_to=points_to,
            kind=kind,
            base_model=base_model,
        )

    def rollback(self, number: int, reason: str = "") -> Release:
        """Republish release ``number``'s content as a new release (same pointers, same
        objects): the served weights go back without rewriting history. ``0`` means the
        base weights the engine was started with: a release of kind ``base``, no tensors
        (reefd reloads them from the model it launched)."""
        if number == 0:
            return self._rollback_to_base(reason)
        old = self.get(number)
        self.verify(old)
        manifest = self.manifest(old)
        return self._append(
            self.files(old),
            source="rollback",
            reason=reason or f"roll back to {old.tag}",
            gate={},
            points_to=number,
            kind=manifest["kind"],
            base_model=manifest["base_model"],
        )

    def _rollback_to_base(self, reason: str) -> Release:
        latest = self.chain.latest()
        if latest is None:
            raise ReleaseNotFound(
                "there are no weight releases yet: the base weights are served already"
            )
        base_model = str(self.manifest(latest).get("base_model") or "")
        manifest = {
            "format": FORMAT,
            "base_model": base_model,
            "kind": "base",
            "tensors": [],
            "files": {},
            "metrics": {},
            "lora_config": None,
        }
        return self._append(
            {MANIFEST: _json(manifest)},
            source="rollback",
            reason=reason or "roll back to the base weights",
            gate={},
            points_to=None,
            kind="base",
            base_model=base_model,
        )

    def _append(
        self,
        files: Mapping[str, str],
        *,
        source: str,
        reason: str,
        gate: Mapping[str, Any] | None,
        points_to: int | None,
        kind: str,
        base_model: str,
    ) -> Release:
        recipe = source.removeprefix("recipe:") if source.startswith("recipe:") else None
        with self._lock:
            return self.chain.publish(
                files,
                source=source,
                reason=reason,
                recipe=recipe,
                points_to=points_to,
                gate=gate,
                extra={"kind": kind, "base_model": base_model},
            )


# ---------------------------------------------------------------- helpers


def _dtype_name(dtype: Any) -> str:
    return str(dtype).removeprefix("torch.")


def _json(data: Any) -> str:
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def _plain(tensors: Mapping[str, Any]) -> dict[str, Any]:
    """Detached, contiguous CPU tensors that share no storage, in name order: what
    safetensors writes (``reefd.sync.disk.savable``: tied embeddings and packed weights
    share storage, and safetensors refuses that)."""
    from reefd.sync.disk import savable

    return savable({name: tensors[name] for name in sorted(tensors)})


def _file_sha(path: Path) -> tuple[str, int]:
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def _digest(path: Path) -> tuple[str, int, dict[str, str]]:
    """(file sha256, size, tensor name -> sha256 of its bytes) of a safetensors file, in one
    pass: the header gives each tensor's byte range in the data that follows it."""
    with open(path, "rb") as handle:
        head = handle.read(8)
        if len(head) != 8:
            raise ChainCorrupt(f"{path} is not a safetensors file", _fix(path))
        (length,) = struct.unpack("<Q", head)
        header_bytes = handle.read(length)
        try:
            header = json.loads(header_bytes)
        except ValueError as exc:
            raise ChainCorrupt(f"{path} has no readable safetensors header", _fix(path)) from exc
        whole = hashlib.sha256(head + header_bytes)
        size = 8 + len(header_bytes)
        try:
            spans = sorted(
                (int(v["data_offsets"][0]), int(v["data_offsets"][1]), str(k))
                for k, v in header.items()
                if k != "__metadata__"
            )
        except (AttributeError, KeyError, IndexError, TypeError, ValueError) as exc:
            raise ChainCorrupt(f"{path}: bad safetensors header", _fix(path)) from exc
        hashes: dict[str, str] = {}
        position = 0
        for start, end, name in spans:
            if start < position or end < start:
                raise ChainCorrupt(f"{path}: bad safetensors header", _fix(path))
            gap = handle.read(start - position)
            whole.update(gap)
            digest = hashlib.sha256()
            remaining = end - start
            while remaining:
                chunk = handle.read(min(_CHUNK, remaining))
                if not chunk:
                    raise ChainCorrupt(f"{path} is truncated", _fix(path))
                digest.update(chunk)
                whole.update(chunk)
                remaining -= len(chunk)
            hashes[name] = digest.hexdigest()
            size += len(gap) + (end - start)
            position = end
        while chunk := handle.read(_CHUNK):
            whole.update(chunk)
            size += len(chunk)
    return whole.hexdigest(), size, hashes


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _manifest_of(files: Mapping[str, str], release: Release) -> dict[str, Any]:
    where = f"weight release {release.tag}"
    try:
        manifest = json.loads(files[MANIFEST])
    except (KeyError, ValueError) as exc:
        raise ChainCorrupt(f"{where} has no readable {MANIFEST}", _fix(where)) from exc
    if (
        not isinstance(manifest, dict)
        or manifest.get("format") != FORMAT
        or manifest.get("kind") not in ("full", "lora", "base")
        or not isinstance(manifest.get("files"), dict)
        or not isinstance(manifest.get("tensors"), list)
    ):
        raise ChainCorrupt(f"{where}: {MANIFEST} is not a format-{FORMAT} manifest", _fix(where))
    return manifest


def _weights_file(manifest: Mapping[str, Any]) -> str:
    return FULL_FILE if manifest["kind"] == "full" else ADAPTER_FILE
