"""Parse the environment contract into Settings. Pure: no I/O, no TensorFlow, stdlib only.

This is the module the build side imports (`build.py plan` resolves caps exactly as the
runtime does), and the one tests run under every Python from 3.8 to 3.13.

Grammar (documented in docs/runtime.md):
    amount   := NUMBER [unit] | NUMBER "%"       NUMBER = digits [ "." digits ]
    unit     := "MiB" | "GiB" | "m" | "g"         (case-insensitive; no unit = MiB, as TF counts)
    TF_GPU_MEM_LIMIT       := amount ("," amount)*          one value = every GPU, a list = per GPU
    TF_GPU_VIRTUAL_DEVICES := group (";" group)*            one group = every GPU, else per GPU
    group                  := amount ("," amount)*          one logical GPU per amount
"""

# No `from __future__ import annotations` (it imports `__future__`: ~0.4 ms of `tfgpu run`).
# No `re` here: with enum, functools and collections it was ~5 ms of the ~8-10 that `tfgpu run`
# added to `python -c pass` (-X importtime, benchmarks/bench_runtime.py), so the grammar is
# parsed by hand. tfgpu.contract.recovery_rule and tfgpu.contract.tf_config import `re`: they are
# imported only when one of their variables is set (_wants), or when their names are asked for
# (__getattr__).
from tfgpu import is_disabled

# `as`: the build side (tfgpu_kit) imports is_ascii_number from here, as it did before it moved
from tfgpu.contract.ascii_numbers import is_ascii_number as is_ascii_number
from tfgpu.contract.ascii_numbers import whole_number
from tfgpu.contract.errors import ConfigError
from tfgpu.contract.names import CONTRACT, strangers

TYPE_CHECKING = False  # not `from typing import …`: importing typing costs ms at start-up
if TYPE_CHECKING:  # typing is only needed by mypy; keep `tfgpu run` start-up small
    from typing import Callable, Dict, List, Mapping, Optional, Set, Tuple

    from tfgpu.contract.recovery_rule import RecoveryRule
    from tfgpu.contract.tf_config import TfConfig

EXIT_GRACE = "TF_GPU_EXIT_GRACE"
EXIT_GRACE_DEFAULT_S = 10.0
EXIT_GRACE_MAX_S = 3600.0
EXIT_GRACE_ACCEPTED = (
    "a duration from 1s to 1h: seconds (10, 10s) or minutes (2m); or off (no bound: the process "
    "exits when Python and TensorFlow let it)"
)

# Sources reported by `tfgpu show` for each value.
ENVIRONMENT = "environment"
IMAGE_DEFAULT = "image default"
KIT_DEFAULT = "kit default"
DERIVED = "derived"

# the contract's own variables, in the order `tfgpu show` lists them: one list, in
# tfgpu.contract.names
_OWN_KIT_VARIABLES = CONTRACT
_OWN_NATIVE_VARIABLES = ("TF_FORCE_GPU_ALLOW_GROWTH", "TF_GPU_ALLOCATOR", "CUDA_VISIBLE_DEVICES")


