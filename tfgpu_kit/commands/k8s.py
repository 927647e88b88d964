"""`build.py k8s`: Kubernetes manifests (a serving Deployment, a training Job, and an
optional device-plugin time-slicing ConfigMap) for an image built by the kit."""

from __future__ import annotations

import argparse
import re
import shlex
import sys
from collections.abc import Callable
from pathlib import Path

from tfgpu.errors import ConfigError
from tfgpu.settings import is_ascii_number, parse_bool, parse_mem_limit, parse_virtual_devices

from tfgpu_kit import k8s
from tfgpu_kit.commands import Command
from tfgpu_kit.errors import KitError, UsageError

NAME = "k8s"
HELP = (
    "render Kubernetes manifests (Deployment, Job, time-slicing ConfigMap, PodMonitor) for a kit "
    "image"
)

DESCRIPTION = """\
Render Kubernetes manifests for an image built by the kit: a Deployment that serves
a model and a Job that trains one, each with the kit's environment contract
(TF_GPU_MEM_LIMIT, TF_GPU_MEMORY_GROWTH, …), nvidia.com/gpu limits, probes, a
non-root securityContext, resource requests and a shutdown that lets the process end
and give its GPU memory back (preStop, terminationGracePeriodSeconds); with
--time-slicing also the NVIDIA device-plugin ConfigMap that lets several capped pods
share each GPU; with --pod-monitor a Prometheus Operator PodMonitor for the metrics
port. Check the result with `build.py plan FILE --gpu-memory SIZE`."""

EPILOG = """\
examples:
  build.py k8s --name text --mem-limit 6GiB --serve-cmd "python serve.py" > text.yaml
  build.py k8s --kind job --name train --mem-limit 10GiB --train-cmd "python train.py --epochs 5"
  build.py k8s --name small --mem-limit 3GiB --time-slicing 4 --replicas 4 --out k8s/
  build.py k8s --name text --mem-limit 6GiB --pod-monitor --pod-monitor-label release=prom
"""
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(m|Ki|Mi|Gi|Ti|k|M|G|T)?$")
# Label keys and values (Kubernetes' validation.IsQualifiedName / IsValidLabelValue).
_LABEL_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_LABEL_KEY = re.compile(
    rf"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?{_LABEL_NAME}$"
)
_LABEL_VALUE = re.compile(rf"^({_LABEL_NAME})?$")
MAX_GRACE_PERIOD = 3600


