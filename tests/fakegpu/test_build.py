"""fakegpu's Python side: build(), environment(), read_log()."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

import fakegpu
from tfgpu_kit.image.verify import images as verify_images
from tfgpu_kit.shared.errors import KitError

EXPECTED = {"libcuda.so.1", "libcudart.so.12", "libcudart.so.11.0", "libnvidia-ml.so.1"}


def test_build_compiles_the_four_libraries_into_a_directory_keyed_by_the_sources(
    libdir: Path,
) -> None:
    assert re.fullmatch(r"[0-9a-f]{16}", libdir.name)
    assert {p.name for p in libdir.iterdir()} == EXPECTED
    assert [p.name for p in libdir.parent.iterdir()] == [libdir.name]  # no temporary dir left
    assert libdir.stat().st_mode & 0o777 == 0o755  # containers running as any user read it
    mtime = (libdir / "libcuda.so.1").stat().st_mtime_ns
    assert fakegpu.build(libdir.parent) == libdir  # cached: not compiled again
    assert (libdir / "libcuda.so.1").stat().st_mtime_ns == mtime


def no_gcc_run(*args: object, **kwargs: object) -> None:
    raise AssertionError("gcc must not run: the libraries are cached")


def test_build_defaults_to_the_xdg_cache(
    libdir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cached = tmp_path / "tfgpu-kit" / "fakegpu" / libdir.name
    shutil.copytree(libdir, cached)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(fakegpu.subprocess, "run", no_gcc_run)
    assert fakegpu.build() == cached


def test_a_leftover_of_an_interrupted_build_is_replaced(
    libdir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    leftover = tmp_path / libdir.name
    shutil.copytree(libdir, leftover)
    (leftover / "libnvidia-ml.so.1").unlink()
    commands: list[list[str]] = []

    def fake_gcc(cmd: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        commands.append(cmd)
        Path(cmd[cmd.index("-o") + 1]).write_bytes(b"compiled")
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(fakegpu.subprocess, "run", fake_gcc)
    assert fakegpu.build(tmp_path) == leftover
    assert {p.name for p in leftover.iterdir()} == EXPECTED
    assert (leftover / "libcuda.so.1").read_bytes() == b"compiled"  # the whole set was rebuilt
    sonames = sorted(c for cmd in commands for c in cmd if c.startswith("-Wl,-soname,"))
    assert sonames == sorted(f"-Wl,-soname,{lib}" for lib in EXPECTED)
    for cmd in commands:
        assert {"-Wall", "-Wextra", "-Werror", "-O2", "-fPIC", "-shared"} <= set(cmd)


def test_no_gcc_is_an_error_that_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fakegpu.shutil, "which", lambda name: None)
    with pytest.raises(fakegpu.FakeGpuError) as info:
        fakegpu.build(tmp_path / "cache")
    assert "gcc not found" in str(info.value)
    assert "apt-get install gcc" in str(info.value)
    # build.py verify words it as the kit's own error (exit code, no traceback), hint kept
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    with pytest.raises(KitError) as kit:
        verify_images.fake_driver(True)
    assert "cannot compile the fake NVIDIA driver for the GPU probe" in kit.value.message
    assert kit.value.hint is not None and "apt-get install gcc" in kit.value.hint


def test_a_compile_error_carries_gccs_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = tmp_path / "src"
    shutil.copytree(
        fakegpu.SOURCE_DIR, broken, ignore=shutil.ignore_patterns("*.py", "__pycache__")
    )
    with (broken / "fakegpu.h").open("a") as f:
        f.write("\nstatic int broken(void) { return undeclared_thing; }\n")
    monkeypatch.setattr(fakegpu, "SOURCE_DIR", broken)
    with pytest.raises(fakegpu.FakeGpuError, match="undeclared_thing") as info:
        fakegpu.build(tmp_path / "cache")
    assert "compiling the fake libcuda.so.1 failed" in str(info.value)
    assert not list((tmp_path / "cache").iterdir())  # nothing half-built is kept


@pytest.mark.skipif(shutil.which("objdump") is None, reason="objdump (binutils) not installed")
def test_the_libraries_load_on_older_glibc_and_export_what_tensorflow_resolves(
    libdir: Path,
) -> None:
    """Ubuntu 20.04 (TensorFlow 2.12/2.13 images) has glibc 2.31: nothing newer may be needed."""
    for lib in EXPECTED:
        table = subprocess.run(
            ["objdump", "-T", str(libdir / lib)], capture_output=True, text=True, check=True
        ).stdout
        versions = {
            tuple(int(x) for x in v.split(".")) for v in re.findall(r"GLIBC_([0-9.]+)", table)
        }
        assert max(versions) <= (2, 31), (lib, max(versions))
    cuda = subprocess.run(
        ["objdump", "-T", str(libdir / "libcuda.so.1")], capture_output=True, text=True, check=True
    ).stdout
    for name in (
        "cuMemAlloc_v2",
        "cuCtxCreate_v2",
        "cuMemGetInfo_v2",
        "cuDeviceTotalMem_v2",
        "cuMemcpyDtoHAsync_v2",
        "cuStreamDestroy_v2",
        "cuEventDestroy_v2",
        "cuDevicePrimaryCtxRelease_v2",
        "cuMemHostRegister_v2",
        "cuMemsetD32Async",
        "cuGetProcAddress_v2",
        "fakegpu_config",
    ):
        assert re.search(rf"\s{name}$", cuda, re.M), name
    assert "fg_mem_alloc" not in cuda  # internal helpers stay hidden


def test_environment_describes_each_card_in_order() -> None:
    env = fakegpu.environment(
        [
            fakegpu.FakeCard("Fake A100-PCIE-8GB", 8192),
            fakegpu.FakeCard(
                "Fake H100", 81920, cc="9.0", uuid="GPU-12345678-1234-1234-1234-123456789abc"
            ),
        ],
        driver="570.124.06",
        cuda="12.8",
        log="/tmp/x.jsonl",
        ledger="/tmp/ledger",
    )
    assert env == {
        "FAKEGPU_COUNT": "2",
        "FAKEGPU_DRIVER": "570.124.06",
        "FAKEGPU_MEMORY_MIB": "8192,81920",
        "FAKEGPU_NAME": "Fake A100-PCIE-8GB,Fake H100",
        "FAKEGPU_CC": "8.0,9.0",
        "FAKEGPU_UUID": (
            "GPU-fa6e0000-0000-4000-8000-000000000000,GPU-12345678-1234-1234-1234-123456789abc"
        ),
        "FAKEGPU_CUDA": "12.8",
        "FAKEGPU_LOG": "/tmp/x.jsonl",
        "FAKEGPU_LEDGER": "/tmp/ledger",
    }


def test_environment_without_cards_is_a_driver_with_no_gpu() -> None:
    assert fakegpu.environment([]) == {"FAKEGPU_COUNT": "0", "FAKEGPU_DRIVER": "560.35.03"}


@pytest.mark.parametrize(
    ("cards", "kwargs", "message"),
    [
        ([fakegpu.FakeCard("a,b", 1024)], {}, "no comma"),
        ([fakegpu.FakeCard("x", 0)], {}, "1-16777216"),
        ([fakegpu.FakeCard("x", 1024, cc="8")], {}, "8.0"),
        ([fakegpu.FakeCard("x", 1024, uuid="GPU-1")], {}, "8-4-4-4-12"),
        ([fakegpu.FakeCard("x", 1024)], {"driver": "560"}, "560.35.03"),
        ([fakegpu.FakeCard("x", 1024)], {"cuda": "12"}, "12.6"),
        (
            [fakegpu.FakeCard("x", 1, uuid=fakegpu.default_uuid(1)), fakegpu.FakeCard("y", 1)],
            {},
            "must differ",
        ),
    ],
)
def test_environment_refuses_what_the_fake_would_refuse(
    cards: list[fakegpu.FakeCard], kwargs: dict[str, str], message: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        fakegpu.environment(cards, **kwargs)


def test_read_log(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    assert fakegpu.read_log(log) == []  # nothing allocated, no file
    log.write_text('{"event": "alloc", "bytes": 1}\n\n{"event": "free", "bytes": 1}\n')
    assert [e["event"] for e in fakegpu.read_log(log)] == ["alloc", "free"]
    log.write_text('{"event": "alloc"}\n[1]\n')
    with pytest.raises(fakegpu.FakeGpuError, match=":2: not a JSON object"):
        fakegpu.read_log(log)
    log.write_text("{oops\n")
    with pytest.raises(fakegpu.FakeGpuError, match=":1: not a JSON line"):
        fakegpu.read_log(log)
