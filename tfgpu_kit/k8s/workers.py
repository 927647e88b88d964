"""`build.py k8s --workers N`: the flags of a multi-worker training Job checked, the group they
describe (`Workers`, its roles), and the variables each worker gets (tfgpu.contract.tf_config builds
TF_CONFIG from them in the pod).

The host names are Kubernetes' own: an Indexed Job's pod `<job>-<index>` under the headless
Service named by the pod's `subdomain` resolves as `<job>-<index>.<service>` (kubernetes.io,
"Job with Pod-to-Pod Communication"); a JobSet's pod as
`<jobset>-<replicatedJob>-<jobIndex>-<podIndex>.<subdomain>`, the subdomain defaulting to the
JobSet's name (kubernetes-sigs/jobset 08dfbdfd682714a9ab929633eca8dc95315187e7,
pkg/util/placement/placement.go GenJobName and pkg/controllers/jobset_controller.go GetSubdomain).

With --ps M (parameter-server training) the same rule names three groups: the chief,
the workers and the parameter servers, each a replicatedJob of one JobSet or an Indexed Job of
its own under one headless Service; each pod gets the contract's TF_GPU_PS, TF_GPU_PS_HOSTS,
TF_GPU_CHIEF_HOST and TF_GPU_ROLE besides the workers' variables.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from tfgpu.contract import tf_config
from tfgpu.contract.errors import ConfigError, shown
from tfgpu.contract.settings import parse_bool, parse_environment

from tfgpu_kit.k8s.flags import Flags
from tfgpu_kit.shared import name_rules
from tfgpu_kit.shared.errors import UsageError
from tfgpu_kit.shared.flag_values import whole_number

JOBSET_JOB = "worker"  # the JobSet's one replicatedJob
# Parameter-server training (--ps): the replicatedJobs of the JobSet, and the suffixes of the
# three Indexed Jobs, in the order TF_CONFIG lists them; short, as Trainer v2.4.0 caps a
# runtime's replicatedJob names at 20 characters
CHIEF, WORKER, PS = "chief", "worker", "ps"
ROLES = (CHIEF, WORKER, PS)
# Kubeflow Trainer v2 (--trainer): the replicatedJob and container its TrainJob's `trainer`
# settings (and numNodes) apply to, marked by the ancestor label (kubeflow/trainer
# 8c0f5059bd51ec3ba6d6a6a7b2e1471de7bc13b3, pkg/constants/constants.go Node, LabelTrainJobAncestor)
TRAINER_NODE = "node"
TRAINER_ANCESTOR = ("trainer.kubeflow.org/trainjob-ancestor-step", "trainer")
MAX_WORKERS = tf_config.MAX_WORKERS  # the runtime's bound: one for TF_GPU_WORKERS and --workers
# --trainer: the pod's JobSet name (its TrainJob's), from the downward API; Kubernetes expands
# $(JOBSET_NAME) in the later variables' values (kubernetes.io, "Define Dependent Environment
# Variables"), so one runtime serves TrainJobs of any name
JOBSET_NAME = "JOBSET_NAME"
SERVER_ARGS = ["tfgpu", "server"]  # what workers and parameter servers run: the role's gRPC server
# What --workers sets in each pod; given again with --env, the pod would hold two values.
# TF_GPU_PS_GPUS is the user's (--env TF_GPU_PS_GPUS=true gives the parameter servers a GPU).
OWNED = (
    *(name for name in tf_config.VARIABLES if name != tf_config.PS_GPUS),
    JOBSET_NAME,
    tf_config.TF_CONFIG,
    tf_config.LEGACY_KERAS,
)


@dataclass(frozen=True)
class Workers:
    """Multi-worker training: an Indexed Job of `count` pods and its headless Service,
    or a JobSet; TF_CONFIG is built in each pod by the runtime (tfgpu.contract.tf_config)."""

    count: int
    port: int
    jobset: bool = False
    max_restarts: int = 3  # gang restarts of the whole group before the workload fails
    checkpoint_claim: str | None = None  # a claim mounted at flags.CHECKPOINT_PATH
    env: list[tuple[str, str]] = field(default_factory=list)  # the workers' own variables
    ps: int = 0  # parameter servers (--ps): 0 = MultiWorkerMirroredStrategy, no chief or ps
    role: str = WORKER  # the group of a parameter-server cluster this Job runs (ROLES)
    trainer: bool = False  # a Kubeflow Trainer v2 runtime: host names from the pod's JobSet name

    @property
    def backoff_limit(self) -> int:
        """Indexed Job: every gang restart fails all `count` pods (the collective fails on each
        survivor too), so `max_restarts` restarts cost `count * max_restarts` failures."""
        return self.count * self.max_restarts


def refuse_owned(flags: Flags) -> None:
    """--env of a variable --workers sets, refused before anything parses the environment (the
    runtime's parser would otherwise judge the half-given set: "TF_GPU_WORKER_HOSTS is not
    set"). JOB_COMPLETION_INDEX too: Kubernetes sets it per pod of the Indexed Job, unless the
    container's env names it; then every worker would be the same worker."""
    given = dict(item.partition("=")[::2] for item in flags.env)
    count = flags.workers
    for name in OWNED:
        if name in given:
            raise UsageError(
                f"--env {name}={shown(given[name])} and --workers {shlex.quote(str(count))}: "
                f"--workers sets {name} in each worker; accepted: one of them; example: "
                f"--workers {shlex.quote(str(count))}"
            )
    if tf_config.JOB_INDEX in given:
        raise UsageError(
            f"--env {tf_config.JOB_INDEX}={shown(given[tf_config.JOB_INDEX])} and --workers "
            f"{shlex.quote(str(count))}: Kubernetes sets {tf_config.JOB_INDEX} in each pod of the "
            "Indexed Job (0, 1, …), and a value in the container's env would replace it, so "
            "every worker would have one index; accepted: leaving it out; example: --workers "
            f"{shlex.quote(str(count))}"
        )


def workers(flags: Flags, env: list[tuple[str, str]]) -> Workers:
    for flag, value in (("--parallelism", flags.parallelism), ("--completions", flags.completions)):
        if value is not None:
            raise UsageError(
                f"{flag} {value!r} and --workers {flags.workers!r}: --workers N sets both to N "
                "(every worker runs at once, each once); accepted: one of them; example: "
                f"--workers {flags.workers}"
            )
    assert flags.workers is not None
    count = whole_number("--workers", flags.workers, "2", high=MAX_WORKERS)
    port = whole_number("--worker-port", flags.value("worker_port"), "2222", high=65535)
    restarts = whole_number("--max-restarts", flags.value("max_restarts"), "3", low=0, high=100)
    claim = flags.checkpoint_claim
    if claim is not None:
        name_rules.dns_label("--checkpoint-claim", claim, "train-checkpoints")
    given = dict(env)
    for name in OWNED:
        if name in given:
            raise UsageError(
                f"--env {name}={given[name]!r} and --workers {count}: --workers sets {name} in "
                f"each worker; accepted: one of them; example: --workers {count}"
            )
    if str(port) == given.get("TF_GPU_METRICS_PORT"):
        raise UsageError(
            f"--worker-port {port} is also the metrics port: accepted: two different ports; "
            "example: --worker-port 2222 --metrics-port 9401"
        )
    # TF_GPU_WORKER_HOSTS: each worker's DNS name, PLACEHOLDER for the pod's index (a JobSet's
    # pods: its replicatedJob with one replica, job index 0)
    job = f"{flags.name}-train"
    servers = 0 if flags.ps is None else whole_number("--ps", flags.ps, "1", high=MAX_WORKERS)
    if flags.trainer and flags.jobset:
        raise UsageError(
            "--jobset and --trainer: a Trainer v2 runtime is a JobSet already (Trainer creates "
            "it for each TrainJob); accepted: one of them; example: --workers 2 --trainer"
        )
    group = TRAINER_NODE if flags.trainer and not servers else JOBSET_JOB
    pattern = _hosts(flags, job, group, count, separate=servers > 0)
    own = [
        (tf_config.WORKERS, str(count)),
        (tf_config.HOSTS, pattern),
        (tf_config.PORT, str(port)),
        # Keras 2 (tf-keras): Keras 3's model.fit fails under MultiWorkerMirroredStrategy, and
        # Keras 3 has no ParameterServerStrategy support at all
        (tf_config.LEGACY_KERAS, "1"),
    ]
    if servers:
        chief = _hosts(flags, job, CHIEF, 1, separate=True).replace(tf_config.PLACEHOLDER, "0")
        own += [
            (tf_config.PS, str(servers)),
            (tf_config.PS_HOSTS, _hosts(flags, job, PS, servers, separate=True)),
            (tf_config.CHIEF_HOST, chief),
        ]
    # each group's first and last pod's environment, exactly as rendered for its role (a
    # parameter server without a GPU gets no GPU setting: for_role), checked as the
    # runtime will check it in the pod: a value it refuses is refused here, naming the role
    last = {CHIEF: 0, JOBSET_JOB: count - 1, PS: servers - 1} if servers else {None: count - 1}
    for role, index in last.items():
        gpu = role != PS or ps_gpus(env)
        for pod_index in sorted({0, index}):
            pod = {**dict(for_role(env, gpu=gpu)), **dict(own), tf_config.JOB_INDEX: str(pod_index)}
            if role is not None:
                pod[tf_config.ROLE] = role
            try:
                parse_environment(pod)
            except ConfigError as error:  # the kit's own values: only a contradiction with --env
                who = f"the {role} pods" if role is not None else "the workers"
                raise UsageError(
                    f"{who} would exit 78 at start: {error} (with --workers "
                    f"{shlex.quote(str(count))}{f' --ps {servers}' if servers else ''})"
                ) from None
    if flags.trainer:  # checked with this TrainJob's name; rendered for any TrainJob's
        own = [(name, value.replace(job, f"$({JOBSET_NAME})")) for name, value in own]
    return Workers(
        count,
        port,
        jobset=flags.jobset or flags.trainer,  # Trainer v2 runs a JobSet
        max_restarts=restarts,
        checkpoint_claim=claim,
        env=own,
        ps=servers,
        trainer=flags.trainer,
    )


# What only a pod with a GPU may carry: the caps, the recovery rule (it needs a cap),
# TF_GPU_REQUIRED (a pod without a GPU would refuse to start), the allocator and growth, the
# kernel cache. A pod of a role without a GPU (a parameter server) gets none of them.
GPU_ONLY = (
    "TF_GPU_MEM_LIMIT",
    "TF_GPU_VIRTUAL_DEVICES",
    "TF_GPU_MEMORY_GROWTH",
    "TF_FORCE_GPU_ALLOW_GROWTH",
    "TF_GPU_ALLOCATOR",
    "TF_GPU_REQUIRED",
    "TF_GPU_RECOVER_AT",
    "TF_GPU_RECOVER_AFTER",
    "TF_GPU_RECOVER_ACTION",
    "CUDA_CACHE_PATH",
    "CUDA_CACHE_MAXSIZE",
    "CUDA_CACHE_DISABLE",
)


def for_role(env: list[tuple[str, str]], *, gpu: bool) -> list[tuple[str, str]]:
    """The pod environment of a role: all of it with a GPU, without GPU_ONLY's without one."""
    return env if gpu else [(name, value) for name, value in env if name not in GPU_ONLY]


def ps_gpus(env: list[tuple[str, str]]) -> bool:
    """Whether the parameter servers get a GPU: `--env TF_GPU_PS_GPUS=true` (docs/scale.md)."""
    value = dict(env).get(tf_config.PS_GPUS)
    return value is not None and parse_bool(tf_config.PS_GPUS, value)


def refuse_ps_gpus_without_ps(flags: Flags, env: list[tuple[str, str]]) -> None:
    """--env TF_GPU_PS_GPUS without --ps: there is no parameter server to give a GPU."""
    value = dict(env).get(tf_config.PS_GPUS)
    if value is not None and flags.ps is None:
        raise UsageError(
            f"--env {tf_config.PS_GPUS}={shown(value)} gives the parameter servers a GPU, and "
            "there are none without --ps: accepted: it together with --workers N --ps M; "
            f"example: --workers 2 --ps 1 --env {tf_config.PS_GPUS}=true"
        )


def _hosts(flags: Flags, job: str, group: str, count: int, *, separate: bool) -> str:
    """The host-name pattern of one group's pods under the headless Service `job`: a JobSet's
    replicatedJob `group`, or (parameter servers: `separate`) the Indexed Job `<job>-<group>`,
    or else the one Indexed Job `job` itself."""
    pod = job  # MultiWorkerMirroredStrategy's one Indexed Job
    if flags.jobset or flags.trainer:
        pod = f"{job}-{group}-0"
    elif separate:
        pod = f"{job}-{group}"
    longest = f"{pod}-{count - 1}"
    if len(longest) > 63:  # a pod's hostname is one DNS label
        raise UsageError(
            f"--name {flags.name!r} is too long for {count} pod(s) of the group {group!r}: the "
            f"last one's host name {longest!r} is over 63 characters; example: --name train"
        )
    return f"{pod}-{tf_config.PLACEHOLDER}.{job}"
