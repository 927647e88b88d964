"""Kubernetes manifests for an image built by the kit (`build.py k8s`): the flags' values checked
(each error names its flag), then rendered.

Templates live in templates/k8s/ (Jinja2, StrictUndefined); every value is written
JSON-quoted with every non-ASCII character escaped, which is valid YAML, and a value reaches a
comment only through the `comment` filter, which refuses anything but a checked name: so a value
can never change the document's shape (tests/scale/test_k8s_properties.py). Values are checked
first: names by Kubernetes' and Docker's rules (name_rules.py), the environment by the runtime's
own parser (env.py), control characters nowhere."""

from __future__ import annotations

import dataclasses
import functools
import ipaddress
import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import jinja2
from tfgpu import tf_config

from tfgpu_kit import name_rules, templating
from tfgpu_kit.errors import KitError, UsageError
from tfgpu_kit.flag_values import whole_number
from tfgpu_kit.k8s import env as k8s_env
from tfgpu_kit.k8s import limits as k8s_limits
from tfgpu_kit.k8s import workers as k8s_workers

# Flags and CHECKPOINT_PATH are re-exported: build.py k8s and the tests name them as k8s's.
from tfgpu_kit.k8s.flags import CHECKPOINT_PATH as CHECKPOINT_PATH
from tfgpu_kit.k8s.flags import (
    DEFAULTS,
    DEPLOYMENT_ONLY,
    EXAMPLES,
    JOB_ONLY,
    QUEUE_LABEL,
    ROLES,
    TRAINER_ANCESTOR,
    TRAINER_NODE,
    WORKERS_ONLY,
    Workers,
)
from tfgpu_kit.k8s.flags import Flags as Flags
from tfgpu_kit.name_rules import MAX_INT32, refuse_control

TEMPLATES = Path(__file__).resolve().parents[2] / "templates" / "k8s"
GPU_RESOURCE = "nvidia.com/gpu"
DEVICE_PLUGIN_NAMESPACE = "gpu-operator"
MAX_GRACE_PERIOD = 3600


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
    workers: Workers | None = None  # Job: one model trained by N workers together
    # Deployment: seconds the server keeps answering after removal, 0 none; a Job has no
    # endpoints to drain: its pods stop at once on SIGTERM
    prestop_sleep: int = 0
    # the pods' app.kubernetes.io/name and the headless Service's name, when not `name`: the
    # three groups of a parameter-server cluster are one app under one Service
    app: str = ""
    gpu: bool = True  # nvidia.com/gpu and the GPU caps (parameter servers: none)
    summary: str = ""  # the manifest's header: what this group is, its role and counts


@functools.cache  # one environment: its templates compile once per process
def _jinja() -> jinja2.Environment:
    env = templating.environment(TEMPLATES)
    # ensure_ascii: every non-ASCII character as \uXXXX, so none (U+0085, U+2028, bidi
    # controls) can be read as a line break or hide text; DEL and C0 are escaped the same way
    env.filters["q"] = lambda value: json.dumps(value, ensure_ascii=True)
    env.filters["comment"] = _comment_text
    return env


_COMMENT_SAFE = re.compile(r"[A-Za-z0-9.,;() /:_-]*")


def _comment_text(value: object) -> str:
    """A value written into a YAML comment: only names the flags' checks already allow, so a
    value can never end the comment (a newline would start a new key or document)."""
    text = str(value)
    if not _COMMENT_SAFE.fullmatch(text):
        raise ValueError(f"not written into a comment: {text!r}")  # a validation was skipped
    return text


