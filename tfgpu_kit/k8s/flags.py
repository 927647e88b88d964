"""`build.py k8s`'s flags, each declared once: a field of `Flags`, whose metadata (`Flag`) holds
its --help group and argparse keywords, the command's value when it is not given, the example the
refusals quote, and the workload it shapes. The command's parser (tfgpu_kit/cli/k8s.py) and the
refusals (check.py) read them from here; so do the bounds and paths the help quotes."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from tfgpu.contract.tf_config import MAX_WORKERS

CHECKPOINT_PATH = "/checkpoints"  # where --checkpoint-claim is mounted (BackupAndRestore's dir)
DEVICE_PLUGIN_NAMESPACE = "gpu-operator"  # the GPU Operator's, where its device plugin reads
# Kubernetes takes any int64; a year bounds a typo, and stays inside int32 for any consumer.
MAX_DEADLINE_S = 365 * 86400
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"  # Kueue's LocalQueue of a workload (--queue)

# What a flag shapes alone: given with a --kind that does not render it, it would be silently
# ignored, so the refusals name it. WORKERS: a Job's, and only with --workers. OUTPUT: where the
# manifests go, not what they hold.
DEPLOYMENT, JOB, WORKERS, OUTPUT = "deployment", "job", "workers", "output"


@dataclass(frozen=True)
class Flag:
    """One flag of `build.py k8s`, as its field's metadata."""

    group: str  # its --help group
    arguments: dict[str, Any]  # argparse's add_argument keywords
    unset: str | None = None  # the command's value when not given (argparse leaves None)
    example: str | None = None  # what the refusals quote; `unset` when None
    shapes: str | None = None  # DEPLOYMENT, JOB, WORKERS, OUTPUT; None: every workload

    @property
    def switch(self) -> bool:
        """A store_true flag: False when not given, never None."""
        return self.arguments.get("action") == "store_true"


def _flag(
    group: str,
    *,
    unset: str | None = None,
    example: str | None = None,
    shapes: str | None = None,
    **arguments: Any,
) -> Any:
    return field(metadata={"flag": Flag(group, arguments, unset, example, shapes)})


RENDER = "what to render"
IMAGE = "image"
SHAPE = "commands and workload shape"
GPU_MEMORY = "GPU memory (the kit's environment contract)"
SHUTDOWN = "shutdown (the GPU memory returns when the process ends)"
PROMETHEUS = "Prometheus Operator"
POD = "pod resources and identity"


