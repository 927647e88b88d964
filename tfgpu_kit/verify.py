"""Comparing what an image really holds with the matrix, and asking TensorFlow itself.

Two runs of the image, no GPU, no network:
1. `tfgpu check --json` (the runtime of the checkout, mounted, when the image has none: an official
   base, or a team's image built FROM one): TensorFlow's build, the CUDA/cuDNN libraries its dlopen
   would load and their versions against TensorFlow's rule, the hook, the settings;
2. the GPU probe: `import tensorflow` with the tests' fake NVIDIA driver mounted at
   /usr/local/nvidia/lib64 (on LD_LIBRARY_PATH in the official bases, where the NVIDIA runtime puts
   the real one). TensorFlow then goes as far as it would on a GPU: it loads every CUDA library it
   needs and registers the device ("Created device …"), or refuses and says why. Its verdict is
   the one that counts: a list of libraries can miss what TensorFlow checks.

The comparison is pure functions over plain data (tested on JSON fixtures); `collect` does the
Docker part."""

from __future__ import annotations

import contextlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from tfgpu import libs
from tfgpu.check_report import CheckReport, LibraryInfo, TensorFlowInfo

from tfgpu_kit import cudagap
from tfgpu_kit.spec import ROOT, CudaSource, Spec, TensorFlowBuild, VariantBase
from tfgpu_kit.versions import Version

CHECK_TIMEOUT_S = 300
PROBE_TIMEOUT_S = 300
RUNTIME_SOURCE = ROOT / "entrypoint" / "src"
RUNTIME_MOUNT = "/opt/tfgpu-verify/src"  # where the checkout's runtime goes in an image without it
FAKE_DRIVER_MOUNT = "/usr/local/nvidia/lib64"
CREATED = re.compile(r"Created device /job:localhost/replica:0/task:0/device:GPU:\d+ with \d+ MB")
# TensorFlow's own lines that say why it did not register a GPU (quoted when it refuses)
REFUSAL = re.compile(
    r"Could not load dynamic library|Cannot dlopen some GPU libraries|Skipping registering GPU"
    r"|Loaded runtime CuDNN library|CuDNN library needs|cuInit|failed call to|CUDA_ERROR|"
    r"Could not find cuda drivers|Unable to register"
)
# TensorFlow's conclusion, quoted first: the lines before it can be many (one per missing library)
DECISIVE = re.compile(r"Cannot dlopen some GPU libraries|Skipping registering GPU")
# Lines that match REFUSAL but are no reason: the duplicate plugin registrations every CUDA build
# of 2.15-2.17 logs ("Unable to register cuDNN factory: Attempting to register factory for plugin
# cuDNN when one has already been registered"), and TensorRT's libraries, which only TF-TRT uses.
NOT_A_REASON = re.compile(r"Attempting to register factory for plugin|'libnvinfer")


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str


@dataclass(frozen=True)
class GpuProbe:
    """What TensorFlow logged with the fake driver mounted (collect's second run)."""

    registered: bool  # a "Created device …GPU:N with M MB" line
    lines: tuple[str, ...]  # the Created line(s), or TensorFlow's refusal lines
    error: str | None = None  # the probe could not run (no gcc, the engine): says why


@dataclass(frozen=True)
class Observed:
    """What the image holds: its labels, its ENV, the runtime's report (None if it gave none) and
    the GPU probe (None when it was not run)."""

    labels: dict[str, str]
    env: dict[str, str]
    report: CheckReport | None
    report_error: str | None = None
    gpu: GpuProbe | None = None

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


def _library_problem(
    lib: LibraryInfo, tf: str, build_cuda: str, build_cudnn: str, *, all_loaded: bool = False
) -> str:
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
    if name == "cudnn":
        lack = f"the image lacks cuDNN {_major(build_cudnn)} that TensorFlow {tf} was built for"
    elif name == "cudart":
        lack = (
            f"the image lacks the CUDA {_major(build_cuda)} runtime that TensorFlow {tf} was"
            " built for"
        )
    else:
        lack = f"the image lacks {name} of CUDA {_major(build_cuda)} that TensorFlow {tf} needs"
    return f"{soname} cannot be loaded: {lack}{error}"


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
    return tf, [
        Check("image", True, "not built by this kit: its TensorFlow, libraries and GPU checked")
    ]


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
    checks = []
    for key, want in expected_labels(req, variant).items():
        have = observed.labels.get(key)
        checks.append(Check(f"label {key}", have == want, f"{have!r}, expected {want!r}"))
    env = expected_env(req)
    if slim and spec.bases.slim is not None:
        # the slim base has no NVIDIA_* of its own: without them the NVIDIA runtime gives no GPU
        env.update(spec.bases.slim.nvidia_env)
    for key, want in env.items():
        have = observed.env.get(key)
        checks.append(Check(f"env {key}", have == want, f"{have!r}, expected {want!r}"))
    return checks


