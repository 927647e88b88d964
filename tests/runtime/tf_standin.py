"""A stand-in for `tf.config` (NOT TensorFlow); `pynvml`'s is tests/pynvml_standin.py.

The tf stand-in records calls and enforces TensorFlow 2.21's `tf.config` rules with its exact
messages. Its sources are primary:

- the Python rules and messages: `tensorflow/python/eager/context.py` of the PyPI wheel
  tensorflow==2.21.0 (the tensorflow-cpu 2.21.0 in .venv ships the same file): `Context.
  set_memory_growth`, `get_memory_growth`, `set_logical_device_configuration`,
  `get_logical_device_configuration`, `set_visible_devices`, `get_visible_devices`,
  `_compute_device_options` (run when the runtime initialises);
- `tf.config.experimental.get_memory_info`: tensorflow/tensorflow,
  `tensorflow/python/tfe_wrapper.cc`, `TFE_GetMemoryInfo`: the device's allocator's
  `GetStats()`, or `ValueError("Allocator stats not available for device '…'")` when it has
  none. A GPU's BFC allocator always has them; whether the CPU's has them depends on the host
  and on TensorFlow's switches (`cpu_stats` here; docs/monitoring.md);
- what the GPU allocator does with `TF_FORCE_GPU_ALLOW_GROWTH`: tensorflow/tensorflow,
  `tensorflow/core/common_runtime/gpu/gpu_bfc_allocator.cc`, `GetAllowGrowthValue`; one BFC
  allocator per TensorFlow GPU id, i.e. per logical GPU (`gpu_process_state.cc`,
  `GPUProcessState::GetGPUAllocator`). tensorflow-cpu 2.21 has no GPU allocator, but its
  `libtensorflow_framework.so.2` carries the same messages in the PluggableDevice allocator's
  copy of the function (`strings libtensorflow_framework.so.2 | grep TF_FORCE_GPU_ALLOW_GROWTH`).

tests/runtime/test_standin_likeness.py runs the same calls on this stand-in and on the real
tensorflow-cpu 2.21 and compares results, exception types and messages; GPU rules are checked
there on GPUs added to the real context's device list (TensorFlow's own Python code runs;
no GPU kernel does). Tests against the stand-in show our call sequence obeys these rules. It
proves nothing about a real GPU; no GPU was used in these tests.
"""

from __future__ import annotations

import types
from collections import namedtuple
from collections.abc import Mapping
from typing import Any

PhysicalDevice = namedtuple("PhysicalDevice", ["name", "device_type"])
LogicalDevice = namedtuple("LogicalDevice", ["name", "device_type"])
LogicalDeviceConfiguration = namedtuple(
    "LogicalDeviceConfiguration",
    ["memory_limit", "experimental_priority", "experimental_device_ordinal"],
    defaults=[None, None, None],
)
# What each logical GPU's BFC allocator is built with: memory_limit_mb None = the whole card
# (less TensorFlow's reserve); allow_growth after TF_FORCE_GPU_ALLOW_GROWTH.
GpuAllocator = namedtuple("GpuAllocator", ["device", "memory_limit_mb", "allow_growth"])


def allow_growth_value(orig_value: bool, environ: Mapping[str, str]) -> tuple[bool, str | None]:
    """gpu_bfc_allocator.cc `GetAllowGrowthValue`: exactly "true"/"false" (strcmp, so case
    counts) override the configured value, with a WARNING when they change it; any other value
    is logged as an ERROR and the configured value is kept. Returns (value, log line)."""
    forced = environ.get("TF_FORCE_GPU_ALLOW_GROWTH")
    if forced is None:
        return orig_value, None
    override = (
        "W Overriding orig_value setting because the TF_FORCE_GPU_ALLOW_GROWTH environment"
        f" variable is set. Original config value was {int(orig_value)}."
    )
    if forced == "false":
        return False, override if orig_value else None
    if forced == "true":
        return True, None if orig_value else override
    return orig_value, (
        "E The TF_FORCE_GPU_ALLOW_GROWTH environment variable is set but could not be parsed:"
        f' "{forced}". Valid values are "true" or "false". Using original config value'
        f" of {int(orig_value)}."  # C++ streams a bool as 0/1
    )


class NotFoundError(Exception):
    """tf.errors.NotFoundError, as the runtime raises it when no logical CPU is left."""


