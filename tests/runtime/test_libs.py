"""Which CUDA libraries a build dlopens, where TensorFlow's dlopen finds them, and TensorFlow's
version rule (no TensorFlow, no GPU: ctypes and small ELF files)."""

from __future__ import annotations

import ctypes.util
import shutil
import subprocess
from pathlib import Path

import pytest
from tfgpu.machine import libs

CUDA_BUILD = {"is_cuda_build": True, "cuda_version": "12.5.1", "cudnn_version": "9"}


def test_needed_follows_build_info() -> None:
    """Every library TensorFlow's dlopen checker loads before registering a GPU, not only the
    three a first version of the kit looked for (cuFFT, cuSOLVER, cuSPARSE missing made TF 2.21
    skip the GPU while `verify` passed)."""
    assert libs.needed(CUDA_BUILD) == [
        ("cudart", "libcudart.so.12"),
        ("cublas", "libcublas.so.12"),
        ("cublasLt", "libcublasLt.so.12"),
        ("cufft", "libcufft.so.11"),
        ("cusolver", "libcusolver.so.11"),
        ("cusparse", "libcusparse.so.12"),
        ("cudnn", "libcudnn.so.9"),
    ]
    assert libs.needed({"is_cuda_build": False}) == []  # tensorflow-cpu: no cuda_version key


def test_cuda_11_sonames() -> None:
    """CUDA 11.x keeps libcudart's soname at 11.0 and cuFFT at 10 (pip's nvidia-*-cu11 wheels
    ship lib/libcudart.so.11.0 and lib/libcufft.so.10); looking for libcudart.so.11 would call a
    working TF 2.12-2.14 set-up broken."""
    sonames = dict(
        libs.needed({"is_cuda_build": True, "cuda_version": "11.8", "cudnn_version": "8"})
    )
    assert sonames["cudart"] == "libcudart.so.11.0"
    assert sonames["cufft"] == "libcufft.so.10"
    assert sonames["cusparse"] == "libcusparse.so.11"
    assert sonames["cudnn"] == "libcudnn.so.8"


def _system_lib() -> Path:
    real = ctypes.util.find_library("z") or ctypes.util.find_library("m")
    assert real, "a system libz or libm is needed to stand in for a CUDA library"
    return next(
        p
        for d in ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64")
        if (p := Path(d, real)).exists()
    )


def test_found_in_the_search_dirs_in_order(tmp_path: Path) -> None:
    # Any real shared library stands in for libcudart here: the test is about where we look.
    first, second = tmp_path / "first", tmp_path / "second"
    for d in (first, second):
        d.mkdir()
        shutil.copy(_system_lib(), d / "libcudart.so.99")
    entry = libs.try_load("cudart", "libcudart.so.99", [str(first), str(second)])
    assert entry["loaded"] is True and entry["path"] == str(first / "libcudart.so.99")
    missing = libs.try_load("cudnn", "libcudnn.so.99", [str(first)])
    assert missing["loaded"] is False and "libcudnn.so.99" in str(missing["error"])


def test_a_wheel_folder_dlopen_does_not_search_does_not_count(tmp_path: Path) -> None:
    """cuSOLVER in site-packages/nvidia/cusolver/lib, a folder not on TensorFlow 2.21's RUNPATH:
    TensorFlow does not find it, so neither may the check."""
    lib_dir = tmp_path / "nvidia" / "cusolver" / "lib"
    lib_dir.mkdir(parents=True)
    shutil.copy(_system_lib(), lib_dir / "libcusolver.so.99")
    assert libs.try_load("cusolver", "libcusolver.so.99", [str(tmp_path)])["loaded"] is False