def __getattr__(name: str) -> "Tuple[str, ...]":
    """KIT_VARIABLES (the contract's own variables) and NATIVE_VARIABLES (TensorFlow's and CUDA's
    that the kit reads), built on first use (PEP 562): they name the variables of
    tfgpu.contract.recovery_rule and tfgpu.contract.tf_config, which `tfgpu run` does not import
    unless one is set (module comment). Any other name is looked up here too (the import system asks
    for `__path__`), so it raises before importing anything."""
    if name not in ("KIT_VARIABLES", "NATIVE_VARIABLES"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from tfgpu.contract import recovery_rule, tf_config  # on first use: ~12 ms (importtime, `re`)

    if name == "KIT_VARIABLES":
        # the recovery rule (tfgpu.contract.recovery_rule), multi-worker training
        # (tfgpu.contract.tf_config)
        return (*_OWN_KIT_VARIABLES, *recovery_rule.VARIABLES, *tf_config.VARIABLES)
    return (*_OWN_NATIVE_VARIABLES, tf_config.TF_CONFIG, tf_config.LEGACY_KERAS)


# Which variables make parse_environment import those two modules: a superset of their names,
# held to them by tests/runtime/test_run_startup.py (a name missed here would go unchecked).
RECOVERY_PREFIX = "TF_GPU_RECOVER"  # tfgpu.contract.recovery_rule.VARIABLES
CLUSTER_PREFIX = "TF_GPU_WORKER"  # tfgpu.contract.tf_config.VARIABLES
# tf_config.TF_CONFIG, .LEGACY_KERAS, and the parameter-server variables (tf_config.PS…)
CLUSTER_NAMES = (
    "TF_CONFIG",
    "TF_USE_LEGACY_KERAS",
    "TF_GPU_PS",
    "TF_GPU_PS_HOSTS",
    "TF_GPU_CHIEF_HOST",
    "TF_GPU_ROLE",
    "TF_GPU_PS_GPUS",
)

_TRUE = ("true", "1", "yes", "on")
_FALSE = ("false", "0", "no", "off")
BOOL_ACCEPTED = "true/false, 1/0, yes/no, on/off (any case)"

# An amount is, as the regular expression `\s*(\d+(?:\.\d+)?)\s*(%|mib|gib|m|g|mb|gb)?\s*` with
# re.ASCII | re.IGNORECASE would read it (tests/runtime/test_run_startup.py holds _split_amount to
# exactly that): ASCII digits only, since `\d` would also match other scripts' digits ("٣"),
# which CUDA and TensorFlow do not.
_ASCII_SPACE = " \t\n\r\f\v"
_DIGITS = "0123456789"
_UNITS = ("%", "mib", "gib", "m", "g", "mb", "gb")
AMOUNT_ACCEPTED = (
    "a size in MiB (4096), with a unit (512MiB, 4GiB, 4g) or a percentage of the GPU (40%)"
)
MAX_MIB = 16 * 1024 * 1024  # 16 TiB: anything bigger is a typo, not a GPU
MAX_CPU_DEVICES = 256
ALLOCATORS = ("cuda_malloc_async", "cuda_malloc", "memory_guard")
POLICIES = ("mixed_float16", "mixed_bfloat16")
# A CUDA_VISIBLE_DEVICES entry: `\d+|GPU-[0-9a-fA-F-]+|MIG-[0-9A-Za-z/-]+` (ASCII), by hand (no re).
_UUID_CHARS = {
    "GPU-": frozenset(_DIGITS + "abcdefABCDEF-"),
    "MIG-": frozenset(_DIGITS + "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ/-"),
}


class MemAmount:
    """A memory amount: either `mib` (absolute, MiB) or `percent` (of a GPU's total)."""

    __slots__ = ("mib", "percent")

    def __init__(self, mib: "Optional[float]" = None, percent: "Optional[float]" = None) -> None:
        if (mib is None) == (percent is None):
            raise ValueError("give exactly one of mib and percent")
        self.mib = mib
        self.percent = percent

    def resolve(self, total_mib: "Optional[float]") -> float:
        """MiB for a GPU of `total_mib`; a percentage needs the total (ValueError without it)."""
        if self.mib is not None:
            return self.mib
        assert self.percent is not None
        if total_mib is None:
            raise ValueError(f"{self} needs the GPU's total memory")
        return total_mib * self.percent / 100.0

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MemAmount) and (self.mib, self.percent) == (
            other.mib,
            other.percent,
        )

    def __hash__(self) -> int:
        return hash((self.mib, self.percent))

    def __repr__(self) -> str:
        return f"MemAmount(mib={self.mib!r}, percent={self.percent!r})"

    def __str__(self) -> str:
        if self.percent is not None:
            return f"{_num(self.percent)}%"
        assert self.mib is not None
        return f"{_num(self.mib)} MiB"


def _num(x: float) -> str:
    return str(int(x)) if x == int(x) else f"{x:g}"


class Setting:
    """One variable's effective value and where it came from (for `tfgpu show`)."""

    __slots__ = ("note", "source", "value")

    def __init__(self, value: str, source: str, note: str = "") -> None:
        self.value = value
        self.source = source
        self.note = note

    def as_json(self) -> "Dict[str, str]":
        out = {"value": self.value, "source": self.source}
        if self.note:
            out["note"] = self.note
        return out

    def __repr__(self) -> str:
        return f"Setting({self.value!r}, {self.source!r})"


