"""The checks of `build.py verify`: what an image really holds (its labels, ENV, the runtime's
`tfgpu check --json` report and TensorFlow's verdict on the fake driver, gathered by
tfgpu_kit.image.verify.observe) against the matrix. Pure functions over plain data, tested on JSON
fixtures."""

from __future__ import annotations

import json
from dataclasses import dataclass

from tfgpu.contract.check_report import CheckReport, LibraryInfo, TensorFlowInfo
from tfgpu.machine import libs

from tfgpu_kit.matrix import cudagap
from tfgpu_kit.matrix.spec import CudaSource, Spec, TensorFlowBuild, VariantBase
from tfgpu_kit.matrix.versions import Version


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    # False: this could not be checked here (the detail says why): neither passed nor failed
    checked: bool = True

    def as_dict(self) -> dict[str, object]:
        """The JSON of the check: `ok` is null for one that could not be checked."""
        return {"name": self.name, "ok": self.ok if self.checked else None, "detail": self.detail}

    @property
    def verdict(self) -> str:
        return "not checked" if not self.checked else "ok" if self.ok else "FAIL"


def not_checked(name: str, why: str) -> Check:
    return Check(name, False, why, checked=False)


@dataclass(frozen=True)
class GpuProbe:
    """What TensorFlow logged with the fake driver mounted (collect's second run)."""

    registered: bool  # a "Created device …GPU:N with M MB" line
    lines: tuple[str, ...]  # the Created line(s), or TensorFlow's refusal lines
    error: str | None = None  # the probe could not run (no gcc, the engine): says why


@dataclass(frozen=True)
class Observed:
    """What the image holds: its labels, its ENV, the runtime's report (None if it gave none), the
    GPU probe (None when it was not run) and the engine's Size of the image (0: not read)."""

    labels: dict[str, str]
    env: dict[str, str]
    report: CheckReport | None
    report_error: str | None = None
    gpu: GpuProbe | None = None
    size: int = 0

    @property
    def kit_image(self) -> bool:
        return "io.tfgpu.tensorflow" in self.labels


def expected_labels(req: cudagap.Requirements, variant: str) -> dict[str, str]:
    assert req.gap is not None
    return {
        "io.tfgpu.tensorflow": req.tensorflow,
        "io.tfgpu.variant": variant,
        "io.tfgpu.cuda": str(req.cuda),
        "io.tfgpu.cudnn": str(req.cudnn),
        "io.tfgpu.cuda.source": req.gap.source.value,
        "io.tfgpu.cuda.wheels": " ".join(req.gap.wheels),
        "io.tfgpu.tf-keras": req.tf_keras or "",
        "io.tfgpu.tensorflow.cuda": str(req.build_cuda),
        "io.tfgpu.tensorflow.cudnn": str(req.build_cudnn),
        "io.tfgpu.driver.min": str(req.driver_min),
        "io.tfgpu.driver.min-compat": str(req.compat_floor),
        "org.opencontainers.image.version": f"{req.tensorflow}-{variant}",
    }


def expected_env(req: cudagap.Requirements) -> dict[str, str]:
    return {
        "TF_GPU_MEMORY_GROWTH": "true",
        "TFGPU_IMAGE_TF": req.tensorflow,
        "TFGPU_IMAGE_CUDA": req.cuda.major_minor,
        "TFGPU_IMAGE_DRIVER_MIN": str(req.driver_min),
        "TFGPU_IMAGE_DRIVER_MIN_COMPAT": str(req.compat_floor),
        "NVIDIA_REQUIRE_CUDA": req.require_cuda,
    }


def _major(text: object) -> int | None:
    try:
        return Version.parse(str(text)).major
    except ValueError:
        return None


def _library_problem(lib: LibraryInfo, tf: str, build: TensorFlowBuild, all_loaded: bool) -> str:
    """What is wrong with one library; `all_loaded`: every library TensorFlow needs loads."""
    name = str(lib.get("name", "?"))
    soname = str(lib.get("soname", name))
    error = f" ({lib['error']})" if lib.get("error") else ""
    if lib.get("loaded"):  # loaded, but TensorFlow's version rule refuses it
        found = f"{soname} at {lib.get('path')} is version {lib.get('version')}{error}"
        # a cuDNN short of the build's minor only, with everything else loading: TensorFlow
        # registers the GPU and fails every cuDNN op
        level = libs.cudnn_ops_verdict(name, lib.get("version"), tf) if all_loaded else None
        return f"{level}: {found}" if level else found
    lack = {
        "cudnn": f"cuDNN {_major(build.cudnn)} that TensorFlow {tf} was built for",
        "cudart": f"the CUDA {_major(build.cuda)} runtime that TensorFlow {tf} was built for",
    }.get(name, f"{name} of CUDA {_major(build.cuda)} that TensorFlow {tf} needs")
    return f"{soname} cannot be loaded: the image lacks {lack}{error}"


