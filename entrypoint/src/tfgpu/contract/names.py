"""Every environment variable name the kit knows, and the check of the names a process gets.

A value is checked by its variable's parser; a name nobody reads is silence: `TF_GPU_MEM_LMIT=4GiB`
caps nothing and says nothing. So a name of the kit's prefixes (TF_GPU_*, TFGPU_*) that is not
listed here is a stranger, and so is a near miss of the TensorFlow and CUDA variables the kit
reads (`TF_USE_LEGACY_KERA`, `tf_force_gpu_allow_growth`). The door (`tfgpu run`, the hook) and
`tfgpu show` warn; `build.py k8s --env` and `build.py plan` refuse the ones that have a close
known name (a manifest is written once and run many times).

This tuple set is the one list of the kit's names: tests/runtime/test_names.py holds every
`TF_GPU_*`/`TFGPU_*` name of the repository (runtime, Dockerfiles, templates, tests) to it.

Start-up: `tfgpu run` scans the environment once (two prefixes, a set lookup per name); difflib,
which imports `re` (~5 ms), only when a stranger is found.
"""

# No `from __future__ import annotations` (it imports `__future__`: ~0.4 ms of `tfgpu run`).
from tfgpu.contract.errors import ConfigError, printable, shown

TYPE_CHECKING = False  # not `from typing import …`: importing typing costs ms at start-up
if TYPE_CHECKING:
    from typing import Iterable, List, Mapping, Optional

KIT_PREFIXES = ("TF_GPU_", "TFGPU_")

# The contract a user sets (docs/runtime.md), in the order `tfgpu show` lists it.
CONTRACT = (
    "TF_GPU_CONFIG",
    "TF_GPU_MEM_LIMIT",
    "TF_GPU_MEMORY_GROWTH",
    "TF_GPU_VIRTUAL_DEVICES",
    "TF_CPU_VIRTUAL_DEVICES",
    "TF_GPU_REQUIRED",
    "TF_MIXED_PRECISION",
    "TF_GPU_QUIET",
    "TF_GPU_METRICS_PORT",
    "TF_GPU_METRICS_ADDR",
    "TF_GPU_REQUIRE_HOOK",  # `tfgpu run` refuses a Python that will not load the hook
    # tfgpu.commands.server: start outside Kubernetes too, every interface open
    "TF_GPU_SERVER_OPEN",
    "TF_GPU_EXIT_GRACE",  # tfgpu.commands.exit_watch: a finished program's process ends within it
)
RECOVERY = ("TF_GPU_RECOVER_AT", "TF_GPU_RECOVER_AFTER", "TF_GPU_RECOVER_ACTION")
CLUSTER = (  # tfgpu.contract.tf_config.VARIABLES: multi-worker, then parameter-server training
    "TF_GPU_WORKERS",
    "TF_GPU_WORKER_HOSTS",
    "TF_GPU_WORKER_INDEX",
    "TF_GPU_WORKER_PORT",
    "TF_GPU_PS",
    "TF_GPU_PS_HOSTS",
    "TF_GPU_CHIEF_HOST",
    "TF_GPU_ROLE",
    "TF_GPU_PS_GPUS",
)
JUPYTER = (  # tfgpu.jupyter_cull, the -jupyter images
    "TFGPU_JUPYTER_CULL_IDLE_TIMEOUT",
    "TFGPU_JUPYTER_CULL_INTERVAL",
    "TFGPU_JUPYTER_CULL_CONNECTED",
)
# What an image says about itself (its Dockerfile's ENV), read by preflight and check.
IMAGE = (
    "TFGPU_IMAGE_TF",
    "TFGPU_IMAGE_CUDA",
    "TFGPU_IMAGE_DRIVER_MIN",
    "TFGPU_IMAGE_DRIVER_MIN_COMPAT",
    "TFGPU_IMAGE_DEFAULTS",
    "TFGPU_IMAGE_CONSTRAINTS",  # the path of the image's pip constraints file
    "TFGPU_IMAGE_GPU_ARCHES",  # tfgpu.contract.gpu_support: the wheel's SASS/PTX architectures
    "TFGPU_IMAGE_GPU_FAILURES",  # tfgpu.contract.gpu_support: its known failures (images/gpus.yaml)
)
# Set by the runtime for its own children, or read by it for tests and state.
INTERNAL = (
    "TFGPU_RUN_PREFLIGHT",  # tfgpu.commands.run: the hook does not repeat the door's warnings
    "TFGPU_DERIVED",  # tfgpu.commands.run: the names it added (tfgpu show calls them derived)
    "TFGPU_HOOK_RAISE",  # tfgpu._hook: raise instead of exit (tfgpu check's child)
    "TFGPU_SHM_WARNED",  # tfgpu.machine.shm: /dev/shm warned about once per container
    "TFGPU_EXIT_PIPE",  # tfgpu.act.exit_guard: where the program says it has finished (fd:pid)
    "TFGPU_STATE_DIR",  # tfgpu.act.recovery: where the recovery record lives
    "TFGPU_SYSROOT",  # tfgpu.machine.tegra: the root Jetson facts are read under (tests)
)
# The Dockerfiles' build arguments (ARG): a RUN step after them sees them in its environment.
BUILD_ARGS = (
    "TFGPU_CREATED",
    "TFGPU_REVISION",
    "TFGPU_SOURCE",
    "TFGPU_BASE_DIGEST",
    "TFGPU_CUDA_WHEELS_MIB",
)
# The test suite's own (docs/harness.md), set on a developer's host, where tfgpu runs too.
HARNESS = (
    "TFGPU_STANDIN_MIRROR",
    "TFGPU_STANDIN_CACHE",
    "TFGPU_PLAN_EXAMPLES",
    "TFGPU_MULTIWORKER_IMAGE",
    "TFGPU_SUITE_RECORDS",
)
# TensorFlow's own variables of the kit's prefix: not the kit's, never strangers
# (tensorflow/tensorflow: core/common_runtime/gpu/gpu_device.cc reads TF_GPU_THREAD_MODE,
# TF_GPU_THREAD_COUNT and TF_GPU_HOST_MEM_LIMIT_IN_MB; its CUPTI tracer the TF_GPU_CUPTI_*; XLA's
# memory monitor TF_GPU_MEM_MONITOR_POLL_FREQ_SECS; TF_GPU_ALLOCATOR the allocator).
TENSORFLOW_PREFIXED = (
    "TF_GPU_ALLOCATOR",
    "TF_GPU_THREAD_MODE",
    "TF_GPU_THREAD_COUNT",
    "TF_GPU_HOST_MEM_LIMIT_IN_MB",
    "TF_GPU_CUPTI_FORCE_CONCURRENT_KERNEL",
    "TF_GPU_CUPTI_USE_ACTIVITY_API",
    "TF_GPU_MEM_MONITOR_POLL_FREQ_SECS",
)
# TensorFlow's and CUDA's variables that the kit reads (and judges as they do:
# tfgpu.contract.settings).
NATIVE = (
    "TF_FORCE_GPU_ALLOW_GROWTH",
    "TF_GPU_ALLOCATOR",
    "CUDA_VISIBLE_DEVICES",
    "TF_CONFIG",
    "TF_USE_LEGACY_KERAS",
)
# Other names of TensorFlow and CUDA that images and users commonly set: known, so that the cheap
# pre-check (_suspect) never sends them to difflib.
COMMON_NATIVE = (
    "TF_CPP_MIN_LOG_LEVEL",
    "TF_CPP_MAX_VLOG_LEVEL",
    "TF_CPP_VMODULE",
    "TF_ENABLE_ONEDNN_OPTS",
    "TF_XLA_FLAGS",
    "TF_DETERMINISTIC_OPS",
    "TF_CUDNN_DETERMINISTIC",
    "TF_ENABLE_AUTO_MIXED_PRECISION",
    "CUDA_VERSION",  # the NVIDIA CUDA base images set it
    "CUDA_DEVICE_ORDER",
    "CUDA_MODULE_LOADING",
    "CUDA_CACHE_PATH",  # the driver's compute cache (tfgpu.machine.kernel_cache)
    "CUDA_CACHE_MAXSIZE",
    "CUDA_CACHE_DISABLE",
)
# Kubernetes sets it in each pod of an Indexed Job; the worker index defaults to it.
JOB_INDEX = "JOB_COMPLETION_INDEX"