def _context(kind: str, workload: Workload, kit: dict[str, object]) -> dict[str, object]:
    """The template's values: `kit` what both workloads share, `c` the container's."""
    worker_port = workload.workers.port if workload.workers is not None else None
    numbers = (
        ("http", workload.port),
        ("metrics", kit["metrics_port"]),
        ("tf-worker", worker_port),
    )
    ports = [{"name": name, "number": number} for name, number in numbers if number is not None]
    labels = [
        ("app.kubernetes.io/name", workload.app or workload.name),
        ("app.kubernetes.io/component", "serving" if kind == "deployment" else "training"),
        ("app.kubernetes.io/managed-by", "tfgpu-kit"),
    ]
    if workload.workers is not None and workload.workers.ps and workload.app:  # not the Service
        labels.append(("tfgpu.io/role", workload.workers.role))
    # a role without a GPU (a parameter server) gets no GPU setting: a cap would only draw the
    # runtime's no-GPU warning, the recovery rule (it needs a cap) and TF_GPU_REQUIRED would
    # stop the pod at start (k8s_workers.for_role)
    env = k8s_workers.for_role(cast("list[tuple[str, str]]", kit["env"]), gpu=workload.gpu)
    cache = cast("dict[str, object] | None", kit["kernel_cache"]) if workload.gpu else None
    if cache is not None:  # the mount and the driver's variables agree, whatever the image sets
        env = [*env, *cast("list[tuple[str, str]]", cache["env"])]
    # Trainer's TrainJob holds the run's deadline: its runtime is a template other runs share
    trainer = workload.workers is not None and workload.workers.trainer
    container = {
        **vars(workload),
        "env": env,
        "service": workload.app or workload.name,
        "ports": ports,
        "restart_policy": "Never" if kind == "job" else None,
        "checkpoint_path": CHECKPOINT_PATH,
        "kernel_cache": cache,
        # /dev/shm for tf.data's processes and NCCL: a GPU's (a parameter server has neither)
        "shm": kit["shm"] if workload.gpu else None,
        "deadline": kit["deadline"] if kind == "job" and not trainer else None,
        # the recovery rule and its /livez probes, on the pods that carry the rule
        "recovery": kit["recovery"] if workload.gpu else None,
        "livez": kit["livez"] and workload.gpu,
    }
    return {"kit": kit, "c": container, "labels": labels}


def _training(groups: list[Workload], kit: dict[str, object]) -> list[tuple[str, str]]:
    """One Job; or several workers: an Indexed Job per group and their headless Service, or one
    JobSet (which makes its own headless Service) with a replicatedJob per group; and with workers,
    the NetworkPolicy that opens their port to the job's own pods only."""
    first = groups[0]
    if first.workers is None:
        return [_render("job", **_context("job", first, kit))]
    contexts = [_context("job", group, kit) for group in groups]
    return [*_workloads(groups, contexts, kit), _peers_only(contexts[0])]


def _peers_only(context: dict[str, object]) -> tuple[str, str]:
    """networkpolicy.yaml: ingress to the training pods only from each other on the workers'
    port (and from anywhere on the metrics port); selected by the labels every group's pods
    share (tfgpu.io/role differs between groups, so it is left out)."""
    labels = cast("list[tuple[str, str]]", context["labels"])
    selector = [(k, v) for k, v in labels if k != "tfgpu.io/role"]
    return _render("networkpolicy", **{**context, "selector": selector})


def _workloads(
    groups: list[Workload], contexts: list[dict[str, object]], kit: dict[str, object]
) -> list[tuple[str, str]]:
    first = groups[0]
    assert first.workers is not None
    if first.workers.trainer:
        return _trainer(groups, contexts, kit)
    if first.workers.jobset:
        replicated = [
            {"name": group.workers.role if group.workers else "", "ancestor": False, **context}
            for group, context in zip(groups, contexts, strict=True)
        ]
        return [_render("jobset", jobs=replicated, **contexts[0])]
    pods = ", ".join(
        _count(group.parallelism, *_POD_NAMES[group.workers.role if first.workers.ps else ""])
        for group in groups
        if group.workers is not None
    )
    summary = f"the {pods} of {first.app or first.name}"
    service = dataclasses.replace(first, name=first.app or first.name, app="", summary=summary)
    suffix = [
        f"-{group.workers.role}" if first.workers.ps and group.workers else "" for group in groups
    ]
    jobs = [
        (f"job{end}.yaml", _render("job", **context)[1])
        for end, context in zip(suffix, contexts, strict=True)
    ]
    return [*jobs, _render("service", **_context("job", service, kit))]


