"""Render Kubernetes manifests for an image built by the kit (`build.py k8s`).

Templates live in templates/k8s/ (Jinja2, StrictUndefined); every value is written
JSON-quoted, which is valid YAML, so a value can never change the document's shape."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import jinja2

TEMPLATES = Path(__file__).resolve().parent.parent / "templates" / "k8s"
GPU_RESOURCE = "nvidia.com/gpu"


@dataclass(frozen=True)
class Workload:
    """The Deployment (serving) or the Job (training)."""

    name: str
    args: list[str]
    replicas: int = 1  # Deployment
    port: int | None = None  # Deployment: the model server's HTTP port
    probe_path: str | None = None  # Deployment: readiness and liveness
    parallelism: int = 1  # Job
    completions: int = 1  # Job
    backoff_limit: int = 2  # Job


@dataclass(frozen=True)
class Common:
    """What both workloads share: the image, the environment contract, resources, identity."""

    image: str
    env: list[tuple[str, str]]
    gpus: int = 1
    cpu: str = "1"
    memory: str = "8Gi"
    uid: int = 1000
    gid: int = 1000
    namespace: str | None = None
    metrics_port: int | None = None
    labels: list[tuple[str, str]] = field(default_factory=list)


@dataclass(frozen=True)
class TimeSlicing:
    replicas: int
    namespace: str = "gpu-operator"
    name: str = "tfgpu-time-slicing"


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,  # YAML, not HTML
    )
    env.filters["q"] = lambda value: json.dumps(value, ensure_ascii=False)
    return env


def _context(kind: str, workload: Workload, common: Common) -> dict[str, object]:
    ports = []
    if workload.port is not None:
        ports.append({"name": "http", "number": workload.port})
    if common.metrics_port is not None:
        ports.append({"name": "metrics", "number": common.metrics_port})
    labels = [
        ("app.kubernetes.io/name", workload.name),
        ("app.kubernetes.io/component", "serving" if kind == "deployment" else "training"),
        ("app.kubernetes.io/managed-by", "tfgpu-kit"),
        *common.labels,
    ]
    kit = {
        "image": common.image,
        "env": common.env,
        "gpus": common.gpus,
        "gpu_resource": GPU_RESOURCE,
        "cpu": common.cpu,
        "memory": common.memory,
        "uid": common.uid,
        "gid": common.gid,
        "namespace": common.namespace,
        "metrics_port": common.metrics_port,
    }
    container = {
        "name": workload.name,
        "args": workload.args,
        "ports": ports,
        "probe_path": workload.probe_path if kind == "deployment" else None,
        "restart_policy": "Never" if kind == "job" else None,
        "replicas": workload.replicas,
        "parallelism": workload.parallelism,
        "completions": workload.completions,
        "backoff_limit": workload.backoff_limit,
    }
    return {"kit": kit, "c": container, "labels": labels}


def render_workload(kind: str, workload: Workload, common: Common) -> str:
    """`kind` is "deployment" or "job"."""
    template = _environment().get_template(f"{kind}.yaml.j2")
    return template.render(_context(kind, workload, common))


def render_time_slicing(slicing: TimeSlicing) -> str:
    return _environment().get_template("time-slicing.yaml.j2").render(slicing=slicing)