KNOWN = frozenset(
    CONTRACT + RECOVERY + CLUSTER + JUPYTER + IMAGE + INTERNAL + BUILD_ARGS + HARNESS
) | frozenset(TENSORFLOW_PREFIXED + NATIVE + COMMON_NATIVE)
# What a stranger may be a misspelling of: the names a user sets.
SUGGESTED = CONTRACT + RECOVERY + CLUSTER + JUPYTER + NATIVE + TENSORFLOW_PREFIXED
_NATIVE_PREFIXES = ("TF_", "CUDA_")
_KIT_SET = frozenset(CONTRACT + RECOVERY + CLUSTER + JUPYTER)
# Names outside the kit's prefixes whose near misses are strangers too.
_NEAR_TARGETS = (*NATIVE, "TF_CPU_VIRTUAL_DEVICES", "TF_MIXED_PRECISION")
CUTOFF = 0.8  # difflib's ratio: TF_GPU_MEM_LMIT ~ TF_GPU_MEM_LIMIT is 0.97, unrelated names < 0.7


class UnknownName(ConfigError):
    """A stranger refused (`build.py k8s`, `plan`): the message names the known name it is
    likely a typo of, and the example uses that name."""

    def __init__(self, name: str, value: str, closest: str, why: str) -> None:
        self.closest = closest
        super().__init__(
            name,
            value,
            "a variable the kit or TensorFlow reads (docs/runtime.md lists the kit's)",
            value or "…",
            why=why,
        )

    @property
    def message(self) -> str:
        return (
            f"{printable(self.variable)}={shown(self.value)} is not valid ({printable(self.why)}): "
            f"accepted: {self.accepted}; example: {self.closest}={printable(self.example)}"
        )


