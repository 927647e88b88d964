#!/usr/bin/env python3
"""NVML smoke: the kit's GPU facts on a host with only an NVIDIA driver and Python.

No TensorFlow, no Docker. From a checkout of the kit:

    pip install nvidia-ml-py prometheus-client pyyaml pydantic packaging rich jinja2
    python3 tools/nvml_smoke.py > nvml-smoke.json

It reads the cards through NVML itself (the truth), then asks the kit the way a user does and
compares every figure:

- `tfgpu check --json` (the runtime, run as a command) with TF_GPU_MEM_LIMIT=25%, with one cap
  per GPU, and with a cap larger than GPU 0: the totals, driver and resolved caps in MiB;
- the runtime's driver verdict (tfgpu.machine.driver.check_driver, with each kit image's floors)
  against `build.py check --json` run without --driver (it reads the driver through NVML);
- the metrics endpoint (tfgpu.act.metrics, TF_GPU_METRICS_PORT) of a child process: the
  `tfgpu_gpu_memory_total_bytes` / `_used_bytes` gauges against NVML;
- each GPU's compute capability, and what it means for every TensorFlow of the matrix: the
  runtime's verdict (`tfgpu check --json`'s `gpu_support`, given each image's
  TFGPU_IMAGE_GPU_* variables) against `build.py check`'s for GPU 0 (native, PTX JIT, known to
  fail, no kernels: docs/gpus.md).

Prints one JSON document on stdout. Exit 0: every figure agreed; 1: a figure was wrong (each
check says what was expected and what came); 2: it cannot run here (no driver, a package
missing: the message names it). Packages beyond nvidia-ml-py: prometheus-client (the metrics
endpoint) and the build side's pyyaml, pydantic, packaging, rich, jinja2 (`build.py check`).
"""

from __future__ import annotations

import importlib.util
import json
import os
import platform
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RUNTIME = ROOT / "entrypoint" / "src"
MIB = 1 << 20
NEEDED = {
    "pynvml": "nvidia-ml-py",
    "prometheus_client": "prometheus-client",
    "yaml": "pyyaml",
    "pydantic": "pydantic",
    "packaging": "packaging",
    "rich": "rich",
    "jinja2": "jinja2",
}
# The build side's verdict and the runtime's severity that must go with it.
EXPECTED_SEVERITY: dict[str, set[str | None]] = {
    "native": {None},
    "minor-version compatibility": {"warning"},
    "needs forward compatibility": {"warning", "error"},  # the runtime knows the compat package
    "does not run": {"error"},
}


class CannotRun(Exception):
    """The smoke cannot run on this host (exit 2)."""


def nvml_truth() -> dict[str, Any]:
    """Driver and cards as NVML reports them, read directly with pynvml."""
    import pynvml

    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        raise CannotRun(f"NVML cannot start on this host: {exc}") from None
    try:
        cuda = int(pynvml.nvmlSystemGetCudaDriverVersion())
        gpus = []
        for i in range(int(pynvml.nvmlDeviceGetCount())):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
            gpus.append(
                {
                    "index": i,
                    "compute_capability": f"{major}.{minor}",
                    "name": _text(pynvml.nvmlDeviceGetName(handle)),
                    "uuid": _text(pynvml.nvmlDeviceGetUUID(handle)),
                    "total_bytes": int(memory.total),
                    "used_bytes": int(memory.used),
                }
            )
        return {
            "driver": _text(pynvml.nvmlSystemGetDriverVersion()),
            "cuda": f"{cuda // 1000}.{cuda % 1000 // 10}",
            "gpus": gpus,
        }
    finally:
        pynvml.nvmlShutdown()


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _runtime_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TF_", "TFGPU_"))}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(RUNTIME), env.get("PYTHONPATH")) if p)
    # NVML numbers cards in PCI order; CUDA (and so the runtime) fastest first unless told
    # otherwise, and the runtime trusts an index only when both orders agree.
    env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    env.update(extra)
    return env