class Settings:
    """What the environment asks for, validated. `None` means "not asked for"."""

    def __init__(self) -> None:
        self.enabled = True
        self.mem_limit: Optional[List[MemAmount]] = None
        self.virtual_devices: Optional[List[List[MemAmount]]] = None
        self.growth: Optional[bool] = None
        self.cpu_devices: Optional[int] = None
        self.required = False
        self.mixed_precision: Optional[str] = None
        self.quiet = False
        self.require_hook = True  # TF_GPU_REQUIRE_HOOK: refuse a Python that will not load the hook
        # TF_GPU_SERVER_OPEN: `tfgpu server` outside Kubernetes too (tfgpu.commands.server says why
        # not)
        self.server_open = False
        # TF_GPU_EXIT_GRACE: seconds a finished program's process gets to exit before the kit
        # ends it (tfgpu.commands.exit_watch); None: no bound
        self.exit_grace: Optional[float] = EXIT_GRACE_DEFAULT_S
        self.allocator: Optional[str] = None
        self.metrics_port: Optional[int] = None  # None: no metrics (unset, empty or 0)
        self.metrics_addr = DEFAULT_METRICS_ADDR
        self.recovery: Optional[RecoveryRule] = None  # None: no recovery rule (the default)
        self.tf_config: Optional[TfConfig] = (
            None  # None: not multi-worker (tfgpu.contract.tf_config)
        )
        self.legacy_keras: Optional[bool] = None  # TF_USE_LEGACY_KERAS; None: unset (Keras 3)
        # CUDA_VISIBLE_DEVICES: None = unset (all GPUs), [] = none, else the entries CUDA uses.
        self.visible_devices: Optional[List[str]] = None
        # a parameter server's command gets CUDA_VISIBLE_DEVICES="" (TF_GPU_PS_GPUS, tf_config)
        self.hide_gpus = False
        self.sources: Dict[str, Setting] = {}
        self.warnings: List[str] = []
        # What the image says about itself (TFGPU_IMAGE_*), for preflight and check.
        self.image: Dict[str, str] = {}

    @property
    def asks_for_gpu_config(self) -> bool:
        return self.mem_limit is not None or self.virtual_devices is not None


# --- single values -------------------------------------------------------------------------


def parse_bool(variable: str, value: str) -> bool:
    v = value.strip().lower()
    if v in _TRUE:
        return True
    if v in _FALSE:
        return False
    raise ConfigError(variable, value, BOOL_ACCEPTED, "true")


def _digits(text: str, start: int) -> int:
    """The end of the run of ASCII digits at text[start:]."""
    end = start
    while end < len(text) and text[end] in _DIGITS:
        end += 1
    return end


def _split_amount(text: str) -> "Optional[Tuple[str, str]]":
    """(number, unit as written, "" for none), or None when `text` is not an amount."""
    text = text.strip(_ASCII_SPACE)
    end = _digits(text, 0)
    if end == 0:
        return None
    if text[end : end + 1] == "." and _digits(text, end + 1) > end + 1:
        end = _digits(text, end + 1)
    unit = text[end:].lstrip(_ASCII_SPACE)
    if unit and not (unit.isascii() and unit.lower() in _UNITS):
        return None
    return text[:end], unit


def _amount(variable: str, whole: str, text: str, example: str) -> "MemAmount":
    parts = _split_amount(text)
    if parts is None:
        raise ConfigError(variable, whole, AMOUNT_ACCEPTED, example)
    number, unit = float(parts[0]), parts[1].lower()
    if unit in ("mb", "gb"):
        raise ConfigError(
            variable,
            whole,
            AMOUNT_ACCEPTED,
            example,
            why=f"'{parts[1]}' is ambiguous (decimal or binary?); write MiB or GiB",
        )
    if unit == "%":
        if not 0 < number <= 100:
            raise ConfigError(
                variable,
                whole,
                AMOUNT_ACCEPTED,
                example,
                why="a percentage is over 0 and at most 100",
            )
        return MemAmount(percent=number)
    mib = number * 1024 if unit in ("gib", "g") else number
    if not 0 < mib <= MAX_MIB:
        raise ConfigError(
            variable, whole, AMOUNT_ACCEPTED, example, why="a size is over 0 and at most 16 TiB"
        )
    return MemAmount(mib=mib)


