"""The preStop hook `build.py k8s` gives the serving Deployment runs in the kit's gpu image as
the kubelet runs it: exec'd in the running container, beside its command, for its full sleep."""

from __future__ import annotations

import time

import pytest
import yaml

from tests.containers.tracked import TrackedContainer
from tests.kit_images import build_py

pytestmark = pytest.mark.docker


def test_prestop_hook_runs_in_the_kit_image(
    gpu_image: TrackedContainer, kit_images: dict[str, str]
) -> None:
    proc = build_py("k8s", "--kind", "deployment", "--image", kit_images["gpu"], timeout=60)
    assert proc.returncode == 0, proc.stderr
    (deployment,) = [doc for doc in yaml.safe_load_all(proc.stdout) if doc]
    (container_spec,) = deployment["spec"]["template"]["spec"]["containers"]
    hook = container_spec["lifecycle"]["preStop"]["exec"]["command"]
    assert hook[0] == "sleep"
    container = gpu_image.start(["sleep", "120"])
    t0 = time.monotonic()
    result = container.exec_run(hook)
    elapsed = time.monotonic() - t0
    assert result.exit_code == 0, result.output
    assert elapsed >= float(hook[1]) - 0.5, f"the hook returned after {elapsed:.1f} s"