@dataclass(frozen=True)
class Flags:
    """`build.py k8s`'s flags as given (text; None = not given), in --help's order."""

    kind: str = _flag(
        RENDER,
        choices=("all", "deployment", "job"),
        default="all",
        help="the serving Deployment, the training Job, or both (default all)",
    )
    name: str = _flag(
        RENDER,
        example="text-model",
        default="tfgpu",
        help="base name: NAME-serve and NAME-train (default tfgpu)",
    )
    namespace: str | None = _flag(
        RENDER,
        example="ml",
        help="namespace of the workloads, a DNS-1123 label (default: none, kubectl's current)",
    )
    queue: str | None = _flag(
        RENDER,
        example="team-a",
        metavar="NAME",
        help="the Kueue LocalQueue that admits the workloads: the label "
        "kueue.x-k8s.io/queue-name on every Job, JobSet, TrainJob and Deployment, and Jobs, "
        "JobSets and TrainJobs created suspended (Kueue starts them); a Deployment's pods "
        "are admitted one by one through Kueue's deployment integration (Kueue 0.9+)",
    )
    out: str | None = _flag(
        RENDER,
        shapes=OUTPUT,
        metavar="DIR",
        help="write one file per manifest into DIR instead of stdout",
    )
    image: str | None = _flag(
        IMAGE,
        example="registry.example.com/tfgpu/tensorflow:2.21.0-gpu",
        metavar="REF",
        help="image reference (default: the kit's newest gpu image from images/images.yaml)",
    )
    registry: str | None = _flag(
        IMAGE,
        example="registry.example.com:5000/team",
        metavar="R",
        help="prefix the default image with registry R (not with --image)",
    )
    serve_cmd: str | None = _flag(
        SHAPE,
        unset="python serve.py",
        shapes=DEPLOYMENT,
        metavar="CMD",
        help="Deployment: the model server's command line (default: python serve.py)",
    )
    train_cmd: str | None = _flag(
        SHAPE,
        unset="python train.py",
        shapes=JOB,
        metavar="CMD",
        help="Job: the training command line (default: python train.py)",
    )
    port: str | None = _flag(
        SHAPE,
        unset="8501",
        shapes=DEPLOYMENT,
        metavar="PORT",
        help="Deployment: model server HTTP port (default 8501)",
    )
    health_path: str | None = _flag(
        SHAPE,
        unset="/healthz",
        shapes=DEPLOYMENT,
        metavar="PATH",
        help="Deployment: HTTP path of readiness and liveness probes (default /healthz); "
        "with --env TF_GPU_RECOVER_AT=… (action report) the liveness probe is /livez on the "
        "metrics port instead, behind a startup probe that gives the program 10 minutes "
        "to import TensorFlow",
    )
    replicas: str | None = _flag(
        SHAPE, unset="1", shapes=DEPLOYMENT, metavar="N", help="Deployment replicas (default 1)"
    )
    parallelism: str | None = _flag(
        SHAPE, unset="1", shapes=JOB, metavar="N", help="Job pods at once (default 1)"
    )
    completions: str | None = _flag(
        SHAPE, unset="1", shapes=JOB, metavar="N", help="Job completions (default 1)"
    )
    workers: str | None = _flag(
        SHAPE,
        example="2",
        shapes=JOB,
        metavar="N",
        help=f"Job: N workers (1 to {MAX_WORKERS}, as the runtime's TF_GPU_WORKERS) "
        "training one model with MultiWorkerMirroredStrategy: an "
        "Indexed Job and its headless Service; each pod's runtime builds TF_CONFIG, tf.keras "
        "is tf-keras",
    )
    jobset: bool = _flag(
        SHAPE,
        shapes=WORKERS,
        action="store_true",
        help="with --workers: a JobSet (jobset.x-k8s.io/v1alpha2) with gang restart instead",
    )
    ps: str | None = _flag(
        SHAPE,
        example="1",
        shapes=WORKERS,
        metavar="M",
        help="with --workers: parameter-server training (ParameterServerStrategy) instead: "
        "a chief that runs --train-cmd (with a ClusterCoordinator), the N workers and M "
        f"parameter servers (1 to {MAX_WORKERS}), both running `tfgpu server`; three "
        "replicatedJobs of "
        "a JobSet with --jobset, else three Indexed Jobs (NAME-train-chief, -worker, -ps) "
        "and one headless Service; GPU and caps on the chief and workers only, parameter "
        "servers CPU-only (docs/scale.md: how to give them a GPU)",
    )
    trainer: bool = _flag(
        SHAPE,
        shapes=WORKERS,
        action="store_true",
        help="with --workers (and --ps): a Kubeflow Trainer v2 ClusterTrainingRuntime for "
        "the kit's image (NAME-tensorflow, or NAME-tensorflow-ps) and a TrainJob NAME-train "
        "that runs it, instead of the Job or JobSet; each pod builds TF_CONFIG from its "
        "TrainJob's name (checked against Trainer v2.3's CRDs, not on a cluster)",
    )
    worker_port: str | None = _flag(
        SHAPE,
        unset="2222",
        shapes=WORKERS,
        metavar="PORT",
        help="with --workers: the workers' port (default 2222)",
    )
    max_restarts: str | None = _flag(
        SHAPE,
        unset="3",
        shapes=WORKERS,
        metavar="N",
        help="with --workers: restarts of the whole group before it fails (default 3)",
    )
    checkpoint_claim: str | None = _flag(
        SHAPE,
        example="train-checkpoints",
        shapes=WORKERS,
        metavar="PVC",
        help="with --workers: a PersistentVolumeClaim mounted at"
        f" {CHECKPOINT_PATH} in every worker, for"
        " tf.keras.callbacks.BackupAndRestore",
    )
    gpus: str = _flag(
        GPU_MEMORY, default="1", metavar="N", help="nvidia.com/gpu per pod (default 1)"
    )
    mem_limit: str | None = _flag(
        GPU_MEMORY,
        example="6GiB",
        metavar="SIZE",
        help="TF_GPU_MEM_LIMIT, e.g. 6GiB, 6144, 40%%",
    )
    virtual_devices: str | None = _flag(
        GPU_MEMORY,
        example="2048,2048",
        metavar="SIZES",
        help="TF_GPU_VIRTUAL_DEVICES, e.g. 2048,2048",
    )
    memory_growth: str | None = _flag(
        GPU_MEMORY,
        example="true",
        metavar="BOOL",
        help="TF_GPU_MEMORY_GROWTH (default: the image's, true)",
    )
    metrics_port: str | None = _flag(
        GPU_MEMORY,
        example="9401",
        metavar="PORT",
        help="TF_GPU_METRICS_PORT, the pods' metrics containerPort and the Prometheus "
        "annotations (or --env TF_GPU_METRICS_PORT=PORT, not both); 0 disables (default 9401)",
    )
    time_slicing: str | None = _flag(
        GPU_MEMORY,
        metavar="REPLICAS",
        help="also render the device-plugin ConfigMap sharing each GPU as REPLICAS slices",
    )
    device_plugin_namespace: str = _flag(
        GPU_MEMORY,
        example="gpu-operator",
        default=DEVICE_PLUGIN_NAMESPACE,
        metavar="NS",
        help="namespace of that ConfigMap (NAME-time-slicing): the device plugin's (default "
        "%(default)s, the GPU Operator's; nvidia-device-plugin for NVIDIA's Helm chart as its "
        "README installs it)",
    )
    kernel_cache: str | None = _flag(
        GPU_MEMORY,
        unset="emptydir",
        example="pvc:tfgpu-kernels",
        metavar="WHERE",
        help="where every GPU pod keeps the kernels the driver JIT-compiles from PTX (Hopper, "
        "Blackwell: TensorFlow ships no SASS for them), mounted at CUDA_CACHE_PATH: emptydir "
        "(the default: one per pod, kept across container restarts), pvc:CLAIM (a "
        "PersistentVolumeClaim shared by the pods, ReadWriteMany across nodes of one driver "
        "version), hostpath:/PATH (a folder of the node, which the pods' uid must be able to "
        "write), or none (docs/gpus.md)",
    )
    env: list[str] = _flag(  # noqa: RUF009 (metadata, no default)
        GPU_MEMORY,
        example="TF_GPU_QUIET=true",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="extra environment variable for both workloads (repeatable); checked as the "
        "image's runtime checks it; a variable with a flag of its own (TF_GPU_MEM_LIMIT, "
        "TF_GPU_VIRTUAL_DEVICES, TF_GPU_MEMORY_GROWTH, TF_GPU_METRICS_PORT) comes from the "
        "flag or from --env, not both",
    )
    grace_period: str = _flag(
        SHUTDOWN,
        default="30",
        metavar="SECONDS",
        help="terminationGracePeriodSeconds of both pods: from deletion (preStop included) to "
        "SIGKILL; raise it if the program saves state on SIGTERM (default 30, Kubernetes' own)",
    )
    prestop_sleep: str | None = _flag(
        SHUTDOWN,
        unset="5",
        shapes=DEPLOYMENT,
        metavar="SECONDS",
        help="Deployment: a preStop `sleep` that keeps the server answering while its endpoint "
        "is removed, before SIGTERM; 0 = no hook (default 5)",
    )
    deadline: str | None = _flag(
        SHUTDOWN,
        example="12h",
        shapes=JOB,
        metavar="DURATION",
        help="Job: Kubernetes ends the training run DURATION after it starts, whatever its "
        "state (SIGTERM, then --grace-period; the Job fails, reason DeadlineExceeded): "
        "activeDeadlineSeconds on each Job; with --jobset on each replicatedJob's Job, and a "
        "failurePolicy rule that fails the JobSet (a gang restart starts the clock again); "
        "with --trainer on the TrainJob (Trainer v2.2+). Whole seconds (3600, 3600s), "
        f"minutes (90m), hours (12h) or days (2d), 1s to {MAX_DEADLINE_S // 86400}d "
        "(default: none)",
    )
    pod_monitor: bool = _flag(
        PROMETHEUS,
        action="store_true",
        help="also render podmonitor.yaml (monitoring.coreos.com/v1 PodMonitor) scraping the "
        "pods' metrics port; the prometheus.io/* annotations are then left out (one scrape)",
    )
    pod_monitor_label: list[str] = _flag(  # noqa: RUF009 (metadata, no default)
        PROMETHEUS,
        example="release=kube-prometheus-stack",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="label of the PodMonitor, for a Prometheus' podMonitorSelector, e.g. "
        "release=kube-prometheus-stack (repeatable)",
    )
    cpu: str = _flag(POD, example="2", default="1", help="CPU request (default 1)")
    memory: str = _flag(
        POD,
        example="16Gi",
        default="8Gi",
        help="memory request and limit (default 8Gi); /dev/shm (--shm-size) is a part of it",
    )
    shm_size: str | None = _flag(
        POD,
        unset="1Gi",
        example="2Gi",
        metavar="SIZE",
        help="/dev/shm of every GPU pod, for tf.data's worker processes and NCCL between "
        "GPUs (the container runtime gives 64 MiB): a Memory emptyDir of this sizeLimit, a "
        "Kubernetes quantity above 64Mi (1Gi, 512Mi, 2G; a bare number is bytes), or none "
        "for no such volume (default 1Gi). What is written there counts against the "
        "container's memory limit, so it must be smaller than --memory, which it shares "
        "with the program. Parameter servers without a GPU get none",
    )
    uid: str | None = _flag(
        POD,
        metavar="UID",
        help="runAsUser, and runAsGroup/fsGroup unless --gid (default: the image's user)",
    )
    gid: str | None = _flag(
        POD,
        metavar="GID",
        help="runAsGroup/fsGroup (default: --uid if given, else the image's user's group)",
    )

    def value(self, name: str) -> str:
        """A workload flag's value, or the command's default when not given."""
        given = getattr(self, name)
        return DEFAULTS[name] if given is None else str(given)


def table() -> dict[str, Flag]:
    """Every flag's declaration, by its field name (= argparse's dest), in --help's order."""
    return {f.name: f.metadata["flag"] for f in dataclasses.fields(Flags)}


def option(name: str) -> str:
    """The flag of a field: serve_cmd -> --serve-cmd."""
    return "--" + name.replace("_", "-")


DEFAULTS = {name: flag.unset for name, flag in table().items() if flag.unset is not None}
EXAMPLES = {**DEFAULTS}
EXAMPLES.update((name, flag.example) for name, flag in table().items() if flag.example is not None)


def shaping(*shapes: str) -> tuple[str, ...]:
    """The flags (not switches) that shape only these workloads, in --help's order: each is None
    when not given."""
    return tuple(
        name for name, flag in table().items() if flag.shapes in shapes and not flag.switch
    )