def parse_mem_limit(value: str, variable: str = "TF_GPU_MEM_LIMIT") -> "List[MemAmount]":
    """`4096`, `4GiB`, `40%` (one value: every GPU) or `4096,2048` (one per visible GPU)."""
    example = "4096 (or 4GiB, 40%, 4096,2048)"
    if not value.strip():
        raise ConfigError(variable, value, AMOUNT_ACCEPTED, example, why="empty")
    return [_amount(variable, value, part, example) for part in value.split(",")]


def parse_virtual_devices(
    value: str, variable: str = "TF_GPU_VIRTUAL_DEVICES"
) -> "List[List[MemAmount]]":
    """Groups of logical-GPU sizes: `6144,8192` splits every GPU in two; `6144,8192;4096`
    splits GPU 0 in two and gives GPU 1 one logical device. One group = every GPU."""
    example = "6144,8192 (every GPU split in two) or 6144,8192;4096 (per GPU)"
    accepted = (
        "sizes separated by ',' (one logical GPU each), groups separated by ';' (one per GPU)"
    )
    if not value.strip():
        raise ConfigError(variable, value, accepted, example, why="empty")
    groups = []
    for group in value.split(";"):
        if not group.strip():
            raise ConfigError(variable, value, accepted, example, why="an empty group")
        groups.append([_amount(variable, value, part, example) for part in group.split(",")])
    return groups


def parse_cpu_devices(value: str, variable: str = "TF_CPU_VIRTUAL_DEVICES") -> int:
    number = whole_number(value.strip(), MAX_CPU_DEVICES)
    if number is None or number < 1:
        raise ConfigError(variable, value, f"a whole number from 1 to {MAX_CPU_DEVICES}", "4")
    return number


METRICS_PORT_ACCEPTED = "a TCP port from 1 to 65535 (ASCII digits), or 0 for no metrics"
EXAMPLE_METRICS_PORT = 9401  # DCGM exporter listens on 9400; the kit's example sits next to it


def parse_exit_grace(value: str) -> "Optional[float]":
    """TF_GPU_EXIT_GRACE in seconds, None for off."""
    if value.strip().lower() in ("off", "none"):
        return None
    from tfgpu.contract import durations  # only when set: ~0.4 ms (-X importtime)

    seconds = durations.seconds_of(value, 1, EXIT_GRACE_MAX_S)
    if seconds is None:
        raise ConfigError(EXIT_GRACE, value, EXIT_GRACE_ACCEPTED, "30s")
    return seconds


def parse_metrics_port(value: str, variable: str = "TF_GPU_METRICS_PORT") -> "Optional[int]":
    """The port the hook serves metrics on; None for `0` ("off", as `build.py k8s
    --metrics-port 0` writes it). Port 0 to a server would mean a random port nobody can
    scrape, so it cannot mean anything else."""
    port = whole_number(value.strip(), 65535)
    if port is None:
        raise ConfigError(variable, value, METRICS_PORT_ACCEPTED, str(EXAMPLE_METRICS_PORT))
    return port or None


# Every interface by default: Prometheus scrapes the container or pod from outside it.
DEFAULT_METRICS_ADDR = "0.0.0.0"
METRICS_ADDR_ACCEPTED = (
    "an IPv4 or IPv6 address of this container to listen on (0.0.0.0 or :: = every interface, "
    "the default; 127.0.0.1 = only from inside the container)"
)


def parse_metrics_addr(value: str, variable: str = "TF_GPU_METRICS_ADDR") -> str:
    """The address literal the metrics server binds, normalised. No host names: resolving
    one would put DNS on the path of `import tensorflow`."""
    import ipaddress  # only when the variable is set: ~1 ms that `tfgpu run` need not pay

    text = value.strip()
    try:
        return str(ipaddress.ip_address(text))  # ASCII digits only, as the rest of the kit
    except ValueError:
        raise ConfigError(variable, value, METRICS_ADDR_ACCEPTED, "127.0.0.1") from None


def parse_visible_devices(value: str, variable: str = "CUDA_VISIBLE_DEVICES") -> "List[str]":
    """The entries CUDA will use. CUDA stops at the first invalid entry (the `-1` idiom hides
    everything after it); other garbage (`all`, `gpu0`) would silently hide GPUs, so it is an
    error."""
    accepted = "comma-separated GPU indices (0,1), UUIDs (GPU-…, MIG-…), or -1 / empty for none"
    entries: List[str] = []
    seen: Set[str] = set()  # not `entry in entries`: quadratic (23,685 entries took 3.6 s)
    if not value.strip():
        return entries
    for raw in value.split(","):
        entry = raw.strip()
        if entry == "-1":
            break
        if not is_visible_entry(entry):
            why = "use NVIDIA_VISIBLE_DEVICES for 'all'" if entry.lower() == "all" else ""
            raise ConfigError(variable, value, accepted, "0,1", why=why)
        if entry in seen:
            raise ConfigError(variable, value, accepted, "0,1", why=f"{entry} is listed twice")
        seen.add(entry)
        entries.append(entry)
    return entries