# how the Service's header counts each group's pods ("": the workers of a job without roles)
_POD_NAMES = {
    "": ("worker", "workers"),
    "chief": ("chief", "chiefs"),
    "worker": ("worker", "workers"),
    "ps": ("parameter server", "parameter servers"),
}


def _trainer(
    groups: list[Workload], contexts: list[dict[str, object]], kit: dict[str, object]
) -> list[tuple[str, str]]:
    """Kubeflow Trainer v2: a ClusterTrainingRuntime of the groups (the first one is Trainer's
    `node`, the TrainJob's trainer) and a TrainJob that runs it."""
    first = groups[0]
    assert first.workers is not None
    ps = first.workers.ps
    train = first.app  # the TrainJob's name, and its pods' app.kubernetes.io/name
    replicated = [
        {
            "name": (group.workers.role if ps and group.workers else TRAINER_NODE),
            "ancestor": index == 0,
            **context,
        }
        for index, (group, context) in enumerate(zip(groups, contexts, strict=True))
    ]
    runtime = {"name": f"{train.removesuffix('-train')}-tensorflow{'-ps' if ps else ''}"}
    context = {
        **contexts[0],
        "jobs": replicated,
        "runtime": runtime,
        "trainjob": train,
        "ancestor": TRAINER_ANCESTOR,
    }
    return [_render("clustertrainingruntime", **context), _render("trainjob", **context)]


def _render(name: str, **context: object) -> tuple[str, str]:
    return f"{name}.yaml", _jinja().get_template(f"{name}.yaml.j2").render(context)


# --- from flags to manifests ---------------------------------------------------------------------

# the HTTP path of the probes: an origin-form request target (RFC 9112 section 3.2.1), no spaces
_HTTP_PATH = re.compile(r"/[A-Za-z0-9._~!$&'()*+,;=:@%/-]*")


def manifests(flags: Flags) -> list[tuple[str, str]]:
    """(file name, YAML) of each manifest the flags ask for; UsageError names a bad flag."""
    _refuse_control_characters(flags)
    _refuse_ignored(flags)
    _check_names(flags)
    gpus = whole_number("--gpus", flags.gpus, "1", high=64)
    flagged = {  # each contract variable's own flag, as given
        variable: getattr(flags, flag[2:].replace("-", "_"))
        for variable, (flag, _, _) in k8s_env.FLAGGED.items()
    }
    if flags.workers is not None:
        k8s_workers.refuse_owned(flags)
    contract = k8s_env.pod_env(flagged, flags.env, gpus)
    k8s_workers.refuse_ps_gpus_without_ps(flags, contract.env)
    metrics = contract.metrics_port or 0
    slices = _time_slices(flags, gpus, capped=contract.capped)
    grace, prestop = _shutdown(flags)
    monitor = _pod_monitor(flags, metrics)
    image, uid, gid = _identity(flags)
    kit: dict[str, object] = {  # what both workloads share: image, environment, resources, identity
        "image": image,
        "env": contract.env,
        "gpus": gpus,
        # a quantity as a string: the API's OpenAPI (Swagger 2.0) schema types resource
        # quantities as strings, and validators built on it reject a bare number
        "gpu_quantity": str(gpus),
        "gpu_resource": GPU_RESOURCE,
        "cpu": flags.cpu,
        "memory": flags.memory,
        "uid": uid,
        "gid": gid,
        "namespace": flags.namespace,
        "queue": _queue(flags),
        "metrics_port": contract.metrics_port,
        # prometheus.io/*, unless a PodMonitor does the scraping
        "scrape_annotations": monitor is None and contract.metrics_port is not None,
        "grace_period": grace,  # terminationGracePeriodSeconds: preStop + the program's own exit
        # the recovery rule (tfgpu.recovery): `report` is read by a liveness probe on the
        # metrics port's /livez; either action keeps its count of recoveries in /var/tmp, on
        # an emptyDir, so that it outlives the container restarts it causes
        "recovery": contract.recovery,
        "livez": _livez_probe(contract),
        # the driver's compute cache on a volume in every GPU pod (None: none)
        "kernel_cache": _kernel_cache(flags, contract.env),
        # /dev/shm on a Memory emptyDir in every GPU pod, within --memory (None: none)
        "shm": k8s_limits.shared_memory(flags),
        # the training run's activeDeadlineSeconds, as (seconds, text) (None: none)
        "deadline": k8s_limits.deadline(flags),
        **LIVEZ_PROBES,
    }
    outputs: list[tuple[str, str]] = []
    if flags.kind in ("all", "deployment"):
        serve = _serve(flags, metrics, prestop)
        outputs.append(_render("deployment", **_context("deployment", serve, kit)))
    if flags.kind in ("all", "job"):
        outputs += _training(_train(flags, contract.env, gpus), kit)
    if monitor is not None:
        outputs.append(monitor)
    if slices is not None:
        name, namespace = f"{flags.name}-time-slicing", flags.device_plugin_namespace
        slicing = {"replicas": slices, "namespace": namespace, "name": name}
        outputs.append(_render("time-slicing", slicing=slicing))
    return outputs