def _identity(spec: Spec, observed: Observed) -> tuple[str | None, list[Check]]:
    """The image's TensorFlow version (label, else the report's), or a failing check."""
    tf = observed.labels.get("io.tfgpu.tensorflow") or observed.env.get("TFGPU_IMAGE_TF")
    if not tf:
        tensorflow = (observed.report or {}).get("tensorflow")
        tf = tensorflow.get("version") if tensorflow else None
        if not tf:
            why = observed.report_error or "TensorFlow cannot be imported"
            return None, [Check("image", False, f"no TensorFlow version found: {why}")]
    if tf not in spec.matrix.tensorflow:
        return None, [Check("image", False, f"TensorFlow {tf} is not in images/matrix.yaml")]
    if observed.kit_image:
        return tf, []
    note = "not built by this kit: its TensorFlow, libraries and GPU checked"
    return tf, [Check("image", True, note)]


def _label_checks(spec: Spec, tf: str, observed: Observed) -> list[Check]:
    """Labels and ENV against the requirements of the CUDA source the image says it used."""
    source = observed.labels.get("io.tfgpu.cuda.source", CudaSource.AUTO.value)
    try:
        override = CudaSource(source)
    except ValueError:
        return [Check("label io.tfgpu.cuda.source", False, f"{source!r}: not base or wheels")]
    variant = observed.labels.get("io.tfgpu.variant", "?")
    known = spec.images.variants.get(variant)
    slim = known is not None and known.base is VariantBase.SLIM
    # cuda_source does not apply on the slim base (always the wheels)
    req = cudagap.requirements(spec, tf, override=None if slim else override, slim=slim)
    env = expected_env(req)
    if slim and spec.bases.slim is not None:
        # the slim base has no NVIDIA_* of its own: without them the NVIDIA runtime gives no GPU
        env.update(spec.bases.slim.nvidia_env)
    return [
        Check(f"{kind} {key}", have.get(key) == want, f"{have.get(key)!r}, expected {want!r}")
        for kind, wanted, have in (
            ("label", expected_labels(req, variant), observed.labels),
            ("env", env, observed.env),
        )
        for key, want in wanted.items()
    ]


def _python_check(tf: str, supported: tuple[str, str], python: str) -> Check:
    low, high = (Version.parse(v) for v in supported)
    try:
        py = Version.parse(".".join(python.split(".")[:2]))
        py_ok = low <= py <= high
    except ValueError:
        py_ok = False
    return Check("python", py_ok, f"{python}; TensorFlow {tf} supports {low}–{high}")


def _tensorflow_checks(tf: str, build: TensorFlowBuild, tensorflow: TensorFlowInfo) -> list[Check]:
    version = tensorflow.get("version")
    cuda_build = tensorflow.get("is_cuda_build") is True
    cuda = tensorflow.get("cuda_version")
    try:
        cuda_ok = cuda is not None and (
            Version.parse(str(cuda)).major_minor == Version.parse(build.cuda).major_minor
        )
    except ValueError:
        cuda_ok = False
    cudnn = tensorflow.get("cudnn_version")
    cudnn_ok = _major(cudnn) == Version.parse(build.cudnn).major
    return [
        Check("tensorflow version", version == tf, f"{version}, expected {tf}"),
        Check(
            "cuda build",
            cuda_build,
            "TensorFlow is a CUDA build"
            if cuda_build
            else "TensorFlow is not a CUDA build (a CPU-only wheel is installed)",
        ),
        Check("cuda version", cuda_ok, f"built for {cuda}, matrix says {build.cuda}"),
        Check("cudnn version", cudnn_ok, f"built for {cudnn}, matrix says {build.cudnn}"),
    ]