def add_arguments(parser: argparse.ArgumentParser) -> None:
    # cli.py sets DESCRIPTION and the exit codes as epilog; the examples go first.
    parser.epilog = EPILOG + "\n" + (parser.epilog or "")
    what = parser.add_argument_group("what to render")
    what.add_argument(
        "--kind",
        choices=("all", "deployment", "job"),
        default="all",
        help="the serving Deployment, the training Job, or both (default all)",
    )
    what.add_argument(
        "--name", default="tfgpu", help="base name: NAME-serve and NAME-train (default tfgpu)"
    )
    what.add_argument(
        "--namespace", help="namespace of the workloads (default: none, kubectl's current)"
    )
    what.add_argument(
        "--out", metavar="DIR", help="write one file per manifest into DIR instead of stdout"
    )
    image = parser.add_argument_group("image")
    image.add_argument(
        "--image",
        metavar="REF",
        help="image reference (default: the kit's newest gpu image from images/images.yaml)",
    )
    image.add_argument("--registry", metavar="R", help="prefix the default image with registry R")
    run = parser.add_argument_group("commands and workload shape")
    run.add_argument(
        "--serve-cmd",
        default="python serve.py",
        metavar="CMD",
        help="the model server's command line (default: %(default)s)",
    )
    run.add_argument(
        "--train-cmd",
        default="python train.py",
        metavar="CMD",
        help="the training command line (default: %(default)s)",
    )
    run.add_argument(
        "--port", default="8501", metavar="PORT", help="model server HTTP port (default 8501)"
    )
    run.add_argument(
        "--health-path",
        default="/healthz",
        metavar="PATH",
        help="HTTP path of readiness and liveness probes (default /healthz)",
    )
    run.add_argument("--replicas", default="1", metavar="N", help="Deployment replicas (default 1)")
    run.add_argument("--parallelism", default="1", metavar="N", help="Job pods at once (default 1)")
    run.add_argument("--completions", default="1", metavar="N", help="Job completions (default 1)")
    gpu = parser.add_argument_group("GPU memory (the kit's environment contract)")
    gpu.add_argument("--gpus", default="1", metavar="N", help="nvidia.com/gpu per pod (default 1)")
    gpu.add_argument("--mem-limit", metavar="SIZE", help="TF_GPU_MEM_LIMIT, e.g. 6GiB, 6144, 40%%")
    gpu.add_argument(
        "--virtual-devices", metavar="SIZES", help="TF_GPU_VIRTUAL_DEVICES, e.g. 2048,2048"
    )
    gpu.add_argument(
        "--memory-growth", metavar="BOOL", help="TF_GPU_MEMORY_GROWTH (default: the image's, true)"
    )
    gpu.add_argument(
        "--metrics-port",
        default="9401",
        metavar="PORT",
        help="TF_GPU_METRICS_PORT and Prometheus annotations; 0 disables (default 9401)",
    )
    gpu.add_argument(
        "--time-slicing",
        metavar="REPLICAS",
        help="also render the device-plugin ConfigMap sharing each GPU as REPLICAS slices",
    )
    gpu.add_argument(
        "--device-plugin-namespace",
        default="gpu-operator",
        metavar="NS",
        help="namespace of that ConfigMap (default gpu-operator)",
    )
    gpu.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="extra environment variable for both workloads (repeatable)",
    )
    shutdown = parser.add_argument_group("shutdown (the GPU memory returns when the process ends)")
    shutdown.add_argument(
        "--grace-period",
        default="30",
        metavar="SECONDS",
        help="terminationGracePeriodSeconds of both pods: from deletion (preStop included) to "
        "SIGKILL; raise it if the program saves state on SIGTERM (default 30, Kubernetes' own)",
    )
    shutdown.add_argument(
        "--prestop-sleep",
        default="5",
        metavar="SECONDS",
        help="Deployment: a preStop `sleep` that keeps the server answering while its endpoint "
        "is removed, before SIGTERM; 0 = no hook (default 5)",
    )
    monitoring = parser.add_argument_group("Prometheus Operator")
    monitoring.add_argument(
        "--pod-monitor",
        action="store_true",
        help="also render podmonitor.yaml (monitoring.coreos.com/v1 PodMonitor) scraping the "
        "pods' metrics port; the prometheus.io/* annotations are then left out (one scrape)",
    )
    monitoring.add_argument(
        "--pod-monitor-label",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="label of the PodMonitor, for a Prometheus' podMonitorSelector, e.g. "
        "release=kube-prometheus-stack (repeatable)",
    )
    pod = parser.add_argument_group("pod resources and identity")
    pod.add_argument("--cpu", default="1", help="CPU request (default 1)")
    pod.add_argument("--memory", default="8Gi", help="memory request and limit (default 8Gi)")
    pod.add_argument(
        "--uid",
        metavar="UID",
        help="runAsUser, and runAsGroup/fsGroup unless --gid (default: the image's user)",
    )
    pod.add_argument(
        "--gid",
        metavar="GID",
        help="runAsGroup/fsGroup (default: --uid if given, else the image's user's group)",
    )


def _number(flag: str, value: str, example: str, *, low: int = 1, high: int = 1_000_000) -> int:
    text = str(value).strip()
    if not is_ascii_number(text) or not low <= int(text) <= high:
        raise UsageError(
            f"{flag} {value!r} is not valid: accepted: a whole number from {low} to {high}; "
            f"example: {flag} {example}"
        )
    return int(text)


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


def _environment(args: argparse.Namespace, metrics_port: int | None) -> list[tuple[str, str]]:
    env: list[tuple[str, str]] = []
    if args.mem_limit is not None:
        env.append(_variable("--mem-limit", "TF_GPU_MEM_LIMIT", args.mem_limit, parse_mem_limit))
    if args.virtual_devices is not None:
        if args.mem_limit is not None:
            raise UsageError(
                "--mem-limit and --virtual-devices exclude each other: one cap per GPU, or the "
                "sizes of its split; example: --virtual-devices 2048,2048"
            )
        env.append(
            _variable(
                "--virtual-devices",
                "TF_GPU_VIRTUAL_DEVICES",
                args.virtual_devices,
                parse_virtual_devices,
            )
        )
    if args.memory_growth is not None:
        growth = args.memory_growth
        env.append(_variable("--memory-growth", "TF_GPU_MEMORY_GROWTH", growth, _bool))
    if metrics_port is not None:
        env.append(("TF_GPU_METRICS_PORT", str(metrics_port)))
    for item in args.env:
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
    from tfgpu_kit import catalog, spec

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


