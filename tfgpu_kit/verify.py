"""Comparing what an image really holds (the runtime's `tfgpu check --json`, its labels and ENV)
with
the matrix. Pure functions over plain data, so the comparison is tested on JSON fixtures; the
Docker part
(running the check in a container without a GPU) is `collect`."""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from typing import Any

from tfgpu_kit import matrix
from tfgpu_kit.spec import Spec
from tfgpu_kit.versions import Version

CHECK_TIMEOUT_S = 300


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str


@dataclass(frozen=True)
class Observed:
    """What the image holds: its labels, its ENV and the runtime's report (None if it gave none)."""

    labels: dict[str, str]
    env: dict[str, str]
    report: dict[str, Any] | None
    report_error: str | None = None


def expected_labels(req: matrix.Requirements, variant: str) -> dict[str, str]:
    return {
        "io.tfgpu.tensorflow": req.tensorflow,
        "io.tfgpu.variant": variant,
        "io.tfgpu.cuda": str(req.cuda),
        "io.tfgpu.cudnn": str(req.cudnn),
        "io.tfgpu.driver.min": str(req.driver_min),
        "io.tfgpu.driver.min-compat": str(req.compat_floor),
        "org.opencontainers.image.version": f"{req.tensorflow}-{variant}",
    }


def expected_env(req: matrix.Requirements) -> dict[str, str]:
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


def _library_problem(lib: dict[str, Any], req: matrix.Requirements) -> str:
    name = str(lib.get("name", "?"))
    soname = str(lib.get("soname", name))
    tf = req.tensorflow
    if name == "cudnn":
        lack = f"the image lacks cuDNN {req.cudnn.major} that TensorFlow {tf} was built for"
    elif name == "cudart":
        lack = (
            f"the image lacks the CUDA {req.cuda.major} runtime that TensorFlow {tf} was built for"
        )
    else:
        lack = f"the image lacks {name} of CUDA {req.cuda.major} that TensorFlow {tf} needs"
    error = f" ({lib['error']})" if lib.get("error") else ""
    return f"{soname} cannot be loaded: {lack}{error}"


def compare(spec: Spec, observed: Observed) -> list[Check]:
    """Every check, passing or not, in a stable order."""
    checks: list[Check] = []
    tf = observed.labels.get("io.tfgpu.tensorflow") or observed.env.get("TFGPU_IMAGE_TF")
    variant = observed.labels.get("io.tfgpu.variant", "?")
    if not tf:
        return [Check("image", False, "not built by this kit: no io.tfgpu.tensorflow label")]
    if tf not in spec.matrix.tensorflow:
        return [Check("image", False, f"TensorFlow {tf} is not in images/matrix.yaml")]
    req = matrix.requirements(spec, tf)
    build = spec.matrix.tensorflow[tf]

    for key, want in expected_labels(req, variant).items():
        have = observed.labels.get(key)
        checks.append(Check(f"label {key}", have == want, f"{have!r}, expected {want!r}"))
    for key, want in expected_env(req).items():
        have = observed.env.get(key)
        checks.append(Check(f"env {key}", have == want, f"{have!r}, expected {want!r}"))

    report = observed.report
    if report is None:
        checks.append(
            Check("tfgpu check", False, f"the runtime gave no report: {observed.report_error}")
        )
        return checks
    checks.append(Check("tfgpu check", True, f"tfgpu {report.get('tfgpu_version', '?')}"))

    python = str(report.get("python", "?"))
    low, high = (Version.parse(v) for v in build.python)
    try:
        py = Version.parse(".".join(python.split(".")[:2]))
        py_ok = low <= py <= high
    except ValueError:
        py_ok = False
    checks.append(Check("python", py_ok, f"{python}; TensorFlow {tf} supports {low}–{high}"))

    tensorflow = report.get("tensorflow") or {}
    if not tensorflow.get("importable"):
        checks.append(
            Check(
                "tensorflow import",
                False,
                f"TensorFlow cannot be imported: {tensorflow.get('error')}",
            )
        )
        checks.append(_self_check(report))
        return checks
    version = tensorflow.get("version")
    checks.append(Check("tensorflow version", version == tf, f"{version}, expected {tf}"))
    cuda_build = tensorflow.get("is_cuda_build") is True
    checks.append(
        Check(
            "cuda build",
            cuda_build,
            "TensorFlow is a CUDA build"
            if cuda_build
            else "TensorFlow is not a CUDA build (a CPU-only wheel is installed)",
        )
    )
    cuda = tensorflow.get("cuda_version")
    try:
        cuda_ok = cuda is not None and Version.parse(str(cuda)).major_minor == req.cuda.major_minor
    except ValueError:
        cuda_ok = False
    checks.append(Check("cuda version", cuda_ok, f"built for {cuda}, matrix says {req.cuda}"))
    cudnn = tensorflow.get("cudnn_version")
    cudnn_ok = _major(cudnn) == req.cudnn.major
    checks.append(Check("cudnn version", cudnn_ok, f"built for {cudnn}, matrix says {req.cudnn}"))

    libraries = report.get("libraries") or []
    if cuda_build and not libraries:
        checks.append(Check("libraries", False, "the runtime listed no CUDA libraries to load"))
    for lib in libraries:
        loaded = lib.get("loaded") is True
        detail = str(lib.get("path")) if loaded else _library_problem(lib, req)
        checks.append(Check(f"library {lib.get('soname', lib.get('name'))}", loaded, detail))

    hook = report.get("hook") or {}
    hook_ok = hook.get("installed") is True and hook.get("active") is True
    checks.append(
        Check(
            "runtime hook",
            hook_ok,
            f"{hook.get('pth')} active" if hook_ok else f"hook not active: {json.dumps(hook)}",
        )
    )
    checks.append(_applied(report))
    checks.append(_self_check(report))
    return checks


