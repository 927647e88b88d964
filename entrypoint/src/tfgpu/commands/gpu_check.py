"""`tfgpu check [--json]`: is the GPU set-up working? The one command a user runs.

Light checks here (settings, NVML, CUDA libraries by ctypes, the hook's .pth); TensorFlow
only in a child Python (`_gpu_check_child`), which imports it, applies the plan for real and
reports the logical devices and their memory. Exit 0 ok, 1 broken, 78 bad configuration.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

from tfgpu import __version__
from tfgpu.commands.summary import describe_plan
from tfgpu.contract.errors import (
    EXIT_BROKEN,
    EXIT_CONFIG,
    EXIT_OK,
    ConfigError,
    GpuUnavailableError,
)
from tfgpu.contract.problems import ERROR, WARNING, Problem
from tfgpu.contract.settings import parse_environment
from tfgpu.machine import gpu_report, interpreter, libs, tegra
from tfgpu.machine.tfbuild import tensorflow_dir
from tfgpu.plan.device_plan import make_plan
from tfgpu.plan.gpu_verdicts import REQUIRED_FIX
from tfgpu.plan.preflight import run_preflight

TYPE_CHECKING = False  # not `from typing import …`: importing typing costs ms at start-up
if TYPE_CHECKING:
    from typing import Any, Dict, List, Mapping, Optional, TextIO

    from tfgpu.contract.check_report import ChildReport, TensorFlowInfo
    from tfgpu.contract.settings import Settings
    from tfgpu.machine.nvml import NvmlReport
    from tfgpu.plan.device_plan import Plan

CHILD_TIMEOUT = 600
NO_GPU_FIX = (
    "start the container with --gpus all (and a GPU build of TensorFlow), or unset TF_GPU_REQUIRED"
)
NOT_ON_GPU = "this TensorFlow will not use the GPU here"
MARK = "TFGPU-CHECK-JSON "  # the child's (_gpu_check_child) report line starts with it


def run_child(environ: Mapping[str, str]) -> ChildReport:
    env = dict(environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    # The hook raises its errors in the child (which reports them) instead of exiting.
    env["TFGPU_HOOK_RAISE"] = "1"
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "tfgpu.commands._gpu_check_child"],
            env=env,
            capture_output=True,
            text=True,
            timeout=CHILD_TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        return {"crash": f"the TensorFlow child did not finish within {CHILD_TIMEOUT} s"}
    for line in proc.stdout.splitlines():
        if line.startswith(MARK):
            found: ChildReport = json.loads(line[len(MARK) :])  # the child's json.dumps
            return found
    tail = " | ".join(proc.stderr.strip().splitlines()[-3:])
    return {"crash": f"the TensorFlow child exited with {proc.returncode}: {tail}"}


def check_libraries(
    build_info: Mapping[str, object], tensorflow: Optional[str], environ: Mapping[str, str]
) -> tuple[List[Dict[str, object]], List[Problem]]:
    """The CUDA/cuDNN libraries the build needs, loaded where TensorFlow's dlopen finds them, and
    an error for each one TensorFlow would not load or would refuse: then it will not use the GPU,
    whatever else is right; or, for a cuDNN of the right major but an older minor, it uses the
    GPU and fails every cuDNN op (libs.cudnn_ops_verdict)."""
    dirs = libs.search_dirs(tensorflow_dir(), environ)
    entries = [
        libs.try_load(name, soname, dirs) for name, soname in libs.needed(build_info, tensorflow)
    ]
    fix = (
        f"install the CUDA libraries of this build: `pip install 'tensorflow[and-cuda]=="
        f"{tensorflow or 'X'}'` (NVIDIA's wheels of one CUDA release, loaded from site-packages/"
        "nvidia), or use an image built by the tfgpu kit, which adds them where the base lacks them"
    )
    # "GPU registered" holds only when every library loads: one missing and TensorFlow skips the
    # GPU, whatever the cuDNN version
    all_loaded = all(lib["loaded"] for lib in entries)
    problems = []
    for lib in entries:
        if not lib["loaded"]:
            reason = (
                f"Could not load dynamic library '{lib['soname']}'; dlerror: {lib['error']}"
                ' (TensorFlow then logs "Cannot dlopen some GPU libraries" and "Skipping'
                ' registering GPU devices")'
            )
            verdict = NOT_ON_GPU
        else:
            refused = libs.version_problem(lib, build_info, tensorflow)
            if refused is None:
                continue
            reason = f"{refused} ({lib['path']})"
            lib["error"] = refused
            # a cuDNN short of the build's minor only: the GPU is used, cuDNN's ops fail
            level = libs.cudnn_ops_verdict(lib["name"], lib["version"], tensorflow)
            verdict = level if level and all_loaded else NOT_ON_GPU
        problems.append(Problem(ERROR, f"{verdict}: {reason}", fix))
    return entries, problems


def _settings_step(
    environ: Mapping[str, str], problems: List[Problem]
) -> tuple[Optional[Settings], Optional[ConfigError]]:
    """The environment, parsed; a bad value is the first problem."""
    try:
        return parse_environment(environ), None
    except ConfigError as e:
        problems.append(
            Problem(ERROR, str(e), f"fix {e.variable}; `tfgpu show` lists every variable")
        )
        return None, e


def _preflight_step(
    settings: Optional[Settings],
    environ: Mapping[str, str],
    report: NvmlReport,
    problems: List[Problem],
    gpu_part: Dict[str, Any],
) -> tuple[Optional[Plan], Optional[ConfigError], bool]:
    """`tfgpu run`'s preflight against the GPUs NVML reports: the plan, a configuration the
    hardware refutes, and whether TF_GPU_REQUIRED=true finds no usable GPU. A GPU that this
    TensorFlow's kernels cannot run on, or are known to fail on, is an error here (a warning at
    `tfgpu run`'s door); `gpu_part` gets each GPU's verdict and the kernel cache."""
    if settings is None or not settings.enabled:
        if not report.found:
            problems.append(Problem(WARNING, f"no GPU: {report.error}"))
        return None, None, False
    try:
        # /dev/shm too: `check` is where a user looks for what is wrong
        preflight = run_preflight(settings, environ, nvml_report=report, shm_path="/dev/shm")
    except ConfigError as e:
        problems.append(Problem(ERROR, str(e), f"fix {e.variable}"))
        return None, e, False
    except GpuUnavailableError as e:
        problems += getattr(e, "problems", [])
        problems.append(Problem(ERROR, e.reason, e.fix or NO_GPU_FIX))
        return make_plan(settings, []), None, True  # what the child still applies: no GPU
    for problem in preflight.arch_problems:
        if problem.fix == REQUIRED_FIX:
            problem.severity = ERROR
    problems += preflight.problems
    gpu_part["support"] = [v.as_json(environ.get("TFGPU_IMAGE_TF", "")) for v in preflight.verdicts]
    gpu_part["notes"] = preflight.notes
    gpu_part["kernel_cache"] = preflight.cache.as_json() if preflight.cache else None
    return preflight.plan, None, False


def _child_step(
    environ: Mapping[str, str],
    config_error: Optional[ConfigError],
    gpu_unavailable: bool,
    child: Optional[ChildReport],
) -> ChildReport:
    """TensorFlow in a child Python, with what is already reported taken out of its way."""
    if child is not None:
        return child
    child_env = dict(environ)
    if config_error is not None:
        # With a bad configuration the hook would fail the import; still report TensorFlow.
        child_env["TF_GPU_CONFIG"] = "off"
    if gpu_unavailable:
        # The hook would refuse `import tensorflow` for the reason already reported; report
        # that once, and TensorFlow itself (it is not broken).
        child_env["TF_GPU_REQUIRED"] = "false"
    return run_child(child_env)


def _tensorflow_step(
    result: ChildReport,
    environ: Mapping[str, str],
    config_error: Optional[ConfigError],
    gpu_unavailable: bool,
    problems: List[Problem],
) -> tuple[TensorFlowInfo, Dict[str, Any]]:
    """What the child found: TensorFlow itself and the settings as applied."""
    if result.get("gpu_unavailable") and not gpu_unavailable:
        problems.append(Problem(ERROR, str(result["gpu_unavailable"]), NO_GPU_FIX))
    tf_json = result.get("tensorflow") or {
        "importable": False,
        "version": None,
        "is_cuda_build": False,
        "cuda_version": None,
        "cudnn_version": None,
        "error": result.get("crash"),
    }
    applied = dict(
        result.get("applied")
        or {"ok": False, "logical_gpus": [], "logical_cpus": [], "error": None}
    )
    if result.get("crash"):
        applied["error"] = result["crash"]
    if not tf_json["importable"]:
        problems.append(
            Problem(
                ERROR, f"TensorFlow cannot be imported: {tf_json['error']}", "see the error above"
            )
        )
    elif config_error is None and not applied.get("ok"):
        problems.append(
            Problem(
                ERROR,
                f"applying the settings in TensorFlow failed: {applied.get('error')}",
                "see the message; `tfgpu show` lists the settings",
            )
        )
    want_tf = environ.get("TFGPU_IMAGE_TF")
    if want_tf and tf_json.get("version") and tf_json["version"] != want_tf:
        problems.append(
            Problem(
                WARNING,
                f"this image was built for TensorFlow {want_tf}, "
                f"but {tf_json['version']} is installed",
            )
        )
    return tf_json, applied


def collect(
    environ: Mapping[str, str], *, child: Optional[ChildReport] = None
) -> tuple[Dict[str, Any], int]:
    """Everything `check` reports, as the JSON of docs/CONTRACTS.md, and the exit code."""
    problems: List[Problem] = []
    settings, config_error = _settings_step(environ, problems)
    report = gpu_report.read(environ)  # on a Jetson, Tegra's facts: no NVML there
    # the plan is resolved against the GPUs NVML reports, as `tfgpu run` does
    gpu_part: Dict[str, Any] = {"support": [], "notes": [], "kernel_cache": None}
    plan, refuted, gpu_unavailable = _preflight_step(settings, environ, report, problems, gpu_part)
    config_error = config_error or refuted
    result = _child_step(environ, config_error, gpu_unavailable, child)
    tf_json, applied = _tensorflow_step(result, environ, config_error, gpu_unavailable, problems)
    build_info = result.get("build_info") or tf_json
    lib_json, lib_problems = check_libraries(build_info, tf_json.get("version"), environ)
    problems += lib_problems

    pth = interpreter.hook_pth()
    doc: Dict[str, Any] = {
        "ok": not any(p.severity == ERROR for p in problems),
        "tfgpu_version": __version__,
        "python": platform.python_version(),
        "tensorflow": tf_json,
        "libraries": lib_json,
        "driver": report.driver_json(),
        "gpus": [g.as_json() for g in report.gpus],
        "gpu_support": gpu_part["support"],
        "kernel_cache": gpu_part["kernel_cache"],
        **tegra.json_part(report),
        "hook": {
            "installed": pth is not None,
            "pth": pth,
            "active": bool(result.get("hook_active")),
        },
        "settings": {k: v.as_json() for k, v in settings.sources.items()} if settings else {},
        "plan": plan.as_json() if plan is not None else None,
        "applied": {
            **{k: applied.get(k) for k in ("ok", "logical_gpus", "logical_cpus", "error")},
            "memory": applied.get("memory", {}),  # not `dict | dict`: Python 3.8 runs this too
        },
        "problems": [p.as_json() for p in problems],
    }
    code = EXIT_OK if doc["ok"] else (EXIT_CONFIG if config_error is not None else EXIT_BROKEN)
    return doc, code


def render(doc: Dict[str, Any], out: TextIO) -> None:
    tf = doc["tensorflow"]
    w = out.write
    w(f"tfgpu {doc['tfgpu_version']}, Python {doc['python']}\n")
    if tf["importable"]:
        build = (
            f"CUDA {tf['cuda_version']}, cuDNN {tf['cudnn_version']}"
            if tf["is_cuda_build"]
            else "CPU-only build"
        )
        w(f"TensorFlow {tf['version']} ({build})\n")
    else:
        w(f"TensorFlow: not importable ({tf['error']})\n")
    for lib in doc["libraries"]:
        if not lib["loaded"]:
            state = "MISSING"
        else:
            version = f" (version {lib['version']})" if lib.get("version") else ""
            refused = ""
            if lib.get("error"):
                level = libs.cudnn_ops_verdict(lib["name"], lib.get("version"), tf.get("version"))
                if not all(other["loaded"] for other in doc["libraries"]):
                    level = None
                refused = f": REFUSED by TensorFlow's version rule ({level or NOT_ON_GPU})"
            state = f"loaded from {lib['path']}{version}{refused}"
        w(f"  {lib['soname']}: {state}\n")
    d = doc["driver"]
    if doc.get("tegra"):  # a Jetson: L4T and the unified memory instead of NVML's driver
        w("".join(line + "\n" for line in tegra.facts_lines(doc["tegra"])))
    else:
        w(
            f"NVIDIA driver: {d['version']} (CUDA {d['cuda_version']})\n"
            if d["found"]
            else f"NVIDIA driver: {d['error']}\n"
        )
    for g in doc["gpus"]:
        cc = (
            f", compute capability {g['compute_capability']}" if g.get("compute_capability") else ""
        )
        w(
            f"  GPU {g['index']}: {g['name']}, {int(g['total_mib'])} MiB total, "
            f"{int(g['free_mib'])} MiB free{cc}\n"
        )
    for v in doc.get("gpu_support") or []:
        w(f"  GPU {v['index']}, {v['summary']}\n")
    if doc.get("kernel_cache"):
        w(f"  {doc['kernel_cache']['summary']}\n")
    h = doc["hook"]
    fired = (
        "fired on import tensorflow" if h["active"] else "did not fire (check applied the settings)"
    )
    w(f"hook: {'installed at ' + h['pth'] if h['installed'] else 'not installed'}; {fired}\n")
    for name, s in doc["settings"].items():
        w(f"  {name}={s['value']!r} ({s['source']})\n")
    if doc.get("plan") is not None:
        w(f"plan: {describe_plan(doc['plan'])}\n")
    a = doc["applied"]
    if a["ok"]:
        w(
            f"applied: logical GPUs {a['logical_gpus'] or 'none'}, logical CPUs "
            f"{a['logical_cpus']}\n"
        )
        for dev, mem in (a.get("memory") or {}).items():
            w(f"  {dev}: {mem}\n")
    for p in doc["problems"]:
        w(f"{p['severity']}: {p['what']}\n" + (f"  fix: {p['fix']}\n" if p["fix"] else ""))
    w("OK: the set-up works\n" if doc["ok"] else "BROKEN: see the errors above\n")


def check(
    as_json: bool = False, environ: Optional[Mapping[str, str]] = None, out: Optional[TextIO] = None
) -> int:
    environ = os.environ if environ is None else environ
    out = sys.stdout if out is None else out
    doc, code = collect(environ)
    if as_json:
        out.write(json.dumps(doc, indent=2) + "\n")
    else:
        render(doc, out)
    return code
