"""The shape of `tfgpu check --json` (docs/CONTRACTS.md), for the type checker: written by
gpu_check (with _gpu_check_child's part), read by the build side's `build.py verify`.

Types only. The runtime imports this module under `if TYPE_CHECKING:` alone, so `tfgpu run` never
pays for `typing` at start-up; the build side imports it for real. Python 3.8 syntax (the
runtime's floor): `Optional`/`List`/`Dict`, no `X | Y`, no `NotRequired`.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, TypedDict


class TensorFlowInfo(TypedDict):
    """TensorFlow as the child imported it (`tf.sysconfig.get_build_info()`)."""

    importable: bool
    version: Optional[str]
    is_cuda_build: bool
    cuda_version: Optional[str]
    cudnn_version: Optional[str]
    error: Optional[str]  # why it cannot be imported


class AppliedInfo(TypedDict, total=False):
    """The settings as TensorFlow took them: its logical devices and their memory."""

    ok: bool
    logical_gpus: List[str]
    logical_cpus: List[str]
    memory: Dict[str, Dict[str, int]]  # per logical GPU: tf.config.experimental.get_memory_info
    error: Optional[str]


class ChildReport(TypedDict, total=False):
    """What `_gpu_check_child` prints after gpu_check.MARK, or `crash` when it printed nothing."""

    tensorflow: TensorFlowInfo
    build_info: Dict[str, Any]
    hook_active: bool
    gpu_unavailable: Optional[str]  # TF_GPU_REQUIRED=true and TensorFlow found no usable GPU
    applied: AppliedInfo
    crash: str  # the child timed out or died (run_child)


class LibraryInfo(TypedDict):
    """One CUDA library TensorFlow's loader needs (libs.try_load)."""

    name: str
    soname: str
    loaded: bool
    path: Optional[str]
    version: Optional[str]
    error: Optional[str]  # dlerror, or the version TensorFlow's rule refuses


class _Driver(TypedDict):
    found: bool
    version: Optional[str]
    cuda_version: Optional[str]
    error: Optional[str]


class DriverInfo(_Driver, total=False):
    """NvmlReport.driver_json(); on a Jetson (tegra.py) with a `note` on where it comes from."""

    note: str


class GpuInfo(TypedDict):
    index: int
    name: str
    uuid: str
    total_mib: float
    free_mib: float
    compute_capability: Optional[str]


class HookInfo(TypedDict):
    installed: bool
    pth: Optional[str]
    active: bool


class ProblemInfo(TypedDict):
    severity: str  # "error" or "warning"
    what: str
    fix: Optional[str]


class CheckReport(TypedDict, total=False):
    """`tfgpu check --json`. Not total: `build.py verify` also reads images whose runtime is
    older (or absent, the checkout's mounted), so a reader must not count on every key."""

    ok: bool
    tfgpu_version: str
    python: str
    tensorflow: TensorFlowInfo
    libraries: List[LibraryInfo]
    driver: DriverInfo
    gpus: List[GpuInfo]
    hook: HookInfo
    settings: Dict[str, Dict[str, str]]  # variable: {"value", "source"[, "note"]}
    plan: Optional[Dict[str, Any]]  # device_plan.Plan.as_json(); None when the settings are bad
    applied: AppliedInfo
    problems: List[ProblemInfo]
