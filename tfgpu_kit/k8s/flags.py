"""`build.py k8s`'s flags as data: the values as given, the defaults and examples the checks
quote, which flags shape which workload, and the multi-worker group they describe. Read by
manifests.py and workers.py (the multi-worker part), which both build on it."""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass, field

CHECKPOINT_PATH = "/checkpoints"  # where --checkpoint-claim is mounted (BackupAndRestore's dir)
JOBSET_JOB = "worker"  # the JobSet's one replicatedJob
# Parameter-server training (--ps): the replicatedJobs of the JobSet, and the suffixes of the
# three Indexed Jobs, in the order TF_CONFIG lists them; short, as Trainer v2.4.0 caps a
# runtime's replicatedJob names at 20 characters
CHIEF, WORKER, PS = "chief", "worker", "ps"
ROLES = (CHIEF, WORKER, PS)
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"  # Kueue's LocalQueue of a workload (--queue)
# Kubeflow Trainer v2 (--trainer): the replicatedJob and container its TrainJob's `trainer`
# settings (and numNodes) apply to, marked by the ancestor label (kubeflow/trainer
# 8c0f5059bd51ec3ba6d6a6a7b2e1471de7bc13b3, pkg/constants/constants.go Node, LabelTrainJobAncestor)
TRAINER_NODE = "node"
TRAINER_ANCESTOR = ("trainer.kubeflow.org/trainjob-ancestor-step", "trainer")
# the pod's JobSet (= TrainJob) name, a label JobSet puts on every pod (kubernetes-sigs/jobset
# 08dfbdfd682714a9ab929633eca8dc95315187e7, api/jobset/v1alpha2/jobset_types.go JobSetNameKey)
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"


@dataclass(frozen=True)
class Workers:
    """Multi-worker training: an Indexed Job of `count` pods and its headless Service,
    or a JobSet; TF_CONFIG is built in each pod by the runtime (tfgpu.tf_config)."""

    count: int
    port: int
    jobset: bool = False
    max_restarts: int = 3  # gang restarts of the whole group before the workload fails
    checkpoint_claim: str | None = None  # a PersistentVolumeClaim mounted at CHECKPOINT_PATH
    env: list[tuple[str, str]] = field(default_factory=list)  # the workers' own variables
    ps: int = 0  # parameter servers (--ps): 0 = MultiWorkerMirroredStrategy, no chief or ps
    role: str = WORKER  # the group of a parameter-server cluster this Job runs (ROLES)
    trainer: bool = False  # a Kubeflow Trainer v2 runtime: host names from the pod's JobSet name

    @property
    def backoff_limit(self) -> int:
        """Indexed Job: every gang restart fails all `count` pods (the collective fails on each
        survivor too), so `max_restarts` restarts cost `count * max_restarts` failures."""
        return self.count * self.max_restarts


# Flags that shape one workload only: given with a --kind that does not render it, they would be
# silently ignored. None = not given (the command's defaults are applied here, not by argparse).
DEPLOYMENT_ONLY = ("serve_cmd", "port", "health_path", "replicas", "prestop_sleep")
WORKERS_ONLY = (
    "worker_port",
    "checkpoint_claim",
    "max_restarts",
    "ps",
)  # meaningless without --workers
JOB_ONLY = ("train_cmd", "parallelism", "completions", "workers", "deadline", *WORKERS_ONLY)
DEFAULTS = {
    "serve_cmd": "python serve.py",
    "train_cmd": "python train.py",
    "port": "8501",
    "health_path": "/healthz",
    "replicas": "1",
    "parallelism": "1",
    "completions": "1",
    "prestop_sleep": "5",
    "workers": "2",
    "worker_port": "2222",
    "checkpoint_claim": "train-checkpoints",
    "max_restarts": "3",
    "ps": "1",
    "kernel_cache": "emptydir",
    "shm_size": "1Gi",
}
# an example for each flag the refusals quote (the control-character one, a flag of the other kind)
EXAMPLES = {
    **DEFAULTS,
    "name": "text-model",
    "namespace": "ml",
    "image": "registry.example.com/tfgpu/tensorflow:2.21.0-gpu",
    "registry": "registry.example.com:5000/team",
    "mem_limit": "6GiB",
    "virtual_devices": "2048,2048",
    "memory_growth": "true",
    "metrics_port": "9401",
    "device_plugin_namespace": "gpu-operator",
    "env": "TF_GPU_QUIET=true",
    "pod_monitor_label": "release=kube-prometheus-stack",
    "cpu": "2",
    "memory": "16Gi",
    "queue": "team-a",
    "kernel_cache": "pvc:tfgpu-kernels",
    "shm_size": "2Gi",
    "deadline": "12h",
}


@dataclass(frozen=True)
class Flags:
    """`build.py k8s`'s flags as given (text; None = not given)."""

    kind: str
    name: str
    namespace: str | None
    image: str | None
    registry: str | None
    serve_cmd: str | None
    train_cmd: str | None
    port: str | None
    health_path: str | None
    replicas: str | None
    parallelism: str | None
    completions: str | None
    gpus: str
    mem_limit: str | None
    virtual_devices: str | None
    memory_growth: str | None
    metrics_port: str | None
    time_slicing: str | None
    device_plugin_namespace: str
    env: list[str]
    grace_period: str
    prestop_sleep: str | None
    pod_monitor: bool
    pod_monitor_label: list[str]
    workers: str | None
    jobset: bool
    worker_port: str | None
    checkpoint_claim: str | None
    max_restarts: str | None
    ps: str | None
    trainer: bool
    queue: str | None
    kernel_cache: str | None
    shm_size: str | None
    deadline: str | None
    cpu: str
    memory: str
    uid: str | None
    gid: str | None

    @classmethod
    def from_namespace(cls, args: argparse.Namespace) -> Flags:
        return cls(**{f.name: getattr(args, f.name) for f in dataclasses.fields(cls)})

    def value(self, name: str) -> str:
        """A workload flag's value, or the command's default when not given."""
        given = getattr(self, name)
        return DEFAULTS[name] if given is None else str(given)