def _library_checks(
    tf: str, build: TensorFlowBuild, tensorflow: TensorFlowInfo, libraries: list[LibraryInfo]
) -> list[Check]:
    checks = []
    if tensorflow.get("is_cuda_build") is True and not libraries:
        checks.append(Check("libraries", False, "the runtime listed no CUDA libraries to load"))
    all_loaded = all(lib.get("loaded") is True for lib in libraries)
    for lib in libraries:
        ok = lib.get("loaded") is True and not lib.get("error")
        detail = (
            f"{lib.get('path')} ({lib.get('version') or 'loaded'})"
            if ok
            else _library_problem(lib, tf, build, all_loaded)
        )
        checks.append(Check(f"library {lib.get('soname', lib.get('name'))}", ok, detail))
    return checks


def compare(spec: Spec, observed: Observed) -> list[Check]:
    """Every check, passing or not, in a stable order."""
    tf, checks = _identity(spec, observed)
    if tf is None:
        return checks
    if observed.kit_image:
        checks += _label_checks(spec, tf, observed)
    report = observed.report
    if report is None:
        checks.append(
            Check("tfgpu check", False, f"the runtime gave no report: {observed.report_error}")
        )
        return checks + _gpu_check(observed.gpu)
    checks.append(Check("tfgpu check", True, f"tfgpu {report.get('tfgpu_version', '?')}"))
    tensorflow = report.get("tensorflow")
    if not tensorflow or not tensorflow.get("importable"):
        why = tensorflow.get("error") if tensorflow else "the report has no tensorflow section"
        checks.append(Check("tensorflow import", False, f"TensorFlow cannot be imported: {why}"))
        return [*checks, _self_check(report)]
    # the image's Python, TensorFlow build and CUDA libraries against the matrix's entry
    build = spec.matrix.tensorflow[tf]
    checks += [
        _python_check(tf, build.python, str(report.get("python", "?"))),
        *_tensorflow_checks(tf, build, tensorflow),
        *_library_checks(tf, build, tensorflow, report.get("libraries") or []),
    ]
    if observed.kit_image:
        checks += [_hook(report), _applied(report)]
    checks.append(_self_check(report))
    return checks + _gpu_check(observed.gpu)


def _hook(report: CheckReport) -> Check:
    hook = report.get("hook")
    if hook is None:
        return Check("runtime hook", False, "hook not active: the report has no hook section")
    ok = hook.get("installed") is True and hook.get("active") is True
    detail = f"{hook.get('pth')} active" if ok else f"hook not active: {json.dumps(hook)}"
    return Check("runtime hook", ok, detail)


def _gpu_check(probe: GpuProbe | None) -> list[Check]:
    """TensorFlow's own verdict with the fake driver; nothing when the probe was not asked for."""
    if probe is None:
        return []
    if probe.error is not None:
        return [Check("TensorFlow registers a GPU", False, f"the probe did not run: {probe.error}")]
    if probe.registered:
        return [Check("TensorFlow registers a GPU", True, "; ".join(probe.lines))]
    said = "; ".join(probe.lines) or "no Created device line and no reason logged"
    return [Check("TensorFlow registers a GPU", False, f"TensorFlow refused the GPU: {said}")]


def _self_check(report: CheckReport) -> Check:
    """The runtime's own verdict: each `error` problem it reported, whether or not a check above
    covers it. Warnings (no GPU here, a small /dev/shm) are expected without a GPU."""
    problems = report.get("problems")
    if not isinstance(problems, list):
        return Check("runtime self-check", False, f"the report has no problems list: {problems!r}")
    errors = [p for p in problems if isinstance(p, dict) and p.get("severity") == "error"]
    if not errors:
        return Check("runtime self-check", True, f"no errors ({len(problems)} warning(s))")
    named = []
    for problem in errors:
        what, fix = problem.get("what", "?"), problem.get("fix")
        named.append(f"{what} (fix: {fix})" if fix else str(what))
    return Check("runtime self-check", False, "tfgpu check reports: " + "; ".join(named))


def _applied(report: CheckReport) -> Check:
    """Whether the runtime could apply the image's settings in TensorFlow."""
    applied = report.get("applied")
    if not isinstance(applied, dict):
        return Check("settings applied", False, f"the report has no applied section: {applied!r}")
    if applied.get("ok") is True:
        return Check("settings applied", True, "TensorFlow accepted the image's settings")
    error = applied.get("error")
    return Check("settings applied", False, f"applying the settings in TensorFlow failed: {error}")


def failures(checks: list[Check]) -> list[Check]:
    return [c for c in checks if c.checked and not c.ok]