class Stranger:
    """A name the kit does not know: `closest`, the known name it is likely a typo of (None:
    none is close)."""

    __slots__ = ("closest", "name", "value")

    def __init__(self, name: str, value: str, closest: "Optional[str]") -> None:
        self.name = name
        self.value = value
        self.closest = closest

    @property
    def owner(self) -> str:
        """Whose name it resembles: the kit's, TensorFlow's or CUDA's."""
        if self.closest is None or self.closest in _KIT_SET:
            return "the kit"
        return "CUDA" if self.closest.startswith("CUDA_") else "TensorFlow"

    @property
    def case_only(self) -> bool:
        return self.closest is not None and self.closest == self.name.upper()

    def lookalikes(self) -> str:
        """The characters of the name that are not ASCII, by code point and name (a Cyrillic
        І prints as the Latin I it mimics): "" when there are none."""
        odd = [c for c in dict.fromkeys(self.name) if not c.isascii()]
        if not odd:
            return ""
        import unicodedata  # only for a name that holds one

        return ", ".join(f"U+{ord(c):04X} {unicodedata.name(c, 'unnamed')}" for c in odd)

    def why(self) -> str:
        whose = self.owner
        guess = f"; did you mean {self.closest}?" if self.closest else ""
        odd = self.lookalikes()
        if odd:
            return f"not a variable {whose} reads: its name holds {odd}, not ASCII{guess}"
        if self.case_only:
            return f"not a variable {whose} reads: names are case-sensitive{guess}"
        if self.closest is not None:
            return f"not a variable {whose} reads{guess}"
        return (
            "not a variable of the kit, nor one of TensorFlow's that it knows; docs/runtime.md "
            "lists the kit's"
        )

    def warning(self) -> str:
        """One line for the door and `tfgpu show`."""
        return f"{printable(self.name)} is ignored ({self.why()})"

    def error(self) -> "UnknownName":
        """The refusal of `build.py k8s` and `plan` (for a stranger with a close name)."""
        return UnknownName(self.name, self.value, self.closest or "", self.why())


def _service_link(name: str, value: str) -> bool:
    """A variable Kubernetes injects for a Service (enableServiceLinks, on by default): a Service
    `tfgpu-serve` gives every pod of its namespace variables named after it, ending in
    `_SERVICE_HOST`, `_SERVICE_PORT`, `_PORT_8501_TCP_ADDR`…, and one `_PORT` of `tcp://…`
    (kubelet, pkg/kubelet/envvars). Not the kit's, and not a typo of a name of it: none holds
    SERVICE_, a protocol, or a URL."""
    return (
        "_SERVICE_HOST" in name
        or "_SERVICE_PORT" in name
        or "_TCP" in name
        or "_UDP" in name
        or "_SCTP" in name
        or value.startswith(("tcp://", "udp://", "sctp://"))
    )


def _suspect(name: str, value: str) -> bool:
    """Cheap (no difflib): could `name` be one of the kit's, or a near miss of a native name?"""
    upper = name.upper()
    if not name.isascii():  # a look-alike letter (Cyrillic Т in ТF_GPU_…): judged by difflib
        return True
    if upper.startswith(KIT_PREFIXES):
        return name not in KNOWN and not _service_link(name, value)
    if name in KNOWN or not upper.startswith(_NATIVE_PREFIXES):
        return False
    if upper in _NEAR_TARGETS:  # tf_config, Cuda_Visible_Devices: case
        return True
    # A typo keeps most of a name: its length within 2, its first letter after the prefix. Most
    # of TensorFlow's other variables (TF_CPP_MIN_LOG_LEVEL, CUDA_VERSION) fail this and cost
    # no difflib import.
    return any(
        abs(len(upper) - len(known)) <= 2 and upper.startswith(known[: known.index("_") + 2])
        for known in _NEAR_TARGETS
    )


def strangers(environ: "Mapping[str, str]") -> "List[Stranger]":
    """The names of `environ` that the kit does not know but should, each with its closest
    known name."""
    suspects = [name for name, value in environ.items() if _suspect(name, value)]
    if not suspects:
        return []
    import difflib  # only now: it imports `re` (module doc)

    found: List[Stranger] = []
    for name in suspects:
        upper = name.upper()
        kit = upper.startswith(KIT_PREFIXES)
        if upper in KNOWN:
            closest: Optional[str] = upper
        else:
            matches = difflib.get_close_matches(upper, SUGGESTED, n=1, cutoff=CUTOFF)
            closest = matches[0] if matches else None
        if closest is None and not kit:
            continue  # a native name that resembles none the kit reads: not ours to judge
        found.append(Stranger(name, environ[name], closest))
    return found


def refuse_strangers(environ: "Mapping[str, str]") -> "Iterable[Stranger]":
    """For `build.py k8s` and `plan`: raise the first stranger that has a close known name (a
    typo); return those with none (a warning: a variable of TensorFlow's the kit may not know)."""
    found = strangers(environ)
    for stranger in found:
        if stranger.closest is not None:
            raise stranger.error()
    return found
