"""The kit's gpu image, run for real (no GPU here: the CPU paths and the refusals)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.containers.tracked import TrackedContainer

pytestmark = pytest.mark.docker

MARKER = "USER-COMMAND-RAN"

# A user's script, unmodified: it knows nothing about the kit.
CPU_SCRIPT = """\
import tensorflow as tf
print("logical CPUs:", len(tf.config.list_logical_devices("CPU")))
"""

SIGTERM_SCRIPT = """\
import os, signal, sys, time
def stop(signum, frame):
    print("got SIGTERM, shutting down cleanly", flush=True)
    sys.exit(7)
signal.signal(signal.SIGTERM, stop)
print("ready pid", os.getpid(), flush=True)
while True:
    time.sleep(0.1)
"""

# No SIGTERM handler: the default action (die) works only where the script is not PID 1.
NO_HANDLER_SCRIPT = """\
import os, time
print("ready pid", os.getpid(), flush=True)
while True:
    time.sleep(0.1)
"""

# As PID 1 without the entrypoint, with the kit's hook active in the process (TensorFlow
# imported and configured by it), the script's own handler must still get the signal.
HOOKED_SIGTERM_SCRIPT = (
    """\
import tensorflow as tf
import tfgpu._hook
print("hook applied", tfgpu._hook.state["applied"], flush=True)
print("logical CPUs", len(tf.config.list_logical_devices("CPU")), flush=True)
"""
    + SIGTERM_SCRIPT
)


def _script(tmp_path: Path, name: str, text: str) -> dict[str, dict[str, str]]:
    """Mount a script read-only at /work/NAME; readable by any uid."""
    tmp_path.chmod(0o755)
    (tmp_path / name).write_text(text)
    (tmp_path / name).chmod(0o644)
    return {str(tmp_path): {"bind": "/work", "mode": "ro"}}


def test_default_command_starts_and_prints_the_summary(gpu_image: TrackedContainer) -> None:
    out = gpu_image.run_and_wait(timeout=60)
    # tfgpu run's summary goes to stderr, one `tfgpu:` line per fact.
    assert "tfgpu:" in out.stderr
    assert "memory growth on (image default)" in out.stderr
    assert "no GPU" in out.stderr  # the honest warning on a machine without one


def test_tensorflow_runs(gpu_image: TrackedContainer) -> None:
    out = gpu_image.run_and_wait(
        [
            "python",
            "-c",
            "import tensorflow as tf; b = tf.sysconfig.get_build_info();"
            "print('sum', float(tf.reduce_sum(tf.ones([4, 4]))));"
            "print('cuda', b['is_cuda_build'], b['cuda_version'], b['cudnn_version'])",
        ],
        timeout=120,
    )
    assert "sum 16.0" in out.stdout
    # The stand-in holds the real CUDA build of TensorFlow 2.21 (CUDA 12.5, cuDNN 9).
    assert "cuda True 12.5" in out.stdout and out.stdout.strip().endswith("9")


@pytest.mark.parametrize("via", ["entrypoint", "entrypoint-overridden"])
def test_cpu_virtual_devices_reach_an_unmodified_script(
    gpu_image: TrackedContainer, tmp_path: Path, via: str
) -> None:
    volumes = _script(tmp_path, "script.py", CPU_SCRIPT)
    env = {"TF_CPU_VIRTUAL_DEVICES": "2"}
    if via == "entrypoint":
        out = gpu_image.run_and_wait(
            ["python", "/work/script.py"], environment=env, volumes=volumes
        )
    else:  # what a Kubernetes `command:` does: the kit's entrypoint never runs
        out = gpu_image.run_and_wait(
            ["/work/script.py"], entrypoint=["python"], environment=env, volumes=volumes
        )
        assert "tfgpu: memory" not in out.stderr  # no summary: tfgpu run was bypassed
    assert "logical CPUs: 2" in out.stdout


# Every invalid value the runtime refuses, as a user would pass it.
BAD_INPUTS = [
    pytest.param({"TF_GPU_MEM_LIMIT": "lots"}, "TF_GPU_MEM_LIMIT", id="mem-limit-word"),
    pytest.param({"TF_GPU_MEM_LIMIT": "4096,abc"}, "TF_GPU_MEM_LIMIT", id="mem-limit-list"),
    pytest.param({"TF_GPU_MEM_LIMIT": "150%"}, "TF_GPU_MEM_LIMIT", id="mem-limit-percent"),
    pytest.param({"TF_GPU_MEMORY_GROWTH": "maybe"}, "TF_GPU_MEMORY_GROWTH", id="growth"),
    pytest.param({"TF_GPU_VIRTUAL_DEVICES": "big"}, "TF_GPU_VIRTUAL_DEVICES", id="virtual"),
    pytest.param({"TF_CPU_VIRTUAL_DEVICES": "0"}, "TF_CPU_VIRTUAL_DEVICES", id="cpu-zero"),
    pytest.param({"TF_CPU_VIRTUAL_DEVICES": "two"}, "TF_CPU_VIRTUAL_DEVICES", id="cpu-word"),
    pytest.param({"TF_GPU_REQUIRED": "perhaps"}, "TF_GPU_REQUIRED", id="required"),
    pytest.param({"TF_MIXED_PRECISION": "float8"}, "TF_MIXED_PRECISION", id="mixed-precision"),
    pytest.param({"TF_GPU_QUIET": "loud"}, "TF_GPU_QUIET", id="quiet"),
    pytest.param({"TF_GPU_CONFIG": "sometimes"}, "TF_GPU_CONFIG", id="config"),
    pytest.param(
        {"TF_FORCE_GPU_ALLOW_GROWTH": "True"}, "TF_FORCE_GPU_ALLOW_GROWTH", id="native-growth-case"
    ),
    pytest.param({"TF_GPU_ALLOCATOR": "bfc_please"}, "TF_GPU_ALLOCATOR", id="allocator"),
    pytest.param({"CUDA_VISIBLE_DEVICES": "0,0"}, "CUDA_VISIBLE_DEVICES", id="visible-twice"),
    pytest.param(
        {"TF_GPU_MEMORY_GROWTH": "false", "TF_FORCE_GPU_ALLOW_GROWTH": "true"},
        "TF_GPU_MEMORY_GROWTH",
        id="growth-contradiction",
    ),
    pytest.param(
        {"TF_GPU_MEM_LIMIT": "4096", "TF_GPU_VIRTUAL_DEVICES": "2048,2048"},
        "TF_GPU_VIRTUAL_DEVICES",
        id="limit-and-virtual",
    ),
]


@pytest.mark.parametrize(("env", "variable"), BAD_INPUTS)
def test_bad_input_exits_78_and_runs_nothing(
    gpu_image: TrackedContainer, env: dict[str, str], variable: str
) -> None:
    out = gpu_image.run_and_wait(
        ["sh", "-c", f"echo {MARKER}"],
        environment=env,
        expect_exit=78,
        no_errors=False,  # the error message is the point here
        timeout=60,
    )
    assert MARKER not in out.logs
    message = [line for line in out.stderr.splitlines() if variable in line]
    assert message, f"no line names {variable}:\n{out.stderr}"
    assert repr(env[variable]) in message[0] or env[variable] in message[0]


def test_bad_input_fails_at_import_without_the_entrypoint(gpu_image: TrackedContainer) -> None:
    """Kubernetes `command:` bypasses the entrypoint: the hook refuses at import, with the
    entrypoint's contract (the message, exit 78, no traceback through the kit)."""
    out = gpu_image.run_and_wait(
        ["-c", f"import tensorflow; print('{MARKER}')"],
        entrypoint=["python"],
        environment={"TF_GPU_MEM_LIMIT": "lots"},
        expect_exit=78,
        no_errors=False,
    )
    assert MARKER not in out.stdout
    assert "Traceback" not in out.stderr
    assert (
        out.stderr.strip()
        .splitlines()[-1]
        .startswith("tfgpu: error: TF_GPU_MEM_LIMIT='lots' is not valid")
    ), out.stderr


