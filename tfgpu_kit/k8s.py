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
    grace_period: int = 30  # terminationGracePeriodSeconds: preStop + the program's own exit
    prestop_sleep: int = 5  # Deployment: seconds the server keeps answering after removal; 0 none
    scrape_annotations: bool = True  # prometheus.io/* (off when a PodMonitor does the scraping)


@dataclass(frozen=True)
class PodMonitor:
    """Prometheus Operator's PodMonitor for the metrics port of the rendered workloads."""

    name: str
    pods: list[str]  # app.kubernetes.io/name of each workload it selects
    namespace: str | None = None
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
        "scrape_annotations": common.scrape_annotations and common.metrics_port is not None,
        "grace_period": common.grace_period,
    }
    container = {
        "name": workload.name,
        "args": workload.args,
        "ports": ports,
        "probe_path": workload.probe_path if kind == "deployment" else None,
        "restart_policy": "Never" if kind == "job" else None,
        # a Job has no endpoints to drain: its pods stop at once on SIGTERM
        "prestop_sleep": common.prestop_sleep if kind == "deployment" else 0,
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


def render_pod_monitor(monitor: PodMonitor) -> str:
    labels = [("app.kubernetes.io/managed-by", "tfgpu-kit"), *monitor.labels]
    return _environment().get_template("podmonitor.yaml.j2").render(m=monitor, labels=labels)


def render_time_slicing(slicing: TimeSlicing) -> str:
    return _environment().get_template("time-slicing.yaml.j2").render(slicing=slicing)
