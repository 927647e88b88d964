"""Docker's (and containerd's, in a Kubernetes pod) 64 MB /dev/shm: too small for tf.data workers
or NCCL, and worth one warning, with the fix for where it runs.

Said where it helps, once: by the hook the first time TensorFlow is imported in a process
tree (`tfgpu run`'s command, a Kubernetes `command:`; the mark below keeps the workers it
starts quiet), and by `tfgpu check`. Not by `tfgpu run` itself, which cannot tell whether
its command will ever use TensorFlow (`tfgpu show`, a shell, `nvidia-smi`).
"""

from __future__ import annotations

import os

from tfgpu.contract.problems import WARNING, Problem

TYPE_CHECKING = False  # not `from typing import …`: importing typing costs ms at start-up
if TYPE_CHECKING:
    from typing import Mapping, MutableMapping, Optional, TextIO

DOCKER_DEFAULT_SHM = 64 * 1024 * 1024
# Set in the environment once warned, so that processes started afterwards stay quiet.
WARNED_MARK = "TFGPU_SHM_WARNED"


# the fix where it applies: a Kubernetes pod (the kubelet sets KUBERNETES_SERVICE_HOST in every
# one) mounts a volume; a container of Docker's (docker run, compose) gets a flag
POD_FIX = (
    "mount a memory-backed emptyDir at /dev/shm (volumes: [{name: dshm, emptyDir: {medium: "
    "Memory, sizeLimit: 1Gi}}], volumeMounts: [{name: dshm, mountPath: /dev/shm}]; ./kit k8s "
    "renders it in every GPU pod: --shm-size 1Gi); it counts against the pod's memory limit"
)
DOCKER_FIX = "docker run --shm-size=1g … (or --ipc=host); in compose: shm_size: 1gb"


def shm_problem(
    path: str = "/dev/shm", environ: Optional[Mapping[str, str]] = None
) -> Optional[Problem]:
    """A warning when `path` is exactly the default size of Docker's and containerd's (64 MB),
    with the fix for where this runs."""
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    if st.f_blocks * st.f_frsize != DOCKER_DEFAULT_SHM:
        return None
    environ = os.environ if environ is None else environ
    in_pod = bool(environ.get("KUBERNETES_SERVICE_HOST", "").strip())
    return Problem(
        WARNING,
        "The SHMEM allocation limit is set to the default of 64MB. This may be insufficient for "
        "TensorFlow (tf.data with multiprocessing, NCCL between GPUs).",
        POD_FIX if in_pod else DOCKER_FIX,
    )


def warn_once(
    environ: Mapping[str, str],
    env_out: MutableMapping[str, str],
    stderr: TextIO,
    path: str = "/dev/shm",
) -> bool:
    """Write the warning unless this process tree has already (the mark in `environ`); once
    written, mark `env_out`, which the process's children inherit. Returns whether it wrote."""
    if environ.get(WARNED_MARK):
        return False
    problem = shm_problem(path, environ)
    if problem is None:
        return False
    stderr.write(f"tfgpu: {problem}\n")
    env_out[WARNED_MARK] = "1"
    return True
