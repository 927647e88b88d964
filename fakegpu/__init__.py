"""A fake NVIDIA driver for tests: real TensorFlow registers a GPU on a machine without one.

`build()` compiles three small C libraries with gcc (libcuda.so.1, libcudart.so.12 and
libcudart.so.11.0, libnvidia-ml.so.1); put their directory first on LD_LIBRARY_PATH (in a
container: mount it at /usr/local/nvidia/lib64) and configure the cards with `environment()`.
TensorFlow then loads its CUDA libraries, creates its devices and allocators and runs ops, while
the fake accounts for device memory for real: allocations past a card's size fail with
CUDA_ERROR_OUT_OF_MEMORY, cuMemGetInfo and NVML report what is in use, and every allocation,
free and refusal can be logged (`read_log`).

Nothing is computed: kernels do not run and copies from the device give zeros, so numerical
results are meaningless. Only memory behaviour and TensorFlow's decisions can be asserted.
cuBLAS and cuDNN cannot initialise on it (they need the real driver's private tables), so ops
that use them (matmul, convolutions) fail. See fakegpu/README.md.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "LIBRARIES",
    "FakeCard",
    "FakeGpuError",
    "build",
    "environment",
    "read_log",
]

SOURCE_DIR = Path(__file__).resolve().parent
SOURCES = ("fakegpu.h", "fakegpu_core.c", "fakecuda.c", "fakecudart.c", "fakenvml.c")
# The libraries build() produces, by file name, and what each is compiled from.
LIBRARIES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "libcuda.so.1": (("fakecuda.c", "fakegpu_core.c"), ()),
    "libcudart.so.12": (("fakecudart.c",), ("-DFG_CUDART_MAJOR=12",)),
    "libcudart.so.11.0": (("fakecudart.c",), ("-DFG_CUDART_MAJOR=11",)),
    "libnvidia-ml.so.1": (("fakenvml.c",), ()),
}
CFLAGS = (
    "-std=c11",
    "-Wall",
    "-Wextra",
    "-Werror",
    "-O2",
    "-fPIC",
    "-shared",
    "-fvisibility=hidden",
)
# libdl/libpthread by file name: glibc >= 2.34 ships no libdl.so for -ldl, and the libraries
# must name them to load on older glibc (see fakegpu.h).
LDFLAGS = ("-Wl,--no-as-needed", "-l:libdl.so.2", "-l:libpthread.so.0")
GCC_HINT = "install gcc (Debian: apt-get install gcc)"

DEFAULT_NAME = "Fake A100-SXM4-16GB"
_UUID = re.compile(r"^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.I)
_CC = re.compile(r"^[1-9][0-9]?\.[0-9]$")
_DRIVER = re.compile(r"^[0-9]{3,4}\.[0-9]+(\.[0-9]+)?$")
_CUDA = re.compile(r"^[1-9][0-9]?\.[0-9]{1,2}$")


class FakeGpuError(Exception):
    """The fake driver cannot be built (no gcc, a compile error), or its log cannot be read: what
    went wrong, and how to fix it when that is known. (Its own error, not the build side's: the
    fake driver is a component of its own, which `build.py verify` and the tests use.)"""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n  hint: {self.hint}"


@dataclass(frozen=True)
class FakeCard:
    """One fake GPU: its name, memory in MiB, compute capability and (optional) UUID."""

    name: str
    memory_mib: int
    cc: str = "8.0"
    uuid: str | None = None


def default_uuid(index: int) -> str:
    """The UUID the fake gives card `index` when FAKEGPU_UUID is not set."""
    return f"GPU-fa6e0000-0000-4000-8000-{index:012x}"


def _source_hash() -> str:
    h = hashlib.sha256()
    for name in SOURCES:
        h.update(name.encode() + b"\0" + (SOURCE_DIR / name).read_bytes() + b"\0")
    h.update(repr((CFLAGS, LDFLAGS, sorted(LIBRARIES.items()))).encode())
    return h.hexdigest()[:16]


def _cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tfgpu-kit" / "fakegpu"


def build(cache_dir: Path | str | None = None) -> Path:
    """Compile the fake driver (once per version of the sources) and return the directory
    holding libcuda.so.1, libcudart.so.12, libcudart.so.11.0 and libnvidia-ml.so.1.

    The directory is `<cache_dir or $XDG_CACHE_HOME/tfgpu-kit/fakegpu>/<hash of the sources>`,
    written atomically (compiled in a temporary directory, then renamed), so concurrent callers
    are safe. Raises FakeGpuError when gcc is missing or compilation fails."""
    root = Path(cache_dir) if cache_dir is not None else _cache_root()  # a str too (os.fspath)
    final = root / _source_hash()
    if all((final / lib).is_file() for lib in LIBRARIES):
        return final
    gcc = shutil.which("gcc")
    if gcc is None:
        raise FakeGpuError("cannot compile the fake NVIDIA driver: gcc not found", hint=GCC_HINT)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise FakeGpuError(f"cannot create the cache directory {root}: {exc}") from None
    tmp = Path(tempfile.mkdtemp(prefix=".build-", dir=root))
    try:
        for lib, (sources, defines) in LIBRARIES.items():
            cmd = [
                gcc,
                *CFLAGS,
                *defines,
                f"-Wl,-soname,{lib}",
                "-o",
                str(tmp / lib),
                *(str(SOURCE_DIR / s) for s in sources),
                *LDFLAGS,
            ]
            try:
                done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
            except (OSError, subprocess.TimeoutExpired) as exc:
                raise FakeGpuError(f"cannot run gcc for {lib}: {exc}", hint=GCC_HINT) from None
            if done.returncode != 0:
                raise FakeGpuError(
                    f"compiling the fake {lib} failed (gcc exit {done.returncode}):\n"
                    + (done.stderr or done.stdout).strip()
                )
        # mkdtemp made it 0700: a container running as another user (the Jupyter images' uid
        # 1000, --user 12345) must read the libraries, as it reads the real driver's
        tmp.chmod(0o755)
        try:
            tmp.rename(final)
        except OSError:
            if not all((final / lib).is_file() for lib in LIBRARIES):
                # not a concurrent builder's result: the leftover of an interrupted one
                shutil.rmtree(final, ignore_errors=True)
                try:
                    tmp.rename(final)
                except OSError as exc:
                    raise FakeGpuError(f"cannot store the fake driver in {final}: {exc}") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final


def environment(
    cards: Sequence[FakeCard],
    *,
    driver: str = "560.35.03",
    cuda: str | None = None,
    log: str | None = None,
    ledger: str | None = None,
) -> dict[str, str]:
    """The FAKEGPU_* variables that describe `cards` (none: a machine whose driver sees no
    GPU), the driver version and, when given, the CUDA version the driver reports (default:
    derived from the driver branch), the allocation log file and the shared ledger directory.

    Raises ValueError for a value the fake would refuse."""
    if len(cards) > 16:
        raise ValueError(f"at most 16 fake cards, not {len(cards)}")
    for card in cards:
        if not card.name or "," in card.name or len(card.name) > 95:
            raise ValueError(f"card name {card.name!r}: 1-95 characters, no comma")
        if not 1 <= card.memory_mib <= 1 << 24:
            raise ValueError(f"card memory {card.memory_mib} MiB: expected 1-16777216")
        if not _CC.match(card.cc):
            raise ValueError(f"compute capability {card.cc!r}: expected e.g. 8.0")
        if card.uuid is not None and not _UUID.match(card.uuid):
            raise ValueError(f"UUID {card.uuid!r}: expected GPU- and 8-4-4-4-12 hex digits")
    if not _DRIVER.match(driver):
        raise ValueError(f"driver version {driver!r}: expected e.g. 560.35.03")
    if cuda is not None and not _CUDA.match(cuda):
        raise ValueError(f"CUDA version {cuda!r}: expected e.g. 12.6")
    env = {"FAKEGPU_COUNT": str(len(cards)), "FAKEGPU_DRIVER": driver}
    if cards:
        env["FAKEGPU_MEMORY_MIB"] = ",".join(str(c.memory_mib) for c in cards)
        env["FAKEGPU_NAME"] = ",".join(c.name for c in cards)
        env["FAKEGPU_CC"] = ",".join(c.cc for c in cards)
        uuids = [c.uuid or default_uuid(i) for i, c in enumerate(cards)]
        if len({u.lower() for u in uuids}) != len(uuids):
            raise ValueError(f"card UUIDs must differ: {uuids}")
        env["FAKEGPU_UUID"] = ",".join(uuids)
    if cuda is not None:
        env["FAKEGPU_CUDA"] = cuda
    if log is not None:
        env["FAKEGPU_LOG"] = log
    if ledger is not None:
        env["FAKEGPU_LEDGER"] = ledger
    return env


def read_log(path: Path) -> list[dict[str, object]]:
    """The events of a FAKEGPU_LOG file, oldest first (an empty list when it does not exist).

    Each is a dict: time, token, pid, event ("alloc", "free" or "oom"), api, device (the card's
    index, as NVML counts), ordinal (CUDA's index in that process), uuid, bytes, ptr, process_live,
    device_live, total. Raises FakeGpuError on a line that is not a JSON object."""
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise FakeGpuError(f"cannot read the fake driver's log {path}: {exc}") from None
    events: list[dict[str, object]] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except json.JSONDecodeError as exc:
            raise FakeGpuError(f"{path}:{number}: not a JSON line: {exc}") from None
        if not isinstance(event, dict):
            raise FakeGpuError(f"{path}:{number}: not a JSON object")
        events.append(event)
    return events
