"""Kubernetes manifests for an image built by the kit (`build.py k8s`): the flags' values checked
(each error names its flag), then rendered.

Templates live in templates/k8s/ (Jinja2, StrictUndefined); every value is written
JSON-quoted, which is valid YAML, so a value can never change the document's shape."""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import jinja2
from tfgpu.errors import ConfigError
from tfgpu.settings import parse_bool, parse_mem_limit, parse_virtual_devices

from tfgpu_kit import templating
from tfgpu_kit.errors import KitError, UsageError
from tfgpu_kit.flag_values import whole_number

TEMPLATES = Path(__file__).resolve().parent.parent / "templates" / "k8s"
GPU_RESOURCE = "nvidia.com/gpu"
DEVICE_PLUGIN_NAMESPACE = "gpu-operator"
MAX_GRACE_PERIOD = 3600
MAX_COUNT = 1_000_000
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(m|Ki|Mi|Gi|Ti|k|M|G|T)?$")
# Label keys and values (Kubernetes' validation.IsQualifiedName / IsValidLabelValue).
_LABEL_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_LABEL_KEY = re.compile(
    rf"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?{_LABEL_NAME}$"
)
_LABEL_VALUE = re.compile(rf"^({_LABEL_NAME})?$")


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
    namespace: str = DEVICE_PLUGIN_NAMESPACE
    name: str = "tfgpu-time-slicing"


def _jinja() -> jinja2.Environment:
    env = templating.environment(TEMPLATES)
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
        # a quantity as a string: the API's OpenAPI (Swagger 2.0) schema types resource
        # quantities as strings, and validators built on it reject a bare number
        "gpu_quantity": str(common.gpus),
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
    template = _jinja().get_template(f"{kind}.yaml.j2")
    return template.render(_context(kind, workload, common))


def render_pod_monitor(monitor: PodMonitor) -> str:
    labels = [("app.kubernetes.io/managed-by", "tfgpu-kit"), *monitor.labels]
    return _jinja().get_template("podmonitor.yaml.j2").render(m=monitor, labels=labels)


def render_time_slicing(slicing: TimeSlicing) -> str:
    return _jinja().get_template("time-slicing.yaml.j2").render(slicing=slicing)


# --- from flags to manifests ---------------------------------------------------------------------


@dataclass(frozen=True)
class Flags:
    """`build.py k8s`'s flags as given (text; the defaults are the command's)."""

    kind: str
    name: str
    namespace: str | None
    image: str | None
    registry: str | None
    serve_cmd: str
    train_cmd: str
    port: str
    health_path: str
    replicas: str
    parallelism: str
    completions: str
    gpus: str
    mem_limit: str | None
    virtual_devices: str | None
    memory_growth: str | None
    metrics_port: str
    time_slicing: str | None
    device_plugin_namespace: str
    env: list[str]
    grace_period: str
    prestop_sleep: str
    pod_monitor: bool
    pod_monitor_label: list[str]
    cpu: str
    memory: str
    uid: str | None
    gid: str | None

    @classmethod
    def from_namespace(cls, args: argparse.Namespace) -> Flags:
        return cls(**{f.name: getattr(args, f.name) for f in dataclasses.fields(cls)})


def manifests(flags: Flags) -> list[tuple[str, str]]:
    """(file name, YAML) of each manifest the flags ask for; UsageError names a bad flag."""
    _check_names(flags)
    gpus = whole_number("--gpus", flags.gpus, "1", high=64)
    metrics = whole_number("--metrics-port", flags.metrics_port, "9401", low=0, high=65535)
    slices = _time_slices(flags, gpus)
    grace, prestop = _shutdown(flags)
    monitor = _pod_monitor(flags, metrics)
    image, uid, gid = _identity(flags)
    common = Common(
        image=image,
        env=_contract_env(flags, metrics or None),
        gpus=gpus,
        cpu=flags.cpu,
        memory=flags.memory,
        uid=uid,
        gid=gid,
        namespace=flags.namespace,
        metrics_port=metrics or None,
        grace_period=grace,
        prestop_sleep=prestop,
        scrape_annotations=monitor is None,
    )
    outputs: list[tuple[str, str]] = []
    if flags.kind in ("all", "deployment"):
        serve = _serve(flags, metrics)
        outputs.append(("deployment.yaml", render_workload("deployment", serve, common)))
    if flags.kind in ("all", "job"):
        outputs.append(("job.yaml", render_workload("job", _train(flags), common)))
    if monitor is not None:
        outputs.append(("podmonitor.yaml", render_pod_monitor(monitor)))
    if slices is not None:
        slicing = TimeSlicing(slices, namespace=flags.device_plugin_namespace)
        outputs.append(("time-slicing.yaml", render_time_slicing(slicing)))
    return outputs


