"""A parameter-server cluster in containers of the kit's image on one Docker network: one
chief, TF_GPU_WORKERS workers and TF_GPU_PS parameter servers, each container's network alias the
DNS name its pod gets in a JobSet (`<jobset>-<replicatedJob>-<job index>-<pod index>.<subdomain>`,
the subdomain being the JobSet's name by default: jobset.sigs.k8s.io), its environment and command
exactly what `build.py k8s --workers N --ps M --jobset` renders for its role (the variables of the
parameter-server contract, docs/runtime.md), plus what Kubernetes adds to every such pod: the
JOB_COMPLETION_INDEX that the indexed Job sets and the KUBERNETES_SERVICE_HOST/PORT that the kubelet
sets (by which `tfgpu server` knows it runs in a pod: tfgpu.commands.server). No TF_CONFIG: the
image's runtime builds it. Workers and parameter servers run `tfgpu
server`; the chief runs ps_train.py. Shared by tests/multiworker/test_parameter_servers.py and
benchmarks/parameter_servers.py; what is and is not simulated is as for group.py.
"""

from __future__ import annotations

import functools
import re
import tempfile
import time
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

import yaml

from tests.multiworker.group import IMAGE_FOR_RENDER, SCRIPT_DIR, Group, Worker
from tfgpu_kit import cli

JOBSET = "tfgpu-train"
# what the kubelet sets in every pod (the API server's Service; the address is a typical one)
KUBELET_ENV = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}


def alias(role: str, index: int) -> str:
    """The pod's DNS name: replicatedJob `role` of one Job, pod `index` of that Job."""
    return f"{JOBSET}-{role}-0-{index}.{JOBSET}"


@functools.cache
def rendered(workers: int, ps: int) -> dict[str, tuple[list[str], dict[str, str]]]:
    """What `build.py k8s --workers N --ps M --jobset` gives each role's container: (its args,
    its env as written in the manifest). The containers run exactly that, so the proof is of the
    rendered manifest, not of a copy of the contract."""
    with tempfile.TemporaryDirectory() as out:
        flags = ["--workers", str(workers), "--ps", str(ps), "--jobset"]
        code = cli.main(["k8s", "--kind", "job", "--image", IMAGE_FOR_RENDER, "--out", out, *flags])
        assert code == 0, f"build.py k8s {' '.join(flags)} exited {code}"
        jobset = yaml.safe_load((Path(out) / "jobset.yaml").read_text(encoding="utf-8"))
    assert jobset["metadata"]["name"] == JOBSET
    roles = {}
    for job in jobset["spec"]["replicatedJobs"]:
        (container,) = job["template"]["spec"]["template"]["spec"]["containers"]
        roles[job["name"]] = (container["args"], {e["name"]: e["value"] for e in container["env"]})
    return roles


def contract_env(workers: int, ps: int, role: str) -> dict[str, str]:
    """The variables the rendered JobSet gives this role's pods (TF_GPU_ROLE its own)."""
    return dict(rendered(workers, ps)[role][1])


def start_task(
    g: Group,
    image: str,
    role: str,
    index: int,
    command: list[str],
    env: dict[str, str],
    extra_env: Mapping[str, str] | None = None,
) -> Worker:
    return g.start_container(
        image,
        index=index,
        alias=alias(role, index),
        command=command,
        environment={
            **env,
            **KUBELET_ENV,
            "JOB_COMPLETION_INDEX": str(index),
            **(extra_env or {}),
        },
        name=f"ps-{uuid.uuid4().hex[:8]}-{role}-{index}",
    )


def start_cluster(
    g: Group,
    image: str,
    chief_args: list[str],
    *,
    workers: int = 2,
    ps: int = 1,
    extra_env: Mapping[str, str] | None = None,
) -> tuple[Worker, list[Worker], list[Worker]]:
    """(chief, workers, parameter servers), started servers first, as a JobSet may start them
    (in any order: ps_train.py waits for every task)."""
    servers = {
        role: [
            start_task(g, image, role, i, *rendered(workers, ps)[role], extra_env)
            for i in range(count)
        ]
        for role, count in (("ps", ps), ("worker", workers))
    }
    chief = start_task(
        g,
        image,
        "chief",
        0,
        ["python", f"{SCRIPT_DIR}/ps_train.py", *chief_args],
        contract_env(workers, ps, "chief"),
        extra_env,
    )
    return chief, servers["worker"], servers["ps"]


def marks(task: Worker, name: str) -> list[tuple[str, float]]:
    """The `ps: NAME … t=…` lines of ps_train.py: (the text between, the time)."""
    found = []
    for m in re.finditer(rf"^ps: {re.escape(name)}(.*) t=([0-9.]+)$", task.logs(), re.M):
        found.append((m.group(1).strip(), float(m.group(2))))
    return found


def wait_for_mark(task: Worker, name: str, timeout: float) -> float:
    """Seconds until the chief's log has `ps: NAME`; fails on timeout or if it exits first."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if marks(task, name):
            return time.monotonic() - t0
        task.container.reload()
        if task.container.status == "exited":
            raise AssertionError(f"the chief exited before {name!r}\n{task.logs()[-6000:]}")
        time.sleep(0.2)
    raise AssertionError(f"no {name!r} from the chief in {timeout}s\n{task.logs()[-6000:]}")


def _docker_time(stamp: str) -> float:
    """An RFC 3339 time as docker writes it (UTC, nanoseconds) as time.time() counts."""
    whole, _, fraction = stamp.rstrip("Z").partition(".")
    base = datetime.strptime(whole, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC)
    return base.timestamp() + float(f"0.{fraction or '0'}")


def finished_at(task: Worker) -> float:
    """When the container's process ended (docker's State.FinishedAt)."""
    task.container.reload()
    return _docker_time(task.container.attrs["State"]["FinishedAt"])


def line_time(task: Worker, words: str) -> float:
    """When the container wrote its first log line holding `words` (docker's timestamps)."""
    raw = task.container.logs(stdout=True, stderr=True, timestamps=True)
    for line in raw.decode("utf-8", "replace").splitlines():
        if words in line:
            return _docker_time(line.split(" ", 1)[0])
    raise AssertionError(f"no line with {words!r}\n{task.logs()[-4000:]}")
