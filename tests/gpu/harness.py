"""Run a kit image on a GPU: the fake NVIDIA driver (CI, every run) or a real card.

Fake mode (fakegpu/README.md): the fake libcuda/libcudart/NVML are mounted read-only at
/usr/local/nvidia/lib64 (where the NVIDIA runtime puts the real driver, on the bases'
LD_LIBRARY_PATH), /dev/null is passed as /dev/nvidiactl (the runtime only asks NVML where a
driver device node exists), and the fake's allocation log and ledger are written to a host
directory, so a test sees every device allocation TensorFlow made. Real TensorFlow decides
everything; only the driver underneath is fake.

Real mode (`--real-gpu`, or detected): the same containers get the host's GPUs through
Docker's device request (`--gpus all`); there is no allocation log, so claims that need it
are measured with NVML instead or skipped with the reason.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker
import docker.errors
import docker.types

import fakegpu

HERE = Path(__file__).resolve().parent
PROBE_MOUNT = "/probe"
FAKE_DRIVER_MOUNT = "/usr/local/nvidia/lib64"
LOG_MOUNT = "/fakegpu"
MIB = 1 << 20
# The card the seeds' scenarios run on: two models on one 16 GiB GPU.
CARD = fakegpu.FakeCard("Fake A100-SXM4-16GB", 16384)
SMALL_CARD = fakegpu.FakeCard("Fake A100-PCIE-8GB", 8192)

_CREATED = re.compile(
    r"Created device /job:localhost/replica:0/task:0/device:GPU:(\d+) with (\d+) MB memory"
    r":\s+-> device: (\d+)"
)
# the runtime's start-up line per card: `tfgpu: GPU 0: NAME (16384 MiB, 16000 MiB free), …`
_GPU_LINE = re.compile(r"^tfgpu: GPU (\d+): .*? \((\d+) MiB,", re.M)
_PROBE = re.compile(r"^PROBE-JSON (\{.*\})$", re.M)


@dataclass(frozen=True)
class Created:
    """One `Created device` line: TensorFlow's logical GPU, its memory and physical card."""

    logical: int
    mb: int
    physical: int


@dataclass
class GpuRun:
    """What one container run showed: exit code, output, and (fake mode) the driver's log."""

    exit_code: int
    stdout: str
    stderr: str
    events: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def logs(self) -> str:
        return self.stdout + self.stderr

    @property
    def created(self) -> list[Created]:
        """TensorFlow's own `Created device … with N MB memory` lines, in order."""
        return [Created(int(a), int(b), int(c)) for a, b, c in _CREATED.findall(self.logs)]

    @property
    def totals(self) -> dict[int, int]:
        """Each GPU's total MiB as the runtime read it from NVML (its `tfgpu: GPU N:` line)."""
        return {int(i): int(mib) for i, mib in _GPU_LINE.findall(self.stderr)}

    @property
    def probe(self) -> dict[str, Any]:
        """The probe's `PROBE-JSON` result (probe.py); fails the test when there is none."""
        found = _PROBE.findall(self.stdout)
        assert found, f"the probe printed no result (exit {self.exit_code}):\n{self.tail()}"
        result: dict[str, Any] = json.loads(found[-1])
        return result

    def allocations(self, device: int = 0) -> list[int]:
        """Sizes of the device allocations TensorFlow made on card `device`, in order."""
        return [
            int(e["bytes"]) for e in self.events if e["event"] == "alloc" and e["device"] == device
        ]

    def peak_live(self, device: int = 0) -> int:
        """The most device memory the process held at once on card `device` (the fake's count)."""
        return max(
            (int(e["process_live"]) for e in self.events if e["device"] == device), default=0
        )

    def refused(self) -> list[dict[str, Any]]:
        """Allocations the fake refused for lack of memory."""
        return [e for e in self.events if e["event"] == "oom"]

    def tail(self, lines: int = 25) -> str:
        return "\n".join(self.logs.strip().splitlines()[-lines:])


