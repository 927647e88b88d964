"""The tf.config stand-in against real TensorFlow: the same calls must give the same outcomes.

Each case runs a list of calls on the stand-in (tests/runtime/tf_standin.py) and, in a child
process, on the tensorflow-cpu 2.21 installed in .venv; return values, exception types and
messages must be equal. tensorflow-cpu has no GPU, so for the GPU rules the child adds GPUs
to the real context's device lists before the calls (`_physical_devices`,
`_visible_device_list`, `_memory_growth_map`: what `Context._initialize_physical_devices`
fills), and TensorFlow's own Python code judges the calls. What it would send to the GPU
runtime is read with `Context._compute_gpu_options()`, which its initialisation calls. No GPU
kernel runs; the C++ GPU side (the allocator and TF_FORCE_GPU_ALLOW_GROWTH) is checked against
its source in the last tests here.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tfgpu.act.apply import configure_tensorflow
from tfgpu.machine import nvml

from tests import cpu_allocator
from tests.runtime.conftest import clean_env
from tests.runtime.tf_standin import GpuAllocator, StandinConfig, allow_growth_value, standin_tf

ROOT = Path(__file__).resolve().parents[2]

Step = tuple[Any, ...]
CPU, GPU0, GPU1, GPU7 = "CPU:0", "GPU:0", "GPU:1", "GPU:7"
INIT = ("list_logical", "CPU")  # initialises the runtime (real TF lists no GPU of the stand-in)

# name: (GPUs added, steps). Steps: (call, device or devices, argument); devices by name.
CASES: dict[str, tuple[int, list[Step]]] = {
    "cpu_configs_take_no_limit_priority_or_ordinal": (
        0,
        [
            ("set_logical", CPU, [{"memory_limit": 5}]),
            ("set_logical", CPU, [{"experimental_priority": 1}]),
            ("set_logical", CPU, [{"experimental_device_ordinal": 1}]),
            ("get_logical", CPU),
        ],
    ),
    "unknown_device_everywhere": (
        0,
        [
            ("set_logical", GPU0, [{"memory_limit": 5}]),
            ("get_logical", GPU0),
            ("set_growth", GPU0, True),
            ("get_growth", GPU0),
            ("set_visible", [GPU0], None),
        ],
    ),
    "growth_on_a_cpu": (
        0,
        [("set_growth", CPU, True), ("set_growth", CPU, False), ("get_growth", CPU)],
    ),
    "cpu_split_then_growth_and_changes_after_init": (
        0,
        [
            ("set_logical", CPU, [{}, {}]),
            ("get_logical", CPU),
            ("set_growth", CPU, True),
            INIT,
            ("set_logical", CPU, [{}, {}]),  # the same list: allowed after init
            ("set_logical", CPU, [{}]),
            ("set_logical", CPU, [{"memory_limit": 3}]),  # validated before the init check
            ("get_logical", CPU),
        ],
    ),
    "empty_cpu_configuration": (0, [("set_logical", CPU, []), ("get_logical", CPU), INIT]),
    "visible_devices_before_and_after_init": (
        0,
        [
            ("get_visible", None),
            ("set_visible", [CPU], "GPU"),  # a CPU is not a GPU
            ("set_visible", [], "GPU"),  # no GPU to hide: no change
            INIT,
            ("set_visible", [CPU], None),  # no change: allowed after init
            ("set_visible", [], None),
            ("get_visible", "CPU"),
        ],
    ),
    "gpu_configs_need_a_limit": (
        1,
        [
            ("set_logical", GPU0, [{}]),
            ("set_logical", GPU0, [{"memory_limit": 1024}]),
            ("set_growth", GPU0, True),
            ("get_logical", GPU0),
            ("get_growth", GPU0),
            ("gpu_options",),
        ],
    ),
    "growth_set_on_one_gpu_only": (2, [("set_growth", GPU0, True), ("gpu_options",), INIT]),
    "growth_false_on_one_gpu_unset_on_the_other": (
        2,
        [("set_growth", GPU1, False), ("gpu_options",), INIT],
    ),
    "growth_on_every_gpu_then_after_init": (
        2,
        [
            ("set_growth", GPU0, True),
            ("set_growth", GPU1, True),
            ("get_growth", GPU1),
            ("gpu_options",),
            INIT,
            ("set_growth", GPU0, True),  # the same value: allowed after init
            ("set_growth", GPU0, False),
            ("set_logical", GPU0, [{"memory_limit": 64}]),
        ],
    ),
    "a_cap_on_one_gpu_drops_growth_on_all": (
        2,
        [
            ("set_growth", GPU0, True),
            ("set_growth", GPU1, True),
            ("set_logical", GPU0, [{"memory_limit": 4096}, {"memory_limit": 2048.5}]),
            ("gpu_options",),
        ],
    ),
    "a_cpu_split_also_drops_the_growth_check": (
        2,
        [("set_logical", CPU, [{}, {}]), ("set_growth", GPU0, True), ("gpu_options",), INIT],
    ),
    "hidden_gpus_are_not_sent": (
        2,
        [
            ("set_visible", [GPU1], "GPU"),
            ("set_growth", GPU1, True),
            ("get_visible", None),
            ("gpu_options",),
            ("set_visible", [GPU7], "GPU"),
        ],
    ),
    "priority_and_ordinal_on_all_or_none": (
        1,
        [
            (
                "set_logical",
                GPU0,
                [{"memory_limit": 1, "experimental_priority": 0}, {"memory_limit": 1}],
            ),
            ("gpu_options",),
            (
                "set_logical",
                GPU0,
                [{"memory_limit": 1, "experimental_device_ordinal": 1}, {"memory_limit": 1}],
            ),
            ("gpu_options",),
            (
                "set_logical",
                GPU0,
                [
                    {
                        "memory_limit": 1,
                        "experimental_priority": -1,
                        "experimental_device_ordinal": 1,
                    },
                    {
                        "memory_limit": 2,
                        "experimental_priority": 0,
                        "experimental_device_ordinal": 0,
                    },
                ],
            ),
            ("gpu_options",),
        ],
    ),
}


def play(
    config: Any,
    device: Callable[[str], Any],
    gpu_options: Callable[[], dict[str, Any]],
    steps: list[Step],
) -> list[list[Any]]:
    """Run `steps` on a tf.config; each outcome is ["ok", value] or [exception type, message],
    JSON-shaped so the real run's outcomes can come back through a pipe."""
    ldc = config.LogicalDeviceConfiguration

    def names(devices: list[Any]) -> list[str]:
        return [d.name for d in devices]

    calls: dict[str, Callable[..., Any]] = {
        "set_logical": lambda d, cs: config.set_logical_device_configuration(
            device(d), [ldc(**c) for c in cs]
        ),
        "get_logical": lambda d: (
            None
            if (cs := config.get_logical_device_configuration(device(d))) is None
            else [list(c) for c in cs]
        ),
        "set_growth": lambda d, v: config.experimental.set_memory_growth(device(d), v),
        "get_growth": lambda d: config.experimental.get_memory_growth(device(d)),
        "set_visible": lambda ds, t: config.set_visible_devices([device(d) for d in ds], t),
        "get_visible": lambda t: names(config.get_visible_devices(t)),
        "list_logical": lambda t: names(config.list_logical_devices(t)),
        "gpu_options": gpu_options,
    }
    out: list[list[Any]] = []
    for call, *args in steps:
        try:
            out.append(["ok", calls[call](*args)])
        except Exception as e:  # the outcome under test
            out.append([type(e).__name__, str(e)])
    return out


