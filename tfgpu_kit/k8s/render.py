"""`build.py k8s`'s manifests rendered from checked flags (check.py): a serving Deployment, a
training Job (or its multi-worker forms: Indexed Jobs, a JobSet, a Kubeflow Trainer v2 runtime and
TrainJob), a PodMonitor and a time-slicing ConfigMap. It refuses nothing: every value it writes
has passed check.py.

Templates live in templates/k8s/ (Jinja2, StrictUndefined); every value is written
JSON-quoted with every non-ASCII character escaped, which is valid YAML, and a value reaches a
comment only through the `comment` filter, which refuses anything but a checked name: so a value
can never change the document's shape (tests/scale/test_k8s_properties.py)."""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import jinja2
from tfgpu.contract import tf_config

from tfgpu_kit.k8s import workers
from tfgpu_kit.k8s.check import Checked, Serve, Train
from tfgpu_kit.k8s.flags import CHECKPOINT_PATH, Flags
from tfgpu_kit.k8s.workers import ROLES, TRAINER_ANCESTOR, TRAINER_NODE, Workers
from tfgpu_kit.shared import templating

TEMPLATES = Path(__file__).resolve().parents[2] / "templates" / "k8s"
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
    # stop the pod at start (workers.for_role)
    env = workers.for_role(cast("list[tuple[str, str]]", kit["env"]), gpu=workload.gpu)
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


def manifests(checked: Checked) -> list[tuple[str, str]]:
    """(file name, YAML) of each manifest the checked flags ask for."""
    flags, contract, gpus = checked.flags, checked.contract, checked.gpus
    kit: dict[str, object] = {  # what both workloads share: image, environment, resources, identity
        "image": checked.image,
        "env": contract.env,
        "gpus": gpus,
        # a quantity as a string: the API's OpenAPI (Swagger 2.0) schema types resource
        # quantities as strings, and validators built on it reject a bare number
        "gpu_quantity": str(gpus),
        "gpu_resource": GPU_RESOURCE,
        "cpu": flags.cpu,
        "memory": flags.memory,
        "uid": checked.uid,
        "gid": checked.gid,
        "namespace": flags.namespace,
        "queue": checked.queue,
        "metrics_port": contract.metrics_port,
        # prometheus.io/*, unless a PodMonitor does the scraping
        "scrape_annotations": checked.monitor_labels is None and contract.metrics_port is not None,
        # terminationGracePeriodSeconds: preStop + the program's own exit
        "grace_period": checked.grace_period,
        # the recovery rule (tfgpu.act.recovery): `report` is read by a liveness probe on the
        # metrics port's /livez; either action keeps its count of recoveries in /var/tmp, on
        # an emptyDir, so that it outlives the container restarts it causes
        "recovery": contract.recovery,
        "livez": checked.livez,
        # the driver's compute cache on a volume in every GPU pod (None: none)
        "kernel_cache": checked.kernel_cache,
        # /dev/shm on a Memory emptyDir in every GPU pod, within --memory (None: none)
        "shm": checked.shm,
        # the training run's activeDeadlineSeconds, as (seconds, text) (None: none)
        "deadline": checked.deadline,
        **LIVEZ_PROBES,
    }
    outputs: list[tuple[str, str]] = []
    if checked.serve is not None:
        serve = _serve(flags, checked.serve)
        outputs.append(_render("deployment", **_context("deployment", serve, kit)))
    if checked.train is not None:
        outputs += _training(_train(flags, checked.train, gpus), kit)
    if checked.monitor_labels is not None:
        outputs.append(_pod_monitor(flags, checked.monitor_labels))
    if checked.time_slices is not None:
        name, namespace = f"{flags.name}-time-slicing", flags.device_plugin_namespace
        slicing = {"replicas": checked.time_slices, "namespace": namespace, "name": name}
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


def _serve(flags: Flags, serve: Serve) -> Workload:
    return Workload(
        f"{flags.name}-serve",
        serve.args,
        replicas=serve.replicas,
        port=serve.port,
        probe_path=serve.probe_path,
        prestop_sleep=serve.prestop_sleep,
    )


