"""The hook with real TensorFlow (tensorflow-cpu 2.21, CPU only) from a real wheel install.

Each test starts a child Python in a throwaway venv holding the built tfgpu wheel. The GPU
path cannot run here; logical CPUs are the GPU-free proof that the hook configures TF.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.runtime.conftest import Venv, clean_env

COUNT_CPUS = "import tensorflow as tf; print(len(tf.config.list_logical_devices('CPU')))"


def test_hook_costs_no_import_of_tensorflow_or_the_kit(wheel_venv: Venv) -> None:
    r = wheel_venv.run(
        "import sys; print(sorted(m for m in sys.modules if m.startswith(('tfgpu', "
        "'tensorflow', 'wrapt'))))",
        clean_env(),
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "['tfgpu', 'tfgpu._hook']"


def test_hook_imports_no_module_python_start_up_does_not(wheel_venv: Venv) -> None:
    """Not even `__future__` (a `from __future__ import` statement imports it: ~0.2 ms of
    the hook's ~1 ms budget, paid by every Python process in the image)."""
    r = wheel_venv.run("import sys; print('__future__' in sys.modules)", clean_env())
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"


@pytest.mark.slow
def test_cpu_split_through_import_tensorflow(wheel_venv: Venv) -> None:
    r = wheel_venv.run(COUNT_CPUS, clean_env(TF_CPU_VIRTUAL_DEVICES="3"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "3"


@pytest.mark.slow
def test_cpu_split_through_import_keras(wheel_venv: Venv) -> None:
    r = wheel_venv.run(
        "import keras, tensorflow as tf; print(len(tf.config.list_logical_devices('CPU')))",
        clean_env(TF_CPU_VIRTUAL_DEVICES="3"),
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "3"


def _interactive(
    venv: Venv, env: dict[str, str], lines: str, *args: str
) -> subprocess.CompletedProcess[str]:
    """`python -i`: the interactive interpreter, reading `lines` as a user would type them."""
    return subprocess.run(
        [venv.python, "-i", *args],
        input=lines,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        cwd=venv.path,
    )


def _kit_internals(stderr: str) -> list[str]:
    """Traceback lines that point into the kit's own files (without the hook's reset of the
    traceback: _hook.py, apply.py, settings.py …)."""
    return [line for line in stderr.splitlines() if "tfgpu" in line and 'File "' in line]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("TF_CPU_VIRTUAL_DEVICES", "three"),
        ("TF_GPU_MEM_LIMIT", "4GB"),
        ("TF_FORCE_GPU_ALLOW_GROWTH", "True"),
        ("TF_GPU_METRICS_PORT", "65536"),
    ],
)
def test_bad_value_exits_78_with_only_the_message(
    wheel_venv: Venv, variable: str, value: str
) -> None:
    """Without the entrypoint (a Kubernetes `command:`), the hook keeps `tfgpu run`'s
    contract: the one-line message, exit 78, no traceback through the kit."""
    r = wheel_venv.run("import tensorflow\nprint('USER CODE RAN')", clean_env(**{variable: value}))
    assert r.returncode == 78, r.stderr
    assert "USER CODE RAN" not in r.stdout
    assert "Traceback" not in r.stderr, r.stderr
    ours = [line for line in r.stderr.splitlines() if "tfgpu" in line]
    assert len(ours) == 1, r.stderr
    assert ours[0].startswith(f"tfgpu: error: {variable}={value!r} is not valid")
    assert f"example: {variable}=" in ours[0]
    assert r.stderr.rstrip().endswith(ours[0])  # the last thing the process said


@pytest.mark.slow
def test_gpu_required_without_a_gpu_exits_69_with_only_the_message(wheel_venv: Venv) -> None:
    r = wheel_venv.run("import tensorflow", clean_env(TF_GPU_REQUIRED="true"))
    assert r.returncode == 69, r.stderr
    assert "Traceback" not in r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("tfgpu: error: TF_GPU_REQUIRED=true, but no usable GPU: ")
    assert "CPU-only build" in last


@pytest.mark.slow
def test_interactive_session_survives_a_bad_value_and_shows_the_message(
    wheel_venv: Venv,
) -> None:
    """The REPL: the import fails with the message (a ValueError), the kit's internal frames
    are not shown, and the session goes on."""
    r = _interactive(
        wheel_venv,
        clean_env(TF_GPU_MEM_LIMIT="lots"),
        "import tensorflow\nprint('STILL ' + 'HERE')\n",
    )
    assert r.returncode == 0, r.stderr
    assert "STILL HERE" in r.stdout
    assert (
        "tfgpu.contract.errors.ConfigError: TF_GPU_MEM_LIMIT='lots' is not valid: accepted: "
        in r.stderr
    )
    # one frame of the kit: the hook's own raise; none of settings.py or apply.py
    [frame] = _kit_internals(r.stderr)
    assert "tfgpu/_hook.py" in frame, r.stderr


@pytest.mark.slow
def test_notebook_kernel_survives_a_bad_value(wheel_venv: Venv) -> None:
    """In a notebook kernel (ipykernel imported; the test stands it in) a cell's import
    raises; the kernel process lives on to run the next cell."""
    r = wheel_venv.run(
        "import sys, traceback, types\n"
        "sys.modules['ipykernel'] = types.ModuleType('ipykernel')\n"
        "try:\n"
        "    import tensorflow\n"
        "except ValueError as e:\n"
        "    frames = traceback.extract_tb(e.__traceback__)\n"
        "    kit = [f.filename.rsplit('/', 1)[-1] for f in frames if 'tfgpu' in f.filename]\n"
        "    print('cell failed:', type(e).__name__, kit)\n"
        "print('next cell runs')\n",
        clean_env(TF_GPU_MEM_LIMIT="lots"),
    )
    assert r.returncode == 0, r.stderr
    # the traceback starts in the hook's frame: no frames of settings.py or apply.py
    assert r.stdout.splitlines() == ["cell failed: ConfigError ['_hook.py']", "next cell runs"]


@pytest.mark.slow
def test_hook_raise_makes_a_script_get_the_exception(wheel_venv: Venv) -> None:
    r = wheel_venv.run(
        "try:\n    import tensorflow\nexcept ValueError as e:\n    print('caught', e.variable)\n",
        clean_env(TF_GPU_MEM_LIMIT="lots", TFGPU_HOOK_RAISE="1"),
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "caught TF_GPU_MEM_LIMIT"


@pytest.mark.slow
def test_a_second_import_after_a_bad_value_is_configured_or_fails_again(wheel_venv: Venv) -> None:
    """A retried `import tensorflow` (a re-run notebook cell, `except ValueError:`) must not
    come back silently unconfigured: with the value still bad it fails again; once fixed in
    os.environ, the configuration is applied."""
    r = _interactive(
        wheel_venv,
        clean_env(TF_CPU_VIRTUAL_DEVICES="three"),
        "",
        "-c",
        "import os\n"
        "for attempt in range(3):\n"
        "    try:\n"
        "        import tensorflow as tf\n"
        "    except ValueError as e:\n"
        "        print('failed', type(e).__name__)\n"
        "        if attempt == 1:\n"
        "            os.environ['TF_CPU_VIRTUAL_DEVICES'] = '3'\n"
        "    else:\n"
        "        print('cpus', len(tf.config.list_logical_devices('CPU')))\n"
        "        break\n",
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:3] == ["failed ConfigError", "failed ConfigError", "cpus 3"]


@pytest.mark.slow
def test_growth_alone_does_not_list_devices_in_real_tensorflow(wheel_venv: Venv) -> None:
    """Listing physical devices runs cuInit on a GPU machine, which breaks CUDA in forked
    children; with growth only (the images' default) the hook sets the native variable and
    leaves TensorFlow's device list uninitialised, as plain TensorFlow does."""
    r = wheel_venv.run(
        "import os, tensorflow as tf, tfgpu._hook as h\n"
        "from tensorflow.python.eager import context\n"
        "print(h.state['applied'], os.environ.get('TF_FORCE_GPU_ALLOW_GROWTH'),\n"
        "      context.context()._physical_devices is None)\n",
        clean_env(TF_GPU_MEMORY_GROWTH="true"),
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True", "true", "True"]


@pytest.mark.slow
def test_off_leaves_tensorflow_untouched(wheel_venv: Venv) -> None:
    r = wheel_venv.run(
        COUNT_CPUS + "; import tfgpu._hook as h; print(h.state)",
        clean_env(TF_GPU_CONFIG="off", TF_CPU_VIRTUAL_DEVICES="3", TF_GPU_MEM_LIMIT="garbage"),
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[0] == "1"
    assert "'installed': False" in r.stdout and "'applied': False" in r.stdout


@pytest.mark.slow
def test_mixed_precision_applies_both_import_orders(wheel_venv: Venv) -> None:
    for code in (
        "import tensorflow as tf; print(tf.keras.mixed_precision.global_policy().name)",
        "import keras; print(keras.mixed_precision.global_policy().name)",
    ):
        r = wheel_venv.run(code, clean_env(TF_MIXED_PRECISION="mixed_float16"))
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip() == "mixed_float16"


@pytest.mark.slow
def test_check_json_with_real_tensorflow(wheel_venv: Venv) -> None:
    r = subprocess.run(
        [wheel_venv.tfgpu, "check", "--json"],
        env=clean_env(TF_CPU_VIRTUAL_DEVICES="2", TF_GPU_MEMORY_GROWTH="true"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    assert set(doc) >= {
        "ok",
        "tfgpu_version",
        "python",
        "tensorflow",
        "libraries",
        "driver",
        "gpus",
        "hook",
        "settings",
        "plan",
        "applied",
        "problems",
    }
    assert doc["ok"] is True
    assert doc["tensorflow"]["version"] == "2.21.0" and doc["tensorflow"]["is_cuda_build"] is False
    assert doc["tensorflow"]["cuda_version"] is None and doc["libraries"] == []
    assert doc["hook"]["installed"] is True and doc["hook"]["pth"].endswith("tfgpu-hook.pth")
    assert doc["hook"]["active"] is True  # it fired in the child's `import tensorflow`
    assert doc["applied"]["logical_cpus"] == ["/device:CPU:0", "/device:CPU:1"]
    assert doc["settings"]["TF_CPU_VIRTUAL_DEVICES"] == {"value": "2", "source": "environment"}
    assert doc["driver"]["found"] is False and doc["problems"][0]["severity"] == "warning"
    plan = doc["plan"]  # resolved as `tfgpu run` resolves it: no GPU here
    assert plan["gpu_limits_mib"] == [] and plan["cpu_devices"] == 2
    assert plan["memory_growth"] is True
    assert plan["env"] == {"TF_FORCE_GPU_ALLOW_GROWTH": "true"}
    text = subprocess.run(
        [wheel_venv.tfgpu, "check"],
        env=clean_env(TF_CPU_VIRTUAL_DEVICES="2", TF_GPU_MEMORY_GROWTH="true"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert text.returncode == 0, text.stdout + text.stderr
    assert (
        "plan: memory growth on (TF_FORCE_GPU_ALLOW_GROWTH=true); 2 logical CPUs\n" in text.stdout
    )


@pytest.mark.slow
def test_check_reports_bad_configuration_with_exit_78(wheel_venv: Venv) -> None:
    r = subprocess.run(
        [wheel_venv.tfgpu, "check", "--json"],
        env=clean_env(TF_GPU_MEM_LIMIT="lots"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 78
    doc = json.loads(r.stdout)
    assert doc["ok"] is False and doc["tensorflow"]["importable"] is True
    assert doc["problems"][0]["what"].startswith("TF_GPU_MEM_LIMIT='lots' is not valid")


@pytest.mark.slow
def test_check_with_gpu_required_reports_the_gpu_once(wheel_venv: Venv) -> None:
    """No GPU here: one error about it, and TensorFlow itself reported as importable (not
    'TensorFlow cannot be imported' because the hook refused the import)."""
    r = subprocess.run(
        [wheel_venv.tfgpu, "check", "--json"],
        env=clean_env(TF_GPU_REQUIRED="true"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 1, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    errors = [p["what"] for p in doc["problems"] if p["severity"] == "error"]
    assert len(errors) == 1 and "cannot be imported" not in errors[0], errors
    assert doc["tensorflow"]["importable"] is True and doc["applied"]["ok"] is True


@pytest.mark.slow
def test_check_child_reports_an_unavailable_gpu_and_still_imports(wheel_venv: Venv) -> None:
    """When only TensorFlow can tell (tensorflow-cpu is a CPU-only build), the child says so
    and imports again without the requirement."""
    from tfgpu.commands.gpu_check import MARK

    r = wheel_venv.run(
        "import runpy; runpy.run_module('tfgpu.commands._gpu_check_child', run_name='__main__')",
        # as gpu_check.run_child starts it: the hook raises there instead of exiting
        clean_env(TF_GPU_REQUIRED="true", TFGPU_HOOK_RAISE="1"),
    )
    assert r.returncode == 0, r.stderr
    [line] = [x for x in r.stdout.splitlines() if x.startswith(MARK)]
    doc = json.loads(line[len(MARK) :])
    assert "CPU-only build" in doc["gpu_unavailable"]
    assert doc["tensorflow"]["importable"] is True and doc["applied"]["ok"] is True


SPAWN = """
import multiprocessing, sys


def child():
    import tensorflow as tf

    print(len(tf.config.list_logical_devices("CPU")), flush=True)


if __name__ == "__main__":
    worker = multiprocessing.get_context("spawn").Process(target=child)
    worker.start()
    worker.join()
    assert "tensorflow" not in sys.modules  # the parent never imported it
    sys.exit(worker.exitcode)
"""


@pytest.mark.slow
def test_hook_fires_in_a_multiprocessing_spawn_child(wheel_venv: Venv, tmp_path: Path) -> None:
    """A spawned worker is a fresh interpreter: the .pth hook runs there too and configures
    the worker's own `import tensorflow` (the parent never imported TensorFlow)."""
    script = tmp_path / "spawn_main.py"
    script.write_text(SPAWN)
    r = subprocess.run(
        [wheel_venv.python, str(script)],
        env=clean_env(TF_CPU_VIRTUAL_DEVICES="2"),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "2"