def on_standin(gpus: int, steps: list[Step]) -> list[list[Any]]:
    config = StandinConfig(gpus)
    kinds = {d.name: d for d in config.devices}

    def device(name: str) -> Any:
        full = f"/physical_device:{name}"
        return kinds.get(full, type(config.devices[0])(full, name.split(":")[0]))

    return play(config, device, config.gpu_options, steps)


def _on_tensorflow(gpus: int, steps: list[Step]) -> list[list[Any]]:
    """In a fresh (forked) process: real tf.config with `gpus` GPUs added to its lists."""
    import tensorflow as tf  # only in the child
    from tensorflow.python.eager import context

    ctx = context.context()
    ctx._initialize_physical_devices()
    added = [tf.config.PhysicalDevice(f"/physical_device:GPU:{i}", "GPU") for i in range(gpus)]
    ctx._physical_devices += added
    ctx._visible_device_list += added
    ctx._memory_growth_map.update(dict.fromkeys(added))

    def device(name: str) -> Any:
        return tf.config.PhysicalDevice(f"/physical_device:{name}", name.split(":")[0])

    def gpu_options() -> dict[str, Any]:
        o = ctx._compute_gpu_options()
        return {
            "allow_growth": o.allow_growth,
            "visible_device_list": o.visible_device_list,
            "virtual_devices": [
                {
                    "memory_limit_mb": list(v.memory_limit_mb),
                    "priority": list(v.priority),
                    "device_ordinal": list(v.device_ordinal),
                }
                for v in o.experimental.virtual_devices
            ],
        }

    return play(tf.config, device, gpu_options, steps)


