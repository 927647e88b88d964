"""The gpu-jupyter image: its HEALTHCHECK turns healthy and Jupyter answers on its port."""

from __future__ import annotations

import json
import time
import urllib.request

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