class StandinConfig:
    """`tf.config` with TensorFlow's validation order and messages (eager/context.py)."""

    LogicalDeviceConfiguration = LogicalDeviceConfiguration

    def __init__(
        self,
        gpus: int,
        cpus: int = 1,
        environ: Mapping[str, str] | None = None,
        *,
        cpu_stats: bool = True,
    ) -> None:
        self.devices = [PhysicalDevice(f"/physical_device:CPU:{i}", "CPU") for i in range(cpus)] + [
            PhysicalDevice(f"/physical_device:GPU:{i}", "GPU") for i in range(gpus)
        ]
        self.calls: list[tuple[str, Any, Any]] = []  # what changes the configuration
        # Device listings. TensorFlow's list_physical_devices loads CUDA and runs cuInit (after
        # which forked children cannot use CUDA), so the kit must list only when it needs to.
        self.queries: list[tuple[str, str | None]] = []
        self.logical: dict[PhysicalDevice, list[LogicalDeviceConfiguration]] = {}
        # TensorFlow's _memory_growth_map: GPUs only, None until set.
        self.growth: dict[PhysicalDevice, bool | None] = {
            d: None for d in self.devices if d.device_type == "GPU"
        }
        self.visible = list(self.devices)
        # The process environment the GPU allocators read when the runtime initialises.
        self.environ: Mapping[str, str] = {} if environ is None else environ
        self.allocators: list[GpuAllocator] = []  # built at initialisation
        self.log: list[str] = []  # TensorFlow's C++ log lines, "W ..." / "E ..."
        self.initialized = False
        # Whether the CPU's allocator keeps statistics (host-dependent in real TensorFlow);
        # bytes in use and peak per logical device, as a test sets them.
        self.cpu_stats = cpu_stats
        self.memory: dict[str, tuple[int, int]] = {}
        self.experimental = types.SimpleNamespace(
            set_memory_growth=self.set_memory_growth,
            get_memory_growth=self.get_memory_growth,
            get_memory_info=self.get_memory_info,
        )

    def list_physical_devices(self, device_type: str | None = None) -> list[PhysicalDevice]:
        self.queries.append(("list_physical_devices", device_type))
        return [d for d in self.devices if device_type is None or d.device_type == device_type]

    def _known(self, dev: PhysicalDevice) -> None:
        if dev not in self.devices:
            raise ValueError(f"Unrecognized device: {dev!r}")

    def set_logical_device_configuration(self, dev: PhysicalDevice, configs: list[Any]) -> None:
        self.calls.append(("set_logical_device_configuration", dev, list(configs)))
        self._known(dev)
        if dev.device_type == "CPU":
            for c in configs:
                if c.memory_limit is not None:
                    raise ValueError(
                        "Setting memory limit on CPU virtual devices is currently not supported"
                    )
                for field in ("experimental_priority", "experimental_device_ordinal"):
                    if getattr(c, field) is not None:  # sic: two spaces, as TensorFlow
                        raise ValueError(
                            f"Setting {field} on CPU virtual  devices is currently not supported"
                        )
        elif dev.device_type == "GPU":
            if any(c.memory_limit is None for c in configs):
                raise ValueError("Setting memory limit is required for GPU virtual devices")
        else:
            raise ValueError(f"Virtual devices are not supported for {dev.device_type}")
        if self.logical.get(dev) == list(configs):
            return
        if self.initialized:
            raise RuntimeError("Virtual devices cannot be modified after being initialized")
        self.logical[dev] = list(configs)

    def get_logical_device_configuration(self, dev: PhysicalDevice) -> list[Any] | None:
        """As TensorFlow: the list set for `dev`, None if none was; it initialises nothing."""
        self._known(dev)
        configs = self.logical.get(dev)
        return list(configs) if configs is not None else None

    def set_memory_growth(self, dev: PhysicalDevice, enable: bool) -> None:
        self.calls.append(("set_memory_growth", dev, enable))
        self._known(dev)
        if dev in self.logical:
            raise ValueError("Cannot set memory growth on device when virtual devices configured")
        if dev.device_type != "GPU":
            raise ValueError("Cannot set memory growth on non-GPU and non-Pluggable devices")
        if self.growth.get(dev) == enable:
            return
        if self.initialized:
            raise RuntimeError("Physical devices cannot be modified after being initialized")
        self.growth[dev] = enable

    def get_memory_growth(self, dev: PhysicalDevice) -> bool | None:
        """None for a GPU never set; a CPU is not in TensorFlow's map: KeyError, as TensorFlow."""
        self._known(dev)
        return self.growth[dev]

    def set_visible_devices(self, devices: Any, device_type: str | None = None) -> None:
        self.calls.append(("set_visible_devices", devices, device_type))
        devices = devices if isinstance(devices, list) else [devices]
        for d in devices:
            self._known(d)
            if device_type is not None and d.device_type != device_type:
                raise ValueError(f"Unrecognized device: {d!r}")
        kept = [d for d in self.visible if d.device_type != device_type] if device_type else []
        if kept + devices == self.visible:
            return
        if self.initialized:
            raise RuntimeError("Visible devices cannot be modified after being initialized")
        self.visible = kept + devices

    def get_visible_devices(self, device_type: str | None = None) -> list[PhysicalDevice]:
        return [d for d in self.visible if device_type is None or d.device_type == device_type]

    def gpu_options(self) -> dict[str, Any]:
        """The GPUOptions TensorFlow sends to its runtime (`_compute_device_options`), with the
        same ValueErrors. A logical configuration on ANY device (a CPU too) sends a (maybe
        empty) virtual-device list for every visible GPU, and then growth is left unset."""
        visible: list[str] = []
        virtual: list[dict[str, list[Any]]] = []
        growths: set[bool | None] = set()
        for index, dev in enumerate(self.list_physical_devices("GPU")):
            if dev not in self.visible:
                continue
            growths.add(self.growth[dev])
            visible.append(str(index))
            if self.logical:
                configs = self.logical.get(dev, [])
                limits = [c.memory_limit for c in configs]
                priority = [c.experimental_priority for c in configs]
                priority = [p for p in priority if p is not None]
                ordinals = [c.experimental_device_ordinal for c in configs]
                ordinals = [o for o in ordinals if o is not None]
                if priority and len(priority) != len(limits):
                    raise ValueError("priority must be specified for all virtual devices")
                if ordinals and len(ordinals) != len(limits):
                    raise ValueError("device_ordinals must be specified for all virtual devices")
                virtual.append(
                    {"memory_limit_mb": limits, "priority": priority, "device_ordinal": ordinals}
                )
        allow_growth: bool | None = None
        if not virtual and growths:
            if len(growths) > 1:
                raise ValueError("Memory growth cannot differ between GPU devices")
            allow_growth = growths.pop()
        return {
            "allow_growth": bool(allow_growth),  # a proto3 bool: unset reads as False
            "visible_device_list": ",".join(visible),
            "virtual_devices": virtual,
        }

    def _initialize(self) -> None:
        if self.initialized:
            return
        options = self.gpu_options()
        if not self._logical_cpus():  # the runtime refuses to start; nothing is initialised
            raise NotFoundError("No CPU devices are available in this process")
        growth, line = allow_growth_value(options["allow_growth"], self.environ)
        per_gpu = options["virtual_devices"] or [{"memory_limit_mb": []}] * len(
            options["visible_device_list"].split(",") if options["visible_device_list"] else []
        )
        self.allocators = []
        for gpu in per_gpu:
            for limit in gpu["memory_limit_mb"] or [None]:
                name = f"/device:GPU:{len(self.allocators)}"
                self.allocators.append(GpuAllocator(name, limit, growth))
        if line is not None:
            self.log.extend([line] * len(self.allocators))  # each allocator reads the variable
        self.initialized = True

    def list_logical_devices(self, device_type: str | None = None) -> list[LogicalDevice]:
        self._initialize()
        out = [LogicalDevice(f"/device:CPU:{n}", "CPU") for n in range(self._logical_cpus())]
        out += [LogicalDevice(a.device, "GPU") for a in self.allocators]
        return [d for d in out if device_type is None or d.device_type == device_type]

    def get_memory_info(self, device: str) -> dict[str, int]:
        """tfe_wrapper.cc `TFE_GetMemoryInfo` (after `ensure_initialized`): the matched
        device's allocator statistics, or TensorFlow's ValueError when it keeps none."""
        self._initialize()
        name = device if device.startswith("/device:") else f"/device:{device.upper()}"
        matched = [d for d in self.list_logical_devices() if d.name == name]
        if not matched:
            raise ValueError(f"No matching devices found for '{device}'")
        if matched[0].device_type == "CPU" and not self.cpu_stats:
            raise ValueError(f"Allocator stats not available for device '{device}'")
        current, peak = self.memory.get(name, (0, 0))
        return {"current": current, "peak": peak}

    def _logical_cpus(self) -> int:
        n = 0
        for dev in self.get_visible_devices("CPU"):
            n += len(self.logical.get(dev, [LogicalDeviceConfiguration()]))  # [] is none
        return n


POLICIES = ("mixed_float16", "mixed_bfloat16", "float32", "float16", "bfloat16", "float64")


def standin_tf(
    gpus: int, *, cuda_build: bool = True, cpu_stats: bool = True
) -> types.SimpleNamespace:
    """A `tensorflow` module stand-in: config, sysconfig, keras.mixed_precision."""
    policy = {"name": "float32"}

    def set_global_policy(name: str) -> None:
        if name not in POLICIES:
            raise ValueError(f"Cannot convert '{name}' to a mixed precision DTypePolicy.")
        policy["name"] = name

    info: dict[str, object] = {
        "is_cuda_build": cuda_build,
        "is_rocm_build": False,
        "is_tensorrt_build": False,
    }
    if cuda_build:
        info.update(cuda_version="12.5.1", cudnn_version="9")
    return types.SimpleNamespace(
        config=StandinConfig(gpus, cpu_stats=cpu_stats),
        sysconfig=types.SimpleNamespace(get_build_info=lambda: dict(info)),
        keras=types.SimpleNamespace(
            mixed_precision=types.SimpleNamespace(set_global_policy=set_global_policy)
        ),
        policy=policy,
    )