# The recovery rule's probes on /livez (templates/k8s/_container.yaml.j2 says why): the startup
# probe gives the program STARTUP_PERIOD_S x STARTUP_FAILURES to import TensorFlow (the metrics
# server listens from then on), the liveness probe then restarts a process stuck at its cap.
STARTUP_PERIOD_S = 10
STARTUP_FAILURES = 60
LIVEZ_PROBES = {
    "startup_period_s": STARTUP_PERIOD_S,
    "startup_failures": STARTUP_FAILURES,
    "startup_budget_s": STARTUP_PERIOD_S * STARTUP_FAILURES,
    "livez_timeout_s": 5,
}


def _livez_probe(contract: k8s_env.PodEnv) -> bool:
    """Whether the pods get the recovery rule's /livez probes (`report`, with metrics); refused
    when the metrics server would listen on the pod's loopback, where no kubelet probe reaches
    it: every probe would fail and the pod restart for ever."""
    if contract.recovery != "report" or contract.metrics_port is None:
        return False
    addr = dict(contract.env).get("TF_GPU_METRICS_ADDR", "").strip()
    if addr and _is_loopback(addr):
        raise UsageError(
            f"--env TF_GPU_METRICS_ADDR={addr!r} keeps the metrics server on the pod's loopback, "
            "where the kubelet cannot reach the liveness probe of the recovery rule "
            "(TF_GPU_RECOVER_ACTION=report: /livez on the metrics port): accepted: an address "
            "the kubelet reaches, 0.0.0.0 or :: (the default, 0.0.0.0, when it is not set), or "
            "TF_GPU_RECOVER_ACTION=exit (no probe); example: --env TF_GPU_METRICS_ADDR=0.0.0.0"
        )
    return True


def _is_loopback(addr: str) -> bool:
    """127.0.0.0/8, ::1, and IPv4 loopback written as an IPv6-mapped address (::ffff:127.0.0.1)."""
    try:
        ip = ipaddress.ip_address(addr)
    except ValueError:
        return False  # not an address: the runtime's parser has refused it already
    mapped = getattr(ip, "ipv4_mapped", None)
    return ip.is_loopback or (mapped is not None and mapped.is_loopback)


# --kernel-cache: where the driver's compute cache lives in every GPU pod
_CLAIM = re.compile(r"[a-z0-9](?:[-a-z0-9.]{0,251}[a-z0-9])?", re.ASCII)  # IsDNS1123Subdomain
_HOST_PATH = re.compile(r"(?:/[A-Za-z0-9._-]+)+", re.ASCII)
KERNEL_CACHE_FORMS = "emptydir, pvc:CLAIM, hostpath:/PATH or none"


