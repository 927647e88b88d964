"""The kit's images of the CUDA 11.8 bases (TensorFlow 2.14.0 and 2.15.0), proved as the 2.21
image is: `verify`, real TensorFlow creating its GPU with the cap on the fake driver, and the
libraries it loaded; and the official bases' own verdicts, on their stand-ins (tests/base_standins,
recipe cuda11.8-ubuntu22.04).

One image per CUDA repair recipe (the wheels an image adds, images/matrix.yaml `and_cuda`):
2.14.0's cu11 set (CUDA 11.8, cuDNN 8.7.0) and 2.15.0's CUDA 12.2 set (cuDNN 8.9.4) are proved
here; 2.18.0-2.21.0 share one recipe (CUDA 12.5.1, cuDNN 9.3.0.75; their sets differ only in
NCCL, which TensorFlow does not load to register a GPU), proved on 2.21.0 by test_cap.py,
test_check.py and tests/containers/test_image.py. test_one_image_proves_each_repair_recipe
holds that list to the matrix."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.base_standins import gpu_tag
from tests.gpu.harness import GpuHost
from tests.kit_images import CUDA11_VERSIONS, VERSION, build_py
from tfgpu_kit.matrix import cudagap, spec
from tfgpu_kit.matrix.spec import CudaSource

SITE = "/usr/local/lib/python3.11/dist-packages"
# The images that prove a repair recipe: these two here, 2.21.0 in the tests named above.
PROVED = (*CUDA11_VERSIONS, VERSION)
CAP_MB = 4096
# What TensorFlow dlopens to register a GPU, by CUDA major (tfgpu.machine.libs.CUDA_LIBRARIES) and
# the wheel folder each comes from in a repaired image.
WHEEL_DIRS = {
    "libcublas.so": "nvidia/cublas/lib",
    "libcublasLt.so": "nvidia/cublas/lib",
    "libcufft.so": "nvidia/cufft/lib",
    "libcusolver.so": "nvidia/cusolver/lib",
    "libcusparse.so": "nvidia/cusparse/lib",
    "libcudnn.so": "nvidia/cudnn/lib",
}
# The cuDNN 8 sub-libraries, each with a function of its own that needs no GPU: libcudnn.so.8
# loads a sub-library the first time one of its functions is called through it (as TensorFlow
# calls cuDNN), and aborts the process with "Could not load library …" when that fails.
CUDNN8_SUBLIBRARIES = {
    "libcudnn_ops_infer.so.8": "cudnnOpsInferVersionCheck",
    "libcudnn_ops_train.so.8": "cudnnOpsTrainVersionCheck",
    "libcudnn_cnn_infer.so.8": "cudnnCnnInferVersionCheck",
    "libcudnn_cnn_train.so.8": "cudnnCnnTrainVersionCheck",
    "libcudnn_adv_infer.so.8": "cudnnAdvInferVersionCheck",
    "libcudnn_adv_train.so.8": "cudnnAdvTrainVersionCheck",
}

# Initialise TensorFlow (the hook applies the cap), then list the CUDA libraries mapped in the
# process: what TensorFlow really loaded, wherever from.
LOADED = """\
import json, tensorflow as tf
gpus = [d.name for d in tf.config.list_logical_devices("GPU")]
maps = sorted({l.split()[-1] for l in open("/proc/self/maps") if ".so" in l.split()[-1]})
print("LOADED-JSON " + json.dumps({"gpus": gpus, "maps": maps}), flush=True)
"""
# Each cuDNN sub-library in a process of its own (cuDNN aborts the process when one fails to
# load), loaded through libcudnn.so.8 the way TensorFlow's calls load it; prints each one's
# exit code and cuDNN status (0: CUDNN_STATUS_SUCCESS, the sub-library is libcudnn.so.8's version).
SUBLIBRARIES = """\
import json, subprocess, sys
one = "import ctypes, sys; print(getattr(ctypes.CDLL('libcudnn.so.8'), sys.argv[1])())"
out = {}
for function in sys.argv[1:]:
    done = subprocess.run([sys.executable, "-c", one, function], capture_output=True, text=True)
    out[function] = [done.returncode, done.stdout.strip(), done.stderr.strip()[-300:]]
