"""Prometheus metrics from the user's own TensorFlow process (TF_GPU_METRICS_PORT=PORT).

The hook calls `start_from_environment(settings)` right after it configured TensorFlow.
That starts prometheus-client's HTTP server on a daemon thread; each scrape reads:

- `tfgpu_config_info`: what the environment asked for (cap, split, growth, allocator); no pid
  label: a restarted process would start a new series each time (Prometheus' `instance` and
  the pod's labels already tell processes apart);
- `tfgpu_tensorflow_initialized`: 1 once TensorFlow's runtime is up in this process;
- per logical device, only once the runtime is up: `tfgpu_device_memory_stats_available`
  (0/1), `tfgpu_device_memory_in_use_bytes`, `tfgpu_device_memory_peak_bytes`
  (tf.config.experimental.get_memory_info) and, for logical GPUs with a cap,
  `tfgpu_device_memory_limit_bytes`;
- `tfgpu_memory_growth_enabled` (0/1; absent when not set);
- where NVML sees a driver, per card: `tfgpu_gpu_memory_total_bytes`, `tfgpu_gpu_memory_used_bytes`
  (all processes on the card, not only this one);
- prometheus-client's `process_*` figures (resident memory, CPU seconds…).

Never initialise TensorFlow's runtime early (tfgpu.act.tf_memory says why): a scrape reads device
figures only once the runtime is up.

Each device is read on its own: one whose allocator keeps no statistics is left out alone,
never another. `get_memory_info` raises whenever the device's allocator has none
(tensorflow/python/tfe_wrapper.cc, `TFE_GetMemoryInfo`). A GPU's BFC allocator always has them,
so a GPU without figures gets one warning. A CPU's depends on the host and on TensorFlow's
switches (docs/monitoring.md, "Which figures exist on which hosts"): normal, and silent; the
`tfgpu_device_memory_stats_available` gauge says which devices have figures.

The server (tfgpu.act.metrics_server) listens on TF_GPU_METRICS_ADDR (default 0.0.0.0: Prometheus
scrapes from outside the container; 127.0.0.1 keeps it inside), answers `/metrics` and `/livez`
only, gives each connection 10 s from accept to close, serves at most 8 at once, takes at most
50 a second and collects at most 4 times a second (its module says why), so a slow or flooding
client cannot pile threads or work up in the training process.

Several processes in one container: one port, one process. The first process that imports
TensorFlow binds the port; any other finds it taken, warns once and runs unmonitored.
A process forked from the one that serves (a pre-forking server) closes its inherited copy of
the listening socket, so the port never outlives the server. Give processes different ports
(TF_GPU_METRICS_PORT per worker) to see each one.

Standard library only at import time; prometheus-client is imported only when the variable
is set. `tfgpu run` and the hook refuse a bad port as they refuse any bad value (exit 78,
tfgpu.contract.settings.parse_metrics_port); `0` means no metrics. A missing package or a taken port
gives one warning and the program runs.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from typing import TYPE_CHECKING

from tfgpu.act import metrics_server, recovery
from tfgpu.act.tf_memory import logical_gpu_limits, runtime_initialized
from tfgpu.contract.errors import ConfigError
from tfgpu.contract.settings import (
    DEFAULT_METRICS_ADDR,
    EXAMPLE_METRICS_PORT,
    parse_metrics_addr,
    parse_metrics_port,
)
from tfgpu.machine import gpu_report, tegra

if TYPE_CHECKING:
    from typing import Any, Dict, Iterator, Mapping, Optional, Set, Tuple

    from tfgpu.contract.settings import Settings

VARIABLE = "TF_GPU_METRICS_PORT"
ADDR_VARIABLE = "TF_GPU_METRICS_ADDR"
EXAMPLE_PORT = EXAMPLE_METRICS_PORT
_MIB = 1 << 20

_lock = threading.Lock()
_state: Dict[str, Any] = {"attempted": False, "server": None, "port": None}


def _warn(message: str) -> None:
    sys.stderr.write(f"tfgpu: warning: metrics: {message}\n")


def parse_port(value: str) -> Optional[int]:
    """A TCP port 1-65535, or None: `0` (off) or a value tfgpu.contract.settings refuses. For a
    caller that has not validated the settings; the hook has (settings.parse_metrics_port)."""
    try:
        return parse_metrics_port(value, VARIABLE)
    except ConfigError:
        return None


def start_from_environment(
    settings: Optional[Settings] = None, environ: Optional[Mapping[str, str]] = None
) -> bool:
    """Serve metrics on TF_GPU_METRICS_PORT, once per process. Never raises; returns
    whether this process serves."""
    environ = os.environ if environ is None else environ
    raw = environ.get(VARIABLE, "")
    if not raw.strip():
        return False
    problem = None  # the settings' own refusal, as a warning: monitoring never stops a program
    addr = DEFAULT_METRICS_ADDR
    try:
        port = parse_metrics_port(raw, VARIABLE)
        if environ.get(ADDR_VARIABLE, "").strip():
            addr = parse_metrics_addr(environ[ADDR_VARIABLE], ADDR_VARIABLE)
    except ConfigError as error:
        port, problem = None, f"{error}. No metrics are served; the program runs."
    if port is None and problem is None:
        return False  # 0: no metrics
    with _lock:
        if _state["attempted"]:  # a second call (or a failed bind) does not retry or re-warn
            return _state["server"] is not None
        _state["attempted"] = True
    if port is None:
        _warn(str(problem))
        return False
    try:
        import prometheus_client
    except ImportError:
        _warn(
            f"{VARIABLE} is set but prometheus-client is not installed "
            "(pip install 'tfgpu[metrics]'). No metrics are served; the program runs."
        )
        return False
    try:
        return _serve(prometheus_client, addr, port, settings, environ)
    except OSError as e:
        _warn(
            f"cannot listen on port {port} of {addr} ({e.strerror or e}); another process in this "
            f"container may already serve it. This process (pid {os.getpid()}) is not "
            f"monitored; give it its own {VARIABLE} to see it. The program runs."
        )
    except Exception as e:  # never let monitoring break the user's program
        _warn(f"could not start ({type(e).__name__}: {e}); the program runs.")
    return False


def _serve(
    prometheus_client: Any,
    addr: str,
    port: int,
    settings: Optional[Settings],
    environ: Mapping[str, str],
) -> bool:
    registry = prometheus_client.CollectorRegistry(auto_describe=False)
    registry.register(TensorFlowCollector(_config_labels(settings, environ)))
    prometheus_client.ProcessCollector(registry=registry)
    app = prometheus_client.make_wsgi_app(registry)
    server = metrics_server.serve(app, addr, port, livez=_liveness)
    with _lock:
        _state["server"] = server
        _state["port"] = port
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_close_inherited_socket)
    return True


def _liveness() -> Tuple[bool, str]:
    """/livez: the recovery rule's verdict (alive where the rule is off)."""
    return recovery.liveness()