def _kernel_cache(flags: Flags, env: list[tuple[str, str]]) -> dict[str, object] | None:
    """--kernel-cache: the volume (emptyDir, PVC or hostPath) every GPU container mounts at the
    image's CUDA_CACHE_PATH (images/gpus.yaml; an --env CUDA_CACHE_PATH moves it), with the
    driver's variables set to match. None for `none`."""
    value = flags.value("kernel_cache")
    kind, _, where = value.partition(":")
    example = f"example: --kernel-cache {EXAMPLES['kernel_cache']}"
    if value == "none":
        return None
    if (kind, where) == ("emptydir", ""):
        volume: dict[str, object] = {"kind": "emptyDir"}
    elif kind == "pvc" and _CLAIM.fullmatch(where) and ".." not in where:
        volume = {"kind": "persistentVolumeClaim", "claim": where}
    elif kind == "hostpath" and _HOST_PATH.fullmatch(where) and "/../" not in f"{where}/":
        volume = {"kind": "hostPath", "path": where}
    else:
        raise UsageError(
            f"--kernel-cache {value!r} is not valid: accepted: {KERNEL_CACHE_FORMS} (a claim is "
            "a DNS-1123 subdomain, a node path absolute with letters, digits, '.', '_', '-');"
            f" {example}"
        )
    from tfgpu_kit import spec  # the spec's kernel cache: only for a volume

    cache = spec.load().gpus.kernel_cache
    given = dict(env)
    path = given.get("CUDA_CACHE_PATH", cache.path)
    if not _HOST_PATH.fullmatch(path) or "/../" in f"{path}/":
        raise UsageError(
            f"--env CUDA_CACHE_PATH={path!r} is where --kernel-cache mounts its volume: accepted: "
            f"an absolute path; example: --env CUDA_CACHE_PATH={cache.path}"
        )
    limit = whole_number(
        "--env CUDA_CACHE_MAXSIZE",
        given.get("CUDA_CACHE_MAXSIZE", str(cache.max_bytes)),
        str(cache.max_bytes),
        high=cache.max_bytes,
    )
    own = [(n, v) for n, v in (("CUDA_CACHE_PATH", path), ("CUDA_CACHE_MAXSIZE", str(limit)))]
    return {
        **volume,
        "mount": path,
        # the driver stops at CUDA_CACHE_MAXSIZE; an emptyDir past its sizeLimit evicts the pod
        "size_limit": f"{-(-limit // 2**30) + 1}Gi",
        "env": [(n, v) for n, v in own if n not in given],
    }


def _refuse_control_characters(flags: Flags) -> None:
    """No flag value holds a control or line-separating character (the strict checks below
    refuse them too; this names the character, and covers the free-text flags)."""
    for name, value in vars(flags).items():
        flag = "--" + name.replace("_", "-")
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str):
                refuse_control(flag, item, shlex.quote(EXAMPLES.get(name, "1")))


def _refuse_ignored(flags: Flags) -> None:
    """A flag that the rendered manifests would not use is an error, not silently dropped."""
    ignored = {"deployment": JOB_ONLY, "job": DEPLOYMENT_ONLY}.get(flags.kind, ())
    for name in ignored:
        if getattr(flags, name) is not None:
            flag = "--" + name.replace("_", "-")
            other = "job" if flags.kind == "deployment" else "deployment"
            raise UsageError(
                f"{flag} shapes the {other}, which --kind {flags.kind} does not render"
                f"{_WHY_ONE_KIND.get(name, '')}: accepted: {flag} with --kind {other} or all; "
                f"example: --kind all {flag} {shlex.quote(EXAMPLES[name])}"
            )
    if flags.image is not None and flags.registry is not None:
        raise UsageError(
            f"--registry {flags.registry!r} prefixes the default image, and --image "
            f"{flags.image!r} replaces it: accepted: one of them; example: --image "
            + EXAMPLES["image"]
        )