def test_gpu_required_exits_69_with_the_reason(gpu_image: TrackedContainer) -> None:
    out = gpu_image.run_and_wait(
        ["sh", "-c", f"echo {MARKER}"],
        environment={"TF_GPU_REQUIRED": "true"},
        expect_exit=69,
        no_errors=False,
        timeout=60,
    )
    assert MARKER not in out.logs
    assert "GPU" in out.stderr
    # The reason, not just the refusal: here there is no driver at all.
    assert "driver" in out.stderr.lower() or "NVML" in out.stderr


@pytest.mark.parametrize(
    ("via", "script", "code", "said"),
    [
        # tfgpu run is PID 1 and forwards the signal to the script, its child
        ("entrypoint", SIGTERM_SCRIPT, 7, "got SIGTERM, shutting down cleanly"),
        # fails without the kit's init: a script exec'd as PID 1 with no handler ignores it
        ("entrypoint", NO_HANDLER_SCRIPT, 128 + 15, ""),
        # no init at all: the script is PID 1 and its own handler must work with the hook
        (
            "entrypoint-overridden",
            HOOKED_SIGTERM_SCRIPT,
            7,
            "got SIGTERM, shutting down cleanly",
        ),
    ],
    ids=["entrypoint-handler", "entrypoint-no-handler", "entrypoint-overridden-hooked"],
)
def test_docker_stop_reaches_the_users_process(
    gpu_image: TrackedContainer, tmp_path: Path, via: str, script: str, code: int, said: str
) -> None:
    volumes = _script(tmp_path, "serve.py", script)
    environment = {"TF_CPU_VIRTUAL_DEVICES": "2"}
    if via == "entrypoint":
        container = gpu_image.start(
            ["python", "/work/serve.py"], volumes=volumes, environment=environment
        )
    else:
        container = gpu_image.start(
            ["/work/serve.py"], entrypoint=["python"], volumes=volumes, environment=environment
        )
    deadline = time.monotonic() + 120
    while b"ready pid" not in container.logs(stdout=True, stderr=False):
        assert time.monotonic() < deadline, container.logs().decode(errors="replace")
        time.sleep(0.2)
    ready = container.logs(stdout=True, stderr=False).decode()
    pid = int(ready.split("ready pid", 1)[1].split()[0])
    # through the entrypoint the script is tfgpu's child; overridden, nothing is in between
    assert (pid == 1) == (via == "entrypoint-overridden"), ready
    t0 = time.monotonic()
    container.stop(timeout=20)  # SIGTERM, then SIGKILL after 20 s
    seconds = time.monotonic() - t0
    container.reload()
    logs = container.logs().decode(errors="replace")
    assert said in logs
    if via == "entrypoint-overridden":
        assert "hook applied True" in logs and "logical CPUs 2" in logs, logs
    assert container.attrs["State"]["ExitCode"] == code, logs  # not 137 (SIGKILL)
    assert seconds < 5, f"stop took {seconds:.1f}s (SIGKILL comes at 20 s)"


def test_arbitrary_uid_works(gpu_image: TrackedContainer) -> None:
    out = gpu_image.run_and_wait(
        [
            "python",
            "-c",
            "import os, tensorflow as tf; print('uid', os.getuid());"
            "print('sum', float(tf.reduce_sum(tf.ones([2, 2]))))",
        ],
        user="1234:1234",
        environment={"TF_CPU_VIRTUAL_DEVICES": "2"},
        timeout=120,
    )
    assert "uid 1234" in out.stdout and "sum 4.0" in out.stdout


def test_the_images_non_root_user_works(gpu_image: TrackedContainer, image_user: str) -> None:
    out = gpu_image.run_and_wait(
        [
            "python",
            "-c",
            "import os, pwd, tensorflow as tf; print('user', pwd.getpwuid(os.getuid()).pw_name);"
            "print('sum', float(tf.reduce_sum(tf.ones([2, 2]))))",
        ],
        user=image_user,
        timeout=120,
    )
    assert f"user {image_user}" in out.stdout and "sum 4.0" in out.stdout
