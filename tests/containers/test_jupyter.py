"""The gpu-jupyter image: its HEALTHCHECK turns healthy and Jupyter answers on its port; idle
kernels are culled as TFGPU_JUPYTER_CULL_* say, and a bad value stops Jupyter with a message.
Jupyter runs as the image's non-root user, as root with --user 0, and on a read-only root file
system (--read-only --tmpfs /tmp), also as an arbitrary uid."""

from __future__ import annotations

import json
import re
import time
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest

from tests.containers.tracked import TrackedContainer

pytestmark = pytest.mark.docker

PORT = 8888


def test_jupyter_becomes_healthy_and_answers(jupyter_image: TrackedContainer) -> None:
    container = jupyter_image.start(ports={f"{PORT}/tcp": ("127.0.0.1", None)})
    deadline = time.monotonic() + 180
    health = "starting"
    while health != "healthy":
        container.reload()
        state = container.attrs["State"]
        assert state["Status"] == "running", container.logs().decode(errors="replace")
        health = state.get("Health", {}).get("Status", "no HEALTHCHECK")
        assert health in {"starting", "healthy"}, f"health {health}: {state.get('Health')}"
        assert time.monotonic() < deadline, f"not healthy after 180 s: {state.get('Health')}"
        time.sleep(1)
    host_port = container.ports[f"{PORT}/tcp"][0]["HostPort"]
    with urllib.request.urlopen(f"http://127.0.0.1:{host_port}/api", timeout=10) as response:
        assert response.status == 200
        assert "version" in json.loads(response.read())
    # The entrypoint ran in front of Jupyter: the kit's summary is in the log.
    assert "tfgpu:" in container.logs(stdout=False, stderr=True).decode(errors="replace")


# --- idle kernels are culled (tfgpu.jupyter_cull, docs/jupyter.md) -----------------------------

TOKEN = "tfgpu-test-token"  # Jupyter Server reads JUPYTER_TOKEN; the API needs it
CULL_TIMEOUT = 5  # TFGPU_JUPYTER_CULL_IDLE_TIMEOUT of the culling test, seconds

# Live processes whose command line names the kernel (its connection file kernel-ID.json);
# a zombie has an empty cmdline, so a kernel that exited is not counted.
FIND_KERNEL = """
import os, sys
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        with open("/proc/%s/cmdline" % pid, "rb") as f:
            argv = f.read().split(b"\\0")
    except OSError:
        continue
    if int(pid) != os.getpid() and any(sys.argv[1].encode() in a for a in argv):
        print(pid)
"""


