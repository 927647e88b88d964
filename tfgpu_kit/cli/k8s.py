"""`build.py k8s`: Kubernetes manifests (a serving Deployment, a training Job, and an
optional device-plugin time-slicing ConfigMap) for an image built by the kit."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from tfgpu_kit.cli.command import Command
from tfgpu_kit.k8s import limits as k8s_limits
from tfgpu_kit.k8s import manifests as k8s_manifests
from tfgpu_kit.k8s.workers import MAX_WORKERS

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
port. Check the result with `./kit plan FILE --gpu-memory SIZE`."""

EPILOG = """\
examples:
  ./kit k8s --name text --mem-limit 6GiB --serve-cmd "python serve.py" > text.yaml
  ./kit k8s --kind job --name train --mem-limit 10GiB --train-cmd "python train.py --epochs 5"
  ./kit k8s --name small --mem-limit 3GiB --time-slicing 4 --replicas 4 --out k8s/
  ./kit k8s --name text --mem-limit 6GiB --pod-monitor --pod-monitor-label release=prom
  ./kit k8s --kind job --name big --workers 2 --ps 1 --jobset --queue team-a --out k8s/
  ./kit k8s --kind job --name bert --workers 4 --trainer --queue team-a --out k8s/
"""


# Each argument group of --help, in order: its flags' add_argument keywords.
ARGUMENTS: dict[str, dict[str, dict[str, Any]]] = {
    "what to render": {
        "--kind": dict(
            choices=("all", "deployment", "job"),
            default="all",
            help="the serving Deployment, the training Job, or both (default all)",
        ),
        "--name": dict(
            default="tfgpu", help="base name: NAME-serve and NAME-train (default tfgpu)"
        ),
        "--namespace": dict(
            help="namespace of the workloads, a DNS-1123 label (default: none, kubectl's current)"
        ),
        "--queue": dict(
            metavar="NAME",
            help="the Kueue LocalQueue that admits the workloads: the label "
            "kueue.x-k8s.io/queue-name on every Job, JobSet, TrainJob and Deployment, and Jobs, "
            "JobSets and TrainJobs created suspended (Kueue starts them); a Deployment's pods "
            "are admitted one by one through Kueue's deployment integration (Kueue 0.9+)",
        ),
        "--out": dict(metavar="DIR", help="write one file per manifest into DIR instead of stdout"),
    },
    "image": {
        "--image": dict(
            metavar="REF",
            help="image reference (default: the kit's newest gpu image from images/images.yaml)",
        ),
        "--registry": dict(
            metavar="R", help="prefix the default image with registry R (not with --image)"
        ),
    },
    "commands and workload shape": {
        "--serve-cmd": dict(
            metavar="CMD",
            help="Deployment: the model server's command line (default: python serve.py)",
        ),
        "--train-cmd": dict(
            metavar="CMD", help="Job: the training command line (default: python train.py)"
        ),
        "--port": dict(metavar="PORT", help="Deployment: model server HTTP port (default 8501)"),
        "--health-path": dict(
            metavar="PATH",
            help="Deployment: HTTP path of readiness and liveness probes (default /healthz); "
            "with --env TF_GPU_RECOVER_AT=… (action report) the liveness probe is /livez on the "
            "metrics port instead, behind a startup probe that gives the program 10 minutes "
            "to import TensorFlow",
        ),
        "--replicas": dict(metavar="N", help="Deployment replicas (default 1)"),
        "--parallelism": dict(metavar="N", help="Job pods at once (default 1)"),
        "--completions": dict(metavar="N", help="Job completions (default 1)"),
        "--workers": dict(
            metavar="N",
            help=f"Job: N workers (1 to {MAX_WORKERS}, as the runtime's TF_GPU_WORKERS) "
            "training one model with MultiWorkerMirroredStrategy: an "
            "Indexed Job and its headless Service; each pod's runtime builds TF_CONFIG, tf.keras "
            "is tf-keras",
        ),
        "--jobset": dict(
            action="store_true",
            help="with --workers: a JobSet (jobset.x-k8s.io/v1alpha2) with gang restart instead",
        ),
        "--ps": dict(
            metavar="M",
            help="with --workers: parameter-server training (ParameterServerStrategy) instead: "
            "a chief that runs --train-cmd (with a ClusterCoordinator), the N workers and M "
            f"parameter servers (1 to {MAX_WORKERS}), both running `tfgpu server`; three "
            "replicatedJobs of "
            "a JobSet with --jobset, else three Indexed Jobs (NAME-train-chief, -worker, -ps) "
            "and one headless Service; GPU and caps on the chief and workers only, parameter "
            "servers CPU-only (docs/scale.md: how to give them a GPU)",
        ),
        "--trainer": dict(
            action="store_true",
            help="with --workers (and --ps): a Kubeflow Trainer v2 ClusterTrainingRuntime for "
            "the kit's image (NAME-tensorflow, or NAME-tensorflow-ps) and a TrainJob NAME-train "
            "that runs it, instead of the Job or JobSet; each pod builds TF_CONFIG from its "
            "TrainJob's name (checked against Trainer v2.3's CRDs, not on a cluster)",
        ),
        "--worker-port": dict(
            metavar="PORT", help="with --workers: the workers' port (default 2222)"
        ),
        "--max-restarts": dict(
            metavar="N",
            help="with --workers: restarts of the whole group before it fails (default 3)",
        ),
        "--checkpoint-claim": dict(
            metavar="PVC",
            help="with --workers: a PersistentVolumeClaim mounted at"
            f" {k8s_manifests.CHECKPOINT_PATH} in every worker, for"
            " tf.keras.callbacks.BackupAndRestore",
        ),
    },
    "GPU memory (the kit's environment contract)": {
        "--gpus": dict(default="1", metavar="N", help="nvidia.com/gpu per pod (default 1)"),
        "--mem-limit": dict(metavar="SIZE", help="TF_GPU_MEM_LIMIT, e.g. 6GiB, 6144, 40%%"),
        "--virtual-devices": dict(metavar="SIZES", help="TF_GPU_VIRTUAL_DEVICES, e.g. 2048,2048"),
        "--memory-growth": dict(
            metavar="BOOL", help="TF_GPU_MEMORY_GROWTH (default: the image's, true)"
        ),
        "--metrics-port": dict(
            metavar="PORT",
            help="TF_GPU_METRICS_PORT, the pods' metrics containerPort and the Prometheus "
            "annotations (or --env TF_GPU_METRICS_PORT=PORT, not both); 0 disables (default 9401)",
        ),
        "--time-slicing": dict(
            metavar="REPLICAS",
            help="also render the device-plugin ConfigMap sharing each GPU as REPLICAS slices",
        ),
        "--device-plugin-namespace": dict(
            default=k8s_manifests.DEVICE_PLUGIN_NAMESPACE,
            metavar="NS",
            help="namespace of that ConfigMap (NAME-time-slicing): the device plugin's (default "
            "%(default)s, the GPU Operator's; nvidia-device-plugin for NVIDIA's Helm chart as its "
            "README installs it)",
        ),
        "--kernel-cache": dict(
            metavar="WHERE",
            help="where every GPU pod keeps the kernels the driver JIT-compiles from PTX (Hopper, "
            "Blackwell: TensorFlow ships no SASS for them), mounted at CUDA_CACHE_PATH: emptydir "
            "(the default: one per pod, kept across container restarts), pvc:CLAIM (a "
            "PersistentVolumeClaim shared by the pods, ReadWriteMany across nodes of one driver "
            "version), hostpath:/PATH (a folder of the node, which the pods' uid must be able to "
            "write), or none (docs/gpus.md)",
        ),
        "--env": dict(
            action="append",
            default=[],
            metavar="NAME=VALUE",
            help="extra environment variable for both workloads (repeatable); checked as the "
            "image's runtime checks it; a variable with a flag of its own (TF_GPU_MEM_LIMIT, "
            "TF_GPU_VIRTUAL_DEVICES, TF_GPU_MEMORY_GROWTH, TF_GPU_METRICS_PORT) comes from the "
            "flag or from --env, not both",
        ),
    },
    "shutdown (the GPU memory returns when the process ends)": {
        "--grace-period": dict(
            default="30",
            metavar="SECONDS",
            help="terminationGracePeriodSeconds of both pods: from deletion (preStop included) to "
            "SIGKILL; raise it if the program saves state on SIGTERM (default 30, Kubernetes' own)",
        ),
        "--prestop-sleep": dict(
            metavar="SECONDS",
            help="Deployment: a preStop `sleep` that keeps the server answering while its endpoint "
            "is removed, before SIGTERM; 0 = no hook (default 5)",
        ),
        "--deadline": dict(
            metavar="DURATION",
            help="Job: Kubernetes ends the training run DURATION after it starts, whatever its "
            "state (SIGTERM, then --grace-period; the Job fails, reason DeadlineExceeded): "
            "activeDeadlineSeconds on each Job; with --jobset on each replicatedJob's Job, and a "
            "failurePolicy rule that fails the JobSet (a gang restart starts the clock again); "
            "with --trainer on the TrainJob (Trainer v2.2+). Whole seconds (3600, 3600s), "
            f"minutes (90m), hours (12h) or days (2d), 1s to {k8s_limits.MAX_DEADLINE_S // 86400}d "
            "(default: none)",
        ),
    },
    "Prometheus Operator": {
        "--pod-monitor": dict(
            action="store_true",
            help="also render podmonitor.yaml (monitoring.coreos.com/v1 PodMonitor) scraping the "
            "pods' metrics port; the prometheus.io/* annotations are then left out (one scrape)",
        ),
        "--pod-monitor-label": dict(
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="label of the PodMonitor, for a Prometheus' podMonitorSelector, e.g. "
            "release=kube-prometheus-stack (repeatable)",
        ),
    },
    "pod resources and identity": {
        "--cpu": dict(default="1", help="CPU request (default 1)"),
        "--memory": dict(
            default="8Gi",
            help="memory request and limit (default 8Gi); /dev/shm (--shm-size) is a part of it",
        ),
        "--shm-size": dict(
            metavar="SIZE",
            help="/dev/shm of every GPU pod, for tf.data's worker processes and NCCL between "
            "GPUs (the container runtime gives 64 MiB): a Memory emptyDir of this sizeLimit, a "
            "Kubernetes quantity above 64Mi (1Gi, 512Mi, 2G; a bare number is bytes), or none "
            "for no such volume (default 1Gi). What is written there counts against the "
            "container's memory limit, so it must be smaller than --memory, which it shares "
            "with the program. Parameter servers without a GPU get none",
        ),
        "--uid": dict(
            metavar="UID",
            help="runAsUser, and runAsGroup/fsGroup unless --gid (default: the image's user)",
        ),
        "--gid": dict(
            metavar="GID",
            help="runAsGroup/fsGroup (default: --uid if given, else the image's user's group)",
        ),
    },
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    # the parser (cli/__init__.py) sets DESCRIPTION, the exit codes are the epilog; examples first.
    parser.epilog = EPILOG + "\n" + (parser.epilog or "")
    for title, flags in ARGUMENTS.items():
        group = parser.add_argument_group(title)
        for flag, keywords in flags.items():
            group.add_argument(flag, **keywords)


def run(args: argparse.Namespace) -> int:
    outputs = k8s_manifests.manifests(k8s_manifests.Flags.from_namespace(args))
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
