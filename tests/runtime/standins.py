"""A stand-in for `tf.config`. It is NOT TensorFlow (`pynvml`'s: tests/pynvml_standin.py).

The tf stand-in records calls and enforces TensorFlow 2.21's rules with its exact
messages, as listed in /work/shared/reference/tf-gpu-facts.md §3 (eager/context.py):
tests against it show our call sequence obeys those rules. It proves nothing about a
real GPU; no GPU was used in these tests.
"""

from __future__ import annotations

import types
from collections import namedtuple
from typing import Any

PhysicalDevice = namedtuple("PhysicalDevice", ["name", "device_type"])
LogicalDevice = namedtuple("LogicalDevice", ["name", "device_type"])
LogicalDeviceConfiguration = namedtuple(
    "LogicalDeviceConfiguration",
    ["memory_limit", "experimental_priority", "experimental_device_ordinal"],
    defaults=[None, None, None],
)


class StandinConfig:
    """`tf.config` with TensorFlow's validation order and messages."""

    LogicalDeviceConfiguration = LogicalDeviceConfiguration

    def __init__(self, gpus: int, cpus: int = 1) -> None:
        self.devices = [PhysicalDevice(f"/physical_device:CPU:{i}", "CPU") for i in range(cpus)] + [
            PhysicalDevice(f"/physical_device:GPU:{i}", "GPU") for i in range(gpus)
        ]
        self.calls: list[tuple[str, Any, Any]] = []  # what changes the configuration
        # Device listings. TensorFlow's list_physical_devices loads CUDA and runs cuInit (after
        # which forked children cannot use CUDA), so the kit must list only when it needs to.
        self.queries: list[tuple[str, str | None]] = []
        self.logical: dict[PhysicalDevice, list[LogicalDeviceConfiguration]] = {}
        self.growth: dict[PhysicalDevice, bool] = {}
        self.initialized = False
        self.experimental = types.SimpleNamespace(
            set_memory_growth=self.set_memory_growth, get_memory_growth=self.get_memory_growth
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
            if any(c.memory_limit is not None for c in configs):
                raise ValueError(
                    "Setting memory limit on CPU virtual devices is currently not supported"
                )
        elif dev.device_type == "GPU":
            if any(c.memory_limit is None for c in configs):
                raise ValueError("Setting memory limit is required for GPU virtual devices")
        else:
            raise ValueError(f"Virtual devices are not supported for {dev.device_type}")
        if self.initialized:
            if self.logical.get(dev) == list(configs):
                return
            raise RuntimeError("Virtual devices cannot be modified after being initialized")
        self.logical[dev] = list(configs)

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

    def get_logical_device_configuration(
        self, dev: PhysicalDevice
    ) -> list[LogicalDeviceConfiguration] | None:
        """As TensorFlow: the list set for `dev`, None if none was; it initialises nothing."""
        self._known(dev)
        configs = self.logical.get(dev)
        return list(configs) if configs is not None else None

    def get_memory_growth(self, dev: PhysicalDevice) -> bool | None:
        return self.growth.get(dev)

    def _initialize(self) -> None:
        if self.initialized:
            return
        gpus = self.list_physical_devices("GPU")
        if not any(g in self.logical for g in gpus):  # a logical config drops growth on every GPU
            values = {self.growth.get(g, False) for g in gpus}
            if len(values) > 1:
                raise ValueError("Memory growth cannot differ between GPU devices")
        self.initialized = True

    def list_logical_devices(self, device_type: str | None = None) -> list[LogicalDevice]:
        self._initialize()
        out: list[LogicalDevice] = []
        for kind in ("CPU", "GPU"):
            n = 0
            for dev in self.list_physical_devices(kind):
                for _ in self.logical.get(dev, [LogicalDeviceConfiguration()]):
                    out.append(LogicalDevice(f"/device:{kind}:{n}", kind))
                    n += 1
        return [d for d in out if device_type is None or d.device_type == device_type]


POLICIES = ("mixed_float16", "mixed_bfloat16", "float32", "float16", "bfloat16", "float64")


def standin_tf(gpus: int, *, cuda_build: bool = True) -> types.SimpleNamespace:
    """A `tensorflow` module stand-in: config, sysconfig, keras.mixed_precision."""
    policy = {"name": "float32"}

    def set_global_policy(name: str) -> None:
        if name not in POLICIES:
            raise ValueError(f"Cannot convert '{name}' to a mixed precision DTypePolicy.")
        policy["name"] = name

    info = {"is_cuda_build": cuda_build, "is_rocm_build": False, "is_tensorrt_build": False}
    if cuda_build:
        info.update(cuda_version="12.5.1", cudnn_version="9")
    return types.SimpleNamespace(
        config=StandinConfig(gpus),
        sysconfig=types.SimpleNamespace(get_build_info=lambda: dict(info)),
        keras=types.SimpleNamespace(
            mixed_precision=types.SimpleNamespace(set_global_policy=set_global_policy)
        ),
        policy=policy,
    )
