"""compose.yaml, brought up for real under pytest-docker, on the CPU.

The services are the ones users run, with one change the tests make in a derived
file: the GPU reservations are removed, since no NVIDIA runtime exists here
(starting them fails with `could not select device driver "nvidia"`). An override
file cannot do this with compose v1 (lists merge, and `!reset` exists only in newer
v2), so the tests write a CPU-only copy; docs/harness.md shows users the same.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections import defaultdict
from pathlib import Path
from typing import Any

import docker
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample
from pytest_docker.plugin import Services
from tfgpu.contract.settings import parse_environment

from tests import cpu_allocator
from tests.kit_images import COMPOSE_MISSING, ROOT, build_py, compose_command

pytestmark = pytest.mark.docker

COMPOSE_FILE = ROOT / "compose.yaml"
MODELS = {"text-model": (8501, "6144"), "image-model": (8502, "8192")}
METRICS_PORT = 9401
CPU = "/device:CPU:0"
# A batch of 1 allocates too little to move TensorFlow's CPU memory stats (measured:
# peak stays 0); 256 rows make the text model's embedding output alone 512 KiB.
BATCH, CALLS = 256, 3


def cpu_only(compose: dict[str, Any], *, project_dir: Path) -> dict[str, Any]:
    """The same services without GPU reservations, publishing on free host ports
    (so a user's running stack or another test run does not clash), with bind mounts
    made absolute (the derived file lives elsewhere). Services of a profile (`monitoring`)
    are left out, as `up` without --profile leaves them (tests/monitoring validates them)."""
    derived: dict[str, Any] = json.loads(json.dumps(compose))  # deep copy
    derived["services"] = {
        name: service
        for name, service in derived["services"].items()
        if not service.get("profiles")
    }
    for service in derived["services"].values():
        reservations = service.get("deploy", {}).get("resources", {}).get("reservations", {})
        reservations.pop("devices", None)
        _prune_empty(service, "deploy")
        service["ports"] = [_ephemeral(port) for port in service.get("ports", [])]
        service["volumes"] = [
            _absolute(volume, project_dir) for volume in service.get("volumes", [])
        ]
    return derived


def _prune_empty(mapping: dict[str, Any], key: str) -> None:
    value = mapping.get(key)
    if isinstance(value, dict):
        for sub in list(value):
            _prune_empty(value, sub)
        if not value:
            del mapping[key]


def _ephemeral(port: str) -> str:
    """ "127.0.0.1:8501:8501" -> "127.0.0.1::8501" (any free host port on loopback)."""
    parts = str(port).split(":")
    return f"{parts[0]}::{parts[-1]}" if len(parts) == 3 else f"127.0.0.1::{parts[-1]}"


def _absolute(volume: str, project_dir: Path) -> str:
    source, sep, rest = str(volume).partition(":")
    if source.startswith("."):
        source = str((project_dir / source).resolve())
    return source + sep + rest


def test_cpu_only_derivation_removes_only_the_gpu_reservations() -> None:
    """Guards the derivation itself: every service of compose.yaml outside a profile
    reserves GPU 0, and the derived file keeps everything else (images, commands, env,
    health checks); the profiled Prometheus is left out, as `up` leaves it."""
    compose = yaml.safe_load(COMPOSE_FILE.read_text())
    assert "version" not in compose  # valid for compose v1 and v2 alike
    derived = cpu_only(compose, project_dir=ROOT)
    assert set(derived["services"]) == {"text-model", "image-model", "jupyter"}
    profiled = {n: s["profiles"] for n, s in compose["services"].items() if "profiles" in s}
    assert profiled == {"prometheus": ["monitoring"]}
    for name, service in compose["services"].items():
        if name in profiled:
            continue
        devices = service["deploy"]["resources"]["reservations"]["devices"]
        assert devices == [{"driver": "nvidia", "device_ids": ["0"], "capabilities": ["gpu"]}]
        copy = derived["services"][name]
        assert "deploy" not in copy
        for key in ("image", "command", "environment", "healthcheck"):
            assert copy.get(key) == service.get(key), (name, key)


def test_every_service_runs_as_a_non_root_user() -> None:
    """The -gpu image's default is root (images/images.yaml says why); compose.yaml
    runs every service, the profiled Prometheus too, as a numeric non-root uid and gid."""
    compose = yaml.safe_load(COMPOSE_FILE.read_text())
    users = {name: str(service.get("user", "")) for name, service in compose["services"].items()}
    for name, user in users.items():
        uid, _, gid = user.partition(":")
        assert uid.isdigit() and gid.isdigit(), (name, user)
        assert int(uid) != 0 and int(gid) != 0, (name, user)
    assert cpu_only(compose, project_dir=ROOT)["services"]["text-model"]["user"] == "1000:1000"


def test_every_gpu_service_keeps_the_kernel_cache_on_the_shared_volume() -> None:
    """The images' CUDA_CACHE_PATH (images/gpus.yaml) is the named volume tfgpu-kernels in every
    service that reserves a GPU, so the kernels the driver JIT-compiles outlive the container."""
    from tfgpu_kit.matrix import spec

    path = spec.load().gpus.kernel_cache.path
    compose = yaml.safe_load(COMPOSE_FILE.read_text())
    assert "tfgpu-kernels" in compose["volumes"]
    for name, service in compose["services"].items():
        gpu = "deploy" in service
        assert (f"tfgpu-kernels:{path}" in service.get("volumes", [])) == gpu, name


def test_one_model_shows_recovery_with_a_bounded_restart_policy() -> None:
    """compose.yaml's text model: the recovery rule ends a process stuck at its cap (exit 75)
    and Docker restarts it, a bounded number of times (no endless loop); the rule is one the
    runtime accepts."""
    service = yaml.safe_load(COMPOSE_FILE.read_text())["services"]["text-model"]
    policy, _, retries = service["restart"].partition(":")
    assert policy == "on-failure" and 1 <= int(retries) <= 5
    rule = parse_environment(service["environment"]).recovery
    assert rule is not None and rule.action == "exit"


def test_plan_fits_one_notebook_kernel_not_two(tmp_path: Path) -> None:
    """compose.yaml's comment on the jupyter service: each kernel is its own
    TensorFlow process with its own CUDA context, and the card holds only one."""
    compose = yaml.safe_load(COMPOSE_FILE.read_text())
    assert compose["services"]["jupyter"]["labels"] == {"io.tfgpu.processes": "1"}
    fits = build_py("plan", str(COMPOSE_FILE), "--gpu-memory", "16GiB")
    assert fits.returncode == 0, fits.stdout + fits.stderr
    compose["services"]["jupyter"]["labels"]["io.tfgpu.processes"] = "2"
    two_kernels = tmp_path / "compose.yaml"
    two_kernels.write_text(yaml.safe_dump(compose))
    over = build_py("plan", str(two_kernels), "--gpu-memory", "16GiB")
    assert over.returncode == 1, over.stdout + over.stderr
    assert "GPU 0 is over-committed" in over.stdout + over.stderr


# --- pytest-docker fixtures (overriding the plugin's defaults) -----------------


@pytest.fixture(scope="session")
def docker_compose_command() -> str:
    """`docker compose` (v2) when the plugin exists, else `docker-compose` (v1, Debian)."""
    command = compose_command()
    if command is None:
        pytest.fail(COMPOSE_MISSING, pytrace=False)
    return " ".join(command)


@pytest.fixture(scope="session")
def docker_compose_file(
    kit_images: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> str:
    """The CPU-only copy of compose.yaml (the kit's images it names must be in the engine)."""
    compose = yaml.safe_load(COMPOSE_FILE.read_text())
    derived = cpu_only(compose, project_dir=ROOT)
    # The model services' metrics are checked to move with TensorFlow's CPU figures, which
    # only an allocator that keeps statistics has; which one a host gets varies, so the copy
    # asks for TensorFlow's BFC CPU allocator, which keeps them on every host.
    for name in MODELS:
        derived["services"][name]["environment"].update(cpu_allocator.STATS)
    path = tmp_path_factory.mktemp("compose") / "compose.cpu.yaml"
    path.write_text(yaml.safe_dump(derived, sort_keys=False))
    return str(path)


@pytest.fixture(scope="session")
def docker_compose_project_name() -> str:
    return f"tfgputest{os.getpid()}"


@pytest.fixture(scope="session")
def docker_setup() -> list[str]:
    # Not the plugin's `up --build --wait`: --wait is v2-only, and nothing is built
    # here (the images come from build.py). Health is awaited below, for v1 and v2.
    return ["up -d"]


@pytest.fixture(scope="session")
def docker_cleanup() -> list[str]:
    return ["down -v --timeout 10"]


@pytest.fixture(scope="session")
def stack(
    docker_services: Services, docker_compose_project_name: str, docker_ip: str
) -> dict[str, str]:
    """Waits until every service of the stack is healthy; returns their base URLs."""
    client = docker.from_env()
    containers = {
        c.labels["com.docker.compose.service"]: c
        for c in client.containers.list(
            all=True, filters={"label": f"com.docker.compose.project={docker_compose_project_name}"}
        )
    }
    assert set(containers) == {"text-model", "image-model", "jupyter"}

    def all_healthy() -> bool:
        states = {}
        for name, container in containers.items():
            container.reload()
            state = container.attrs["State"]
            assert state["Status"] == "running", (
                f"{name} is {state['Status']}:\n{container.logs().decode(errors='replace')}"
            )
            states[name] = state.get("Health", {}).get("Status")
            assert states[name] != "unhealthy", (
                f"{name} unhealthy: {state['Health']}\n{container.logs().decode(errors='replace')}"
            )
        return all(s == "healthy" for s in states.values())

    docker_services.wait_until_responsive(check=all_healthy, timeout=300, pause=2)
    urls = {
        name: f"http://{docker_ip}:{docker_services.port_for(name, port)}"
        for name, (port, _) in MODELS.items()
    }
    urls["jupyter"] = f"http://{docker_ip}:{docker_services.port_for('jupyter', 8888)}"
    for name in MODELS:
        urls[f"{name}-metrics"] = (
            f"http://{docker_ip}:{docker_services.port_for(name, METRICS_PORT)}"
        )
    return urls


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=15) as response:
        assert response.status == 200
        return json.loads(response.read())


def _post(url: str, body: dict[str, Any]) -> Any:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status == 200
        return json.loads(response.read())


@pytest.mark.parametrize("service", list(MODELS))
def test_model_service_answers_a_prediction(stack: dict[str, str], service: str) -> None:
    body = {"text": "a great film"} if service == "text-model" else {"pixels": [[0.5] * 28] * 28}
    answer = _post(f"{stack[service]}/predict", body)
    probabilities = answer["probabilities"]
    assert len(probabilities) == (2 if service == "text-model" else 10)
    assert abs(sum(probabilities) - 1.0) < 1e-4  # a real softmax ran
    assert answer["label"]


@pytest.mark.parametrize("service", list(MODELS))
def test_model_service_reports_its_cap_and_growth(stack: dict[str, str], service: str) -> None:
    health = _get(f"{stack[service]}/healthz")
    assert health["status"] == "ok"
    memory = health["memory"]
    # What the kit resolved from this service's environment in compose.yaml …
    assert memory["requested"] == {"memory_limit": MODELS[service][1], "memory_growth": "true"}
    # … and what this process's TensorFlow holds: growth is set natively by the hook;
    # the cap has nothing to apply to on a machine without a GPU, and says so.
    assert memory["applied"]["TF_FORCE_GPU_ALLOW_GROWTH"] == "true"
    assert memory["applied"]["gpus"] == []
    assert memory["applied"]["note"].startswith("not applied: no GPU")


def test_model_service_refuses_a_bad_batch(stack: dict[str, str]) -> None:
    for batch in (0, 1025, 2.0, "8", True):
        with pytest.raises(urllib.error.HTTPError) as refused:
            _post(f"{stack['text-model']}/predict", {"text": "a film", "batch": batch})
        assert refused.value.code == 400
        assert "batch" in json.loads(refused.value.read())["error"]


def _scrape(url: str) -> dict[str, list[Sample]]:
    """GET /metrics, parsed as Prometheus text: sample name -> its samples."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=15) as response:
        assert response.status == 200
        text = response.read().decode()
    samples: dict[str, list[Sample]] = defaultdict(list)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[sample.name].append(sample)
    return samples


def _cpu_value(samples: dict[str, list[Sample]], name: str) -> float:
    [value] = [s.value for s in samples[name] if s.labels.get("device") == CPU]
    return value


@pytest.mark.parametrize("service", list(MODELS))
def test_model_service_metrics_follow_its_settings_and_allocations(
    stack: dict[str, str], docker_compose_project_name: str, service: str
) -> None:
    """The metrics endpoint scraped over HTTP inside a container of the
    harness, with values that change after the program allocates tensors."""
    environment = yaml.safe_load(COMPOSE_FILE.read_text())["services"][service]["environment"]
    before = _scrape(stack[f"{service}-metrics"])

    # What this service's environment asked for, as the hook in its process read it.
    [info] = before["tfgpu_config_info"]
    assert info.labels["memory_limit"] == environment["TF_GPU_MEM_LIMIT"] == MODELS[service][1]
    assert info.labels["memory_growth"] == environment["TF_GPU_MEMORY_GROWTH"] == "true"
    assert [s.value for s in before["tfgpu_memory_growth_enabled"]] == [1.0]
    # The model is loaded (the stack is healthy), so TensorFlow's runtime is up.
    assert [s.value for s in before["tfgpu_tensorflow_initialized"]] == [1.0]

    body: dict[str, Any] = {"text": "a great film"} if service == "text-model" else {}
    for _ in range(CALLS):
        assert _post(f"{stack[service]}/predict", {**body, "batch": BATCH})["batch"] == BATCH
    after = _scrape(stack[f"{service}-metrics"])
    assert _cpu_value(before, "tfgpu_device_memory_stats_available") == 1  # the copy's switch
    peak_before = _cpu_value(before, "tfgpu_device_memory_peak_bytes")
    peak_after = _cpu_value(after, "tfgpu_device_memory_peak_bytes")
    assert peak_after > peak_before, (peak_before, peak_after)
    # Still the same process and settings.
    assert after["tfgpu_config_info"][0].labels == info.labels

    logs = _container(docker_compose_project_name, service).logs().decode(errors="replace")
    assert "tfgpu: warning: metrics:" not in logs, logs


def _container(project: str, service: str) -> Any:
    client = docker.from_env()
    [container] = client.containers.list(
        filters={
            "label": [
                f"com.docker.compose.project={project}",
                f"com.docker.compose.service={service}",
            ]
        }
    )
    return container


def test_jupyter_service_is_healthy_and_answers(stack: dict[str, str]) -> None:
    assert "version" in _get(f"{stack['jupyter']}/api")
