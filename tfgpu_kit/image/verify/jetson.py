"""`build.py verify` of a Jetson (L4T, arm64) image of images/l4t.yaml: what can be judged off a
Jetson, and what cannot, said as such.

Checked: the labels and ENV the kit's Dockerfile gives it, against its l4t.yaml entry; the
runtime's `tfgpu check --json` in the image (TensorFlow imports, its version, the image's Python
against the entry's, whether TensorFlow is a CUDA build as NVIDIA's Jetson wheel is, the hook,
the settings applied, the runtime's own errors). Not checked (neither passed nor failed): the CUDA
libraries TensorFlow loads and TensorFlow's verdict on the GPU. A Jetson's CUDA is JetPack's and
its GPU the board's: neither exists off a Jetson, and the GPU probe's fake driver is an x86-64
NVML/CUDA stand-in, which a Jetson does not have either. On the board, `tfgpu check` says both."""

from __future__ import annotations

from tfgpu.contract.check_report import CheckReport

from tfgpu_kit.image.verify.checks import Check, Observed, _applied, _hook, _self_check, not_checked
from tfgpu_kit.matrix import catalog
from tfgpu_kit.matrix.spec import Spec
from tfgpu_kit.matrix.versions import Version

PLATFORM_LABEL = "io.tfgpu.platform"
VERSION_LABEL = "org.opencontainers.image.version"
NO_JETSON = "needs a Jetson"
NOT_CHECKED_LIBRARIES = (
    f"{NO_JETSON}: the CUDA libraries TensorFlow loads there are JetPack's, on the board"
    " (run `tfgpu check` on the Jetson)"
)
NOT_CHECKED_GPU = (
    f"{NO_JETSON}: a Jetson's GPU is the board's (unified memory, no NVML); the GPU probe's fake"
    " driver is an x86-64 NVML/CUDA stand-in"
)


def is_jetson(labels: dict[str, str]) -> bool:
    """A Jetson image of this kit: its platform label says arm64 and its variant l4t."""
    return labels.get(PLATFORM_LABEL) == "linux/arm64" and labels.get("io.tfgpu.variant") == "l4t"


def _expected(image: catalog.Image) -> tuple[dict[str, str], dict[str, str]]:
    """The labels and ENV templates/partials/l4t-*.j2 give the image (its l4t.yaml entry)."""
    entry = image.jetson
    assert entry is not None
    labels = {
        "io.tfgpu.tensorflow": image.tensorflow,
        "io.tfgpu.variant": "l4t",
        PLATFORM_LABEL: "linux/arm64",
        "io.tfgpu.l4t": entry.l4t,
        "io.tfgpu.jetpack": entry.jetpack or "unknown",
        "io.tfgpu.cuda": entry.cuda,
        "io.tfgpu.cudnn": entry.cudnn or "unknown",
        VERSION_LABEL: image.name,
    }
    env = {
        "TF_GPU_MEMORY_GROWTH": "true",
        "TFGPU_IMAGE_TF": image.tensorflow,
        "TFGPU_IMAGE_CUDA": entry.cuda,
        "NVIDIA_REQUIRE_CUDA": entry.require_cuda,
    }
    return labels, env


def _major_minor(text: str) -> str:
    try:
        return Version.parse(text.split("+")[0]).major_minor
    except ValueError:
        return text


def _report_checks(image: catalog.Image, report: CheckReport) -> list[Check]:
    entry = image.jetson
    assert entry is not None
    checks = [Check("tfgpu check", True, f"tfgpu {report.get('tfgpu_version', '?')}")]
    tensorflow = report.get("tensorflow")
    if not tensorflow or not tensorflow.get("importable"):
        why = tensorflow.get("error") if tensorflow else "the report has no tensorflow section"
        checks.append(Check("tensorflow import", False, f"TensorFlow cannot be imported: {why}"))
        return [*checks, _self_check(report)]
    # NVIDIA's Jetson wheels carry a local version (2.11.0+nv23.01): the public part must match
    version = str(tensorflow.get("version"))
    python = str(report.get("python", "?"))
    cuda_build = tensorflow.get("is_cuda_build") is True
    return [
        *checks,
        Check(
            "tensorflow version",
            version.split("+")[0] == image.tensorflow,
            f"{version}, expected {image.tensorflow}",
        ),
        Check(
            "python",
            _major_minor(python) == entry.python,
            f"{python}; the base's per images/l4t.yaml: {entry.python}",
        ),
        Check(
            "cuda build",
            cuda_build,
            "TensorFlow is a CUDA build"
            if cuda_build
            else "TensorFlow is not a CUDA build (NVIDIA's Jetson wheel is; a CPU-only one is"
            " installed)",
        ),
        not_checked("CUDA libraries", NOT_CHECKED_LIBRARIES),
        _hook(report),
        _applied(report),
        _self_check(report),
    ]


def compare(spec: Spec, observed: Observed) -> list[Check]:
    """Every check of a Jetson image, passing, failing or not checked, in a stable order."""
    name = observed.labels.get(VERSION_LABEL, "")
    by_name = {image.name: image for image in catalog.jetson_images(spec)}
    image = by_name.get(name)
    if image is None:
        known = ", ".join(sorted(by_name)) or "none"
        return [Check("image", False, f"{name!r} is not an image of images/l4t.yaml ({known})")]
    labels, env = _expected(image)
    checks = [
        Check(f"{kind} {key}", have.get(key) == want, f"{have.get(key)!r}, expected {want!r}")
        for kind, wanted, have in (("label", labels, observed.labels), ("env", env, observed.env))
        for key, want in wanted.items()
    ]
    if observed.report is None:
        why = f"the runtime gave no report: {observed.report_error}"
        checks.append(Check("tfgpu check", False, why))
    else:
        checks += _report_checks(image, observed.report)
    return [*checks, not_checked("TensorFlow registers a GPU", NOT_CHECKED_GPU)]