# why a flag of one workload means nothing to the other, where its name does not say
_WHY_ONE_KIND = {
    # the API server refuses a Deployment's pod template with activeDeadlineSeconds
    # (kubernetes/kubernetes pkg/apis/apps/validation: "not Supported" in a ReplicaSet)
    "deadline": " (a Deployment serves until it is deleted: it has no deadline)",
}


def _check_names(flags: Flags) -> None:
    # NAME-serve and NAME-train are label values and container names (63), and so is
    # NAME-time-slicing: 50 leaves room for the longest suffix
    name_rules.dns_label("--name", flags.name, "text-model", longest=50)
    if flags.namespace is not None:
        name_rules.dns_label("--namespace", flags.namespace, "ml")
    name_rules.dns_label("--device-plugin-namespace", flags.device_plugin_namespace, "gpu-operator")
    if flags.image is not None:
        name_rules.image_reference("--image", flags.image, EXAMPLES["image"])
    for flag, value in (("--cpu", flags.cpu), ("--memory", flags.memory)):
        if not name_rules.QUANTITY.fullmatch(value):
            raise UsageError(
                f"{flag} {value!r} is not a Kubernetes quantity: accepted: a number with an "
                "optional suffix (m, k, M, G, T, P, Ki, Mi, Gi, Ti, Pi); example: --cpu 2, "
                "--memory 16Gi"
            )


def _time_slices(flags: Flags, gpus: int, *, capped: bool) -> int | None:
    if flags.time_slicing is None:
        return None
    slices = whole_number("--time-slicing", flags.time_slicing, "4", low=2, high=64)
    if gpus != 1:
        raise UsageError(
            "--time-slicing needs --gpus 1: a pod gets one slice (failRequestsGreaterThanOne)"
        )
    if not capped:
        raise UsageError(
            "--time-slicing shares each GPU between pods, so every pod needs a cap: "
            "pass --mem-limit",
            hint=f"e.g. --mem-limit {max(1, 100 // slices - 5)}% (leaves room for each pod's CUDA"
            " context)",
        )
    return slices


# A LocalQueue's name as Kueue's webhooks accept the label: a label value (at most 63
# characters, kubernetes.io "Labels and Selectors") that is also a DNS-1123 subdomain, as Kueue's
# ValidateQueueName checks (kubernetes-sigs/kueue ff69552e79ad21652c36caa97038382e55625cf7,
# pkg/controller/jobframework/validation.go ValidateLabelAsCRDName: IsDNS1123Subdomain)
_QUEUE = re.compile(r"[a-z0-9]([-a-z0-9.]{0,61}[a-z0-9])?", re.ASCII)


def _queue(flags: Flags) -> str | None:
    """--queue: the Kueue LocalQueue that admits the rendered workloads (QUEUE_LABEL)."""
    name = flags.queue
    if name is not None and (
        not _QUEUE.fullmatch(name) or ".." in name or ".-" in name or "-." in name
    ):
        raise UsageError(
            f"--queue {name!r} is not a LocalQueue name Kueue accepts in the {QUEUE_LABEL} label: "
            "accepted: at most 63 lower-case letters, digits, '-' and '.', starting and ending "
            "with a letter or digit (a label value that is also a DNS-1123 subdomain); "
            "example: --queue team-a"
        )
    return name