def real_main() -> None:
    """The child: import TensorFlow once, then each case in a forked process of its own, so
    each starts with an uninitialised runtime. Prints {case: outcomes} as JSON."""
    import tensorflow  # noqa: F401 (imported once, before the forks)

    results: dict[str, Any] = {}
    for name, (gpus, steps) in CASES.items():
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read)
            os.write(write, json.dumps(_on_tensorflow(gpus, steps)).encode())
            os._exit(0)
        os.close(write)
        with os.fdopen(read, "rb") as pipe:
            data = pipe.read()
        _, status = os.waitpid(pid, 0)
        if status != 0 or not data:
            raise SystemExit(f"case {name}: the forked child failed (wait status {status})")
        results[name] = json.loads(data)
    print(json.dumps(results))


@pytest.fixture(scope="module")
def real_outcomes() -> dict[str, list[list[Any]]]:
    code = "from tests.runtime.test_standin_likeness import real_main; real_main()"
    r = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-4000:]
    outcomes: dict[str, list[list[Any]]] = json.loads(r.stdout.strip().splitlines()[-1])
    return outcomes


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_standin_gives_tensorflows_outcomes(
    case: str, real_outcomes: dict[str, list[list[Any]]]
) -> None:
    gpus, steps = CASES[case]
    assert on_standin(gpus, steps) == real_outcomes[case]


@pytest.mark.slow
def test_the_cases_reach_every_rule(real_outcomes: dict[str, list[list[Any]]]) -> None:
    """Equal outcomes prove a rule only if a case breaks it: every error the stand-in models
    must be among real TensorFlow's outcomes."""
    seen = {message for run in real_outcomes.values() for kind, message in run if kind != "ok"}
    modelled = [
        "Setting memory limit on CPU virtual devices is currently not supported",
        "Setting experimental_priority on CPU virtual  devices is currently not supported",
        "Setting experimental_device_ordinal on CPU virtual  devices is currently not supported",
        "Setting memory limit is required for GPU virtual devices",
        "Virtual devices cannot be modified after being initialized",
        "Cannot set memory growth on device when virtual devices configured",
        "Cannot set memory growth on non-GPU and non-Pluggable devices",
        "Physical devices cannot be modified after being initialized",
        "Visible devices cannot be modified after being initialized",
        "Memory growth cannot differ between GPU devices",
        "priority must be specified for all virtual devices",
        "device_ordinals must be specified for all virtual devices",
        "Unrecognized device: PhysicalDevice(name='/physical_device:GPU:0', device_type='GPU')",
        "PhysicalDevice(name='/physical_device:CPU:0', device_type='CPU')",  # get_memory_growth
        "No CPU devices are available in this process",
    ]
    assert [m for m in modelled if m not in seen] == []


# --- TF_FORCE_GPU_ALLOW_GROWTH: what the GPU allocator does with it (C++, no GPU here) --------
# Source: tensorflow/tensorflow tensorflow/core/common_runtime/gpu/gpu_bfc_allocator.cc,
# GetAllowGrowthValue; the value is read by each GPU BFC allocator, one per logical GPU
# (gpu_process_state.cc, GPUProcessState::GetGPUAllocator).


@pytest.mark.parametrize(
    ("value", "configured", "growth", "logged"),
    [
        (None, False, False, None),
        (None, True, True, None),
        ("true", False, True, "W Overriding"),
        ("true", True, True, None),
        ("false", True, False, "W Overriding"),
        ("false", False, False, None),
        ("True", False, False, "E The TF_FORCE_GPU_ALLOW_GROWTH environment variable is set but"),
        ("1", True, True, "Using original config value of 1."),
        ("", False, False, 'could not be parsed: "". Valid values are "true" or "false".'),
    ],
)
def test_force_allow_growth_overrides_only_with_true_or_false(
    value: str | None, configured: bool, growth: bool, logged: str | None
) -> None:
    environ = {} if value is None else {"TF_FORCE_GPU_ALLOW_GROWTH": value}
    got, line = allow_growth_value(configured, environ)
    assert got is growth
    assert (line is None) if logged is None else (line is not None and logged in line)