def _count(number: int, one: str, many: str) -> str:
    return f"{number} {one if number == 1 else many}"


def _train(flags: Flags, train: Train, gpus: int) -> list[Workload]:
    """The training Job; with --workers its group; with --ps its chief, workers and parameter
    servers (the chief runs the command, the others their role's gRPC server)."""
    args = train.args
    if train.workers is None:
        summary = f"a TensorFlow training Job on {_count(gpus, 'GPU', 'GPUs')} per pod"
        return [
            Workload(
                f"{flags.name}-train",
                args,
                parallelism=train.parallelism,
                completions=train.completions,
                summary=summary,
            )
        ]
    group = train.workers
    job = f"{flags.name}-train"
    if not group.ps:
        return [
            Workload(
                TRAINER_NODE if group.trainer else job,
                args,
                parallelism=group.count,
                completions=group.count,
                backoff_limit=0 if group.jobset else group.backoff_limit,
                workers=group,
                app=job if group.trainer else "",
                summary=(
                    f"{_count(group.count, 'TensorFlow worker', 'TensorFlow workers')} "
                    f"training one model, {_count(gpus, 'GPU', 'GPUs')} each"
                ),
            )
        ]
    return _ps_cluster(job, args, group, gpus, ps_gpus=train.ps_gpus)


def _ps_cluster(
    job: str, args: list[str], cluster: Workers, gpus: int, *, ps_gpus: bool
) -> list[Workload]:
    """Parameter-server training: the chief, the workers and the parameter servers."""
    counts = (
        f"a chief, {_count(cluster.count, 'worker', 'workers')}, "
        f"{_count(cluster.ps, 'parameter server', 'parameter servers')}"
    )
    each = _count(gpus, "GPU", "GPUs")
    summaries = {
        "chief": f"the chief of {job} ({counts}): it runs the training program, on {each}",
        "worker": f"the {_count(cluster.count, 'worker', 'workers')} of {job} ({counts}): "
        f"each runs the steps the chief sends, on {each}",
        "ps": f"the {_count(cluster.ps, 'parameter server', 'parameter servers')} of {job} "
        f"({counts}): each holds a share of the variables, "
        + (f"on {each}" if ps_gpus else "with no GPU"),
    }
    groups = []
    for role in ROLES:
        pods = {"chief": 1, "worker": cluster.count, "ps": cluster.ps}[role]
        group = dataclasses.replace(
            cluster, count=pods, role=role, env=[*cluster.env, (tf_config.ROLE, role)]
        )
        # a JobSet restarts the whole cluster when its chief or a parameter server fails (the
        # run cannot go on without them); a worker is replaced on its own, and the chief's
        # coordinator gives its closures to the others meanwhile (TensorFlow's documented
        # fault tolerance); three separate Jobs each replace their own pods
        survives = role == "worker" or not cluster.jobset
        # Trainer v2: the chief is the runtime's trainer node (container `node`)
        name = job if cluster.jobset else f"{job}-{role}"
        if cluster.trainer:
            name = TRAINER_NODE if role == "chief" else role
        groups.append(
            Workload(
                name,
                args if role == "chief" else list(workers.SERVER_ARGS),
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


def _pod_monitor(flags: Flags, labels: list[tuple[str, str]]) -> tuple[str, str]:
    """podmonitor.yaml: Prometheus Operator's PodMonitor for the metrics port of the rendered
    workloads."""
    # app.kubernetes.io/name of each workload it selects
    pods = [f"{flags.name}-serve"] if flags.kind in ("all", "deployment") else []
    pods += [f"{flags.name}-train"] if flags.kind in ("all", "job") else []
    monitor = {"name": f"{flags.name}-metrics", "pods": pods, "namespace": flags.namespace}
    labels = [("app.kubernetes.io/managed-by", "tfgpu-kit"), *labels]
    return _render("podmonitor", m=monitor, labels=labels)