def _shutdown(flags: Flags) -> tuple[int, int]:
    """terminationGracePeriodSeconds and the preStop sleep, which must leave the program time."""
    grace = whole_number("--grace-period", flags.grace_period, "60", high=MAX_GRACE_PERIOD)
    if flags.kind == "job":
        return grace, 0  # a Job has no endpoints to drain: no preStop hook
    prestop = whole_number(
        "--prestop-sleep", flags.value("prestop_sleep"), "5", low=0, high=MAX_GRACE_PERIOD
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
    if flags.registry is not None:
        from tfgpu_kit import catalog  # the spec's modules: only when the default image is used

        catalog.check_registry("--registry", flags.registry)
        name_rules.registry_port("--registry", flags.registry)
    image, uid, gid = flags.image, 1000, 1000  # the kit's user: the spec does not describe --image
    if not image:
        try:
            image, uid, gid = _default_image(flags.registry)
        except KitError as error:
            raise UsageError(f"cannot find the default image ({error}); pass --image REF") from None
    if flags.uid is not None:
        # not 0: the pods run with runAsNonRoot, which the kubelet enforces against uid 0
        uid = gid = whole_number("--uid", flags.uid, "1000", high=2**31 - 1)
    if flags.gid is not None:
        # 0 is accepted: OpenShift runs an arbitrary uid in group 0 (README: --user 12345:0)
        gid = whole_number("--gid", flags.gid, "1000", low=0, high=2**31 - 1)
    return image, uid, gid


def _serve(flags: Flags, metrics: int, prestop: int) -> Workload:
    port = whole_number("--port", flags.value("port"), "8501", high=65535)
    if port == metrics:
        # the hook binds the metrics port at `import tensorflow`, before the server listens
        raise UsageError(
            f"--port {port} and --metrics-port {metrics} are the same port: the metrics "
            "server would take it and the model server could not listen; accepted: two "
            "different ports, or --metrics-port 0; example: --port 8501 --metrics-port 9401"
        )
    path = flags.value("health_path")
    path = path if path.startswith("/") else "/" + path
    if not _HTTP_PATH.fullmatch(path):
        raise UsageError(
            f"--health-path {flags.health_path!r} is not valid: accepted: an HTTP path of "
            "letters, digits and URL punctuation (no spaces; %-encode others); example: "
            "--health-path /healthz"
        )
    return Workload(
        f"{flags.name}-serve",
        _command("--serve-cmd", flags.value("serve_cmd")),
        replicas=whole_number("--replicas", flags.value("replicas"), "2", low=0, high=MAX_INT32),
        port=port,
        probe_path=path,
        prestop_sleep=prestop,
    )


def _count(number: int, one: str, many: str) -> str:
    return f"{number} {one if number == 1 else many}"


def _train(flags: Flags, env: list[tuple[str, str]], gpus: int) -> list[Workload]:
    """The training Job; with --workers its group; with --ps its chief, workers and parameter
    servers (the chief runs the command, the others their role's gRPC server)."""
    args = _command("--train-cmd", flags.value("train_cmd"))
    if flags.workers is None:
        for name in ("jobset", "trainer", *WORKERS_ONLY):
            if getattr(flags, name):
                flag = "--" + name.replace("_", "-")
                raise UsageError(
                    f"{flag} shapes a multi-worker Job, which only --workers renders: "
                    f"example: --workers 2 {flag}"
                    + ("" if name in ("jobset", "trainer") else f" {shlex.quote(DEFAULTS[name])}")
                )
        parallelism, completions = (
            whole_number(f"--{name}", flags.value(name), example, high=MAX_INT32)
            for name, example in (("parallelism", "2"), ("completions", "1"))
        )
        summary = f"a TensorFlow training Job on {_count(gpus, 'GPU', 'GPUs')} per pod"
        return [
            Workload(
                f"{flags.name}-train",
                args,
                parallelism=parallelism,
                completions=completions,
                summary=summary,
            )
        ]
    workers = k8s_workers.workers(flags, env)
    job = f"{flags.name}-train"
    if not workers.ps:
        return [
            Workload(
                TRAINER_NODE if workers.trainer else job,
                args,
                parallelism=workers.count,
                completions=workers.count,
                backoff_limit=0 if workers.jobset else workers.backoff_limit,
                workers=workers,
                app=job if workers.trainer else "",
                summary=(
                    f"{_count(workers.count, 'TensorFlow worker', 'TensorFlow workers')} "
                    f"training one model, {_count(gpus, 'GPU', 'GPUs')} each"
                ),
            )
        ]
    ps_gpus = k8s_workers.ps_gpus(env)
    counts = (
        f"a chief, {_count(workers.count, 'worker', 'workers')}, "
        f"{_count(workers.ps, 'parameter server', 'parameter servers')}"
    )
    each = _count(gpus, "GPU", "GPUs")
    summaries = {
        "chief": f"the chief of {job} ({counts}): it runs the training program, on {each}",
        "worker": f"the {_count(workers.count, 'worker', 'workers')} of {job} ({counts}): "
        f"each runs the steps the chief sends, on {each}",
        "ps": f"the {_count(workers.ps, 'parameter server', 'parameter servers')} of {job} "
        f"({counts}): each holds a share of the variables, "
        + (f"on {each}" if ps_gpus else "with no GPU"),
    }
    groups = []
    for role in ROLES:
        pods = {"chief": 1, "worker": workers.count, "ps": workers.ps}[role]
        group = dataclasses.replace(
            workers, count=pods, role=role, env=[*workers.env, (tf_config.ROLE, role)]
        )
        # a JobSet restarts the whole cluster when its chief or a parameter server fails (the
        # run cannot go on without them); a worker is replaced on its own, and the chief's
        # coordinator gives its closures to the others meanwhile (TensorFlow's documented
        # fault tolerance); three separate Jobs each replace their own pods
        survives = role == "worker" or not workers.jobset
        # Trainer v2: the chief is the runtime's trainer node (container `node`)
        name = job if workers.jobset else f"{job}-{role}"
        if workers.trainer:
            name = TRAINER_NODE if role == "chief" else role
        groups.append(
            Workload(
                name,
                args if role == "chief" else list(k8s_workers.SERVER_ARGS),
                parallelism=pods,
                completions=pods,
                backoff_limit=group.backoff_limit if survives else 0,
                workers=group,
                app=job,
                gpu=role != "ps" or ps_gpus,  # --env TF_GPU_PS_GPUS=true
                summary=summaries[role],
            )
        )
    return groups


def _pod_monitor(flags: Flags, metrics: int) -> tuple[str, str] | None:
    """podmonitor.yaml: Prometheus Operator's PodMonitor for the metrics port of the rendered
    workloads (None without --pod-monitor)."""
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
    # app.kubernetes.io/name of each workload it selects
    pods = [f"{flags.name}-serve"] if flags.kind in ("all", "deployment") else []
    pods += [f"{flags.name}-train"] if flags.kind in ("all", "job") else []
    monitor = {"name": f"{flags.name}-metrics", "pods": pods, "namespace": flags.namespace}
    labels = [("app.kubernetes.io/managed-by", "tfgpu-kit"), *labels]
    return _render("podmonitor", m=monitor, labels=labels)


def _labels(flag: str, items: list[str]) -> list[tuple[str, str]]:
    labels: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if (
            not sep
            or not name_rules.LABEL_KEY.fullmatch(key)
            or len(key) > 253
            or not name_rules.LABEL_VALUE.fullmatch(value)
        ):
            raise UsageError(
                f"{flag} {item!r} is not valid: accepted: KEY=VALUE with a Kubernetes label key "
                "([prefix/]name) and value (at most 63 letters, digits, '-', '_', '.'); "
                f"example: {flag} release=kube-prometheus-stack"
            )
        if key in labels or key == "app.kubernetes.io/managed-by":
            # a mapping key given twice: YAML 1.2 refuses it, and the kit sets managed-by
            raise UsageError(
                f"{flag} {item!r}: the label {key} is set twice: accepted: each key once, other "
                f"than app.kubernetes.io/managed-by; example: {flag} release=kube-prometheus-stack"
            )
        labels[key] = value
    return list(labels.items())


def _default_image(registry: str | None) -> tuple[str, int, int]:
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
