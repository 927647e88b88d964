"""A group of worker containers as `build.py k8s --workers N` would run them on a cluster, on one
Docker network: each container's network alias is the DNS name Kubernetes gives that pod
(`<hostname>.<subdomain>`, read from the rendered manifest), its environment is exactly the
manifest's container env plus the JOB_COMPLETION_INDEX the Job controller sets; nothing else (no
TF_CONFIG: the image's runtime builds it). Shared by tests/multiworker and
benchmarks/multiworker.py.

What this simulates and what it does not: the DNS names, the environment and the kit's whole
path in the image (entrypoint `tfgpu run`, hook, TF_CONFIG, TensorFlow's gRPC cluster) are the
cluster's; the scheduling, the headless Service's endpoints, the Job controller's restarts and
the network between nodes are not (docs/scale.md, "What was simulated").
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker
import docker.errors
import yaml
from docker.models.containers import Container

from tfgpu_kit import cli

HERE = Path(__file__).resolve().parent
SCRIPT_DIR = "/mw"  # where mw_train.py is mounted, read-only
CHECKPOINTS = "/checkpoints"  # --checkpoint-claim's mount path in the manifest
IMAGE_FOR_RENDER = "tfgpu/tensorflow:2.21.0-gpu"


@dataclass(frozen=True)
class Rendered:
    """What the Indexed Job and its Service say each worker gets."""

    workers: int
    env: dict[str, str]  # the container's env, as written in the manifest
    hostname_prefix: str  # an Indexed Job's pod hostname is `<job>-<index>`
    subdomain: str  # the pod's subdomain: the headless Service

    def alias(self, index: int) -> str:
        return f"{self.hostname_prefix}-{index}.{self.subdomain}"


def render(out: Path, *flags: str) -> Rendered:
    """`build.py k8s --kind job --workers …` into `out`; the Job's worker facts."""
    code = cli.main(
        ["k8s", "--kind", "job", "--image", IMAGE_FOR_RENDER, "--out", str(out), *flags]
    )
    assert code == 0, f"build.py k8s {' '.join(flags)} exited {code}"
    job = yaml.safe_load((out / "job.yaml").read_text(encoding="utf-8"))
    service = yaml.safe_load((out / "service.yaml").read_text(encoding="utf-8"))
    pod = job["spec"]["template"]["spec"]
    assert pod["subdomain"] == service["metadata"]["name"]
    (container,) = pod["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    return Rendered(int(job["spec"]["completions"]), env, job["metadata"]["name"], pod["subdomain"])


@dataclass
class Worker:
    index: int
    container: Container
    started: float  # time.time() when it was started

    def logs(self) -> str:
        return str(self.container.logs(stdout=True, stderr=True).decode("utf-8", "replace"))

    def marks(self, name: str) -> list[tuple[str, float]]:
        """The `mw: NAME … t=…` lines of mw_train.py: (the text between, the time)."""
        found = []
        for m in re.finditer(rf"^mw: {re.escape(name)}(.*) t=([0-9.]+)$", self.logs(), re.M):
            found.append((m.group(1).strip(), float(m.group(2))))
        return found

    def wait(self, timeout: float) -> int:
        """Its exit code; an AssertionError with its log when it runs past `timeout` (a hang)."""
        try:
            return int(self.container.wait(timeout=timeout)["StatusCode"])
        except Exception as error:  # requests' ReadTimeout, wrapped as ConnectionError
            self.container.kill()
            raise AssertionError(
                f"worker {self.index} still running after {timeout:.0f}s ({error})\n"
                f"{self.logs()[-4000:]}"
            ) from None


@dataclass
class Group:
    client: docker.DockerClient
    network: str
    volume: str
    workers: list[Worker] = field(default_factory=list)

    def start(
        self,
        image: str,
        rendered: Rendered,
        args: list[str],
        *,
        indices: list[int] | None = None,
        extra_env: Mapping[str, str] | None = None,
    ) -> list[Worker]:
        """One container per index (default: all), started in index order."""
        started = []
        for index in range(rendered.workers) if indices is None else indices:
            env = {**rendered.env, "JOB_COMPLETION_INDEX": str(index), **(extra_env or {})}
            worker = self.start_container(
                image,
                index=index,
                alias=rendered.alias(index),
                command=["python", f"{SCRIPT_DIR}/mw_train.py", *args],
                environment=env,
                name=f"mw-{uuid.uuid4().hex[:8]}-{index}",
                binds={self.volume: {"bind": CHECKPOINTS, "mode": "rw"}},
            )
            started.append(worker)
        return started

    def start_container(
        self,
        image: str,
        *,
        index: int,
        alias: str,
        command: list[str],
        environment: Mapping[str, str],
        name: str,
        binds: Mapping[str, dict[str, str]] | None = None,
    ) -> Worker:
        """One task's container on the group's network under its pod's DNS name, the test
        scripts mounted read-only (and `binds`), started and tracked for removal."""
        api = self.client.api
        created = api.create_container(
            image,
            command=command,
            environment=dict(environment),
            host_config=api.create_host_config(
                binds={str(HERE): {"bind": SCRIPT_DIR, "mode": "ro"}, **(binds or {})},
                network_mode=self.network,
                shm_size="256m",
            ),
            networking_config=api.create_networking_config(
                {self.network: api.create_endpoint_config(aliases=[alias])}
            ),
            name=name,
        )
        container = self.client.containers.get(created["Id"])
        t0 = time.time()
        container.start()
        worker = Worker(index, container, t0)
        self.workers.append(worker)
        return worker

    def remove(self, workers: list[Worker]) -> None:
        for worker in workers:
            with suppress(docker.errors.NotFound):
                worker.container.remove(force=True)
            self.workers.remove(worker)


@contextmanager
def group(client: docker.DockerClient) -> Iterator[Group]:
    """A fresh network (internal: nothing leaves it) and checkpoint volume; all removed after."""
    tag = uuid.uuid4().hex[:8]
    network = client.networks.create(f"tfgpu-mw-{tag}", driver="bridge", internal=True)
    volume = client.volumes.create(f"tfgpu-mw-{tag}")
    made = Group(client, network.name or "", volume.name or "")
    try:
        yield made
    finally:
        made.remove(list(made.workers))
        network.remove()
        volume.remove(force=True)


def run_all(group_: Group, workers: list[Worker], timeout: float) -> list[int]:
    """Wait for every worker; their exit codes."""
    deadline = time.monotonic() + timeout
    return [w.wait(max(1.0, deadline - time.monotonic())) for w in workers]


def describe(workers: list[Worker]) -> str:
    """Every worker's log, for an assertion's message."""
    return "\n".join(f"--- worker {w.index}\n{w.logs()[-4000:]}" for w in workers)


def wait_for(worker: Worker, mark: str, timeout: float) -> float:
    """Seconds until `worker`'s log has `mw: MARK`; fails on timeout or if it exits first."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if worker.marks(mark):
            return time.monotonic() - t0
        worker.container.reload()
        if worker.container.status == "exited":
            raise AssertionError(f"worker {worker.index} exited before {mark!r}\n{worker.logs()}")
        time.sleep(0.2)
    raise AssertionError(f"no {mark!r} from worker {worker.index} in {timeout}s\n{worker.logs()}")


def info(**parts: Any) -> str:
    return " ".join(f"{k}={v}" for k, v in parts.items())