def _check_names(flags: Flags) -> None:
    if not _DNS_LABEL.match(flags.name) or len(flags.name) > 50:
        raise UsageError(
            f"--name {flags.name!r} is not valid: accepted: lower-case letters, digits and '-', "
            "at most 50 characters (Kubernetes names); example: --name text-model"
        )
    for flag, value in (("--cpu", flags.cpu), ("--memory", flags.memory)):
        if not _QUANTITY.match(value):
            raise UsageError(
                f"{flag} {value!r} is not a Kubernetes quantity; example: --cpu 2, --memory 16Gi"
            )


def _time_slices(flags: Flags, gpus: int) -> int | None:
    if flags.time_slicing is None:
        return None
    slices = whole_number("--time-slicing", flags.time_slicing, "4", low=2, high=64)
    if gpus != 1:
        raise UsageError(
            "--time-slicing needs --gpus 1: a pod gets one slice (failRequestsGreaterThanOne)"
        )
    if flags.mem_limit is None and flags.virtual_devices is None:
        raise UsageError(
            "--time-slicing shares each GPU between pods, so every pod needs a cap: "
            "pass --mem-limit",
            hint=f"e.g. --mem-limit {max(1, 100 // slices - 5)}% (leaves room for each pod's CUDA"
            " context)",
        )
    return slices


def _shutdown(flags: Flags) -> tuple[int, int]:
    """terminationGracePeriodSeconds and the preStop sleep, which must leave the program time."""
    grace = whole_number("--grace-period", flags.grace_period, "60", high=MAX_GRACE_PERIOD)
    prestop = whole_number(
        "--prestop-sleep", flags.prestop_sleep, "5", low=0, high=MAX_GRACE_PERIOD
    )
    if prestop >= grace:
        raise UsageError(
            f"--prestop-sleep {prestop} is not shorter than --grace-period {grace}: the grace "
            "period includes the preStop hook, so the program would get no time to exit before "
            f"SIGKILL; example: --prestop-sleep 5 --grace-period {max(30, prestop + 25)}"
        )
    return grace, prestop


def _identity(flags: Flags) -> tuple[str, int, int]:
    """The image, and the uid and gid the pods run as (the image's user unless given)."""
    uid: int | None
    gid: int | None
    if flags.image:
        image, uid, gid = flags.image, None, None
    else:
        try:
            image, uid, gid = _default_image(flags.registry)
        except KitError as error:
            raise UsageError(f"cannot find the default image ({error}); pass --image REF") from None
    if flags.uid is not None:
        uid = gid = whole_number("--uid", flags.uid, "1000", high=2**31 - 1)
    if flags.gid is not None:
        gid = whole_number("--gid", flags.gid, "1000", high=2**31 - 1)
    return image, uid or 1000, gid or 1000


def _serve(flags: Flags, metrics: int) -> Workload:
    port = whole_number("--port", flags.port, "8501", high=65535)
    if port == metrics:
        # the hook binds the metrics port at `import tensorflow`, before the server listens
        raise UsageError(
            f"--port {port} and --metrics-port {metrics} are the same port: the metrics "
            "server would take it and the model server could not listen; accepted: two "
            "different ports, or --metrics-port 0; example: --port 8501 --metrics-port 9401"
        )
    path = flags.health_path
    return Workload(
        f"{flags.name}-serve",
        _command("--serve-cmd", flags.serve_cmd),
        replicas=whole_number("--replicas", flags.replicas, "2", low=0, high=MAX_COUNT),
        port=port,
        probe_path=path if path.startswith("/") else "/" + path,
    )


def _train(flags: Flags) -> Workload:
    return Workload(
        f"{flags.name}-train",
        _command("--train-cmd", flags.train_cmd),
        parallelism=whole_number("--parallelism", flags.parallelism, "2", high=MAX_COUNT),
        completions=whole_number("--completions", flags.completions, "1", high=MAX_COUNT),
    )


