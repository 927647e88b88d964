"""What each GPU generation means for an image's TensorFlow, as the runtime says it
(tfgpu.contract.gpu_support, tfgpu.plan.gpu_verdicts, tfgpu.machine.kernel_cache, preflight),
against a stand-in of `pynvml` (NOT a driver; no GPU was used). The same verdicts on the fake NVIDIA
driver with real TensorFlow in containers: tests/gpu/test_gpu_generations.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tfgpu.contract import gpu_support
from tfgpu.contract.errors import GpuUnavailableError
from tfgpu.contract.settings import parse_environment
from tfgpu.machine import kernel_cache, nvml
from tfgpu.plan import gpu_verdicts
from tfgpu.plan.preflight import run_preflight

from tests.pynvml_standin import standin_pynvml

ARCHES_2_21 = "sm_60 sm_70 sm_80 sm_89 compute_90"
KERNELS_FAIL = gpu_support.Failure((12, 0), "kernels", "CUDA_ERROR_INVALID_PTX", "reported: #1")
XLA_FAILS = gpu_support.Failure((12, 0), "xla", "PTX 8.5 < 8.7", "reported: #2")


def image(
    arches: str = ARCHES_2_21, failures: tuple[gpu_support.Failure, ...] = ()
) -> dict[str, str]:
    return {
        "TFGPU_IMAGE_TF": "2.21.0",
        "TFGPU_IMAGE_GPU_ARCHES": arches,
        "TFGPU_IMAGE_GPU_FAILURES": gpu_support.format_failures(failures),
    }


@pytest.mark.parametrize(
    ("text", "cc"),
    [
        ("9.0", (9, 0)),
        ("12.0", (12, 0)),
        ("12.0a", (12, 0)),  # TensorFlow 2.21 names a 12.0 device "12.0a"
        ("sm_90", (9, 0)),
        ("sm_90a", (9, 0)),
        ("sm_120", (12, 0)),
        ("compute_90", (9, 0)),
        ("8", None),
        ("sm_9", None),
        ("sm_1200", None),
        ("٩.٠", None),  # Arabic-Indic digits: int() would read them
        ("9.0.1", None),
        ("", None),
    ],
)
def test_capability_reads_what_nvml_tensorflow_and_wheels_write(
    text: str, cc: tuple[int, int] | None
) -> None:
    assert gpu_support.capability(text) == cc


@pytest.mark.parametrize(
    ("cc", "reach"),
    [
        ((8, 0), gpu_support.NATIVE),
        ((8, 6), gpu_support.NATIVE),  # sm_80 SASS runs on 8.6
        ((8, 9), gpu_support.NATIVE),
        ((9, 0), gpu_support.PTX_JIT),  # Hopper: compute_90 only
        ((10, 0), gpu_support.PTX_JIT),
        ((12, 0), gpu_support.PTX_JIT),
        ((5, 2), gpu_support.NO_KERNELS),  # below sm_60; PTX does not JIT down
        ((7, 5), gpu_support.NATIVE),  # sm_70 SASS runs on 7.5
    ],
)
def test_reach_of_2_21_wheel(cc: tuple[int, int], reach: str) -> None:
    sass, ptx = gpu_support.parse_arches(ARCHES_2_21.split())
    assert gpu_support.reach(sass, ptx, cc) == reach


def test_failures_round_trip_through_the_image_variable() -> None:
    text = gpu_support.format_failures([KERNELS_FAIL, XLA_FAILS])
    assert gpu_support.parse_failures(text) == [KERNELS_FAIL, XLA_FAILS]
    assert gpu_support.parse_failures("") == [] and gpu_support.parse_failures(None) == []
    with pytest.raises(ValueError, match="TFGPU_IMAGE_GPU_FAILURES"):
        gpu_support.parse_failures("12.0 | kernels | only three fields")
    with pytest.raises(ValueError, match=r"kernels\|xla"):
        gpu_support.parse_failures("12.0 | cudnn | what | why")


@given(
    major=st.integers(1, 15),
    minor=st.integers(0, 9),
    sass=st.lists(st.tuples(st.integers(3, 12), st.integers(0, 9)), max_size=6),
    ptx=st.lists(st.tuples(st.integers(3, 12), st.integers(0, 9)), max_size=3),
    kernels=st.booleans(),
    xla=st.booleans(),
)
def test_a_known_failure_is_never_called_runs(
    major: int,
    minor: int,
    sass: list[tuple[int, int]],
    ptx: list[tuple[int, int]],
    kernels: bool,
    xla: bool,
) -> None:
    """Property: whatever the build and the GPU, a known failure of the kernels is never a
    verdict that runs, nor are missing kernels; a failure of XLA alone is always said."""
    cc = (major, minor)
    codes = [f"sm_{a}{b}" for a, b in sass] + [f"compute_{a}{b}" for a, b in ptx]
    failures = [
        gpu_support.Failure(cc, part, "it fails", "reported")
        for part, on in (("kernels", kernels), ("xla", xla))
        if on
    ]
    verdict = gpu_support.judge(cc, codes, failures)
    text = verdict.describe("2.21.0")
    if kernels or verdict.reach == gpu_support.NO_KERNELS:
        assert not verdict.kernels_run
        assert verdict.status in (gpu_support.KNOWN_FAILURE, gpu_support.NO_KERNELS)
        assert "native" not in text
    if kernels and verdict.reach != gpu_support.NO_KERNELS:
        assert "known to fail" in text
    if xla and verdict.reach in (gpu_support.NATIVE, gpu_support.PTX_JIT):
        assert "XLA (jit_compile=True) is known to fail" in text
        assert verdict.part_status("xla") == gpu_support.KNOWN_FAILURE
    if verdict.reach == gpu_support.PTX_JIT and not kernels:
        assert "JIT-compiles" in text and "not reported" in text


def test_kernel_cache_on_a_volume_is_kept(tmp_path: Path) -> None:
    cache = tmp_path / "cuda"
    cache.mkdir()
    mountinfo = (
        "22 1 0:21 / / rw,relatime - overlay overlay rw\n"
        f"40 22 8:1 /volumes/k /{cache.relative_to('/')} rw - ext4 /dev/sda1 rw\n"
    )
    found = kernel_cache.inspect(
        {"CUDA_CACHE_PATH": str(cache), "CUDA_CACHE_MAXSIZE": "4294967296"}, mountinfo=mountinfo
    )
    assert found.writable and found.kept and found.keeps_kernels
    assert found.max_bytes == 4294967296
    assert "up to 4 GiB" in found.describe() and "kept across restarts" in found.describe()


def test_kernel_cache_in_the_container_or_in_memory_is_lost(tmp_path: Path) -> None:
    overlay = "22 1 0:21 / / rw,relatime - overlay overlay rw\n"
    found = kernel_cache.inspect({"CUDA_CACHE_PATH": str(tmp_path / "c")}, mountinfo=overlay)
    assert found.writable and found.kept is False and not found.keeps_kernels
    assert "lost when the container ends" in found.describe()
    assert found.max_bytes == kernel_cache.DEFAULT_MAX_BYTES  # unset: the driver's 1 GiB
    tmpfs = overlay + f"30 22 0:40 / {tmp_path} rw - tmpfs tmpfs rw\n"
    in_memory = kernel_cache.inspect({"CUDA_CACHE_PATH": str(tmp_path)}, mountinfo=tmpfs)
    assert in_memory.kept is False and "in memory" in in_memory.describe()


def test_kernel_cache_limits_and_switches(tmp_path: Path) -> None:
    base = {"CUDA_CACHE_PATH": str(tmp_path)}
    big = kernel_cache.inspect({**base, "CUDA_CACHE_MAXSIZE": "9999999999"}, mountinfo="")
    assert big.max_bytes == kernel_cache.LARGEST_MAX_BYTES and "above the 4 GiB" in big.describe()
    bad = kernel_cache.inspect({**base, "CUDA_CACHE_MAXSIZE": "4GiB"}, mountinfo="")
    assert bad.max_bytes == kernel_cache.DEFAULT_MAX_BYTES and "not a number" in bad.describe()
    off = kernel_cache.inspect({**base, "CUDA_CACHE_DISABLE": "1"}, mountinfo="")
    assert off.disabled and not off.keeps_kernels and "CUDA_CACHE_DISABLE=1" in off.describe()
    default = kernel_cache.inspect({"HOME": str(tmp_path)}, mountinfo="")
    assert default.path == str(tmp_path / ".nv" / "ComputeCache")  # the driver's default


def _inspect_unprivileged(path: Path) -> tuple[bool, str]:
    """kernel_cache.inspect of `path` as a uid that is not root: this one, or (as root, in CI) a
    forked child that drops to uid 65534 first, since root writes any folder."""
    if os.geteuid() != 0:
        found = kernel_cache.inspect({"CUDA_CACHE_PATH": str(path)}, mountinfo="")
        return found.writable, found.describe()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: reports through the pipe, never returns into pytest
        try:
            os.close(read)
            os.setgid(65534)
            os.setuid(65534)
            found = kernel_cache.inspect({"CUDA_CACHE_PATH": str(path)}, mountinfo="")
            os.write(write, f"{found.writable}|{found.describe()}".encode())
        finally:
            os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    with os.fdopen(read) as reader:
        writable, described = reader.read().split("|", 1)
    return writable == "True", described


def test_kernel_cache_not_writable(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    tmp_path.chmod(0o755)
    writable, described = _inspect_unprivileged(locked)
    assert not writable and "not writable by uid" in described


def test_mountinfo_escapes_and_the_longest_mount_wins() -> None:
    info = (
        "1 0 0:1 / / rw - overlay overlay rw\n"
        "2 1 0:2 / /var/cache rw - ext4 /dev/a rw\n"
        "3 1 0:3 / /var/cache/tfgpu\\040x rw - xfs /dev/b rw\n"
    )
    assert kernel_cache.mount_of("/var/cache/tfgpu x/cuda", info) == ("/var/cache/tfgpu x", "xfs")
    assert kernel_cache.mount_of("/var/cache/other", info) == ("/var/cache", "ext4")
    assert kernel_cache.mount_of("/usr", info) == ("/", "overlay")


def preflight(cc: tuple[int, int], environ: dict[str, str], name: str = "NVIDIA GPU"):  # type: ignore[no-untyped-def]
    report = nvml.query(
        standin_pynvml([(name, "GPU-11111111-aaaa", 81920)], driver="580.65.06", cuda=13000,
                       compute_capability=cc)
    )  # fmt: skip
    return run_preflight(parse_environment(environ), environ, nvml_report=report)


def test_native_gpu_gets_nothing_extra() -> None:
    pf = preflight((8, 0), image())
    assert pf.notes == [] and pf.arch_problems == [] and pf.cache is None
    assert [v.verdict.status for v in pf.verdicts] == [gpu_support.NATIVE]


def test_hopper_names_the_jit_and_the_cache(tmp_path: Path) -> None:
    environ = {**image(), "CUDA_CACHE_PATH": str(tmp_path), "CUDA_CACHE_MAXSIZE": "4294967296"}
    pf = preflight((9, 0), environ, "NVIDIA H100 80GB HBM3")
    assert [v.verdict.status for v in pf.verdicts] == [gpu_support.PTX_JIT]
    said = " ".join([*pf.notes, *(p.what for p in pf.arch_problems)])
    assert "compute capability 9.0" in said and "JIT-compiles its PTX (compute_90)" in said
    assert f"kernel cache {tmp_path}, up to 4 GiB" in said
    assert pf.cache is not None and pf.cache.writable


def test_blackwell_with_a_failing_release_warns_and_required_refuses() -> None:
    environ = image("sm_60 sm_70 sm_80 sm_89 compute_90", (KERNELS_FAIL, XLA_FAILS))
    pf = preflight((12, 0), environ, "NVIDIA GeForce RTX 5090")
    assert [v.verdict.status for v in pf.verdicts] == [gpu_support.KNOWN_FAILURE]
    [problem] = pf.arch_problems
    assert (
        problem.severity == "warning"
        and "known to fail here: CUDA_ERROR_INVALID_PTX" in problem.what
    )
    assert "reported: #1" in problem.what and problem.fix == gpu_verdicts.REQUIRED_FIX
    with pytest.raises(GpuUnavailableError) as info:
        preflight((12, 0), {**environ, "TF_GPU_REQUIRED": "true"}, "NVIDIA GeForce RTX 5090")
    assert info.value.exit_code == 69
    assert "RTX 5090" in info.value.reason and "known to fail" in info.value.reason
    assert str(info.value).endswith(gpu_verdicts.UNUSABLE_FIX)


def test_blackwell_with_xla_failing_alone_warns_but_required_runs(tmp_path: Path) -> None:
    environ = {**image(failures=(XLA_FAILS,)), "CUDA_CACHE_PATH": str(tmp_path)}
    for extra in ({}, {"TF_GPU_REQUIRED": "true"}):
        pf = preflight((12, 0), {**environ, **extra})
        [problem] = pf.arch_problems
        assert "XLA (jit_compile=True) is known to fail" in problem.what
        assert gpu_verdicts.XLA_FIX in problem.fix


def test_below_the_oldest_kernel_warns_and_required_refuses() -> None:
    pf = preflight((5, 2), image(), "Tesla M60")
    assert [v.verdict.status for v in pf.verdicts] == [gpu_support.NO_KERNELS]
    assert "has no kernel for this GPU" in pf.arch_problems[0].what
    with pytest.raises(GpuUnavailableError, match="Tesla M60"):
        preflight((5, 2), {**image(), "TF_GPU_REQUIRED": "true"}, "Tesla M60")


def test_a_bad_image_variable_is_said_and_nothing_judged() -> None:
    pf = preflight((9, 0), {**image(), "TFGPU_IMAGE_GPU_ARCHES": "sm_90 hopper"})
    assert pf.verdicts == [] and any("not readable" in p.what for p in pf.problems)


def test_without_the_image_variables_the_build_info_decides() -> None:
    environ = {"TFGPU_IMAGE_TF": "2.21.0"}
    report = nvml.query(standin_pynvml([("T", "GPU-1", 1024)], compute_capability=(5, 2)))
    pf = run_preflight(
        parse_environment(environ),
        environ,
        nvml_report=report,
        build_info=lambda: {
            "is_cuda_build": True,
            "cuda_compute_capabilities": ["sm_60", "compute_90"],
        },
    )
    assert [v.verdict.status for v in pf.verdicts] == [gpu_support.NO_KERNELS]


def test_a_parameter_server_without_gpus_is_not_judged() -> None:
    environ = {
        **image(failures=(KERNELS_FAIL,)),
        "TF_GPU_WORKERS": "2",
        "TF_GPU_PS": "1",
        "TF_GPU_ROLE": "ps",
        "TF_GPU_WORKER_INDEX": "0",
        "TF_GPU_WORKER_HOSTS": "w-{index}",
        "TF_GPU_PS_HOSTS": "p-{index}",
        "TF_GPU_CHIEF_HOST": "c",
    }
    pf = preflight((12, 0), environ)
    assert pf.arch_problems == [] and pf.verdicts == []