class Jupyter:
    """A running gpu-jupyter container and its REST API (token auth)."""

    def __init__(
        self,
        tracked: TrackedContainer,
        command: list[str] | None = None,
        *,
        options: dict[str, Any] | None = None,
        **environment: str,
    ) -> None:
        self.container = tracked.start(
            command,
            ports={f"{PORT}/tcp": ("127.0.0.1", None)},
            environment={"JUPYTER_TOKEN": TOKEN, **environment},
            **(options or {}),
        )
        deadline = time.monotonic() + 120
        while True:
            self.container.reload()
            assert self.container.status == "running", self.logs()
            mapping = self.container.ports.get(f"{PORT}/tcp")
            if mapping:
                self.base = f"http://127.0.0.1:{mapping[0]['HostPort']}"
                try:
                    self.api("GET", "/api")
                    return
                except OSError:
                    pass
            assert time.monotonic() < deadline, f"Jupyter did not answer in 120 s\n{self.logs()}"
            time.sleep(0.5)

    def api(self, method: str, path: str) -> Any:
        request = urllib.request.Request(
            self.base + path,
            method=method,
            headers={"Authorization": f"token {TOKEN}"},
            data=b"{}" if method == "POST" else None,
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    def start_kernel(self) -> str:
        kernel = self.api("POST", "/api/kernels")
        kernel_id = str(kernel["id"])
        assert self.kernel_pids(kernel_id), f"no process for kernel {kernel_id}\n{self.logs()}"
        return kernel_id

    def kernel_ids(self) -> list[str]:
        return [str(kernel["id"]) for kernel in self.api("GET", "/api/kernels")]

    def kernel_pids(self, kernel_id: str) -> list[int]:
        result = self.container.exec_run(["python3", "-c", FIND_KERNEL, kernel_id])
        assert result.exit_code == 0, result.output
        return [int(pid) for pid in result.output.decode().split()]

    def logs(self) -> str:
        return self.container.logs().decode(errors="replace")

    def server_uids(self) -> set[int]:
        """The uids of the processes running Jupyter (by their command line)."""
        result = self.container.exec_run(["python3", "-c", SERVER_UIDS], user="0")
        assert result.exit_code == 0, result.output
        return {int(uid) for uid in result.output.decode().split()}

    def wait_healthy(self, seconds: float = 180) -> None:
        deadline = time.monotonic() + seconds
        while True:
            self.container.reload()
            state = self.container.attrs["State"]
            assert state["Status"] == "running", self.logs()
            health = state.get("Health", {}).get("Status", "no HEALTHCHECK")
            if health == "healthy":
                return
            assert health == "starting", f"health {health}: {state.get('Health')}"
            assert time.monotonic() < deadline, f"not healthy: {state.get('Health')}"
            time.sleep(1)


# The real uid of each process whose command line runs Jupyter (`jupyter-notebook`, …).
SERVER_UIDS = """
import os
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        with open("/proc/%s/cmdline" % pid, "rb") as f:
            argv = f.read().split(b"\\0")
        with open("/proc/%s/status" % pid) as f:
            uid = [line.split()[1] for line in f if line.startswith("Uid:")][0]
    except OSError:
        continue
    if any(b"jupyter" in a for a in argv[:2]):
        print(uid)
"""


def _wait_for(condition: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.5)
    return True


def test_idle_kernel_is_culled_and_its_process_ends(jupyter_image: TrackedContainer) -> None:
    jupyter = Jupyter(
        jupyter_image,
        TFGPU_JUPYTER_CULL_IDLE_TIMEOUT=str(CULL_TIMEOUT),
        TFGPU_JUPYTER_CULL_INTERVAL="1",
    )
    t0 = time.monotonic()
    kernel_id = jupyter.start_kernel()
    assert kernel_id in jupyter.kernel_ids()
    assert _wait_for(lambda: kernel_id not in jupyter.kernel_ids(), 90), (
        f"kernel {kernel_id} still there after 90 s\n{jupyter.logs()}"
    )
    # Gone because it idled past the timeout, and the culler said so (not a crash).
    assert time.monotonic() - t0 >= CULL_TIMEOUT - 1
    logs = jupyter.logs()
    assert f"idle durations > {CULL_TIMEOUT} seconds at 1 second intervals" in logs
    assert re.search(rf"Culling '\w+' kernel '\w+' \({kernel_id}\)", logs), logs
    # ... and its process ended: what held the GPU memory is gone.
    assert _wait_for(lambda: not jupyter.kernel_pids(kernel_id), 15), (
        f"kernel {kernel_id} culled, but its process is still running\n{logs}"
    )


def test_timeout_zero_keeps_idle_kernels(jupyter_image: TrackedContainer) -> None:
    jupyter = Jupyter(
        jupyter_image, TFGPU_JUPYTER_CULL_IDLE_TIMEOUT="0", TFGPU_JUPYTER_CULL_INTERVAL="1"
    )
    kernel_id = jupyter.start_kernel()
    time.sleep(CULL_TIMEOUT + 5)  # the culling test's kernel is gone by now
    assert kernel_id in jupyter.kernel_ids()
    assert jupyter.kernel_pids(kernel_id)
    assert "Culling" not in jupyter.logs()


def test_image_culls_by_default(jupyter_image: TrackedContainer) -> None:
    jupyter = Jupyter(jupyter_image)
    jupyter.start_kernel()  # Jupyter starts its culler with the first kernel
    expected = "Culling kernels with idle durations > 3600 seconds at 300 second intervals"
    assert _wait_for(lambda: expected in jupyter.logs(), 15), jupyter.logs()
    assert "Culling kernels even with connected clients" in jupyter.logs()


def test_bad_cull_setting_stops_jupyter_with_the_kits_message(
    jupyter_image: TrackedContainer,
) -> None:
    outcome = jupyter_image.run_and_wait(
        environment={"TFGPU_JUPYTER_CULL_IDLE_TIMEOUT": "1h"}, expect_exit=78, timeout=120
    )
    assert (
        "tfgpu: error: TFGPU_JUPYTER_CULL_IDLE_TIMEOUT='1h' is not valid (seconds without a "
        "unit, e.g. 1h = 3600): accepted: whole seconds from 0 to 604800 (a week); example: "
        "TFGPU_JUPYTER_CULL_IDLE_TIMEOUT=3600" in outcome.stderr
    ), outcome.logs
    assert "Traceback" not in outcome.logs


# --- who runs Jupyter, and where it writes -----------------------------------------------------

# Jupyter's own command, without --allow-root: what a user passes to run JupyterLab or the like.
OWN_COMMAND = ["jupyter", "notebook", "--ip=0.0.0.0", f"--port={PORT}", "--no-browser"]


def test_jupyter_runs_as_the_non_root_user_by_default(
    jupyter_image: TrackedContainer,
) -> None:
    jupyter = Jupyter(jupyter_image)
    assert jupyter.server_uids() == {1000}, jupyter.logs()
    jupyter.start_kernel()  # the kernel (IPython) writes under the user's HOME
    assert "Running as root" not in jupyter.logs()


@pytest.mark.parametrize("command", [None, OWN_COMMAND], ids=["image-cmd", "own-command"])
def test_jupyter_runs_as_root_with_user_0(
    jupyter_image: TrackedContainer, command: list[str] | None
) -> None:
    """--user 0: Jupyter starts as root, also with a command that lacks --allow-root (the
    kit's Jupyter config allows root only when the server is root)."""
    jupyter = Jupyter(jupyter_image, command, options={"user": "0"})
    assert jupyter.server_uids() == {0}, jupyter.logs()
    jupyter.start_kernel()


@pytest.mark.parametrize("user", [None, "12345:0"], ids=["image-user", "arbitrary-uid"])
def test_jupyter_runs_on_a_read_only_root_file_system(
    jupyter_image: TrackedContainer, user: str | None
) -> None:
    """`docker run --read-only --tmpfs /tmp`: HOME is not writable, so tfgpu run gives the
    command a private one on a tmpfs; Jupyter turns healthy, runs a kernel, and culling still
    works."""
    options: dict[str, Any] = {"read_only": True, "tmpfs": {"/tmp": ""}}
    if user is not None:
        options["user"] = user
    jupyter = Jupyter(
        jupyter_image,
        options=options,
        TFGPU_JUPYTER_CULL_IDLE_TIMEOUT=str(CULL_TIMEOUT),
        TFGPU_JUPYTER_CULL_INTERVAL="1",
    )
    jupyter.wait_healthy()
    uid = 12345 if user else 1000
    assert jupyter.server_uids() == {uid}
    # The image's /tmp is 1777 (were it 0755, Docker 20.10's --tmpfs /tmp would be too, sending
    # the HOME to /dev/shm): the HOME is a new, unpredictable folder under /tmp (tfgpu.machine.home)
    assert re.search(
        rf"the command gets HOME=/tmp/tfgpu-home-{uid}-[0-9a-f]{{16}}\b", jupyter.logs()
    ), jupyter.logs()
    kernel_id = jupyter.start_kernel()
    assert _wait_for(lambda: kernel_id not in jupyter.kernel_ids(), 90), jupyter.logs()
    logs = jupyter.logs()
    assert "Read-only file system" not in logs and "Traceback" not in logs, logs


def test_the_non_root_user_can_save_into_a_new_named_volume(
    jupyter_image: TrackedContainer, docker_client: Any
) -> None:
    """compose.yaml mounts a named volume at /tf/notebooks; a new volume takes the image
    folder's owner and mode, so the image makes that folder writable for any uid."""
    volume = docker_client.volumes.create()
    try:
        outcome = jupyter_image.run_and_wait(
            ["sh", "-c", "touch /tf/notebooks/saved.ipynb && id -u"],
            volumes={volume.name: {"bind": "/tf/notebooks", "mode": "rw"}},
            timeout=60,
        )
        assert outcome.stdout.split()[-1] == "1000", outcome.logs
    finally:
        jupyter_image.remove_all()
        volume.remove(force=True)