def tfgpu_check(**env: str) -> dict[str, Any]:
    """`tfgpu check --json` with these variables (TensorFlow absent: the rest is reported)."""
    done = subprocess.run(
        [sys.executable, "-m", "tfgpu", "check", "--json"],
        env=_runtime_env(**env),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    try:
        report: dict[str, Any] = json.loads(done.stdout)
    except json.JSONDecodeError:
        report = {"unreadable": done.stdout[-2000:], "stderr": done.stderr[-2000:]}
    report["exit_code"] = done.returncode
    report["stderr_tail"] = done.stderr.strip().splitlines()[-3:]
    return report


def build_check() -> dict[str, Any]:
    """`build.py check --json` with no --driver: the build side reads the driver itself."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "build.py"), "check", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    try:
        report: dict[str, Any] = json.loads(done.stdout)
    except json.JSONDecodeError:
        return {"unreadable": done.stdout[-2000:], "stderr": done.stderr[-2000:]}
    return report


def runtime_driver_verdicts(driver: str, build: dict[str, Any]) -> dict[str, str | None]:
    """The runtime's driver verdict (most severe problem) per TensorFlow version, using the
    floors the build side writes into each image (TFGPU_IMAGE_*)."""
    sys.path.insert(0, str(RUNTIME))
    from tfgpu.machine.driver import check_driver
    from tfgpu.machine.nvml import query

    gpus = query().gpus
    verdicts: dict[str, str | None] = {}
    for result in build.get("results", []):
        image = {
            "TFGPU_IMAGE_CUDA": ".".join(result["cuda"].split(".")[:2]),
            "TFGPU_IMAGE_DRIVER_MIN": result["driver_min"],
            "TFGPU_IMAGE_DRIVER_MIN_COMPAT": result["driver_min_compat"],
        }
        severities = [p.severity for p in check_driver(driver, image, gpus)]
        verdicts[result["tensorflow"]] = (
            "error" if "error" in severities else "warning" if severities else None
        )
    return verdicts


def runtime_gpu_verdicts(build: dict[str, Any]) -> dict[str, Any]:
    """`tfgpu check --json`'s `gpu_support` per TensorFlow version of the build side's answer,
    with the variables the kit writes into that version's image
    (tfgpu_kit.matrix.catalog.gpu_facts)."""
    sys.path.insert(0, str(ROOT))
    from tfgpu_kit.matrix import catalog, spec

    loaded = spec.load()
    found: dict[str, Any] = {}
    for result in build.get("results", []):
        version = result["tensorflow"]
        facts = catalog.gpu_facts(loaded, version)
        report = tfgpu_check(
            TFGPU_IMAGE_TF=version,
            TFGPU_IMAGE_GPU_ARCHES=str(facts["arches"] or ""),
            TFGPU_IMAGE_GPU_FAILURES=str(facts["failures"]),
        )
        found[version] = report.get("gpu_support")
    return found


def scrape_metrics() -> dict[str, list[tuple[dict[str, str], float]]]:
    """Start the runtime's metrics endpoint in a child (no TensorFlow) and scrape it once."""
    from prometheus_client.parser import text_string_to_metric_families

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time, tfgpu.act.metrics as m; m.start_from_environment(); time.sleep(60)",
        ],
        env=_runtime_env(TF_GPU_METRICS_PORT=str(port)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                url = f"http://127.0.0.1:{port}/metrics"
                with urllib.request.urlopen(url, timeout=5) as response:
                    text = response.read().decode()
                break
            except OSError:
                if time.monotonic() > deadline or child.poll() is not None:
                    return {}
                time.sleep(0.3)
    finally:
        child.kill()
        child.wait()
    found: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return found


def judge(truth: dict[str, Any], observed: dict[str, Any]) -> list[dict[str, Any]]:
    """Every figure the kit reported against NVML's; one entry per check."""
    checks: list[dict[str, Any]] = []

    def check(name: str, expected: object, got: object) -> None:
        checks.append({"check": name, "ok": expected == got, "expected": expected, "got": got})

    totals_mib = [g["total_bytes"] / MIB for g in truth["gpus"]]
    pct = observed["percent"]
    check("tfgpu check: driver", truth["driver"], (pct.get("driver") or {}).get("version"))
    check("tfgpu check: totals (MiB)", totals_mib, [g["total_mib"] for g in pct.get("gpus") or []])
    check(
        "tfgpu check: TF_GPU_MEM_LIMIT=25% resolves per card",
        [[float(int(t * 25 / 100))] for t in totals_mib],
        (pct.get("plan") or {}).get("gpu_limits_mib"),
    )
    check(
        "tfgpu check: one cap per GPU",
        [[float(1024 * (i + 1))] for i in range(len(totals_mib))],
        (observed["per_gpu"].get("plan") or {}).get("gpu_limits_mib"),
    )
    over = observed["over"]
    refusals = [
        p["what"]
        for p in over.get("problems") or []
        if p.get("severity") == "error" and "TF_GPU_MEM_LIMIT" in p.get("what", "")
    ]
    check(
        "tfgpu check: a cap above GPU 0 is refused, naming the card's size",
        [True],
        [f"{int(totals_mib[0])} MiB" in what for what in refusals],
    )
    build = observed["build_check"]
    check(
        "build.py check (no --driver): the driver NVML reports",
        truth["driver"],
        build.get("driver"),
    )
    for result in build.get("results", []):
        version = result["tensorflow"]
        runtime = observed["runtime_verdicts"].get(version)
        allowed = EXPECTED_SEVERITY.get(result["verdict"], set())
        checks.append(
            {
                "check": f"driver verdict for TensorFlow {version}: build side and runtime agree",
                "ok": runtime in allowed,
                "expected": sorted(str(a) for a in allowed),
                "got": {"build": result["verdict"], "runtime": runtime},
            }
        )
    check(
        "tfgpu check: each GPU's compute capability",
        [g["compute_capability"] for g in truth["gpus"]],
        [g.get("compute_capability") for g in pct.get("gpus") or []],
    )
    check(
        "build.py check (no --gpu-arch): GPU 0's architecture",
        "sm_" + truth["gpus"][0]["compute_capability"].replace(".", ""),
        build.get("gpu_arch"),
    )
    for result in build.get("results", []):
        version = result["tensorflow"]
        support = observed["gpu_verdicts"].get(version) or []
        gpu0: dict[str, Any] = next((s for s in support if s.get("index") == 0), {})
        check(
            f"GPU 0 with TensorFlow {version}: the runtime's kernels and XLA verdicts are the "
            "build side's",
            [(result.get("kernels") or {}).get("status"), (result.get("xla") or {}).get("status")],
            [gpu0.get("kernels"), gpu0.get("xla")],
        )
    metrics = observed["metrics"]
    totals = {
        int(labels["gpu"]): v for labels, v in metrics.get("tfgpu_gpu_memory_total_bytes", [])
    }
    used = {int(labels["gpu"]): v for labels, v in metrics.get("tfgpu_gpu_memory_used_bytes", [])}
    check(
        "metrics: tfgpu_gpu_memory_total_bytes per card",
        {g["index"]: float(g["total_bytes"]) for g in truth["gpus"]},
        totals,
    )
    check(
        "metrics: tfgpu_gpu_memory_used_bytes within each card",
        sorted(totals),
        sorted(i for i, v in used.items() if 0 <= v <= totals.get(i, -1)),
    )
    return checks


def main() -> int:
    missing = [pkg for mod, pkg in NEEDED.items() if importlib.util.find_spec(mod) is None]
    try:
        if missing:
            raise CannotRun(f"missing Python packages: pip install {' '.join(missing)}")
        truth = nvml_truth()
        if not truth["gpus"]:
            raise CannotRun("NVML sees no GPU on this host")
        count = len(truth["gpus"])
        build = build_check()
        observed = {
            "percent": tfgpu_check(TF_GPU_MEM_LIMIT="25%"),
            "per_gpu": tfgpu_check(
                TF_GPU_MEM_LIMIT=",".join(str(1024 * (i + 1)) for i in range(count))
            ),
            "over": tfgpu_check(
                TF_GPU_MEM_LIMIT=str(truth["gpus"][0]["total_bytes"] // MIB + 1024)
            ),
            "build_check": build,
            "runtime_verdicts": runtime_driver_verdicts(truth["driver"], build),
            "gpu_verdicts": runtime_gpu_verdicts(build),
            "metrics": scrape_metrics(),
        }
    except CannotRun as exc:
        print(json.dumps({"ok": False, "cannot_run": str(exc)}, indent=2))
        print(f"nvml_smoke: cannot run: {exc}", file=sys.stderr)
        return 2
    checks = judge(truth, observed)
    ok = all(c["ok"] for c in checks)
    report = {
        "ok": ok,
        "host": platform.node(),
        "python": platform.python_version(),
        "nvml": truth,
        "checks": checks,
    }
    print(json.dumps(report, indent=2))
    for c in checks:
        if not c["ok"]:
            print(
                f"nvml_smoke: WRONG: {c['check']}: expected {c['expected']}, got {c['got']}",
                file=sys.stderr,
            )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