def _build_checks(
    spec: Spec, tf: str, report: CheckReport, tensorflow: TensorFlowInfo
) -> list[Check]:
    """The image's Python, TensorFlow build and CUDA libraries against the matrix's entry."""
    build = spec.matrix.tensorflow[tf]
    return [
        _python_check(tf, build.python, str(report.get("python", "?"))),
        *_tensorflow_checks(tf, build, tensorflow),
        *_library_checks(tf, build, tensorflow, report.get("libraries") or []),
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
            else _library_problem(lib, tf, build.cuda, build.cudnn, all_loaded=all_loaded)
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
    checks += _build_checks(spec, tf, report, tensorflow)
    if observed.kit_image:
        checks.append(_hook(report))
        checks.append(_applied(report))
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
    return Check(
        "settings applied",
        False,
        f"applying the settings in TensorFlow failed: {applied.get('error')}",
    )


def failures(checks: list[Check]) -> list[Check]:
    return [c for c in checks if not c.ok]


def parse_report(stdout: str, image: str = "the image") -> tuple[CheckReport | None, str | None]:
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
                # the contract's shape, not checked key by key: the checks read it with .get()
                return cast(CheckReport, value), None
        offset += len(line)
    excerpt = stdout.strip()[-300:] or "(no output)"
    return None, f"no JSON object in the output of tfgpu check --json in {image}: {excerpt}"


def parse_probe(logs: str) -> GpuProbe:
    """TensorFlow's verdict from the probe's output: its Created device lines, else its reasons."""
    lines = [line.strip() for line in logs.splitlines()]
    created = [line for line in lines if CREATED.search(line)]
    if created:
        return GpuProbe(True, tuple(created))
    reasons = [line for line in lines if REFUSAL.search(line) and not NOT_A_REASON.search(line)]
    reasons.sort(key=lambda line: DECISIVE.search(line) is None)  # stable: the rest keep order
    return GpuProbe(False, tuple(dict.fromkeys(reasons))[:8])


# The probe's program: initialise TensorFlow's runtime (which creates its devices) and list them.
PROBE = "import tensorflow as tf; print(tf.config.list_logical_devices('GPU'))"


def _run(c: Any, image_id: str, timeout: float, **kwargs: Any) -> tuple[int | None, str, str]:
    """Run a container to completion; (exit code, stdout, stderr). The container is removed."""
    import docker.errors

    container = c.containers.create(image_id, network_disabled=True, **kwargs)
    try:
        container.start()
        status = container.wait(timeout=timeout)
        stdout = container.logs(stdout=True, stderr=False).decode(errors="replace")
        stderr_text = container.logs(stdout=False, stderr=True).decode(errors="replace")
    finally:
        with contextlib.suppress(docker.errors.DockerException):
            container.remove(force=True)
    code = status.get("StatusCode") if isinstance(status, dict) else None
    return code, stdout, stderr_text


def _runtime_options(has_runtime: bool) -> dict[str, Any]:
    """How to run `tfgpu check` in the image: its own, or the checkout's mounted read-only."""
    if has_runtime:
        return {"entrypoint": ["tfgpu", "check", "--json"], "command": []}
    return {
        "entrypoint": ["python3", "-m", "tfgpu", "check", "--json"],
        "command": [],
        "environment": {"PYTHONPATH": RUNTIME_MOUNT, "PYTHONDONTWRITEBYTECODE": "1"},
        "volumes": {str(RUNTIME_SOURCE): {"bind": RUNTIME_MOUNT, "mode": "ro"}},
    }


def probe_gpu(c: Any, image_id: str, env: dict[str, str], fake_driver: Path) -> GpuProbe:
    """Run TensorFlow in the image with the fake driver mounted (docs/fakegpu.md)."""
    from tfgpu_kit import fakegpu

    ld_path = env.get("LD_LIBRARY_PATH", "")
    if FAKE_DRIVER_MOUNT not in ld_path.split(":"):  # a base that does not list it
        ld_path = ":".join(p for p in (FAKE_DRIVER_MOUNT, ld_path) if p)
    environment = {
        **fakegpu.environment([fakegpu.FakeCard("Fake A100-SXM4-16GB", 16384)]),
        "LD_LIBRARY_PATH": ld_path,
        "TF_CPP_MIN_LOG_LEVEL": "0",
        # TensorFlow names each library it could not load only at this verbosity
        "TF_CPP_VMODULE": "dso_loader=1",
    }
    try:
        code, stdout, stderr_text = _run(
            c,
            image_id,
            PROBE_TIMEOUT_S,
            entrypoint=["python3", "-c", PROBE],
            command=[],
            environment=environment,
            volumes={str(fake_driver): {"bind": FAKE_DRIVER_MOUNT, "mode": "ro"}},
        )
    except Exception as exc:  # the engine or the timeout
        return GpuProbe(False, (), f"running TensorFlow with the fake driver failed: {exc}")
    probe = parse_probe(stdout + stderr_text)
    if not probe.registered and code not in (0, None):
        tail = (stdout + stderr_text).strip().splitlines()[-3:]
        probe = GpuProbe(False, probe.lines + tuple(tail), None)
    return probe


def collect(c: Any, ref: str, *, fake_driver: Path | None) -> Observed:
    """Run `tfgpu check --json` in the image (no GPU, no network), read its labels and ENV, and,
    with `fake_driver` (a directory from tfgpu_kit.fakegpu.build), probe TensorFlow's verdict."""
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
    gpu = probe_gpu(c, image.id, env, fake_driver) if fake_driver is not None else None
    try:
        code, stdout, stderr_text = _run(
            c, image.id, CHECK_TIMEOUT_S, **_runtime_options("io.tfgpu.tensorflow" in labels)
        )
    except docker.errors.DockerException as exc:
        raise DockerError(f"cannot run a container of {ref}: {exc}") from None
    except Exception as exc:  # the timeout: reported as a missing report
        return Observed(labels, env, None, f"running tfgpu check failed: {exc}", gpu)
    report, error = parse_report(stdout, ref)
    if report is None:
        tail = stderr_text.strip()[-300:]
        error = f"exit {code}; {error}" + (f"; stderr: {tail}" if tail else "")
    return Observed(labels, env, report, error, gpu)
