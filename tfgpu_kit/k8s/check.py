"""`build.py k8s`'s refusals, all before anything is rendered: one pass over the flags (flags.py),
in which each refusal names its flag, the value, what is accepted and an example (exit 2). What
passes is `Checked`, the values render.py writes, which it trusts. Names are checked by
Kubernetes' and Docker's rules (name_rules.py), the environment by the runtime's own parser
(env.py), control characters nowhere."""

from __future__ import annotations

import ipaddress
import re
import shlex
from dataclasses import dataclass

from tfgpu_kit.k8s import env, limits, workers
from tfgpu_kit.k8s.flags import (
    DEPLOYMENT,
    EXAMPLES,
    JOB,
    OUTPUT,
    QUEUE_LABEL,
    WORKERS,
    Flags,
    option,
    shaping,
    table,
)
from tfgpu_kit.k8s.workers import Workers
from tfgpu_kit.shared import name_rules
from tfgpu_kit.shared.errors import KitError, UsageError
from tfgpu_kit.shared.flag_values import whole_number
from tfgpu_kit.shared.name_rules import MAX_INT32, refuse_control

MAX_GRACE_PERIOD = 3600


@dataclass(frozen=True)
class Serve:
    """The Deployment's checked shape."""

    args: list[str]
    port: int
    probe_path: str
    replicas: int
    prestop_sleep: int  # seconds the server keeps answering after removal, 0 none


@dataclass(frozen=True)
class Train:
    """The training Job's checked shape; with --workers its group (count, roles, variables)."""

    args: list[str]
    parallelism: int = 1
    completions: int = 1
    workers: Workers | None = None
    ps_gpus: bool = False  # --env TF_GPU_PS_GPUS=true: the parameter servers get a GPU


@dataclass(frozen=True)
class Checked:
    """The flags after every refusal: what render.py writes."""

    flags: Flags
    gpus: int
    contract: env.PodEnv
    time_slices: int | None  # the device plugin's replicas per GPU (None: no ConfigMap)
    grace_period: int
    monitor_labels: list[tuple[str, str]] | None  # the PodMonitor's own (None: no PodMonitor)
    image: str
    uid: int
    gid: int
    queue: str | None
    livez: bool  # the recovery rule's /livez probes
    kernel_cache: dict[str, object] | None  # the driver's compute cache volume (None: none)
    shm: limits.SharedMemory | None
    deadline: tuple[int, str] | None  # the training run's activeDeadlineSeconds, as given back
    serve: Serve | None  # None: --kind job
    train: Train | None  # None: --kind deployment


def check(flags: Flags) -> Checked:
    """Every refusal, in the order a user meets them; UsageError names a bad flag."""
    _refuse_control_characters(flags)
    _refuse_ignored(flags)
    _check_names(flags)
    gpus = whole_number("--gpus", flags.gpus, "1", high=64)
    flagged = {  # each contract variable's own flag, as given
        variable: getattr(flags, flag[2:].replace("-", "_"))
        for variable, (flag, _, _) in env.FLAGGED.items()
    }
    if flags.workers is not None:
        workers.refuse_owned(flags)
    contract = env.pod_env(flagged, flags.env, gpus)
    workers.refuse_ps_gpus_without_ps(flags, contract.env)
    metrics = contract.metrics_port or 0
    slices = _time_slices(flags, gpus, capped=contract.capped)
    grace, prestop = _shutdown(flags)
    monitor_labels = _pod_monitor(flags, metrics)
    image, uid, gid = _identity(flags)
    queue = _queue(flags)
    livez = _livez_probe(contract)
    kernel_cache = _kernel_cache(flags, contract.env)
    shm = limits.shared_memory(flags)
    deadline = limits.deadline(flags)
    serve = _serve(flags, metrics, prestop) if flags.kind in ("all", "deployment") else None
    train = _train(flags, contract.env) if flags.kind in ("all", "job") else None
    return Checked(
        flags=flags,
        gpus=gpus,
        contract=contract,
        time_slices=slices,
        grace_period=grace,
        monitor_labels=monitor_labels,
        image=image,
        uid=uid,
        gid=gid,
        queue=queue,
        livez=livez,
        kernel_cache=kernel_cache,
        shm=shm,
        deadline=deadline,
        serve=serve,
        train=train,
    )


# the HTTP path of the probes: an origin-form request target (RFC 9112 section 3.2.1), no spaces
_HTTP_PATH = re.compile(r"/[A-Za-z0-9._~!$&'()*+,;=:@%/-]*")


def _livez_probe(contract: env.PodEnv) -> bool:
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


def _kernel_cache(flags: Flags, environment: list[tuple[str, str]]) -> dict[str, object] | None:
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
    from tfgpu_kit.matrix import spec  # the spec's kernel cache: only for a volume

    cache = spec.load().gpus.kernel_cache
    given = dict(environment)
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
    for name, declared in table().items():
        if declared.shapes == OUTPUT:  # where the manifests go: none of their text
            continue
        value, flag = getattr(flags, name), option(name)
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str):
                refuse_control(flag, item, shlex.quote(EXAMPLES.get(name, "1")))


def _refuse_ignored(flags: Flags) -> None:
    """A flag that the rendered manifests would not use is an error, not silently dropped."""
    ignored = {"deployment": shaping(JOB, WORKERS), "job": shaping(DEPLOYMENT)}.get(flags.kind, ())
    for name in ignored:
        if getattr(flags, name) is not None:
            flag = option(name)
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
        from tfgpu_kit.matrix import (
            catalog,  # the spec's modules: only when the default image is used
        )

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


def _serve(flags: Flags, metrics: int, prestop: int) -> Serve:
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
    args = _command("--serve-cmd", flags.value("serve_cmd"))
    replicas = whole_number("--replicas", flags.value("replicas"), "2", low=0, high=MAX_INT32)
    return Serve(args, port, path, replicas, prestop)


def _train(flags: Flags, environment: list[tuple[str, str]]) -> Train:
    """The training Job's command, and its pods without --workers; with --workers its group
    (workers.py checks it)."""
    args = _command("--train-cmd", flags.value("train_cmd"))
    if flags.workers is None:
        for name, declared in table().items():
            if declared.shapes == WORKERS and getattr(flags, name):
                flag = option(name)
                raise UsageError(
                    f"{flag} shapes a multi-worker Job, which only --workers renders: "
                    f"example: --workers 2 {flag}"
                    + ("" if declared.switch else f" {shlex.quote(EXAMPLES[name])}")
                )
        parallelism, completions = (
            whole_number(f"--{name}", flags.value(name), example, high=MAX_INT32)
            for name, example in (("parallelism", "2"), ("completions", "1"))
        )
        return Train(args, parallelism, completions)
    group = workers.workers(flags, environment)
    return Train(args, workers=group, ps_gpus=group.ps > 0 and workers.ps_gpus(environment))


def _pod_monitor(flags: Flags, metrics: int) -> list[tuple[str, str]] | None:
    """The labels of the PodMonitor for the metrics port (None without --pod-monitor)."""
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
    return labels


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
    from tfgpu_kit.matrix import (  # pydantic and the spec: only when no --image is given
        catalog,
        spec,
    )

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