def _close_inherited_socket() -> None:
    """In a forked child: the serving thread did not survive the fork, but the listening
    socket did; close the child's copy so the port is free once the parent exits."""
    server = _state.get("server")
    socket = getattr(server, "socket", None)
    if socket is not None:
        with contextlib.suppress(OSError):
            socket.close()
    _state["server"] = None


def _config_labels(settings: Optional[Settings], environ: Mapping[str, str]) -> Dict[str, str]:
    def source(name: str) -> str:
        if settings is not None and name in settings.sources:
            return settings.sources[name].value
        return environ.get(name, "")

    return {
        "memory_limit": source("TF_GPU_MEM_LIMIT"),
        "virtual_devices": source("TF_GPU_VIRTUAL_DEVICES"),
        "memory_growth": source("TF_GPU_MEMORY_GROWTH"),
        "allocator": source("TF_GPU_ALLOCATOR"),
    }


class TensorFlowCollector:
    """A prometheus-client custom collector; every figure is read at scrape time."""

    def __init__(self, config: Dict[str, str]) -> None:
        self._config = config
        self._nvml_absent = False
        self._warned: Set[str] = set()

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily, InfoMetricFamily

        info = InfoMetricFamily("tfgpu_config", "TensorFlow memory settings this process asked for")
        info.add_metric([], self._config)
        yield info
        initialized = runtime_initialized()
        yield GaugeMetricFamily(
            "tfgpu_tensorflow_initialized",
            "1 once TensorFlow's runtime is up in this process (device figures appear then)",
            value=1 if initialized else 0,
        )
        growth = os.environ.get(
            "TF_FORCE_GPU_ALLOW_GROWTH"
        )  # set by the kit from TF_GPU_MEMORY_GROWTH
        if growth in ("true", "false"):
            yield GaugeMetricFamily(
                "tfgpu_memory_growth_enabled",
                "1 when TensorFlow allocates GPU memory on demand (up to the cap, if any)",
                value=1 if growth == "true" else 0,
            )
        if initialized:
            yield from self._guarded("tensorflow", self._devices, GaugeMetricFamily)
            yield from self._guarded("tensorflow caps", self._limits, GaugeMetricFamily)
        if "tfgpu.act.recovery" in sys.modules:  # the rule is on (the hook started the watch)
            yield from self._guarded("recovery", self._recovery, GaugeMetricFamily)
        if not self._nvml_absent:
            yield from self._guarded("nvml", self._cards, GaugeMetricFamily)

    def _guarded(self, part: str, read: Any, family: Any) -> Iterator[Any]:
        """A failing source leaves its metrics out (one warning), never the whole scrape."""
        try:
            metrics = list(read(family))
        except Exception as e:
            if part not in self._warned:
                self._warned.add(part)
                _warn(f"reading {part} figures failed ({type(e).__name__}: {e}); left out")
            return
        yield from metrics

    def _devices(self, family: Any) -> Iterator[Any]:
        tf = sys.modules["tensorflow"]
        labels = ["device", "device_type"]
        available = family(
            "tfgpu_device_memory_stats_available",
            "1 when TensorFlow's allocator keeps figures for the device, 0 when it keeps none "
            "(CPUs on some hosts; its in-use and peak figures are then absent)",
            labels=labels,
        )
        in_use = family(
            "tfgpu_device_memory_in_use_bytes",
            "Bytes TensorFlow has allocated on the device now (get_memory_info 'current')",
            labels=labels,
        )
        peak = family(
            "tfgpu_device_memory_peak_bytes",
            "Most bytes TensorFlow has had allocated on the device at once ('peak')",
            labels=labels,
        )
        for device in tf.config.list_logical_devices():
            if device.device_type not in ("GPU", "CPU"):
                continue
            key = [device.name, device.device_type]
            stats = self._memory_info(tf, device.name, device.device_type)
            available.add_metric(key, 0 if stats is None else 1)
            if stats is not None:
                in_use.add_metric(key, float(stats["current"]))
                peak.add_metric(key, float(stats["peak"]))
        yield available
        yield in_use
        yield peak

    def _memory_info(self, tf: Any, name: str, device_type: str) -> Optional[Dict[str, Any]]:
        """get_memory_info for one device, or None where its allocator keeps no figures.
        Silent for a CPU (host-dependent, see the module doc); one warning per GPU."""
        try:
            return dict(tf.config.experimental.get_memory_info(name))
        except Exception as e:
            if device_type == "GPU" and name not in self._warned:
                self._warned.add(name)
                _warn(
                    f"TensorFlow gives no memory figures for {name} ({type(e).__name__}: {e}); "
                    "its in-use and peak figures are left out, the other devices' are served"
                )
            return None

    def _limits(self, family: Any) -> Iterator[Any]:
        limits = logical_gpu_limits(sys.modules["tensorflow"])
        if limits:
            limit = family(
                "tfgpu_device_memory_limit_bytes",
                "The memory cap of a logical GPU as configured in TensorFlow",
                labels=["device"],
            )
            for name, mib in limits:
                limit.add_metric([name], mib * _MIB)
            yield limit

    def _recovery(self, family: Any) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily

        watch = recovery.current()
        if watch is None:
            return
        yield CounterMetricFamily(
            "tfgpu_recoveries",
            "Times a process of this container ended itself at its cap (TF_GPU_RECOVER_*); "
            "kept in a file, so it survives the restarts it causes",
            value=recovery.recoveries(),
        )
        yield family(
            "tfgpu_recovery_stuck",
            "1 while the recovery rule judges this process stuck at its cap (/livez is 503)",
            value=0 if watch.reason is None else 1,
        )
        yield family(
            "tfgpu_recovery_after_seconds",
            "The rule's period: how long a GPU must stay at its share of the cap",
            value=watch.rule.after_s,
        )
        streak = family(
            "tfgpu_recovery_streak_seconds",
            "How long each capped GPU has been at or above the rule's share of its cap",
            labels=["device"],
        )
        for device, seconds in watch.streaks().items():
            streak.add_metric([device], seconds)
        yield streak

    def _cards(self, family: Any) -> Iterator[Any]:
        report = gpu_report.read()
        if isinstance(report, tegra.TegraReport):  # a Jetson: no NVML; /proc/meminfo's figures
            yield from tegra.metric_families(report, family)
            return
        if report.driver_present is False or not report.found:
            self._nvml_absent = report.driver_present is False  # no driver will not appear later
            return
        labels = ["gpu", "uuid", "name"]
        total = family(
            "tfgpu_gpu_memory_total_bytes", "Total memory of the card (NVML)", labels=labels
        )
        used = family(
            "tfgpu_gpu_memory_used_bytes",
            "Memory in use on the card by all processes (NVML)",
            labels=labels,
        )
        for gpu in report.gpus:
            key = [str(gpu.index), gpu.uuid, gpu.name]
            total.add_metric(key, gpu.total_mib * _MIB)
            used.add_metric(key, (gpu.total_mib - gpu.free_mib) * _MIB)
        yield total
        yield used
