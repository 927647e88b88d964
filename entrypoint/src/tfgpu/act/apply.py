"""Apply the plan to a freshly imported TensorFlow, through `tf.config`.

Called by the hook right after `tensorflow/__init__` ran, and by `tfgpu check`'s child.
Takes the module as an argument so the tests can pass a recording stand-in that enforces
TensorFlow's rules. Order matters and follows those rules:
- `tf.config` is touched only when something needs the devices (a cap, logical GPUs, a CPU
  split, TF_GPU_REQUIRED). Listing physical devices loads CUDA and runs cuInit, and a process
  that has run cuInit cannot use CUDA in children it forks: a pre-fork server or a
  `multiprocessing` fork pool that imports TensorFlow first would break, which plain
  TensorFlow does not do. The images turn growth on by default, so this concerns every
  process in them;
- growth is set only through the native TF_FORCE_GPU_ALLOW_GROWTH: TensorFlow reads it when it
  creates each GPU's allocator (so setting it now is in time), it works inside logical
  devices too ("grow up to the cap", which `set_memory_growth` refuses), and it is one value
  for every GPU (TensorFlow refuses growth that differs between GPUs). `set_memory_growth`
  would add nothing but the cuInit above.
"""

from __future__ import annotations

import os
import sys

from tfgpu.contract.errors import GpuUnavailableError
from tfgpu.contract.settings import parse_environment
from tfgpu.machine.shm import warn_once
from tfgpu.plan.device_plan import make_plan

TYPE_CHECKING = False  # not `from typing import …`: importing typing costs ms at start-up
if TYPE_CHECKING:
    from typing import Any, Callable, List, Mapping, MutableMapping, Optional, TextIO

    from tfgpu.contract.settings import Settings
    from tfgpu.machine.nvml import NvmlReport
    from tfgpu.plan.device_plan import Plan


def _gpu_totals(
    settings: Settings,
    count: int,
    environ: Mapping[str, str],
    query: Optional[Callable[[], NvmlReport]],
) -> tuple[List[Optional[float]], List[str]]:
    """Sizes of the GPUs TensorFlow sees, from NVML when it can tell (needed for % and checks)."""
    unknown: List[Optional[float]] = [None] * count
    if count == 0 or not settings.asks_for_gpu_config:
        return unknown, []
    from tfgpu.machine import gpu_report, nvml  # only for caps or splits: ~4.9 ms (-X importtime)

    report = query() if query is not None else gpu_report.read(environ)
    gpus, _ = nvml.visible_gpus(report, settings.visible_devices, environ.get("CUDA_DEVICE_ORDER"))
    if len(gpus) != count:  # NVML and CUDA disagree (MIG, odd ordering): do not guess
        return unknown, []
    return [g.total_mib if g else None for g in gpus], [g.name if g else "" for g in gpus]