def configured_by_the_kit(environ: dict[str, str]) -> StandinConfig:
    """configure_tensorflow on a 2-GPU stand-in, then the runtime initialised with the
    environment the kit leaves (TF_FORCE_GPU_ALLOW_GROWTH is set in os.environ by the hook)."""
    tf = standin_tf(gpus=2)
    out: dict[str, str] = {}
    configure_tensorflow(
        tf, environ, env_out=out, stderr=io.StringIO(), nvml_query=lambda: nvml.NvmlReport()
    )
    config: StandinConfig = tf.config
    config.environ = {**environ, **out}
    config.list_logical_devices()
    return config


def test_cap_plus_growth_is_the_native_variable_inside_each_capped_device() -> None:
    """The kit's claim: TF_GPU_MEM_LIMIT with TF_GPU_MEMORY_GROWTH gives each logical GPU an
    allocator capped at the limit that grows on demand. set_memory_growth cannot do it (a
    logical configuration drops growth); the variable, read per allocator, can."""
    config = configured_by_the_kit({"TF_GPU_MEM_LIMIT": "4096", "TF_GPU_MEMORY_GROWTH": "true"})
    assert config.gpu_options()["allow_growth"] is False  # what tf.config alone would give
    assert config.allocators == [
        GpuAllocator("/device:GPU:0", 4096, True),
        GpuAllocator("/device:GPU:1", 4096, True),
    ]
    assert all(line.startswith("W Overriding orig_value setting") for line in config.log)


def test_cap_alone_preallocates_up_to_the_cap() -> None:
    config = configured_by_the_kit({"TF_GPU_MEM_LIMIT": "4096"})
    assert [(a.memory_limit_mb, a.allow_growth) for a in config.allocators] == [(4096, False)] * 2
    assert config.log == []


def test_a_bad_native_value_is_logged_and_ignored_by_tensorflow() -> None:
    """What TensorFlow alone does with TF_FORCE_GPU_ALLOW_GROWTH=True (the kit refuses it
    earlier: tests/runtime/test_hook_real_tf.py): one ERROR per allocator, growth unchanged."""
    config = StandinConfig(gpus=2, environ={"TF_FORCE_GPU_ALLOW_GROWTH": "True"})
    config.list_logical_devices()
    assert [a.allow_growth for a in config.allocators] == [False, False]
    assert len(config.log) == 2 and all(line.startswith("E ") for line in config.log)


# --- get_memory_info: the stand-in against real TensorFlow, with the CPU allocator's statistics
# kept and not kept (TensorFlow's own switches, tests/cpu_allocator.py), on any host -----------

MEMORY_INFO_CHILD = """
import json, tensorflow as tf
tf.constant(1.0)  # the runtime is up
out = []
for name in ('/device:CPU:0', 'CPU:0', 'GPU:0'):
    try:
        out.append(['ok', sorted(tf.config.experimental.get_memory_info(name))])
    except Exception as e:
        out.append([type(e).__name__, str(e)])
print(json.dumps(out))
"""


def _memory_info_outcomes(config: StandinConfig) -> list[list[Any]]:
    out: list[list[Any]] = []
    for name in ("/device:CPU:0", "CPU:0", "GPU:0"):
        try:
            out.append(["ok", sorted(config.get_memory_info(name))])
        except ValueError as e:
            out.append([type(e).__name__, str(e)])
    return out


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(cpu_allocator.KINDS))
def test_get_memory_info_matches_tensorflow_with_and_without_cpu_statistics(kind: str) -> None:
    """The switches give the allocator they claim on this host (else the metrics tests that
    rely on them prove nothing), and the stand-in answers as TensorFlow does in each case."""
    r = subprocess.run(
        [sys.executable, "-c", MEMORY_INFO_CHILD],
        env=clean_env(**cpu_allocator.KINDS[kind]),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    real = json.loads(r.stdout.strip().splitlines()[-1])
    assert real == _memory_info_outcomes(StandinConfig(0, cpu_stats=kind == "stats"))
    assert (real[0][0] == "ok") == (kind == "stats"), real