def run(args: argparse.Namespace) -> int:
    if not _DNS_LABEL.match(args.name) or len(args.name) > 50:
        raise UsageError(
            f"--name {args.name!r} is not valid: accepted: lower-case letters, digits and '-', "
            "at most 50 characters (Kubernetes names); example: --name text-model"
        )
    for flag, value in (("--cpu", args.cpu), ("--memory", args.memory)):
        if not _QUANTITY.match(value):
            raise UsageError(
                f"{flag} {value!r} is not a Kubernetes quantity; example: --cpu 2, --memory 16Gi"
            )
    gpus = _number("--gpus", args.gpus, "1", high=64)
    metrics = _number("--metrics-port", args.metrics_port, "9401", low=0, high=65535)
    slices = (
        None
        if args.time_slicing is None
        else _number("--time-slicing", args.time_slicing, "4", low=2, high=64)
    )
    if slices is not None and gpus != 1:
        raise UsageError(
            "--time-slicing needs --gpus 1: a pod gets one slice (failRequestsGreaterThanOne)"
        )
    if slices is not None and args.mem_limit is None and args.virtual_devices is None:
        raise UsageError(
            "--time-slicing shares each GPU between pods, so every pod needs a cap: "
            "pass --mem-limit",
            hint=f"e.g. --mem-limit {max(1, 100 // slices - 5)}% (leaves room for each pod's CUDA"
            " context)",
        )
    grace = _number("--grace-period", args.grace_period, "60", high=MAX_GRACE_PERIOD)
    prestop = _number("--prestop-sleep", args.prestop_sleep, "5", low=0, high=MAX_GRACE_PERIOD)
    if prestop >= grace:
        raise UsageError(
            f"--prestop-sleep {prestop} is not shorter than --grace-period {grace}: the grace "
            "period includes the preStop hook, so the program would get no time to exit before "
            f"SIGKILL; example: --prestop-sleep 5 --grace-period {max(30, prestop + 25)}"
        )
    if args.pod_monitor_label and not args.pod_monitor:
        raise UsageError(
            "--pod-monitor-label labels the PodMonitor, which only --pod-monitor renders; "
            "example: --pod-monitor --pod-monitor-label release=kube-prometheus-stack"
        )
    monitor_labels = _labels("--pod-monitor-label", args.pod_monitor_label)
    if args.pod_monitor and not metrics:
        raise UsageError(
            "--pod-monitor scrapes the metrics port, and --metrics-port 0 turns it off; "
            "example: --pod-monitor --metrics-port 9401"
        )
    gid: int | None
    if args.image:
        image, uid, gid = args.image, None, None
    else:
        try:
            image, uid, gid = _default_image(args.registry)
        except KitError as error:
            raise UsageError(f"cannot find the default image ({error}); pass --image REF") from None
    if args.uid is not None:
        uid = gid = _number("--uid", args.uid, "1000", high=2**31 - 1)
    if args.gid is not None:
        gid = _number("--gid", args.gid, "1000", high=2**31 - 1)
    common = k8s.Common(
        image=image,
        env=_environment(args, metrics or None),
        gpus=gpus,
        cpu=args.cpu,
        memory=args.memory,
        uid=uid or 1000,
        gid=gid or 1000,
        namespace=args.namespace,
        metrics_port=metrics or None,
        grace_period=grace,
        prestop_sleep=prestop,
        scrape_annotations=not args.pod_monitor,
    )
    outputs: list[tuple[str, str]] = []
    if args.kind in ("all", "deployment"):
        port = _number("--port", args.port, "8501", high=65535)
        if port == metrics:
            # the hook binds the metrics port at `import tensorflow`, before the server listens
            raise UsageError(
                f"--port {port} and --metrics-port {metrics} are the same port: the metrics "
                "server would take it and the model server could not listen; accepted: two "
                "different ports, or --metrics-port 0; example: --port 8501 --metrics-port 9401"
            )
        serve = k8s.Workload(
            f"{args.name}-serve",
            _command("--serve-cmd", args.serve_cmd),
            replicas=_number("--replicas", args.replicas, "2", low=0),
            port=port,
            probe_path=args.health_path
            if args.health_path.startswith("/")
            else "/" + args.health_path,
        )
        outputs.append(("deployment.yaml", k8s.render_workload("deployment", serve, common)))
    if args.kind in ("all", "job"):
        train = k8s.Workload(
            f"{args.name}-train",
            _command("--train-cmd", args.train_cmd),
            parallelism=_number("--parallelism", args.parallelism, "2"),
            completions=_number("--completions", args.completions, "1"),
        )
        outputs.append(("job.yaml", k8s.render_workload("job", train, common)))
    if args.pod_monitor:
        pods = [f"{args.name}-serve"] if args.kind in ("all", "deployment") else []
        pods += [f"{args.name}-train"] if args.kind in ("all", "job") else []
        monitor = k8s.PodMonitor(
            f"{args.name}-metrics", pods, namespace=args.namespace, labels=monitor_labels
        )
        outputs.append(("podmonitor.yaml", k8s.render_pod_monitor(monitor)))
    if slices is not None:
        slicing = k8s.TimeSlicing(slices, namespace=args.device_plugin_namespace)
        outputs.append(("time-slicing.yaml", k8s.render_time_slicing(slicing)))
    if args.out:
        folder = Path(args.out)
        folder.mkdir(parents=True, exist_ok=True)
        for filename, text in outputs:
            (folder / filename).write_text(text, encoding="utf-8")
            sys.stdout.write(f"{folder / filename}\n")
    else:
        sys.stdout.write("---\n".join(text for _, text in outputs))
    return 0


COMMAND = Command(NAME, HELP, DESCRIPTION, add_arguments, run)