def is_visible_entry(entry: str) -> bool:
    """A GPU index (ASCII digits) or a GPU-/MIG- UUID, as CUDA_VISIBLE_DEVICES lists them."""
    if entry.isascii() and entry.isdigit():
        return True
    chars = _UUID_CHARS.get(entry[:4])
    return chars is not None and len(entry) > 4 and all(c in chars for c in entry[4:])


def parse_image_defaults(value: str) -> "Dict[str, str]":
    """TFGPU_IMAGE_DEFAULTS: `NAME=VALUE` pairs, separated by spaces or commas."""
    out: Dict[str, str] = {}
    # str.split() splits at runs of what `\s` matches (str.isspace), as re.split(r"[\s,]+") did
    for item in value.replace(",", " ").split():
        name, sep, val = item.partition("=")
        if not sep or not name:
            raise ConfigError(
                "TFGPU_IMAGE_DEFAULTS",
                value,
                "NAME=VALUE pairs separated by spaces",
                "TF_GPU_MEMORY_GROWTH=true",
            )
        out[name] = val
    return out


# --- the whole environment -----------------------------------------------------------------


_CONFIG_VALUES = ("on", "off", "true", "false", "1", "0", "yes", "no")
_IMAGE_KEYS = (
    "TFGPU_IMAGE_TF",
    "TFGPU_IMAGE_CUDA",
    "TFGPU_IMAGE_DRIVER_MIN",
    "TFGPU_IMAGE_DRIVER_MIN_COMPAT",
)


def _reader(environ: "Mapping[str, str]", s: "Settings") -> "Callable[[str], Optional[str]]":
    """`get(name)`: the value, with its source recorded in `s`; empty counts as unset
    (compose's `VAR=`)."""
    defaults = parse_image_defaults(environ.get("TFGPU_IMAGE_DEFAULTS", ""))
    # Names `tfgpu run` added to its command's environment (TFGPU_DERIVED, set by run.py).
    derived = set(environ.get("TFGPU_DERIVED", "").split(",")) - {""}

    def get(name: str) -> "Optional[str]":
        value = environ.get(name)
        if value is None or value.strip() == "":
            return None
        if name in derived:
            s.sources[name] = Setting(value, DERIVED, "set by tfgpu run")
        else:
            source = IMAGE_DEFAULT if defaults.get(name) == value else ENVIRONMENT
            s.sources[name] = Setting(value, source)
        return value

    return get


def parse_environment(environ: "Mapping[str, str]") -> "Settings":
    """Validate every variable of the contract; raise ConfigError on the first bad one."""
    s = Settings()
    get = _reader(environ, s)
    config = get("TF_GPU_CONFIG")
    if config is not None and config.strip().lower() not in _CONFIG_VALUES:
        raise ConfigError(
            "TF_GPU_CONFIG", config, "off (the kit does nothing) or on (the default)", "off"
        )
    if is_disabled(environ):
        s.enabled = False
        return s
    s.sources.setdefault("TF_GPU_CONFIG", Setting("on", KIT_DEFAULT))
    s.warnings.extend(stranger.warning() for stranger in strangers(environ))
    s.image = {key: environ[key].strip() for key in _IMAGE_KEYS if environ.get(key)}
    _parse_visible(s, environ, get)
    _parse_memory(s, environ, get)
    _parse_growth(s, environ, get)
    _parse_allocator(s, get)
    _parse_rest(s, get)
    if _wants(environ, RECOVERY_PREFIX, ()):
        _parse_recovery(s, get)
    if _wants(environ, CLUSTER_PREFIX, CLUSTER_NAMES):
        _parse_cluster(s, environ, get)
    return s


def _wants(environ: "Mapping[str, str]", prefix: str, names: "Tuple[str, ...]") -> bool:
    """Is a variable set that starts with `prefix` or is one of `names`? Unset, the parser of
    those variables would find nothing (get() counts empty as unset), so it need not be
    imported (start-up time: the module comment)."""
    return any(
        (name.startswith(prefix) or name in names) and value.strip()
        for name, value in environ.items()
    )


