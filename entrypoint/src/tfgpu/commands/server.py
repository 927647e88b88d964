"""`tfgpu server`: the TensorFlow gRPC server of a worker or parameter server in a
parameter-server cluster (TF_GPU_PS, tfgpu.contract.tf_config), started and joined. The chief runs
the user's training program (ParameterServerStrategy + ClusterCoordinator), which sends these
servers its functions and variables; a worker or parameter server runs no program of its own.

This is TensorFlow's own recipe (tensorflow/docs site/en/tutorials/distribute/
parameter_server_training.ipynb, "Cluster setup"): `tf.distribute.Server(cluster_spec,
job_name=..., task_index=..., protocol="grpc", start=True)`, `GRPC_FAIL_FAST=use_caller`, then
`server.join()`. TensorFlow is imported here, so the hook applies the GPU caps first, as for any
program; a parameter server sees no GPU unless TF_GPU_PS_GPUS=true (tfgpu.contract.settings).

TensorFlow's gRPC server listens on every interface, whatever host the cluster names
(tensorflow/tensorflow tensorflow/core/distributed_runtime/rpc/grpc_server_lib.cc,
GrpcServer::Init: a listening port of "0.0.0.0:PORT"; TensorFlow 2.21 binds [::], every IPv6 and
IPv4 address, as /proc/net/tcp6 shows), and its protocol has no authentication: whoever reaches
the port can run graphs in this process, and graphs read and write files (tf.io). So the server
starts only inside a Kubernetes pod (KUBERNETES_SERVICE_HOST, which the kubelet sets in every pod;
`./kit k8s` renders a NetworkPolicy that admits the port only from the job's own pods), or where
TF_GPU_SERVER_OPEN=true says the network is the job's alone; and it says where it really listens,
read from the kernel."""

import os
import sys

from tfgpu import is_disabled
from tfgpu.contract import tf_config
from tfgpu.contract.errors import ConfigError, printable
from tfgpu.contract.settings import EXIT_GRACE, parse_bool, parse_environment, parse_exit_grace

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import List, Mapping, MutableMapping, Sequence

    from tfgpu.contract.tf_config import TfConfig

SERVED_ROLES = ("worker", "ps")
# a TF_CONFIG whose task `tfgpu server` serves: a value of TF_CONFIG, as every example is
SERVED_EXAMPLE = (
    '{"cluster": {"chief": ["c:2222"], "worker": ["w0:2222"], "ps": ["p0:2222"]}, '
    '"task": {"type": "worker", "index": 0}}'
)
NO_CLUSTER = (
    "a parameter-server cluster: TF_GPU_PS, TF_GPU_WORKERS, TF_GPU_WORKER_HOSTS, TF_GPU_PS_HOSTS, "
    "TF_GPU_CHIEF_HOST and TF_GPU_ROLE=worker or ps (docs/runtime.md), or your own TF_CONFIG "
    "whose task is a worker or ps"
)


def cluster_to_serve(environ: "MutableMapping[str, str]") -> "TfConfig":
    """This pod's task, or ConfigError (exit 78) when there is none a server is for."""
    if is_disabled(environ):
        # the kit builds nothing; a TF_CONFIG of the user's own is still served
        user = environ.get("TF_CONFIG", "").strip()
        if not user:
            raise ConfigError(
                "TF_GPU_CONFIG",
                environ.get("TF_GPU_CONFIG", ""),
                "on, for the kit to build TF_CONFIG from TF_GPU_PS… (or set TF_CONFIG yourself)",
                "on",
                why="TF_GPU_CONFIG=off and no TF_CONFIG: there is no cluster to serve",
            )
        cfg = tf_config.parse_user_tf_config(user)
    else:
        settings = parse_environment(environ)
        if settings.tf_config is None:
            raise ConfigError(
                "TF_GPU_PS",
                "",
                NO_CLUSTER,
                "1",
                why="no cluster: neither TF_CONFIG nor TF_GPU_WORKERS is set",
            )
        cfg = settings.tf_config
        if settings.hide_gpus and "CUDA_VISIBLE_DEVICES" not in environ:
            environ["CUDA_VISIBLE_DEVICES"] = ""  # run directly, not under `tfgpu run`
    if "ps" not in cfg.cluster:
        why = (
            "the cluster has no ps role: with MultiWorkerMirroredStrategy every worker runs "
            "the training program itself, not `tfgpu server`"
        )
        if cfg.built:
            raise ConfigError("TF_GPU_PS", environ.get("TF_GPU_PS", ""), NO_CLUSTER, "1", why=why)
        raise ConfigError("TF_CONFIG", cfg.value, NO_CLUSTER, SERVED_EXAMPLE, why=why)
    if cfg.task_type not in SERVED_ROLES:
        why = (
            f"this task is the {printable(cfg.task_type)}, which runs your training program "
            "(ParameterServerStrategy + ClusterCoordinator), not a server"
        )
        accepted = "worker or ps: `tfgpu server` is the server of a worker or parameter server"
        if cfg.built:
            raise ConfigError("TF_GPU_ROLE", cfg.task_type, accepted, "worker", why=why)
        raise ConfigError("TF_CONFIG", cfg.value, accepted, SERVED_EXAMPLE, why=why)
    return cfg