def configure_tensorflow(
    tf: Any,
    environ: Optional[Mapping[str, str]] = None,
    *,
    env_out: Optional[MutableMapping[str, str]] = None,
    nvml_query: Optional[Callable[[], NvmlReport]] = None,
    stderr: Optional[TextIO] = None,
    defer_keras: Optional[Callable[[Callable[[], None]], None]] = None,
) -> Optional[Plan]:
    """Validate the environment and apply it to `tf`. Returns the plan (None when disabled)."""
    environ = os.environ if environ is None else environ
    env_out = os.environ if env_out is None else env_out
    stderr = sys.stderr if stderr is None else stderr
    settings = parse_environment(environ)
    if not settings.enabled:
        return None
    if settings.hide_gpus:
        # a parameter server started without `tfgpu run` (a Kubernetes `command:`): hidden here,
        # as the door hides them, before TensorFlow's first device listing runs cuInit (CUDA
        # reads CUDA_VISIBLE_DEVICES then), so what `tfgpu show` says holds
        env_out["CUDA_VISIBLE_DEVICES"] = ""
    # Only what needs devices lists them (see the module doc: listing runs cuInit).
    cfg = tf.config
    needs_gpus = settings.asks_for_gpu_config or settings.required
    gpus = list(cfg.list_physical_devices("GPU")) if needs_gpus else []
    if settings.required:
        if not tf.sysconfig.get_build_info().get("is_cuda_build"):
            raise GpuUnavailableError("this TensorFlow is a CPU-only build (tensorflow-cpu)")
        if not gpus:
            raise GpuUnavailableError(
                "TensorFlow sees no GPU (no driver, no --gpus, or CUDA_VISIBLE_DEVICES hides them)"
            )
        _refuse_unusable(tf, gpus, environ)
    totals, names = _gpu_totals(settings, len(gpus), environ, nvml_query)
    plan = make_plan(settings, totals, names)

    env_out.update(plan.env)  # growth: TF_FORCE_GPU_ALLOW_GROWTH, for every GPU alike
    _set_tf_config(settings, environ, env_out, stderr)
    LogicalDevice = cfg.LogicalDeviceConfiguration
    for gpu, limits in zip(gpus, plan.gpu_limits):
        if limits is not None:
            cfg.set_logical_device_configuration(
                gpu, [LogicalDevice(memory_limit=m) for m in limits]
            )
    if plan.cpu_devices is not None:
        cpus = cfg.list_physical_devices("CPU")
        cfg.set_logical_device_configuration(
            cpus[0], [LogicalDevice() for _ in range(plan.cpu_devices)]
        )
    if plan.mixed_precision is not None:
        policy = plan.mixed_precision

        def set_policy() -> None:
            tf.keras.mixed_precision.set_global_policy(policy)

        # Under `import keras`, keras is half initialised here and tf.keras cannot load yet.
        keras = sys.modules.get("keras")
        if defer_keras is not None and keras is not None and not hasattr(keras, "__version__"):
            defer_keras(set_policy)
        else:
            set_policy()

    # `tfgpu run` already showed these at container start; do not repeat them in every process.
    if not environ.get("TFGPU_RUN_PREFLIGHT"):
        for warning in plan.warnings:
            stderr.write(f"tfgpu: warning: {warning}\n")
    warn_once(environ, env_out, stderr)  # once per process tree: env_out's mark is inherited
    if settings.recovery is not None:
        from tfgpu.act import recovery  # only with the rule on: ~15 ms (-X importtime)

        recovery.start(settings.recovery)
    if settings.metrics_port is not None:
        _start_metrics(settings)
    # started by `tfgpu run` with an exit grace: this process, not one it started (FD:PID)
    if environ.get("TFGPU_EXIT_PIPE", "").rpartition(":")[2] == str(os.getpid()):
        from tfgpu.act import exit_guard  # only then: ~0.8 ms (-X importtime)

        exit_guard.install(environ)
    return plan


def _refuse_unusable(tf: Any, gpus: List[Any], environ: Mapping[str, str]) -> None:
    """TF_GPU_REQUIRED=true: GpuUnavailableError for a GPU that this TensorFlow's kernels cannot
    run on, or are known to fail on (tfgpu.plan.gpu_verdicts), its compute capability as TensorFlow
    reads it (no NVML needed: a Kubernetes `command:` without `tfgpu run` gets the same answer)."""
    # ~0.5 ms (-X importtime), with TF_GPU_REQUIRED=true only; `import tensorflow` takes seconds
    from tfgpu.machine.nvml import Gpu
    from tfgpu.plan import gpu_verdicts

    details = getattr(tf.config.experimental, "get_device_details", None)
    if details is None:
        return
    seen = []
    for index, device in enumerate(gpus):
        found = details(device) or {}
        cc = found.get("compute_capability")
        if isinstance(cc, tuple) and len(cc) == 2:
            name = str(found.get("device_name") or f"GPU {index}")
            seen.append(Gpu(index, name, "", 0.0, 0.0, f"{cc[0]}.{cc[1]}"))
    build = tf.sysconfig.get_build_info()
    verdicts, _ = gpu_verdicts.judge_gpus(seen, environ, lambda: dict(build))
    reason = gpu_verdicts.unusable(verdicts, environ)
    if reason is not None:
        raise GpuUnavailableError(reason, gpu_verdicts.UNUSABLE_FIX)


def _set_tf_config(
    settings: Settings,
    environ: Mapping[str, str],
    env_out: MutableMapping[str, str],
    stderr: TextIO,
) -> None:
    """The TF_CONFIG the kit built (tfgpu.contract.tf_config), in time: MultiWorkerMirroredStrategy
    reads it when it is created, after `import tensorflow`. A user's own TF_CONFIG is left as it
    is."""
    cfg = settings.tf_config
    if cfg is None:
        return
    if cfg.built:
        env_out["TF_CONFIG"] = cfg.value
    from tfgpu.act import peer_lost  # only with a cluster: ~0.5 ms (-X importtime)

    peer_lost.install(
        "ps" in cfg.cluster
    )  # a lost peer gets one line saying so, after TensorFlow's traceback
    # `tfgpu run` already said it at container start
    if not environ.get("TFGPU_RUN_PREFLIGHT") and not settings.quiet:
        stderr.write(f"tfgpu: cluster: {cfg.explain()}\n")


def _start_metrics(settings: Settings) -> None:
    from tfgpu.act import metrics  # only with a metrics port: ~75 ms (-X importtime)

    metrics.start_from_environment(settings)