def _parse_recovery(s: "Settings", get: "Callable[[str], Optional[str]]") -> None:
    from tfgpu.contract import durations, recovery_rule  # only when set: ~10 ms (importtime, `re`)

    capped = s.mem_limit is not None or s.virtual_devices is not None
    s.recovery = recovery_rule.parse_rule(get, capped=capped, metrics_port=s.metrics_port)
    if s.recovery is not None:  # `tfgpu show` lists the rule's defaults as defaults
        after = durations.format_duration(recovery_rule.DEFAULT_AFTER_S)
        s.sources.setdefault(recovery_rule.AFTER, Setting(after, KIT_DEFAULT))
        s.sources.setdefault(recovery_rule.ACTION, Setting("report", KIT_DEFAULT))


def _parse_cluster(
    s: "Settings", environ: "Mapping[str, str]", get: "Callable[[str], Optional[str]]"
) -> None:
    """TF_CONFIG (the user's, checked; or built from TF_GPU_WORKERS*) and TF_USE_LEGACY_KERAS."""
    # only when its variables are set: ~12 ms (importtime, `re`)
    from tfgpu.contract import tf_config

    v = get(tf_config.LEGACY_KERAS)
    if v is not None:
        s.legacy_keras = tf_config.parse_legacy_keras(v)
    derived = tf_config.TF_CONFIG in environ.get("TFGPU_DERIVED", "").split(",")
    s.tf_config = cfg = tf_config.parse(get, environ, derived)
    if cfg is None:
        return
    if cfg.port == s.metrics_port:  # two servers on one port: "Could not start gRPC server"
        name = tf_config.PORT if cfg.built else tf_config.TF_CONFIG
        value = environ.get(name) or str(cfg.port)
        raise ConfigError(
            name,
            value,
            "a port other than TF_GPU_METRICS_PORT's: the worker's gRPC server and the metrics "
            "server each need their own",
            str(tf_config.DEFAULT_PORT) if cfg.built else tf_config.TF_CONFIG_EXAMPLE,
            why=f"TF_GPU_METRICS_PORT is {cfg.port} too",
        )
    if not cfg.built:
        s.sources[tf_config.TF_CONFIG].note = "yours: validated, never replaced"
        unused = [name for name in tf_config.VARIABLES if environ.get(name, "").strip()]
        if unused:
            s.warnings.append(
                f"{', '.join(unused)} not used: TF_CONFIG is set, and the kit never replaces it"
            )
        return
    origin = (
        tf_config.WORKERS if "ps" not in cfg.cluster else f"{tf_config.WORKERS}, {tf_config.PS}"
    )
    s.sources[tf_config.TF_CONFIG] = Setting(cfg.value, DERIVED, f"built from {origin}")
    s.sources.setdefault(tf_config.PORT, Setting(str(tf_config.DEFAULT_PORT), KIT_DEFAULT))
    if cfg.index_from != tf_config.INDEX:
        s.sources[tf_config.INDEX] = Setting(str(cfg.index), DERIVED, f"from {cfg.index_from}")
    if "ps" in cfg.cluster:
        v = get(tf_config.PS_GPUS)
        ps_gpus = parse_bool(tf_config.PS_GPUS, v) if v is not None else False
        s.sources.setdefault(tf_config.PS_GPUS, Setting("false", KIT_DEFAULT))
        if cfg.task_type == "ps" and not ps_gpus:
            _hide_gpus_from_ps(s, environ)


def _hide_gpus_from_ps(s: "Settings", environ: "Mapping[str, str]") -> None:
    """A parameter server holds variables in host memory and runs no step (TensorFlow's
    ParameterServerStrategy): it gets no GPU unless TF_GPU_PS_GPUS=true, so that it neither
    reserves GPU memory nor needs a GPU the pod does not have. A CUDA_VISIBLE_DEVICES the user
    set is theirs (never replaced)."""
    # already imported by _parse_cluster, the caller (not a cost)
    from tfgpu.contract import tf_config

    if "CUDA_VISIBLE_DEVICES" in environ:
        return
    if s.required:
        raise ConfigError(
            "TF_GPU_REQUIRED",
            "true",
            f"false on a parameter server, or true together with {tf_config.PS_GPUS}=true",
            "false",
            why=f"a parameter server gets no GPU unless {tf_config.PS_GPUS}=true",
        )
    s.visible_devices = []
    s.hide_gpus = True
    s.sources["CUDA_VISIBLE_DEVICES"] = Setting(
        "", DERIVED, f"a parameter server: no GPU ({tf_config.PS_GPUS}=true gives it the pod's)"
    )