IN_KUBERNETES = "KUBERNETES_SERVICE_HOST"  # set by the kubelet in every pod
OPEN = "TF_GPU_SERVER_OPEN"
UNAUTHENTICATED = (
    "TensorFlow's gRPC server listens on every interface, whatever host the cluster "
    "names, and its protocol has no authentication: whoever reaches the port can run graphs in "
    "this process and read and write this container's files (tf.io)"
)


def refuse_outside_kubernetes(environ: "Mapping[str, str]", port: int) -> None:
    """ConfigError (exit 78) outside a Kubernetes pod unless TF_GPU_SERVER_OPEN=true."""
    if environ.get(IN_KUBERNETES, "").strip():
        return
    value = environ.get(OPEN)
    if value is not None and parse_bool(OPEN, value):
        return
    raise ConfigError(
        OPEN,
        value or "",
        "true, once this port is reachable only by the job's own containers (a network of "
        "their own, the port never published with -p or compose `ports:`); inside Kubernetes "
        "it is not needed (./kit k8s renders a NetworkPolicy for the port)",
        "true",
        why=f"not a Kubernetes pod (no {IN_KUBERNETES}): {UNAUTHENTICATED}, so port {port} "
        "does not open here unless told to",
    )


def listeners(
    port: int, tables: "Sequence[str]" = ("/proc/net/tcp", "/proc/net/tcp6")
) -> "List[str]":
    """The addresses a socket of this network namespace listens on at `port`, read from the
    kernel's tables (proc(5): local address, state 0A = LISTEN), e.g. ['0.0.0.0:2222']."""
    found: List[str] = []
    for table in tables:
        try:
            with open(table, encoding="ascii", errors="replace") as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if len(fields) < 4 or fields[3] != "0A":
                continue
            address, _, hex_port = fields[1].partition(":")
            if int(hex_port, 16) != port:
                continue
            if len(address) == 8:  # IPv4, little-endian
                shown = ".".join(str(int(address[i : i + 2], 16)) for i in (6, 4, 2, 0))
            else:
                shown = "[::]" if set(address) == {"0"} else f"[{address}]"
            found.append(f"{shown}:{port}")
    return sorted(set(found))


def serve() -> int:
    """Start this task's server and join it: returns only if TensorFlow stops it."""
    cfg = cluster_to_serve(os.environ)
    refuse_outside_kubernetes(os.environ, cfg.port)
    # a call from the chief that meets a lost peer fails at once rather than waiting (the
    # tutorial's setting; the coordinator then reschedules or reports)
    os.environ.setdefault("GRPC_FAIL_FAST", "use_caller")
    sys.stderr.write(f"tfgpu: server: {cfg.explain()}\n")
    sys.stderr.flush()
    import tensorflow as tf  # the hook applies the caps first

    server = tf.distribute.Server(
        tf.train.ClusterSpec(cfg.cluster),
        job_name=cfg.task_type,
        task_index=cfg.index,
        protocol="grpc",
        start=True,
    )
    bound = listeners(cfg.port) or [f"every interface, port {cfg.port} (not read from the kernel)"]
    sys.stderr.write(
        f"tfgpu: server: {cfg.task_type} {cfg.index} listening on {', '.join(bound)}, reached "
        f"by its peers as {cfg.address}; {UNAUTHENTICATED}: keep the port to the job's own "
        "pods (docs/security.md)\n"
    )
    sys.stderr.flush()
    _follow_chief(cfg)
    server.join()
    return 0


def _follow_chief(cfg: "TfConfig") -> None:
    """A daemon thread that ends this server once the chief has completed
    (tfgpu.commands.chief_done); none with TF_GPU_EXIT_GRACE=off (the run's end unbounded, as the
    user asked)."""
    chiefs = cfg.cluster.get("chief", [])
    grace = os.environ.get(EXIT_GRACE, "").strip()
    if not chiefs or (grace and parse_exit_grace(grace) is None):
        return
    import threading

    from tfgpu.commands import chief_done  # only with a chief to follow: ~0.9 ms (-X importtime)

    host, _, port = chiefs[0].rpartition(":")
    host = host.strip("[]")  # an IPv6 literal
    threading.Thread(
        target=chief_done.follow_then_exit, args=(host, int(port)), name="tfgpu-chief", daemon=True
    ).start()
    sys.stderr.write(
        f"tfgpu: server: it ends when the chief {cfg.cluster['chief'][0]} has completed "
        f"(or has been unreachable for {chief_done.GONE_S:g}s)\n"
    )