def _pod_monitor(flags: Flags, metrics: int) -> PodMonitor | None:
    """The PodMonitor --pod-monitor asks for (None without it)."""
    if not flags.pod_monitor:
        if flags.pod_monitor_label:
            raise UsageError(
                "--pod-monitor-label labels the PodMonitor, which only --pod-monitor renders; "
                "example: --pod-monitor --pod-monitor-label release=kube-prometheus-stack"
            )
        return None
    labels = _labels("--pod-monitor-label", flags.pod_monitor_label)
    if not metrics:
        raise UsageError(
            "--pod-monitor scrapes the metrics port, and --metrics-port 0 turns it off; "
            "example: --pod-monitor --metrics-port 9401"
        )
    pods = [f"{flags.name}-serve"] if flags.kind in ("all", "deployment") else []
    pods += [f"{flags.name}-train"] if flags.kind in ("all", "job") else []
    return PodMonitor(f"{flags.name}-metrics", pods, namespace=flags.namespace, labels=labels)


def _variable(
    flag: str, variable: str, value: str, check: Callable[[str, str], object]
) -> tuple[str, str]:
    """Validate a contract variable with the runtime's own parser; name the flag on error."""
    try:
        check(value, variable)
    except ConfigError as error:
        raise UsageError(
            f"{flag} {value!r} is not valid: accepted: {error.accepted}; "
            f"example: {flag} {error.example}"
        ) from None
    return variable, value


def _labels(flag: str, items: list[str]) -> list[tuple[str, str]]:
    labels = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not _LABEL_KEY.match(key) or len(key) > 253 or not _LABEL_VALUE.match(value):
            raise UsageError(
                f"{flag} {item!r} is not valid: accepted: KEY=VALUE with a Kubernetes label key "
                "([prefix/]name) and value (at most 63 letters, digits, '-', '_', '.'); "
                f"example: {flag} release=kube-prometheus-stack"
            )
        labels.append((key, value))
    return labels


def _bool(value: str, variable: str) -> bool:
    return parse_bool(variable, value)


def _contract_env(flags: Flags, metrics_port: int | None) -> list[tuple[str, str]]:
    env: list[tuple[str, str]] = []
    if flags.mem_limit is not None:
        env.append(_variable("--mem-limit", "TF_GPU_MEM_LIMIT", flags.mem_limit, parse_mem_limit))
    if flags.virtual_devices is not None:
        if flags.mem_limit is not None:
            raise UsageError(
                "--mem-limit and --virtual-devices exclude each other: one cap per GPU, or the "
                "sizes of its split; example: --virtual-devices 2048,2048"
            )
        env.append(
            _variable(
                "--virtual-devices",
                "TF_GPU_VIRTUAL_DEVICES",
                flags.virtual_devices,
                parse_virtual_devices,
            )
        )
    if flags.memory_growth is not None:
        growth = flags.memory_growth
        env.append(_variable("--memory-growth", "TF_GPU_MEMORY_GROWTH", growth, _bool))
    if metrics_port is not None:
        env.append(("TF_GPU_METRICS_PORT", str(metrics_port)))
    for item in flags.env:
        name, sep, value = item.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise UsageError(
                f"--env {item!r} is not valid: accepted: NAME=VALUE; "
                "example: --env TF_GPU_QUIET=true"
            )
        env.append((name, value))
    return env


def _default_image(registry: str | None) -> tuple[str, int | None, int | None]:
    """The newest gpu image's first tag, and its user's uid and gid, from the build side's spec."""
    from tfgpu_kit import catalog, spec  # pydantic and the spec: only when no --image is given

    loaded = spec.load()
    user = loaded.images.user
    for image in catalog.images(loaded):
        if image.newest and not image.jupyter:
            return image.tags(registry=registry)[0], user.uid, user.gid
    raise UsageError("images/images.yaml offers no non-Jupyter image; pass --image REF")


def _command(flag: str, value: str) -> list[str]:
    try:
        words = shlex.split(value)
    except ValueError as error:
        raise UsageError(
            f'{flag} {value!r} is not a command line ({error}); example: {flag} "python serve.py"'
        ) from None
    if not words:
        raise UsageError(f'{flag} is empty; example: {flag} "python serve.py"')
    return words