def _parse_visible(
    s: "Settings", environ: "Mapping[str, str]", get: "Callable[[str], Optional[str]]"
) -> None:
    v = get("CUDA_VISIBLE_DEVICES")
    if "CUDA_VISIBLE_DEVICES" in environ:  # empty is meaningful here: no GPU at all
        s.visible_devices = parse_visible_devices(environ["CUDA_VISIBLE_DEVICES"])
        if v is None:
            s.sources["CUDA_VISIBLE_DEVICES"] = Setting("", ENVIRONMENT, "no GPU visible")


def _parse_memory(
    s: "Settings", environ: "Mapping[str, str]", get: "Callable[[str], Optional[str]]"
) -> None:
    """TF_GPU_MEM_LIMIT or TF_GPU_VIRTUAL_DEVICES (not both)."""
    v = get("TF_GPU_MEM_LIMIT")
    if v is not None:
        s.mem_limit = parse_mem_limit(v)
    v = get("TF_GPU_VIRTUAL_DEVICES")
    if v is not None:
        s.virtual_devices = parse_virtual_devices(v)
    if s.mem_limit is not None and s.virtual_devices is not None:
        raise ConfigError(
            "TF_GPU_VIRTUAL_DEVICES",
            environ["TF_GPU_VIRTUAL_DEVICES"],
            "either TF_GPU_MEM_LIMIT (one cap per GPU) or TF_GPU_VIRTUAL_DEVICES (sizes of the "
            "split), not both",
            "6144,8192",
            why="TF_GPU_MEM_LIMIT is set too",
        )


def _parse_allocator(s: "Settings", get: "Callable[[str], Optional[str]]") -> None:
    """TF_GPU_ALLOCATOR, after the memory settings and growth: its warnings depend on them."""
    v = get("TF_GPU_ALLOCATOR")
    if v is None:
        return
    if v not in ALLOCATORS:
        raise ConfigError(
            "TF_GPU_ALLOCATOR",
            v,
            ", ".join(ALLOCATORS) + " (or unset for TensorFlow's default BFC allocator)",
            "cuda_malloc_async",
            why="TensorFlow would silently ignore it",
        )
    s.allocator = v
    if v == "cuda_malloc_async" and s.asks_for_gpu_config:
        s.warnings.append(
            "TF_GPU_ALLOCATOR=cuda_malloc_async: the memory limit sizes the allocator's "
            "pool but is "
            "not a hard cap (the pool can grow up to the whole GPU); unset TF_GPU_ALLOCATOR "
            "for a hard cap"
        )
    if (
        v == "cuda_malloc_async"
        and s.sources.get("TF_GPU_MEMORY_GROWTH", Setting("", "")).source == ENVIRONMENT
    ):
        s.warnings.append(
            "TF_GPU_MEMORY_GROWTH has no effect with TF_GPU_ALLOCATOR=cuda_malloc_async"
        )


def _parse_rest(s: "Settings", get: "Callable[[str], Optional[str]]") -> None:
    """The independent single values, then the kit defaults `tfgpu show` lists."""
    v = get("TF_CPU_VIRTUAL_DEVICES")
    if v is not None:
        s.cpu_devices = parse_cpu_devices(v)
    v = get("TF_GPU_REQUIRED")
    s.required = parse_bool("TF_GPU_REQUIRED", v) if v is not None else False
    v = get("TF_MIXED_PRECISION")
    if v is not None:
        if v.strip() not in POLICIES:
            raise ConfigError("TF_MIXED_PRECISION", v, " or ".join(POLICIES), "mixed_float16")
        s.mixed_precision = v.strip()
    v = get("TF_GPU_QUIET")
    s.quiet = parse_bool("TF_GPU_QUIET", v) if v is not None else False
    v = get("TF_GPU_REQUIRE_HOOK")
    s.require_hook = parse_bool("TF_GPU_REQUIRE_HOOK", v) if v is not None else True
    v = get("TF_GPU_SERVER_OPEN")
    s.server_open = parse_bool("TF_GPU_SERVER_OPEN", v) if v is not None else False
    v = get(EXIT_GRACE)
    if v is not None:
        s.exit_grace = parse_exit_grace(v)
    v = get("TF_GPU_METRICS_PORT")
    if v is not None:
        s.metrics_port = parse_metrics_port(v)
    v = get("TF_GPU_METRICS_ADDR")
    if v is not None:
        s.metrics_addr = parse_metrics_addr(v)
    for name, default in (
        ("TF_GPU_REQUIRED", "false"),
        ("TF_GPU_QUIET", "false"),
        ("TF_GPU_REQUIRE_HOOK", "true"),
        ("TF_GPU_SERVER_OPEN", "false"),
        (EXIT_GRACE, "10s"),
    ):
        s.sources.setdefault(name, Setting(default, KIT_DEFAULT))