def _self_check(report: dict[str, Any]) -> Check:
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


def _applied(report: dict[str, Any]) -> Check:
    """Whether the runtime could apply the image's settings in TensorFlow."""
    applied = report.get("applied")
    if not isinstance(applied, dict):
        return Check("settings applied", False, f"the report has no applied section: {applied!r}")
    if applied.get("ok") is True:
        return Check("settings applied", True, "TensorFlow accepted the image's settings")
    return Check(
        "settings applied",
        False,
        f"applying the settings in TensorFlow failed: {applied.get('error')}",
    )


def failures(checks: list[Check]) -> list[Check]:
    return [c for c in checks if not c.ok]


def parse_report(stdout: str, image: str = "the image") -> tuple[dict[str, Any] | None, str | None]:
    """The JSON object `tfgpu check --json` printed, or an error naming `image`.

    The report is indented over many lines and may follow other output (a summary line, a
    warning), so it is decoded from the first line that starts with `{` and decodes to an object;
    anything after it is ignored."""
    decoder = json.JSONDecoder()
    offset = 0
    for line in stdout.splitlines(keepends=True):
        if line.startswith("{"):
            try:
                value, _ = decoder.raw_decode(stdout, offset)
            except json.JSONDecodeError:
                value = None
            if isinstance(value, dict):
                return value, None
        offset += len(line)
    excerpt = stdout.strip()[-300:] or "(no output)"
    return None, f"no JSON object in the output of tfgpu check --json in {image}: {excerpt}"


def collect(c: Any, ref: str) -> Observed:
    """Run `tfgpu check --json` in the image (no GPU, no network) and read its labels and ENV."""
    import docker.errors

    from tfgpu_kit.errors import DockerError

    try:
        image = c.images.get(ref)
    except docker.errors.ImageNotFound:
        raise DockerError(
            f"image {ref} not found locally", hint="build it first or pull it"
        ) from None
    config = image.attrs.get("Config") or {}
    labels = dict(config.get("Labels") or {})
    env = dict(item.split("=", 1) for item in config.get("Env") or [] if "=" in item)
    try:
        container = c.containers.create(
            image.id,
            entrypoint=["tfgpu", "check", "--json"],
            command=[],
            network_disabled=True,
        )
    except docker.errors.DockerException as exc:
        raise DockerError(f"cannot create a container from {ref}: {exc}") from None
    try:
        container.start()
        status = container.wait(timeout=CHECK_TIMEOUT_S)
        stdout = container.logs(stdout=True, stderr=False).decode(errors="replace")
        stderr_text = container.logs(stdout=False, stderr=True).decode(errors="replace")
    except Exception as exc:  # the engine or the timeout: reported as a missing report
        return Observed(labels, env, None, f"running tfgpu check failed: {exc}")
    finally:
        with contextlib.suppress(docker.errors.DockerException):
            container.remove(force=True)
    report, error = parse_report(stdout, ref)
    if report is None:
        code = status.get("StatusCode") if isinstance(status, dict) else status
        tail = stderr_text.strip()[-300:]
        error = f"exit {code}; {error}" + (f"; stderr: {tail}" if tail else "")
    return Observed(labels, env, report, error)
