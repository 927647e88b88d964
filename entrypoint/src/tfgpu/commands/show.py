"""`tfgpu show [--json]`: the effective settings, per variable, with their source."""

from __future__ import annotations

import os
import sys

from tfgpu import is_disabled
from tfgpu.commands.summary import describe_plan
from tfgpu.contract.errors import EXIT_OK, ConfigError
from tfgpu.contract.settings import KIT_VARIABLES, NATIVE_VARIABLES, parse_environment
from tfgpu.machine import tegra
from tfgpu.plan.device_plan import make_plan

TYPE_CHECKING = False  # not `from typing import …`: importing typing costs ms at start-up
if TYPE_CHECKING:
    from typing import Dict, List, Mapping, Optional, TextIO, Tuple

    from tfgpu.contract.problems import Problem
    from tfgpu.contract.settings import Settings
    from tfgpu.machine.kernel_cache import KernelCache
    from tfgpu.plan.gpu_verdicts import GpuVerdict


def show(
    as_json: bool = False, environ: Optional[Mapping[str, str]] = None, out: Optional[TextIO] = None
) -> int:
    environ = os.environ if environ is None else environ
    out = sys.stdout if out is None else out
    try:
        settings = parse_environment(environ)
    except ConfigError as e:
        if as_json:
            import json

            doc = {
                "ok": False,
                "enabled": True,
                "settings": {},
                "warnings": [],
                "error": str(e),
                "recovery": None,
                "cluster": None,
                "keras": None,
                "gpu_support": [],
                "kernel_cache": None,
            }
            out.write(json.dumps(doc) + "\n")
        sys.stderr.write(f"tfgpu: error: {e}\n")
        return e.exit_code
    table: Dict[str, Dict[str, str]] = {
        name: settings.sources[name].as_json()
        for name in KIT_VARIABLES + NATIVE_VARIABLES
        if name in settings.sources
    }
    warnings = list(settings.warnings)
    if is_disabled(environ):
        table = {
            "TF_GPU_CONFIG": {"value": environ.get("TF_GPU_CONFIG", ""), "source": "environment"}
        }
    if as_json:
        import json

        doc = {
            "ok": True,
            "enabled": settings.enabled,
            "settings": table,
            "warnings": warnings,
            "error": None,
            "recovery": None if settings.recovery is None else settings.recovery.explain(),
            "cluster": None if settings.tf_config is None else settings.tf_config.explain(),
            "keras": which_keras(settings.legacy_keras),
        }
        jetson = tegra.query(environ)
        if jetson is not None:  # a Jetson: what percentages are taken of
            doc.update(tegra.json_part(jetson))
        doc["gpu_support"], doc["kernel_cache"] = [], None
        if settings.enabled:
            verdicts, _, cache = _gpus(settings, environ)
            tf = environ.get("TFGPU_IMAGE_TF", "")
            doc["gpu_support"] = [v.as_json(tf) for v in verdicts]
            doc["kernel_cache"] = cache.as_json()
        out.write(json.dumps(doc, indent=2) + "\n")
        return EXIT_OK
    if not settings.enabled:
        out.write("TF_GPU_CONFIG=off: the kit does nothing (no hook, no checks)\n")
        return EXIT_OK
    width = max(len(n) for n in KIT_VARIABLES + NATIVE_VARIABLES)
    for name in KIT_VARIABLES + NATIVE_VARIABLES:
        entry = table.get(name)
        if entry is None:
            out.write(f"{name:<{width}}  (unset)\n")
        else:
            note = f"; {entry['note']}" if entry.get("note") else ""
            out.write(f"{name:<{width}}  {entry['value']!r:<12} {entry['source']}{note}\n")
    out.write(f"\nasks for: {describe_plan(make_plan(settings, []).as_json(), settings)}\n")
    if settings.recovery is not None:
        out.write(f"recovery: {settings.recovery.explain()}\n")
    if settings.tf_config is not None:
        out.write(f"cluster: {settings.tf_config.explain()}\n")
    out.write(f"keras: {which_keras(settings.legacy_keras)}\n")
    jetson = tegra.query(environ)
    if jetson is not None:  # a Jetson: what percentages are taken of
        out.write("".join(f"{line}\n" for line in tegra.facts_lines(jetson.tegra_json())))
    verdicts, problems, cache = _gpus(settings, environ)
    for v in verdicts:
        out.write(
            f"gpu {v.index}: {v.gpu.name}, {v.verdict.describe(environ.get('TFGPU_IMAGE_TF', ''))}"
            "\n"
        )
    out.write(f"{cache.describe()}\n")
    for w in warnings:
        out.write(f"warning: {w}\n")
    for problem in problems:
        out.write(f"{problem}\n")
    return EXIT_OK


def _gpus(
    settings: Settings, environ: Mapping[str, str]
) -> Tuple[List[GpuVerdict], List[Problem], KernelCache]:
    """What each visible GPU means for this TensorFlow (NVML; nothing without a driver), and the
    kernel cache the driver would use."""
    # ~6 ms (-X importtime; nvml's import of pynvml runs only with a driver): `show` only
    from tfgpu.machine import gpu_report, kernel_cache, nvml
    from tfgpu.plan import gpu_verdicts

    report = gpu_report.read(environ)
    gpus, _ = nvml.visible_gpus(report, settings.visible_devices, environ.get("CUDA_DEVICE_ORDER"))
    verdicts, problems = gpu_verdicts.judge_gpus(gpus if report.found else [], environ)
    return verdicts, problems, kernel_cache.inspect(environ)


def _installed(distribution: str) -> Optional[str]:
    from importlib import metadata

    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def which_keras(legacy: Optional[bool]) -> str:
    """The Keras `tf.keras` gives this process (TF_USE_LEGACY_KERAS, tfgpu.contract.tf_config)."""
    if legacy:
        version = _installed("tf-keras")
        if version is None:
            return "tf-keras (Keras 2) asked for by TF_USE_LEGACY_KERAS, but it is not installed"
        return f"tf-keras {version} (Keras 2; TF_USE_LEGACY_KERAS)"
    version = _installed("keras")
    found = f"keras {version}" if version else "keras (not installed)"
    return f"{found}, as TensorFlow imports it (TF_USE_LEGACY_KERAS=1 for tf-keras)"