print("SUBLIBS-JSON " + json.dumps(out), flush=True)
"""
# On a GPU host the NVIDIA container runtime puts a `libcuda.so` link beside the driver it mounts
# (NVIDIA/libnvidia-container src/nvc_mount.c, symlink_libraries: "Many applications wrongly
# assume that libcuda.so exists (e.g. with dlopen)"; cuDNN 8's libcudnn_cnn_infer.so.8 is one).
# The fake driver's folder has libcuda.so.1 only, so the link is made here, in a folder put first
# on LD_LIBRARY_PATH, as the runtime's would be.
WITH_LIBCUDA_LINK = (
    "mkdir -p /tmp/driver-links && ln -sf /usr/local/nvidia/lib64/libcuda.so.1"
    " /tmp/driver-links/libcuda.so && LD_LIBRARY_PATH=/tmp/driver-links:$LD_LIBRARY_PATH"
    ' exec python -c "$0" "$@"'
)


def _loaded(logs: str) -> dict[str, Any]:
    lines = [line for line in logs.splitlines() if line.startswith("LOADED-JSON ")]
    assert lines, f"TensorFlow did not get as far as listing its libraries:\n{logs[-3000:]}"
    found: dict[str, Any] = json.loads(lines[-1].split(" ", 1)[1])
    return found


def test_one_image_proves_each_repair_recipe() -> None:
    """Every CUDA repair recipe of the catalogue has an image proved on the fake driver"""
    catalogue = spec.load()
    recipes: dict[tuple[str, ...], list[str]] = {}
    for tf in catalogue.matrix.tensorflow:
        gap = cudagap.requirements(catalogue, tf).gap
        assert gap is not None
        if gap.source is CudaSource.WHEELS:
            # NCCL is not among the libraries TensorFlow loads to register a GPU
            key = tuple(w for w in gap.wheels if not w.startswith("nvidia-nccl-"))
            recipes.setdefault(key, []).append(tf)
    assert len(recipes) == 3, recipes  # 2.14, 2.15, 2.18-2.21: a new recipe needs its image here
    for versions in recipes.values():
        assert [v for v in versions if v in PROVED], f"no image proves the recipe of {versions}"


@pytest.mark.parametrize("version", CUDA11_VERSIONS)
def test_verify_passes_on_the_cuda11_base(
    cuda11_images: dict[str, str], version: str, figures: dict[str, Any]
) -> None:
    """`verify`: the repaired 2.14/2.15 image passes, TensorFlow registering the fake GPU"""
    image = cuda11_images[version]
    proc = build_py("verify", "--json", image, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-3000:]
    checks = {c["name"]: c for c in json.loads(proc.stdout)[image]}
    assert (
        "Created device /job:localhost/replica:0/task:0/device:GPU:0"
        in (checks["TensorFlow registers a GPU"]["detail"])
    )
    cudnn = checks["library libcudnn.so.8"]["detail"]
    want = "8.7.0" if version == "2.14.0" else "8.9.4"
    assert cudnn == f"{SITE}/nvidia/cudnn/lib/libcudnn.so.8 ({want})"
    figures.update(image=image, cudnn=cudnn)


@pytest.mark.parametrize("version", CUDA11_VERSIONS)
def test_tensorflow_creates_the_capped_gpu_from_the_wheels(
    gpu_host: GpuHost, cuda11_images: dict[str, str], version: str, figures: dict[str, Any]
) -> None:
    """TF_GPU_MEM_LIMIT=4096 in the 2.14/2.15 image: one 4096 MB device, CUDA from the wheels"""
    image = cuda11_images[version]
    run = gpu_host.run(image, ["python", "-c", LOADED], {"TF_GPU_MEM_LIMIT": str(CAP_MB)})
    assert run.exit_code == 0, run.tail()
    assert [(c.logical, c.mb, c.physical) for c in run.created] == [(0, CAP_MB, 0)], run.tail()
    loaded = _loaded(run.stdout)
    assert loaded["gpus"] == ["/device:GPU:0"]
    major = "11" if version == "2.14.0" else "12"
    by_name = {path.rsplit("/", 1)[-1]: path for path in loaded["maps"]}
    for prefix, folder in WHEEL_DIRS.items():
        hits = [p for name, p in by_name.items() if name.startswith(prefix + ".")]
        assert hits, f"TensorFlow {version} loaded no {prefix}.*: {loaded['maps']}"
        assert all(p.startswith(f"{SITE}/{folder}/") for p in hits), hits
    # the CUDA runtime: the fake driver's, of the major TensorFlow was built for
    cudart = "libcudart.so.11.0" if major == "11" else "libcudart.so.12"
    assert f"/usr/local/nvidia/lib64/{cudart}" in loaded["maps"]
    # nothing from the base's own CUDA 11.8 and cuDNN 8.6, but the base's NVRTC 11.8, which the
    # kit links as libnvrtc.so on purpose (no wheel of 2.14's set has it; same CUDA release)
    stale = [
        p
        for p in loaded["maps"]
        if ("/cuda-11.8/" in p and "/libnvrtc.so" not in p) or "x86_64-linux-gnu/libcudnn" in p
    ]
    assert stale == []
    figures.update(image=image, created_mb=run.created[0].mb, cudart=cudart)


# Neither the official 2.14 base (images/bases.yaml) nor 2.14's [and-cuda] wheels ship the
# unversioned libnvrtc.so, which CUDA 11.8's cuBLASLt dlopens when cuDNN loads a sub-library:
# without it cuDNN aborts ("Could not load library libcudnn_ops_infer.so.8. Error: libnvrtc.so:
# cannot open shared object file"). The kit's CUDA 11 images link it to the base's
# libnvrtc.so.11.2 (templates/partials/runtime.j2); this test fails without that link.
@pytest.mark.parametrize("version", CUDA11_VERSIONS)
def test_every_cudnn_sublibrary_loads(
    gpu_host: GpuHost, cuda11_images: dict[str, str], version: str, figures: dict[str, Any]
) -> None:
    """Each cuDNN 8 sub-library loads through libcudnn.so.8 without aborting"""
    image = cuda11_images[version]
    command = ["bash", "-c", WITH_LIBCUDA_LINK, SUBLIBRARIES, *CUDNN8_SUBLIBRARIES.values()]
    run = gpu_host.run(image, command, {"TF_GPU_CONFIG": "off"}, timeout=300)
    assert run.exit_code == 0, run.tail()
    lines = [line for line in run.stdout.splitlines() if line.startswith("SUBLIBS-JSON ")]
    assert lines, run.tail()
    results = json.loads(lines[-1].split(" ", 1)[1])
    failed = {
        sublib: results[function]
        for sublib, function in CUDNN8_SUBLIBRARIES.items()
        if results[function][:2] != [0, "0"]
    }
    assert failed == {}, f"cuDNN sub-libraries that did not load in {image}: {failed}"
    figures.update(image=image, sublibraries=sorted(CUDNN8_SUBLIBRARIES))


def test_the_official_cuda11_bases_verdicts(cuda11_standins: list[Any]) -> None:
    """The official 2.14.0 and 2.15.0 bases (stand-ins) judged at the right level"""
    base_214, base_215 = gpu_tag("2.14.0"), gpu_tag("2.15.0")
    proc = build_py("verify", "--json", base_214, base_215, timeout=900)
    assert proc.returncode == 1, proc.stdout[-4000:] + proc.stderr[-3000:]
    results = json.loads(proc.stdout)
    # 2.14: TensorFlow registers the GPU; its cuDNN 8.6 (built with 8.7) fails cuDNN's ops
    checks = {c["name"]: c for c in results[base_214]}
    assert checks["TensorFlow registers a GPU"]["ok"], checks["TensorFlow registers a GPU"]
    failed = {name: c["detail"] for name, c in checks.items() if not c["ok"]}
    assert failed["library libcudnn.so.8"].startswith(
        "GPU registered; cuDNN ops will fail (8.6 < 8.7): libcudnn.so.8 at"
        " /usr/lib/x86_64-linux-gnu/libcudnn.so.8 is version 8.6.0"
    )
    assert (
        "tfgpu check reports: GPU registered; cuDNN ops will fail (8.6 < 8.7)"
        in (failed["runtime self-check"])
    )
    assert sorted(failed) == ["library libcudnn.so.8", "runtime self-check"], failed
    assert not any("will not use the GPU" in detail for detail in failed.values())
    # 2.15: built for CUDA 12.2, the base has 11.8: TensorFlow skips the GPU
    checks = {c["name"]: c for c in results[base_215]}
    refused = checks["TensorFlow registers a GPU"]
    assert not refused["ok"] and "Cannot dlopen some GPU libraries" in refused["detail"]
    assert "libcudart.so.12 cannot be loaded" in checks["library libcudart.so.12"]["detail"]
    assert "this TensorFlow will not use the GPU here" in checks["runtime self-check"]["detail"]