def _parse_growth(
    s: "Settings", environ: "Mapping[str, str]", get: "Callable[[str], Optional[str]]"
) -> None:
    """TF_GPU_MEMORY_GROWTH (lenient) against the native TF_FORCE_GPU_ALLOW_GROWTH (exact).

    Both set and different is a contradiction, except that an explicit value from the
    environment wins over an image default (the image ships TF_GPU_MEMORY_GROWTH=true, and a
    user who passes TF_FORCE_GPU_ALLOW_GROWTH=false means it)."""
    kit, native = get("TF_GPU_MEMORY_GROWTH"), get("TF_FORCE_GPU_ALLOW_GROWTH")
    kit_value = parse_bool("TF_GPU_MEMORY_GROWTH", kit) if kit is not None else None
    native_value: Optional[bool] = None
    if native is not None:
        # TensorFlow compares the exact text: strcmp with "false" and "true", anything else is
        # ignored with one log line (tensorflow/tensorflow e9ab4106db56d4767dff5e25600a1bd5ff1520bf,
        # tensorflow/core/common_runtime/gpu/gpu_bfc_allocator.cc, GetAllowGrowthValue). The
        # same principle as TF_USE_LEGACY_KERAS (tfgpu.contract.tf_config): TensorFlow's verdict,
        # spaces included, or a refusal.
        if native not in ("true", "false"):
            spaces = native.strip() in ("true", "false")
            raise ConfigError(
                "TF_FORCE_GPU_ALLOW_GROWTH",
                native,
                "exactly true or false (lowercase, no spaces)",
                "true",
                why="TensorFlow compares the exact text, spaces included, and ignores anything "
                "else with only a log line; or use TF_GPU_MEMORY_GROWTH"
                if spaces
                else "TensorFlow ignores anything else with only a log line; or use "
                "TF_GPU_MEMORY_GROWTH",
            )
        native_value = native == "true"
    if kit_value is not None and native_value is not None and kit_value != native_value:
        kit_src = s.sources["TF_GPU_MEMORY_GROWTH"].source
        native_src = s.sources["TF_FORCE_GPU_ALLOW_GROWTH"].source
        if kit_src == IMAGE_DEFAULT and native_src == ENVIRONMENT:
            s.sources["TF_GPU_MEMORY_GROWTH"].note = "overridden by TF_FORCE_GPU_ALLOW_GROWTH"
            kit_value = native_value
        elif native_src == DERIVED or (native_src == IMAGE_DEFAULT and kit_src == ENVIRONMENT):
            # a value tfgpu run derived gives way to the variable it was derived from (which a
            # process below it may have changed before starting a child)
            native_value = kit_value
        else:
            raise ConfigError(
                "TF_GPU_MEMORY_GROWTH",
                str(kit),
                "the same setting as TF_FORCE_GPU_ALLOW_GROWTH, or only one of them",
                "true",
                why=f"contradicts TF_FORCE_GPU_ALLOW_GROWTH={native}",
            )
    s.growth = kit_value if kit_value is not None else native_value
    if s.growth is not None:
        want = "true" if s.growth else "false"
        current = s.sources.get("TF_FORCE_GPU_ALLOW_GROWTH")
        if current is None or current.value != want:
            s.sources["TF_FORCE_GPU_ALLOW_GROWTH"] = Setting(
                want, DERIVED, "from TF_GPU_MEMORY_GROWTH"
            )
