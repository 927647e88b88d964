"""What an image really holds, observed by running it, and TensorFlow's own verdict on its GPU.

Two runs of the image, no GPU, no network:
1. `tfgpu check --json` (the runtime of the checkout, mounted, when the image has none: an official
   base, or a team's image built FROM one): TensorFlow's build, the CUDA/cuDNN libraries its dlopen
   would load and their versions against TensorFlow's rule, the hook, the settings;
2. the GPU probe: `import tensorflow` with the tests' fake NVIDIA driver mounted at
   /usr/local/nvidia/lib64 (on LD_LIBRARY_PATH in the official bases, where the NVIDIA runtime puts
   the real one). TensorFlow then goes as far as it would on a GPU: it loads every CUDA library it
   needs and registers the device ("Created device …"), or refuses and says why. Its verdict is
   the one that counts: a list of libraries can miss what TensorFlow checks.

`collect` gathers both into an Observed; verify.checks compares it with the matrix."""

from __future__ import annotations

import contextlib
import json
import re
from pathlib import Path
from typing import Any, cast

from tfgpu.contract.check_report import CheckReport

import fakegpu
from tfgpu_kit.image.verify.checks import GpuProbe, Observed
from tfgpu_kit.matrix.spec import ROOT
from tfgpu_kit.shared.errors import DockerError

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
    import docker.errors  # here: the Docker SDK costs every build.py command 45-90 ms to import

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
    """Run TensorFlow in the image with the fake driver mounted (fakegpu/README.md)."""
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
    with `fake_driver` (a directory from fakegpu.build), probe TensorFlow's verdict."""
    import docker.errors  # here: the Docker SDK costs every build.py command 45-90 ms to import

    from tfgpu_kit.image import docker_engine  # here too: it imports the Docker SDK

    image = docker_engine.image(c, ref)
    config = image.attrs.get("Config") or {}
    labels = dict(config.get("Labels") or {})
    env = dict(item.split("=", 1) for item in config.get("Env") or [] if "=" in item)
    size = int(image.attrs.get("Size") or 0)
    # no probe of an arm64 (Jetson) image: the fake driver is x86-64 (tfgpu_kit.image.verify.jetson)
    arm64 = labels.get("io.tfgpu.platform") == "linux/arm64"
    gpu = probe_gpu(c, image.id, env, fake_driver) if fake_driver and not arm64 else None
    try:
        code, stdout, stderr_text = _run(
            c, image.id, CHECK_TIMEOUT_S, **_runtime_options("io.tfgpu.tensorflow" in labels)
        )
    except docker.errors.DockerException as exc:
        raise DockerError(f"cannot run a container of {ref}: {exc}") from None
    except Exception as exc:  # the timeout: reported as a missing report
        return Observed(labels, env, None, f"running tfgpu check failed: {exc}", gpu, size)
    report, error = parse_report(stdout, ref)
    if report is None:
        tail = stderr_text.strip()[-300:]
        error = f"exit {code}; {error}" + (f"; stderr: {tail}" if tail else "")
    return Observed(labels, env, report, error, gpu, size)