def real_gpu_present() -> bool:
    """A host where the real test can run: an NVIDIA driver and a Docker engine that can give
    containers a GPU (the NVIDIA runtime or CDI registered)."""
    if not Path("/dev/nvidiactl").exists() or shutil.which("nvidia-smi") is None:
        return False
    try:
        info = subprocess.run(
            ["docker", "info", "--format", "{{json .Runtimes}} {{json .CDISpecDirs}}"],
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "nvidia" in info


class GpuHost:
    """Starts kit containers that see GPUs, fake or real, and removes them afterwards."""

    def __init__(self, client: docker.DockerClient, *, real: bool, workdir: Path) -> None:
        self.client = client
        self.real = real
        self.workdir = workdir
        self.fake_driver = None if real else fakegpu.build()
        self._containers: list[Any] = []
        self._runs = 0

    @property
    def mode(self) -> str:
        return "real" if self.real else "fake"

    def _log_dir(self) -> Path:
        self._runs += 1
        path = self.workdir / f"run-{self._runs}"
        path.mkdir(parents=True)
        path.chmod(0o777)  # the image's user (uid 1000) writes the fake's log
        return path

    def options(
        self,
        env: dict[str, str] | None = None,
        *,
        cards: Sequence[fakegpu.FakeCard] = (CARD,),
        driver: str = "560.35.03",
        log_dir: Path | None = None,
    ) -> dict[str, Any]:
        """docker-py run options for a container with GPUs (and the probe mounted)."""
        volumes = {str(HERE): {"bind": PROBE_MOUNT, "mode": "ro"}}
        environment = dict(env or {})
        options: dict[str, Any] = {"network_disabled": True, "shm_size": "1g"}
        if self.real:
            options["device_requests"] = [
                docker.types.DeviceRequest(count=-1, capabilities=[["gpu"]])
            ]
        else:
            assert self.fake_driver is not None
            log_dir = log_dir or self._log_dir()
            volumes[str(self.fake_driver)] = {"bind": FAKE_DRIVER_MOUNT, "mode": "ro"}
            volumes[str(log_dir)] = {"bind": LOG_MOUNT, "mode": "rw"}
            options["devices"] = ["/dev/null:/dev/nvidiactl:rwm"]
            environment = {
                **fakegpu.environment(
                    cards,
                    driver=driver,
                    log=f"{LOG_MOUNT}/log.jsonl",
                    ledger=f"{LOG_MOUNT}/ledger",
                ),
                **environment,
            }
        options["environment"] = environment
        options["volumes"] = volumes
        return options

    def start(
        self,
        image: str,
        command: Sequence[str],
        env: dict[str, str] | None = None,
        *,
        run_options: dict[str, Any] | None = None,
        **card_options: Any,
    ) -> tuple[Any, Path | None]:
        """Start a container in the background; (container, its log directory in fake mode).
        `run_options` go to docker-py's run as they are (e.g. a restart_policy)."""
        log_dir = None if self.real else self._log_dir()
        options = self.options(env, log_dir=log_dir, **card_options)
        extra = dict(run_options or {})
        # volumes of the test's own (a cache volume) join the driver's and the probe's
        options["volumes"] = {**options["volumes"], **extra.pop("volumes", {})}
        options.update(extra)
        container = self.client.containers.run(image, list(command), detach=True, **options)
        self._containers.append(container)
        return container, log_dir

    def run(
        self,
        image: str,
        command: Sequence[str],
        env: dict[str, str] | None = None,
        *,
        timeout: float = 180,
        **card_options: Any,
    ) -> GpuRun:
        """Run a container to its end and collect its output and the fake driver's log."""
        t0 = time.monotonic()
        container, log_dir = self.start(image, command, env, **card_options)
        try:
            status = container.wait(timeout=timeout)
        except Exception as exc:  # the read timeout of the engine's API
            raise AssertionError(
                f"{' '.join(command)} did not end within {timeout:.0f}s: {exc}"
            ) from None
        return self.finish(container, log_dir, int(status["StatusCode"]), time.monotonic() - t0)

    def finish(self, container: Any, log_dir: Path | None, code: int, seconds: float) -> GpuRun:
        stdout = container.logs(stdout=True, stderr=False).decode(errors="replace")
        stderr = container.logs(stdout=False, stderr=True).decode(errors="replace")
        events = fakegpu.read_log(log_dir / "log.jsonl") if log_dir is not None else []
        return GpuRun(code, stdout, stderr, events, seconds)

    def probe(self, image: str, *args: str, env: dict[str, str] | None = None, **kw: Any) -> GpuRun:
        """`python probe.py ARGS…` through the image's entrypoint (the user's way)."""
        return self.run(image, ["python", f"{PROBE_MOUNT}/probe.py", *args], env, **kw)

    def remove_all(self) -> None:
        for container in self._containers:
            with contextlib.suppress(docker.errors.DockerException):
                container.remove(force=True)
        self._containers.clear()