@pytest.fixture(scope="module")
def with_runpath(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real ELF shared object with a RUNPATH like TensorFlow's ($ORIGIN-relative)."""
    if shutil.which("gcc") is None:
        pytest.fail(
            "gcc is needed to build an ELF file for this test (Debian: apt-get install gcc)"
        )
    d = tmp_path_factory.mktemp("elf")
    src = d / "x.c"
    src.write_text("int x(void) { return 1; }\n")
    out = d / "tensorflow" / libs.FRAMEWORK
    out.parent.mkdir()
    subprocess.run(
        [
            "gcc", "-shared", "-fPIC", "-o", str(out), str(src),
            "-Wl,--enable-new-dtags,-rpath,$ORIGIN/../nvidia/cublas/lib:$ORIGIN/../nvidia/cudnn/lib",
        ],
        check=True,
    )  # fmt: skip
    return out


def test_runpath_is_read_and_origin_expanded(with_runpath: Path) -> None:
    base = with_runpath.parent.parent
    assert libs.runpath(str(with_runpath)) == [
        str(base / "nvidia" / "cublas" / "lib"),
        str(base / "nvidia" / "cudnn" / "lib"),
    ]
    assert libs.runpath("/nonexistent/lib.so") == []
    assert libs.runpath(__file__) == []  # not ELF


def test_search_dirs_are_ld_library_path_then_runpath(with_runpath: Path) -> None:
    base = with_runpath.parent.parent
    dirs = libs.search_dirs(
        str(with_runpath.parent), {"LD_LIBRARY_PATH": "/usr/local/nvidia/lib64"}
    )
    assert dirs == [
        "/usr/local/nvidia/lib64",
        str(base / "nvidia" / "cublas" / "lib"),
        str(base / "nvidia" / "cudnn" / "lib"),
    ]


@pytest.mark.parametrize(
    ("name", "loaded", "tensorflow", "refused"),
    [
        ("cudnn", "9.3.0", "2.21.0", False),
        ("cudnn", "9.10.2", "2.21.0", False),  # a newer minor is fine
        ("cudnn", "9.1.0", "2.21.0", True),  # older minor than the build's 9.3
        ("cudnn", "8.9.6", "2.17.0", False),  # the official 2.17 base: built with 8.9
        ("cudnn", "8.6.0", "2.14.0", True),  # the official 2.14 base: built with 8.7
        ("cudnn", "9.3.0", "2.99.0", False),  # a release the table does not know: not judged
        ("cudart", "12.5", "2.21.0", False),
        ("cudart", "12.8", "2.21.0", False),
        ("cudart", "12.3", "2.21.0", True),  # the official 2.18+ bases' system CUDA
    ],
)
def test_version_rule(name: str, loaded: str, tensorflow: str, refused: bool) -> None:
    build = dict(CUDA_BUILD)
    if tensorflow in ("2.17.0", "2.14.0"):
        build = {"is_cuda_build": True, "cuda_version": "12.3", "cudnn_version": "8"}
    lib = {"name": name, "loaded": True, "version": loaded}
    problem = libs.version_problem(lib, build, tensorflow)
    assert (problem is not None) is refused, problem
    if refused and name == "cudnn":
        # TensorFlow's own wording (xla/stream_executor/cuda/cuda_dnn.cc)
        assert problem is not None and problem.startswith(f"Loaded runtime CuDNN library: {loaded}")
        assert "matching major version and equal or higher minor version" in problem


def test_cudnn_minor_table_matches_the_matrix() -> None:
    """The runtime's copy of the cuDNN each release was built with equals images/matrix.yaml."""
    import yaml

    matrix = yaml.safe_load(
        (Path(__file__).resolve().parents[2] / "images" / "matrix.yaml").read_text()
    )
    from_matrix = {
        ".".join(tf.split(".")[:2]): build["cudnn"] for tf, build in matrix["tensorflow"].items()
    }
    assert from_matrix == libs.CUDNN_BUILT_WITH


def test_tensorflow_2_12_and_2_13_also_need_curand() -> None:
    build = {"is_cuda_build": True, "cuda_version": "11.8", "cudnn_version": "8"}
    assert ("curand", "libcurand.so.10") in libs.needed(build, "2.13.0")
    assert ("curand", "libcurand.so.10") not in libs.needed(build, "2.14.0")


@pytest.mark.parametrize(
    ("name", "loaded", "tensorflow", "verdict"),
    [
        ("cudnn", "8.6.0", "2.14.0", "GPU registered; cuDNN ops will fail (8.6 < 8.7)"),
        ("cudnn", "8.6.0", "2.15.0", "GPU registered; cuDNN ops will fail (8.6 < 8.9)"),
        ("cudnn", "9.1.0", "2.21.0", "GPU registered; cuDNN ops will fail (9.1 < 9.3)"),
        ("cudnn", "8.7.0", "2.14.0", None),  # the build's own minor
        ("cudnn", "8.9.4", "2.14.0", None),  # newer: TensorFlow accepts it
        ("cudnn", "8.9.6", "2.21.0", None),  # another major: never loaded (libcudnn.so.9)
        ("cudnn", "8.6.0", "2.99.0", None),  # a release the table does not know
        ("cudnn", None, "2.14.0", None),  # no version reported
        ("cudart", "11.8", "2.15.0", None),  # not cuDNN
    ],
)
def test_cudnn_ops_verdict(
    name: str, loaded: str | None, tensorflow: str, verdict: str | None
) -> None:
    """Only a cuDNN of the build's major and an older minor is "GPU registered; cuDNN ops will
    fail": TensorFlow loads it (its soname is the major's) and refuses it at the first cuDNN op."""
    assert libs.cudnn_ops_verdict(name, loaded, tensorflow) == verdict


def test_the_fake_driver_has_the_cuda_runtime_of_every_cuda_major() -> None:
    """Every CUDA major a TensorFlow of images/matrix.yaml is built with has its libcudart soname
    in the fake driver (fakegpu/README.md), and that library says it is a runtime of that major:
    TensorFlow 2.12-2.14 dlopen libcudart.so.11.0, whose real copy crashes on the fake libcuda."""
    import yaml

    import fakegpu

    matrix = yaml.safe_load(
        (Path(__file__).resolve().parents[2] / "images" / "matrix.yaml").read_text()
    )
    majors = {str(build["cuda"]).split(".")[0] for build in matrix["tensorflow"].values()}
    assert majors == {"11", "12"}, majors  # a new major needs a fake runtime: add it here
    if shutil.which("gcc") is None:
        pytest.skip("gcc is needed to compile the fake driver")
    built = fakegpu.build()
    for major in sorted(majors):
        soname = dict(libs.CUDA_LIBRARIES[major])["cudart"]
        assert soname in fakegpu.LIBRARIES, f"the fake driver has no {soname}"
        probe = (
            "import ctypes, sys; lib = ctypes.CDLL(sys.argv[1]); v = ctypes.c_int(0);"
            " assert lib.cudaRuntimeGetVersion(ctypes.byref(v)) == 0; print(v.value)"
        )
        done = subprocess.run(
            ["python3", "-c", probe, str(built / soname)],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert int(done.stdout) // 1000 == int(major), (soname, done.stdout)
